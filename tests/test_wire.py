"""transport.wire: the packer writes what redis-py writes, the reader reads what redis-py reads."""

from __future__ import annotations

import gc
import socket
from typing import Any

import pytest
import redis
import redis.exceptions as rex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.connection import Connection, PythonRespSerializer

from simhash_redis import SimhashIndex
from simhash_redis.fingerprinting import engine_choice
from simhash_redis.transport import wire
from simhash_redis.transport.standalone import Transport
from tests.servers import ServerProcess

_args = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=32),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
)
_names = st.sampled_from([b"SMEMBERS", b"HGET", b"EVALSHA", b"SCRIPT LOAD", "SADD", "CONFIG GET", b"X"])
_commands = st.lists(st.tuples(_names, st.lists(_args, max_size=6)).map(lambda c: (c[0], *c[1])), max_size=8)


def _redis_py(commands: list[Any], packer: Any = None) -> bytes:
    connection = Connection(command_packer=packer)
    return b"".join(bytes(chunk) for chunk in connection.pack_commands(commands))


@given(_commands)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_pack_equals_redis_py(commands: list[Any]) -> None:
    if not commands:
        return
    assert wire.pack(commands) == _redis_py(commands)
    python_packer = PythonRespSerializer(6000, Connection().encoder.encode)
    assert wire.pack(commands) == _redis_py(commands, python_packer)


@given(
    st.sampled_from([b"SMEMBERS", b"GET", b"SCRIPT LOAD", b"HGET"]),
    st.lists(st.binary(min_size=0, max_size=30), max_size=20),
    st.booleans(),
    st.none() | st.binary(max_size=30),
)
def test_same_equals_the_commands_it_stands_for(
    name: bytes, keys: list[bytes], fixed: bool, field: bytes | None
) -> None:
    if fixed:
        keys = [key.ljust(30, b"k") for key in keys]
    same = wire.CommandPerKey(name, keys, field)
    tail = () if field is None else (field,)
    assert list(same) == [(name, key, *tail) for key in keys]
    assert len(same) == len(keys)
    assert list(same[1:3]) == [(name, key, *tail) for key in keys[1:3]]
    if keys:
        assert same[0] == (name, keys[0], *tail)
        assert wire.pack(same) == _redis_py(list(same))
    else:
        assert wire.pack(same) == b""


def test_pack_refuses_what_redis_py_refuses() -> None:
    for bad in (True, None, object()):
        with pytest.raises(rex.DataError):
            wire.pack([(b"SET", b"k", bad)])


def _script_commands() -> list[Any]:
    return [
        (b"SMEMBERS", b"s"),
        (b"SMEMBERS", b"nokey"),
        (b"HGET", b"h", b"a"),
        (b"HGET", b"h", b"missing"),
        (b"HGETALL", b"h"),
        (b"HMGET", b"h", b"a", b"b"),
        (b"GET", b"s"),  # WRONGTYPE error reply
        (b"EVALSHA", b"0" * 40, 0),  # NOSCRIPT error reply
        (b"EVAL", b"return {1, {2, 'x'}, redis.error_reply('boom')}", 0),
        (b"INCR", b"n"),
        (b"PING",),
        (b"SET", b"big", b"x" * 300_000),
        (b"GET", b"big"),
        (b"SMEMBERS", b"large"),
    ]


def _setup(client: redis.Redis) -> None:
    client.sadd(b"s", *range(-5, 5))
    client.sadd(b"large", *range(-3000, 3000))
    client.hset(b"h", mapping={b"a": b"1", b"c": b"3"})


def _normal(reply: Any) -> Any:
    if isinstance(reply, Exception):
        return (type(reply), str(reply))
    if isinstance(reply, list):
        return [_normal(r) for r in reply]
    return reply


def _by_redis_py(connection: Any, commands: list[Any]) -> list[Any]:
    connection.send_packed_command(connection.pack_commands(commands))
    out = []
    for _ in commands:
        try:
            out.append(connection.read_response(disable_decoding=True))
        except rex.ResponseError as exc:
            out.append(exc)
    return out


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("decode", [False, True])
def test_reader_reads_what_redis_py_reads(redis_server: ServerProcess, protocol: int, decode: bool) -> None:
    redis_server.flushall()
    client = redis_server.client(protocol=protocol, decode_responses=decode)
    try:
        _setup(client)
        connection = wire.checkout(client.connection_pool)
        try:
            commands = _script_commands()
            theirs = _by_redis_py(connection, commands)
            assert wire.fast(connection)
            ours = wire.Exchange(connection).round_trip(commands)
            # INCR differs by one between the two runs; everything else is the same reply.
            assert ours[9] == theirs[9] + 1
            del ours[9], theirs[9]
            assert _normal(ours) == _normal(theirs)
            assert isinstance(ours[6], rex.ResponseError) and isinstance(ours[7], rex.NoScriptError)
            assert isinstance(ours[8][2], rex.ResponseError)
            assert not connection._parser.can_read(0)  # nothing left unread
            assert wire.Exchange(connection).round_trip([(b"PING",)]) == [b"PONG"]
        finally:
            client.connection_pool.release(connection)
    finally:
        client.close()


def test_reader_handles_replies_split_across_reads(redis_client: redis.Redis) -> None:
    _setup(redis_client)
    connection = wire.checkout(redis_client.connection_pool)
    try:
        connection._parser._buffer = bytearray(7)  # every reply arrives in many tiny reads
        commands = _script_commands()
        replies = wire.Exchange(connection).round_trip(commands)
        assert sorted(int(x) for x in replies[13]) == list(range(-3000, 3000))
        assert replies[12] == b"x" * 300_000
    finally:
        connection.disconnect()
        redis_client.connection_pool.release(connection)


def test_reader_raises_on_a_closed_connection(redis_client: redis.Redis) -> None:
    connection = wire.checkout(redis_client.connection_pool)
    try:
        wire.Exchange(connection).send([(b"PING",)])
        connection._parser._sock.shutdown(socket.SHUT_RD)
        connection._parser._reader = type(connection._parser._reader)(  # drop anything already fed
            notEnoughData=wire.NOT_ENOUGH_DATA
        )
        with pytest.raises(rex.ConnectionError):
            wire.read(connection, 2)
    finally:
        connection.disconnect()
        redis_client.connection_pool.release(connection)


def test_fallback_on_fakeredis(fake_client: redis.Redis) -> None:
    fake_client.sadd(b"s", 1, 2)
    connection = wire.checkout(fake_client.connection_pool)
    try:
        assert not wire.fast(connection)
        replies = wire.Exchange(connection).round_trip([(b"SMEMBERS", b"s"), (b"GET", b"s"), (b"PING",)])
        assert sorted(replies[0]) == [b"1", b"2"]
        assert isinstance(replies[1], rex.ResponseError)
        assert replies[2] in (b"PONG", True)
    finally:
        fake_client.connection_pool.release(connection)


def test_held_connection_reuses_a_clean_connection_and_lets_go(redis_client: redis.Redis) -> None:
    pool = redis_client.connection_pool
    transport = Transport(redis_client)
    assert transport.execute([(b"PING",)]) == [b"PONG"]
    held = transport.__dict__["_held_connection"]._held
    assert len(held) == 1
    first = held[0]
    assert transport.execute([(b"PING",)]) == [b"PONG"]
    assert held == [first]
    # A connection that went bad while held is replaced, not used.
    first.disconnect()
    assert transport.execute([(b"PING",)]) == [b"PONG"]
    in_use = len(pool._in_use_connections)
    del transport, held, first
    gc.collect()
    assert len(pool._in_use_connections) == in_use - 1


def test_transport_survives_a_server_restart() -> None:
    with ServerProcess() as server:
        client = server.client()
        transport = Transport(client)
        assert transport.execute([(b"PING",)]) == [b"PONG"]
        server.restart()
        assert transport.execute([(b"PING",)]) == [b"PONG"]
        client.close()


@pytest.mark.parametrize("engine", ["native", "python"])
def test_near_same_results_in_either_engine(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    if engine == "python":
        monkeypatch.setattr(engine_choice, "native", None)
    elif engine_choice.native is None:
        pytest.skip("the compiled core is not built")
    index = SimhashIndex(redis_client, "wire", k=3)
    base = 0xF0F0_F0F0_1234_5678
    docs = [(f"d{i}", base ^ (1 << i) ^ (1 << (i + 7) % 64)) for i in range(64)]
    docs += [(f"e{i}", (base ^ 0xFFFF) + i) for i in range(50)]
    docs += [("top", (1 << 64) - 1), ("zero", 0), ("same", base), ("same2", base)]
    index.add_many(docs)
    for query in (base, base ^ 1, (1 << 64) - 2, 1, base ^ 0xFFFF):
        expected = sorted(
            (bin(fp ^ query).count("1"), doc_id, fp) for doc_id, fp in docs if bin(fp ^ query).count("1") <= 3
        )
        got = [(m.distance, m.id, m.fingerprint) for m in index.near(query)]
        assert got == expected
    many = index.near_many([base, base ^ 1, 12345])
    assert many == [index.near(base), index.near(base ^ 1), index.near(12345)]
