"""Fingerprinting speed of simhash-redis against the `simhash` PyPI package, on one core.

Run from the repository root::

    pip install simhash==2.1.2      # the comparison only; simhash-redis does not depend on it
    python benchmarks/bench_fingerprint.py [--docs 2000] [--size 3500] [--repeat 5]

The corpus is the benchmarks' own (`benchmarks.corpus`): real English and Chinese text from the
versioned evaluation corpus, cut into documents of ``--size`` UTF-8 bytes, the same on every machine.
The process is pinned to one CPU, so figures are per core.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from simhash_redis.fingerprinting import fingerprint, fingerprint_many


def seconds(run: Callable[[], object]) -> float:
    """Time one run in CPU seconds of this process.

    Args:
        run: the work.

    Returns:
        The CPU time it took.
    """
    start = time.process_time()
    run()
    return time.process_time() - start


def bench(label: str, docs: Sequence[str], repeat: int, theirs_docs: int) -> None:
    """Measure and print the rates for one corpus.

    Args:
        label: the corpus name.
        docs: its documents.
        repeat: timing rounds; the best of each contender counts.
        theirs_docs: documents given to the slower `simhash` package.
    """
    fingerprint_many(docs[:50])  # builds lookup tables and warms the token cache outside the timing
    runs: dict[str, tuple[Callable[[], object], int]] = {
        "many": (lambda: fingerprint_many(docs), len(docs)),
        "single": (lambda: [fingerprint(doc) for doc in docs], len(docs)),
    }
    try:
        from simhash import Simhash  # type: ignore[import-untyped]
    except ImportError:
        Simhash = None
    else:
        subset = docs[:theirs_docs]
        runs["simhash"] = (lambda: [Simhash(doc).value for doc in subset], len(subset))
    best = dict.fromkeys(runs, float("inf"))
    # Rounds interleave the contenders, so that a change of load on a shared machine hits them alike.
    for _ in range(repeat):
        for name, (run, _count) in runs.items():
            best[name] = min(best[name], seconds(run))
    rate = {name: count / best[name] for name, (_run, count) in runs.items()}
    line = f"{label:8} {len(docs):5} docs  many {rate['many']:9.0f} docs/s"
    line += f"  single {rate['single']:9.0f} docs/s"
    if Simhash is None:
        print(line + "  simhash: not installed (pip install simhash==2.1.2)")
        return
    theirs = rate["simhash"]
    ratios = f"ratio many {rate['many'] / theirs:5.1f}x single {rate['single'] / theirs:5.1f}x"
    print(f"{line}  simhash {theirs:7.0f} docs/s  {ratios}")


def main() -> None:
    """Parse arguments, pin to one CPU and run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=2000, help="documents per corpus")
    parser.add_argument("--size", type=int, default=3500, help="UTF-8 bytes per document")
    parser.add_argument("--repeat", type=int, default=5, help="timing rounds; the best counts")
    parser.add_argument("--theirs", type=int, default=300, help="documents given to the simhash package")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"python {sys.version.split()[0]}, one CPU, documents of {args.size} UTF-8 bytes")
    for label, lang in (("english", "en"), ("chinese", "zh")):
        docs = corpus.documents(lang, args.docs, args.size)
        bench(label, docs, args.repeat, min(args.theirs, len(docs)))


if __name__ == "__main__":
    main()
