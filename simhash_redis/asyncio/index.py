"""`AsyncSimhashIndex`: the shared index on redis.asyncio, every call of `SimhashIndex` awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Literal, overload

from .. import defaults
from ..errors import InvalidType, SimhashRedisError
from ..index import Document, SimhashIndex, VerifyReport
from ..index.batches import BatchProgress
from ..index.bulk import DEFAULT_WINDOW, Progress
from ..results import Match, Outcome
from ..store import IndexConfig, Layout
from ..transport import client_from_url, is_asyncio_client
from ..transport.bridge import run

__all__ = ["AsyncSimhashIndex"]


class AsyncSimhashIndex:
    """A near-duplicate index that any number of processes share, for asyncio code (redis.asyncio).

    Every method is `SimhashIndex`'s, awaited: the same arguments, results, errors and guarantees
    (exactly one winner among racing `add_if_new` calls, in one event loop or across processes), since
    it is the same code: each call runs `SimhashIndex` in a greenlet whose network I/O the calling task
    awaits (docs/asyncio.md). Calls of one index may run concurrently from many tasks.

    The index opens on first use (or `await index.open()`, or `async with`), which creates it or
    checks the arguments against the stored configuration, as `SimhashIndex(...)` does.

    Args:
        client: a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster client.
        name: the index name.
        **options: the other arguments of `SimhashIndex` (k, f, layout, scheme, retention, ...).

    Raises:
        InvalidType: the client is not a redis.asyncio client.
    """

    def __init__(self, client: Any, name: str, **options: Any) -> None:
        self.client = _asyncio_client(client)
        self.name = name
        self._options = options
        self._index: SimhashIndex | None = None
        self._opening = asyncio.Lock()
        #: Whether `aclose` closes the client (a client made by `from_url`).
        self.owns_client = False

    @classmethod
    async def from_url(cls, url: str, name: str, **kwargs: Any) -> AsyncSimhashIndex:
        """Open an index on the server at a redis://, rediss:// or unix:// URL (closed by `aclose`).

        Args:
            url: the server's URL (credentials in it never appear in messages).
            name: the index name.
            **kwargs: the other arguments of `SimhashIndex`.

        Raises:
            InvalidArgument: the URL is malformed.
            RedisUnavailable: the server cannot be reached.
            ConfigurationMismatch, IndexNotFound, IndexCorrupted: as `SimhashIndex`.
        """
        client = await run(client_from_url, url, asyncio=True)
        index = cls(client, name, **kwargs)
        index.owns_client = True
        try:
            return await index.open()
        except BaseException:
            await index.aclose()
            raise

    @classmethod
    async def exists(cls, client: Any, name: str, *, prefix: str = defaults.PREFIX) -> bool:
        """`SimhashIndex.exists`, awaited: whether an index of that name exists on the server.

        Args:
            client: a redis.asyncio client.
            name: the index name.
            prefix: the key prefix it was created with.

        Raises:
            InvalidArgument, InvalidType: a malformed name or prefix.
            RedisUnavailable: the server cannot be reached.
        """
        return await run(SimhashIndex.exists, _asyncio_client(client), name, prefix=prefix)

    @classmethod
    async def restore(cls, client: Any, name: str, **config: Any) -> AsyncSimhashIndex:
        """`SimhashIndex.restore`, awaited: write a lost meta key anew, after checking the data.

        Args:
            client: a redis.asyncio client.
            name: the index name.
            **config: the other arguments of `SimhashIndex` (k is required).

        Raises:
            InvalidArgument, ConfigurationMismatch, IndexCorrupted, RedisUnavailable: as
                `SimhashIndex.restore`.
        """
        await run(SimhashIndex.restore, _asyncio_client(client), name, **config)
        return await cls(client, name, **config, create=False).open()

    async def open(self) -> AsyncSimhashIndex:
        """Open the index now (creating it, or checking it against the arguments); later calls return at once.

        Raises:
            ConfigurationMismatch, IndexNotFound, IndexCorrupted, InvalidArgument, RedisUnavailable: as
                `SimhashIndex`.
        """
        await self._opened()
        return self

    async def aclose(self) -> None:
        """Close the client if `from_url` made it (a client passed in stays its owner's)."""
        if self.owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> AsyncSimhashIndex:
        return await self.open()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _opened(self) -> SimhashIndex:
        index = self._index
        if index is None:
            async with self._opening:
                if self._index is None:
                    self._index = await run(SimhashIndex, self.client, self.name, **self._options)
                index = self._index
        return index

    @property
    def index(self) -> SimhashIndex:
        """The opened index's synchronous half: configuration, key schema, fingerprints (no I/O).

        Raises:
            SimhashRedisError: the index is not open yet (await `open()` or use `async with`).
        """
        if self._index is None:
            raise SimhashRedisError(f"index {self.name!r} is not open yet: await index.open() first")
        return self._index

    # -- configuration and fingerprints: no I/O, so not awaited ----------------------------------------

    @property
    def config(self) -> IndexConfig:
        """The stored configuration (f, k, layout, scheme, ...), once open."""
        return self.index.config

    @property
    def f(self) -> int:
        """Fingerprint width in bits, once open."""
        return self.index.f

    @property
    def k(self) -> int:
        """The largest distance near() answers for, once open."""
        return self.index.k

    @property
    def layout(self) -> Layout:
        """The table layout, once open."""
        return self.index.layout

    @property
    def cluster(self) -> bool:
        """Whether the index runs on Redis Cluster, once open."""
        return self.index.cluster

    def fingerprint(self, doc: Document) -> int:
        """`SimhashIndex.fingerprint` (CPU only), once open.

        Args:
            doc: text, tokens, weighted features, or an int fingerprint.

        Raises:
            InvalidFingerprint, InvalidType: as `SimhashIndex.fingerprint`.
        """
        return self.index.fingerprint(doc)

    def __repr__(self) -> str:
        state = repr(self._index) if self._index is not None else f"name={self.name!r}, not open"
        return f"AsyncSimhashIndex({state})"

    # -- reads ---------------------------------------------------------------------------------------

    async def near(self, query: Document, k: int | None = None) -> list[Match]:
        """`SimhashIndex.near`, awaited: every stored document within distance k, nearest first.

        Args:
            query: text, tokens, weighted features or an int fingerprint.
            k: the largest distance, at most the index's k.

        Raises:
            InvalidArgument, InvalidFingerprint, RedisUnavailable: as `SimhashIndex.near`.
        """
        return await run((await self._opened()).near, query, k)

    async def near_many(
        self, queries: Sequence[Document], k: int | None = None, *, on_progress: BatchProgress | None = None
    ) -> list[list[Match]]:
        """`SimhashIndex.near_many`, awaited.

        Args:
            queries: the queries.
            k: the largest distance, at most the index's k.
            on_progress: called (synchronously) after each batch, as in `SimhashIndex.near_many`.

        Raises:
            InvalidArgument, InvalidFingerprint, RedisUnavailable: as `SimhashIndex.near_many`.
        """
        return await run((await self._opened()).near_many, queries, k, on_progress=on_progress)

    async def get(self, doc_id: str) -> int | None:
        """`SimhashIndex.get`, awaited: the fingerprint stored for an id, or None.

        Args:
            doc_id: the document id.

        Raises:
            InvalidArgument, InvalidType, RedisUnavailable: as `SimhashIndex.get`.
        """
        return await run((await self._opened()).get, doc_id)

    async def get_many(self, ids: Sequence[str]) -> list[int | None]:
        """`SimhashIndex.get_many`, awaited.

        Args:
            ids: the document ids.

        Raises:
            InvalidArgument, InvalidType, RedisUnavailable: as `SimhashIndex.get_many`.
        """
        return await run((await self._opened()).get_many, ids)

    async def count(self) -> tuple[int, int]:
        """`SimhashIndex.count`, awaited: the number of documents and of distinct fingerprints.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        return await run((await self._opened()).count)

    # -- writes ---------------------------------------------------------------------------------------

    async def add(self, doc_id: str, doc: Document) -> Outcome:
        """`SimhashIndex.add`, awaited: store a document under an id.

        Args:
            doc_id: the document id.
            doc: text, tokens, weighted features, or a precomputed int fingerprint.

        Raises:
            InvalidArgument, InvalidType, InvalidFingerprint, RedisUnavailable: as `SimhashIndex.add`.
        """
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
        """`SimhashIndex.add_many`, awaited.

        Args:
            items: (id, document) pairs; a later pair for the same id wins.
            unique: store a document only if no near-duplicate is stored, as `add_if_new` does.
            on_progress: called (synchronously) after each batch.

        Raises:
            InvalidArgument, InvalidType, InvalidFingerprint, RedisUnavailable: as
                `SimhashIndex.add_many`.
        """
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
        """`SimhashIndex.bulk_add`, awaited (a synchronous iterable, read lazily).

        Args:
            items: (id, document) pairs.
            window: pairs grouped per round of commands.
            on_progress: called (synchronously) after each window.

        Raises:
            InvalidArgument, InvalidType, InvalidFingerprint, RedisUnavailable: as `SimhashIndex.bulk_add`.
        """
        return await run((await self._opened()).bulk_add, items, window=window, on_progress=on_progress)

    async def add_if_new(self, doc_id: str, doc: Document) -> Match | None:
        """`SimhashIndex.add_if_new`, awaited: store unless a near-duplicate is stored, atomically.

        Args:
            doc_id: the document id.
            doc: text, tokens, weighted features, or a precomputed int fingerprint.

        Returns:
            None if stored, else the stored near-duplicate (as `SimhashIndex.add_if_new`).

        Raises:
            InvalidArgument, InvalidType, InvalidFingerprint, RedisUnavailable, WriteContention: as
                `SimhashIndex.add_if_new`.
        """
        return await run((await self._opened()).add_if_new, doc_id, doc)

    async def remove(self, doc_id: str) -> bool:
        """`SimhashIndex.remove`, awaited: whether the id was stored.

        Args:
            doc_id: the document id.

        Raises:
            InvalidArgument, InvalidType, RedisUnavailable: as `SimhashIndex.remove`.
        """
        return await run((await self._opened()).remove, doc_id)

    async def remove_many(
        self, ids: Iterable[str], *, on_progress: BatchProgress | None = None
    ) -> list[bool]:
        """`SimhashIndex.remove_many`, awaited.

        Args:
            ids: the document ids.
            on_progress: called (synchronously) after each batch.

        Raises:
            InvalidArgument, InvalidType, RedisUnavailable: as `SimhashIndex.remove_many`.
        """
        return await run((await self._opened()).remove_many, ids, on_progress=on_progress)

    async def verify(self, repair: bool = False) -> VerifyReport:
        """`SimhashIndex.verify`, awaited: check (and with repair, fix) the index's consistency.

        Args:
            repair: also fix what is found.

        Raises:
            RedisUnavailable: the server cannot be reached; run it again.
        """
        return await run((await self._opened()).verify, repair)

    async def drop(self) -> int:
        """`SimhashIndex.drop`, awaited: delete every key of this index; the number deleted.

        Raises:
            RedisUnavailable: the server cannot be reached; run drop again to finish.
        """
        return await run((await self._opened()).drop)


def _asyncio_client(client: Any) -> Any:
    """The client, if it is redis.asyncio's.

    Raises:
        InvalidType: a client of another kind (a synchronous one, say).
    """
    if not is_asyncio_client(client):
        kind = type(client)
        raise InvalidType(
            "client must be a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster, got "
            f"{kind.__module__}.{kind.__qualname__} (use SimhashIndex with a synchronous client)"
        )
    return client
