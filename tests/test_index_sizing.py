"""Sizing an index for its documents: `id_buckets` and a verified index's `band_buckets`, chosen when it
is created (library, asyncio and command line), pinned in the meta, refused when they disagree."""

from __future__ import annotations

import asyncio
import itertools

import pytest
import redis

from simhash_redis import (
    ConfigurationMismatch,
    InvalidArgument,
    InvalidType,
    SimhashIndex,
    VerifiedIndex,
)
from simhash_redis.asyncio import AsyncVerifiedIndex
from tests.servers import ServerProcess
from tests.test_verified_mode import article

_names = itertools.count()


def _name() -> str:
    return f"sized{next(_names)}"


def _band_buckets(client: redis.Redis, name: str) -> set[int]:
    """The bucket numbers of the band hashes an index holds."""
    keys = client.scan_iter(match=f"simhash:{name}:b*", count=1000)
    return {int(key.rsplit(b":", 1)[1], 16) for key in keys}


def test_band_buckets_chosen_at_creation_are_pinned_and_used(redis_server: ServerProcess) -> None:
    name = _name()
    index = VerifiedIndex.from_url(redis_server.url, name, band_buckets=8, id_buckets=64)
    index.add_many([(f"d{i}", article(i)) for i in range(200)])
    client = redis_server.client()
    meta = client.hget(f"simhash:{name}:meta".encode(), b"verified")
    assert meta is not None and meta.endswith(b";band_buckets=8")
    assert client.hget(f"simhash:{name}:meta".encode(), b"id_buckets") == b"64"
    assert _band_buckets(client, name) <= set(range(8)) and len(_band_buckets(client, name)) > 1
    assert [m.id for m in index.near(article(7))] == ["d7"]
    # A later worker adopts the pinned number, or states the same one.
    assert VerifiedIndex.from_url(redis_server.url, name).verification.band_buckets == 8
    assert VerifiedIndex.from_url(redis_server.url, name, band_buckets=8).near(article(9))[0].id == "d9"
    assert index.index.verify().ok


def test_a_band_buckets_other_than_the_pinned_one_is_refused(redis_server: ServerProcess) -> None:
    name = _name()
    VerifiedIndex.from_url(redis_server.url, name, band_buckets=8).add("a", article(1))
    with pytest.raises(ConfigurationMismatch, match="band_buckets=8, not 16") as info:
        VerifiedIndex.from_url(redis_server.url, name, band_buckets=16)
    assert info.value.remedy == "without-band_buckets"
    # Wrapping an index that is verified already checks it as well.
    with pytest.raises(ConfigurationMismatch, match="band_buckets"):
        VerifiedIndex(SimhashIndex(redis_server.client(), name), band_buckets=32)


def test_pinning_a_new_plain_index_takes_the_band_buckets(redis_server: ServerProcess) -> None:
    name = _name()
    verified = VerifiedIndex(SimhashIndex(redis_server.client(), name), band_buckets=4)
    assert verified.verification.band_buckets == 4
    verified.add("a", article(1))
    assert _band_buckets(redis_server.client(), name) <= set(range(4))


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, InvalidArgument), (1 << 25, InvalidArgument), ("8", InvalidType), (2.0, InvalidType)],
)
def test_a_malformed_band_buckets_is_refused_before_anything_is_written(
    redis_server: ServerProcess, value: object, error: type[Exception]
) -> None:
    name = _name()
    with pytest.raises(error, match="band_buckets"):
        VerifiedIndex.from_url(redis_server.url, name, band_buckets=value)  # type: ignore[arg-type]
    assert not SimhashIndex.exists(redis_server.client(), name)


def test_asyncio_creates_with_band_buckets(redis_server: ServerProcess) -> None:
    name = _name()

    async def main() -> int:
        async with await AsyncVerifiedIndex.from_url(redis_server.url, name, band_buckets=8) as index:
            await index.add("a", article(1))
            return index.index.verification.band_buckets

    assert asyncio.run(main()) == 8
    assert _band_buckets(redis_server.client(), name) <= set(range(8))
