"""Verified mode's precision, recall and F1 by sketch size and candidate k, over several sketch seeds.

Run from the repository root::

    python -m benchmarks.eval_sketch [--perms 256,512,1024] [--ks 8,10,12,14,16] [--seeds 0,1,2,3]
                                     [--bands 8x4]

The quality targets of the issue "Near-duplicates as users mean them" (F1 >= 0.95 at Jaccard >= 0.8 over
the evaluation corpus, >= 0.93 for English and Chinese each) against the two parts of verified mode:
the candidate step (SimHash within k: every pair of the corpus within k, as any exact layout finds it;
with --bands, also every pair whose sketches agree on all values of one LSH band, as the band tables
of a verified index find it) and the confirmation (a b-bit MinHash sketch's estimate >= 0.8). The truth
is the exact Jaccard of the word 3-shingle sets. Needs only the library and
benchmarks/data/eval_corpus.jsonl.gz (no server).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from simhash_redis.fingerprinting import MinHasher, Scheme
from simhash_redis.fingerprinting.tokens import tokenize
from simhash_redis.tools.evaluation import hamming_pairs, jaccard_join, load_corpus, shingle_sets

_CORPUS = Path(__file__).resolve().parent / "data" / "eval_corpus.jsonl.gz"
_THRESHOLD = 0.8


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def _f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    return precision, recall, 2 * precision * recall / max(1e-12, precision + recall)


def _banded(sketches: list[bytes], count: int, rows: int) -> set[tuple[int, int]]:
    """The pairs (i < j) whose sketches agree on every value of at least one band (8-bit values)."""
    pairs: set[tuple[int, int]] = set()
    for band in range(count):
        groups: dict[bytes, list[int]] = {}
        for i, sketch in enumerate(sketches):
            groups.setdefault(sketch[band * rows : (band + 1) * rows], []).append(i)
        for members in groups.values():
            pairs.update(itertools.combinations(members, 2))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--perms", type=_ints, default=[256, 512, 1024], help="sketch sizes (8-bit values)")
    parser.add_argument("--ks", type=_ints, default=[8, 10, 12, 14, 16], help="candidate distances")
    parser.add_argument("--seeds", type=_ints, default=[0, 1, 2, 3], help="sketch seeds")
    parser.add_argument("--bands", default="0x0", help="LSH band tables as BANDSxROWS (default: none)")
    args = parser.parse_args()
    count, rows = (int(part) for part in args.bands.split("x"))
    docs = load_corpus(_CORPUS)
    # (perm, k, seed, lang) -> [tp, fp, fn]
    counts: dict[tuple[int, int, int, str], list[int]] = {}
    for lang in sorted({doc.lang for doc in docs}):
        group = [doc for doc in docs if doc.lang == lang]
        tokens = [tokenize(doc.text) for doc in group]
        truth = jaccard_join(shingle_sets(tokens, 3), _THRESHOLD)
        positives = set(zip(truth.i.tolist(), truth.j.tolist(), strict=True))
        fps = Scheme().fingerprint_many([doc.text for doc in group])
        pairs = {k: hamming_pairs(fps, 64, k) for k in args.ks}
        for perm in args.perms:
            for seed in args.seeds:
                hasher = MinHasher(num_perm=perm, seed=seed)
                sketches = hasher.sketch_many(tokens)
                for k in args.ks:
                    ci, cj, _ = pairs[k]
                    hamming = set(zip(ci.tolist(), cj.tolist(), strict=True))
                    candidates = hamming | _banded(sketches, count, rows)
                    same = hasher.estimate
                    found = {(a, b) for a, b in candidates if same(sketches[a], sketches[b]) >= _THRESHOLD}
                    tp = len(found & positives)
                    counts[(perm, k, seed, lang)] = [tp, len(found) - tp, len(positives) - tp]
    langs = sorted({key[3] for key in counts})
    print(f"Jaccard >= {_THRESHOLD} confirmed by the sketch, candidates within k; F1 over seeds {args.seeds}")
    print(f"{'sketch':>8} {'k':>3}  " + "  ".join(f"{name:>21}" for name in [*langs, "all"]))
    for perm in args.perms:
        for k in args.ks:
            cells = []
            for lang in [*langs, "all"]:
                scores = []
                for seed in args.seeds:
                    parts = [counts[(perm, k, seed, name)] for name in langs if lang in ("all", name)]
                    scores.append(_f1(*(sum(column) for column in zip(*parts, strict=True))))
                precision = min(s[0] for s in scores)
                recall = min(s[1] for s in scores)
                f1 = [s[2] for s in scores]
                cells.append(f"P>={precision:.3f} R>={recall:.3f} F1 {min(f1):.3f}-{max(f1):.3f}")
            print(f"{perm:>6} B {k:>3}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
