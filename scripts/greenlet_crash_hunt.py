"""Runs each asyncio API call that may build large numpy arrays in a subprocess, reporting signal deaths.

numpy's temporary elision (arrays of 256 KiB or more) calls backtrace(), which crashes inside a greenlet:
this hunts for such calls on a private server and cluster (tests/servers.py). Usage:
`python scripts/greenlet_crash_hunt.py [scenario ...]` (all by default).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

N = 40_000  # 40,000 x 8 bytes: over numpy's 256 KiB elision limit


def fps(n: int, bits: int = 64, seed: int = 1) -> list[int]:
    """`n` random fingerprints of `bits` bits."""
    rng = random.Random(seed)
    return [rng.getrandbits(bits) for _ in range(n)]


def texts(n: int) -> list[str]:
    """`n` distinct short texts."""
    return [f"document number {i} about topic {i % 97} with words {i * 7} and {i * 13}" for i in range(n)]


async def plain(url: str, name: str, calls: str, bits: int = 64, n: int = N, **options: Any) -> None:
    """Calls of an AsyncSimhashIndex, named by letters: a add_many, i add_if_new_many, n near_many,
    g get_many, c count, v verify, r remove_many, d drop, b bulk_add, t add_many of texts."""
    from simhash_redis.asyncio import AsyncSimhashIndex

    async with await AsyncSimhashIndex.from_url(url, name, f=bits, **options) as index:
        values, ids = fps(n, bits), [f"d{i}" for i in range(n)]
        steps: dict[str, Callable[[], Awaitable[Any]]] = {
            "a": lambda: index.add_many(zip(ids, values, strict=True)),
            "i": lambda: index.add_if_new_many(
                zip([f"e{i}" for i in range(n)], fps(n, bits, 2), strict=True)
            ),
            "n": lambda: index.near_many(fps(n, bits, 3)),
            "g": lambda: index.get_many(ids),
            "c": lambda: index.count(),
            "v": lambda: index.verify(),
            "r": lambda: index.remove_many(ids),
            "d": lambda: index.drop(),
            "b": lambda: index.bulk_add(zip([f"b{i}" for i in range(n)], fps(n, bits, 4), strict=True)),
            "t": lambda: index.add_many(zip([f"t{i}" for i in range(n)], texts(n), strict=True)),
        }
        for step in calls:
            await steps[step]()


async def verified(url: str, name: str, calls: str, n: int = N // 4, **options: Any) -> None:
    """Calls of an AsyncVerifiedIndex (texts): a add_many, i add_if_new_many, n near_many, g get_many,
    c count, v verify, r remove_many, d drop."""
    from simhash_redis.asyncio import AsyncVerifiedIndex

    async with await AsyncVerifiedIndex.from_url(url, name, **options) as index:
        ids, docs = [f"d{i}" for i in range(n)], texts(n)
        steps: dict[str, Callable[[], Awaitable[Any]]] = {
            "a": lambda: index.add_many(zip(ids, docs, strict=True)),
            "i": lambda: index.add_if_new_many(zip([f"e{i}" for i in range(n)], docs, strict=True)),
            "n": lambda: index.near_many(docs),
            "g": lambda: index.get_many(ids),
            "c": lambda: index.count(),
            "v": lambda: index.verify(),
            "r": lambda: index.remove_many(ids),
            "d": lambda: index.drop(),
        }
        for step in calls:
            await steps[step]()


async def opened(url: str, name: str, calls: str) -> None:
    """`simhash_redis.asyncio.open_index`, then a plain index's calls."""
    from simhash_redis.asyncio import open_index

    index = await open_index(name, url, verified=False, k=3)
    try:
        await index.add_many(zip([f"d{i}" for i in range(N)], fps(N), strict=True))  # type: ignore[arg-type]
        await index.near_many(fps(N, seed=3))  # type: ignore[arg-type]
        await index.count()
        await index.verify()
    finally:
        await index.aclose()


# name -> (target: "server" or "cluster", function, keyword arguments)
SCENARIOS: dict[str, tuple[str, Callable[..., Awaitable[None]], dict[str, Any]]] = {}
for target in ("server", "cluster"):
    t = target[0]
    SCENARIOS[f"{t}-plain64"] = (target, plain, {"calls": "aingcvrd", "k": 3})
    SCENARIOS[f"{t}-plain128"] = (target, plain, {"calls": "aingcvrd", "bits": 128, "k": 6})
    SCENARIOS[f"{t}-bulk64"] = (target, plain, {"calls": "bncv", "k": 3})
    SCENARIOS[f"{t}-bulk128"] = (target, plain, {"calls": "bncv", "bits": 128, "k": 6})
    SCENARIOS[f"{t}-texts"] = (target, plain, {"calls": "tcv", "k": 3, "n": N // 4})
    SCENARIOS[f"{t}-buckets"] = (target, plain, {"calls": "acvd", "k": 3, "id_buckets": 1 << 20, "n": 1000})
    SCENARIOS[f"{t}-near100k"] = (target, plain, {"calls": "an", "k": 3, "n": 100_000})
    SCENARIOS[f"{t}-window"] = (target, plain, {"calls": "aingcvrd", "k": 3, "retention": "1h"})
    SCENARIOS[f"{t}-window-days"] = (target, plain, {"calls": "acv", "k": 3, "retention": "30d", "n": 1000})
    SCENARIOS[f"{t}-verified"] = (target, verified, {"calls": "aingcvrd"})
    SCENARIOS[f"{t}-verified-window"] = (target, verified, {"calls": "aingcvd", "retention": "1h"})
    SCENARIOS[f"{t}-open"] = (target, opened, {"calls": ""})
    # One batch of 40,000 (batch_size is an option): every per-batch array over the limit.
    big = {"batch_size": N}
    SCENARIOS[f"{t}-batch64"] = (target, plain, {"calls": "aingcvrbd", "k": 3, **big})
    SCENARIOS[f"{t}-batch128"] = (target, plain, {"calls": "aingcvrbd", "bits": 128, "k": 6, **big})
    SCENARIOS[f"{t}-batch-window"] = (target, plain, {"calls": "aingcvrd", "k": 3, "retention": "1h", **big})
    SCENARIOS[f"{t}-batch-texts"] = (target, plain, {"calls": "tn", "k": 3, **big})
    SCENARIOS[f"{t}-batch-verified"] = (target, verified, {"calls": "aingcvrd", "n": N, **big})
    SCENARIOS[f"{t}-python-texts"] = (target, plain, {"calls": "t", "k": 3, "engine": "python", **big})
    SCENARIOS[f"{t}-python-verified"] = (target, verified, {"calls": "an", "engine": "python", **big})


def child(name: str, url: str) -> None:
    """Run one scenario here (the subprocess)."""
    _, fn, kwargs = SCENARIOS[name]
    kwargs = dict(kwargs)
    os.environ["SIMHASH_REDIS_ENGINE"] = kwargs.pop("engine", "")
    asyncio.run(fn(url, name, **kwargs))


def main(names: list[str]) -> int:
    sys.path.insert(0, ".")
    from tests.servers import ClusterProcess, ServerProcess

    names = names or list(SCENARIOS)
    crashed = 0
    with ServerProcess() as server, ClusterProcess() as cluster:
        for name in names:
            target = SCENARIOS[name][0]
            url = server.url if target == "server" else cluster.url
            (server if target == "server" else cluster).flushall()
            start = time.monotonic()
            proc = subprocess.run(
                [sys.executable, __file__, "--child", name, url], capture_output=True, text=True
            )
            took = time.monotonic() - start
            if proc.returncode < 0:
                crashed += 1
                verdict = f"CRASH {signal.Signals(-proc.returncode).name}"
            else:
                verdict = "ok" if proc.returncode == 0 else f"error {proc.stderr.strip().splitlines()[-1:]}"
            print(f"{name:24} {verdict} ({took:.1f} s)", flush=True)
    return 1 if crashed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main(sys.argv[1:]))
