"""The write script's compact format for adds, and large batches of adds sent as parts, store what one
general-format call stores."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis

from simhash_redis import Outcome, SimhashIndex, SimhashRedisError
from simhash_redis.codec import encode_fp
from simhash_redis.store import store as store_module
from simhash_redis.store import writes as writes_module_of_writes
from simhash_redis.store.writes import Write, Writes


def _writes(index: SimhashIndex) -> Writes:
    writes = index._writes
    assert isinstance(writes, Writes)
    return writes


def _dump(client: redis.Redis) -> dict[bytes, object]:
    """Every key but the write calls' reply records (named by each call), with its value."""
    out: dict[bytes, object] = {}
    for key in client.keys("*"):
        if b":reply:" in key:
            continue
        kind = client.type(key)
        if kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"set":
            out[key] = client.smembers(key)
        else:
            out[key] = client.get(key)
    return out


def test_fresh_adds_and_general_batches_store_the_same_bytes(any_client: redis.Redis) -> None:
    # The first round's compact 'a' format (all adds) and the general format write the same data.
    ops: list[Write] = [
        (b"id%d" % i, encode_fp((i * 0x9E3779B97F4A7C15) % (1 << 64), 64), None) for i in range(30)
    ]
    ops.append((b"id3", encode_fp(5, 64), None))  # a later pair for the same id wins
    fresh = SimhashIndex(any_client, "fresh", k=3, id_buckets=4)
    assert _writes(fresh).apply(ops)[-1] == Outcome.REPLACED
    fresh_data = {key.replace(b":fresh:", b":x:"): value for key, value in _dump(any_client).items()}
    fresh.drop()
    general = SimhashIndex(any_client, "general", k=3, id_buckets=4)
    assert _writes(general).apply([*ops, (b"gone", b"", None)])[-1] == Outcome.MISSING
    assert {
        key.replace(b":general:", b":x:"): value for key, value in _dump(any_client).items()
    } == fresh_data


def _ops(seed: int, count: int, ids: int) -> list[Write]:
    """Adds with repeated ids (within the batch) and shared fingerprints."""
    rng = random.Random(seed)
    pool = [rng.getrandbits(64) for _ in range(ids // 2 + 1)]
    return [(b"d%d" % rng.randrange(ids), encode_fp(rng.choice(pool), 64), None) for _ in range(count)]


@pytest.mark.parametrize("seed", range(6))
def test_a_batch_sent_in_parts_equals_one_call(
    any_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    before = _ops(seed + 100, 20, 30)  # some ids exist already: conflicts, resolved after the parts
    batch = _ops(seed, 40, 30)
    results = {}
    for name, part in (("whole", 10**9), ("parts", 3)):
        monkeypatch.setattr(store_module, "PART", part)
        index = SimhashIndex(any_client, name, k=3, id_buckets=4)
        _writes(index).apply(before)
        outcomes = _writes(index).apply(batch)
        results[name] = (
            outcomes,
            {k.replace(b":%s:" % name.encode(), b":x:"): v for k, v in _dump(any_client).items()},
        )
        assert index.verify().ok
        index.drop()
    assert results["parts"] == results["whole"]


def _script_loads(client: redis.Redis) -> int:
    """SCRIPT LOAD calls so far (or, before Redis 7.0, which counts no subcommands, any SCRIPT call)."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_script|load", stats.get("cmdstat_script", {})).get("calls", 0))


def test_parts_survive_a_flushed_script_and_a_lost_connection(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "PART", 2)
    index = SimhashIndex(redis_client, "resume", k=3)
    writes = _writes(index)
    ops: list[Write] = [(b"id%d" % i, encode_fp(i * 7919 + 1, 64), None) for i in range(12)]
    calls = 0
    real_call = writes._adds

    def call_then_trouble(*part: Any) -> object:
        nonlocal calls
        calls += 1
        if calls == 2:
            redis_client.script_flush()  # the next part's EVALSHA finds no script
        if calls == 4:
            redis_client.client_kill_filter(_type="normal", skipme=True)  # the connection in use dies
        return real_call(*part)

    monkeypatch.setattr(writes, "_adds", call_then_trouble)
    scripts_loaded = _script_loads(redis_client)
    connections = redis_client.info("stats")["total_connections_received"]
    outcomes = writes.apply(ops)
    assert redis_client.info("stats")["total_connections_received"] > connections  # it reconnected
    assert _script_loads(redis_client) > scripts_loaded
    assert all(o in (Outcome.ADDED, Outcome.UNCHANGED) for o in outcomes)
    assert [index.get(i.decode()) for i, _, _ in ops] == [i * 7919 + 1 for i in range(12)]
    assert index.count() == (12, 12)
    assert index.verify().ok


def test_an_error_in_a_part_keeps_the_parts_before_it(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "PART", 2)
    index = SimhashIndex(redis_client, "stop", k=3)
    blocked = 0x5555_6666_7777_8888
    redis_client.set(index.keys.tables(blocked)[1], "not a set")
    ops: list[Write] = [(b"id%d" % i, encode_fp(i + 1, 64), None) for i in range(4)]
    ops += [(b"bad", encode_fp(blocked, 64), None), (b"after", encode_fp(99, 64), None)]
    with pytest.raises(SimhashRedisError, match="WRONGTYPE"):
        _writes(index).apply(ops)
    assert [index.get(f"id{i}") for i in range(4)] == [1, 2, 3, 4]
    assert index.get("after") is None
    # The failing document's own id entry was written before its table key raised (Lua does not roll
    # back); the key of the wrong type is corruption that verify() reports.
    assert index.count()[1] == 4
    assert not index.verify().ok


@pytest.mark.parametrize("part", [2, 10**9])
def test_a_later_pair_for_the_same_id_wins(
    any_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, part: int
) -> None:
    monkeypatch.setattr(store_module, "PART", part)
    index = SimhashIndex(any_client, "later", k=3)
    pairs = [("x", 1), ("y", 7), ("x", 2), ("x", 1), ("z", 9), ("y", 7)]
    assert index.add_many(pairs) == [
        Outcome.ADDED,
        Outcome.ADDED,
        Outcome.REPLACED,
        Outcome.REPLACED,
        Outcome.ADDED,
        Outcome.UNCHANGED,
    ]
    assert [index.get(i) for i in "xyz"] == [1, 7, 9]
    assert index.count() == (3, 3)
    assert index.verify().ok


def _guarded(index: SimhashIndex, docs: list[tuple[bytes, int]]) -> list[Write]:
    """Guarded adds of add-if-new: each guard the members its tables hold now."""
    members, _ = index._reads.near_and_members([fp for _, fp in docs], 3)
    return [(doc_id, encode_fp(fp, 64), sets) for (doc_id, fp), sets in zip(docs, members, strict=True)]


def test_guarded_adds_store_what_the_general_format_stores(
    any_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Add-if-new's compact format 'g' and the general format (guard '1', set by set) write the same data
    and answer the same outcomes: refused (a set gained a member), unchanged (an id stored with this
    fingerprint, or a write made already), in conflict (the id has another fingerprint: sent again in
    the general format, and replaced), added."""
    rng = random.Random(3)
    stored = [(b"s%d" % i, rng.getrandbits(64)) for i in range(6)]
    fresh = [(b"n%d" % i, rng.getrandbits(64)) for i in range(5)]
    # One per fresh document, in three of its table sets, 16 bits away: no near-duplicate, but a member.
    intruders = [(b"i%d" % i, fp ^ (0xFFFF << 48)) for i, (_, fp) in enumerate(fresh)]
    docs = [*fresh, (b"s0", stored[0][1]), (b"s1", rng.getrandbits(64))]
    results = {}
    for name in ("g", "general"):
        if name == "general":
            monkeypatch.setattr(writes_module_of_writes, "_guarded_adds", lambda ops, tables: False)
        index = SimhashIndex(any_client, name, k=3, id_buckets=4)
        writes = _writes(index)
        writes.apply([(doc_id, encode_fp(fp, 64), None) for doc_id, fp in stored])
        ops = _guarded(index, docs)
        writes.apply([(doc_id, encode_fp(fp, 64), None) for doc_id, fp in intruders])
        refused = writes.apply(ops)
        # The same guards, now expecting the intruders: written (and the write made before, unchanged).
        tables = index.keys.tables
        expecting: list[Write] = []
        for (doc_id, new, sets), (_, fp) in zip(ops, docs, strict=True):
            assert sets is not None
            sets = [list(members) for members in sets]
            for _, other in intruders:
                for t, (mine, theirs) in enumerate(zip(tables(fp), tables(other), strict=True)):
                    if mine == theirs:
                        sets[t].append(encode_fp(other, 64))
            expecting.append((doc_id, new, sets))
        outcomes = writes.apply(expecting)
        results[name] = (
            refused,
            outcomes,
            {k.replace(b":%s:" % name.encode(), b":x:"): v for k, v in _dump(any_client).items()},
        )
        assert index.verify().ok
        index.drop()
    assert results["g"] == results["general"]
    refused, outcomes, _ = results["g"]
    assert refused == [None] * 5 + [Outcome.UNCHANGED, Outcome.REPLACED]
    assert outcomes == [Outcome.ADDED] * 5 + [Outcome.UNCHANGED] * 2


def test_a_guard_ignores_members_that_left(any_client: redis.Redis) -> None:
    """A member read that left its set since (a replaced document's fingerprint) fails no guard."""
    index = SimhashIndex(any_client, "left", k=3, id_buckets=4)
    writes = _writes(index)
    a, b = 0x1234_5678_9ABC_DEF0, 0x1234_0000_0000_0F0F  # one table key in common, 12+ bits apart
    writes.apply([(b"a", encode_fp(a, 64), None)])
    ops = _guarded(index, [(b"b", b)])
    assert any(ops[0][2])  # a is read in one of b's sets
    writes.apply([(b"a", encode_fp(a ^ (0xFFFF << 48), 64), None)])  # a moves: it leaves that set
    assert writes.apply(ops) == [Outcome.ADDED]
    assert index.verify().ok and index.count() == (2, 2)


@pytest.mark.parametrize("stored", [3, 40], ids=["few members", "many members"])
def test_a_guard_over_a_crowded_set_refuses_a_newcomer(any_client: redis.Redis, stored: int) -> None:
    """Pages of one template share a table set by the dozen: the guard finds a member that arrived among
    many read (format 'g' compares many members by a table, a few in place)."""
    index = SimhashIndex(any_client, "crowd", k=3, id_buckets=4)
    writes = _writes(index)
    rng = random.Random(7)
    crowd = [(rng.getrandbits(48) << 16) | 0x1234 for _ in range(stored + 2)]  # one table key: the low bits
    shared = index.keys.tables(crowd[0])[-1]
    assert all(index.keys.tables(fp)[-1] == shared for fp in crowd)
    writes.apply([(b"s%d" % i, encode_fp(fp, 64), None) for i, fp in enumerate(crowd[:stored])])
    ops = _guarded(index, [(b"new", crowd[-1])])
    intruder = encode_fp(crowd[-2], 64)
    writes.apply([(b"intruder", intruder, None)])
    assert writes.apply(ops) == [None]
    assert index.get("new") is None
    ((doc_id, new, sets),) = ops
    assert sets is not None and len(sets[-1]) == stored
    assert writes.apply([(doc_id, new, [*sets[:-1], [*sets[-1], intruder]])]) == [Outcome.ADDED]
    assert index.verify().ok and index.count() == (stored + 2, stored + 2)
