"""Error replies and redis-py exceptions translated into the library's exception tree: here and nowhere else.

Messages carry no credentials: redis-py's messages name hosts and ports, never passwords.
"""

from __future__ import annotations

import re
from typing import Any

import redis.exceptions as rex

from ..errors import (
    IndexCorrupted,
    InvalidArgument,
    RedisAuthError,
    RedisOutOfMemory,
    RedisPermissionError,
    RedisTimeout,
    RedisUnavailable,
    SimhashRedisError,
)
from ..links import doc_url

__all__ = ["ScriptMissing", "raise_first_error", "translate_error"]


class ScriptMissing(SimhashRedisError):
    """NOSCRIPT: the server lost a loaded Lua script (a restart, a failover); load it and send again."""


# How servers word an ACL refusal: NOPERM (Redis 6.2+, Valkey), "ACL failure" (some in-script errors),
# and Redis 7.0's in-script form, which names no command.
_REFUSED = ("NOPERM", "ACL failure", "can't run this command or subcommand", "has no permissions to run")
_COMMAND = re.compile(r"permissions to run the '([^']+)' command", re.IGNORECASE)


def raise_first_error(replies: list[Any]) -> None:
    """Raise the library exception for the first error reply among a batch's replies, if any.

    Raises:
        SimhashRedisError: (or a subclass) for the first error reply.
    """
    for reply in replies:
        if isinstance(reply, rex.ResponseError):
            raise translate_error(reply) from None


def translate_error(exc: Exception) -> SimhashRedisError:
    """The library exception for a redis-py exception (messages carry no credentials)."""
    message = str(exc) or type(exc).__name__  # an asyncio timeout, say, carries no text
    if isinstance(exc, rex.NoScriptError) or message.startswith("NOSCRIPT"):
        return ScriptMissing(f"Redis lacks a script of the index: {message}")
    if isinstance(exc, rex.AuthenticationError) or message.startswith(("NOAUTH", "WRONGPASS")):
        return RedisAuthError(f"Redis refused the credentials: {message}")
    if isinstance(exc, rex.NoPermissionError) or any(sign in message for sign in _REFUSED):
        named = _COMMAND.search(message)
        command = named.group(1).lower() if named else None
        what = f"the {command!r} command" if command else "a command of the index's scripts"
        return RedisPermissionError(
            f"the Redis user may not run {what} ({doc_url('security.md')} lists the minimal ACL): {message}",
            command,
        )
    if isinstance(exc, rex.MovedError) or message.startswith("MOVED "):  # redis-py < 5.1 does not parse it
        slot, _, node = message.removeprefix("MOVED ").partition(" ")
        return SimhashRedisError(
            f"the server is a Redis Cluster node (slot {slot} is served by {node}): pass a "
            "redis.cluster.RedisCluster client, or let the ACL user run INFO so that from_url can tell"
        )
    if "WRONGTYPE" in message:
        return IndexCorrupted(
            "a key in the index's key space holds the wrong type of value (another program wrote there?); "
            f"no document was half-written: run verify to find it, delete it, then run the same operation "
            f"again: {message}"
        )
    if isinstance(exc, (rex.ClusterDownError, rex.TryAgainError)) or message.startswith(
        ("CLUSTERDOWN", "TRYAGAIN")
    ):
        return RedisUnavailable(
            f"the Redis Cluster cannot serve the request now (a failover or a reshard?): {message}"
        )
    if "DB index is out of range" in message:
        return InvalidArgument(
            "the URL names a database number this server does not have (the path of redis://host:port/N; "
            f"0 is the default): {message}"
        )
    if isinstance(exc, rex.InvalidResponse) or message.startswith("Protocol error"):
        return RedisUnavailable(
            "the server at that address does not speak the Redis protocol (an HTTP server? a TLS port "
            f"given a redis:// URL?): {message}"
        )
    if isinstance(exc, rex.TimeoutError):
        return RedisTimeout(f"Redis did not answer in time: {message}")
    if message.startswith("OOM") or "OOM command not allowed" in message or "> 'maxmemory'" in message:
        return RedisOutOfMemory(
            "Redis is out of memory (maxmemory with noeviction): no document was half-written, but the "
            "batch may be partly stored. Free memory or raise maxmemory, then run the same operation "
            "again: it completes what is missing."
        )
    if isinstance(exc, (rex.ConnectionError, OSError)):
        return RedisUnavailable(f"cannot reach Redis: {message}")
    return SimhashRedisError(f"Redis error: {message}")
