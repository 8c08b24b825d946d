"""The write script under damaged data: counts stay exact and no error escapes untyped."""

from __future__ import annotations

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import Outcome, SimhashIndex
from simhash_redis.codec import decode_ids, encode_fp
from simhash_redis.errors import IndexCorrupted


@pytest.mark.parametrize("unique", [False, True], ids=["add", "add-if-new"])
@pytest.mark.parametrize("which", ["table", "fingerprint map", "id map"])
def test_a_failing_document_is_undone_and_a_rerun_completes_it(
    any_client: redis.Redis, which: str, unique: bool
) -> None:
    """A key of the wrong type met half-way through a document: the document's own writes are undone
    (before, its id stayed in the id map, invisible to near(), and a rerun called it UNCHANGED), those
    before it stay with their counts, and once the key is gone the same call completes the rest. The
    same for add-if-new's guarded adds (format 'g'), whose read meets a table of the wrong type first."""
    index = SimhashIndex(any_client, "ws", k=3)
    first, blocked, third = 0x1111_2222_3333_4444, 0x5555_6666_7777_8888, 0x9999_AAAA_BBBB_CCCC
    stored = encode_fp(blocked, 64)
    key = {
        "table": index.keys.tables(blocked)[2],
        "fingerprint map": index.keys.fp_bucket(stored),
        "id map": index.keys.id_bucket(b"second"),
    }[which]
    if which == "id map":  # the write's first command: nothing to undo, but the same outcome
        assert index.keys.id_bucket(b"second") != index.keys.id_bucket(b"first")
    any_client.set(key, "not a set or hash")
    items = [("first", first), ("second", blocked), ("third", third)]
    with pytest.raises(IndexCorrupted, match="wrong type"):
        index.add_many(items, unique=unique)
    if unique and which == "table":  # refused by the read, before anything is written
        assert index.count() == (0, 0)
        return
    assert index.get_many(["first", "third"]) == [first, None]
    if which == "id map":  # its bucket cannot be read either: a typed error
        with pytest.raises(IndexCorrupted):
            index.get("second")
    else:
        assert index.get("second") is None
    assert index.count() == (1, 1)  # the document that completed is counted; the failed one is not
    report = index.verify()
    assert report.problems == {"key of the wrong type": 1}, report.as_dict()
    any_client.delete(key)
    assert index.add_many(items) == [Outcome.UNCHANGED, Outcome.ADDED, Outcome.ADDED]
    assert index.verify().ok
    assert index.count() == (3, 3)


def test_a_counts_key_of_the_wrong_type_is_refused_before_any_write(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "ws", k=3)
    any_client.set(index.keys.counts, "not a hash")
    with pytest.raises(IndexCorrupted, match="counts"):
        index.add_many([("a", 1), ("b", 2)])
    assert index.get_many(["a", "b"]) == [None, None]
    any_client.delete(index.keys.counts)
    assert index.add_many([("a", 1), ("b", 2)]) == [Outcome.ADDED, Outcome.ADDED]
    assert index.count() == (2, 2)


def test_a_malformed_id_list_does_not_break_writes(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "ws", k=3)
    index.add("a", 5)
    stored = encode_fp(5, 64)
    any_client.hset(index.keys.fp_bucket(stored), stored, b"9:a")  # truncated netstring
    assert index.add_many([("n1", 1 << 50), ("b", 5)]) == [Outcome.ADDED, Outcome.ADDED]
    assert index.count() == (3, 2)
    assert index.get("n1") == 1 << 50


def test_ids_that_hold_other_ids_netstrings_are_removed_exactly(redis_client: redis.Redis) -> None:
    """An id is found in its fingerprint's list only at an item's start: "5:doc-1" also occurs inside
    the header of a 15-character id and inside an id like "x5:doc-1"."""
    index = SimhashIndex(redis_client, "ns", k=3)
    tricky = ["doc-1abcdefghij", "x5:doc-1", "doc-1", "5:doc-1"]
    index.add_many([(doc_id, 7) for doc_id in tricky])
    assert index.remove("doc-1")
    assert sorted(m.id for m in index.near(7, k=0)) == sorted(set(tricky) - {"doc-1"})
    assert not index.remove("doc-1")
    assert index.remove("x5:doc-1") and index.remove("5:doc-1")
    assert [m.id for m in index.near(7, k=0)] == ["doc-1abcdefghij"]


# Ids whose netstrings occur inside one another's: "1:a" in "3:1:a"; "5:aaaaa" in "15:aaaaa..." (a header).
_NESTED = ["a", "1:a", "3:1:a", "aaaaa", "aaaaaaaaaaaaaaa", "5:aaaaa", "x5:aaaaa"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.booleans(), st.one_of(st.sampled_from(_NESTED), st.text(alphabet="15:a", min_size=1))),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([0, 700]),
)
def test_one_fingerprints_ids_follow_adds_and_removals(
    redis_client: redis.Redis, steps: list[tuple[bool, str]], padding: int
) -> None:
    """Ids made of digits and colons (netstrings inside netstrings), added and removed on one fingerprint
    in batches, in a short list and in a long one (which the script searches by its marks): the listed
    ids are exactly the model's."""
    redis_client.flushdb()
    index = SimhashIndex(redis_client, "prop", k=3)
    model = {f"pad{i}:{'x' * (i % 4)}" for i in range(padding)}  # items of unequal lengths
    index.add_many([(doc_id, 9) for doc_id in sorted(model)])
    for start in range(0, len(steps), 5):
        batch = steps[start : start + 5]
        adds = list(dict.fromkeys(doc_id for add, doc_id in batch if add))
        removals = [doc_id for add, doc_id in batch if not add and doc_id not in adds]
        # Padding ids removed in the same script as the batch's: the long list's marks move between them.
        gone = sorted(model)[start::97][:3] if padding else []
        index.add_many([(doc_id, 9) for doc_id in adds])
        index.remove_many(removals + [doc_id for doc_id in gone if doc_id not in adds])
        model = (model | set(adds)) - set(removals) - (set(gone) - set(adds))
        assert sorted(m.id for m in index.near(9, k=0)) == sorted(model)
    assert index.count() == (len(model), 1 if model else 0)


def test_a_length_with_a_leading_zero_is_malformed_for_the_scripts_and_for_verify(
    redis_client: redis.Redis,
) -> None:
    """The scripts find an id by its netstring's bytes, so "05:doc-1" is not a length they can read;
    verify says so and repairs it from the id map."""
    index = SimhashIndex(redis_client, "zero", k=3)
    index.add_many([("doc-1", 7), ("doc-2", 7)])
    stored = encode_fp(7, 64)
    redis_client.hset(index.keys.fp_bucket(stored), stored, b"05:doc-15:doc-2")
    with pytest.raises(ValueError, match="malformed netstring length"):
        decode_ids(b"05:doc-1")
    report = index.verify()
    assert not report.ok and "malformed fingerprint-map entry" in str(report)
    assert index.verify(repair=True).problems and index.verify().ok
    assert index.remove("doc-1")
    assert [m.id for m in index.near(7, k=0)] == ["doc-2"] and index.verify().ok
