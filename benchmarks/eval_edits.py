"""Small edits of article-length texts: which candidate rule finds them, and at what cost.

Run from the repository root::

    python -m benchmarks.eval_edits [--articles 300] [--trials 10] [--runs]

The question of the issue "Near-duplicates as users mean them": a story republished with one, two or
three words changed (a date, a byline, a typo fixed) must be found. For articles cut from the real text
of the evaluation corpus (English: 250-400 words; Chinese: 500-800 characters, about the same number of
tokens; short texts: 40-100 words), each counted in the library's tokens (`benchmarks.articles`), each
trial replaces random real words (Chinese: characters), each by a different word of the set's
vocabulary (with --runs, as before: "words" are runs between spaces and Chinese "characters" any
non-space ones, so a "word" may be no token or several), and prints, per edit size and language:

* the SimHash distance of the default scheme (f = 64) between the article and its edit: its quantiles
  and the share within k for k = 3..12 (what a plain index, or a verified index's candidate step, finds);
* the estimated Jaccard of the default MinHash sketch (256 permutations of 8 bits, word 3-shingles):
  the share >= 0.8 (what a verified index confirms);
* the share that MinHash LSH bands over the same sketch would make candidates (b bands of r values:
  a pair is a candidate when all r values of some band agree), for the band shapes printed, and the
  chance that a pair at Jaccard 0.5 / 0.8 becomes one (1 - (1 - J^r)^b, the standard LSH curve), which
  with real corpora's few near pairs bounds the candidates per query.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import numpy as np

from benchmarks import articles, corpus
from simhash_redis import distance
from simhash_redis.fingerprinting import MinHasher, Scheme

KS = (3, 4, 5, 6, 8, 10, 12)
#: (bands, rows) over the 256 sketch values.
BANDS = ((16, 8), (32, 8), (32, 4), (64, 4))


def _articles(lang: str, count: int, low: int, high: int, rng: random.Random) -> list[list[str]]:
    """`count` runs of `low`..`high` consecutive tokens (words, or Chinese characters) of real text."""
    text = corpus.text(lang)
    tokens = text.split() if lang == "en" else [c for c in text if not c.isspace()]
    out = []
    for _ in range(count):
        size = rng.randint(low, high)
        start = rng.randrange(0, len(tokens) - size)
        out.append(tokens[start : start + size])
    return out


def _banded(a: np.ndarray, b: np.ndarray, bands: int, rows: int) -> bool:
    same = (a[: bands * rows] == b[: bands * rows]).reshape(bands, rows)
    return bool(same.all(axis=1).any())


def _token_edits(
    lang: str, count: int, low: int, high: int, edits: int, trials: int, rng: random.Random
) -> list[tuple[str, list[str]]]:
    """Articles of `low`..`high` tokens, each with `trials` copies of `edits` real words replaced."""
    cut = articles.cut(lang, count, low, high, rng)
    vocab = articles.vocabulary(cut)
    return [(a.text, [articles.edit(a, vocab, rng, edits) for _ in range(trials)]) for a in cut]


def _run_edits(
    runs: list[list[str]], join: Callable[[list[str]], str], edits: int, trials: int, rng: random.Random
) -> list[tuple[str, list[str]]]:
    """The measure before: articles of runs between spaces (Chinese: non-space characters), each with
    `trials` copies of `edits` runs replaced by others of the set's."""
    vocab = sorted({t for art in runs for t in art})
    out = []
    for art in runs:
        copies = []
        for _ in range(trials):
            tokens = list(art)
            for _ in range(edits):
                tokens[rng.randrange(len(tokens))] = rng.choice(vocab)
            copies.append(join(tokens))
        out.append((join(art), copies))
    return out


def measure(name: str, edits: int, pairs: list[tuple[str, list[str]]]) -> None:
    """Print the figures of the edited copies of each article (`edits` substitutions each)."""
    scheme, hasher = Scheme(), MinHasher()
    dists, jaccards = [], []
    banded = {shape: 0 for shape in BANDS}
    for base, copies in pairs:
        fp, sketch = scheme.fingerprint(base), np.frombuffer(hasher.sketch(base), dtype=np.uint8)
        for edited in copies:
            dists.append(distance(fp, scheme.fingerprint(edited)))
            other = np.frombuffer(hasher.sketch(edited), dtype=np.uint8)
            jaccards.append(float(hasher.estimate_many(sketch.tobytes(), [other.tobytes()])[0]))
            for shape in BANDS:
                banded[shape] += _banded(sketch, other, *shape)
    d, j = np.array(dists), np.array(jaccards)
    n = len(d)
    quantiles = " ".join(f"p{q}={np.percentile(d, q):.0f}" for q in (50, 90, 99)) + f" max={d.max()}"
    within = " ".join(f"k{k}={(d <= k).mean():.3f}" for k in KS)
    bands = " ".join(f"{b}x{r}={banded[(b, r)] / n:.3f}" for b, r in BANDS)
    print(f"{name}, {edits} edit(s), {n:,} trials")
    print(f"  simhash distance: {quantiles}; within k: {within}")
    print(
        f"  minhash J est: p1={np.percentile(j, 1):.3f} min={j.min():.3f} share>=0.8={(j >= 0.8).mean():.3f}"
    )
    print(f"  LSH bands (b x r) candidate share: {bands}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--articles", type=int, default=300, help="articles per language")
    parser.add_argument("--trials", type=int, default=10, help="edited copies per article and edit size")
    parser.add_argument(
        "--runs",
        action="store_true",
        help="the measure before: words as runs between spaces (Chinese: non-space characters)",
    )
    args = parser.parse_args()
    rng = random.Random(corpus.SEED)
    print(
        "LSH curve 1-(1-J^r)^b at J = 0.5 / 0.8 / 0.95: "
        + ", ".join(
            f"{b}x{r}: {1 - (1 - 0.5**r) ** b:.3f}/{1 - (1 - 0.8**r) ** b:.3f}/{1 - (1 - 0.95**r) ** b:.4f}"
            for b, r in BANDS
        )
    )
    sets = (
        ("English, 250-400 words", "en", 250, 400),
        ("Chinese, 500-800 characters", "zh", 500, 800),
        ("English, 40-100 words", "en", 40, 100),
    )
    if args.runs:
        # Every set cut before any is edited, as before, so that the figures are the same.
        cuts = [_articles(lang, args.articles, low, high, rng) for _, lang, low, high in sets]
        for (name, lang, _, _), runs in zip(sets, cuts, strict=True):
            join: Callable[[list[str]], str] = " ".join if lang == "en" else "".join
            for edits in (1, 2, 3):
                measure(name, edits, _run_edits(runs, join, edits, args.trials, rng))
        return
    for name, lang, low, high in sets:
        for edits in (1, 2, 3):
            measure(name, edits, _token_edits(lang, args.articles, low, high, edits, args.trials, rng))


if __name__ == "__main__":
    main()
