"""The verified index contract on a real server: sketches stored with documents, near() verified."""

from __future__ import annotations

import random

import pytest
import redis
from redis.cluster import RedisCluster

from simhash_redis import Layout, Outcome, SimhashIndex
from simhash_redis.codec import encode_fp, encode_sketches
from simhash_redis.errors import ConfigurationMismatch, InvalidArgument, InvalidType
from simhash_redis.index.verified_index import VerifiedIndex, VerifiedMatch

_RNG = random.Random(7)
_VOCAB = [f"word{i}" for i in range(2000)]
BASE = " ".join(_RNG.choice(_VOCAB) for _ in range(300))


def _edit(text: str, rate: float, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(w if rng.random() > rate else rng.choice(_VOCAB) for w in text.split())


@pytest.fixture
def verified(redis_client: redis.Redis) -> VerifiedIndex:
    index = SimhashIndex(redis_client, "ver", k=8, layout=Layout.permuted(64, 8, blocks=10), id_buckets=64)
    return VerifiedIndex(index)


def test_add_stores_sketch_in_index_key_space(verified: VerifiedIndex, redis_client: redis.Redis) -> None:
    assert verified.add("a", BASE) is Outcome.ADDED
    sketch = verified.sketch_of("a")
    assert sketch is not None and len(sketch) == verified.hasher.sketch_bytes
    # Beside the id, in its fingerprint's field of the fingerprint map: near() reads both at once.
    keys, fp = verified.index.keys, encode_fp(verified.index.fingerprint(BASE), 64)
    assert redis_client.hget(keys.fp_bucket(fp), b"s:" + fp) == encode_sketches([(b"a", sketch)])
    assert verified.index.get("a") == verified.index.fingerprint(BASE)
    # The mode was pinned on a plain index of format 4, which it stays: its map is placed by bits.
    assert redis_client.hget(keys.meta, "format") == b"4"


def test_near_confirms_near_duplicates_and_rejects_others(verified: VerifiedIndex) -> None:
    verified.add_many([("orig", BASE), ("other", " ".join(_RNG.choice(_VOCAB) for _ in range(300)))])
    near = verified.near(_edit(BASE, 0.01, 1), threshold=0.8)
    assert [m.id for m in near] == ["orig"]
    assert isinstance(near[0], VerifiedMatch) and 0.8 <= near[0].jaccard <= 1.0
    assert verified.near(BASE, threshold=1.0)[0].jaccard == 1.0
    # A high threshold rejects a candidate the Hamming search found.
    edited = _edit(BASE, 0.01, 2)
    assert [m.id for m in verified.index.near(edited)] == ["orig"]
    assert verified.near(edited, threshold=0.999) == []


def test_near_many_and_ordering(verified: VerifiedIndex) -> None:
    verified.add_many([("a", BASE), ("b", _edit(BASE, 0.02, 3)), ("c", _edit(BASE, 0.04, 4))])
    results = verified.near_many([BASE, "unrelated text entirely"], threshold=0.5)
    assert results[1] == []
    sims = [m.jaccard for m in results[0]]
    assert sims == sorted(sims, reverse=True) and results[0][0].id == "a"


def test_remove_deletes_sketch_and_drop_covers_it(verified: VerifiedIndex, redis_client: redis.Redis) -> None:
    verified.add_many([("a", BASE), ("b", "some other text here")])
    assert verified.remove_many(["a", "zz"]) == [True, False]
    assert verified.sketch_of("a") is None and verified.index.get("a") is None
    assert verified.sketch_of("b") is not None
    verified.index.drop()
    assert redis_client.keys(f"{verified.index.keys.base}:*") == []


def test_candidate_without_sketch_is_dropped(verified: VerifiedIndex, redis_client: redis.Redis) -> None:
    # A document whose sketch is lost (a damaged index): it cannot be confirmed, so it is not a match.
    verified.add("lost", BASE)
    keys, fp = verified.index.keys, encode_fp(verified.index.fingerprint(BASE), 64)
    redis_client.hdel(keys.fp_bucket(fp), keys.sketch_field(fp))
    assert [m.id for m in verified.index.near(BASE)] == ["lost"]
    assert verified.near(BASE) == []


def test_a_plain_index_with_documents_is_not_made_verified(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "plain", k=8, layout=Layout.permuted(64, 8, blocks=10), id_buckets=64)
    index.add("a", BASE)
    with pytest.raises(ConfigurationMismatch, match="without sketches"):
        VerifiedIndex(index)
    assert SimhashIndex(redis_client, "plain").config.verification is None


def test_arguments_are_checked(verified: VerifiedIndex) -> None:
    with pytest.raises(InvalidType):
        verified.add("a", 123)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        verified.near(BASE, threshold=1.5)
    with pytest.raises(InvalidType):
        VerifiedIndex("not an index")  # type: ignore[arg-type]
    assert verified.sketch_of("a") is None


@pytest.mark.parametrize(
    ("bad", "error"),
    [(("", "text"), InvalidArgument), (("x", 123), InvalidType), ("not a pair", InvalidType)],
)
def test_a_malformed_pair_past_the_first_batch_leaves_nothing_stored(
    verified: VerifiedIndex, redis_client: redis.Redis, bad: object, error: type[Exception]
) -> None:
    verified.index.batch_size = 2
    items = [(f"d{i}", _edit(BASE, 0.5, i)) for i in range(5)]
    for call in (verified.add_many, verified.add_if_new_many):
        with pytest.raises(error):
            call([*items, bad])  # type: ignore[list-item]
        assert verified.index.count() == (0, 0) and verified.sketch_of("d0") is None


def test_verified_index_on_cluster(redis_cluster_client: RedisCluster) -> None:
    verified = VerifiedIndex(
        SimhashIndex(redis_cluster_client, "vc", k=8, layout=Layout.permuted(64, 8, blocks=10))
    )
    verified.add_many([("a", BASE), ("b", "some other text here")])
    assert [m.id for m in verified.near(_edit(BASE, 0.01, 5))] == ["a"]
    assert verified.remove_many(["a", "zz"]) == [True, False]
    assert verified.sketch_of("a") is None and verified.sketch_of("b") is not None


def test_near_sketched_confirms_documents_made_already(verified: VerifiedIndex) -> None:
    """Queries fingerprinted and sketched beforehand: the stored copies their sketches confirm, with the
    Jaccard estimated from the stored texts' own sketches (made here, not read back)."""
    stored = {"a": BASE, "b": _edit(BASE, 0.02, 3), "c": "a different story about something else"}
    verified.add_many(list(stored.items()))
    queries = [_edit(BASE, 0.01, 5), "unrelated text entirely"]
    fps, sketches = verified.index.fingerprint_many(queries), verified.hasher.sketch_many(queries)
    fp_of = {doc_id: verified.index.fingerprint(text) for doc_id, text in stored.items()}
    jaccard = {
        doc_id: verified.hasher.estimate(sketches[0], verified.hasher.stored_sketch(stored[doc_id]))
        for doc_id in "ab"
    }
    assert min(jaccard.values()) >= verified.threshold and jaccard["a"] != jaccard["b"]
    expected = sorted(
        (VerifiedMatch(i, fp_of[i], (fps[0] ^ fp_of[i]).bit_count(), jaccard[i]) for i in "ab"),
        key=lambda m: (-m.jaccard, m.distance, m.id),
    )
    assert verified.near_sketched(fps, sketches) == [expected, []]
    # A threshold between the two estimates keeps the closer copy only.
    between = sum(jaccard.values()) / 2
    assert verified.near_sketched(fps, sketches, threshold=between) == [expected[:1], []]
    for bad in (sketches[:1], [sketches[0], sketches[1][:-1]], [sketches[0], None]):
        with pytest.raises(InvalidArgument, match="sketch"):
            verified.near_sketched(fps, bad)  # type: ignore[arg-type]


def test_texts_with_nothing_to_hash_are_near_duplicates(redis_client: redis.Redis) -> None:
    # docs/fingerprints.md: they share fingerprint 0 and their sketches (of empty sets) estimate 1, so
    # add_if_new stores the first and reports every later one, as a plain index does (open_index's
    # default mode is this one).
    # Empty and white-space texts are refused (as by the CLI and the service); texts of no word are not.
    verified = VerifiedIndex.on_client(redis_client, "blank")
    for doc in ("", "   "):
        with pytest.raises(InvalidArgument, match="empty or only white space"):
            verified.add_if_new("v", doc)
    assert verified.add_if_new("v0", "!!!") is None
    for i, doc in enumerate(["...", "\U0001f600"], 1):
        assert verified.add_if_new(f"v{i}", doc) == VerifiedMatch("v0", 0, 0, 1.0)
    assert verified.index.count() == (1, 1)
    assert verified.near("?") == [VerifiedMatch("v0", 0, 0, 1.0)]
    assert verified.near("a few words of text") == []
    # Within one batch too: the first is stored, the second is its duplicate.
    fresh = VerifiedIndex.on_client(redis_client, "blank2")
    assert fresh.add_if_new_many([("w0", "?"), ("w1", "--")]) == [None, VerifiedMatch("w0", 0, 0, 1.0)]


def test_near_many_takes_queries_as_a_plain_index_does(verified: VerifiedIndex) -> None:
    """A generator of queries got [] (its texts were spent checking them), and a str was read as one
    query per character; a plain index answers the one and refuses the other."""
    verified.add("a", BASE)
    assert [[m.id for m in found] for found in verified.near_many(q for q in [BASE, "other"])] == [["a"], []]
    with pytest.raises(InvalidType, match="queries must be a list"):
        verified.near_many(BASE)  # type: ignore[arg-type]
