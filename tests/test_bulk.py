"""bulk_add: the grouped bulk path's contract (docs/guarantees.md, "Bulk loads").

Outcomes; the same end state as add_many on random loads (replacements, ids named twice in a window,
shared fingerprints, f = 32/64/128, small windows); reruns; a load interrupted after every step (nothing
half-visible to near, a rerun completes it, verify --repair cleans it); lost replies at every step;
out of memory; a concurrent atomic writer removing a fingerprint the load is adding; Redis 7; a cluster.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from simhash_redis import (
    InvalidArgument,
    InvalidFingerprint,
    InvalidType,
    Layout,
    Match,
    Outcome,
    SimhashIndex,
)
from simhash_redis.errors import RedisOutOfMemory, SimhashRedisError
from simhash_redis.store import bulk as bulk_module
from simhash_redis.store import grouped as chunks_module
from simhash_redis.store.store import BULK_FP, BULK_IDS
from simhash_redis.transport import Backoff
from tests.bulk_helpers import (
    assert_model,
    assert_nothing_half_visible,
    assert_same,
    content,
    final_state,
    load,
)
from tests.faultproxy import FaultProxy
from tests.servers import ServerProcess

A = 0x0123456789ABCDEF
B = 0xFEDCBA9876543210


def index_on(client: redis.Redis, name: str = "bulk", **kwargs: Any) -> SimhashIndex:
    options: dict[str, Any] = {"k": 3, "id_buckets": 64, "batch_size": 50}
    options.update(kwargs)
    return SimhashIndex(client, name, **options)


# -- the contract --------------------------------------------------------------------------------------


def test_outcomes(any_client: redis.Redis) -> None:
    index = index_on(any_client)
    index.add_many([("kept", A), ("moved", A ^ 0xFF00), ("shared", B)])
    progress: list[tuple[int, list[Outcome]]] = []
    outcomes = index.bulk_add(
        [
            ("new", B ^ 1),
            ("kept", A),  # already stored with that fingerprint
            ("moved", B ^ 0xF0F0),  # a replacement: the atomic path
            ("other", B),  # shares a stored fingerprint
            ("twice", 1),  # named twice in the window: the last wins
            ("twice", 2),
        ],
        window=4,
        on_progress=lambda done, window: progress.append((done, window)),
    )
    assert outcomes == [
        Outcome.ADDED,
        Outcome.UNCHANGED,
        Outcome.REPLACED,
        Outcome.ADDED,
        Outcome.ADDED,
        Outcome.REPLACED,
    ]
    assert progress == [(4, outcomes[:4]), (6, outcomes[4:])]
    assert_model(index, {"new": B ^ 1, "kept": A, "moved": B ^ 0xF0F0, "shared": B, "other": B, "twice": 2})
    assert index.near(A ^ 0xFF00, k=0) == []  # the replaced fingerprint left the tables
    assert {m.id for m in index.near(B, k=0)} == {"shared", "other"}
    assert index.verify().ok
    # Run again: every pair is stored already, nothing changes.
    before = content(index)
    assert set(index.bulk_add([("new", B ^ 1), ("other", B)])) == {Outcome.UNCHANGED}
    assert_same(before, content(index))


@pytest.mark.parametrize(("f", "seed", "window"), [(64, 1, 97), (64, 2, 1000), (32, 3, 50), (128, 4, 333)])
def test_same_end_state_as_add_many(redis_client: redis.Redis, f: int, seed: int, window: int) -> None:
    """Random loads with replacements of stored ids, ids named twice, shared fingerprints."""
    first, second = load(600, seed=seed, f=f), load(900, seed=seed + 100, f=f)
    second += [(doc_id, fp ^ 1) for doc_id, fp in first[::7]]  # replacements of stored ids
    random.Random(seed).shuffle(second)
    atomic, bulk = index_on(redis_client, "atomic", f=f), index_on(redis_client, "bulk", f=f)
    atomic.add_many(first)
    bulk.add_many(first)
    expected = atomic.add_many(second)
    assert bulk.bulk_add(second, window=window) == expected
    assert Counter(expected)[Outcome.REPLACED] > 100
    assert_same(content(atomic), content(bulk))
    assert_model(bulk, final_state(first + second))
    assert bulk.verify().ok


def test_a_permuted_layout(redis_client: redis.Redis) -> None:
    """Tables keyed by several blocks (32-bit keys here), 20 of them."""
    layout = Layout.permuted(64, 3, 6)
    items = load(700, seed=18)
    atomic, bulk = (
        index_on(redis_client, "atomic", layout=layout),
        index_on(redis_client, "bulk", layout=layout),
    )
    assert bulk.bulk_add(items, window=300) == atomic.add_many(items)
    assert_same(content(atomic), content(bulk))


def test_outcomes_match_add_many_without_ids_named_twice(redis_client: redis.Redis) -> None:
    items = load(500, seed=5, twice=0)
    replaced = [(doc_id, fp ^ 0xF) for doc_id, fp in items[:100]]
    atomic, bulk = index_on(redis_client, "atomic"), index_on(redis_client, "bulk")
    for index in (atomic, bulk):
        index.add_many(items[:250])
    assert bulk.bulk_add(items + replaced, window=1000) == atomic.add_many(items + replaced)
    assert_same(content(atomic), content(bulk))


def test_a_large_window_with_one_bucket_per_map(redis_client: redis.Redis) -> None:
    """Thousands of entries per command (one id bucket): the scripts read and write in slices."""
    index = index_on(redis_client, id_buckets=1)
    items = load(6000, seed=6)
    index.bulk_add(items)
    index.bulk_add(items[:3000])
    assert_model(index, final_state(items + items[:3000]))
    assert index.verify().ok


def test_empty_and_lazy_input(redis_client: redis.Redis) -> None:
    index = index_on(redis_client)
    assert index.bulk_add([]) == []
    assert index.count() == (0, 0)
    items = load(300, seed=8, twice=0)
    assert index.bulk_add(iter(items), window=7) == [Outcome.ADDED] * 300


def test_documents_are_fingerprinted_by_the_index(redis_client: redis.Redis) -> None:
    index = index_on(redis_client)
    texts = [("a", "the quick brown fox jumps over the lazy dog"), ("b", "an entirely different text")]
    assert index.bulk_add([*texts, ("c", 5)]) == [Outcome.ADDED] * 3
    assert index.get_many(["a", "b", "c"]) == [
        index.fingerprint(texts[0][1]),
        index.fingerprint(texts[1][1]),
        5,
    ]


def test_arguments_are_checked_before_anything_is_written(redis_client: redis.Redis) -> None:
    index = index_on(redis_client, f=32)
    with pytest.raises(InvalidType):
        index.bulk_add("not pairs")  # type: ignore[arg-type]
    for window in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgument):
            index.bulk_add([("a", 1)], window=window)  # type: ignore[arg-type]
    with pytest.raises(InvalidType):
        index.bulk_add([("a", 1)], on_progress=3)  # type: ignore[arg-type]
    bad: list[list[Any]] = [
        [("a", 1), ("b", 2**32)],  # too wide for f=32
        [("a", 1), ("b", -1)],
        [("a", 1), ("b", True)],
        [("a", 1), (2, 1)],
        [("a", 1), ("", 1)],
        [("a", 1), ("\ud800", 1)],
        [("a", 1), ("b", 1, 2)],
        [("a", 1), ("b", 1.5)],
    ]
    for items in bad:
        with pytest.raises((InvalidArgument, InvalidType, InvalidFingerprint)):
            index.bulk_add(items)
    assert index.count() == (0, 0) and index.get("a") is None
    # A bad pair in the second window: the first window is stored.
    with pytest.raises(InvalidFingerprint):
        index.bulk_add([("a", 1), ("b", 2), ("c", 2**40)], window=2)
    assert index.get_many(["a", "b", "c"]) == [1, 2, None]


@pytest.mark.parametrize(("sizes", "window"), [((7, 300, 1, 92), 50), ((400,), 400), ((150, 250), 1000)])
def test_column_batches_are_windowed_across_batches(
    redis_client: redis.Redis, sizes: tuple[int, ...], window: int
) -> None:
    """bulk_add_columns gives bulk_add's outcomes and end state, whatever the batches' sizes."""
    items = load(400, seed=9)
    batches, start = [], 0
    for size in sizes:
        part = items[start : start + size]
        batches.append(([doc_id for doc_id, _ in part], [fp for _, fp in part]))
        start += size
    pairs, columns = index_on(redis_client, "pairs"), index_on(redis_client, "columns")
    done: list[int] = []
    outcomes = columns.bulk_add_columns(iter(batches), window=window, on_progress=lambda n, _: done.append(n))
    assert outcomes == pairs.bulk_add(items, window=window)
    assert done == [min(n, 400) for n in range(window, 400 + window, window)]
    assert_same(content(pairs), content(columns))


def test_column_batches_are_checked(redis_client: redis.Redis) -> None:
    index = index_on(redis_client)
    bad: list[Any] = [
        "ab",
        [["a"]],
        [(["a", "b"], [1])],
        [(["a"], [1], [2])],
        5,
        [("ab", [1, 2])],
        [(iter(["a"]), [1])],
        [[["a"], [1]]],
    ]
    for batches in bad:
        with pytest.raises((InvalidArgument, InvalidType)):
            index.bulk_add_columns(batches)
    with pytest.raises(InvalidFingerprint):
        index.bulk_add_columns([(["a", "b"], [1, -1])])
    assert index.count() == (0, 0)


def test_a_first_load_skips_reading_the_empty_id_map(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One EXISTS finds none of the window's id buckets: no HMGET step; a second load reads them."""
    index = index_on(redis_client)
    items = load(500, seed=12, twice=0)
    sent: list[bytes] = []
    commands = bulk_module.commands

    def spy(head: tuple[bytes, ...], *args: Any, **kwargs: Any) -> Any:
        sent.append(head[0])
        return commands(head, *args, **kwargs)

    monkeypatch.setattr(bulk_module, "commands", spy)
    assert index.bulk_add(items[:300], window=1000) == [Outcome.ADDED] * 300
    assert b"HMGET" not in sent and b"SADD" in sent
    outcomes = index.bulk_add(items, window=1000)
    assert b"HMGET" in sent
    assert outcomes == [Outcome.UNCHANGED] * 300 + [Outcome.ADDED] * 200


def test_a_connection_that_packs_its_own_commands(redis_server: ServerProcess) -> None:
    """A client with another encoding packs commands itself: the pre-packed chunks are parsed back."""
    redis_server.flushall()
    with redis_server.client(encoding="latin-1") as client:
        index = index_on(client)
        items = load(400, seed=9)
        index.bulk_add(items, window=150)
        assert_model(index, final_state(items))
        assert index.verify().ok


# -- interrupted loads ---------------------------------------------------------------------------------


STEPS = ["_tables", "_id_map", "_fp_map", "_check_tables"]


class Interrupted(Exception):
    """Raised by a step instead of running it."""


@pytest.mark.parametrize("step", STEPS)
def test_a_load_interrupted_before_a_step(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """The second window of a load stops before one of its steps; then the same load runs again."""
    items = load(800, seed=10)
    clean = index_on(redis_client, "clean")
    clean.add_many(items[:100])
    clean.bulk_add(items, window=300)
    index = index_on(redis_client)
    index.add_many(items[:100])
    real = getattr(bulk_module.BulkWrites, step)
    calls = []

    def second_time(self: Any, *args: Any) -> Any:
        calls.append(step)
        if len(calls) == 2:
            raise Interrupted
        return real(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(bulk_module.BulkWrites, step, second_time)
        with pytest.raises(Interrupted):
            index.bulk_add(items, window=300)
    found = assert_nothing_half_visible(index)
    if step == "_fp_map":
        assert found["id missing from fingerprint map"] > 200
    if step != "_check_tables":  # nothing of the unfinished window's new ids is visible to near
        named = Counter(doc_id for doc_id, _ in items)
        stored = set(final_state(items[:300], dict(items[:100])))
        new = [(i, fp) for i, fp in items[300:600] if named[i] == 1 and i not in stored]
        assert len(new) > 200
        for doc_id, fp in new:
            assert doc_id not in {m.id for m in index.near(fp, k=0)}
    index.bulk_add(items, window=300)  # run again: converges to the clean load
    assert_same(content(clean), content(index))


def test_verify_repair_cleans_an_interrupted_load(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = load(400, seed=11, twice=0)
    index = index_on(redis_client)

    def interrupt(*args: Any) -> None:
        raise Interrupted

    monkeypatch.setattr(bulk_module.BulkWrites, "_fp_map", interrupt)
    with pytest.raises(Interrupted):
        index.bulk_add(items)
    monkeypatch.undo()
    report = index.verify(repair=True)
    assert report.problems["id missing from fingerprint map"] == 400  # committed in the id map: completed
    assert index.verify().ok
    assert_model(index, dict(items))
    index.bulk_add(items)
    assert index.verify().ok


def test_a_bucket_key_of_the_wrong_type_stops_a_call_with_its_counts_right(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Step 4's call over a run of buckets fails at the sixth bucket (a key another program wrote after
    # step 1 read the id map): the buckets written before it stay written (Redis undoes nothing), and
    # the counts say so.
    index = index_on(redis_client)
    bad = index.store.keys.id_form.key(5)
    original = bulk_module.BulkWrites._id_map

    def spoiled(self: bulk_module.BulkWrites, *args: Any) -> None:
        redis_client.set(bad, b"not a hash")
        original(self, *args)

    monkeypatch.setattr(bulk_module.BulkWrites, "_id_map", spoiled)
    with pytest.raises(SimhashRedisError, match="WRONGTYPE"):
        index.bulk_add(load(400, seed=12, twice=0))
    redis_client.delete(bad)
    docs = sum(int(redis_client.hlen(index.store.keys.id_form.key(b))) for b in range(64))
    assert 0 < docs < 400
    assert index.count()[0] == docs
    assert "counts differ from data" not in index.verify().problems


def test_a_fingerprint_removed_by_an_atomic_writer_meanwhile_is_put_back(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the tables (step 3) and the fingerprint map (step 5), another worker removes the last
    stored id of a fingerprint the load is adding: the script removes it from its tables; the load puts
    it back."""
    index = index_on(redis_client)
    other = index_on(redis_client)
    index.add_many([("old", A), ("x", B)])
    real = bulk_module.BulkWrites._id_map

    def meanwhile(self: Any, *args: Any) -> None:
        real(self, *args)
        assert other.remove("old")  # its fingerprint A leaves the tables (no other id has it yet)

    monkeypatch.setattr(bulk_module.BulkWrites, "_id_map", meanwhile)
    index.bulk_add([("new", A), ("y", A ^ 7)])
    assert index.verify().ok
    assert [m.id for m in index.near(A, k=0)] == ["new"]
    assert_model(index, {"new": A, "y": A ^ 7, "x": B})


def test_an_id_written_by_another_writer_during_the_load_is_reported_by_verify(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The contract forbids it; what happens is documented: the id map keeps the last write, the other
    fingerprint's entry still lists the id, and verify reports it (repair removes it)."""
    index, other = index_on(redis_client), index_on(redis_client)
    real = bulk_module.BulkWrites._tables

    def meanwhile(self: Any, *args: Any) -> Any:
        other.add("x", B)  # after the bulk load read the id map (step 1), before it writes it (step 4)
        return real(self, *args)

    monkeypatch.setattr(bulk_module.BulkWrites, "_tables", meanwhile)
    assert index.bulk_add([("x", A)]) == [Outcome.ADDED]
    monkeypatch.undo()
    assert index.get("x") == A
    assert [m.id for m in index.near(B, k=0)] == ["x"]  # the other writer's entry
    report = index.verify(repair=True)
    assert report.problems["stale id in fingerprint map"] == 1
    assert index.verify().ok
    assert index.near(B, k=0) == [] and [m.id for m in index.near(A, k=0)] == ["x"]


# -- lost replies --------------------------------------------------------------------------------------


@pytest.fixture
def admin(redis_server: ServerProcess) -> Iterator[redis.Redis]:
    """A client to the emptied session server, which has forgotten its scripts (NOSCRIPT is met too)."""
    redis_server.flushall()
    with redis_server.client() as client:
        client.script_flush()
        yield client


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several chunks per step, so that two are in flight when a reply is lost."""
    monkeypatch.setattr(chunks_module, "CHUNK_ARGS", 1500)


@pytest.mark.usefixtures("small_chunks")
# Each step's requests: the id map's and the fingerprint map's script calls are told apart by their SHA.
@pytest.mark.parametrize("marker", [b"HMGET", b"SADD", BULK_IDS.sha, BULK_FP.sha, b"SMISMEMBER"])
@pytest.mark.parametrize("skip", [0, 1])
def test_a_lost_reply_at_each_step(admin: redis.Redis, marker: bytes, skip: int) -> None:
    """The reply to one request of a step is lost after the server applied it (two chunks in flight)."""
    items = load(3000, seed=12)
    clean = index_on(admin, "clean")
    clean.add_many(items[:200])
    clean.bulk_add(items, window=1500)
    with FaultProxy(admin.connection_pool.connection_kwargs["port"], write_marker=marker) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = index_on(client, backoff=Backoff(retries=3, base=0.001, cap=0.01))
        index.add_many(items[:200])
        proxy.arm(skip)
        index.bulk_add(items, window=1500)
        assert proxy.dropped == 1
        client.close()
    assert_same(content(clean), content(index_on(admin)))


@pytest.mark.usefixtures("small_chunks")
def test_replies_lost_at_random(admin: redis.Redis) -> None:
    items = load(4000, seed=13)
    clean = index_on(admin, "clean")
    clean.bulk_add(items, window=700)
    with FaultProxy(admin.connection_pool.connection_kwargs["port"], drop_rate=0.2, seed=3) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = index_on(client, backoff=Backoff(retries=60, base=0.001, cap=0.01))
        index.bulk_add(items, window=700)
        assert proxy.dropped >= 10, proxy.dropped
        client.close()
    assert_same(content(clean), content(index_on(admin)))


# -- out of memory -------------------------------------------------------------------------------------


def test_out_of_memory_is_typed_never_half_visible_and_resumable() -> None:
    """Under maxmemory with noeviction, a command of a step is refused; the load stops there."""
    items = load(16_000, seed=14)
    with (
        ServerProcess({"maxmemory": "3mb", "maxmemory-policy": "noeviction"}) as server,
        server.client() as client,
    ):
        index = index_on(client, backoff=Backoff(retries=1, base=0.01))
        with pytest.raises(RedisOutOfMemory):
            index.bulk_add(items, window=2000)
        assert index.store.execute([(b"DBSIZE",)])[0] > 0
        assert_nothing_half_visible(index)
        assert index.near(items[0][1], k=0) is not None  # reads still work
        client.config_set("maxmemory", "0")
        index.bulk_add(items, window=2000)  # the same load again
        clean = index_on(client, "clean")
        clean.bulk_add(items, window=2000)
        assert_same(content(clean), content(index))
        assert index.verify().ok


# -- other servers ----------------------------------------------------------------------------------------


def test_on_redis_7() -> None:
    """Debian's redis-server 7 (Lua, SMISMEMBER, HSET with many fields) when it is installed."""
    binary = "/usr/bin/redis-server"
    if not os.access(binary, os.X_OK):
        pytest.skip("no /usr/bin/redis-server")
    items = load(2000, seed=15, f=64)
    with ServerProcess(binary=binary) as server, server.client() as client:
        atomic, bulk = index_on(client, "atomic"), index_on(client, "bulk")
        atomic.add_many(items[:500])
        bulk.add_many(items[:500])
        atomic.add_many(items)
        bulk.bulk_add(items, window=800)
        assert_same(content(atomic), content(bulk))


def test_add_if_new_sees_a_bulk_document_once_its_window_is_committed(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before step 5 of its window, a bulk document is invisible: a concurrent add_if_new of a
    near-duplicate stores its own document (a bulk load checks for no near-duplicates). After step 5 it
    is found."""
    index = index_on(redis_client)

    def interrupt(*args: Any) -> None:
        raise Interrupted

    with monkeypatch.context() as patch:
        patch.setattr(bulk_module.BulkWrites, "_fp_map", interrupt)
        with pytest.raises(Interrupted):
            index.bulk_add([("bulk-1", A), ("bulk-2", B)])
    assert index.get("bulk-1") == A  # committed in the id map: get sees it
    assert index.near(A) == []  # near does not
    assert index.add_if_new("racer-1", A ^ 1) is None  # nor does add_if_new
    index.bulk_add([("bulk-1", A), ("bulk-2", B)])  # the load completed
    assert index.add_if_new("racer-2", B ^ 1) == Match("bulk-2", B, 1)
    assert [m.id for m in index.near(A)] == ["bulk-1", "racer-1"]


# -- Redis Cluster ---------------------------------------------------------------------------------------


def test_on_a_cluster(redis_cluster_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same end state as add_many on the cluster; each chunk of a step goes to every node at once,
    in one write per node."""
    from simhash_redis.transport.cluster import ClusterTransport

    first, items = load(400, seed=16), load(2500, seed=17)
    items += [(doc_id, fp ^ 3) for doc_id, fp in first[::5]]
    atomic = index_on(redis_cluster_client, "atomic")
    bulk = index_on(redis_cluster_client, "bulk")
    atomic.add_many(first)
    bulk.add_many(first)
    expected = atomic.add_many(items)
    calls: list[list[tuple[str, int]]] = []
    execute, send = ClusterTransport.execute, ClusterTransport._send

    def recorded_execute(self: Any, commands: Any, **kwargs: Any) -> Any:
        calls.append([])
        return execute(self, commands, **kwargs)

    def recorded_send(self: Any, node: Any, commands: Any) -> Any:
        if calls:
            calls[-1].append((node.name, len(commands)))
        return send(self, node, commands)

    monkeypatch.setattr(ClusterTransport, "execute", recorded_execute)
    monkeypatch.setattr(ClusterTransport, "_send", recorded_send)
    monkeypatch.setattr(chunks_module, "CHUNK_ARGS", 3000)
    assert bulk.bulk_add(items, window=1200) == expected
    monkeypatch.undo()
    grouped = [sends for sends in calls if sum(n for _, n in sends) >= 300]
    assert len(grouped) >= 10
    for sends in grouped:
        nodes = [name for name, _ in sends]
        assert len(nodes) == len(set(nodes)) == 3, sends  # one write per node, all three at once
    assert_same(content(atomic), content(bulk))
    assert_model(bulk, final_state(first + items))
    report = bulk.verify()
    assert report.ok, report.as_dict()
