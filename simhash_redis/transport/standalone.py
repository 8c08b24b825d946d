"""The standalone server's transport: one round trip per batch over a pooled redis-py connection
(redis-py's Pipeline costs tens of microseconds of client CPU per call)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import redis
import redis.exceptions as rex

from ..errors import SimhashRedisError
from . import wire
from .protocols import Command, Exchange, scan_pages
from .retry import Backoff
from .translate import raise_first_error, translate_error

__all__ = ["Transport"]

T = TypeVar("T")


class Transport:
    """One round trip per batch of commands over a pooled connection of a redis-py client."""

    cluster = False

    def __init__(self, client: redis.Redis, backoff: Backoff | None = None) -> None:
        self.client = client
        self.pool = client.connection_pool
        self.backoff = backoff or Backoff()

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send the commands in one round trip and return their raw replies in order (durable: unused here).

        Args:
            raise_on_error: raise the first error reply; else error replies are ResponseError objects in
                place.

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

    def converse(self, talk: Callable[[Exchange], T], *, durable: bool = False) -> T:
        """Run a conversation (its result returned) on one connection, again from the start on a new one after
        a lost connection: `talk` must be safe to run again. Unread replies are never seen by anyone else (the
        connection is closed). durable: unused here.

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
            Exception: whatever else `talk` raises (a translated error reply, say), at once.
        """
        try:
            return self.backoff.call_with_retry(lambda: self._on_connection(talk), _lost_connection)
        except SimhashRedisError:
            raise
        except (rex.RedisError, OSError) as exc:
            raise translate_error(exc) from None

    def broadcast(self, command: Command) -> None:
        """Send a keyless command (SCRIPT LOAD) to the server.

        Raises:
            RedisUnavailable: the server could not be reached after the retries.
        """
        self.execute([command])

    def scan(self, pattern: str, count: int) -> Iterator[list[bytes]]:
        """The keys matching a pattern, a SCAN page of COUNT `count` at a time (a key may come twice).

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
        """
        return scan_pages(lambda command: self.execute([command])[0], pattern, count)

    def _on_connection(self, talk: Callable[[Exchange], T]) -> T:
        held = self.__dict__.get("_held_connection")
        if held is None or held.pool is not self.pool:
            held = self.__dict__["_held_connection"] = wire.HeldConnection(self.pool)
        connection = held.take()
        exchange = wire.Exchange(connection)
        try:
            return talk(exchange)
        finally:
            # `unread` counts a batch before it is sent and drops only after its replies are read, so
            # zero means nothing is left on the wire, even when `talk` raised; bytes read past the last
            # reply would be something no command asked for. A connection not clean is never handed on.
            clean = exchange.unread == 0 and not exchange.tail
            if not clean:
                connection.disconnect()
            held.give(connection, clean)


def _lost_connection(exc: Exception) -> bool:
    # An error reply a conversation translated (NOPERM, OOM, ...) is no lost connection, although
    # RedisUnavailable and its kin are OSErrors; refused credentials will not get better by retrying.
    if isinstance(exc, (SimhashRedisError, rex.AuthenticationError)):
        return False
    return isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError))
