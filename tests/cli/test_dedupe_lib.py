"""simhash_redis.jobs.dedupe: groups, the in-memory index, unique adds and the dry run."""

from __future__ import annotations

import redis

from simhash_redis import Layout, Match, Outcome, SimhashIndex, VerifiedIndex, VerifiedMatch
from simhash_redis.jobs.dedupe import DryRun, MemoryIndex, Pair, VerifiedDryRun, groups
from tests.test_candidate_bound import _edit, _site

FAR = 0xFFFFFFFF << 32


def test_groups_are_connected_components() -> None:
    pairs = [Pair("b", "a", 1), Pair("c", "a", 2), Pair("y", "x", 0), Pair("d", "c", 1), Pair("z", "x", 3)]
    found = groups(pairs)
    assert [(g.id, g.copies, g.size) for g in found] == [("a", ("b", "c", "d"), 4), ("x", ("y", "z"), 3)]
    assert groups([]) == []


def test_memory_index_nearest() -> None:
    memory = MemoryIndex(Layout.pigeonhole(64, 3))
    memory.add("a", 0b1111)
    memory.add("b", 0b0111)
    assert memory.nearest(0b0111, 3) == Match("b", 0b0111, 0)
    assert memory.nearest(0b0011, 3) == Match("b", 0b0111, 1)
    assert memory.nearest(0xFFFF << 40, 3) is None


def test_add_unique(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "u")
    index.add("old", 0b1)
    out = index.add_many([("new", 0b11), ("fresh", FAR), ("copy", (FAR) | 1), ("old", 0b1)], unique=True)
    assert out[0] == Match("old", 0b1, 1)
    assert out[1] is Outcome.ADDED
    assert out[2] == Match("fresh", FAR, 1)
    assert out[3] == Match("old", 0b1, 0)  # already stored: reported as itself, nothing written
    assert index.count()[0] == 2


def test_dry_run_writes_nothing(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "u")
    index.add("old", 0b1)
    check = DryRun(index)
    out = check([("new", 0b11), ("fresh", FAR)]) + check([("again", (FAR) | 2)])
    assert out == [Match("old", 0b1, 1), Outcome.ADDED, Match("fresh", FAR, 1)]
    assert index.count()[0] == 1


def test_a_verified_dry_run_judges_every_candidate_as_add_if_new_does(redis_client: redis.Redis) -> None:
    items = _site(redis_client, "dry-tpl", 300)
    query = _edit(items[38][1], 20, 38)  # a page that 8 others of its template outrank (test_candidate_bound)
    capped = VerifiedIndex(SimhashIndex(redis_client, "dry-tpl"), max_candidates=8)
    assert capped.near(query) == []
    sketch = capped.hasher.sketch_many([query])[0]
    fp = capped.index.fingerprint(query)
    (dry,) = VerifiedDryRun(capped)([("new", fp)], [sketch])
    assert isinstance(dry, VerifiedMatch) and dry.id == "p38"
    assert capped.add_sketched(["new"], [fp], [sketch], unique=True) == [dry]
