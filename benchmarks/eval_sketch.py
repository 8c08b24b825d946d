"""Verified mode's precision, recall and F1 by stored sketch size (permutations x bits) and candidates.

Run from the repository root::

    python -m benchmarks.eval_sketch [--perms 256,512,1024] [--bits 8] [--ks 3] [--seeds 0,1,2,3]
                                     [--bands 8x4] [--odd 1008] [--oph] [--edits] [--long] [--cost]
                                     [--cap 64] [--json FILE]

The quality targets of verified mode (F1 >= 0.97 at Jaccard >= 0.8 over the evaluation corpus, >= 0.96
for English and Chinese each, precision >= 0.95) against the two parts of verified mode: the candidate
step (SimHash within k: every pair of the corpus within k, as any exact layout finds it; with --bands,
also every pair whose sketches agree on all values of one LSH band, as the band tables of a verified
index find it) and the confirmation (the stored sketch's estimate >= --cut, 0.8 by default). The truth
is the exact Jaccard of the word 3-shingle sets. Needs only the library and
benchmarks/data/eval_corpus.jsonl.gz (no server).

The stored sketch is b-bit: the low b bits (--bits, any of 1, 2, 4, 8) of each of the MinHasher's
8-bit values, compared by the b-bit estimator J = (agreement - C) / (1 - C), C = 2**-b the chance that
two unrelated values share their b bits (Li and König, WWW 2010; the C measured on unrelated documents
is printed beside it). Band tables are keyed by the full 8-bit values, as a verified index keys them:
only the stored sketch is cut. Each seed's sketches are made once at the largest --perms; the smaller
sizes are their first values (the same estimator over fewer permutations). With --oph the same table is
also made for one-permutation hashing (one hash per shingle, bins of the hash's top bits, empty bins
filled from the nearest non-empty bin in a per-bin random direction: Shrivastava and Li, ICML 2014),
which costs one hash per shingle instead of one per shingle and permutation. With --odd, odd sketches
of each document's whole shingle set of those bit sizes, with the set's size (2 bytes), confirm too
(`odd_estimates`); with --sample LIMIT also odd sketches of at most LIMIT shingles a document, longer
ones sampled (`sampled_estimates`). Every sketch confirms the same candidates (k, then MinHash bands).
"exact" rows confirm each candidate by its true Jaccard: the ceiling the candidate step allows. --edits
scores one-word edits of real text, --long odd sketches of long documents (simulated sets), --cost the
time to sketch a text.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks import articles as article_texts
from benchmarks import corpus
from simhash_redis.fingerprinting import MinHasher, Scheme
from simhash_redis.fingerprinting.hashing import mix
from simhash_redis.fingerprinting.minhash import shingle_hashes
from simhash_redis.fingerprinting.tokens import tokenize
from simhash_redis.tools.evaluation import hamming_pairs, jaccard_join, load_corpus, shingle_sets

_CORPUS = Path(__file__).resolve().parent / "data" / "eval_corpus.jsonl.gz"
_THRESHOLD = 0.8
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Candidate pairs compared per numpy step (bounds memory to pairs x permutations bytes).
_CHUNK = 8192

_U8 = npt.NDArray[np.uint8]
_I64 = npt.NDArray[np.int64]


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def _shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        count, rows = (int(x) for x in part.split("x"))
        out.append((count, rows))
    return out


def _f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    return precision, recall, 2 * precision * recall / max(1e-12, precision + recall)


def _banded(values: _U8, count: int, rows: int) -> dict[tuple[int, int], int]:
    """The pairs (i < j) whose full 8-bit values agree on every value of at least one band, each with
    the number of bands they agree on."""
    pairs: dict[tuple[int, int], int] = {}
    for band in range(count):
        groups: dict[bytes, list[int]] = {}
        for i, row in enumerate(values[:, band * rows : (band + 1) * rows]):
            groups.setdefault(row.tobytes(), []).append(i)
        for members in groups.values():
            if len(members) > 1:
                for pair in itertools.combinations(members, 2):
                    pairs[pair] = pairs.get(pair, 0) + 1
    return pairs


def _capped(
    banded: dict[tuple[int, int], int], fps: list[int], cap: int, tabled: set[tuple[int, int]]
) -> set[tuple[int, int]]:
    """The band pairs a lookup bounded to `cap` band candidates verifies (`VerifiedIndex`'s
    max_candidates): each document's candidates outside its table hits ranked by the bands shared, then
    Hamming distance, then position; a pair is verified if either document's lookup keeps it."""
    of: dict[int, list[tuple[int, int, int]]] = {}
    for (i, j), shared in banded.items():
        if (i, j) in tabled:
            continue
        d = (fps[i] ^ fps[j]).bit_count()
        of.setdefault(i, []).append((-shared, d, j))
        of.setdefault(j, []).append((-shared, d, i))
    kept: set[tuple[int, int]] = set()
    for i, ranked in of.items():
        for _, _, j in sorted(ranked)[:cap]:
            kept.add((min(i, j), max(i, j)))
    return kept


def estimates(values: _U8, ci: _I64, cj: _I64, perms: int, bits: int) -> npt.NDArray[np.float64]:
    """The b-bit estimate of each candidate pair from the low `bits` bits of its first `perms` values."""
    mask = np.uint8((1 << bits) - 1)
    chance = 2.0**-bits
    out = np.empty(len(ci), dtype=np.float64)
    for start in range(0, len(ci), _CHUNK):
        a = values[ci[start : start + _CHUNK], :perms]
        b = values[cj[start : start + _CHUNK], :perms]
        agree = (((a ^ b) & mask) == 0).mean(axis=1)
        out[start : start + _CHUNK] = (agree - chance) / (1.0 - chance)
    return out


def measured_chance(values: _U8, bits: int, seed: int, pairs: int = 4000) -> float:
    """How often the low `bits` bits of two unrelated documents' values agree (random pairs)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(values), size=pairs)
    b = rng.integers(0, len(values), size=pairs)
    keep = a != b
    mask = np.uint8((1 << bits) - 1)
    return float((((values[a[keep]] ^ values[b[keep]]) & mask) == 0).mean())


def oph_values(tokens: list[list[str]], bins: int, seed: int) -> _U8:
    """One-permutation hashing with densification: 8-bit values of `bins` bins per document.

    Args:
        tokens: each document's tokens.
        bins: a power of two.
        seed: the seed of the shingle hashes and of the densification's directions.
    """
    shift = np.uint64(64 - (bins.bit_length() - 1))
    rng = np.random.default_rng(seed + 7919)
    leftwards = rng.integers(0, 2, size=bins).astype(bool)
    salt = np.uint64(int(rng.integers(0, 1 << 63)))
    positions = np.arange(bins)
    out = np.zeros((len(tokens), bins), dtype=np.uint8)
    for row, doc in enumerate(tokens):
        hashes = shingle_hashes(doc, 3, seed)
        if not len(hashes):
            continue
        h = mix(hashes ^ salt, np.empty_like(hashes))
        h.sort()
        which = (h >> shift).astype(np.int64)
        filled, first = np.unique(which, return_index=True)
        mins = np.zeros(bins, dtype=np.uint64)
        mins[filled] = h[first]
        # Nearest filled bin to the right (circular) and to the left, and how far each is.
        right = filled[np.searchsorted(filled, positions) % len(filled)]
        left = filled[(np.searchsorted(filled, positions, side="right") - 1) % len(filled)]
        donor = np.where(leftwards, left, right)
        distance = np.abs(positions - donor).astype(np.uint64)
        value = mins[donor] + distance * _GOLDEN  # a copy made from d bins away differs from a d'-copy
        top = mix(value, np.empty_like(value)) >> np.uint64(56)
        out[row] = top.astype(np.uint8)
    return out


def odd_sketches(hashes: list[npt.NDArray[np.uint64]], bits: int, seed: int) -> _U8:
    """Odd sketches of whole shingle sets: bit i is the parity of the shingles hashed to i (packed).

    Args:
        hashes: each document's distinct shingle hashes.
        bits: sketch bits (any size; one hash per shingle, taken modulo it).
        seed: salts the shingle hashes (a sketch seed).
    """
    salt = np.uint64((0x2545F4914F6CDD1D * (seed + 1)) % (1 << 64))
    parity = np.zeros((len(hashes), bits), dtype=np.uint8)
    for row, h in enumerate(hashes):
        if len(h):
            slots = (mix(h ^ salt, np.empty_like(h)) % np.uint64(bits)).astype(np.int64)
            parity[row] = np.bincount(slots, minlength=bits) & 1
    return np.packbits(parity, axis=1)


def odd_estimates(
    packed: _U8, sizes: npt.NDArray[np.float64], ci: _I64, cj: _I64, bits: int
) -> npt.NDArray[np.float64]:
    """Jaccard from two odd sketches and the set sizes (Mitzenmacher, Pagh and Pham, WWW 2014).

    The XOR of two odd sketches is the odd sketch of the symmetric difference D; z of its `bits` bits
    set gives D = -bits/2 * ln(1 - 2z/bits), rounded to the nearest z + 2c (c pairs of differing
    shingles cancelled in a bit), and J = (|A| + |B| - D) / (|A| + |B| + D).
    """
    out = np.empty(len(ci), dtype=np.float64)
    for start in range(0, len(ci), _CHUNK):
        a, b = ci[start : start + _CHUNK], cj[start : start + _CHUNK]
        z = np.unpackbits(packed[a] ^ packed[b], axis=1, count=bits).sum(axis=1)
        filled = np.minimum(2.0 * z / bits, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            expected = -(bits / 2) * np.log(1.0 - filled)  # inf when saturated: never confirmed
            # Rounded to z plus an even number (the pairs cancelled), as the library's estimator.
            delta = z + 2 * np.floor((expected - z) / 2 + 0.5)
            total = sizes[a] + sizes[b]
            out[start : start + _CHUNK] = np.nan_to_num(np.clip((total - delta) / (total + delta), 0.0, 1.0))
    return out


def sampled_estimates(
    hashes: list[npt.NDArray[np.uint64]], bits: int, seed: int, limit: int, ci: _I64, cj: _I64
) -> npt.NDArray[np.float64]:
    """Odd-sketch estimates with long documents sampled: a document's level L is the smallest that keeps
    at most `limit` of its shingles (those whose salted hash is below 2**64 / 2**L), and a pair is
    compared at the larger of its two levels (where the stored one of the two sits, at worst)."""
    salt = np.uint64((0x9E3779B97F4A7C15 * (seed + 3)) % (1 << 64))
    keys = [mix(h ^ salt, np.empty_like(h)) for h in hashes]

    def kept(key: npt.NDArray[np.uint64], level: int) -> npt.NDArray[np.bool_]:
        return key < np.uint64((1 << 64) >> level) if level else np.ones(len(key), dtype=bool)

    levels = np.array(
        [next(level for level in range(64) if int(kept(key, level).sum()) <= limit) for key in keys]
    )
    pair_levels = np.maximum(levels[ci], levels[cj])
    out = np.empty(len(ci), dtype=np.float64)
    for level in np.unique(pair_levels).tolist():
        chosen = [h[kept(key, level)] for h, key in zip(hashes, keys, strict=True)]
        sizes = np.array([len(h) for h in chosen], dtype=np.float64)
        at = pair_levels == level
        out[at] = odd_estimates(odd_sketches(chosen, bits, seed), sizes, ci[at], cj[at], bits)
    return out


def long_sets(sizes: list[int], bits: list[int], trials: int = 400) -> None:
    """How often a pair of sets of `size` shingles at a given Jaccard is confirmed, by sketch.

    Odd sketches lose precision as the symmetric difference nears their size; MinHash's error does not
    depend on the sets' size. Random 64-bit shingle hashes; MinHash 1,024 x 8 bits drawn as binomials.
    "sampled" rows sketch only the shingles whose hash is below 2**64 / 2**L, L the smallest level that
    leaves at most 1,024 of the stored set's shingles (both sets at the stored set's level: a query has
    its whole set and can sketch it at a stored document's level).
    """
    rng = np.random.default_rng(5)
    levels = (0.74, 0.77, 0.83, 0.86)
    print(f"confirmed (estimate >= {_THRESHOLD}) out of {trials} pairs, by set size and true Jaccard")
    print(f"{'shingles':>8} {'sketch':>18}  " + "  ".join(f"J={j:.2f}" for j in levels))
    for size in sizes:
        cells: dict[str, list[float]] = {f"odd {b} bits": [] for b in bits}
        cells.update({f"odd {b} sampled": [] for b in bits})
        depth = max(0, math.ceil(math.log2(size / 1024)))
        cells["minhash 1024 x 8"] = []
        for level in levels:
            swap = round(size * (1 - level) / (1 + level))
            for b in bits:
                hits = 0
                for _ in range(trials):
                    shared = rng.integers(0, 1 << 63, size=size + swap, dtype=np.uint64)
                    a, b_set = shared[:size], shared[swap:]
                    packed = odd_sketches([a, b_set], b, 0)
                    est = odd_estimates(
                        packed, np.array([size, size], dtype=np.float64), np.array([0]), np.array([1]), b
                    )
                    hits += int(est[0] >= _THRESHOLD)
                cells[f"odd {b} bits"].append(hits / trials)
                hits = 0
                for _ in range(trials):
                    shared = rng.integers(0, 1 << 63, size=size + swap, dtype=np.uint64)
                    kept = [
                        part[part < np.uint64((1 << 63) >> depth)] for part in (shared[:size], shared[swap:])
                    ]
                    packed = odd_sketches(kept, b, 0)
                    counted = np.array([len(part) for part in kept], dtype=np.float64)
                    est = odd_estimates(packed, counted, np.array([0]), np.array([1]), b)
                    hits += int(est[0] >= _THRESHOLD)
                cells[f"odd {b} sampled"].append(hits / trials)
            truth = (size - swap) / (size + swap)
            chance = 2.0**-8
            agree = rng.binomial(1024, chance + (1 - chance) * truth, size=trials) / 1024
            cells["minhash 1024 x 8"].append(float(((agree - chance) / (1 - chance) >= _THRESHOLD).mean()))
        for name, values in cells.items():
            print(f"{size:>8} {name:>18}  " + "  ".join(f"{v:6.3f}" for v in values))


def edits(articles: int = 300, trials: int = 5, bits: int = 1008) -> None:
    """One-word edits of real text found (a candidate, then confirmed), by stored sketch.

    Articles as `benchmarks.articles` cuts them from the corpus's text (lengths in the library's
    tokens); each trial replaces one real word by a different word of the same text. A pair is a
    candidate within k = 3 or when one band of 8 x 4 of the full 8-bit values agrees, then confirmed by
    each sketch's estimate >= 0.8.
    """
    rng = random.Random(3)
    scheme = Scheme()
    kinds = {"minhash 1024 x 8": (1024, 8), "minhash 2048 x 1": (2048, 1)}
    hashers = {name: MinHasher(num_perm=perms) for name, (perms, _) in kinds.items()}
    print(
        f"one-word edits found, {articles} articles x {trials} edits (k = 3 or a band of 8 x 4, then >= 0.8)"
    )
    for lang, low, high in (("en", 250, 400), ("zh", 500, 800), ("en", 40, 100)):
        found: dict[str, int] = {name: 0 for name in [*kinds, f"odd {bits}", "candidates"]}
        total = 0
        for article in article_texts.cut(lang, articles, low, high, rng):
            original = article.text
            words = article_texts.vocabulary([article])
            for _ in range(trials):
                text = article_texts.edit(article, words, rng)
                near = bin(scheme.fingerprint(original) ^ scheme.fingerprint(text)).count("1") <= 3
                total += 1
                pair = [original, text]
                values = {
                    name: np.frombuffer(b"".join(h.sketch_many(pair)), np.uint8).reshape(2, -1)
                    for name, h in hashers.items()
                }
                full = values["minhash 1024 x 8"]
                same = (full[0, :32] == full[1, :32]).reshape(8, 4).all(axis=1).any()
                if not (near or same):
                    continue
                found["candidates"] += 1
                one, two = np.array([0]), np.array([1])
                for name, (perms, b) in kinds.items():
                    found[name] += int(estimates(values[name], one, two, perms, b)[0] >= _THRESHOLD)
                hashes = [shingle_hashes(tokenize(t), 3, 0) for t in pair]
                sizes = np.array([len(h) for h in hashes], dtype=np.float64)
                estimate = odd_estimates(odd_sketches(hashes, bits, 0), sizes, one, two, bits)[0]
                found[f"odd {bits}"] += int(estimate >= _THRESHOLD)
        shares = ", ".join(f"{name} {count / total:.3f}" for name, count in found.items())
        print(f"  {lang} {low}-{high} tokens: {shares}")


def compute_cost(rounds: int = 3) -> None:
    """Time to sketch a 3.5 KB text, numpy engines both: 1,024-permutation MinHash (today's sketch) against
    the 32 permutations the band tables need and a 1,008-bit odd sketch (best of `rounds`, same run)."""
    texts = corpus.documents("en", 300) + corpus.documents("zh", 200)
    hashes = [shingle_hashes(tokenize(text), 3, 0) for text in texts]
    today, bands = MinHasher(num_perm=1024), MinHasher(num_perm=32)
    ways: dict[str, Any] = {
        "MinHash 1,024 x 8": lambda h: today.sketch_of_hashes(h),
        "MinHash 32 (bands) + odd 1,008 bits": lambda h: (
            bands.sketch_of_hashes(h),
            odd_sketches([h], 1008, 0),
        ),
    }
    mean = np.mean([len(h) for h in hashes])
    for name, way in ways.items():
        best = min(_timed(way, hashes) for _ in range(rounds))
        print(f"  {name}: {best / len(hashes) * 1e6:.0f} us a text ({mean:.0f} shingles on average)")


def _timed(way: Any, hashes: list[npt.NDArray[np.uint64]]) -> float:
    start = time.perf_counter()
    for h in hashes:
        way(h)
    return time.perf_counter() - start


def _scored(ci: _I64, cj: _I64, keep: npt.NDArray[np.bool_], positives: set[tuple[int, int]]) -> list[int]:
    """[true positives, false positives, false negatives] of the candidates kept."""
    found = set(zip(ci[keep].tolist(), cj[keep].tolist(), strict=True))
    tp = len(found & positives)
    return [tp, len(found) - tp, len(positives) - tp]


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Every (kind, perms, bits, bands, k, seed, lang) -> [tp, fp, fn], and the measured chances."""
    docs = load_corpus(_CORPUS)
    counts: dict[str, list[int]] = {}
    chances: dict[str, list[float]] = {}
    largest = max(args.perms)
    for lang in sorted({doc.lang for doc in docs}):
        group = [doc for doc in docs if doc.lang == lang]
        tokens = [tokenize(doc.text) for doc in group]
        sets = shingle_sets(tokens, 3)
        truth = jaccard_join(sets, _THRESHOLD)
        positives = set(zip(truth.i.tolist(), truth.j.tolist(), strict=True))
        fps = Scheme().fingerprint_many([doc.text for doc in group])
        hamming = {}
        for k in args.ks:
            hi, hj, _ = hamming_pairs(fps, 64, k)
            hamming[k] = set(zip(hi.tolist(), hj.tolist(), strict=True))
        for seed in args.seeds:
            sketches = MinHasher(num_perm=largest, seed=seed).sketch_many(tokens)
            values = np.frombuffer(b"".join(sketches), dtype=np.uint8).reshape(len(group), largest)
            # Each kind's stored values by size: MinHash's are the first values of the largest sketch;
            # OPH's bins cover the whole hash range, so each size is made anew.
            stored = {("minhash", p): values for p in args.perms}
            if args.oph:
                stored.update({("oph", p): oph_values(tokens, p, seed) for p in args.perms})
            hashes = [shingle_hashes(doc, 3, seed) for doc in tokens]
            sizes = np.array([len(h) for h in hashes], dtype=np.float64)
            odd = {b: odd_sketches(hashes, b, seed) for b in args.odd}
            for bits in args.bits:
                chances.setdefault(f"minhash b={bits}", []).append(measured_chance(values, bits, seed))
            for (count, rows), k in itertools.product(args.bands, args.ks):
                # The candidate step is the same for every sketch: k, then MinHash bands.
                banded = _banded(values, count, rows) if count else {}
                if args.cap is None:
                    pairs = hamming[k] | set(banded)
                else:
                    pairs = hamming[k] | _capped(banded, fps, args.cap, hamming[k])
                ordered = sorted(pairs)
                ci = np.array([a for a, _ in ordered], dtype=np.int64)
                cj = np.array([b for _, b in ordered], dtype=np.int64)
                shape = f"{count}x{rows}"

                tail = f"{shape}|{k}|{seed}|{lang}"
                exact = np.array([pair in positives for pair in ordered], dtype=bool)
                counts[f"exact|0|0|{tail}"] = _scored(ci, cj, exact, positives)
                for ((kind, perms), matrix), bits in itertools.product(stored.items(), args.bits):
                    keep = estimates(matrix, ci, cj, perms, bits) >= args.cut
                    counts[f"{kind}|{perms}|{bits}|{tail}"] = _scored(ci, cj, keep, positives)
                for size, packed in odd.items():
                    keep = odd_estimates(packed, sizes, ci, cj, size) >= args.cut
                    counts[f"odd|{size}|1|{tail}"] = _scored(ci, cj, keep, positives)
                    if args.sample:
                        keep = sampled_estimates(hashes, size, seed, args.sample, ci, cj) >= args.cut
                        counts[f"odd sampled|{size}|1|{tail}"] = _scored(ci, cj, keep, positives)
    return {"counts": counts, "chances": {name: float(np.mean(v)) for name, v in chances.items()}}


def summary(counts: dict[str, list[int]], seeds: list[int]) -> list[dict[str, Any]]:
    """One row per (kind, perms, bits, bands, k): F1 ranges over seeds per language and overall."""
    rows: dict[tuple[str, ...], dict[str, list[tuple[float, float, float]]]] = {}
    langs = sorted({key.rsplit("|", 1)[1] for key in counts})
    heads = sorted(
        {tuple(key.split("|")[:5]) for key in counts}, key=lambda h: (h[0], int(h[1]) * int(h[2]), h)
    )
    out = []
    for head in heads:
        rows[head] = {}
        for lang in [*langs, "all"]:
            scores = []
            for seed in seeds:
                parts = [
                    counts["|".join([*head, str(seed), name])] for name in langs if lang in ("all", name)
                ]
                scores.append(_f1(*(sum(column) for column in zip(*parts, strict=True))))
            rows[head][lang] = scores
        kind, perms, bits, shape, k = head
        row: dict[str, Any] = {
            "kind": kind,
            "perms": int(perms),
            "bits": int(bits),
            "bytes": int(perms) * int(bits) // 8 + (2 if kind.startswith("odd") else 0),
            "bands": shape,
            "k": int(k),
        }
        for lang, scores in rows[head].items():
            row[lang] = {
                "f1": [min(s[2] for s in scores), max(s[2] for s in scores)],
                "f1_mean": sum(s[2] for s in scores) / len(scores),
                "precision_min": min(s[0] for s in scores),
                "recall_min": min(s[1] for s in scores),
            }
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--perms", type=_ints, default=[256, 512, 1024], help="permutations (or OPH bins)")
    parser.add_argument("--bits", type=_ints, default=[8], help="bits stored per value: 1, 2, 4 or 8")
    parser.add_argument("--ks", type=_ints, default=[3], help="candidate distances")
    parser.add_argument("--seeds", type=_ints, default=[0, 1, 2, 3], help="sketch seeds")
    parser.add_argument("--bands", type=_shapes, default=[(8, 4)], help="band tables as BANDSxROWS, ...")
    parser.add_argument("--cut", type=float, default=_THRESHOLD, help="the estimate that confirms a pair")
    parser.add_argument(
        "--cap", type=int, default=None, help="band candidates verified per query at most (max_candidates)"
    )
    parser.add_argument(
        "--sample", type=int, default=0, help="also odd sketches sampled above this many shingles"
    )
    parser.add_argument("--oph", action="store_true", help="also one-permutation hashing (power-of-2 sizes)")
    parser.add_argument("--odd", type=_ints, default=[], help="also odd sketches of these bit sizes")
    parser.add_argument("--long", action="store_true", help="also odd sketches of long documents, simulated")
    parser.add_argument("--edits", action="store_true", help="also one-word edits of real text")
    parser.add_argument("--cost", action="store_true", help="also the time to sketch a text")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args()
    if any(b not in (1, 2, 4, 8) for b in args.bits):
        parser.error("--bits must be of 1, 2, 4, 8")
    if max(args.perms) > 4096 or (args.oph and any(p & (p - 1) for p in args.perms)):
        parser.error("--perms must be <= 4096 (powers of two with --oph)")
    result = evaluate(args)
    rows = summary(result["counts"], args.seeds)
    print(f"Jaccard >= {_THRESHOLD}, confirmed by estimate >= {args.cut}; F1 over seeds {args.seeds}")
    for name, chance in sorted(result["chances"].items()):
        bits = int(name.rsplit("=", 1)[1])
        print(f"  C measured, {name}: {chance:.4f} (2^-b = {2.0**-bits:.4f})")
    print(
        f"{'sketch':>13} {'perms':>5} {'b':>2} {'bytes':>5} {'bands':>5} {'k':>2}  "
        f"{'en F1':>11}  {'zh F1':>11}  {'all F1':>11}  {'mean':>5}  {'P min':>5}  {'R min':>5}  {'zh P':>5}"
    )
    for row in rows:
        cells = [f"{row[lang]['f1'][0]:.3f}-{row[lang]['f1'][1]:.3f}" for lang in ("en", "zh", "all")]
        print(
            f"{row['kind']:>13} {row['perms']:>5} {row['bits']:>2} {row['bytes']:>5} {row['bands']:>5} "
            f"{row['k']:>2}  " + "  ".join(cells) + f"  {row['all']['f1_mean']:.3f}"
            f"  {row['all']['precision_min']:.3f}"
            f"  {row['all']['recall_min']:.3f}  {row['zh']['precision_min']:.3f}"
        )
    if args.cost:
        print("time to sketch, numpy engines (the compiled core's ratio may differ):")
        compute_cost()
    if args.edits:
        edits(bits=(args.odd or [1008])[0])
    if args.long:
        long_sets([100, 500, 2000, 8000, 30000], args.odd or [1008])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"args": vars(args), "rows": rows, "chances": result["chances"]}, out, indent=1)


if __name__ == "__main__":
    main()
