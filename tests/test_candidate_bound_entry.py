"""`max_candidates` through every way of opening a verified index, checked before anything is written."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import redis
import redis.asyncio

from simhash_redis import InvalidArgument, SimhashIndex, VerifiedIndex, open_index
from simhash_redis import asyncio as simhash_asyncio
from simhash_redis.asyncio import AsyncVerifiedIndex
from simhash_redis.index.verified_index import MAX_CANDIDATES
from tests.servers import ServerProcess


def test_from_url_and_open_index_take_max_candidates(redis_url: str) -> None:
    assert VerifiedIndex.from_url(redis_url, "by-url", max_candidates=8).max_candidates == 8
    # A read setting, not pinned: the next one opened takes the default again.
    assert VerifiedIndex.from_url(redis_url, "by-url").max_candidates == MAX_CANDIDATES
    assert VerifiedIndex.from_url(redis_url, "by-url", max_candidates=None).max_candidates is None
    opened = open_index("opened", redis_url, max_candidates=np.int64(8))
    assert isinstance(opened, VerifiedIndex) and opened.max_candidates == 8


def test_asyncio_opens_take_max_candidates(redis_server: ServerProcess) -> None:
    redis_server.flushall()

    async def main() -> tuple[int | None, int | None, int | None]:
        async with await AsyncVerifiedIndex.from_url(redis_server.url, "a-url", max_candidates=8) as one:
            by_url = one.index.max_candidates
        client = redis.asyncio.Redis.from_url(redis_server.url)
        async with AsyncVerifiedIndex(client, "a-handle", max_candidates=6) as two:
            by_handle = two.index.max_candidates
        await client.aclose()
        opened = await simhash_asyncio.open_index("a-open", redis_server.url, max_candidates=4)
        async with opened:
            assert isinstance(opened, AsyncVerifiedIndex)
            by_open = opened.index.max_candidates
        return by_url, by_handle, by_open

    assert asyncio.run(main()) == (8, 6, 4)


def test_a_refused_max_candidates_writes_nothing_whichever_the_door(
    redis_url: str, redis_client: redis.Redis
) -> None:
    plain = SimhashIndex(redis_client, "plain")
    meta = redis_client.hgetall(plain.keys.meta)
    for bad in (0, -1, True, 2.5):
        with pytest.raises(InvalidArgument, match="max_candidates"):
            VerifiedIndex.from_url(redis_url, "new-url", max_candidates=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="max_candidates"):
            open_index("new-open", redis_url, max_candidates=bad)
        with pytest.raises(InvalidArgument, match="max_candidates"):
            open_index("plain", redis_url, max_candidates=bad)
    assert sorted(redis_client.keys()) == [plain.keys.meta]  # no index made, the plain one still plain
    assert redis_client.hgetall(plain.keys.meta) == meta
