"""add_if_new from other workers while a bulk load runs: still exactly one winner per group.

A bulk loader subprocess loads window after window of random documents into the index (its table
writes keep changing the sets that add_if_new guards, so racers retry), until a window after the racers
are done.
Meanwhile racer processes add near-duplicates of each other, group by group, all arriving at each group
at the same moment (a barrier in Redis). Exactly one document of each group must be stored, and every
bulk document too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from simhash_redis import SimhashIndex
from tests.servers import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
NAME = "race"
RACERS = 4
WINDOW = 2000

LOADER = textwrap.dedent(
    """
    import sys
    import redis
    from simhash_redis import SimhashIndex
    from tests.bulk_helpers import load
    from tests.test_bulk_race import NAME, WINDOW
    client = redis.Redis.from_url(sys.argv[1])
    index = SimhashIndex(client, NAME, k=3, id_buckets=1024)
    rounds = 0
    while True:
        # Asked before the window, so a window always follows the count the test last read.
        done = client.exists("racers-done")
        index.bulk_add(load(WINDOW, seed=100 + rounds, twice=0, prefix=f"b{rounds}-"), window=WINDOW)
        rounds += 1
        client.set("bulk-windows", rounds)
        if done and rounds >= 2:
            break
    print(rounds, flush=True)
    """
)

RACER = textwrap.dedent(
    """
    import json, random, sys
    import redis
    from simhash_redis import SimhashIndex
    from tests.test_bulk_race import NAME, RACERS
    url, me, groups = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = redis.Redis.from_url(url)
    index = SimhashIndex(client, NAME, k=3, id_buckets=1024)
    rng = random.Random(4321)
    centres = [rng.getrandbits(64) for _ in range(groups)]
    while not client.exists("bulk-windows"):  # the bulk load is under way
        pass
    stored = 0
    for group in range(groups):
        client.incr(f"arrive:{group}")
        while int(client.get(f"arrive:{group}")) < RACERS:
            pass
        stored += index.add_if_new(f"g{group}-p{me}", centres[group] ^ (1 << (7 * me))) is None
    print(json.dumps(stored), flush=True)
    """
)


def run(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def race(server: ServerProcess, groups: int) -> None:
    server.flushall()
    loader = run(LOADER, server.url)
    racers = [run(RACER, server.url, me, groups) for me in range(RACERS)]
    results = [racer.communicate(timeout=300) for racer in racers]
    with server.client() as client:
        during = int(client.get("bulk-windows") or 0)
        client.set("racers-done", 1)
        out, err = loader.communicate(timeout=300)
        assert loader.returncode == 0, err[-3000:]
        for racer, (_, racer_err) in zip(racers, results, strict=True):
            assert racer.returncode == 0, racer_err[-3000:]
        windows = int(out)
        assert windows >= during + 1 >= 2  # the bulk load ran before, during and after the race
        index = SimhashIndex(client, NAME)
        ids = [f"g{g}-p{p}" for g in range(groups) for p in range(RACERS)]
        stored = [doc_id for doc_id, fp in zip(ids, index.get_many(ids), strict=True) if fp is not None]
        per_group: dict[str, int] = {}
        for doc_id in stored:
            group = doc_id.split("-")[0]
            per_group[group] = per_group.get(group, 0) + 1
        assert sorted(per_group.values()) == [1] * groups, per_group
        assert sum(json.loads(racer_out) for racer_out, _ in results) == groups
        bulk = [f"b{r}-{i}" for r in range(windows) for i in range(WINDOW)]
        assert all(fp is not None for fp in index.get_many(bulk))
        assert index.verify().ok


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """A private server for this module."""
    with ServerProcess() as srv:
        yield srv


def test_add_if_new_during_a_bulk_load(server: ServerProcess) -> None:
    race(server, groups=60)


@pytest.mark.slow
def test_add_if_new_during_a_long_bulk_load(server: ServerProcess) -> None:
    race(server, groups=600)
