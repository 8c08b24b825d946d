"""near() latency and near_many() throughput at N fingerprints, against the alternatives in the same run.

Run from the repository root::

    python -m benchmarks.bench_near [--n 1000000] [--queries 20000] [--quick]

Ours: `SimhashIndex.near` / `near_many` (k=3, 4 tables) on a private server on loopback, the client
pinned to one CPU and the server to the other. Alternatives, same N, same queries (half near-duplicates
of stored fingerprints, half misses; see `benchmarks.corpus`):

* ``simhash.SimhashIndex`` from the `simhash` 2.1.2 package, in memory (same k, same 4 blocks);
* a numpy brute-force scan (XOR + popcount over one uint64 array);
* a redis-py prototype: the same table sets read with a redis-py pipeline of SMEMBERS, decoded with
  int(), ids fetched with a second pipeline (what a quick redis-py implementation does).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import redis

from benchmarks import Figure, corpus, percentile, rate, timed
from benchmarks.bench_load import load_index
from simhash_redis import SimhashIndex
from simhash_redis.codec import decode_ids

K = 3
_SIGN = 1 << 63


def latencies(run: Callable[[int], object], queries: Sequence[int]) -> list[float]:
    """Microseconds each single query took."""
    out = []
    clock = time.perf_counter_ns
    for q in queries:
        start = clock()
        run(q)
        out.append((clock() - start) / 1000)
    return out


class NumpyScan:
    """Brute force: every stored fingerprint XORed with the query, popcounted."""

    def __init__(self, fps: list[int]) -> None:
        self.values = np.array(fps, dtype=np.uint64)

    def near(self, fp: int, k: int = K) -> list[int]:
        hits = np.flatnonzero(np.bitwise_count(self.values ^ np.uint64(fp)) <= k)
        return self.values[hits].tolist()


class RedisPyPrototype:
    """A quick redis-py implementation over the same keys: pipelines, int() decoding, a second round."""

    def __init__(self, index: SimhashIndex) -> None:
        self.client: redis.Redis = index.client  # type: ignore[assignment]
        self.keys = index.keys

    def near_many(self, fps: Sequence[int], k: int = K) -> list[list[tuple[str, int, int]]]:
        pipe = self.client.pipeline(transaction=False)
        for fp in fps:
            for key in self.keys.tables(fp):
                pipe.smembers(key)
        sets = pipe.execute()
        found: list[list[tuple[bytes, int, int]]] = []
        for q, fp in enumerate(fps):
            hits = {}
            for members in sets[q * 4 : q * 4 + 4]:
                for raw in members:
                    value = int(raw) % (1 << 64)
                    d = (value ^ fp).bit_count()
                    if d <= k:
                        hits[raw] = (value, d)
            found.append([(raw, v, d) for raw, (v, d) in hits.items()])
        wanted = list({raw for hits in found for raw, _, _ in hits})
        ids: dict[bytes, list[str]] = {}
        if wanted:
            for raw in wanted:
                pipe.hget(self.keys.fp_bucket(raw), raw)
            ids = {raw: decode_ids(r) for raw, r in zip(wanted, pipe.execute(), strict=True) if r}
        return [
            sorted(((i, v, d) for raw, v, d in hits for i in ids.get(raw, ())), key=lambda m: (m[2], m[0]))
            for hits in found
        ]

    def near(self, fp: int) -> list[tuple[str, int, int]]:
        return self.near_many([fp])[0]


class RawSocket:
    """The floor of a lookup: its commands written to a plain socket, the replies read but not parsed."""

    _PING = b"*1\r\n$4\r\nPING\r\n"

    def __init__(self, port: int) -> None:
        import socket

        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray(1 << 16)

    def round_trip(self, payload: bytes) -> None:
        """Send the commands, then a PING: everything is answered when the buffer ends in PONG."""
        self.sock.sendall(payload + self._PING)
        got = 0
        while not self.buffer[:got].endswith(b"+PONG\r\n"):
            if got == len(self.buffer):
                got = 0  # only the end matters
            got += self.sock.recv_into(memoryview(self.buffer)[got:])

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def simhash_index(fps: list[int]) -> Any:
    """The `simhash` package's in-memory index of the same fingerprints (None if not installed)."""
    try:
        import logging

        from simhash import Simhash  # type: ignore[import-untyped]
        from simhash import SimhashIndex as TheirIndex
    except ImportError:
        return None
    logging.getLogger("simhash").setLevel(logging.ERROR)
    theirs = TheirIndex([], f=64, k=K)
    for i, fp in enumerate(fps):
        theirs.add(corpus.id_of(i), Simhash(fp, f=64))
    return theirs


def run(
    n: int = 1_000_000,
    count: int = 20_000,
    *,
    quick: bool = False,
    index: SimhashIndex | None = None,
    stored: list[int] | None = None,
    command: str = "python -m benchmarks.bench_near",
) -> list[Figure]:
    """Measure; on a fresh private server unless an index already holding `stored` is given."""
    if index is None or stored is None:
        with corpus.server() as server:
            client = server.client()
            stored = corpus.fingerprints(n)
            index = SimhashIndex(client, "bench", k=K)
            print(f"  loading {n:,} fingerprints ...", flush=True)
            load_index(index, stored)
            return run(n, count, quick=quick, index=index, stored=stored, command=command)
    n = len(stored)
    corpus.pin(0)
    queries = corpus.queries(stored, count)
    print(f"  N={n:,}: {count:,} queries, half near-duplicates of stored ones", flush=True)
    from simhash import Simhash  # type: ignore[import-untyped]

    proto = RedisPyPrototype(index)
    scan = NumpyScan(stored)
    # Same answers first (ids and distances), on a sample.
    for q in queries[:200]:
        ours = [(m.id, m.fingerprint, m.distance) for m in index.near(q)]
        assert ours == proto.near(q), (q, ours, proto.near(q))
        assert sorted(m[1] for m in ours) == sorted(scan.near(q))
    index.near_many(queries[:2000])  # warm up
    lat = latencies(index.near, queries)
    kinds = [i % 2 == 0 for i in range(len(queries))]
    hit_lat = [x for x, h in zip(lat, kinds, strict=True) if h]
    miss_lat = [x for x, h in zip(lat, kinds, strict=True) if not h]
    # An exact copy (distance 0) gets its ids in the first round trip; other hits need a second one.
    stored_set = set(stored)
    exact_lat = [x for x, q, h in zip(lat, queries, kinds, strict=True) if h and q in stored_set]
    near_lat = [x for x, q, h in zip(lat, queries, kinds, strict=True) if h and q not in stored_set]
    sample = queries[: max(200, count // 10)]
    proto_lat = latencies(proto.near, sample)
    scan_lat = latencies(scan.near, sample[: max(100, len(sample) // 4)])
    print("  building simhash.SimhashIndex in memory ...", flush=True)
    start = time.perf_counter()
    theirs = simhash_index(stored)
    build = time.perf_counter() - start
    their_lat: list[float] = []
    if theirs is not None:
        objs = [Simhash(q, f=64) for q in sample]
        their_lat = latencies(lambda i, t=theirs: t.get_near_dups(objs[i]), range(len(objs)))  # type: ignore[arg-type]
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    figures = [
        *_floor_and_text(index, queries),
        Figure(
            f"near() p50 latency, N={n:,}",
            p50,
            "us",
            "simhash.SimhashIndex p50",
            percentile(their_lat, 50) if their_lat else None,
            higher_is_better=False,
            target="<= 50 us",
            met=p50 <= 50,
            command=command,
            extra={
                "p50_hits_us": percentile(hit_lat, 50),
                "p50_exact_hits_us": percentile(exact_lat, 50),
                "p50_hits_at_distance_1_to_k_us": percentile(near_lat, 50),
                "exact_hit_share": len(exact_lat) / len(lat),
                "p50_misses_us": percentile(miss_lat, 50),
                "p99_hits_us": percentile(hit_lat, 99),
                "p99_misses_us": percentile(miss_lat, 99),
                "simhash_index_build_s": build,
            },
        ),
        Figure(
            f"near() p50 vs numpy scan, N={n:,}",
            p50,
            "us",
            "numpy scan p50",
            percentile(scan_lat, 50),
            higher_is_better=False,
            command=command,
        ),
        Figure(
            f"near() p50 vs redis-py prototype, N={n:,}",
            p50,
            "us",
            "redis-py pipeline p50",
            percentile(proto_lat, 50),
            higher_is_better=False,
            command=command,
        ),
        Figure(
            f"near() p99 latency, N={n:,}",
            p99,
            "us",
            "simhash.SimhashIndex p99",
            percentile(their_lat, 99) if their_lat else None,
            higher_is_better=False,
            target="<= 150 us",
            met=p99 <= 150,
            command=command,
        ),
        Figure(
            f"near() p50, hits only / misses only, N={n:,}",
            percentile(hit_lat, 50),
            "us",
            "misses only",
            percentile(miss_lat, 50),
            higher_is_better=False,
            command=command,
        ),
        Figure(
            f"near() p50, hits at distance 1..k / exact copies, N={n:,}",
            percentile(near_lat, 50),
            "us",
            "exact copies",
            percentile(exact_lat, 50),
            higher_is_better=False,
            command=command,
        ),
    ]
    for batch in (100, 1000):
        total = min(len(queries), 20 * batch if quick else 50 * batch)
        chunks = [queries[i : i + batch] for i in range(0, total, batch)]
        ours_s = timed(lambda chunks=chunks: [index.near_many(c) for c in chunks], 3)
        proto_chunks = chunks[: max(2, len(chunks) // 4)]
        proto_s = timed(lambda pc=proto_chunks: [proto.near_many(c) for c in pc], 2)
        ours_rate = rate(total, ours_s)
        figures.append(
            Figure(
                f"near_many throughput, batches of {batch}, 1 core, N={n:,}",
                ours_rate,
                "q/s",
                "redis-py pipeline",
                rate(len(proto_chunks) * batch, proto_s),
                target=">= 50,000 q/s",
                met=ours_rate >= 50_000,
                command=command,
            )
        )
        if theirs is not None:
            objs = [Simhash(q, f=64) for q in queries[: min(total, 5000)]]
            their_s = timed(lambda objs=objs, t=theirs: [t.get_near_dups(o) for o in objs], 1)
            figures.append(
                Figure(
                    f"near_many throughput vs SimhashIndex, batches of {batch}, N={n:,}",
                    ours_rate,
                    "q/s",
                    "simhash.SimhashIndex",
                    rate(len(objs), their_s),
                    command=command,
                )
            )
    return figures


def _floor_and_text(index: SimhashIndex, queries: list[int]) -> list[Figure]:
    """near() against the raw socket floor of its own SMEMBERS, and near(text) of real documents."""
    from simhash_redis import fingerprint
    from simhash_redis.transport import wire

    port = index.client.connection_pool.connection_kwargs["port"]
    floor = RawSocket(port)
    sample = queries[:4000]
    packed = [wire.pack(wire.CommandPerKey(b"SMEMBERS", index.keys.tables(q))) for q in sample]
    # Interleaved, so that both see the same machine load.
    ours: list[float] = []
    raw: list[float] = []
    clock = time.perf_counter_ns
    for i, q in enumerate(sample):
        t0 = clock()
        floor.round_trip(packed[i])
        t1 = clock()
        index.near(q)
        raw.append((t1 - t0) / 1000)
        ours.append((clock() - t1) / 1000)
    ping = latencies(lambda i: floor.round_trip(b""), range(2000))
    floor.close()
    docs = corpus.documents("en", 700) + corpus.documents("zh", 300)
    for doc in docs[:50]:
        index.near(fingerprint(doc))  # warm up: the Unicode tables
    text_lat = latencies(lambda i: index.near(fingerprint(docs[i % len(docs)])), range(3000))
    ratio = percentile(ours, 50) / percentile(raw, 50)
    return [
        Figure(
            "near() p50 vs the raw socket floor of its own 4 SMEMBERS",
            percentile(ours, 50),
            "us",
            "raw socket p50",
            percentile(raw, 50),
            higher_is_better=False,
            target="<= 1.5x the floor",
            met=ratio <= 1.5,
            command="python -m benchmarks.bench_near",
            extra={"raw_ping_p50_us": percentile(ping, 50)},
        ),
        Figure(
            "near(text) p50 end to end (fingerprint + near), 3.5 KB documents, 70% English",
            percentile(text_lat, 50),
            "us",
            "raw socket PING p50",
            percentile(ping, 50),
            higher_is_better=False,
            target="<= 100 us (idle machine)",
            met=percentile(text_lat, 50) <= 100,
            command="python -m benchmarks.bench_near",
        ),
    ]


def breakdown(n: int, count: int) -> None:
    """Print where one miss's time goes: raw socket, transport, whole near(), p50 of `count` each."""
    from simhash_redis.transport import wire

    with corpus.server() as server:
        index = SimhashIndex(server.client(), "bench", k=K)
        stored = corpus.fingerprints(n)
        print(f"  loading {n:,} fingerprints ...", flush=True)
        load_index(index, stored)
        corpus.pin(0)
        misses = corpus.queries(stored, 2 * count)[1::2]
        floor = RawSocket(server.port)
        raw = floor.round_trip
        smembers = [wire.pack(wire.CommandPerKey(b"SMEMBERS", index.keys.tables(q))) for q in misses]
        steps: list[tuple[str, Callable[[int], object]]] = [
            ("raw socket PING", lambda i: raw(b"")),
            ("raw socket 4 SMEMBERS (+PING), replies not parsed", lambda i: raw(smembers[i])),
            (
                "4 SMEMBERS through the transport",
                lambda i: index.store.execute(wire.CommandPerKey(b"SMEMBERS", index.keys.tables(misses[i]))),
            ),
            ("near() of the same miss", lambda i: index.near(misses[i])),
        ]
        for name, step in steps:
            lat = latencies(step, range(len(misses)))
            print(f"  {name:45} p50 {percentile(lat, 50):7.1f} us  p99 {percentile(lat, 99):7.1f} us")
        floor.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="stored fingerprints")
    parser.add_argument("--queries", type=int, default=20_000, help="single queries timed")
    parser.add_argument("--quick", action="store_true", help="N=100,000 and fewer queries")
    parser.add_argument(
        "--breakdown", action="store_true", help="only where one miss's time goes (raw socket to near())"
    )
    args = parser.parse_args()
    n, count = (100_000, 5_000) if args.quick else (args.n, args.queries)
    if args.breakdown:
        breakdown(n, min(count, 5_000))
        return
    for figure in run(n, count, quick=args.quick):
        print(figure.line())


if __name__ == "__main__":
    main()
