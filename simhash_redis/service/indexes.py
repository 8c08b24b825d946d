"""The indexes a worker process serves: opened on first use, on one client of the configured server.

Each worker calls the synchronous library on its event loop's thread: a near() of the synchronous
index costs about half the CPU of the asyncio API's, and concurrent requests are gathered (`coalesce`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..errors import IndexNotFound
from ..index import SimhashIndex, VerifiedIndex
from ..index.mode import chosen_mode, open_in_mode
from ..store import validate_name
from ..transport import client_from_url
from .coalesce import Coalescer
from .config import SERVE_ASKING, ServiceConfig

__all__ = ["Opened", "Registry"]


@dataclass
class Opened:
    """An open index: its plain form (reads), its verified one (None if it is plain), and its coalescers
    (the single-document calls being gathered, by kind and parameters)."""

    plain: SimhashIndex
    verified: VerifiedIndex | None
    coalescers: dict[tuple[Any, ...], Coalescer[Any, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, index: SimhashIndex | VerifiedIndex) -> Opened:
        """An index (either form) opened for serving."""
        if isinstance(index, VerifiedIndex):
            return cls(index.index, index)
        return cls(index, VerifiedIndex(index) if index.config.verification is not None else None)

    @property
    def name(self) -> str:
        return self.plain.name

    @property
    def f(self) -> int:
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
    """Opens indexes by name, once each, on a client of the configured server (an existing one as it was
    made, its mode checked; a missing one, on a write, created as configured)."""

    def __init__(self, config: ServiceConfig, url: str) -> None:
        self._config = config
        self._url = url
        self._options = config.index_options()
        self._client: redis.Redis | RedisCluster | None = None
        self._opened: dict[str, Opened] = {}

    def client(self) -> redis.Redis | RedisCluster:
        """The client (made on first use)."""
        if self._client is None:
            self._client = client_from_url(self._url)
        return self._client

    def get(self, name: str, *, create: bool = False, from_text: bool = True) -> Opened:
        """The open index of that name; a missing one created if `create` (and the configuration) allow,
        in the mode `from_text` (documents that are texts, not fingerprints) chooses.

        Raises:
            IndexNotFound: the index does not exist and is not to be created.
            ConfigurationMismatch: the index exists in the other mode than the one asked for, or (made
                meanwhile by another process) with another configuration.
        """
        found = self._opened.get(name)
        if found is None:
            validate_name(name, "index name")
            found = self._opened[name] = self._open(name, create and self._config.create, from_text)
        return found

    def _open(self, name: str, create: bool, from_text: bool) -> Opened:
        client = self.client()
        config = self._config
        try:
            plain = SimhashIndex(client, name, create=False)
        except IndexNotFound:
            if not create:
                raise IndexNotFound(
                    f"no index named {name!r}: a write (add, add_if_new) creates it, or load documents "
                    f"first (simhash-redis --index {name} load FILE)"
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
                    **self._options,
                )
            )
        stored = plain.config.verification is not None
        chosen_mode(
            config.asked_mode(), name=name, stored=stored, asking=SERVE_ASKING, asked_by=config.asked_by()
        )
        return Opened.of(plain)

    def forget(self, name: str) -> None:
        """Open the index afresh on its next use (after it was dropped, say)."""
        self._opened.pop(name, None)

    def close(self) -> None:
        """Close the client."""
        if self._client is not None:
            self._client.close()
            self._client = None
