"""near() of one fingerprint with the fingerprint map placed by hash (formats 1-3) and by bits (format 4).

Run from the repository root::

    python -m benchmarks.bench_placement [--n 1000000] [--queries 6000]

The same N fingerprints are loaded into two indexes on one private server, one as versions before format 4
created them (the map placed by a hash of each fingerprint: a single lookup asks for the ids of its exact copy
with its table sets, and for those of other hits in a second round trip), one of format 4 (placed by the
fingerprint's low bits: the query's own bucket, read whole with the table sets, holds the ids of every hit
that agrees with it in those bits). Each query is timed on the raw socket floor of its 4 SMEMBERS, on both
indexes, and on the format 4 index asking for its exact copy's ids alone instead of reading its bucket whole
(`Reads.whole_buckets` off), in a rotating order, so that all see the same machine load. Queries: half
near-duplicates of stored fingerprints (0-3 bits flipped), half misses.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from benchmarks import corpus, percentile
from benchmarks.bench_load import load_index
from benchmarks.bench_near import RawSocket
from simhash_redis import SimhashIndex
from simhash_redis.store.config import FP_MAP_HASH, IndexConfig
from simhash_redis.store.keys import KeySchema
from simhash_redis.transport import wire

K = 3


def _hashed(client: object, name: str) -> SimhashIndex:
    """An index as versions before format 4 created it (its meta written first, then opened)."""
    config = dataclasses.replace(IndexConfig.build(k=K), fp_map=FP_MAP_HASH)
    client.hset(KeySchema.meta_key("simhash", name), mapping=config.to_meta())  # type: ignore[attr-defined]
    return SimhashIndex(client, name)  # type: ignore[arg-type]


def run(n: int, count: int) -> None:
    """Load both indexes, time the queries, print p50s by kind and against the floor."""
    with corpus.server() as server:
        client = server.client()
        stored = corpus.fingerprints(n)
        old, new = _hashed(client, "hashed"), SimhashIndex(client, "bits", k=K)
        assert (old.config.format, new.config.format) == (1, 4)
        for index in (old, new):
            print(f"  loading {n:,} fingerprints into format {index.config.format} ...", flush=True)
            load_index(index, stored)
        corpus.pin(0)
        queries = corpus.queries(stored, count)
        for q in queries[:300]:
            assert old.near(q) == new.near(q), q
            assert new.near_many([q, q ^ 1])[0] == new.near(q)
        new.near_many(queries[:2000])
        old.near_many(queries[:2000])
        floor = RawSocket(client.connection_pool.connection_kwargs["port"])
        packed = [wire.pack(wire.CommandPerKey(b"SMEMBERS", new.keys.tables(q))) for q in queries]
        reads = new._reads

        def no_whole_bucket(q: int) -> None:
            reads.whole_buckets = False
            try:
                new.near(q)
            finally:
                reads.whole_buckets = True

        runs = {
            "floor": lambda i: floor.round_trip(packed[i]),
            "hash": lambda i: old.near(queries[i]),
            "bits, exact HGET": lambda i: no_whole_bucket(queries[i]),
            "bits": lambda i: new.near(queries[i]),
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        clock = time.perf_counter_ns
        order = list(runs)
        for i in range(len(queries)):
            for name in order[i % len(order) :] + order[: i % len(order)]:
                start = clock()
                runs[name](i)
                times[name].append((clock() - start) / 1000)
        floor.close()
    members = set(stored)
    kinds = {
        "all": [True] * len(queries),
        "misses": [i % 2 == 1 for i in range(len(queries))],
        "exact copies": [i % 2 == 0 and q in members for i, q in enumerate(queries)],
        "hits at 1..k": [i % 2 == 0 and q not in members for i, q in enumerate(queries)],
    }
    print(f"N={n:,}, {len(queries):,} queries, p50 in us (ratio to the raw floor of the same queries)")
    for kind, chosen in kinds.items():
        cells = []
        for name in runs:
            p50 = percentile([t for t, c in zip(times[name], chosen, strict=True) if c], 50)
            base = percentile([t for t, c in zip(times["floor"], chosen, strict=True) if c], 50)
            cells.append(f"{name} {p50:7.1f}" + ("" if name == "floor" else f" ({p50 / base:.2f}x)"))
        print(f"  {kind:<13} " + "   ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="stored fingerprints")
    parser.add_argument("--queries", type=int, default=6000, help="queries timed")
    args = parser.parse_args()
    run(args.n, args.queries)


if __name__ == "__main__":
    main()
