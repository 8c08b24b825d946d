"""BucketLocks, the cluster's add-if-new locks, round by round against a real server.

The locks are plain keys, so a standalone server shows their behaviour as a cluster would (where each
lock is a one-key script on the node of its slot): the ordered prefix a document keeps, renewal, the
locks given back after an interrupted acquire, and idempotency after a lost reply.
"""

from __future__ import annotations

import pytest
import redis

from simhash_redis import RedisUnavailable
from simhash_redis.store import BucketLocks, KeySchema, Layout, Store
from simhash_redis.transport import open_sender


@pytest.fixture
def store(redis_client: redis.Redis) -> Store:
    return Store(open_sender(redis_client), KeySchema("simhash", "locks", Layout.pigeonhole(64, 3), 64))


def buckets(store: Store, *names: str) -> list[bytes]:
    """Table keys of the given names (the lock of each is what counts)."""
    return [f"{store.keys.base}:t0:{name}".encode() for name in names]


def holder(client: redis.Redis, store: Store, table_key: bytes) -> bytes | None:
    value: bytes | None = client.get(store.keys.lock(table_key))
    return value


def test_a_document_keeps_the_locks_before_its_first_miss(store: Store, redis_client: redis.Redis) -> None:
    a, b, c = buckets(store, "a", "b", "c")
    other = BucketLocks(store)
    assert other.acquire([(0, [b])])[0] == [True]
    mine = BucketLocks(store)
    got, after_round = mine.acquire([(7, [c, b, a])])
    assert got == [False]
    # a comes before b (taken by the other worker) in the global order: kept; c comes after: given back.
    assert mine.kept == {7: [store.keys.lock(a)]}
    assert holder(redis_client, store, a) == mine.token
    assert holder(redis_client, store, c) is None
    mine.release(after_round)
    assert holder(redis_client, store, b) == other.token  # a release checks the token
    other.release([store.keys.lock(b)])
    got, after_round = mine.acquire([(7, [c, b, a])])
    assert got == [True] and mine.kept == {}
    assert mine.renew([7]) == [True]
    mine.release(after_round)
    assert redis_client.keys(f"{store.keys.base}:lock:*") == []


def test_a_lock_lost_since_it_was_taken_is_not_renewed(store: Store, redis_client: redis.Redis) -> None:
    (a,) = buckets(store, "a")
    mine = BucketLocks(store)
    assert mine.acquire([(0, [a])])[0] == [True]
    redis_client.delete(store.keys.lock(a))  # expired; another worker may have held it in between
    assert mine.renew([0]) == [False]
    assert holder(redis_client, store, a) is None  # a renewal never takes a free lock


def test_taking_again_after_a_lost_reply_answers_taken(store: Store) -> None:
    (a,) = buckets(store, "a")
    mine = BucketLocks(store)
    assert mine.acquire([(0, [a])])[0] == [True]
    # The same call resent (its first reply lost) finds the lock already this worker's.
    assert mine.acquire([(0, [a])])[0] == [True]


def test_documents_of_one_batch_sharing_a_lock_go_in_turn(store: Store) -> None:
    a, b = buckets(store, "a", "b")
    locks = BucketLocks(store)
    got, after_round = locks.acquire([(0, [a, b]), (1, [b])])
    assert got == [True, False]
    locks.release(after_round)
    assert locks.acquire([(1, [b])])[0] == [True]


def test_an_interrupted_acquire_gives_every_lock_back(
    store: Store, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = buckets(store, "a", "b")
    locks = BucketLocks(store)
    locks.acquire([(0, [a]), (1, [b])])  # taken, then kept by nobody after this:
    locks.kept = {1: [store.keys.lock(b)]}
    run_script = store.run_script

    def lost(script: object, calls: list[object], **kwargs: object) -> list[object]:
        run_script(script, calls)  # type: ignore[arg-type]  # applied by the server, reply lost
        monkeypatch.setattr(store, "run_script", run_script)
        raise RedisUnavailable("connection lost")

    monkeypatch.setattr(store, "run_script", lost)
    with pytest.raises(RedisUnavailable):
        locks.acquire([(0, [a]), (1, [b])])
    assert locks.kept == {}
    assert redis_client.keys(f"{store.keys.base}:lock:*") == []
