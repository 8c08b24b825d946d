"""AsyncSimhashIndex beside SimhashIndex on the same index and server, measured in the same run.

Run from the repository root::

    python -m benchmarks.bench_asyncio [--n 1000000] [--queries 20000] [--quick]

One private server on loopback holds N fingerprints. The single calls of both classes are interleaved
in one coroutine (the synchronous call blocks the loop while it runs), so they see the same machine
load: near() of a fingerprint, and add_if_new() of a new one. Throughput: near() from many concurrent
tasks on one event loop, against the synchronous class calling near() in a loop on one thread.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import redis.asyncio

from benchmarks import Figure, corpus, percentile, rate
from simhash_redis import SimhashIndex
from simhash_redis.asyncio import AsyncSimhashIndex

K = 3
TASKS = 64


async def measure(url: str, plain: SimhashIndex, n: int, count: int, command: str) -> list[Figure]:
    """The interleaved single calls, then the concurrent throughput."""
    client = redis.asyncio.Redis.from_url(url)
    aio = await AsyncSimhashIndex(client, plain.name).open()
    every = corpus.fingerprints(n)
    queries = corpus.queries(every, count)
    for q in queries[:500]:
        assert await aio.near(q) == plain.near(q)
    clock = time.perf_counter_ns
    ours, base = [], []
    for q in queries:
        t0 = clock()
        await aio.near(q)
        t1 = clock()
        plain.near(q)
        ours.append((t1 - t0) / 1000)
        base.append((clock() - t1) / 1000)
    fresh = corpus.fingerprints(2 * min(count, 5000), seed=corpus.SEED + 11)
    ours_add, base_add = [], []
    for i in range(0, len(fresh), 2):
        t0 = clock()
        await aio.add_if_new(f"async-{i}", fresh[i])
        t1 = clock()
        plain.add_if_new(f"sync-{i}", fresh[i + 1])
        ours_add.append((t1 - t0) / 1000)
        base_add.append((clock() - t1) / 1000)

    async def worker(part: list[int]) -> None:
        for q in part:
            await aio.near(q)

    start = time.perf_counter()
    await asyncio.gather(*(worker(queries[i::TASKS]) for i in range(TASKS)))
    concurrent = rate(len(queries), time.perf_counter() - start)
    start = time.perf_counter()
    for q in queries:
        plain.near(q)
    sequential = rate(len(queries), time.perf_counter() - start)
    await client.aclose()
    return [
        Figure(
            f"AsyncSimhashIndex.near() p50, N={n:,}",
            percentile(ours, 50),
            "us",
            "SimhashIndex.near() p50",
            percentile(base, 50),
            higher_is_better=False,
            command=command,
            extra={"p99_us": percentile(ours, 99), "sync_p99_us": percentile(base, 99)},
        ),
        Figure(
            f"AsyncSimhashIndex.add_if_new() p50 of a new fingerprint, N={n:,}",
            percentile(ours_add, 50),
            "us",
            "SimhashIndex.add_if_new() p50",
            percentile(base_add, 50),
            higher_is_better=False,
            command=command,
        ),
        Figure(
            f"AsyncSimhashIndex.near() from {TASKS} concurrent tasks, one event loop, N={n:,}",
            concurrent,
            "q/s",
            "SimhashIndex.near() in a loop, one thread",
            sequential,
            command=command,
        ),
    ]


def run(n: int, count: int, command: str = "python -m benchmarks.bench_asyncio") -> list[Figure]:
    """Load the index on a private server and measure both classes on it."""
    with corpus.server() as server:
        plain = SimhashIndex(server.client(), "asyncio", k=K)
        every = corpus.fingerprints(n)
        print(f"  loading {n:,} fingerprints ...", flush=True)
        plain.bulk_add_columns([([corpus.id_of(i) for i in range(n)], every)])
        corpus.pin(0)
        return asyncio.run(measure(server.url, plain, n, count, command))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="fingerprints in the index")
    parser.add_argument("--queries", type=int, default=20_000, help="single queries timed")
    parser.add_argument("--quick", action="store_true", help="N=100,000, fewer queries")
    args = parser.parse_args()
    n, count = (100_000, 5_000) if args.quick else (args.n, args.queries)
    for figure in run(n, count):
        print(figure.line())


if __name__ == "__main__":
    main()
