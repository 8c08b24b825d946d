"""The write script under damaged data: counts stay exact and no error escapes untyped."""

from __future__ import annotations

import pytest
import redis

from simhash_redis import Outcome, SimhashIndex, SimhashRedisError
from simhash_redis.codec import encode_fp


def test_a_failing_document_keeps_the_counts_of_those_before_it(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "ws", k=3)
    first, blocked, third = 0x1111_2222_3333_4444, 0x5555_6666_7777_8888, 0x9999_AAAA_BBBB_CCCC
    any_client.set(index.keys.tables(blocked)[2], "not a set")  # a key of the wrong type
    with pytest.raises(SimhashRedisError):
        index.add_many([("first", first), ("second", blocked), ("third", third)])
    assert index.get("first") == first
    assert index.get("third") is None
    assert index.count()[0] == 1  # the document that completed is counted; the failed one is not
    report = index.verify()
    assert report.problems["key of the wrong type"] == 1
    any_client.delete(index.keys.tables(blocked)[2])
    index.verify(repair=True)  # "second" was stopped mid-way; repair completes it from the id map
    assert index.verify().ok
    assert index.get_many(["first", "second"]) == [first, blocked]


def test_a_malformed_id_list_does_not_break_writes(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "ws", k=3)
    index.add("a", 5)
    stored = encode_fp(5, 64)
    any_client.hset(index.keys.fp_bucket(stored), stored, b"9:a")  # truncated netstring
    assert index.add_many([("n1", 1 << 50), ("b", 5)]) == [Outcome.ADDED, Outcome.ADDED]
    assert index.count() == (3, 2)
    assert index.get("n1") == 1 << 50
