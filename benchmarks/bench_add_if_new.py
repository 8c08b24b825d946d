"""add_if_new of one document: its read with its bucket read whole against without, and its cost.

Run from the repository root::

    python -m benchmarks.bench_add_if_new [--n 1000000] [--calls 6000]

N fingerprints are bulk-loaded into an index on a private server. Then, call by call in alternating
order (so both see the same machine load), add_if_new of a new fingerprint and of a stored copy, with its read
taking the query's fingerprint-map bucket whole (`Reads.whole_buckets`) and asking
for its exact copy's ids alone (then the other hits' ids); near() of a miss, add() of a new fingerprint and
PING are timed beside them as same-run baselines (add_if_new of a new document takes two round trips: the
check, then the guarded write). Last, the server's own time per write script call (`INFO commandstats`):
add_if_new's guarded write against add()'s, and add()'s script cut short after its call, its set-up and its
whole run, on a second (empty) index of the same server.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import redis

from benchmarks import corpus, percentile
from simhash_redis import SimhashIndex
from simhash_redis.codec import encode_fp
from simhash_redis.store.store import WRITE


def _script_us(client: redis.Redis, calls: Callable[[], None], count: int) -> float:
    """The server's microseconds per EVALSHA over `count` rounds of `calls`."""
    client.config_resetstat()
    for _ in range(count):
        calls()
    return float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])


def _cut_short(client: redis.Redis, count: int) -> dict[str, float]:
    """add()'s write script on a second index: returning at once, after its set-up, and whole."""
    index = SimhashIndex(client, "cut", k=3)
    keys, source, rng = index.keys, WRITE.source, random.Random(5)
    setup_end = source.index(b"local ok, err = pcall(function()")
    variants = {
        "the call alone": b"do return {} end\n" + source,
        "call + set-up": source[:setup_end] + b"do return {} end\n" + source[setup_end:],
        "whole script": source,
    }
    out = {}
    for name, text in variants.items():
        sha = client.script_load(text)

        def call(sha: str = sha) -> None:
            fp = rng.getrandbits(64)
            new, doc = encode_fp(fp, 64), b"c%d" % rng.getrandbits(48)
            names = [keys.counts, keys.id_bucket(doc), keys.fp_bucket(new), *keys.tables(fp), keys.reply(doc)]
            client.evalsha(sha, len(names), *names, 4, b"a", doc, new)

        out[name] = _script_us(client, call, count)
    index.drop()
    return out


def run(n: int, count: int) -> None:
    """Load, time the calls, print p50 / p99 by variant and the server's time per script call."""
    with corpus.server() as server:
        client = server.client()
        stored = corpus.fingerprints(n)
        index = SimhashIndex(client, "aif", k=3)
        print(f"  loading {n:,} fingerprints ...", flush=True)
        index.bulk_add((corpus.id_of(i), fp) for i, fp in enumerate(stored))
        corpus.pin(0)
        reads, rng = index._reads, random.Random(7)
        times: dict[str, list[float]] = {}
        clock = time.perf_counter_ns

        def timed(name: str, call: Callable[..., object], *args: object) -> None:
            start = clock()
            call(*args)
            times.setdefault(name, []).append((clock() - start) / 1000)

        for i in range(count):
            for read in ("whole bucket", "exact HGET") if i % 2 else ("exact HGET", "whole bucket"):
                reads.whole_buckets = read == "whole bucket"
                new, copy = rng.getrandbits(64), stored[rng.randrange(n)]
                timed(f"add_if_new, new, {read}", index.add_if_new, f"new {read} {i}", new)
                timed(f"add_if_new, copy, {read}", index.add_if_new, f"copy {read} {i}", copy)
            reads.whole_buckets = True
            timed("near(), a miss", index.near, rng.getrandbits(64))
            timed("add(), new", index.add, f"add {i}", rng.getrandbits(64))
            timed("PING (redis-py)", client.ping)
        print(f"N={n:,}, {count:,} calls of each, in us")
        for name, values in times.items():
            print(f"  {name:<28} p50 {percentile(values, 50):7.1f}   p99 {percentile(values, 99):7.1f}")
        writes = min(count, 3000)

        def fresh() -> tuple[str, int]:
            return f"w{rng.getrandbits(48)}", rng.getrandbits(64)

        guarded = _script_us(client, lambda: index.add_if_new(*fresh()), writes)
        plain = _script_us(client, lambda: index.add(*fresh()), writes)
        print(f"server time per write script call at N={n:,}: add_if_new's {guarded:.1f} us, ", end="")
        print(f"add()'s {plain:.1f} us")
        for name, us in _cut_short(client, writes).items():
            print(f"  add()'s script on a second index, {name:<15} {us:5.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="stored fingerprints")
    parser.add_argument("--calls", type=int, default=6000, help="calls timed of each kind")
    args = parser.parse_args()
    run(args.n, args.calls)


if __name__ == "__main__":
    main()
