"""The write script under damaged data: counts stay exact and no error escapes untyped."""

from __future__ import annotations

import pytest
import redis

from simhash_redis import Outcome, SimhashIndex
from simhash_redis.codec import encode_fp
from simhash_redis.errors import IndexCorrupted


@pytest.mark.parametrize("which", ["table", "fingerprint map", "id map"])
def test_a_failing_document_is_undone_and_a_rerun_completes_it(any_client: redis.Redis, which: str) -> None:
    """A key of the wrong type met half-way through a document: the document's own writes are undone
    (before, its id stayed in the id map, invisible to near(), and a rerun called it UNCHANGED), those
    before it stay with their counts, and once the key is gone the same call completes the rest."""
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
        index.add_many(items)
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
