"""`AsyncSimhashIndex` and `AsyncVerifiedIndex`: every call of the synchronous index awaited; `open_index`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Literal, overload

from .. import defaults
from ..index import Document, SimhashIndex, VerifiedIndex
from ..index.batches import BatchProgress
from ..index.mode import open_in_mode
from ..results import Match, Outcome
from ..tools.connect import default_url
from ..transport import client_from_url
from ..transport.greenlet_bridge import run
from .handle import AsyncHandle, asyncio_client, awaited

__all__ = ["AsyncSimhashIndex", "AsyncVerifiedIndex", "open_index"]


class AsyncSimhashIndex(AsyncHandle[SimhashIndex]):
    """A near-duplicate index that any number of processes share, for asyncio code (redis.asyncio).

    Every method is `SimhashIndex`'s, awaited: the same code, arguments, results, errors and guarantees
    (docs/asyncio.md); progress callbacks are called synchronously. Calls of one index may run
    concurrently from many tasks. The index opens on first use (or `await index.open()`, or `async
    with`), creating it or checking the arguments against the stored configuration.

    Args:
        client: a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster client (else InvalidType).
        **options: the other arguments of `SimhashIndex` (k, f, layout, scheme, retention, ...).
    """

    _opener = SimhashIndex

    @classmethod
    async def exists(cls, client: Any, name: str, *, prefix: str = defaults.PREFIX) -> bool:
        """`SimhashIndex.exists`, awaited: whether an index of that name exists on the server."""
        return await run(SimhashIndex.exists, asyncio_client(client), name, prefix=prefix)

    @classmethod
    async def restore(cls, client: Any, name: str, **config: Any) -> AsyncSimhashIndex:
        """`SimhashIndex.restore`, awaited: write a lost meta key anew, after checking the data."""
        await run(SimhashIndex.restore, asyncio_client(client), name, **config)
        return await cls(client, name, **config, create=False).open()

    def fingerprint(self, doc: Document) -> int:
        """`SimhashIndex.fingerprint` (CPU only), once open."""
        return self.index.fingerprint(doc)

    near = awaited(SimhashIndex.near)
    near_many = awaited(SimhashIndex.near_many)
    get = awaited(SimhashIndex.get)
    get_many = awaited(SimhashIndex.get_many)
    count = awaited(SimhashIndex.count)
    add = awaited(SimhashIndex.add)

    @overload
    async def add_many(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        unique: Literal[False] = False,
        on_progress: BatchProgress | None = None,
    ) -> list[Outcome]: ...

    @overload
    async def add_many(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        unique: Literal[True],
        on_progress: BatchProgress | None = None,
    ) -> list[Outcome | Match]: ...

    async def add_many(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        unique: bool = False,
        on_progress: BatchProgress | None = None,
    ) -> list[Outcome] | list[Outcome | Match]:
        """`SimhashIndex.add_many`, awaited (its overloads kept, which `awaited` cannot carry)."""
        result: list[Outcome] | list[Outcome | Match] = await self._run(
            "add_many", items, unique=unique, on_progress=on_progress
        )
        return result

    bulk_add = awaited(SimhashIndex.bulk_add)
    add_if_new = awaited(SimhashIndex.add_if_new)
    add_if_new_many = awaited(SimhashIndex.add_if_new_many)
    remove = awaited(SimhashIndex.remove)
    remove_many = awaited(SimhashIndex.remove_many)
    verify = awaited(SimhashIndex.verify)
    drop = awaited(SimhashIndex.drop)


class AsyncVerifiedIndex(AsyncHandle[VerifiedIndex]):
    """A verified index (SimHash and band candidates confirmed by stored sketches) for asyncio code.

    Every method is `VerifiedIndex`'s, awaited, with its arguments, results, errors and guarantees.
    Opening creates the index verified from the start, or adopts the mode pinned in its meta, as
    `VerifiedIndex.from_url` does.

    Args:
        client: a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster client (else InvalidType).
        hasher, threshold, band_buckets, max_candidates: as `VerifiedIndex`.
        **options: the arguments of the wrapped `SimhashIndex` (k, layout, ...).
    """

    def _opener(self, client: Any, name: str, **options: Any) -> VerifiedIndex:
        return VerifiedIndex.on_client(client, name, **options)  # looked up at each open: patchable

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


async def open_index(
    name: str, url: str | None = None, *, verified: bool | None = None, **kwargs: Any
) -> AsyncSimhashIndex | AsyncVerifiedIndex:
    """`simhash_redis.open_index` for asyncio code: an `AsyncVerifiedIndex`, or an `AsyncSimhashIndex` for
    a plain index (closed by `aclose`, or `async with`)."""
    # The embedded server may have to be started: a blocking wait, kept off the event loop.
    target = url or await asyncio.to_thread(default_url)
    client: Any = await run(client_from_url, target, asyncio=True)
    try:
        index = await run(open_in_mode, client, name, verified=verified, **kwargs)
    except BaseException:
        await client.aclose()
        raise
    kind = AsyncVerifiedIndex if isinstance(index, VerifiedIndex) else AsyncSimhashIndex
    handle: AsyncSimhashIndex | AsyncVerifiedIndex = kind(client, name)
    handle.adopt(index)  # type: ignore[arg-type]  # the kind of handle matches the kind of index
    handle.owns_client = True
    return handle
