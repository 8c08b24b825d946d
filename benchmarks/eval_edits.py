"""Small edits of article-length texts: which candidate rule finds them, and at what cost.

Run from the repository root::

    python -m benchmarks.eval_edits [--articles 300] [--trials 10]

The question of the issue "Near-duplicates as users mean them": a story republished with one, two or
three words changed (a date, a byline, a typo fixed) must be found. For articles cut from the real text
of the evaluation corpus (English: 250-400 words; Chinese: 500-800 characters, about the same number of
tokens; short texts: 40-100 words), each trial replaces random words (Chinese: characters) with others of
the same text's vocabulary, and prints, per edit size and language:

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

from benchmarks import corpus
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


def measure(
    name: str,
    articles: list[list[str]],
    join: Callable[[list[str]], str],
    edits: int,
    trials: int,
    rng: random.Random,
) -> None:
    """Print the figures of `edits` random substitutions per trial over the articles."""
    scheme, hasher = Scheme(), MinHasher()
    vocab = sorted({t for art in articles for t in art})
    dists, jaccards = [], []
    banded = {shape: 0 for shape in BANDS}
    for art in articles:
        base = join(art)
        fp, sketch = scheme.fingerprint(base), np.frombuffer(hasher.sketch(base), dtype=np.uint8)
        for _ in range(trials):
            tokens = list(art)
            for _ in range(edits):
                tokens[rng.randrange(len(tokens))] = rng.choice(vocab)
            edited = join(tokens)
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
        ("English, 250-400 words", _articles("en", args.articles, 250, 400, rng), " ".join),
        ("Chinese, 500-800 characters", _articles("zh", args.articles, 500, 800, rng), "".join),
        ("English, 40-100 words", _articles("en", args.articles, 40, 100, rng), " ".join),
    )
    for name, articles, join in sets:
        for edits in (1, 2, 3):
            measure(name, articles, join, edits, args.trials, rng)


if __name__ == "__main__":
    main()
