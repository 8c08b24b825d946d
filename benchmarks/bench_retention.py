"""near() on an index with a retention window beside the plain index, measured in the same run.

Run from the repository root::

    python -m benchmarks.bench_retention [--n 1000000] [--queries 20000] [--quick]

The windowed index has a retention of 7 days in periods of 28 hours: N fingerprints in each of the 7
periods that hold documents (7 x N in all), and a query reads the table sets of those 7 periods. Two
plain indexes beside it: one of N (the target's basis), one of the same 7 x N
documents (what the windows themselves cost). All live on one private server on loopback, the client
pinned to one CPU and the server to the other; the single queries of all three are interleaved, so they
see the same machine load. The windowed index's periods are filled with the grouped bulk commands the plain
index's loads use (a benchmark's shortcut: the library writes only into the current period).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from benchmarks import Figure, corpus, percentile, rate, timed
from benchmarks.bench_near import NumpyScan
from simhash_redis import SimhashIndex
from simhash_redis.store import BulkWrites, Store, Writes

K = 3
PERIODS_WITH_DATA = 7


def fill_period(index: SimhashIndex, window: int, ids: list[bytes], fps: list[int]) -> None:
    """Write documents straight into one period's keys with the grouped bulk commands."""
    assert index.windows is not None
    store = Store(index.store.sender, index.windows.schema(window))
    tables = len(index.layout.tables)
    bulk = BulkWrites(store, index.layout, Writes(store, index.f, tables), index.batch_size)
    step = 200_000
    for start in range(0, len(ids), step):
        bulk.write(ids[start : start + step], np.array(fps[start : start + step], dtype=np.uint64))


def writes(client: Any, n: int, command: str) -> Figure:
    """`add_many` of n new fingerprints in batches of 1,000, into an empty windowed and plain index."""
    fps = corpus.fingerprints(n, seed=corpus.SEED + 7)
    pairs = [(corpus.id_of(i), fp) for i, fp in enumerate(fps)]
    rates = {}
    for name, retention in (("plain", None), ("windowed", "7d")):
        index = SimhashIndex(client, f"writes-{name}", k=K, retention=retention)
        start = time.perf_counter()
        for first in range(0, n, 1000):
            index.add_many(pairs[first : first + 1000])
        rates[name] = rate(n, time.perf_counter() - start)
        index.drop()
    return Figure(
        f"add_many with a retention window, batches of 1000, {n:,} new fingerprints",
        rates["windowed"],
        "fps/s",
        "plain index",
        rates["plain"],
        command=command,
    )


def run(n: int, count: int, command: str = "python -m benchmarks.bench_retention") -> list[Figure]:
    """Load both indexes on a private server and measure near() and near_many() on each."""
    with corpus.server() as server:
        client = server.client()
        every = corpus.fingerprints(n * PERIODS_WITH_DATA)
        plain = SimhashIndex(client, "plain", k=K)
        windowed = SimhashIndex(client, "windowed", k=K, retention="7d")
        assert windowed.windows is not None
        whole = SimhashIndex(client, "whole", k=K)
        print(f"  loading {n:,} fingerprints into the plain index ...", flush=True)
        plain.bulk_add_columns([([corpus.id_of(i) for i in range(n)], every[:n])])
        print(f"  loading {len(every):,} fingerprints into the plain index of everything ...", flush=True)
        whole.bulk_add_columns([([corpus.id_of(i) for i in range(len(every))], every)])
        view = windowed.windows.view()
        periods = [w for w in view.windows if w <= view.current][-PERIODS_WITH_DATA:]
        for p, window in enumerate(periods):
            print(f"  loading {n:,} fingerprints into period {p + 1} of {len(periods)} ...", flush=True)
            part = every[p * n : (p + 1) * n]
            fill_period(windowed, window, [corpus.id_of(p * n + i).encode() for i in range(n)], part)
        docs, _ = windowed.count()
        assert docs == n * PERIODS_WITH_DATA, docs
        corpus.pin(0)
        # Queries near the plain index's documents, which are also the first period's.
        queries = corpus.queries(every[:n], count)
        scan = NumpyScan(every)
        for q in queries[:200]:
            assert sorted(m.fingerprint for m in windowed.near(q)) == sorted(scan.near(q))
        windowed.near_many(queries[:2000])
        plain.near_many(queries[:2000])
        whole.near_many(queries[:2000])
        ours, base, same_n = [], [], []
        clock = time.perf_counter_ns
        for q in queries:
            t0 = clock()
            windowed.near(q)
            t1 = clock()
            plain.near(q)
            t2 = clock()
            whole.near(q)
            ours.append((t1 - t0) / 1000)
            base.append((t2 - t1) / 1000)
            same_n.append((clock() - t2) / 1000)
        batch = queries[: min(len(queries), 20_000)]
        chunks = [batch[i : i + 1000] for i in range(0, len(batch), 1000)]
        ours_s = timed(lambda: [windowed.near_many(c) for c in chunks], 3)
        base_s = timed(lambda: [plain.near_many(c) for c in chunks], 3)
        p50, base_p50 = percentile(ours, 50), percentile(base, 50)
        written = writes(client, min(n, 200_000), command)
        return [
            Figure(
                f"near() p50 with a retention window, {PERIODS_WITH_DATA} periods of N={n:,}",
                p50,
                "us",
                f"plain index p50, N={n:,}",
                base_p50,
                higher_is_better=False,
                target="<= 2x the plain index",
                met=p50 <= 2 * base_p50,
                command=command,
                extra={"p99_us": percentile(ours, 99), "plain_p99_us": percentile(base, 99)},
            ),
            Figure(
                f"near() p50 with a retention window vs a plain index of the same {PERIODS_WITH_DATA * n:,}",
                p50,
                "us",
                f"plain index p50, N={PERIODS_WITH_DATA * n:,}",
                percentile(same_n, 50),
                higher_is_better=False,
                command=command,
            ),
            Figure(
                f"near_many throughput with a retention window, batches of 1000, "
                f"{PERIODS_WITH_DATA} periods of N={n:,}",
                rate(len(batch), ours_s),
                "q/s",
                f"plain index, N={n:,}",
                rate(len(batch), base_s),
                command=command,
            ),
            written,
        ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="fingerprints per period")
    parser.add_argument("--queries", type=int, default=20_000, help="single queries timed")
    parser.add_argument("--quick", action="store_true", help="N=100,000 per period, fewer queries")
    args = parser.parse_args()
    n, count = (100_000, 5_000) if args.quick else (args.n, args.queries)
    for figure in run(n, count):
        print(figure.line())


if __name__ == "__main__":
    main()
