"""The transports of redis.asyncio clients: the synchronous transports with their I/O awaited.

They run only inside `bridge.run` (the asyncio API's calls): each send or read hands a coroutine of the
redis.asyncio connection to `bridge.wait`, and everything else (retries, redirections, WAIT, the order
of replies) is inherited from `Transport` and `ClusterTransport`. Like `wire`, this module reaches under
redis-py's public API: a connection's packer and parser, and a cluster node's free list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis.exceptions as rex
from redis.asyncio.connection import AbstractConnection

from . import wire
from .bridge import wait
from .cluster import ClusterTransport
from .retry import Backoff
from .sender import Command
from .standalone import Transport

__all__ = ["AsyncClusterTransport", "AsyncExchange", "AsyncTransport"]

T = TypeVar("T")


def _packed(connection: Any, batches: Sequence[Sequence[Command]]) -> list[bytes]:
    # Our packer writes what redis.asyncio's writes for UTF-8 strict encoders; others keep their own.
    encoder = connection.encoder
    if type(connection).pack_command is AbstractConnection.pack_command and (
        encoder.encoding in ("utf-8", "utf8") and encoder.encoding_errors == "strict"
    ):
        return [b"".join([wire.pack(batch) for batch in batches])]
    return [part for batch in batches for part in connection.pack_commands(batch)]


async def _read(connection: Any, count: int) -> list[Any]:
    # One await for all `count` replies: one switch between the greenlet and its task per read.
    out: list[Any] = []
    for _ in range(count):
        try:
            out.append(await connection.read_response(disable_decoding=True))
        except rex.ResponseError as exc:
            out.append(exc)
    return out


class AsyncExchange:
    """Commands sent and replies read on one redis.asyncio connection (see `wire.Exchange`).

    Args:
        connection: a redis.asyncio connection, owned by the caller for the conversation.
    """

    __slots__ = ("connection", "unread")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.unread = 0

    def send(self, *batches: Sequence[Command]) -> None:
        """Send batches of commands in one write.

        Raises:
            redis.exceptions.ConnectionError, TimeoutError: the send failed.
            redis.exceptions.DataError: an argument of an unsupported type.
        """
        payload = _packed(self.connection, batches)
        self.unread += sum(map(len, batches))
        wait(self.connection.send_packed_command(payload, check_health=False))

    def read(self, count: int) -> list[Any]:
        """The next `count` replies, raw, error replies in place.

        Raises:
            redis.exceptions.ConnectionError, TimeoutError: the connection was lost or timed out.
            RuntimeError: more replies asked for than commands were sent (a bug in the caller).
        """
        if count > self.unread:
            raise RuntimeError(f"{count} replies asked for, {self.unread} due")
        replies = wait(_read(self.connection, count))
        self.unread -= count
        return replies

    def round_trip(self, commands: Sequence[Command]) -> list[Any]:
        """Send the commands and read all their replies."""
        self.send(commands)
        return self.read(len(commands))


class AsyncTransport(Transport):
    """`Transport` over a redis.asyncio client's connection pool.

    Args:
        client: the redis.asyncio client whose connection pool is used.
        backoff: how to wait between attempts after a connection error or timeout.
    """

    def __init__(self, client: Any, backoff: Backoff | None = None) -> None:
        super().__init__(client, backoff)
        # redis-py's pool refuses a connection past its limit ("Too many connections") instead of
        # waiting for one: hundreds of tasks calling the index at once queue here for a turn instead.
        limit = self.pool.max_connections
        self._turns = asyncio.Semaphore(limit if isinstance(limit, int) and limit > 0 else 2**31)

    def _on_connection(self, talk: Callable[[Any], T]) -> T:
        pool: Any = self.pool  # redis.asyncio's: its methods are coroutines
        wait(self._turns.acquire())
        try:
            connection = wait(_checkout(pool))
            exchange = AsyncExchange(connection)
            try:
                return talk(exchange)
            finally:
                if exchange.unread:
                    # Unread replies, or a send or read cut short (a cancelled task, say): never pooled.
                    wait(connection.disconnect())
                wait(pool.release(connection))
        finally:
            self._turns.release()


async def _checkout(pool: Any) -> Any:
    try:
        return await pool.get_connection()
    except TypeError:  # redis-py < 5.3 requires a command name
        return await pool.get_connection("EXECUTE")


class AsyncClusterTransport(ClusterTransport):
    """`ClusterTransport` over a redis.asyncio cluster client's nodes.

    Args:
        client: the redis.asyncio cluster client (initialised here if it was not yet).
        backoff: how to wait between attempts while the cluster fails over or reshards.
    """

    def __init__(self, client: Any, backoff: Backoff | None = None) -> None:
        super().__init__(client, backoff)
        wait(client.initialize())

    def _checkout(self, node: Any) -> Any:
        return node.acquire_connection()

    def _release(self, node: Any, connection: Any) -> None:
        release = getattr(node, "release", None)
        if release is not None:
            release(connection)
        else:  # redis-py < 6 hands connections back through the node's free list
            node._free.append(connection)

    def _write(self, connection: Any, commands: Sequence[Command]) -> None:
        wait(connection.send_packed_command(_packed(connection, [commands]), check_health=False))

    def _take(self, connection: Any, count: int) -> list[Any]:
        return wait(_read(connection, count))

    def _drop(self, connection: Any) -> None:
        wait(connection.disconnect())

    def _node_at(self, host: str, port: int) -> Any:
        client: Any = self.client
        node = client.get_node(host=host, port=port)
        if node is None:  # an ASK to a node the slot map does not list yet: the retry refreshes it
            raise rex.ConnectionError(f"no known cluster node at {host}:{port}")
        return node

    def _reload(self) -> None:
        wait(self.client.nodes_manager.initialize())
