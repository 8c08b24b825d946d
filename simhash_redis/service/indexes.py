"""The indexes a worker process serves: opened on first use on one shared redis.asyncio client."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import redis.exceptions as rex

from ..asyncio import AsyncSimhashIndex, AsyncVerifiedIndex
from ..errors import IndexNotFound
from ..store import validate_name
from ..transport import client_from_url
from ..transport.bridge import run
from ..transport.translate import translate_error
from .config import ServiceConfig

__all__ = ["Opened", "Registry"]

# Seconds /readyz waits for a PING's reply.
_PING_TIMEOUT = 5.0


@dataclass(frozen=True)
class Opened:
    """An open index: its plain handle, and its verified one when it is verified.

    Attributes:
        plain: the index (reads; writes of a plain index).
        verified: the verified form of a verified index (its near, writes), else None.
    """

    plain: AsyncSimhashIndex
    verified: AsyncVerifiedIndex | None

    @property
    def name(self) -> str:
        """The index name."""
        return self.plain.name

    @property
    def f(self) -> int:
        """The fingerprint width."""
        return self.plain.f


class Registry:
    """Opens indexes by name, once each, on a client of the configured server.

    An existing index is used as it was made; a write to a missing one creates it with the configured
    options (`ServiceConfig.index_options`) unless creation is off.

    Args:
        config: the service's configuration.
        url: the Redis URL (resolved by the caller: the embedded server may have to start).
    """

    def __init__(self, config: ServiceConfig, url: str) -> None:
        self._config = config
        self._url = url
        self._options = config.index_options()
        self._client: Any = None
        self._opened: dict[str, Opened] = {}
        self._lock = asyncio.Lock()

    async def client(self) -> Any:
        """The redis.asyncio client (made on first use).

        Raises:
            InvalidArgument: the URL is malformed.
            RedisUnavailable: a cluster cannot be reached.
        """
        if self._client is None:
            client = await run(client_from_url, self._url, asyncio=True)
            if self._client is None:
                self._client = client
            else:  # pragma: no cover - another task made one meanwhile
                await client.aclose()
        return self._client

    async def get(self, name: str, *, create: bool = False) -> Opened:
        """The open index of that name.

        Args:
            name: the index name.
            create: whether a missing index is created (a write), subject to the configuration.

        Raises:
            InvalidArgument, InvalidType: the name is malformed.
            IndexNotFound: the index does not exist and is not to be created.
            ConfigurationMismatch, IndexCorrupted, RedisUnavailable: as `SimhashIndex`.
        """
        found = self._opened.get(name)
        if found is not None:
            return found
        validate_name(name, "index name")
        async with self._lock:
            found = self._opened.get(name)
            if found is None:
                found = await self._open(name, create and self._config.create)
                self._opened[name] = found
        return found

    async def _open(self, name: str, create: bool) -> Opened:
        client = await self.client()
        try:
            plain = await AsyncSimhashIndex(client, name, create=False).open()
        except IndexNotFound:
            if not create:
                raise IndexNotFound(
                    f"no index named {name!r}: a write (add, add_if_new) creates it, or load documents "
                    f"first (simhash-redis --index {name} load FILE)"
                ) from None
            plain = await AsyncSimhashIndex(client, name, **self._options).open()
        verified = None
        if plain.config.verification is not None:
            verified = await AsyncVerifiedIndex(client, name).open()
        return Opened(plain, verified)

    def forget(self, name: str) -> None:
        """Open the index afresh on its next use (after it was dropped, say).

        Args:
            name: the index name.
        """
        self._opened.pop(name, None)

    async def ping(self) -> None:
        """Check that the server answers.

        Raises:
            RedisUnavailable: it does not.
        """
        client = await self.client()
        try:
            await asyncio.wait_for(client.ping(), _PING_TIMEOUT)
        except (rex.RedisError, OSError, asyncio.TimeoutError) as exc:
            raise translate_error(exc) from None

    async def aclose(self) -> None:
        """Close the client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
