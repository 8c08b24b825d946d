"""`AsyncVerifiedIndex`: the verified mode on redis.asyncio, every call of `VerifiedIndex` awaited."""

from __future__ import annotations

from typing import Any

from ..index import SimhashIndex, VerifiedIndex
from .handle import AsyncHandle, awaited

__all__ = ["AsyncVerifiedIndex"]


class AsyncVerifiedIndex(AsyncHandle[VerifiedIndex]):
    """A verified index (SimHash and band candidates confirmed by stored sketches) for asyncio code.

    Every method is `VerifiedIndex`'s, awaited, with its arguments, results, errors and guarantees;
    `get`, `get_many`, `count`, `verify` and `drop` are the wrapped `SimhashIndex`'s. Opening creates the
    index verified from the start, or adopts the mode pinned in its meta, as `VerifiedIndex.from_url` does.

    Args:
        client: a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster client.
        hasher, threshold, band_buckets, max_candidates: as `VerifiedIndex`.
        **options: the arguments of the wrapped `SimhashIndex` (k, layout, ...).

    Raises:
        InvalidType: the client is not a redis.asyncio client.
    """

    def _make(self, client: Any, name: str, options: dict[str, Any]) -> VerifiedIndex:
        return VerifiedIndex.on_client(client, name, **options)

    def _plain(self, index: VerifiedIndex) -> SimhashIndex:
        return index.index

    @property
    def threshold(self) -> float:
        """The pinned Jaccard threshold, once open."""
        return self.index.threshold

    near = awaited(VerifiedIndex.near)
    near_many = awaited(VerifiedIndex.near_many)
    get = awaited(SimhashIndex.get)
    get_many = awaited(VerifiedIndex.get_many)
    sketch_of = awaited(VerifiedIndex.sketch_of)
    count = awaited(SimhashIndex.count)
    add = awaited(VerifiedIndex.add)
    add_many = awaited(VerifiedIndex.add_many)
    add_if_new = awaited(VerifiedIndex.add_if_new)
    add_if_new_many = awaited(VerifiedIndex.add_if_new_many)
    remove = awaited(VerifiedIndex.remove)
    remove_many = awaited(VerifiedIndex.remove_many)
    verify = awaited(SimhashIndex.verify)
    drop = awaited(SimhashIndex.drop)
