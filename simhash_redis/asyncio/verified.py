"""`AsyncVerifiedIndex`: the verified mode on redis.asyncio, every call of `VerifiedIndex` awaited."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..index import SimhashIndex, VerifiedIndex, VerifyReport
from ..index.arguments import check_max_candidates
from ..index.verified_index import MAX_CANDIDATES, VerifiedDocument
from ..index.verified_open import verifiable
from ..results import Outcome, VerifiedMatch
from ..transport.greenlet_bridge import run
from .handle import AsyncHandle

__all__ = ["AsyncVerifiedIndex"]


class AsyncVerifiedIndex(AsyncHandle[VerifiedIndex]):
    """A verified index (SimHash and band candidates confirmed by stored sketches) for asyncio code.

    Every method is `VerifiedIndex`'s, awaited, with its arguments, results, errors and guarantees;
    `get`, `count`, `verify` and `drop` are the wrapped `SimhashIndex`'s. Opening creates the index
    verified from the start, or adopts the mode pinned in its meta, as `VerifiedIndex.from_url` does.

    Args:
        client: a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster client.
        name: the index name.
        hasher, threshold, band_buckets, max_candidates: as `VerifiedIndex`.
        **options: the arguments of the wrapped `SimhashIndex` (k, layout, ...).

    Raises:
        InvalidType: the client is not a redis.asyncio client.
    """

    def _make(self, client: Any, name: str, options: dict[str, Any]) -> VerifiedIndex:
        options = dict(options)
        hasher, threshold = options.pop("hasher", None), options.pop("threshold", None)
        band_buckets = options.pop("band_buckets", None)
        cap = check_max_candidates(options.pop("max_candidates", MAX_CANDIDATES))
        index = verifiable(client, name, hasher, threshold, options, band_buckets)
        return VerifiedIndex(index, hasher, threshold, band_buckets, cap)

    def _plain(self, index: VerifiedIndex) -> SimhashIndex:
        return index.index

    @property
    def threshold(self) -> float:
        """The pinned Jaccard threshold, once open."""
        return self.index.threshold

    async def near(
        self, query: VerifiedDocument, threshold: float | None = None, k: int | None = None
    ) -> list[VerifiedMatch]:
        """`VerifiedIndex.near`, awaited: the stored documents confirmed as near-duplicates of a text."""
        return await run((await self._opened()).near, query, threshold, k)

    async def near_many(
        self, queries: Sequence[VerifiedDocument], threshold: float | None = None, k: int | None = None
    ) -> list[list[VerifiedMatch]]:
        """`VerifiedIndex.near_many`, awaited."""
        return await run((await self._opened()).near_many, queries, threshold, k)

    async def get(self, doc_id: str) -> int | None:
        """`SimhashIndex.get`, awaited: the fingerprint stored for an id, or None."""
        return await run((await self._opened()).index.get, doc_id)

    async def sketch_of(self, doc_id: str) -> bytes | None:
        """`VerifiedIndex.sketch_of`, awaited: the stored sketch of a document, or None."""
        return await run((await self._opened()).sketch_of, doc_id)

    async def count(self) -> tuple[int, int]:
        """`SimhashIndex.count`, awaited: the number of documents and of distinct fingerprints."""
        return await run((await self._opened()).index.count)

    async def add(self, doc_id: str, doc: VerifiedDocument) -> Outcome:
        """`VerifiedIndex.add`, awaited: store a document with its sketch."""
        return await run((await self._opened()).add, doc_id, doc)

    async def add_many(self, items: Iterable[tuple[str, VerifiedDocument]]) -> list[Outcome]:
        """`VerifiedIndex.add_many`, awaited."""
        return await run((await self._opened()).add_many, items)

    async def add_if_new(self, doc_id: str, doc: VerifiedDocument) -> VerifiedMatch | None:
        """`VerifiedIndex.add_if_new`, awaited: store unless a confirmed near-duplicate is stored."""
        return await run((await self._opened()).add_if_new, doc_id, doc)

    async def add_if_new_many(
        self, items: Iterable[tuple[str, VerifiedDocument]]
    ) -> list[VerifiedMatch | None]:
        """`VerifiedIndex.add_if_new_many`, awaited."""
        return await run((await self._opened()).add_if_new_many, items)

    async def remove(self, doc_id: str) -> bool:
        """`VerifiedIndex.remove`, awaited: whether the id was stored (its sketch goes too)."""
        return await run((await self._opened()).remove, doc_id)

    async def remove_many(self, ids: Sequence[str]) -> list[bool]:
        """`VerifiedIndex.remove_many`, awaited."""
        return await run((await self._opened()).remove_many, ids)

    async def verify(self, repair: bool = False) -> VerifyReport:
        """`SimhashIndex.verify`, awaited: documents, sketches and tables checked (and repaired)."""
        return await run((await self._opened()).index.verify, repair)

    async def drop(self) -> int:
        """`SimhashIndex.drop`, awaited: delete every key of this index, sketches included."""
        return await run((await self._opened()).index.drop)
