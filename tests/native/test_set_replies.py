"""SMEMBERS replies read raw off the wire and filtered by the compiled core, against the general path."""

from __future__ import annotations

import random
import socket
from typing import Any

import hiredis
import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from simhash_redis import SimhashIndex
from simhash_redis import compiled as _native
from simhash_redis.fingerprinting import engine_choice
from simhash_redis.store import candidates
from simhash_redis.store import reads as reads_module
from simhash_redis.transport import wire
from simhash_redis.transport.wire import arrays
from tests.native.conftest import pure_engine
from tests.native.test_native_equivalence import CHECK, FEW, GARBAGE, _hits_pure, hit_cases, same
from tests.servers import ServerProcess


def _resp(replies: list[list[bytes]], sets: bool = False) -> bytes:
    """Replies as a server writes them: RESP2 arrays (or RESP3 sets) of bulk strings."""
    head = b"~" if sets else b"*"
    return b"".join(
        head + b"%d\r\n" % len(members) + b"".join(b"$%d\r\n%s\r\n" % (len(m), m) for m in members)
        for members in replies
    )


def _whole(case: tuple[list[int], list[list[Any]], int, int, int]) -> tuple[list[int], list[list[Any]], int]:
    """The case's replies cut or padded to exactly `tables` per query, as a read gives them."""
    fps, replies, tables, _, _ = case
    replies = (replies + [[] for _ in range(len(fps) * tables)])[: len(fps) * tables]
    return fps, replies, tables


def _same_as_pure(fps: list[int], replies: list[list[Any]], tables: int, k: int, f: int, sets: bool) -> None:
    """The compiled filter of the replies' RESP form against the pure filter of the lists, and against
    the pure engine's own reading of the RESP form."""
    data = _resp(replies, sets)
    pure = lambda *_: _hits_pure(fps, replies, tables, k, f)  # noqa: E731
    same(pure, candidates.hits, fps, data, tables, k, f)
    with pure_engine():
        same(pure, candidates.hits, fps, data, tables, k, f)


@CHECK
@given(case=hit_cases(), sets=st.booleans())
def test_hits_of_resp_equal_the_pure_filter(
    case: tuple[list[int], list[list[Any]], int, int, int], sets: bool
) -> None:
    fps, replies, tables = _whole(case)
    _same_as_pure(fps, replies, tables, case[3], case[4], sets)


BYTES_GARBAGE = [raw for raw in GARBAGE if type(raw) is bytes]


@FEW
@given(
    case=hit_cases(),
    junk=st.lists(
        st.tuples(st.integers(0, 20), st.integers(0, 10), st.sampled_from(BYTES_GARBAGE)), max_size=3
    ),
)
def test_malformed_members_raise_as_in_the_pure_filter(
    case: tuple[list[int], list[list[Any]], int, int, int], junk: list[Any]
) -> None:
    fps, replies, tables = _whole(case)
    replies = [list(raws) for raws in replies]
    for at, pos, raw in junk:
        if replies:
            members = replies[at % len(replies)]
            members.insert(pos % (len(members) + 1), raw)
    _same_as_pure(fps, replies, tables, case[3], case[4], False)


MEMBERS = st.lists(st.lists(st.binary(max_size=12), max_size=5), max_size=6)


@CHECK
@given(replies=MEMBERS, cut=st.integers(0, 10**6), want=st.integers(0, 8))
def test_a_scan_stops_at_the_last_whole_reply(replies: list[list[bytes]], cut: int, want: int) -> None:
    data = _resp(replies)
    cut %= len(data) + 1
    ends = [len(_resp(replies[:n])) for n in range(len(replies) + 1)]
    end, found, other = _native.scan_sets(data[:cut], 0, want)
    whole = max(n for n in range(len(ends)) if ends[n] <= cut)
    assert not other
    assert found == min(whole, want)
    assert end == ends[found]


OTHER_SHAPES = [b"-WRONGTYPE x\r\n", b"$1\r\nx\r\n", b"*-1\r\n", b"*1\r\n:5\r\n", b">1\r\n", b"_\r\n"]


@FEW
@given(replies=MEMBERS, at=st.integers(0, 10), other=st.sampled_from(OTHER_SHAPES))
def test_a_reply_of_another_shape_is_named(replies: list[list[bytes]], at: int, other: bytes) -> None:
    at %= len(replies) + 1
    data = _resp(replies[:at]) + other + _resp(replies[at:])
    assert _native.scan_sets(data, 0, 100) == (len(_resp(replies[:at])), at, True)


# ------------------------------------------------------------------------------- on a real server


@pytest.fixture
def client(redis_server: ServerProcess) -> Any:
    made = redis.Redis.from_url(redis_server.url)
    made.flushall()
    yield made
    made.close()


def _exchange(client: redis.Redis) -> wire.Exchange:
    connection = wire.checkout(client.connection_pool)
    if not wire.fast(connection):
        pytest.skip("no hiredis parser: the replies are read by redis-py's")
    return wire.Exchange(connection)


def test_replies_of_many_reads_come_whole_and_the_ones_after_stay_readable(client: redis.Redis) -> None:
    client.sadd("big", *range(-6_000, 6_000))  # replies of several socket reads each (~130 KB)
    client.sadd("small", 1, 2)
    client.set("s", "x")
    exchange = _exchange(client)
    keys = [b"big", b"nokey", b"small", b"big"]
    exchange.send(wire.CommandPerKey(b"SMEMBERS", keys), [(b"GET", b"s"), (b"SMEMBERS", b"small")])
    raw = exchange.read_sets(len(keys))
    assert raw is not None and exchange.unread == 2
    expected = [client.smembers(key) for key in keys]
    assert [set(members) for members in _parsed(raw)] == expected
    assert exchange.read(2) == [b"x", [b"1", b"2"]]
    assert exchange.unread == 0


def test_an_error_reply_leaves_every_reply_to_the_general_reader(client: redis.Redis) -> None:
    client.sadd("a", 1)
    client.set("s", "x")
    exchange = _exchange(client)
    exchange.send(wire.CommandPerKey(b"SMEMBERS", [b"a", b"s", b"a"]))
    assert exchange.read_sets(3) is None
    assert exchange.unread == 3
    replies = exchange.read(3)
    assert replies[0] == replies[2] == [b"1"]
    assert isinstance(replies[1], redis.ResponseError) and "WRONGTYPE" in str(replies[1])


def test_replies_already_in_the_reader_are_read_by_it(client: redis.Redis) -> None:
    client.sadd("a", 1)
    exchange = _exchange(client)
    exchange.send(wire.CommandPerKey(b"SMEMBERS", [b"a"] * 3))
    while not exchange.connection._parser._reader.has_data():  # the first read takes all three
        assert exchange.read(1) == [[b"1"]]
        exchange.send([(b"SMEMBERS", b"a")])
    assert exchange.read_sets(2) is None
    due = exchange.unread
    assert exchange.read(due) == [[b"1"]] * due


def test_a_large_reply_after_whole_ones_goes_to_the_general_reader_with_them(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.sadd("a", 1, 2)
    client.sadd("big", *range(30_000))
    client.set("s", "x")
    monkeypatch.setattr(wire, "_RAW_MOST", 4096)
    for keys in ([b"a", b"big", b"a"], [b"a", b"a", b"s", b"big"]):  # too large, then another shape
        exchange = _exchange(client)
        exchange.send(wire.CommandPerKey(b"SMEMBERS", keys))
        assert exchange.read_sets(len(keys)) is None
        replies = exchange.read(len(keys))
        for key, reply in zip(keys, replies, strict=True):
            if key == b"s":
                assert isinstance(reply, redis.ResponseError)
            else:
                assert set(reply) == client.smembers(key)


def test_slices_after_the_first_are_read_raw_too(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SimhashIndex(client, "slices", k=3)
    fps = [random.Random(n).getrandbits(64) for n in range(300)]
    index.add_many([(f"d{n}", fp) for n, fp in enumerate(fps)])
    monkeypatch.setattr(reads_module, "_SLICE", 2)
    calls = {"raw": 0, "lists": 0}
    original = reads_module.hits

    def counted(*args: Any) -> Any:
        calls["raw" if type(args[1]) is bytes else "lists"] += 1
        return original(*args)

    monkeypatch.setattr(reads_module, "hits", counted)
    found = index.near_many(fps)
    assert [[m.id for m in one] for one in found] == [[f"d{n}"] for n in range(len(fps))]
    assert calls == {"raw": len(fps) // 2, "lists": 0}


def test_a_connection_lost_mid_reply_raises_and_counts_nothing_read(client: redis.Redis) -> None:
    client.sadd("big", *range(30_000))
    exchange = _exchange(client)
    exchange.send(wire.CommandPerKey(b"SMEMBERS", [b"big"]))
    sock = exchange.connection._parser._sock
    sock.shutdown(socket.SHUT_RD)  # reads see the end of the stream
    with pytest.raises(redis.ConnectionError):
        exchange.read_sets(1)
    assert exchange.unread == 1
    exchange.connection.disconnect()


def test_a_reader_without_has_data_is_left_to_read(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.sadd("a", 1)
    exchange = _exchange(client)

    class OldReader:  # a hiredis before 2.1
        def __init__(self, reader: Any) -> None:
            self.gets, self.feed = reader.gets, reader.feed

    parser = exchange.connection._parser
    monkeypatch.setattr(parser, "_reader", OldReader(parser._reader))
    exchange.send(wire.CommandPerKey(b"SMEMBERS", [b"a"]))
    assert exchange.read_sets(1) is None
    assert exchange.read(1) == [[b"1"]]


def test_resp3_sets_are_read_raw(redis_server: ServerProcess) -> None:
    client = redis.Redis.from_url(redis_server.url, protocol=3)
    try:
        client.delete("r3")
        client.sadd("r3", 5, 6)
        exchange = _exchange(client)
        exchange.send(wire.CommandPerKey(b"SMEMBERS", [b"r3", b"nokey"]))
        raw = exchange.read_sets(2)
        assert raw is not None and raw.startswith(b"~")
        assert [sorted(members) for members in _parsed(raw)] == [[b"5", b"6"], []]
    finally:
        client.close()


@FEW
@given(replies=MEMBERS, noise=st.binary(max_size=40), at=st.integers(0, 10**6))
def test_the_scanner_never_reads_more_than_hiredis(replies: list[list[bytes]], noise: bytes, at: int) -> None:
    data = _resp(replies)
    at %= len(data) + 1
    mutated = data[:at] + noise + data[at:]
    end, found, _ = _native.scan_sets(mutated, 0, 100)
    reader = hiredis.Reader()
    reader.feed(mutated[:end])
    parsed = [reader.gets() for _ in range(found)]
    assert all(type(members) is list and all(type(m) is bytes for m in members) for members in parsed)
    assert reader.gets() is False
    assert [list(members) for members in _parsed(mutated[:end])] == parsed


def test_hits_of_resp_refuse_what_is_not_whole_replies() -> None:
    with pytest.raises(ValueError, match="whole"):
        candidates.hits([1], _resp([[b"1"]])[:-1], 1, 3, 64)
    with pytest.raises(ValueError, match="whole"):
        candidates.hits([1, 2], _resp([[b"1"]]), 1, 3, 64)


def _parsed(raw: bytes) -> list[tuple[bytes, ...]]:
    return list(arrays(raw))


@CHECK
@given(
    pairs=st.dictionaries(st.binary(max_size=30), st.binary(max_size=30), max_size=12),
    asked=st.lists(st.binary(max_size=30), max_size=4),
    shape=st.sampled_from([b"%", b"*"]),
    cut=st.integers(0, 400),
)
def test_hash_values_equal_a_hiredis_parse(
    pairs: dict[bytes, bytes], asked: list[bytes], shape: bytes, cut: int
) -> None:
    native = engine_choice.native
    assert native is not None
    count = len(pairs) if shape == b"%" else 2 * len(pairs)
    data = shape + b"%d\r\n" % count
    data += b"".join(b"$%d\r\n%s\r\n" % (len(s), s) for pair in pairs.items() for s in pair)
    # Values that look like fields, and fields asked for that only appear as values.
    fields = asked + list(pairs.values())[:2]
    reader = hiredis.Reader()
    reader.feed(data)
    parsed = reader.gets()
    listed = parsed if isinstance(parsed, dict) else dict(zip(parsed[::2], parsed[1::2], strict=True))
    assert native.hash_values(data, fields) == [listed.get(field) for field in fields]
    if cut < len(data):  # a reply cut short, or with more after it, is not one reply
        with pytest.raises(ValueError):
            native.hash_values(data[:cut], fields)
    with pytest.raises(ValueError):
        native.hash_values(data + b"$1\r\nx\r\n", fields)
