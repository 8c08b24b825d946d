"""The indexes a worker process serves: opened on first use, on one client of the configured server,
called synchronously (half the CPU of the asyncio API) on the event loop's thread and the fast lane's."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import redis
from redis.cluster import RedisCluster

from .. import defaults
from ..errors import ConfigurationMismatch, IndexNotFound, InvalidArgument, InvalidType
from ..index import SimhashIndex, VerifiedIndex
from ..index.mode import chosen_mode, open_in_mode
from ..store import validate_name
from ..transport import Backoff, client_from_url
from ..transport.cluster import CLUSTER_BACKOFF
from .config import SERVE_ASKING, ServiceConfig
from .problems import ServiceError

__all__ = ["MAX_BATCH", "Coalescer", "Opened", "Registry", "together"]

T = TypeVar("T")
R = TypeVar("R")

#: Most single calls in one batch (more wait for the next).
MAX_BATCH = 256


class Coalescer(Generic[T, R]):
    """Gathers single calls of one kind made in one turn of the event loop, and runs them as one batch."""

    def __init__(
        self,
        run: Callable[[Sequence[T]], Sequence[R]],
        owner: tuple[dict[tuple[Any, ...], Coalescer[Any, Any]], tuple[Any, ...]] | None = None,
    ) -> None:
        self._run = run
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._owner = owner  # the dict that holds it, and its key there: left once nothing is pending

    def submit(self, item: T) -> asyncio.Future[R]:
        """The future result of one item, run with the others submitted before the loop's next turn."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if len(self._pending) == 1:
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        if self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        elif self._owner is not None:
            # Each distinct (k, threshold) a client sends has its own: kept, they would pile up for ever.
            owners, key = self._owner
            if owners.get(key) is self:
                del owners[key]
        batch = [(item, future) for item, future in batch if not future.done()]  # timed out meanwhile
        if not batch:
            return
        for (_, future), outcome in zip(batch, together(self._run, [item for item, _ in batch]), strict=True):
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


def together(run: Callable[[Sequence[T]], Sequence[R]], items: Sequence[T]) -> list[R | Exception]:
    """Each item's result of one batch call, or its error: a refusal (InvalidArgument, InvalidType) of
    several is run again one by one, to tell whose; any other error is every item's."""
    try:
        return list(run(items))
    except (InvalidArgument, InvalidType) as exc:
        if len(items) == 1:
            return [exc]
        outcomes: list[R | Exception] = []
        for item in items:  # refused before any write: each alone, to tell whose document
            try:
                outcomes.append(run([item])[0])
            except Exception as alone:
                outcomes.append(alone)
        return outcomes
    except Exception as exc:
        return [exc] * len(items)


@dataclass
class Opened:
    """An open index: its plain form (reads), its verified one (None if it is plain), and its coalescers
    (by kind and parameters)."""

    plain: SimhashIndex
    verified: VerifiedIndex | None
    coalescers: dict[tuple[Any, ...], Coalescer[Any, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, index: SimhashIndex | VerifiedIndex) -> Opened:
        """An index (either form) opened for serving."""
        if isinstance(index, VerifiedIndex):
            return cls(index.index, index)
        return cls(index, VerifiedIndex(index) if index.config.verification is not None else None)

    def coalescer(
        self, key: tuple[Any, ...], run: Callable[[Sequence[Any]], Sequence[Any]]
    ) -> Coalescer[Any, Any]:
        """The coalescer of single calls of one kind (key), made on first use (dropped once it has run)."""
        found = self.coalescers.get(key)
        if found is None:
            found = self.coalescers[key] = Coalescer(run, (self.coalescers, key))
        return found


class Registry:
    """Opens indexes by name, once each, on a client of the configured server (an existing one as it was
    made, its mode checked; a missing one, on a write, created as configured)."""

    def __init__(self, config: ServiceConfig, url: str) -> None:
        self._config = config
        self._url = url
        self._options = config.index_options()
        self._client: redis.Redis | RedisCluster | None = None
        self._backoff: Backoff | None = None
        self._opened: dict[str, Opened] = {}
        # The event loop's thread and the fast lane's open indexes: each is opened (or made) once.
        self._opening = threading.RLock()

    def client(self) -> redis.Redis | RedisCluster:
        """The client (made on first use), whose sockets wait for Redis no longer than the timeout."""
        with self._opening:
            return self._made_client()

    def _made_client(self) -> redis.Redis | RedisCluster:
        if self._client is None:
            timeout = self._config.timeout
            try:
                self._client = client_from_url(
                    self._url,
                    socket_timeout=min(defaults.SOCKET_TIMEOUT, timeout),
                    socket_connect_timeout=min(defaults.CONNECT_TIMEOUT, timeout),
                )
            except InvalidArgument as exc:  # the service's URL (checked at start), not the caller's fault
                raise ServiceError(
                    503, "redis_unavailable", f"the service cannot use its Redis URL: {exc}"
                ) from None
            # A worker's calls run one at a time on each of its threads: a stalled Redis holds its requests
            # until the retries end, so they end with the timeout (a cluster's, which ride out a failover
            # by default, retry until then).
            if isinstance(self._client, RedisCluster):
                self._backoff = dataclasses.replace(CLUSTER_BACKOFF, lasting=timeout, deadline=timeout)
            else:
                self._backoff = Backoff(deadline=timeout)
        return self._client

    def get(self, name: str, *, create: bool = False, from_text: bool = True) -> Opened:
        """The open index of that name; a missing one created if `create` (and the configuration) allow,
        in the mode `from_text` (documents that are texts, not fingerprints) chooses. One dropped or made
        again since it was opened is opened afresh.

        Raises:
            IndexNotFound: the index does not exist and is not to be created.
            ConfigurationMismatch: the index exists in the other mode than the one asked for, or with
                another configuration.
        """
        found = self._opened.get(name)
        if found is not None:
            try:
                found.plain.check_unchanged()  # a meta read once a second at most
            except (IndexNotFound, ConfigurationMismatch):
                if self._opened.get(name) is found:  # another thread may have opened it afresh
                    self._opened.pop(name, None)
                found = None
        if found is None:
            validate_name(name, "index name")
            with self._opening:
                found = self._opened.get(name)
                if found is None:
                    found = self._opened[name] = self._open(name, create and self._config.create, from_text)
        return found

    def _open(self, name: str, create: bool, from_text: bool) -> Opened:
        client = self.client()
        config = self._config
        try:
            plain = SimhashIndex(client, name, create=False, backoff=self._backoff)
        except IndexNotFound:
            if not create:
                how = (
                    "a write (add, add_if_new) creates it, or load documents first"
                    if config.create
                    else "this service does not create indexes (serve --no-create): load documents first"
                )
                raise IndexNotFound(
                    f"no index named {name!r}: {how} (simhash-redis --index {name} load FILE)"
                ) from None
            return Opened.of(
                open_in_mode(
                    client,
                    name,
                    verified=config.verified,
                    from_text=from_text,
                    threshold=config.threshold,
                    band_buckets=config.band_buckets,
                    asking=SERVE_ASKING,
                    backoff=self._backoff,
                    **self._options,
                )
            )
        stored = plain.config.verification is not None
        chosen_mode(
            config.asked_mode(), name=name, stored=stored, asking=SERVE_ASKING, asked_by=config.asked_by()
        )
        return Opened.of(plain)

    def forget(self, name: str) -> None:
        """Open the index afresh on its next use."""
        self._opened.pop(name, None)

    def close(self) -> None:
        """Close the client."""
        if self._client is not None:
            self._client.close()
            self._client = None
