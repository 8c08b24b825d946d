"""A verified index with a retention window beside a verified index without one, measured in the same run.

Run from the repository root::

    python -m benchmarks.bench_retention_verified [--n 4448] [--queries 400] [--rounds 3]

Both indexes hold the evaluation corpus (benchmarks/data/eval_corpus.jsonl.gz: 4,448 documents;
--n takes its first N) in one private server. The windowed one has a retention of 7 days in periods of
28 hours: its documents sit in the current period, and a query reads the table sets and band values of
the 7 periods that may be live (writes go only into the current period, so this is the read cost of
the periods, not of their data). Printed: `add_many` (batches of 1,000) of each, bytes of Redis per
document, near() p50 and p99 of one-word edits of stored articles (each query timed on both in turn,
the median over rounds), and `near_many` of the edits in batches of 100.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.tools.evaluation import load_corpus
from tests.servers import ServerProcess

_CORPUS = Path(__file__).resolve().parent / "data" / "eval_corpus.jsonl.gz"


def _edit(text: str, rng: random.Random) -> str:
    words = text.split()
    words[rng.randrange(len(words))] = "edited"
    return " ".join(words)


def _used_memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=_CORPUS)
    parser.add_argument("--n", type=int, default=None, help="documents of the corpus stored (all)")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    docs = load_corpus(args.corpus)[: args.n]
    items = [(d.id, d.text) for d in docs]
    rng = random.Random(5)
    articles = [d.text for d in docs if d.lang == "en" and len(d.text.split()) >= 100]
    edits = [_edit(text, rng) for text in rng.sample(articles, min(args.queries, len(articles)))]
    indexes: dict[str, VerifiedIndex] = {}
    loads: dict[str, float] = {}
    memory: dict[str, float] = {}
    with ServerProcess() as server:
        client = server.client()
        for name, retention in (("verified", None), ("verified, 7d window", "7d")):
            before = _used_memory(client)
            index = VerifiedIndex(
                SimhashIndex(client, name.replace(", ", "-").replace(" ", ""), retention=retention)
            )
            start = time.perf_counter()
            for first in range(0, len(items), 1000):
                index.add_many(items[first : first + 1000])
            loads[name] = len(items) / (time.perf_counter() - start)
            memory[name] = (_used_memory(client) - before) / len(items)
            indexes[name] = index
        for index in indexes.values():
            index.near_many(edits[:50])  # warm-up: connections, scripts, the engine's first calls
        single: dict[str, list[tuple[float, float]]] = {name: [] for name in indexes}
        batches: dict[str, list[float]] = {name: [] for name in indexes}
        for _ in range(args.rounds):
            times: dict[str, list[float]] = {name: [] for name in indexes}
            for query in edits:
                for name, index in indexes.items():
                    t0 = time.perf_counter_ns()
                    index.near(query)
                    times[name].append((time.perf_counter_ns() - t0) / 1000)
            for name, values in times.items():
                single[name].append((float(np.percentile(values, 50)), float(np.percentile(values, 99))))
            for name, index in indexes.items():
                start = time.perf_counter()
                for first in range(0, len(edits), 100):
                    index.near_many(edits[first : first + 100])
                batches[name].append(len(edits) / (time.perf_counter() - start))
        found = {name: sum(bool(index.near(q)) for q in edits) for name, index in indexes.items()}
        client.close()
    print(f"{len(items):,} documents (evaluation corpus), {len(edits)} one-word edits as queries")
    for name in indexes:
        p50 = statistics.median(p for p, _ in single[name])
        p99 = statistics.median(p for _, p in single[name])
        many = statistics.median(batches[name])
        print(
            f"{name:<20} add_many {loads[name]:7,.0f} docs/s  {memory[name]:5,.0f} bytes/doc  "
            f"near() p50 {p50:6.0f} us  p99 {p99:6.0f} us  near_many {many:6,.0f} q/s  "
            f"edits found {found[name]}/{len(edits)}"
        )


if __name__ == "__main__":
    main()
