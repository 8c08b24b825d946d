"""The indexes a worker process serves: opened on first use, on one client of the configured server.

Each worker calls the synchronous library on its event loop's thread: a near() of the synchronous
index costs about half the CPU of the asyncio API's (docs/benchmarks.md), and concurrent requests of one
worker are gathered into the library's batch calls (`coalesce`) instead of interleaving round trips.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..errors import IndexNotFound
from ..index import SimhashIndex, VerifiedIndex
from ..store import validate_name
from ..transport import client_from_url
from .coalesce import Coalescer
from .config import ServiceConfig

__all__ = ["Opened", "Registry"]


@dataclass
class Opened:
    """An open index: its plain form, its verified one when it is verified, and its coalescers.

    Attributes:
        plain: the index (reads; writes of a plain index).
        verified: the verified form of a verified index (its near and writes), else None.
        coalescers: the single-document calls being gathered, by kind and parameters.
    """

    plain: SimhashIndex
    verified: VerifiedIndex | None
    coalescers: dict[tuple[Any, ...], Coalescer[Any, Any]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The index name."""
        return self.plain.name

    @property
    def f(self) -> int:
        """The fingerprint width."""
        return self.plain.f

    def coalescer(
        self, key: tuple[Any, ...], run: Callable[[Sequence[Any]], Sequence[Any]]
    ) -> Coalescer[Any, Any]:
        """The coalescer of single-document calls of one kind (key), made on first use."""
        found = self.coalescers.get(key)
        if found is None:
            found = self.coalescers[key] = Coalescer(run)
        return found


class Registry:
    """Opens indexes by name, once each, on a client of the configured server.

    An existing index is used as it was made; a write to a missing one creates it with the configured
    options (`ServiceConfig.index_options`) unless creation is off.
    """

    def __init__(self, config: ServiceConfig, url: str) -> None:
        self._config = config
        self._url = url
        self._options = config.index_options()
        self._client: redis.Redis | RedisCluster | None = None
        self._opened: dict[str, Opened] = {}

    def client(self) -> redis.Redis | RedisCluster:
        """The client (made on first use).

        Raises:
            InvalidArgument: the URL is malformed.
            RedisUnavailable: a cluster cannot be reached.
        """
        if self._client is None:
            self._client = client_from_url(self._url)
        return self._client

    def get(self, name: str, *, create: bool = False) -> Opened:
        """The open index of that name.

        Raises:
            InvalidArgument, InvalidType: the name is malformed.
            IndexNotFound: the index does not exist and is not to be created.
            ConfigurationMismatch, IndexCorrupted, RedisUnavailable: as `SimhashIndex`.
        """
        found = self._opened.get(name)
        if found is None:
            validate_name(name, "index name")
            found = self._opened[name] = self._open(name, create and self._config.create)
        return found

    def _open(self, name: str, create: bool) -> Opened:
        client = self.client()
        try:
            plain = SimhashIndex(client, name, create=False)
        except IndexNotFound:
            if not create:
                raise IndexNotFound(
                    f"no index named {name!r}: a write (add, add_if_new) creates it, or load documents "
                    f"first (simhash-redis --index {name} load FILE)"
                ) from None
            plain = SimhashIndex(client, name, **self._options)
        verified = VerifiedIndex(plain) if plain.config.verification is not None else None
        return Opened(plain, verified)

    def forget(self, name: str) -> None:
        """Open the index afresh on its next use (after it was dropped, say)."""
        self._opened.pop(name, None)

    def close(self) -> None:
        """Close the client."""
        if self._client is not None:
            self._client.close()
            self._client = None
