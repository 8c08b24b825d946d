"""Sends batches of commands to Redis in one round trip and reads the raw replies.

redis-py's Pipeline object costs tens of microseconds of client CPU per call; the index's hot paths pack
their commands once and read hiredis-parsed replies straight from a pooled connection instead. Errors are
translated into the library's exception tree here and nowhere else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import redis
import redis.exceptions as rex

from ..errors import RedisAuthError, RedisOutOfMemory, RedisTimeout, RedisUnavailable, SimhashRedisError
from . import wire
from .retry import Backoff

__all__ = ["Command", "Sender", "Transport", "raise_first_error", "translate_error"]

Command = Sequence[bytes | str | int]
T = TypeVar("T")


def raise_first_error(replies: list[Any]) -> None:
    """Raise the library exception for the first error reply among a batch's replies, if any.

    Args:
        replies: replies as returned with raise_on_error=False.

    Raises:
        SimhashRedisError: (or a subclass) for the first error reply.
    """
    for reply in replies:
        if isinstance(reply, rex.ResponseError):
            raise translate_error(reply) from None


class Sender(Protocol):
    """Sends batches of commands: `Transport` on a standalone server, `ClusterTransport` on a cluster."""

    cluster: bool

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send the commands in one round trip (per node) and return their raw replies in order."""
        ...

    def broadcast(self, command: Command) -> None:
        """Send a keyless command to every server that runs the index's keys."""
        ...

    def scan(self, pattern: str, count: int) -> Iterator[list[bytes]]:
        """The keys matching a pattern, in batches, from every server holding keys."""
        ...


def translate_error(exc: Exception) -> SimhashRedisError:
    """The library exception for a redis-py exception (messages carry no credentials).

    Args:
        exc: the exception redis-py raised.
    """
    message = str(exc)
    if isinstance(exc, rex.AuthenticationError) or message.startswith(("NOAUTH", "WRONGPASS")):
        return RedisAuthError(f"Redis refused the credentials: {message}")
    if isinstance(exc, rex.NoPermissionError) or message.startswith("NOPERM") or "ACL failure" in message:
        return RedisAuthError(
            "the Redis user lacks a permission the index needs (docs/operations.md lists the ACL): "
            f"{message}"
        )
    if isinstance(exc, rex.MovedError) or message.startswith("MOVED "):  # redis-py < 5.1 does not parse it
        slot, _, node = message.removeprefix("MOVED ").partition(" ")
        return SimhashRedisError(
            f"the server is a Redis Cluster node (slot {slot} is served by {node}): pass a "
            "redis.cluster.RedisCluster client, or let the ACL user run INFO so that from_url can tell"
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


class Transport:
    """One round trip per batch of commands over a pooled redis-py connection.

    Args:
        client: the redis-py client whose connection pool is used.
        backoff: how to wait between attempts after a connection error or timeout.
    """

    cluster = False

    def __init__(self, client: redis.Redis, backoff: Backoff | None = None) -> None:
        self.client = client
        self.pool = client.connection_pool
        self.backoff = backoff or Backoff()

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send the commands in one round trip and return their raw replies in order.

        Args:
            commands: the commands, each a sequence of arguments.
            raise_on_error: raise the first error reply; otherwise error replies are returned as
                redis-py ResponseError objects in their place.
            durable: unused on a standalone server, whose durability is its persistence settings.

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
            SimhashRedisError: an error reply, when raise_on_error is set.
        """
        if not commands:
            return []
        replies = self.converse(lambda exchange: exchange.round_trip(commands))
        if raise_on_error:
            raise_first_error(replies)
        return replies

    def converse(self, talk: Callable[[wire.Exchange], T]) -> T:
        """Run a conversation on one connection, again from the start on a new one after a lost connection.

        `talk` sends commands and reads their replies through the exchange in whatever interleaving
        it likes (a long read can send follow-up commands while the server is still answering); it
        must be safe to run again from the start. Replies it has not read when it returns or raises
        are never seen by anyone else: the connection is closed.

        Args:
            talk: the conversation; its result is returned.

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
            Exception: whatever else `talk` raises (a translated error reply, say), at once.
        """
        delays = self.backoff.delays()
        while True:
            try:
                return self._on_connection(talk)
            except SimhashRedisError:
                # An error reply the conversation translated (NOPERM, OOM, ...): not a lost connection,
                # even though RedisUnavailable and its kin are OSErrors.
                raise
            except (rex.ConnectionError, rex.TimeoutError, OSError) as exc:
                if isinstance(exc, rex.AuthenticationError):
                    raise translate_error(exc) from None
                delay = next(delays, None)
                if delay is None:
                    raise translate_error(exc) from None
                time.sleep(delay)

    def broadcast(self, command: Command) -> None:
        """Send a keyless command (SCRIPT LOAD) to the server.

        Args:
            command: the command.

        Raises:
            RedisUnavailable: the server could not be reached after the retries.
        """
        self.execute([command])

    def scan(self, pattern: str, count: int) -> Iterator[list[bytes]]:
        """The keys matching a pattern, a SCAN page at a time (a key may come twice, as SCAN allows).

        Args:
            pattern: a SCAN MATCH pattern.
            count: the COUNT hint of each page.

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
        """
        cursor = b"0"
        while True:
            cursor, keys = self.execute([(b"SCAN", cursor, b"MATCH", pattern, b"COUNT", count)])[0]
            if keys:
                yield list(keys)
            if cursor in (b"0", 0):
                return

    def _on_connection(self, talk: Callable[[wire.Exchange], T]) -> T:
        keeper = self.__dict__.get("_keeper")
        if keeper is None or keeper.pool is not self.pool:
            keeper = self.__dict__["_keeper"] = wire.Keeper(self.pool)
        connection = keeper.take()
        exchange = wire.Exchange(connection)
        try:
            return talk(exchange)
        finally:
            # `unread` counts a batch before it is sent and drops only after its replies are read, so
            # zero means nothing is left on the wire, even when `talk` raised (an error reply, say).
            clean = exchange.unread == 0
            if not clean:
                # Unread replies, or a send or read cut short: never hand this connection to anyone.
                connection.disconnect()
            keeper.give(connection, clean)
