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


def test_memory_index_within() -> None:
    memory = MemoryIndex(Layout.pigeonhole(64, 3))
    memory.add("a", 0b1111)
    memory.add("b", 0b0111)
    assert sorted(memory.within(0b0011, 3)) == [Match("a", 0b1111, 2), Match("b", 0b0111, 1)]
    assert memory.within(0xFFFF << 40, 3) == []


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


def test_a_dry_run_of_a_recrawl_answers_as_the_run_would(redis_client: redis.Redis) -> None:
    """Pages crawled again with other texts: the dry run still matched their stored (old) texts and counted
    them added, where the run replaces them (a copy of an old text is then new) and reports REPLACED."""
    a, b, c = 0b1, FAR, 0xF0F0F0 << 20  # far from each other
    plain = [("x", c), ("y", a), ("z", b | 1), ("w", c | 2)]
    for name in ("run", "dry"):
        SimhashIndex(redis_client, name).add_many([("x", a), ("z", b)])
    ran = SimhashIndex(redis_client, "run").add_many(plain, unique=True)
    assert ran == [Outcome.REPLACED, Outcome.ADDED, Match("z", b, 1), Match("x", c, 1)]
    assert DryRun(SimhashIndex(redis_client, "dry"))(plain) == ran
    texts = {name: _edit(_site(redis_client, "texts", 3)[n][1], 40, n) for n, name in enumerate("abc")}
    verified = [VerifiedIndex(SimhashIndex(redis_client, f"v{name}")) for name in ("run", "dry")]
    for index in verified:
        index.add_many([("x", texts["a"]), ("z", texts["b"])])
    docs = [("x", texts["c"]), ("y", texts["a"]), ("z", texts["b"] + " more"), ("w", texts["c"] + " more")]
    fps = verified[0].index.fingerprint_many([doc for _, doc in docs])
    sketches = verified[0].hasher.sketch_many([doc for _, doc in docs])
    ran_verified = verified[0].add_sketched([i for i, _ in docs], fps, sketches, unique=True)
    assert [r if isinstance(r, Outcome) else r.id for r in ran_verified] == [
        Outcome.REPLACED,
        Outcome.ADDED,
        "z",
        "x",
    ]
    dry = VerifiedDryRun(verified[1])([(i, fp) for (i, _), fp in zip(docs, fps, strict=True)], sketches)
    assert dry == ran_verified
