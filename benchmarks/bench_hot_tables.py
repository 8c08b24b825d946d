"""Many different fingerprints in one table set (plain) or one band value (verified: a site's template):
the cost of each call whose query falls in it, as the set grows.

Run from the repository root::

    python -m benchmarks.bench_hot_tables [--sizes 1000 10000 50000] [--repeat 20]

Each call reads every member of the hot set (SMEMBERS, or the band value's HGET), and add_if_new's guard
sends what it read back to the write script: a call should cost about what reading the members costs,
not their square. Prints, per call: the client's wall and CPU time and the server's time (INFO
commandstats).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import redis

from simhash_redis import SimhashIndex, VerifiedIndex
from tests.servers import ServerProcess

_TOP = 0xABCD << 48


def _server_usec(client: redis.Redis) -> float:
    stats = client.info("commandstats")
    return float(sum(v["usec"] for k, v in stats.items() if k != "cmdstat_info"))


def _timed(client: redis.Redis, label: str, calls: int, run: Callable[[], object]) -> None:
    server, wall, cpu = _server_usec(client), time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server = _server_usec(client) - server
    print(
        f"  {label:<28} wall {wall / calls * 1e3:8.3f} ms  client cpu {cpu / calls * 1e3:8.3f} ms"
        f"  server {server / calls / 1e3:8.3f} ms"
    )


def _hot_fp(rng: random.Random) -> int:
    return _TOP | rng.getrandbits(48)


def plain(client: redis.Redis, n: int, repeat: int) -> None:
    rng = random.Random(n)
    index = SimhashIndex(client, f"plain{n}")
    index.bulk_add([(f"s{i}", _hot_fp(rng)) for i in range(n)])
    sizes = [client.scard(key) for key in index.keys.tables(_hot_fp(rng))]
    print(f"plain, N = {n} (table set sizes of a query: {sizes})")
    queries = [_hot_fp(rng) for _ in range(repeat)]
    _timed(client, "near()", repeat, lambda: [index.near(q) for q in queries])
    _timed(
        client,
        "add_if_new (single)",
        repeat,
        lambda: [index.add_if_new(f"u{i}", q) for i, q in enumerate(queries)],
    )
    batch = [(f"b{i}", _hot_fp(rng)) for i in range(100)]
    _timed(client, "add_if_new_many (100), /doc", 100, lambda: index.add_if_new_many(batch))
    adds = [(f"a{i}", _hot_fp(rng)) for i in range(repeat)]
    _timed(client, "add", repeat, lambda: [index.add(i, q) for i, q in adds])
    _timed(client, "remove", repeat, lambda: [index.remove(i) for i, _ in adds])
    _timed(client, "verify()", 1, index.verify)


def verified(client: redis.Redis, n: int, repeat: int) -> None:
    rng = random.Random(n)
    index = VerifiedIndex(SimhashIndex(client, f"verified{n}"))
    size = index.hasher.query_bytes
    width = index.verification.band_bytes
    shared = rng.randbytes(width)

    def sketch() -> bytes:
        return shared + rng.randbytes(size - width)

    ids = [f"s{i}" for i in range(n)]
    index.bulk_add_sketched(ids, [rng.getrandbits(64) for _ in ids], [sketch() for _ in ids])
    print(f"verified, N = {n} (one band value shared by all)")
    queries = [(rng.getrandbits(64), sketch()) for _ in range(repeat)]
    _timed(client, "near_sketched()", repeat, lambda: [index.near_sketched([q], [s]) for q, s in queries])
    _timed(
        client,
        "add_if_new (single)",
        repeat,
        lambda: [index.add_sketched([f"u{i}"], [q], [s], unique=True) for i, (q, s) in enumerate(queries)],
    )
    batch = [(rng.getrandbits(64), sketch()) for _ in range(100)]
    _timed(
        client,
        "add_if_new_many (100), /doc",
        100,
        lambda: index.add_sketched(
            [f"b{i}" for i in range(100)], [q for q, _ in batch], [s for _, s in batch], unique=True
        ),
    )
    adds = [(f"a{i}", rng.getrandbits(64), sketch()) for i in range(repeat)]
    _timed(client, "add", repeat, lambda: [index.add_sketched([i], [q], [s]) for i, q, s in adds])
    _timed(client, "remove", repeat, lambda: [index.remove(i) for i, _, _ in adds])
    _timed(client, "verify()", 1, index.verify)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", choices=["plain", "verified"])
    args = parser.parse_args()
    with ServerProcess() as server:
        client = server.client()
        for n in args.sizes:
            if args.only != "verified":
                plain(client, n, args.repeat)
            if args.only != "plain":
                verified(client, n, args.repeat)
            client.flushall()
        client.close()


if __name__ == "__main__":
    main()
