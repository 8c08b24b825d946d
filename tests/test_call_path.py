"""How many modules of the library a single `near(text)` and `add(id, text)` pass through.

A short path is a design goal (one lookup path, one write path, no layers that only pass a call on), so
the count is measured here against a real server: every Python function of `simhash_redis` that runs
during the call is traced (calls only), after a warm-up call so one-time imports and config loads do not
count.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import redis

from simhash_redis import MinHasher, SimhashIndex, VerifiedIndex

# The target: a lookup or a write touches at most this many modules of the library.
MOST_MODULES = 8

TEXT = "the quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun"
OTHER = "a completely different sentence about redis hamming distances and fingerprints"


def modules_during(call: Callable[[], object]) -> list[str]:
    """The sorted names of the library's modules whose functions run while `call()` runs.

    Args:
        call: The call to trace (already warmed up by the caller).
    """
    seen: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name == "simhash_redis" or name.startswith("simhash_redis."):
                seen.add(name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return sorted(seen)


def _report(what: str, modules: list[str], most: int) -> str:
    return f"{what} passes through {len(modules)} modules (at most {most}):\n  " + "\n  ".join(modules)


def near_modules(client: redis.Redis) -> list[str]:
    """The modules a warmed-up `near(text)` passes through."""
    index = SimhashIndex(client, "path_near")
    index.add("a", TEXT)
    index.near(OTHER)  # warm-up
    modules = modules_during(lambda: index.near(TEXT))
    assert [match.id for match in index.near(TEXT)] == ["a"]
    return modules


def add_modules(client: redis.Redis) -> list[str]:
    """The modules a warmed-up `add(id, text)` passes through."""
    index = SimhashIndex(client, "path_add")
    index.add("warm", OTHER)  # warm-up
    modules = modules_during(lambda: index.add("a", TEXT))
    assert [match.id for match in index.near(TEXT)] == ["a"]
    return modules


def test_near_passes_through_few_modules(redis_client: redis.Redis) -> None:
    modules = near_modules(redis_client)
    print(_report("near(text)", modules, MOST_MODULES))
    assert len(modules) <= MOST_MODULES, _report("near(text)", modules, MOST_MODULES)


def test_add_passes_through_few_modules(redis_client: redis.Redis) -> None:
    modules = add_modules(redis_client)
    print(_report("add(id, text)", modules, MOST_MODULES))
    assert len(modules) <= MOST_MODULES, _report("add(id, text)", modules, MOST_MODULES)


def test_verified_near_modules_for_information(redis_client: redis.Redis) -> None:
    # For information only: a verified lookup also fetches and compares sketches.
    verified = VerifiedIndex(SimhashIndex(redis_client, "path_verified"), MinHasher(num_perm=64))
    verified.add("a", TEXT)
    verified.near(OTHER)  # warm-up
    modules = modules_during(lambda: verified.near(TEXT))
    print(_report("verified near(text)", modules, MOST_MODULES))
    assert modules
