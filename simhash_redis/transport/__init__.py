"""The Redis plumbing floor: clients from URLs, senders (`open_sender`) for a standalone server or a cluster,
retries; above it, only the library's exceptions are seen (redis-py's are translated here)."""

from __future__ import annotations

from typing import Any, TypeAlias

import redis
from redis.cluster import RedisCluster

from ..errors import InvalidType
from .cluster import ClusterTransport
from .connection import client_from_url
from .greenlet_bridge import bridged, off_greenlet, pause
from .standalone import (
    RAW,
    READ,
    SEND,
    Backoff,
    Exchange,
    ScriptMissing,
    Steps,
    Transport,
    drive,
    malformed,
    raise_first_error,
    translate_error,
)
from .wire import Command

__all__ = [
    "RAW",
    "READ",
    "SEND",
    "Backoff",
    "Command",
    "Exchange",
    "ScriptMissing",
    "Sender",
    "Steps",
    "bridged",
    "client_from_url",
    "drive",
    "is_asyncio_client",
    "malformed",
    "off_greenlet",
    "open_sender",
    "pause",
    "raise_first_error",
    "translate_error",
]

#: What sends an index's commands: a standalone server's transport or a cluster's (or their asyncio kin).
Sender: TypeAlias = Transport | ClusterTransport


def open_sender(client: redis.Redis | RedisCluster, backoff: Backoff | None = None) -> Sender:
    """The sender for a redis-py client (a redis.asyncio one only inside the asyncio API's calls, else
    InvalidType)."""
    if is_asyncio_client(client):
        if not bridged():
            raise InvalidType(
                f"client must be a redis.Redis or redis.cluster.RedisCluster, got the asyncio client "
                f"{type(client).__module__}.{type(client).__qualname__}: use "
                "simhash_redis.asyncio.AsyncSimhashIndex with it"
            )
        import redis.asyncio.cluster

        from . import aio  # the asyncio transports import redis.asyncio's connection module

        asyncio_client: Any = client
        if isinstance(asyncio_client, redis.asyncio.cluster.RedisCluster):
            return aio.AsyncClusterTransport(asyncio_client, backoff)
        return aio.AsyncTransport(asyncio_client, backoff)
    if isinstance(client, RedisCluster):
        return ClusterTransport(client, backoff)
    return Transport(client, backoff)


def is_asyncio_client(client: object) -> bool:
    """Whether a client is redis.asyncio's (standalone or cluster)."""
    if not any(kind.__module__.startswith("redis.asyncio") for kind in type(client).__mro__):
        return False  # redis.asyncio is imported only for those who use it (or subclass its clients)
    import redis.asyncio.cluster

    return isinstance(client, (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster))
