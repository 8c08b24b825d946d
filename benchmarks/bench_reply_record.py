"""The cost of the write script's reply record (a resent call's outcomes): writes with it and without it.

Run from the repository root::

    python -m benchmarks.bench_reply_record [--calls 20000] [--n 200000]

write.lua keeps the reply of each call that changed something for a minute, so that the call sent again
after a lost reply answers what it did. Here the same writes run on one private server through the
script as shipped ("record") and through a copy whose record is turned off ("none"), into two indexes,
call by call in alternating order (so both see the same machine load): add() of a new document
(`--calls`), add_many of new documents in batches of 1,000 (`--n`), then the same batches again (all
unchanged: no record). It prints each variant's p50 and p99 per call, the records left alive with their
``MEMORY USAGE``, and the server's time per command of those the record adds (``INFO commandstats``
counts the commands a script runs).
"""

from __future__ import annotations

import argparse
import functools
import random
import time
from collections.abc import Callable
from typing import Any

import redis

from benchmarks import corpus, percentile
from simhash_redis import SimhashIndex
from simhash_redis.store import writes as writes_module
from simhash_redis.store.store import WRITE

_BATCH = 1000


class _Unrecorded:
    """WRITE with its record turned off (neither read nor written): the same calls, another SHA."""

    def __init__(self, client: redis.Redis) -> None:
        read = b"local kept = redis.call('HGET', record, 'r')\n"
        self.source = WRITE.source.replace(b"\nif wrote then\n", b"\nif false then\n").replace(
            read, b"local kept = false\n"
        )
        assert self.source.count(b"if false then") == 1 and read not in self.source, (
            "write.lua's record is not where this benchmark looks"
        )
        self.sha = str(client.script_load(self.source)).encode()

    def command(self, keys: list[bytes], args: list[bytes | int]) -> list[Any]:
        return [b"EVALSHA", self.sha, len(keys), *keys, *args]


def _records(client: redis.Redis, index: SimhashIndex) -> tuple[int, int]:
    """(how many, MEMORY USAGE bytes in all) of the index's reply records alive."""
    keys = list(client.scan_iter(match=f"{index.keys.base}:reply:*", count=1000))
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.memory_usage(key, samples=0)
        return len(keys), sum(int(b or 0) for b in pipe.execute())


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - start) / 1000


def run(calls: int, n: int) -> None:
    """Alternate the two scripts call by call; print p50 / p99 of each, the records left and their cost
    in commands."""
    with corpus.server() as server:
        client = server.client()
        corpus.pin(0)
        unrecorded = _Unrecorded(client)
        rng = random.Random(3)
        indexes = {variant: SimhashIndex(client, f"rr-{variant}", k=3) for variant in ("record", "none")}
        times: dict[tuple[str, str], list[float]] = {}

        def each(name: str, i: int, call: Callable[[SimhashIndex], object]) -> None:
            for variant in ("record", "none") if i % 2 else ("none", "record"):
                writes_module.WRITE = WRITE if variant == "record" else unrecorded  # type: ignore[assignment]
                times.setdefault((name, variant), []).append(
                    _timed(functools.partial(call, indexes[variant]))
                )

        client.config_resetstat()
        for i in range(calls):
            doc_id, fp = f"s{i}", rng.getrandbits(64)
            each("add(), new", i, lambda index, doc=(doc_id, fp): index.add(*doc))
        stats = client.info("commandstats")
        batches = [[(f"b{i + j}", rng.getrandbits(64)) for j in range(_BATCH)] for i in range(0, n, _BATCH)]
        for i, batch in enumerate(batches):
            each("add_many, new", i, lambda index, batch=batch: index.add_many(batch))
        left = _records(client, indexes["record"])
        for i, batch in enumerate(batches):
            each("add_many, unchanged", i, lambda index, batch=batch: index.add_many(batch))
        writes_module.WRITE = WRITE  # type: ignore[assignment]
        print(f"{calls:,} add() calls and {n // _BATCH:,} add_many of {_BATCH:,} per variant, alternating")
        print("  in us per call:          p50      p99")
        for (name, variant), values in times.items():
            print(f"  {name:<20} {variant:<7} {percentile(values, 50):8.1f} {percentile(values, 99):8.1f}")
        print(
            f"  records alive after the add() calls and loads: {left[0]:,}, {left[1]:,} bytes (MEMORY USAGE)"
        )
        print("  the commands the record adds, over the add() calls (INFO commandstats; evalsha: both):")
        for command in ("time", "pexpireat", "hset", "hget", "evalsha"):
            entry = stats.get(f"cmdstat_{command}") or {}
            calls_of, usec = int(entry.get("calls", 0)), float(entry.get("usec_per_call", 0))
            print(f"    {command:<10} calls {calls_of:>7,}  {usec:6.2f} us each")
        for index in indexes.values():
            index.drop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20_000, help="add() calls timed per variant")
    parser.add_argument("--n", type=int, default=200_000, help="documents of add_many per variant")
    args = parser.parse_args()
    run(args.calls, args.n)


if __name__ == "__main__":
    main()
