"""`AsyncSimhashIndex`: the shared index on redis.asyncio, every call of `SimhashIndex` awaited."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, overload

from .. import defaults
from ..index import Document, SimhashIndex, VerifyReport
from ..index.batches import DEFAULT_WINDOW, BatchProgress, Progress
from ..results import Match, Outcome
from ..transport.greenlet_bridge import run
from .handle import AsyncHandle, asyncio_client

__all__ = ["AsyncSimhashIndex"]


class AsyncSimhashIndex(AsyncHandle[SimhashIndex]):
    """A near-duplicate index that any number of processes share, for asyncio code (redis.asyncio).

    Every method is `SimhashIndex`'s, awaited: the same code, so the same arguments, results, errors and
    guarantees (docs/asyncio.md); progress callbacks are called synchronously. Calls of one index may run
    concurrently from many tasks. The index opens on first use (or `await index.open()`, or `async
    with`), creating it or checking the arguments against the stored configuration.

    Args:
        client: a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster client.
        name: the index name.
        **options: the other arguments of `SimhashIndex` (k, f, layout, scheme, retention, ...).

    Raises:
        InvalidType: the client is not a redis.asyncio client.
    """

    def _make(self, client: Any, name: str, options: dict[str, Any]) -> SimhashIndex:
        return SimhashIndex(client, name, **options)

    def _plain(self, index: SimhashIndex) -> SimhashIndex:
        return index

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

    async def near(self, query: Document, k: int | None = None) -> list[Match]:
        """`SimhashIndex.near`, awaited: every stored document within distance k, nearest first."""
        return await run((await self._opened()).near, query, k)

    async def near_many(
        self, queries: Sequence[Document], k: int | None = None, *, on_progress: BatchProgress | None = None
    ) -> list[list[Match]]:
        """`SimhashIndex.near_many`, awaited."""
        return await run((await self._opened()).near_many, queries, k, on_progress=on_progress)

    async def get(self, doc_id: str) -> int | None:
        """`SimhashIndex.get`, awaited: the fingerprint stored for an id, or None."""
        return await run((await self._opened()).get, doc_id)

    async def get_many(self, ids: Sequence[str]) -> list[int | None]:
        """`SimhashIndex.get_many`, awaited."""
        return await run((await self._opened()).get_many, ids)

    async def count(self) -> tuple[int, int]:
        """`SimhashIndex.count`, awaited: the number of documents and of distinct fingerprints."""
        return await run((await self._opened()).count)

    async def add(self, doc_id: str, doc: Document) -> Outcome:
        """`SimhashIndex.add`, awaited: store a document under an id."""
        return await run((await self._opened()).add, doc_id, doc)

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
        """`SimhashIndex.add_many`, awaited."""
        index = await self._opened()
        result: list[Outcome] | list[Outcome | Match] = await run(
            index.add_many, items, unique=unique, on_progress=on_progress
        )
        return result

    async def bulk_add(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        window: int = DEFAULT_WINDOW,
        on_progress: Progress | None = None,
    ) -> list[Outcome]:
        """`SimhashIndex.bulk_add`, awaited (a synchronous iterable, read lazily)."""
        return await run((await self._opened()).bulk_add, items, window=window, on_progress=on_progress)

    async def add_if_new(self, doc_id: str, doc: Document) -> Match | None:
        """`SimhashIndex.add_if_new`, awaited: store unless a near-duplicate is stored, atomically."""
        return await run((await self._opened()).add_if_new, doc_id, doc)

    async def remove(self, doc_id: str) -> bool:
        """`SimhashIndex.remove`, awaited: whether the id was stored."""
        return await run((await self._opened()).remove, doc_id)

    async def remove_many(
        self, ids: Iterable[str], *, on_progress: BatchProgress | None = None
    ) -> list[bool]:
        """`SimhashIndex.remove_many`, awaited."""
        return await run((await self._opened()).remove_many, ids, on_progress=on_progress)

    async def verify(self, repair: bool = False) -> VerifyReport:
        """`SimhashIndex.verify`, awaited: check (and with repair, fix) the index's consistency."""
        return await run((await self._opened()).verify, repair)

    async def drop(self) -> int:
        """`SimhashIndex.drop`, awaited: delete every key of this index; the number deleted."""
        return await run((await self._opened()).drop)
