"""near() on one connection: replies checked in slices while the server answers, ids fetched early."""

from __future__ import annotations

import itertools
import os

import pytest
import redis
import redis.exceptions as rex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import Layout, SimhashIndex
from simhash_redis.codec import encode_fp
from simhash_redis.errors import IndexCorrupted, RedisAuthError, SimhashRedisError
from simhash_redis.fingerprinting import engine_choice
from simhash_redis.store import reads as reads_module
from simhash_redis.store import store as store_module
from simhash_redis.transport import wire
from simhash_redis.transport.standalone import Transport
from tests.servers import ServerProcess
from tests.test_index_property import brute_force, clustered

_names = itertools.count()
BASE = 0xF0F0_F0F0_1234_5678


def _hgets(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_hget", {}).get("calls", 0))


@pytest.mark.parametrize("engine", ["native", "python"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sliced_batches_equal_brute_force(
    any_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, engine: str, data: st.DataObject
) -> None:
    # Slices of 2 queries, so even small batches are read in many slices with early id lookups.
    monkeypatch.setattr(reads_module, "_SLICE", 2)
    if engine == "python":
        monkeypatch.setattr(engine_choice, "native", None)
    elif engine_choice.native is None:
        pytest.skip("the compiled core is not built")
    layout = data.draw(st.sampled_from([Layout.pigeonhole(64, 3), Layout.permuted(64, 3, blocks=5)]))
    index = SimhashIndex(any_client, f"slices{next(_names)}", layout=layout)
    try:
        stored = {f"id{i}": fp for i, fp in enumerate(data.draw(clustered(64, 5)))}
        stored.update({f"twin{i}": fp for i, fp in enumerate(list(stored.values())[:3])})
        index.add_many(stored.items())
        probes = data.draw(clustered(64, 5)) + list(stored.values())[:5]
        for k in range(4):
            expected = [brute_force(stored, q, k) for q in probes]
            assert index.near_many(probes, k=k) == expected
            assert [index.near(q, k=k) for q in probes] == expected
    finally:
        index.drop()


def test_an_exact_copy_needs_no_second_round_trip_asked_for_by_field(redis_client: redis.Redis) -> None:
    # Map buckets fewer than a table's (larger than its sets): a single lookup asks for its exact copy.
    index = SimhashIndex(redis_client, "exact", k=3, id_buckets=16)
    assert not index._reads.whole_buckets
    try:
        index.add_many([("a", BASE), ("b", BASE), ("c", BASE ^ 0b111), ("far", BASE ^ 0xFFFF_FFFF)])
        before = _hgets(redis_client)
        assert [m.id for m in index.near(BASE ^ 0b111)] == ["c", "a", "b"]
        assert _hgets(redis_client) - before == 2  # the speculative exact HGET, then the others' ids
        before = _hgets(redis_client)
        only_copies = index.near(BASE ^ 0xFFFF_FFFF)
        assert [(m.id, m.distance) for m in only_copies] == [("far", 0)]
        assert _hgets(redis_client) - before == 1
        before = _hgets(redis_client)
        assert index.near(12345) == []
        assert _hgets(redis_client) - before == 1
    finally:
        index.drop()


def _calls(client: redis.Redis) -> dict[str, int]:
    return {name: int(stat["calls"]) for name, stat in client.info("commandstats").items()}


def test_add_if_new_of_a_stored_copy_reads_once_and_writes_nothing(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "copy", k=3)
    index.add("a", BASE)
    before = _calls(redis_client)
    found = index.add_if_new("b", BASE)
    assert found is not None and found.id == "a"
    used = {name: n - before.get(name, 0) for name, n in _calls(redis_client).items()}
    # One conversation: the tables and the copy's ids, no write script, no second round trip.
    assert {name: n for name, n in used.items() if n and name != "cmdstat_info"} == {
        "cmdstat_smembers": len(index.layout.tables),
        "cmdstat_hgetall": 1,  # the fingerprint-map bucket of the copy, read whole (format 4)
    }


def test_a_stored_fingerprint_without_ids_is_ignored(redis_client: redis.Redis) -> None:
    # An orphan (a cluster write interrupted before its ids were attached): in the tables, not in
    # the fingerprint map. near() ignores it whether it is the query itself or another candidate.
    index = SimhashIndex(redis_client, "orphan", k=3)
    index.add("a", BASE ^ 1)
    for key in index.keys.tables(BASE):
        redis_client.sadd(key, encode_fp(BASE, 64))
    assert [m.id for m in index.near(BASE)] == ["a"]
    assert [[m.id for m in ms] for ms in index.near_many([BASE, BASE ^ 1])] == [["a"], ["a"]]


def test_malformed_members_are_reported_and_the_connection_is_dropped(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "bad", k=3)
    index.add("a", BASE)
    redis_client.sadd(index.keys.tables(BASE)[0], b"not-a-number")
    with pytest.raises(IndexCorrupted):
        index.near(BASE)
    # The connection that raised had unread replies; the next call must not see them.
    redis_client.srem(index.keys.tables(BASE)[0], b"not-a-number")
    assert [m.id for m in index.near(BASE)] == ["a"]


@pytest.mark.parametrize("retention", [None, "1h"])
def test_a_malformed_id_map_value_is_index_corrupted(
    redis_client: redis.Redis, retention: str | None
) -> None:
    # Another program's value under an id: get, add and remove of that id raised ValueError from int()
    # (a traceback from the CLI's get); verify reports it ("malformed id-map entry").
    index = SimhashIndex(redis_client, f"badid{next(_names)}", k=3, retention=retention)
    index.add("a", BASE)
    key = next(k for k in redis_client.scan_iter(match=f"simhash:{index.name}:*id:*"))
    redis_client.hset(key, "a", b"not-a-number")
    for call in (lambda: index.get("a"), lambda: index.add("a", BASE ^ 1), lambda: index.remove("a")):
        with pytest.raises(IndexCorrupted, match="verify"):
            call()
    redis_client.hset(key, "a", encode_fp(BASE, 64))
    assert index.get("a") == BASE and index.remove("a")


def test_exchange_interleaves_sends_and_reads(redis_client: redis.Redis) -> None:
    connection = wire.checkout(redis_client.connection_pool)
    try:
        exchange = wire.Exchange(connection)
        exchange.send([(b"SET", b"k", b"1"), (b"GET", b"k")], [(b"PING",)])
        assert exchange.read(1) == [b"OK"]
        exchange.send([(b"GET", b"k")])
        assert exchange.unread == 3
        with pytest.raises(RuntimeError, match="4 replies asked for, 3 due"):
            exchange.read(4)
        assert exchange.read(3) == [b"1", b"PONG", b"1"]
        assert exchange.round_trip([(b"HGET", b"k", b"f")])[0].args[0].startswith("WRONGTYPE")
        assert exchange.unread == 0
    finally:
        redis_client.connection_pool.release(connection)


def test_a_conversation_that_leaves_replies_unread_closes_its_connection(redis_client: redis.Redis) -> None:
    transport = Transport(redis_client)
    assert transport.execute([(b"PING",)]) == [b"PONG"]
    held = transport.__dict__["_held_connection"]._held
    first = held[0]

    def sloppy(exchange: wire.Exchange) -> None:
        exchange.send([(b"PING",), (b"PING",)])
        exchange.read(1)

    transport.converse(sloppy)
    assert held == [] and first._sock is None
    assert transport.execute([(b"ECHO", b"x")]) == [b"x"]

    def failing(exchange: wire.Exchange) -> None:
        exchange.send([(b"PING",), (b"PING",)])
        raise SimhashRedisError("midway")

    with pytest.raises(SimhashRedisError, match="midway"):
        transport.converse(failing)
    assert transport.execute([(b"ECHO", b"y")]) == [b"y"]


def test_a_conversation_is_run_again_after_a_lost_connection(redis_client: redis.Redis) -> None:
    transport = Transport(redis_client)
    runs = []

    def talk(exchange: wire.Exchange) -> list[object]:
        runs.append(1)
        if len(runs) == 1:
            exchange.connection.disconnect()
            raise rex.ConnectionError("lost")
        return exchange.round_trip([(b"PING",)])

    assert transport.converse(talk) == [b"PONG"]
    assert len(runs) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_use_the_parents_connection(redis_client: redis.Redis) -> None:
    transport = Transport(redis_client)
    assert transport.execute([(b"PING",)]) == [b"PONG"]
    held_connection = transport.__dict__["_held_connection"]
    parent_connection = held_connection._held[0]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        ok = held_connection._held == [] and held_connection.take() is not parent_connection
        os.write(write_end, b"1" if ok else b"0")
        os._exit(0)
    os.close(write_end)
    assert os.read(read_end, 1) == b"1"
    os.close(read_end)
    os.waitpid(pid, 0)
    assert held_connection._held == [parent_connection]
    assert transport.execute([(b"PING",)]) == [b"PONG"]


def _rejected(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("rejected_calls", 0))


def test_an_error_reply_in_a_conversation_is_raised_at_once_with_its_own_type(
    redis_server: ServerProcess, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Typed errors (RedisAuthError, RedisOutOfMemory) are OSErrors like a lost connection: they must
    # not be retried and re-labelled "cannot reach Redis".
    monkeypatch.setattr(store_module, "PART", 2)
    SimhashIndex(redis_client, "acl", k=3).add("a", BASE)
    redis_client.execute_command("ACL", "SETUSER", "nosmembers", "on", ">pw", "~*", "+@all", "-smembers")
    limited = redis_server.client(username="nosmembers", password="pw")
    try:
        index = SimhashIndex(limited, "acl")
        redis_client.execute_command("ACL", "SETUSER", "nosmembers", "-evalsha")
        before = _rejected(redis_client, "smembers")
        with pytest.raises(RedisAuthError):
            index.near(BASE)
        assert _rejected(redis_client, "smembers") - before == 4  # one attempt, one per table
        with pytest.raises(RedisAuthError):
            index.near_many([BASE ^ i for i in range(200)])
        before = _rejected(redis_client, "evalsha")
        with pytest.raises(RedisAuthError):
            index.add_many([(f"d{i}", BASE ^ (i << 20)) for i in range(10)])  # sent as parts of 2
        assert _rejected(redis_client, "evalsha") - before == 1
    finally:
        limited.close()
        redis_client.execute_command("ACL", "DELUSER", "nosmembers")


def test_a_conversation_that_read_everything_keeps_its_connection_after_raising(
    redis_client: redis.Redis,
) -> None:
    transport = Transport(redis_client)
    assert transport.execute([(b"PING",)]) == [b"PONG"]
    held = transport.__dict__["_held_connection"]._held
    first = held[0]

    def read_then_fail(exchange: wire.Exchange) -> None:
        exchange.round_trip([(b"PING",)])
        raise SimhashRedisError("after reading")

    with pytest.raises(SimhashRedisError, match="after reading"):
        transport.converse(read_then_fail)
    assert held == [first] and first._sock is not None
