"""The Redis plumbing floor: clients from URLs, senders for a standalone server or a cluster, retries.

Everything above this floor talks to Redis through a `Sender` from `open_sender`, never through a
concrete transport class, and sees only the library's exceptions: redis-py's are translated here.
"""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

from .cluster import ClusterTransport
from .connection import client_from_url, redact_url
from .retry import Backoff
from .sender import Command, Exchange, Sender
from .standalone import Transport
from .translate import raise_first_error, translate_error

__all__ = [
    "Backoff",
    "Command",
    "Exchange",
    "Sender",
    "client_from_url",
    "open_sender",
    "raise_first_error",
    "redact_url",
    "translate_error",
]


def open_sender(client: redis.Redis | RedisCluster, backoff: Backoff | None = None) -> Sender:
    """The sender for a client: one connection per batch on a standalone server, per node on a cluster.

    Args:
        client: a redis-py client.
        backoff: how to wait between retries (default: the transport's own).
    """
    if isinstance(client, RedisCluster):
        return ClusterTransport(client, backoff)
    return Transport(client, backoff)
