"""BucketLocks, the cluster's add-if-new locks, round by round against a real server.

The locks are plain keys, so a standalone server shows their behaviour as a cluster would (where each
lock is a one-key script on the node of its slot): the ordered prefix a document keeps, renewal, the
locks given back after an interrupted call, idempotency after a lost reply, and documents of one batch
arbitrated by the server as workers are.
"""

from __future__ import annotations

import itertools
import random

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


def no_locks_left(client: redis.Redis, store: Store) -> bool:
    return client.keys(f"{store.keys.base}:lock:*") == []


def test_a_document_keeps_the_locks_before_its_first_miss(store: Store, redis_client: redis.Redis) -> None:
    a, b, c = buckets(store, "a", "b", "c")
    other = BucketLocks(store)
    assert other.acquire([(0, [b])])[0] == [True]
    mine = BucketLocks(store)
    got, after_round = mine.acquire([(7, [c, b, a])])
    assert got == [False] and after_round == []
    # a comes before b (held by the other worker) in the global order: kept; c comes after: given back.
    assert mine.kept == {7: [store.keys.lock(a)]}
    assert holder(redis_client, store, a) == mine.token_of(7)
    assert holder(redis_client, store, c) is None
    mine.release([(store.keys.lock(b), mine.token_of(7))])
    assert holder(redis_client, store, b) == other.token_of(0)  # a release checks the token
    other.release([(store.keys.lock(b), other.token_of(0))])
    got, after_round = mine.acquire([(7, [c, b, a])])
    assert got == [True] and mine.kept == {}
    assert mine.renew([7]) == [True]
    mine.release(after_round)
    assert no_locks_left(redis_client, store)


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
    # The same call resent (its first reply lost) finds the lock already this document's.
    assert mine.acquire([(0, [a])])[0] == [True]


def test_documents_of_one_batch_sharing_a_lock_are_arbitrated_by_the_server(store: Store) -> None:
    a, b = buckets(store, "a", "b")
    locks = BucketLocks(store)
    got, after_round = locks.acquire([(0, [a, b]), (1, [b])])
    assert got == [True, False]
    locks.release(after_round)
    assert locks.acquire([(1, [b])])[0] == [True]


def test_contenders_in_one_batch_and_across_workers_always_progress(
    store: Store, redis_client: redis.Redis
) -> None:
    """Rounds of random overlapping documents, in batches and across workers: someone always wins.

    Each round every worker asks for its pending documents' locks; a document that got all of its
    locks is done and releases them. With the ordered prefix, every round settles at least one
    document until none is left.
    """
    rng = random.Random(3)
    names = [f"k{i}" for i in range(8)]
    workers = [BucketLocks(store) for _ in range(3)]
    pending = {
        (w, doc): buckets(store, *rng.sample(names, rng.randint(1, 4))) for w in range(3) for doc in range(4)
    }
    for _ in itertools.count():
        done = []
        for w, worker in enumerate(workers):
            mine = [(doc, keys) for (owner, doc), keys in pending.items() if owner == w]
            if not mine:
                continue
            got, after_round = worker.acquire(mine)
            done += [(w, doc) for (doc, _), ok in zip(mine, got, strict=True) if ok]
            worker.release(after_round)
        assert done, f"no document progressed; left: {sorted(pending)}"
        for key in done:
            del pending[key]
        if not pending:
            break
    assert no_locks_left(redis_client, store)


def test_an_interrupted_acquire_gives_every_lock_back(
    store: Store, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = buckets(store, "a", "b", "c")
    locks = BucketLocks(store)
    other = BucketLocks(store)
    assert other.acquire([(0, [b])])[0] == [True]
    locks.acquire([(1, [a, b])])  # keeps a
    run_script = store.run_script

    def lost(script: object, calls: list[object], **kwargs: object) -> list[object]:
        run_script(script, calls)  # type: ignore[arg-type]  # applied by the server, reply lost
        monkeypatch.setattr(store, "run_script", run_script)
        raise RedisUnavailable("connection lost")

    monkeypatch.setattr(store, "run_script", lost)
    with pytest.raises(RedisUnavailable):
        locks.acquire([(1, [a, b]), (2, [c])])
    assert locks.kept == {}
    assert [holder(redis_client, store, key) for key in (a, b, c)] == [None, other.token_of(0), None]


def test_an_interrupted_release_of_spare_locks_gives_every_lock_back(
    store: Store, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, z = buckets(store, "a", "b", "z")
    other = BucketLocks(store)
    assert other.acquire([(0, [b])])[0] == [True]
    locks = BucketLocks(store)
    run_script = store.run_script
    calls_made = []

    def second_fails(script: object, calls: list[object], **kwargs: object) -> list[object]:
        calls_made.append(script)
        if len(calls_made) == 2:  # the release of the spare lock z
            raise RedisUnavailable("connection lost")
        return run_script(script, calls)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "run_script", second_fails)
    with pytest.raises(RedisUnavailable):
        locks.acquire([(1, [a]), (2, [b, z])])  # 1 gets a; 2 misses b, so z is spare
    monkeypatch.setattr(store, "run_script", run_script)
    assert [holder(redis_client, store, key) for key in (a, b, z)] == [None, other.token_of(0), None]


def test_a_refused_document_learns_who_holds_its_first_missing_lock(store: Store) -> None:
    first, second = BucketLocks(store), BucketLocks(store)
    got, held = first.acquire([(1, buckets(store, "b"))])
    assert got == [True] and first.blockers == {}
    got, _ = second.acquire([(7, buckets(store, "a", "b", "c"))])
    assert got == [False] and second.blockers == {7: first.token_of(1)}
    first.release(held)
    second.release_kept()
    got, held = second.acquire([(7, buckets(store, "a", "b", "c"))])
    assert got == [True] and second.blockers == {}
    second.release(held)
