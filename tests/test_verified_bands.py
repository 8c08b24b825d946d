"""Verified mode's LSH band tables: near-duplicates a small k misses found, band tables kept exact on a
standalone server (garbage repaired on a cluster), the guard covering them; malformed stored values."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.cluster import RedisCluster

from simhash_redis import (
    ConfigurationMismatch,
    IndexCorrupted,
    InvalidArgument,
    Outcome,
    SimhashIndex,
    VerifiedIndex,
)
from simhash_redis.codec import decode_sketches, encode_fp, pack_fps, unpack_fps
from simhash_redis.store import Verification, hash_pairs
from simhash_redis.store import reads as reads_module
from tests.test_verified_mode import article
from tests.test_verified_sketches import _UNBANDED_MODE, K8, _stored_sketches

_names = itertools.count()
_VOCAB = [f"word{i}" for i in range(2000)]


def _edit(text: str, words: int, seed: int) -> str:
    out = text.split()
    rng = random.Random(seed)
    for _ in range(words):
        out[rng.randrange(len(out))] = rng.choice(_VOCAB)
    return " ".join(out)


def _far_edit(index: SimhashIndex, text: str, words: int = 3) -> str:
    """An edit of a few words whose fingerprint is further than k from the text's."""
    fp = index.fingerprint(text)
    for seed in range(1000):
        edited = _edit(text, words, seed)
        if (index.fingerprint(edited) ^ fp).bit_count() > index.k:
            return edited
    raise AssertionError("no edit moves the fingerprint past k")


def _band_members(verified: VerifiedIndex) -> set[tuple[bytes, bytes]]:
    """Every (band name, member) of the index: its band values' fingerprints."""
    out = set()
    f = verified.index.f
    for keys in verified.store.scan("band"):
        for key, pairs in zip(keys, verified.store.execute([(b"HGETALL", k) for k in keys]), strict=True):
            for field, value in hash_pairs(pairs):
                out.update((bytes(key) + b"#" + bytes(field), fp) for fp in unpack_fps(bytes(value), f))
    return out


def _expected_bands(verified: VerifiedIndex) -> set[tuple[bytes, bytes]]:
    """The (band name, fingerprint) pairs the stored sketches make."""
    mode, keys = verified.verification, verified.store.keys
    return {
        (key, fp.encode())
        for fp, sketches in _stored_sketches(verified).items()
        for sketch in sketches.values()
        for key in keys.bands(sketch, mode)
    }


def test_bands_find_near_duplicates_the_hamming_tables_miss(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "news"))  # the default k = 3 and mode
    assert verified.index.k == 3 and (verified.verification.bands, verified.verification.rows) == (8, 4)
    stories = [article(s) for s in range(20)]
    verified.add_many([(f"s{i}", text) for i, text in enumerate(stories)])
    edited = _far_edit(verified.index, stories[7])
    assert verified.index.near(edited) == []  # beyond k = 3
    [found] = verified.near(edited)
    assert found.id == "s7" and found.distance > 3 and found.jaccard >= 0.8
    assert verified.add_if_new("edit", edited) == found
    assert _band_members(verified) == _expected_bands(verified)


def test_the_guard_covers_the_band_tables(redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "guard"))
    text = article(30)
    edited = _far_edit(verified.index, text)
    read = reads_module.Reads.near_and_members
    raced: list[bool] = []

    def racing(self: reads_module.Reads, *args: Any) -> Any:
        got = read(self, *args)
        if not raced:  # a near-duplicate found only by its band arrives between the read and the write
            raced.append(True)
            verified.add("other", edited)
        return got

    monkeypatch.setattr(reads_module.Reads, "near_and_members", racing)
    found = verified.add_if_new("mine", text)
    assert found is not None and found.id == "other"
    assert verified.index.get("mine") is None


_OPS = st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 3), st.integers(0, 3))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OPS, max_size=10))
def test_band_tables_are_exact_on_a_standalone_server(any_client: redis.Redis, ops: list[Any]) -> None:
    verified = VerifiedIndex(SimhashIndex(any_client, f"exact{next(_names)}", **K8))
    texts = [article(90), _edit(article(90), 5, 1), article(91), article(92)]
    try:
        for op, n, text in ops:
            if op == "add":
                verified.add(f"d{n}", texts[text])
            else:
                verified.remove(f"d{n}")
        # Every sketch dropped by a replacement or removal took its fingerprint out of its band tables,
        # unless another id of the same fingerprint keeps that band.
        assert _band_members(verified) == _expected_bands(verified)
        report = verified.index.verify()
        assert report.ok and report.garbage == 0
    finally:
        verified.index.drop()


def test_band_garbage_on_a_cluster_is_repaired(redis_cluster_client: RedisCluster) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_cluster_client, "cgarbage", **K8))
    verified.add_many([("a", article(95)), ("b", article(96))])
    verified.add("a", article(97))  # replaced: the old sketch's band tables keep "a"'s old fingerprint
    verified.remove("b")
    assert _band_members(verified) > _expected_bands(verified)
    report = verified.index.verify()
    # 8 bands of each dropped sketch, beside the 45 tables' orphans of each fingerprint that left.
    assert report.ok and report.garbage == 2 * 8 + 2 * 45
    verified.index.verify(repair=True)
    assert _band_members(verified) == _expected_bands(verified)
    assert verified.index.verify().garbage == 0


def test_a_malformed_length_is_refused_not_looped_on(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "neg", **K8))
    verified.add("a", article(98))
    keys, fp = verified.index.keys, encode_fp(verified.index.fingerprint(article(98)), 64)
    redis_client.hset(keys.fp_bucket(fp), keys.sketch_field(fp), b"-3:abc")
    with pytest.raises(ValueError, match="malformed netstring length"):
        decode_sketches(b"-3:abc")
    with pytest.raises(IndexCorrupted):
        verified.sketch_of("a")
    # The write script reads the list up to the fault instead of spinning on it (the server stays free).
    assert verified.remove("a") is True
    assert redis_client.ping()


def test_a_resent_write_of_the_same_sketch_changes_nothing(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "same", **K8))
    text = article(99)
    verified.add_many([("a", text), ("b", text)])
    keys, fp = verified.index.keys, encode_fp(verified.index.fingerprint(text), 64)
    before = redis_client.hget(keys.fp_bucket(fp), keys.sketch_field(fp))
    dirty = redis_client.info("persistence")["rdb_changes_since_last_save"]
    verified.add("a", text)
    assert redis_client.hget(keys.fp_bucket(fp), keys.sketch_field(fp)) == before  # order kept too
    # One change: the write script's probe of the counts (HINCRBY by 0), nothing of the document.
    assert redis_client.info("persistence")["rdb_changes_since_last_save"] == dirty + 1


def test_restore_meta_refuses_a_mode_the_sketches_were_not_made_in(redis_client: redis.Redis) -> None:
    legacy = VerifiedIndex(SimhashIndex(redis_client, "lost", verification=_UNBANDED_MODE, **K8))
    banded = VerifiedIndex(SimhashIndex(redis_client, "lost2", **K8))
    for index in (legacy, banded):
        index.add_many([("a", article(110)), ("b", article(111))])
        redis_client.delete(index.index.keys.meta)
    config = {key: value for key, value in K8.items()}
    with pytest.raises(ConfigurationMismatch, match="a sketch of 256 bytes, not the 160"):
        SimhashIndex.restore(redis_client, "lost", verification=Verification.of(), **config)
    with pytest.raises(ConfigurationMismatch, match="the index has LSH band tables"):
        SimhashIndex.restore(redis_client, "lost2", verification=Verification.of(None, 0.8, (0, 0)), **config)
    SimhashIndex.restore(redis_client, "lost", verification=_UNBANDED_MODE, **config)
    SimhashIndex.restore(redis_client, "lost2", verification=Verification.of(), **config)
    for name in ("lost", "lost2"):
        reopened = VerifiedIndex(SimhashIndex(redis_client, name))
        assert [m.id for m in reopened.near(article(110))] == ["a"] and reopened.index.verify().ok


def test_exact_copies_under_many_ids_share_one_stored_sketch(redis_client: redis.Redis) -> None:
    # A crawl's boilerplate pages: one text under thousands of ids. Its sketch is stored once, with the
    # list of the ids having it; each write finds the id without a walk in Lua (the list used to be
    # parsed whole for every id attached, quadratic, and a batch could hold the server past its script
    # time limit).
    verified = VerifiedIndex(SimhashIndex(redis_client, "copies"))
    text = article(120)
    verified.add_many([(f"page{i}", text) for i in range(2000)])
    keys, fp = verified.index.keys, encode_fp(verified.index.fingerprint(text), 64)
    stored = redis_client.hget(keys.fp_bucket(fp), keys.sketch_field(fp)) or b""
    assert set(decode_sketches(stored).values()) == {verified.hasher.stored_sketch(text)}
    assert len(stored) < verified.hasher.sketch_bytes + 2000 * 16  # the sketch once, then the ids
    assert verified.remove_many([f"page{i}" for i in range(0, 2000, 100)]) == [True] * 20
    assert len(verified.near(text)) == 1980
    assert verified.index.verify().ok and verified.index.count() == (1980, 1)
    # The rest in a shuffled order, a batch in one script (a removal finds its id from the list's marks);
    # the band tables keep the fingerprint until its last copy leaves.
    rest = [f"page{i}" for i in range(2000) if i % 100]
    random.Random(3).shuffle(rest)
    assert verified.remove_many(rest[:1900]) == [True] * 1900
    assert sorted(m.id for m in verified.near(text)) == sorted(rest[1900:])
    assert _band_members(verified) == _expected_bands(verified) != set()
    assert verified.remove_many(rest[1900:]) == [True] * 80
    assert _band_members(verified) == set() and verified.index.count() == (0, 0)


def _band_places(verified: VerifiedIndex, text: str) -> list[tuple[bytes, bytes]]:
    keys, mode = verified.store.keys, verified.verification
    return keys.band_places(verified.hasher.sketch(text), mode)


def test_the_guard_reads_a_band_value_of_thousands_once(redis_client: redis.Redis) -> None:
    # A site's template puts thousands of pages in one band value; the guard of a page sharing it
    # checks the value against what was read in one pass (a member-by-member scan of the arguments
    # held the server for seconds at 6,000).
    verified = VerifiedIndex(SimhashIndex(redis_client, "hot"))
    text = article(130)
    crowd = pack_fps([encode_fp(n, 64) for n in range(1 << 40, (1 << 40) + 5000)], 64)
    for key, field in _band_places(verified, text):
        redis_client.hset(key, field, crowd)
    assert verified.add_if_new("page", text) is None
    assert verified.near(text)[0].id == "page"
    value = redis_client.hget(*_band_places(verified, text)[0]) or b""
    assert len(value) == len(crowd) + 8


def test_query_sketches_are_needed_to_judge(redis_client: redis.Redis) -> None:
    # A stored sketch holds one sampling level: a near document stored a level above or below would be
    # missed, so judging (near_sketched, a unique add) takes the query's form; a plain add (an import)
    # takes either.
    verified = VerifiedIndex(SimhashIndex(redis_client, "forms"))
    text = article(131)
    fp, query = verified.index.fingerprint(text), verified.hasher.sketch(text)
    stored = verified.hasher.stored(query)
    with pytest.raises(InvalidArgument, match="416 bytes"):
        verified.near_sketched([fp], [stored])
    with pytest.raises(InvalidArgument, match="416 bytes"):
        verified.add_sketched(["a"], [fp], [stored], unique=True)
    assert verified.add_sketched(["a"], [fp], [stored]) == [Outcome.ADDED]
    assert verified.sketch_of("a") == stored
    assert [m.id for m in verified.near_sketched([fp], [query])[0]] == ["a"]


def test_repair_mends_a_malformed_or_misplaced_band_value(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "mend"))
    text = article(132)
    verified.add("d", text)
    places = _band_places(verified, text)
    good = redis_client.hget(*places[0])
    redis_client.hset(places[0][0], places[0][1], (good or b"") + b"xyz")  # not whole fingerprints
    with pytest.raises(IndexCorrupted, match="verify"):
        verified.near(text)
    key, field = places[1]
    wrong = field[:-1] + bytes([field[-1] ^ 1])  # its bucket is the value's low bits: another bucket's
    redis_client.hset(key, wrong, good or b"")  # a value in a bucket it does not belong to
    report = verified.index.verify()
    assert not report.ok and {"malformed band value", "band value in another bucket"} <= set(report.problems)
    assert not verified.index.verify(repair=True).ok
    assert verified.index.verify().ok
    assert redis_client.hget(*places[0]) == good and not redis_client.hexists(key, wrong)
    assert [m.id for m in verified.near(text)] == ["d"]


def test_verify_reads_a_shared_band_value_once_per_chunk(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of a template share band values: verify checked each stored fingerprint's place by reading
    # and splitting its whole band value again (quadratic in the pages). Each value is read once per
    # chunk now, and the report (a member taken out of a shared value) is the same.
    verified = VerifiedIndex(SimhashIndex(redis_client, "shared-verify"))
    rng = random.Random(7)
    size, width = verified.hasher.query_bytes, verified.verification.band_bytes
    shared = rng.randbytes(width)
    fps = [rng.getrandbits(64) for _ in range(300)]
    sketches = [shared + rng.randbytes(size - width) for _ in fps]
    verified.bulk_add_sketched([f"p{i}" for i in range(len(fps))], fps, sketches)
    place = verified.store.keys.band_places(sketches[0], verified.verification)[0]
    whole = redis_client.hget(*place) or b""
    assert len(whole) == 8 * len(fps)
    gone = {encode_fp(fps[3], 64), encode_fp(fps[200], 64)}
    redis_client.hset(*place, pack_fps([m for m in unpack_fps(whole, 64) if m not in gone], 64))
    reads: list[int] = []
    execute = verified.store.execute

    def counting(commands: Any, *args: Any, **kwargs: Any) -> Any:
        commands = list(commands)
        reads.append(sum(1 for c in commands if c[0] == b"HGET" and c[1:] == place))
        return execute(commands, *args, **kwargs)

    monkeypatch.setattr(verified.store, "execute", counting)
    report = verified.index.verify()
    assert report.problems == {"fingerprint missing from band table": 2}, report.problems
    assert max(reads) == 1
    monkeypatch.undo()
    assert not verified.index.verify(repair=True).ok
    assert verified.index.verify().ok
    assert sorted(unpack_fps(redis_client.hget(*place) or b"", 64)) == sorted(unpack_fps(whole, 64))
