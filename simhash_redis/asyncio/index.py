"""`AsyncSimhashIndex` and `AsyncVerifiedIndex`: every call of the synchronous index awaited, run by what
both share (`AsyncHandle`: a client, opening on first use, closing, and `awaited`); `open_index`."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from .. import defaults
from ..errors import InvalidType, SimhashRedisError
from ..index import Document, SimhashIndex, VerifiedIndex
from ..index.batches import BatchProgress
from ..index.mode import open_in_mode
from ..results import Match, Outcome
from ..store import IndexConfig, Layout
from ..tools.connect import default_url
from ..transport import client_from_url, is_asyncio_client
from ..transport.greenlet_bridge import run

__all__ = [
    "AsyncHandle",
    "AsyncSimhashIndex",
    "AsyncVerifiedIndex",
    "asyncio_client",
    "awaited",
    "open_index",
]

#: The synchronous index a handle opens (`SimhashIndex`, `VerifiedIndex`).
Sync = TypeVar("Sync")
H = TypeVar("H", bound="AsyncHandle[Any]")
P = ParamSpec("P")
R = TypeVar("R")


class AsyncHandle(Generic[Sync]):
    """A synchronous index opened on first use in the bridge, and its redis.asyncio client."""

    #: Opens the synchronous index (client, name, **options), in the bridge: it may talk to the server.
    _opener: Callable[..., Sync]

    def __init__(self, client: Any, name: str, **options: Any) -> None:
        self.client = asyncio_client(client)
        self.name = name
        self._options = options
        self._index: Sync | None = None
        self._opening = asyncio.Lock()
        #: Whether `aclose` closes the client (a client made by `from_url`).
        self.owns_client = False
        self._closed = False
        self._running = 0  # calls `aclose` waits for, the last one of which sets `_idle`
        self._idle: asyncio.Event | None = None

    def adopt(self, index: Sync) -> None:
        """Use a synchronous index opened already on this handle's client: the first call opens nothing."""
        self._index = index

    @classmethod
    async def from_url(cls: type[H], url: str, name: str, **kwargs: Any) -> H:
        """Open an index on the server at a redis://, rediss:// or unix:// URL (closed by `aclose`)."""
        client = await run(client_from_url, url, asyncio=True)
        index = cls(client, name, **kwargs)
        index.owns_client = True
        try:
            return await index.open()
        except BaseException:
            await index.aclose()
            raise

    async def open(self: H) -> H:
        """Open the index now (creating it, or checking the arguments); later calls return at once."""
        await self._opened()
        return self

    async def aclose(self) -> None:
        """Close the client if `from_url` made it (a client passed in stays its owner's), once the calls
        running have returned; a later call raises SimhashRedisError."""
        if self.owns_client and not self._closed:
            # Closed under running calls, the client would be reconnected by them, and never closed.
            self._closed, self._idle = True, asyncio.Event()
            if self._running:
                await self._idle.wait()
            await self.client.aclose()

    async def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._running += 1  # from before opening, which `aclose` may otherwise close the client under
        try:
            return await run(getattr(await self._opened(), name), *args, **kwargs)
        finally:
            self._running -= 1
            if not self._running and self._idle is not None:
                self._idle.set()

    async def __aenter__(self: H) -> H:
        return await self.open()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _opened(self) -> Sync:
        if self._closed:
            raise SimhashRedisError(f"index {self.name!r} is closed")
        index = self._index
        if index is None:
            async with self._opening:
                if self._index is None:
                    self._index = await run(self._opener, self.client, self.name, **self._options)
                index = self._index
        return index

    @property
    def index(self) -> Sync:
        """The opened synchronous index (no I/O); SimhashRedisError before it is open."""
        if self._index is None:
            raise SimhashRedisError(f"index {self.name!r} is not open yet: await index.open() first")
        return self._index

    @property
    def _plain(self) -> SimhashIndex:
        index = self.index
        return index.index if isinstance(index, VerifiedIndex) else index  # type: ignore[return-value]

    @property
    def config(self) -> IndexConfig:
        """The stored configuration (f, k, layout, scheme, ...), once open."""
        return self._plain.config

    @property
    def f(self) -> int:
        """Fingerprint width in bits, once open."""
        return self._plain.f

    @property
    def k(self) -> int:
        """The largest distance near() answers for, once open."""
        return self._plain.k

    @property
    def layout(self) -> Layout:
        """The table layout, once open."""
        return self._plain.layout

    @property
    def cluster(self) -> bool:
        """Whether the index runs on Redis Cluster, once open."""
        return self._plain.cluster

    def __repr__(self) -> str:
        state = repr(self._index) if self._index is not None else f"name={self.name!r}, not open"
        return f"{type(self).__name__}({state})"


def awaited(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """A handle's method that runs the method of that name of its opened index in the bridge."""
    signature = inspect.signature(method)
    name = method.__name__

    async def call(self: AsyncHandle[Any], /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._index is None:
            # Checked before opening, which may create the index: a refused call writes nothing.
            try:
                signature.bind(self, *args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{type(self).__name__}.{name}(): {error}") from None
        # By name, so that a subclass's override of the method is the one run.
        result: R = await self._run(name, *args, **kwargs)
        return result

    functools.update_wrapper(call, method)  # inspect.signature, help() and the API docs see `method`'s
    return call


def asyncio_client(client: Any) -> Any:
    if not is_asyncio_client(client):
        kind = type(client)
        raise InvalidType(
            "client must be a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster, got "
            f"{kind.__module__}.{kind.__qualname__} (use the synchronous index with a synchronous client)"
        )
    return client


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
