"""Verified mode end to end, as a new index gets it, on a real server: quality and one-word edits.

Run from the repository root::

    python -m benchmarks.eval_verified [--articles 300] [--trials 5] [--plain-k 8] [--max-candidates 256]

Two measurements of `VerifiedIndex(SimhashIndex(client, name))` (its defaults: k = 3, odd sketches, 8 LSH
band tables of 4 values), each beside a plain index of the same server:

* the evaluation corpus (benchmarks/data/eval_corpus.jsonl.gz) stored, then every document queried:
  the pairs found against the exact Jaccard >= 0.8 of word 3-shingle sets (precision, recall, F1, per
  language and overall, each pair once; the targets: F1 >= 0.97 overall and >= 0.96 per language,
  precision >= 0.95);
* articles cut from the corpus's real text (English 250-400 words, Chinese 500-800 characters, short
  English texts of 40-100 words, each counted in the library's word tokens) stored, then one-word edits
  of them queried (a real word replaced by another, `benchmarks.articles`): the share of edits whose
  article is found (the target: >= 99%), and that share among the edits that leave the article at
  Jaccard >= 0.8; then the same as measured before (a "word" a run between spaces), for comparison.

It also prints the sketch's bytes per document and the p50 of near() on each index.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import articles as article_texts
from benchmarks import corpus
from benchmarks.eval_edits import _articles
from simhash_redis import Layout, SimhashIndex, VerifiedIndex
from simhash_redis.fingerprinting.tokens import tokenize
from simhash_redis.index.verified_index import MAX_CANDIDATES
from simhash_redis.tools.evaluation import Doc, jaccard_join, load_corpus, shingle_sets
from tests.servers import ServerProcess

_CORPUS = Path(__file__).resolve().parent / "data" / "eval_corpus.jsonl.gz"


def _f1(tp: int, fp: int, fn: int) -> str:
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    f1 = 2 * precision * recall / max(1e-12, precision + recall)
    return f"P {precision:.3f} R {recall:.3f} F1 {f1:.3f}"


def pair_scores(docs: list[Doc], results: dict[str, list[list[str]]]) -> dict[str, dict[str, list[int]]]:
    """[true positives, false positives, false negatives] per language, then overall, of each way's pairs.

    The truth is the exact Jaccard of the whole corpus's pairs, whatever their documents' languages: a
    pair of one language counts in that language's scores and overall, a pair across languages (the
    corpus has one-token documents labelled "en" and "zh" that tokenise alike) overall only, and every
    pair once, whichever of its documents found the other.

    Args:
        docs: the corpus; a document's id is its position.
        results: for each way, per query (in corpus order), the ids it found.
    """
    truth = jaccard_join(shingle_sets([tokenize(d.text) for d in docs], 3), 0.8)
    positives = set(zip(truth.i.tolist(), truth.j.tolist(), strict=True))
    langs = sorted({d.lang for d in docs})

    def counts(found: set[tuple[int, int]], wanted: set[tuple[int, int]]) -> list[int]:
        tp = len(found & wanted)
        return [tp, len(found) - tp, len(wanted) - tp]

    totals: dict[str, dict[str, list[int]]] = {}
    for name, found in results.items():
        pairs = {(min(n, int(m)), max(n, int(m))) for n, ids in enumerate(found) for m in ids if int(m) != n}
        scores = totals.setdefault(name, {})
        for lang in langs:

            def within(p: tuple[int, int], lang: str = lang) -> bool:
                return docs[p[0]].lang == docs[p[1]].lang == lang

            scores[lang] = counts({p for p in pairs if within(p)}, {p for p in positives if within(p)})
        scores["all"] = counts(pairs, positives)
    return totals


def corpus_quality(client: Any, plain_k: int, cap: int | None) -> None:
    """Store the evaluation corpus, query every document, score the pairs found per language."""
    docs = load_corpus(_CORPUS)
    verified = VerifiedIndex(SimhashIndex(client, "quality"), max_candidates=cap)
    layout = Layout.permuted(64, plain_k, blocks=plain_k + 2)
    plain = SimhashIndex(client, "quality-plain", k=plain_k, layout=layout)
    items = [(f"{n}", d.text) for n, d in enumerate(docs)]
    verified.add_many(items)
    plain.add_many(items)
    texts = [d.text for d in docs]
    ids = {
        "verified": [[m.id for m in matches] for matches in verified.near_many(texts)],
        f"plain k={plain_k}": [[m.id for m in matches] for matches in plain.near_many(texts)],
    }
    for name, scores in pair_scores(docs, ids).items():
        for lang, counts in scores.items():
            print(f"  {lang}, {name}: {_f1(*counts)} ({counts[0] + counts[2]} pairs at J >= 0.8)")


def _jaccard(a: str, b: str) -> float:
    """The exact Jaccard similarity of two texts' word 3-shingle sets (the corpus's truth)."""
    one, two = (set(s.tolist()) for s in shingle_sets([tokenize(a), tokenize(b)], 3))
    return len(one & two) / max(1, len(one | two))


def _found(
    client: Any, name: str, items: list[tuple[str, str]], queries: list[tuple[str, str]], cap: int | None
) -> None:
    """Store `items` in a verified and a plain index, query the edits (owner id, text): print the shares."""
    verified = VerifiedIndex(SimhashIndex(client, name), max_candidates=cap)
    plain = SimhashIndex(client, f"{name}-plain")
    verified.add_many(items)
    plain.add_many(items)
    owners, texts = [o for o, _ in queries], [q for _, q in queries]
    hits_v = [o in {m.id for m in r} for o, r in zip(owners, verified.near_many(texts), strict=True)]
    hit_p = sum(o in {m.id for m in r} for o, r in zip(owners, plain.near_many(texts), strict=True))
    near = [_jaccard(items[int(o)][1], q) >= 0.8 for o, q in queries]
    at = sum(hit for hit, keep in zip(hits_v, near, strict=True) if keep)
    shares = f"verified {sum(hits_v) / len(texts):.3f}, plain k = 3 {hit_p / len(texts):.3f}"
    print(
        f"  {shares} ({len(texts)} edits); verified {at / max(1, sum(near)):.3f} of the {sum(near)} "
        "at Jaccard >= 0.8"
    )


def one_word_edits(client: Any, articles: int, trials: int, cap: int | None) -> None:
    """Store articles, query one-word edits of them: the share found, verified and plain k = 3.

    Lengths and edits in the library's word tokens (`benchmarks.articles`: the target's measure), then
    as before, in runs between spaces (a run may be no token, a `|`, or several), for comparison.
    """
    rng = random.Random(corpus.SEED)
    sets = [("English, 250-400 words", "en", 250, 400), ("Chinese, 500-800 characters", "zh", 500, 800)]
    sets.append(("English, 40-100 words", "en", 40, 100))
    for n, (name, lang, low, high) in enumerate(sets):
        cut = article_texts.cut(lang, articles, low, high, rng)
        vocab = article_texts.vocabulary(cut)
        print(f" {name} (tokens; a real word replaced by another):")
        queries = [
            (f"{i}", article_texts.edit(a, vocab, rng)) for i, a in enumerate(cut) for _ in range(trials)
        ]
        _found(client, f"edits{n}", [(f"{i}", a.text) for i, a in enumerate(cut)], queries, cap)
    rng = random.Random(corpus.SEED)
    # Every set cut before any is edited, as before, so that the figures are the same.
    cuts = [_articles(lang, articles, low, high, rng) for _, lang, low, high in sets]
    for n, ((name, lang, _, _), runs) in enumerate(zip(sets, cuts, strict=True)):
        join: Callable[[list[str]], str] = " ".join if lang == "en" else "".join
        vocab = sorted({t for art in runs for t in art})
        print(f" {name} (before: runs between spaces, or non-space characters):")
        queries = []
        for i, art in enumerate(runs):
            for _ in range(trials):
                tokens = list(art)
                tokens[rng.randrange(len(tokens))] = rng.choice(vocab)
                queries.append((f"{i}", join(tokens)))
        _found(client, f"runs{n}", [(f"{i}", join(art)) for i, art in enumerate(runs)], queries, cap)


def costs(client: Any, cap: int | None) -> None:
    """Bytes per document of the sketch, and near() p50, on the corpus indexes stored above."""
    verified = VerifiedIndex(SimhashIndex(client, "quality"), max_candidates=cap)
    plain = SimhashIndex(client, "quality-plain")
    texts = [d.text for d in load_corpus(_CORPUS)][:300]
    for name, near in (("verified", verified.near), (f"plain k={plain.k}", plain.near)):
        times = []
        for text in texts:
            t0 = time.perf_counter()
            near(text)
            times.append((time.perf_counter() - t0) * 1e6)
        print(f"  near(text) p50, {name}: {np.percentile(times, 50):.0f} us")
    print(f"  sketch: {verified.hasher.sketch_bytes} bytes, {verified.verification.to_meta()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=300, help="articles per set")
    parser.add_argument("--trials", type=int, default=5, help="one-word edits per article")
    parser.add_argument("--plain-k", type=int, default=8, help="the plain index compared on the corpus")
    parser.add_argument(
        "--max-candidates",
        type=lambda v: None if v == "none" else int(v),
        default=MAX_CANDIDATES,
        help="band candidates verified per query at most, or none (default: the library's)",
    )
    args = parser.parse_args()
    cap = args.max_candidates
    print(f"max_candidates: {cap}")
    with ServerProcess() as server:
        client = server.client()
        print("Evaluation corpus, Jaccard >= 0.8 (every document queried):")
        corpus_quality(client, args.plain_k, cap)
        print("One-word edits (the article found):")
        one_word_edits(client, args.articles, args.trials, cap)
        print("Costs:")
        costs(client, cap)
        client.close()


if __name__ == "__main__":
    main()
