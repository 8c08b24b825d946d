"""Sketches kept beside their ids in the fingerprint map: a verified near() in two round trips, every
write keeping each id's sketch with it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.cluster import RedisCluster

from simhash_redis import MinHasher, SimhashIndex, VerifiedIndex
from simhash_redis.codec import decode_ids, decode_sketches, encode_fp
from simhash_redis.store import Verification
from simhash_redis.store import store as store_module
from simhash_redis.transport import wire
from tests.test_verified_mode import K8, article, one_word_edit

_names = itertools.count()
_UNBANDED_MODE = Verification.of(MinHasher(), 0.8, (0, 0))


def _stored_sketches(verified: VerifiedIndex) -> dict[str, dict[str, bytes]]:
    """Every fingerprint's sketches, by stored fingerprint, read from the fingerprint map."""
    out: dict[str, dict[str, bytes]] = {}
    for keys in verified.store.scan("fp"):
        for pairs in verified.store.hashes(keys):
            for field, value in pairs:
                if field.startswith(b"s:"):
                    out[field[2:].decode()] = decode_sketches(value)
    return out


def _listed(verified: VerifiedIndex) -> dict[str, list[str]]:
    """Every fingerprint's ids, by stored fingerprint."""
    out: dict[str, list[str]] = {}
    for keys in verified.store.scan("fp"):
        for pairs in verified.store.hashes(keys):
            out.update((f.decode(), decode_ids(v)) for f, v in pairs if not f.startswith(b"s:"))
    return out


class _Counted:
    """Counts the writes of the read conversation and the other round trips of the store."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sends = self.executes = 0
        send, execute = wire.Exchange.send, store_module.Store.execute

        def counted_send(exchange: wire.Exchange, *batches: Any) -> None:
            self.sends += 1
            send(exchange, *batches)

        def counted_execute(store: store_module.Store, *args: Any, **kwargs: Any) -> Any:
            self.executes += 1
            return execute(store, *args, **kwargs)

        monkeypatch.setattr(wire.Exchange, "send", counted_send)
        monkeypatch.setattr(store_module.Store, "execute", counted_execute)

    def reset(self) -> None:
        self.sends = self.executes = 0


def test_verified_near_takes_at_most_two_round_trips(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "two", **K8))
    stories = [article(s) for s in range(5)]
    verified.add_many([(f"s{i}", text) for i, text in enumerate(stories)])
    counted = _Counted(monkeypatch)
    edited = one_word_edit(stories[2], 1)
    assert verified.index.fingerprint(edited) != verified.index.fingerprint(stories[2])
    assert [m.id for m in verified.near(edited)] == ["s2"]
    assert (counted.sends, counted.executes) == (2, 0)  # the table sets, then ids and sketches
    counted.reset()
    assert [m.id for m in verified.near(stories[3])] == ["s3"]
    assert (counted.sends, counted.executes) == (1, 0)  # an exact copy: its sketch came with its ids
    counted.reset()
    found = verified.near_many([one_word_edit(text, 2) for text in stories] + ["nothing like it"])
    assert [[m.id for m in one] for one in found] == [["s0"], ["s1"], ["s2"], ["s3"], ["s4"], []]
    assert (counted.sends, counted.executes) == (2, 0)


@pytest.mark.parametrize("where", ["server", "cluster"])
def test_sketches_follow_their_ids(where: str, request: pytest.FixtureRequest) -> None:
    client: redis.Redis | RedisCluster = request.getfixturevalue(
        "redis_cluster_client" if where == "cluster" else "redis_client"
    )
    verified = VerifiedIndex(SimhashIndex(client, f"follow{next(_names)}", **K8))
    first, second = article(40), article(41)
    fp1, fp2 = (encode_fp(verified.index.fingerprint(t), 64).decode() for t in (first, second))
    sketch1, sketch2 = verified.hasher.stored_sketch(first), verified.hasher.stored_sketch(second)
    verified.add_many([("y", first), ("twin", first)])
    assert _stored_sketches(verified) == {fp1: {"y": sketch1, "twin": sketch1}}
    # Replaced by another text: the sketch moves with the id, in the same step.
    verified.add("y", second)
    assert _stored_sketches(verified) == {fp1: {"twin": sketch1}, fp2: {"y": sketch2}}
    # Stored again without a sketch (an import of a document older than the mode): it has none.
    verified.add_sketched(["y"], [verified.index.fingerprint(second)], [None])
    assert verified.sketch_of("y") is None and verified.index.get("y") is not None
    assert _stored_sketches(verified) == {fp1: {"twin": sketch1}}
    verified.add("y", second)
    assert verified.remove_many(["twin", "y"]) == [True, True]
    assert _stored_sketches(verified) == {} and _listed(verified) == {}
    assert verified.index.count() == (0, 0)


def test_verify_removes_malformed_sketches(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "bad", **K8))
    verified.add_many([("a", article(70)), ("b", article(71))])
    keys, fp = verified.index.keys, encode_fp(verified.index.fingerprint(article(70)), 64)
    redis_client.hset(keys.fp_bucket(fp), keys.sketch_field(fp), b"9:a")
    report = verified.index.verify(repair=True)
    assert report.problems == {"malformed sketches": 1, "documents without a sketch": 1}
    assert redis_client.hget(keys.fp_bucket(fp), keys.sketch_field(fp)) is None
    assert verified.sketch_of("a") is None and verified.sketch_of("b") is not None
    assert verified.near(article(70)) == []  # never confirmed without its sketch


_TEXTS = [article(80 + n) for n in range(3)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "bare", "remove"]), st.integers(0, 3), st.integers(0, 2)),
        max_size=12,
    )
)
def test_every_write_keeps_each_ids_sketch_with_it(any_client: redis.Redis, ops: list[Any]) -> None:
    verified = VerifiedIndex(SimhashIndex(any_client, f"model{next(_names)}", **K8))
    model: dict[str, tuple[int, bool]] = {}  # id -> (text, with a sketch)
    try:
        for op, n, text in ops:
            doc_id = f"d{n}"
            if op == "remove":
                verified.remove(doc_id)
                model.pop(doc_id, None)
            elif op == "add":
                verified.add(doc_id, _TEXTS[text])
                model[doc_id] = (text, True)
            else:
                verified.add_sketched([doc_id], [verified.index.fingerprint(_TEXTS[text])], [None])
                model[doc_id] = (text, False)
        expected: dict[str, dict[str, bytes]] = {}
        for doc_id, (text, sketched) in model.items():
            assert verified.index.get(doc_id) == verified.index.fingerprint(_TEXTS[text])
            sketch = verified.hasher.stored_sketch(_TEXTS[text]) if sketched else None
            assert verified.sketch_of(doc_id) == sketch
            if sketch is not None:
                fp = encode_fp(verified.index.fingerprint(_TEXTS[text]), 64).decode()
                expected.setdefault(fp, {})[doc_id] = sketch
        assert _stored_sketches(verified) == expected
        report = verified.index.verify()
        assert set(report.problems) <= {"documents without a sketch"}
        assert verified.index.count()[0] == len(model)
    finally:
        verified.index.drop()
