"""The write script's compact format for adds, and large batches of adds sent as parts, store what one
general-format call stores."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis

from simhash_redis import Outcome, SimhashIndex, SimhashRedisError
from simhash_redis.codec import encode_fp
from simhash_redis.store import write_ops as writes_module
from simhash_redis.store.write_ops import Write
from simhash_redis.store.writes import Writes


def _writes(index: SimhashIndex) -> Writes:
    writes = index._writes
    assert isinstance(writes, Writes)
    return writes


def _dump(client: redis.Redis) -> dict[bytes, object]:
    out: dict[bytes, object] = {}
    for key in client.keys("*"):
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
        monkeypatch.setattr(writes_module, "PART", part)
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
    monkeypatch.setattr(writes_module, "PART", 2)
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
    monkeypatch.setattr(writes_module, "PART", 2)
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
    monkeypatch.setattr(writes_module, "PART", part)
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
