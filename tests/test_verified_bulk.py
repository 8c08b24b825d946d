"""The grouped bulk path of a verified index (`VerifiedIndex.bulk_add_sketched`, `load --bulk`).

The guarantees of plain bulk loads (tests/test_bulk.py), each document with its sketch and band values:
the same stored data and near() results as the atomic path; a window written again changes nothing;
replacements and ids named twice through the atomic path; a load stopped before each step shows
nothing half-written (no listed id without its sketch or its band values) and completes when run
again; lost replies at each step; a cluster.
"""

from __future__ import annotations

import io
import logging
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
import redis

from simhash_redis import Outcome, SimhashIndex, VerifiedIndex
from simhash_redis.codec import decode_ids, decode_sketches, pack_fps, unpack_fps
from simhash_redis.jobs.dump import export_index
from simhash_redis.store import bulk as bulk_module
from simhash_redis.store import grouped as chunks_module
from simhash_redis.store.store import BULK_BAND, BULK_COMMIT, BULK_IDS, BULK_SKETCH, WRITE
from simhash_redis.transport import Backoff
from tests.bulk_helpers import INVISIBLE
from tests.faultproxy import FaultProxy
from tests.servers import ServerProcess
from tests.test_verified_mode import article, one_word_edit

#: What an interrupted verified bulk load may leave besides a plain one's, invisible to near() too: a
#: sketch set beside a fingerprint whose ids do not list its id yet.
LEFT = INVISIBLE | {"sketch without a document"}

Docs = tuple[list[str], list[int], list[bytes]]


def verified_on(client: Any, name: str, **kwargs: Any) -> VerifiedIndex:
    """Small maps and band tables, so that keys get several entries per window."""
    options: dict[str, Any] = {"k": 3, "id_buckets": 64, "batch_size": 50}
    options.update(kwargs)
    return VerifiedIndex(SimhashIndex(client, name, **options), band_buckets=32)


def texts(count: int, seed: int) -> list[tuple[str, str]]:
    """(id, text) pairs: articles, one-word edits of them (shared band values), exact copies (shared
    fingerprints and sketches)."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for i in range(count):
        roll = rng.random()
        if out and roll < 0.25:
            text = one_word_edit(out[rng.randrange(len(out))][1], seed * 100_000 + i)
        elif out and roll < 0.35:
            text = out[rng.randrange(len(out))][1]
        else:
            text = article(seed * 100_000 + i, words=60)
        out.append((f"{seed}-{i}", text))
    return out


def sketched(index: VerifiedIndex, pairs: list[tuple[str, str]]) -> Docs:
    """Ids, fingerprints and query sketches, as a loader's workers make them."""
    docs = [text for _, text in pairs]
    return [i for i, _ in pairs], index.index.fingerprint_many(docs), index.hasher.sketch_many(docs)


def bulk(index: VerifiedIndex, docs: Docs, window: int) -> list[Outcome]:
    ids, fps, sketches = docs
    out: list[Outcome] = []
    for start in range(0, len(ids), window):
        part = slice(start, start + window)
        out += index.bulk_add_sketched(ids[part], fps[part], sketches[part])
    return out


def atomic(index: VerifiedIndex, docs: Docs) -> list[Any]:
    return index.add_sketched(*docs)


def raw(index: VerifiedIndex) -> dict[bytes, Any]:
    """Every key of the index but its meta and the write calls' reply records (named by each call), with
    its value as stored (hashes' values byte for byte)."""
    store = index.store
    keys = sorted(
        {key for batch in store.scan("all") for key in batch if store.keys.kind_of(key) != ("reply", 0)}
        - {store.keys.meta}
    )
    kinds = store.execute([(b"TYPE", key) for key in keys])
    reads = [
        (b"HGETALL" if bytes(kind) == b"hash" else b"SMEMBERS", key)
        for key, kind in zip(keys, kinds, strict=True)
    ]
    out: dict[bytes, Any] = {}
    for key, (command, _), value in zip(keys, reads, store.execute(reads), strict=True):
        name = key.split(b":", 2)[2]
        if command == b"SMEMBERS":
            out[name] = set(value)
        else:
            out[name] = dict(
                value.items() if isinstance(value, dict) else zip(value[::2], value[1::2], strict=True)
            )
    return out


def exported(index: VerifiedIndex) -> tuple[dict[str, Any], list[Any]]:
    """`export_index`'s header without the index's name, its records in order of id, and its end record
    without the checksum (of the bytes in the order SCAN gave them)."""
    out = io.BytesIO()
    export_index(index.index, out)
    header, *records = msgpack.Unpacker(io.BytesIO(out.getvalue()), raw=False)
    header.pop("name")
    records[-1].pop("xxh3_64")
    return header, sorted(records, key=lambda record: record[0] if isinstance(record, list) else "")


def logical(index: VerifiedIndex) -> dict[bytes, Any]:
    """`raw`, without what depends on the order writes came in: id lists and band values as sets,
    sketches by id."""
    f = index.index.f
    out: dict[bytes, Any] = {}
    for name, value in raw(index).items():
        if name.startswith(b"fp:"):
            value = {
                field: decode_sketches(v) if field.startswith(b"s:") else frozenset(decode_ids(v))
                for field, v in value.items()
            }
        elif name[:1] == b"b" and b":" in name:
            value = {field: frozenset(unpack_fps(v, f)) for field, v in value.items()}
        out[name] = value
    return out


def assert_whole(index: VerifiedIndex) -> None:
    """No id listed under a fingerprint (what near() reads) lacks its sketch or its band values."""
    store, keys, mode, f = index.store, index.store.keys, index.verification, index.index.f
    for batch in store.scan("fp"):
        for pairs in store.hashes(batch):
            entries = dict(pairs)
            for fp, listed in entries.items():
                if fp.startswith(b"s:"):
                    continue
                sketches = decode_sketches(entries.get(keys.sketch_field(fp), b""))
                for doc_id in decode_ids(listed):
                    assert doc_id in sketches, (doc_id, fp)
                    for key, field in keys.band_places(sketches[doc_id], mode):
                        value = store.execute([(b"HGET", key, field)])[0]
                        assert value is not None and pack_fps([fp], f) in _chunks(value), (doc_id, key)


def _chunks(value: bytes) -> list[bytes]:
    return [value[i : i + 8] for i in range(0, len(value), 8)]


def assert_same(expected: dict[bytes, Any], got: dict[bytes, Any]) -> None:
    assert sorted(expected) == sorted(got), (sorted(set(expected) ^ set(got))[:5],)
    differing = [key for key in expected if expected[key] != got[key]]
    assert not differing, [(key, expected[key], got[key]) for key in differing[:2]]


# -- the contract --------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [97, 1000])
def test_the_same_stored_data_and_near_results_as_the_atomic_path(
    redis_client: redis.Redis, window: int
) -> None:
    one, other = verified_on(redis_client, "atomic"), verified_on(redis_client, "bulk")
    docs = sketched(one, texts(600, seed=1))
    assert bulk(other, docs, window) == atomic(one, docs)
    assert raw(one) == raw(other)  # byte for byte: sketches, id lists and band values in one order
    queries = [text for _, text in texts(40, seed=1)] + [article(7, words=60)]
    assert other.near_many(queries) == one.near_many(queries)
    assert other.index.count() == one.index.count() == (600, len(set(docs[1])))
    assert other.index.verify().ok
    assert exported(other) == exported(one)


def test_fingerprints_of_128_bits(redis_client: redis.Redis) -> None:
    """Fingerprints past 64 bits: packed 16 bytes each, band values shared in the window found by their
    bytes (no numpy form)."""
    one, other = verified_on(redis_client, "atomic", f=128), verified_on(redis_client, "bulk", f=128)
    docs = sketched(one, texts(300, seed=12))
    assert bulk(other, docs, 300) == atomic(one, docs)
    assert raw(one) == raw(other)
    assert other.index.verify().ok


def test_a_window_written_again_changes_nothing(redis_client: redis.Redis) -> None:
    index = verified_on(redis_client, "again")
    docs = sketched(index, texts(400, seed=2))
    assert set(bulk(index, docs, 400)) == {Outcome.ADDED}
    before = raw(index)
    assert bulk(index, docs, 400) == [Outcome.UNCHANGED] * 400
    assert raw(index) == before
    assert index.index.count() == (400, len(set(docs[1])))


def test_replacements_ids_named_twice_and_new_sketches_as_the_atomic_path(redis_client: redis.Redis) -> None:
    one, other = verified_on(redis_client, "atomic"), verified_on(redis_client, "bulk")
    first = texts(300, seed=3)
    for index in (one, other):
        atomic(index, sketched(index, first))
    ids, fps, sketches = sketched(one, texts(500, seed=4))
    old_ids, old_fps, _ = sketched(one, first)
    # Replacements (stored ids, other texts), ids named twice in a window, and stored ids kept with
    # their fingerprint but given another sketch (their old sketch's band values are left).
    ids[::7] = old_ids[: len(ids[::7])]
    ids[5::50] = ids[3::50][: len(ids[5::50])]
    for j in range(0, 60, 6):
        ids.append(old_ids[j])
        fps.append(old_fps[j])
        sketches.append(sketches[j + 1])
    docs = (ids, fps, sketches)
    assert bulk(other, docs, 250) == atomic(one, docs)
    assert_same(logical(one), logical(other))
    assert other.index.verify().ok
    assert other.index.count() == one.index.count()
    assert_whole(other)


def test_documents_without_a_sketch(redis_client: redis.Redis) -> None:
    """A None sketch stores the document without one (an export's), as the atomic path does."""
    one, other = verified_on(redis_client, "atomic"), verified_on(redis_client, "bulk")
    ids, fps, sketches = sketched(one, texts(100, seed=5))
    bare: list[bytes | None] = [None if i % 3 == 0 else s for i, s in enumerate(sketches)]
    assert one.add_sketched(ids, fps, bare) == other.bulk_add_sketched(ids, fps, bare)
    assert raw(one) == raw(other)


# -- a load stopped before each step ---------------------------------------------------------------------


class Interrupted(Exception):
    """Raised by a step instead of running it."""


STEPS = ["_tables", "_sketches", "_bands", "_id_map", "_commit", "_check_tables"]


@pytest.mark.parametrize("step", STEPS)
def test_a_load_interrupted_before_a_step(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """The second window stops before one of its steps: nothing of it is half-visible (no listed id
    without its sketch or band values, none of its new documents found by near); the same load run
    again gives the clean load's data."""
    pairs = texts(600, seed=6)
    clean = verified_on(redis_client, "clean")
    docs = sketched(clean, pairs)
    atomic(clean, tuple(column[:100] for column in docs))  # type: ignore[arg-type]
    bulk(clean, docs, 250)
    index = verified_on(redis_client, "cut")
    atomic(index, tuple(column[:100] for column in docs))  # type: ignore[arg-type]
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
            bulk(index, docs, 250)
    report = index.index.verify()
    assert set(report.problems) <= LEFT, report.as_dict()
    if step in ("_bands", "_id_map"):
        assert report.problems["sketch without a document"] > 100  # stopped in the middle, truly
    assert_whole(index)
    if step != "_check_tables":  # none of the unfinished window's new documents is visible to near
        named = Counter(docs[0])
        done = set(docs[0][:250])
        new = [
            i for i, doc_id in enumerate(docs[0][250:500], 250) if named[doc_id] == 1 and doc_id not in done
        ]
        assert len(new) > 150
        found = index.near_many([pairs[i][1] for i in new])
        leaked = {docs[0][i] for i in new} & {m.id for matches in found for m in matches}
        assert not leaked
    bulk(index, docs, 250)  # run again: converges to the clean load
    assert_same(logical(clean), logical(index))
    assert index.index.verify().ok


def test_a_load_stopped_after_giving_a_stored_id_another_sketch(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window gives a stored id (same fingerprint) another sketch and stops after its sketches (3a),
    before its band values (3b): the stored document is whole, with the band values of the sketch it
    has; run again, the load ends as a clean one."""
    index = verified_on(redis_client, "cut")
    text, other_text, new_text = article(14, words=60), article(15, words=60), article(16, words=60)
    ids, fps, sketches = sketched(index, [("x", text), ("new", new_text)])
    atomic(index, (ids[:1], fps[:1], sketches[:1]))
    sketches[0] = index.hasher.sketch_many([other_text])[0]

    def stop(self: Any, *args: Any) -> None:
        raise Interrupted

    with monkeypatch.context() as patch:
        patch.setattr(bulk_module.BulkWrites, "_bands", stop)
        with pytest.raises(Interrupted):
            bulk(index, (ids, fps, sketches), 10)
    assert index.index.get("x") == fps[0]
    assert_whole(index)
    report = index.index.verify()
    assert set(report.problems) <= LEFT, report.as_dict()
    assert bulk(index, (ids, fps, sketches), 10) == [Outcome.UNCHANGED, Outcome.ADDED]
    assert index.sketch_of("x") == index.hasher.stored(sketches[0])
    assert_whole(index)
    assert index.index.verify().ok


def test_an_atomic_writer_dropping_a_shared_sketch_meanwhile_leaves_the_bands(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the sketches (3a) and the band values (3b) another worker removes the only stored id of a
    fingerprint whose sketch the load is adding under a new id: its band values stay (the sketch is kept
    by the load's id, so the worker's band drop leaves them), and the load's document is whole."""
    index, other = verified_on(redis_client, "race"), verified_on(redis_client, "race")
    text = article(11, words=60)
    atomic(index, sketched(index, [("old", text)]))
    done: list[str] = []
    for step in ("_sketches", "_bands"):
        real = getattr(bulk_module.BulkWrites, step)

        def then_remove(self: Any, *args: Any, real: Any = real, step: str = step) -> None:
            real(self, *args)
            done.append(step)
            if len(done) == 1:  # after the first of the two steps
                assert other.remove("old")

        monkeypatch.setattr(bulk_module.BulkWrites, step, then_remove)
    assert bulk(index, sketched(index, [("new", text)]), 10) == [Outcome.ADDED]
    assert [m.id for m in index.near(text)] == ["new"]
    assert_whole(index)
    assert index.index.verify().ok
    assert done == ["_sketches", "_bands"]


#: What a replacement of the id racing a load leaves, a plain load's (tests/test_bulk.py) and its sketch:
#: the id listed under the fingerprint it moved to, which readers skip (the id map names the load's).
RACED = {"stale id in fingerprint map", "counts differ from data", "sketch without a document"}


@pytest.mark.parametrize("after", ["_sketches", "_bands"])
@pytest.mark.parametrize("change", ["remove", "replace"])
def test_an_atomic_writer_changing_the_id_meanwhile_leaves_it_whole(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, after: str, change: str
) -> None:
    """Between the window's sketches (3a) and its commit (5) another worker removes or replaces the id
    the window writes again (its write script deletes the id's sketch, and after 3b the sketch's band
    values): the window's commit stores the document whole again, with
    its sketch and its band values (near finds it, add_if_new refuses a copy), as a plain load's does.
    (A change after the id map's step, the commit point of get, is a later write: it wins.)"""
    index, other = verified_on(redis_client, "race"), verified_on(redis_client, "race")
    text, elsewhere = article(12, words=60), article(13, words=60)
    ids, fps, sketches = sketched(index, [("x", text)])
    atomic(index, (ids, fps, sketches))
    real = getattr(bulk_module.BulkWrites, after)
    calls: list[str] = []

    def then_change(self: Any, *args: Any) -> None:
        real(self, *args)
        calls.append(after)
        if len(calls) > 1:  # the commit's putting back of band values
            return
        if change == "replace":
            assert other.add_sketched(*sketched(other, [("x", elsewhere)])) == [Outcome.REPLACED]
        else:
            other.remove("x")

    monkeypatch.setattr(bulk_module.BulkWrites, after, then_change)
    assert bulk(index, (ids, fps, sketches), 10) == [Outcome.UNCHANGED]
    monkeypatch.undo()
    assert index.index.get("x") == fps[0]
    assert index.sketch_of("x") == index.hasher.stored(sketches[0])
    assert [m.id for m in index.near(text)] == ["x"]
    match = index.add_if_new("copy", text)
    assert match is not None and match.id == "x"
    assert_whole(index)
    report = index.index.verify()
    assert set(report.problems) <= (RACED if change == "replace" else set()), report.as_dict()


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
    monkeypatch.setattr(chunks_module, "CHUNK_ARGS", 600)
    monkeypatch.setattr(bulk_module, "ATTACH_PAIRS", 16)


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("marker", [b"SADD", BULK_SKETCH.sha, BULK_BAND.sha, BULK_IDS.sha, BULK_COMMIT.sha])
@pytest.mark.parametrize("skip", [0, 1])
def test_a_lost_reply_at_each_step(admin: redis.Redis, marker: bytes, skip: int) -> None:
    """The reply to one request of a step is lost after the server applied it (two chunks in flight)."""
    pairs = texts(500, seed=8)
    clean = verified_on(admin, "clean")
    docs = sketched(clean, pairs)
    atomic(clean, tuple(column[:80] for column in docs))  # type: ignore[arg-type]
    bulk(clean, docs, 250)
    with FaultProxy(admin.connection_pool.connection_kwargs["port"], write_marker=marker) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = verified_on(client, "lossy", backoff=Backoff(retries=3, base=0.001, cap=0.01))
        atomic(index, tuple(column[:80] for column in docs))  # type: ignore[arg-type]
        proxy.arm(skip)
        bulk(index, docs, 250)
        assert proxy.dropped == 1
        client.close()
    got = verified_on(admin, "lossy")
    assert_same(logical(clean), logical(got))
    assert got.index.verify().ok


@pytest.mark.parametrize("marker", [WRITE.sha, BULK_SKETCH.sha])
def test_a_lost_reply_giving_a_stored_id_another_sketch(admin: redis.Redis, marker: bytes) -> None:
    """The reply to the write that gives a stored id (same fingerprint) another sketch is lost and the
    write sent again: the old sketch's band values go all the same (no garbage for verify to repair)."""
    index = verified_on(admin, "lossy")
    text, other_text, new_text = article(17, words=60), article(18, words=60), article(19, words=60)
    ids, fps, sketches = sketched(index, [("x", text), ("new", new_text)])
    atomic(index, (ids[:1], fps[:1], sketches[:1]))
    sketches[0] = index.hasher.sketch_many([other_text])[0]
    with FaultProxy(admin.connection_pool.connection_kwargs["port"], write_marker=marker) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        lossy = verified_on(client, "lossy", backoff=Backoff(retries=3, base=0.001, cap=0.01))
        proxy.arm(0)
        assert bulk(lossy, (ids, fps, sketches), 10) == [Outcome.UNCHANGED, Outcome.ADDED]
        assert proxy.dropped == 1
        client.close()
    assert index.sketch_of("x") == index.hasher.stored(sketches[0])
    assert_whole(index)
    report = index.index.verify()
    assert report.ok and report.garbage == 0, report.as_dict()


@pytest.mark.usefixtures("small_chunks")
def test_replies_lost_at_random(admin: redis.Redis) -> None:
    pairs = texts(600, seed=9)
    clean = verified_on(admin, "clean")
    docs = sketched(clean, pairs)
    bulk(clean, docs, 200)
    with FaultProxy(admin.connection_pool.connection_kwargs["port"], drop_rate=0.2, seed=3) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = verified_on(client, "lossy", backoff=Backoff(retries=60, base=0.001, cap=0.01))
        bulk(index, docs, 200)
        assert proxy.dropped >= 5, proxy.dropped
        client.close()
    got = verified_on(admin, "lossy")
    assert_same(logical(clean), logical(got))
    assert got.index.verify().ok


# -- Redis Cluster ---------------------------------------------------------------------------------------


def test_on_a_cluster(redis_cluster_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The atomic path's end state on the cluster, with replacements; resent whole, nothing changes."""
    monkeypatch.setattr(chunks_module, "CHUNK_ARGS", 3000)
    one, other = verified_on(redis_cluster_client, "atomic"), verified_on(redis_cluster_client, "bulk")
    first = texts(150, seed=10)
    for index in (one, other):
        atomic(index, sketched(index, first))
    ids, fps, sketches = sketched(one, texts(400, seed=11))
    ids[::9] = [doc_id for doc_id, _ in first][: len(ids[::9])]
    docs = (ids, fps, sketches)
    assert bulk(other, docs, 200) == atomic(one, docs)
    assert_same(logical(one), logical(other))
    before = logical(other)
    assert set(bulk(other, docs, 200)) == {Outcome.UNCHANGED}
    assert_same(before, logical(other))
    queries = [text for _, text in texts(30, seed=11)]
    assert other.near_many(queries) == one.near_many(queries)
    assert_whole(other)
    report = other.index.verify()
    assert report.ok, report.as_dict()


def test_a_replaced_sketch_on_a_cluster_is_left_to_repair(
    redis_cluster_client: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On a cluster the band values of a sketch the window replaces (another worker set it since step 1)
    are left, as the atomic path there leaves them (band_drop.lua names keys of two slots): no failed
    cleanup is attempted nor logged, and verify(repair=True) removes them."""
    index, other = verified_on(redis_cluster_client, "drop"), verified_on(redis_cluster_client, "drop")
    text, meanwhile = article(20, words=60), article(21, words=60)
    ids, fps, sketches = sketched(index, [("x", text)])
    atomic(index, (ids, fps, sketches))
    real = bulk_module.BulkWrites._sketches

    def after_another_sketch(self: Any, *args: Any) -> None:
        assert other.add_sketched(ids, fps, index.hasher.sketch_many([meanwhile])) == [Outcome.UNCHANGED]
        real(self, *args)

    monkeypatch.setattr(bulk_module.BulkWrites, "_sketches", after_another_sketch)
    with caplog.at_level(logging.WARNING, logger="simhash_redis"):
        assert bulk(index, (ids, fps, sketches), 10) == [Outcome.UNCHANGED]
    assert not caplog.records, [record.getMessage() for record in caplog.records]
    assert index.sketch_of("x") == index.hasher.stored(sketches[0])
    assert_whole(index)
    report = index.index.verify(repair=True)
    assert report.ok and report.garbage > 0, report.as_dict()
    assert index.index.verify().garbage == 0
