"""The batch calls check the whole call before writing anything, and report progress batch by batch."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis

from simhash_redis import InvalidArgument, InvalidType, Outcome, SimhashIndex


def _items(count: int, seed: int = 5) -> list[tuple[str, Any]]:
    rng = random.Random(seed)
    return [(f"d{i}", rng.getrandbits(64)) for i in range(count)]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (("", 1), InvalidArgument),
        (("x", 2**64), InvalidArgument),
        (("x", 3.5), InvalidType),
        (["x", 1], InvalidType),
    ],
    ids=["empty id", "fingerprint too wide", "float document", "not a tuple"],
)
def test_a_bad_item_late_in_a_call_stores_nothing(redis_client: redis.Redis, bad: Any, error: type) -> None:
    index = SimhashIndex(redis_client, "whole", batch_size=1000)
    items: list[Any] = _items(1500)
    items[1200] = bad
    with pytest.raises(error):
        index.add_many(items)
    with pytest.raises(error):
        index.add_many(items, unique=True)
    assert index.count() == (0, 0)
    assert index.get_many([doc_id for doc_id, _ in _items(1200)]) == [None] * 1200


def test_a_bad_id_late_in_a_remove_removes_nothing(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "whole-remove", batch_size=1000)
    items = _items(1500)
    index.add_many(items)
    ids: list[Any] = [doc_id for doc_id, _ in items]
    ids[1200] = ""
    with pytest.raises(InvalidArgument):
        index.remove_many(ids)
    assert index.count() == (1500, 1500)


def test_progress_after_each_batch(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "progress", batch_size=400)
    seen: list[tuple[int, int]] = []
    items = _items(1000)
    outcomes = index.add_many(items, on_progress=lambda done, batch: seen.append((done, len(batch))))
    assert seen == [(400, 400), (800, 400), (1000, 200)]
    assert outcomes == [Outcome.ADDED] * 1000
    seen.clear()
    found = index.near_many([fp for _, fp in items], k=0, on_progress=lambda d, b: seen.append((d, len(b))))
    assert seen == [(400, 400), (800, 400), (1000, 200)] and all(found)
    seen.clear()
    index.remove_many([doc_id for doc_id, _ in items], on_progress=lambda d, b: seen.append((d, sum(b))))
    assert seen == [(400, 400), (800, 400), (1000, 200)]


def test_progress_must_be_callable(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "progress-type")
    for call in (
        lambda: index.add_many(_items(3), on_progress=42),  # type: ignore[call-overload]
        lambda: index.near_many([1], on_progress="x"),  # type: ignore[arg-type]
        lambda: index.remove_many(["a"], on_progress=1),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidType, match="on_progress"):
            call()
    assert index.count() == (0, 0)
