"""Load and near_many throughput on a local 3-primary Redis Cluster against one server, same data.

Both run on this machine, so the cluster's nodes share its cores with each other and with the client:
the figures show what the per-node routing costs, not what a cluster of separate machines gains.

    python benchmarks/bench_cluster.py [--n 200000] [--queries 20000] [--batch 1000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simhash_redis import SimhashIndex
from tests.servers import ClusterProcess, ServerProcess


def fingerprints(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(64) for _ in range(n)]


def measure(index: SimhashIndex, stored: list[int], queries: list[int], batch: int) -> dict[str, float]:
    """Load throughput, near_many throughput and single near() latency on one index."""
    docs = [(f"doc-{i:010d}", fp) for i, fp in enumerate(stored)]
    start = time.perf_counter()
    for first in range(0, len(docs), batch):
        index.add_many(docs[first : first + batch])
    load = len(docs) / (time.perf_counter() - start)
    start = time.perf_counter()
    for first in range(0, len(queries), batch):
        index.near_many(queries[first : first + batch])
    many = len(queries) / (time.perf_counter() - start)
    latencies = []
    for query in queries[:2000]:
        t = time.perf_counter()
        index.near(query)
        latencies.append(time.perf_counter() - t)
    latencies.sort()
    return {
        "load docs/s": load,
        "near_many q/s": many,
        "near p50 us": statistics.median(latencies) * 1e6,
        "near p99 us": latencies[int(len(latencies) * 0.99)] * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200_000, help="fingerprints to load")
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    stored = fingerprints(args.n, 1)
    rng = random.Random(2)
    # Half the queries are near-duplicates of stored fingerprints, so the id round trip is exercised.
    queries = [
        fp ^ (1 << rng.randrange(64)) if i % 2 else rng.getrandbits(64)
        for i, fp in enumerate(stored[: args.queries])
    ]
    results = {}
    with ServerProcess() as server:
        results["one server"] = measure(SimhashIndex(server.client(), "bench"), stored, queries, args.batch)
    with ClusterProcess() as cluster:
        index = SimhashIndex(cluster.client(), "bench")
        results["cluster 3+3"] = measure(index, stored, queries, args.batch)
    single, clustered = results["one server"], results["cluster 3+3"]
    print(f"N = {args.n:,} fingerprints, k = 3, 4 tables, batches of {args.batch}, all on this machine")
    print(f"{'figure':<16}{'one server':>14}{'cluster 3+3':>14}{'cluster/one':>13}")
    for figure in single:
        ratio = clustered[figure] / single[figure]
        print(f"{figure:<16}{single[figure]:>14,.0f}{clustered[figure]:>14,.0f}{ratio:>13.2f}")


if __name__ == "__main__":
    main()
