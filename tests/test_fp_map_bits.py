"""The fingerprint map placed by the fingerprints' low bits (format 4, every index), read whole by a single
lookup."""

from __future__ import annotations

import io
import itertools

import msgpack
import numpy as np
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import MinHasher, SimhashIndex, drop_index
from simhash_redis.codec import encode_fp
from simhash_redis.errors import IndexCorrupted, SimhashRedisError
from simhash_redis.fingerprinting import engine_choice
from simhash_redis.index.verified_index import VerifiedIndex
from simhash_redis.jobs.dump import export_index, import_index
from simhash_redis.store.candidates import matches_of_groups
from simhash_redis.store.config import IndexConfig, Retention
from simhash_redis.store.keys import KeySchema
from simhash_redis.store.verification import Verification
from tests.servers import ServerProcess
from tests.test_index_property import brute_force, clustered

_names = itertools.count()
BASE = 0xF0F0_F0F0_1234_5678
#: Bits above the 17 that place a 64-bit fingerprint in one of the default 2**17 buckets.
HIGH = 1 << 40


def _calls(client: redis.Redis) -> dict[str, int]:
    return {name: int(stat["calls"]) for name, stat in client.info("commandstats").items()}


def _delta(client: redis.Redis, before: dict[str, int], command: str) -> int:
    return _calls(client).get(f"cmdstat_{command}", 0) - before.get(f"cmdstat_{command}", 0)


def test_every_new_index_is_format_4() -> None:
    verified = IndexConfig.build(k=3, verification=Verification.of(MinHasher(), 0.8))
    windowed = IndexConfig.build(k=3, retention=Retention.of("7d"))
    for config in (IndexConfig.build(k=3), verified, windowed):
        assert config.to_meta()["format"] == "4"
        assert IndexConfig.from_meta(config.to_meta()) == config


def test_another_format_is_refused() -> None:
    meta = IndexConfig.build(k=3, f=32).to_meta()
    # Formats 1-3 placed the map by hash: read by bits, their entries would not be found.
    for older in ("1", "2", "3"):
        with pytest.raises(IndexCorrupted, match="format 4 only: export it with the simhash-redis that"):
            IndexConfig.from_meta({**meta, "format": older})
    with pytest.raises(IndexCorrupted, match="reads format 4 only: upgrade simhash-redis"):
        IndexConfig.from_meta({**meta, "format": "5"})


@pytest.mark.parametrize("f", [32, 64, 128])
@given(data=st.data())
def test_one_write_and_the_bulk_path_place_a_fingerprint_alike(f: int, data: st.DataObject) -> None:
    config = IndexConfig.build(k=3, f=f, id_buckets=data.draw(st.sampled_from([1, 7, 1 << 17, 1000003])))
    keys = KeySchema.of("simhash", "placed", config)
    fps = data.draw(st.lists(st.integers(0, (1 << f) - 1), min_size=1, max_size=20))
    numbers = keys.fp_bucket_numbers(np.array(fps, dtype=np.uint64) if f <= 64 else fps).tolist()
    assert [keys.fp_bucket(encode_fp(fp, f)) for fp in fps] == [keys.fp_form.key(n) for n in numbers]
    assert [keys.fp_bucket_of(fp) for fp in fps] == [keys.fp_form.key(n) for n in numbers]
    assert numbers == [fp % config.id_buckets for fp in fps]


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_hit_in_the_querys_bucket_comes_with_the_first_reply(
    redis_server: ServerProcess, monkeypatch: pytest.MonkeyPatch, protocol: int, engine: str
) -> None:
    if engine == "python":  # no compiled core: every reply is read by hiredis
        monkeypatch.setattr(engine_choice, "native", None)
    elif engine_choice.native is None:
        pytest.skip("the compiled core is not built")
    redis_client = redis_server.client(protocol=protocol)
    index = SimhashIndex(redis_client, f"bits{next(_names)}", k=3)
    try:
        index.add_many([("a", BASE), ("b", BASE), ("high", BASE ^ HIGH), ("low", BASE ^ 0b1)])
        before = _calls(redis_client)
        assert [(m.id, m.distance) for m in index.near(BASE ^ HIGH ^ (HIGH << 1), k=2)] == [
            ("high", 1),
            ("a", 2),
            ("b", 2),
        ]
        assert (_delta(redis_client, before, "hgetall"), _delta(redis_client, before, "hget")) == (1, 0)
        before = _calls(redis_client)
        found = index.near(BASE ^ 0b10)
        assert [(m.id, m.distance) for m in found] == [("a", 1), ("b", 1), ("high", 2), ("low", 2)]
        # A query differing from them in its low bits has them in other buckets: their ids (3
        # fingerprints) take a second round trip.
        assert (_delta(redis_client, before, "hgetall"), _delta(redis_client, before, "hget")) == (1, 3)
        before = _calls(redis_client)
        assert index.near(12345) == []
        assert (_delta(redis_client, before, "hgetall"), _delta(redis_client, before, "hget")) == (1, 0)
    finally:
        index.drop()


def test_a_hit_removed_from_its_bucket_is_not_asked_for_again(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, f"bits{next(_names)}", k=3)
    try:
        index.add_many([("a", BASE), ("gone", BASE ^ HIGH)])
        stored = encode_fp(BASE ^ HIGH, 64)
        redis_client.hdel(index.keys.fp_bucket(stored), stored)  # an orphan in the tables
        before = _calls(redis_client)
        assert [m.id for m in index.near(BASE)] == ["a"]
        assert _delta(redis_client, before, "hget") == 0
    finally:
        index.drop()


@pytest.mark.parametrize("buckets", [1, 2, 3, 1 << 17])
def test_a_restored_meta_reads_the_data_back(redis_client: redis.Redis, buckets: int) -> None:
    name = f"restore{next(_names)}"
    index = SimhashIndex(redis_client, name, k=3, id_buckets=buckets)
    try:
        # Fingerprints spread over the low bits too, over several buckets.
        index.add_many([(f"d{i}", BASE ^ (i << 20) ^ (i * 0x9E37)) for i in range(50)])
        meta = redis_client.hgetall(index.keys.meta)
        redis_client.delete(index.keys.meta)
        SimhashIndex.restore(redis_client, name, k=3, id_buckets=buckets)
        assert redis_client.hgetall(index.keys.meta) == meta
        reopened = SimhashIndex(redis_client, name)
        assert [m.id for m in reopened.near(BASE ^ (3 << 20) ^ (3 * 0x9E37), k=0)] == ["d3"]
        assert reopened.verify().ok
    finally:
        index.drop()


def test_a_dump_states_format_1_and_imports_as_format_4(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, f"dump{next(_names)}", k=3)
    copy = f"copy{next(_names)}"
    try:
        index.add_many([(f"d{i}", BASE ^ (i << 20)) for i in range(20)])
        out = io.BytesIO()
        export_index(index, out)
        out.seek(0)
        header = msgpack.Unpacker(io.BytesIO(out.getvalue()), raw=False).unpack()
        assert header["meta"]["format"] == "1"
        import_index(redis_client, out, name=copy)
        imported = SimhashIndex(redis_client, copy)
        assert imported.config == index.config
        assert [m.id for m in imported.near(BASE ^ (5 << 20), k=0)] == ["d5"]
        assert imported.verify().ok
    finally:
        index.drop()
        drop_index(redis_client, copy)


@pytest.mark.parametrize("f", [32, 64, 128])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_near_equals_brute_force_with_crowded_buckets(
    redis_client: redis.Redis, f: int, data: st.DataObject
) -> None:
    # Few buckets, so that a query's bucket holds hits, misses and copies, and other buckets hold hits.
    buckets = data.draw(st.sampled_from([1, 2, 3, 16]))
    index = SimhashIndex(redis_client, f"crowded{next(_names)}", f=f, k=3, id_buckets=buckets)
    assert not index._reads.whole_buckets  # buckets larger than table sets: read field by field
    index._reads.whole_buckets = True  # read whole all the same, to crowd them
    try:
        stored = {f"id{i}": fp for i, fp in enumerate(data.draw(clustered(f, 4)))}
        stored.update({f"twin{i}": fp for i, fp in enumerate(list(stored.values())[:3])})
        index.add_many(stored.items())
        gone = data.draw(st.lists(st.sampled_from(sorted(stored)), max_size=3, unique=True))
        index.remove_many(gone)
        for doc_id in gone:
            del stored[doc_id]
        for q in data.draw(clustered(f, 4)) + list(stored.values())[:4]:
            for k in (0, 1, 3):
                assert index.near(q, k=k) == brute_force(stored, q, k)
    finally:
        index.drop()


def test_a_windows_periods_are_placed_by_bits(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, f"window{next(_names)}", k=3, retention="1d")
    try:
        index.add_many([("a", BASE), ("b", BASE ^ HIGH), ("c", BASE ^ 0b1)])
        windows = index.windows
        assert windows is not None
        period = windows.schema(windows.view().current)
        for fp in (BASE, BASE ^ HIGH, BASE ^ 0b1):
            assert redis_client.hexists(period.fp_bucket_of(fp), encode_fp(fp, 64))
        # Each live period's own bucket is read whole with the table sets: a and b need no HGET.
        periods = {len(windows.view().windows)}
        before = _calls(redis_client)
        assert [m.id for m in index.near(BASE ^ HIGH ^ (HIGH << 1), k=2)] == ["b", "a"]
        periods.add(len(windows.view().windows))  # a period may have begun meanwhile
        assert (
            _delta(redis_client, before, "hgetall") in periods and _delta(redis_client, before, "hget") == 0
        )
        assert [m.id for m in index.near(BASE)] == ["a", "b", "c"]
        assert index.verify().ok
    finally:
        index.drop()


def test_a_verified_index_of_format_4_reads_no_bucket_whole(redis_client: redis.Redis) -> None:
    name = f"verified{next(_names)}"
    index = SimhashIndex(redis_client, name, k=3)
    verified = VerifiedIndex(index)  # pinned on an empty plain index: format 4 stays
    try:
        text = " ".join(f"word{i}" for i in range(300))
        verified.add("a", text)
        verified.add("b", text + " more")
        plain = SimhashIndex(redis_client, name)
        assert redis_client.hget(index.keys.meta, "format") == b"4" and plain.config.verification is not None
        before = _calls(redis_client)
        assert {m.id for m in plain.near(text)} == {"a", "b"}
        assert {m.id for m in index.near(text)} == {"a", "b"}  # the handle the mode was pinned on
        # The bucket holds the sketches too: the plain handles ask for the ids alone.
        assert _delta(redis_client, before, "hgetall") == 0
        assert [m.id for m in verified.near(text)][:1] == ["a"]
        assert plain.verify().ok
        out = io.BytesIO()
        export_index(plain, out)
        header = msgpack.Unpacker(io.BytesIO(out.getvalue()), raw=False).unpack()
        assert header["meta"]["format"] == "3"  # the dump's statement of a verified index
    finally:
        index.drop()


def _elsewhere(index: SimhashIndex, stored: bytes) -> tuple[bytes, bytes]:
    """The fingerprint's own map bucket, and another one (as a hand edit could leave it)."""
    right = index.keys.fp_bucket(stored)
    return right, index.keys.fp_bucket_of(int(stored) + 1)


def test_verify_deletes_a_misplaced_entry_and_lists_the_ids_in_their_bucket(
    redis_client: redis.Redis,
) -> None:
    index = SimhashIndex(redis_client, f"misplaced{next(_names)}", k=3)
    try:
        index.add_many([("a", BASE), ("b", BASE), ("c", BASE ^ HIGH)])
        stored = encode_fp(BASE, 64)
        right, wrong = _elsewhere(index, stored)
        redis_client.hset(wrong, stored, redis_client.hget(right, stored))  # type: ignore[arg-type]
        redis_client.hdel(right, stored)
        report = index.verify()
        # Its table members look orphaned too until the repair lists the ids in their bucket (step 1). The
        # counts hash agrees with what the maps hold, read at one moment (the misplaced entry among them).
        assert dict(report.problems) == {
            "misplaced fingerprint-map entry": 1,
            "id missing from fingerprint map": 2,
            "orphan table member": 4,
        }
        assert index.verify(repair=True).repaired
        assert index.verify().ok
        assert redis_client.hexists(wrong, stored) == 0
        assert [m.id for m in index.near(BASE)] == ["a", "b", "c"]
        assert index.count() == (3, 2)
    finally:
        index.drop()


def test_verify_moves_misplaced_sketches_back(redis_client: redis.Redis) -> None:
    name = f"verified{next(_names)}"
    index = SimhashIndex(redis_client, name, k=3)
    verified = VerifiedIndex(index)
    try:
        text = " ".join(f"word{i}" for i in range(300))
        verified.add("a", text)
        stored = encode_fp(index.fingerprint(text), 64)
        right, wrong = _elsewhere(index, stored)
        sketch_field = index.keys.sketch_field(stored)
        redis_client.hset(wrong, sketch_field, redis_client.hget(right, sketch_field))  # type: ignore[arg-type]
        redis_client.hdel(right, sketch_field)
        assert verified.near(text) == []
        problems = dict(index.verify().problems)
        assert problems == {"misplaced fingerprint-map entry": 1}
        index.verify(repair=True)
        # A sketch cannot be made again without the text: it is moved where its id is listed.
        assert redis_client.hlen(wrong) == 0 and redis_client.hexists(right, sketch_field)
        assert index.verify().ok
        assert [m.id for m in verified.near(text)] == ["a"]
    finally:
        index.drop()


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_a_single_lookup_equals_the_batch_form(
    redis_server: ServerProcess, monkeypatch: pytest.MonkeyPatch, protocol: int, engine: str, encoding: str
) -> None:
    if engine == "python":
        monkeypatch.setattr(engine_choice, "native", None)
    elif engine_choice.native is None:
        pytest.skip("the compiled core is not built")
    # latin-1: a connection that packs commands itself (redis-py's packer, not the library's).
    client = redis_server.client(protocol=protocol, encoding=encoding)
    index = SimhashIndex(client, f"one{next(_names)}", k=3)
    reads = index._reads
    try:
        stored = [BASE ^ (i << 40) ^ (i << 3) for i in range(30)] + [BASE, BASE ^ HIGH]
        index.add_many([(f"d{i}", fp) for i, fp in enumerate(stored)])
        index.add_many([(f"twin{i}", fp) for i, fp in enumerate(stored[:3])])
        queries = [*stored[:10], BASE ^ 0b1, BASE ^ HIGH ^ 0b10, 12345]
        far = BASE ^ ((1 << 64) - 1)  # a second query: the batch form, which reads no bucket whole
        for q in queries:
            for k in (0, 2, 3):
                general = index.near_many([q, far], k=k)[0]
                assert index.near(q, k=k) == general
                # add_if_new's read: the same matches, and the members of the same table sets.
                sets = [[set(client.smembers(key)) for key in index.keys.tables(q)]]
                members, found = reads.near_and_members([q], k)
                assert [matches_of_groups(groups) for groups in found] == [general]
                assert [[set(one) for one in query] for query in members] == sets
        redis_client = redis_server.client()
        redis_client.delete(index.keys.fp_bucket_of(BASE))
        redis_client.set(index.keys.fp_bucket_of(BASE), b"not a hash")
        with pytest.raises(SimhashRedisError, match="WRONGTYPE"):
            index.near(BASE)
        with pytest.raises(SimhashRedisError, match="WRONGTYPE"):
            index.near_many([BASE, far])
        assert index.near(12345 ^ (1 << 60)) == []  # the connection is still good
    finally:
        index.drop()
