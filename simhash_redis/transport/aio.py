"""The transports of redis.asyncio clients: the synchronous ones with each send or read awaited through
`greenlet_bridge.wait` (so only inside `greenlet_bridge.run`); like `wire`, under redis-py's public API."""

from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis.exceptions as rex
from redis.asyncio.connection import AbstractConnection

if sys.version_info >= (3, 11):
    from asyncio import timeout as async_timeout
else:  # pragma: no cover - redis-py depends on the async-timeout package there
    from async_timeout import timeout as async_timeout

try:
    from redis._parsers.hiredis import _AsyncHiredisParser

    _HIREDIS: type | None = _AsyncHiredisParser
except ImportError:  # pragma: no cover - a redis-py without it: replies are read one by one
    _HIREDIS = None

from ..errors import RedisUnavailable
from . import wire
from .cluster import ClusterTransport
from .greenlet_bridge import wait
from .standalone import Backoff, Transport, refused, translate_error
from .wire import Command

__all__ = ["AsyncClusterTransport", "AsyncExchange", "AsyncTransport"]

T = TypeVar("T")


def _send(connection: Any, payload: list[bytes]) -> None:
    # redis.asyncio's send_packed_command costs a task and two turns of the event loop per send. A
    # connected socket whose buffer is below its limit takes the bytes at once: written here, from the
    # greenlet (the event loop is paused inside this task's step meanwhile), with no await at all.
    wire.count_send()
    writer = connection._writer
    if writer is None or not connection.is_connected or writer.transport is None:
        wait(connection.send_packed_command(payload, check_health=False))  # connects first
        return
    if writer.transport.is_closing():  # closed under us (a slot-map reload, say)
        wait(connection.disconnect(nowait=True))
        raise rex.ConnectionError("Connection closed by the client")
    try:
        writer.writelines(payload)
    except OSError as exc:
        wait(connection.disconnect(nowait=True))
        raise rex.ConnectionError(f"Error while writing to socket: {exc.args}") from None
    if writer.transport.get_write_buffer_size() > _WRITE_LIMIT:
        wait(_drain(connection, writer))


async def _drain(connection: Any, writer: Any) -> None:
    try:
        async with async_timeout(connection.socket_timeout):
            await writer.drain()
    except BaseException as exc:
        await connection.disconnect(nowait=True)
        if isinstance(exc, asyncio.TimeoutError):
            raise rex.TimeoutError("Timeout writing to socket") from None
        if isinstance(exc, OSError):
            raise rex.ConnectionError(f"Error while writing to socket: {exc.args}") from None
        raise


#: Above this many bytes waiting in the socket's buffer, a send waits for it to drain.
_WRITE_LIMIT = 1 << 16


async def _read_each(connection: Any, count: int) -> list[Any]:
    # Without an asyncio hiredis parser: redis.asyncio's read_response, reply by reply.
    out: list[Any] = []
    for _ in range(count):
        try:
            out.append(await connection.read_response(disable_decoding=True))
        except rex.ResponseError as exc:
            out.append(exc)
    return out


def _fill(connection: Any) -> None:
    # `wire.read`'s reads of an asyncio connection: a socket read per chunk of bytes, awaited (redis.asyncio's
    # read_response costs tens of microseconds per reply).
    parser = connection._parser
    if not parser._connected:
        raise rex.ConnectionError(wire.CLOSED)
    wait(_fill_within(parser, connection.socket_timeout))


async def _fill_within(parser: Any, timeout: float | None) -> None:
    try:
        if timeout is None:
            await parser.read_from_socket()
        else:
            async with async_timeout(timeout):
                await parser.read_from_socket()
    except asyncio.TimeoutError:
        raise rex.TimeoutError("Timeout reading from Redis") from None
    except rex.RedisError:
        raise
    except OSError as exc:
        raise rex.ConnectionError(f"Error while reading from Redis: {exc.args}") from None


class AsyncExchange(wire.Exchange):
    """`wire.Exchange` on a redis.asyncio connection, its I/O awaited; replies are read with `read` only."""

    __slots__ = ()

    def read_sets(self, count: int) -> None:
        return None

    def _pack(self, batches: Sequence[Sequence[Command]]) -> list[bytes]:
        standard = type(self.connection).pack_command is AbstractConnection.pack_command
        return wire.payload(self.connection, batches, standard)

    def _put(self, data: list[bytes]) -> None:
        _send(self.connection, data)

    def _get(self, count: int) -> list[Any]:
        connection = self.connection
        parser: Any = connection._parser
        kind: Any = type(parser)  # compared as Any: mypy would narrow `parser` to the parser class otherwise
        if _HIREDIS is None or kind is not _HIREDIS or parser._reader is None:
            return wait(_read_each(connection, count))
        return wire.read(connection, count, _fill)


class AsyncTransport(Transport):
    """`Transport` over a redis.asyncio client's connection pool."""

    def _on_connection(self, talk: Callable[[Any], T]) -> T:
        connection = wait(self._take())
        exchange = AsyncExchange(connection)
        try:
            return talk(exchange)
        finally:
            # Unread replies, or a send or read cut short (a cancelled task, say): never pooled.
            wait(self._give(connection, clean=exchange.unread == 0))

    async def _take(self) -> Any:
        # A turn, then a connection: one await for both.
        turns = _turns(self.pool, "pool", self.pool.max_connections)
        await turns.acquire()
        try:
            return await wire.checkout(self.pool)  # a coroutine here
        except BaseException:
            turns.release()
            raise

    async def _give(self, connection: Any, clean: bool) -> None:
        pool: Any = self.pool  # redis.asyncio's: its methods are coroutines
        try:
            try:
                if not clean:
                    await connection.disconnect(nowait=True)
            finally:
                await pool.release(connection)
        finally:
            _turns(self.pool, "pool", self.pool.max_connections).release()


# redis-py's pool refuses a connection past its limit instead of waiting for one: every index on a pool
# takes a turn of the pool's one semaphore first, so hundreds of tasks on one client queue instead of
# failing. redis.asyncio's cluster nodes do the same (MaxConnectionsError), which the retry loop would take
# for a lost node: each call takes a turn of a semaphore per node name (a node replaced by a slot-map reload
# keeps its turns) and client first. A call holds connections of several nodes at once, taken in the order
# of their names (see `ClusterTransport._attempt`), so calls waiting for each other's turns never form a
# cycle.
def _turns(owner: Any, key: str, limit: object) -> asyncio.Semaphore:
    bound = limit if isinstance(limit, int) and limit > 0 else 2**31
    return _of_loop(owner, key, lambda: asyncio.Semaphore(bound))


# What `_of_loop` made, by owner (a pool, a cluster client), for one event loop (which asyncio objects
# belong to: an owner used under another loop gets new ones).
_MADE: weakref.WeakKeyDictionary[Any, tuple[asyncio.AbstractEventLoop, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def _of_loop(owner: Any, key: str, make: Callable[[], T]) -> T:
    loop = asyncio.get_running_loop()
    made = _MADE.get(owner)
    if made is None or made[0] is not loop:
        made = _MADE[owner] = (loop, {})
    if key not in made[1]:
        made[1][key] = make()
    return made[1][key]  # type: ignore[no-any-return]


class AsyncClusterTransport(ClusterTransport):
    """`ClusterTransport` over a redis.asyncio cluster client's nodes, initialised here if not yet
    (RedisUnavailable: the cluster cannot be reached)."""

    exchange = AsyncExchange

    def __init__(self, client: Any, backoff: Backoff | None = None) -> None:
        super().__init__(client, backoff)
        try:
            _INITIAL.call_with_retry(
                lambda: wait(client.initialize()), lambda exc: isinstance(exc, _UNREACHED)
            )
        except _UNREACHED as exc:
            if refused(exc):  # the cluster answered: it refused the credentials
                raise translate_error(exc) from None
            # redis.asyncio connects at first use, so here is where an unreachable cluster shows.
            raise RedisUnavailable(f"cannot reach the Redis Cluster: {exc}") from None

    def _checkout(self, node: Any) -> Any:
        turns = _node_turns(self.client, node)  # see `_turns`
        wait(turns.acquire())
        try:
            return node.acquire_connection()
        except BaseException:
            turns.release()
            raise

    def _release(self, node: Any, connection: Any) -> None:
        try:
            release = getattr(node, "release", None)
            if release is not None:
                release(connection)
            else:  # redis-py < 6 hands connections back through the node's free list
                node._free.append(connection)
        finally:
            _node_turns(self.client, node).release()

    def _drop(self, connection: Any) -> None:
        wait(connection.disconnect())

    def _node_at(self, host: str, port: int) -> Any:
        client: Any = self.client
        node = client.get_node(host=host, port=port)
        if node is None:  # an ASK to a node the slot map does not list yet: the retry refreshes it
            raise rex.ConnectionError(f"no known cluster node at {host}:{port}")
        return node

    def _reload(self) -> None:
        wait(_of_loop(self.client, "reloads", _Reloads).reload(self.client))


def _node_turns(client: Any, node: Any) -> asyncio.Semaphore:
    return _turns(client, f"node {node.name}", getattr(node, "max_connections", None))


class _Reloads:
    """One slot-map reload at a time per cluster client, shared by everyone who found it stale (redis-py < 6
    closes the old nodes' connections on each reload, those other calls are using included)."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.done = 0

    async def reload(self, client: Any) -> None:
        seen = self.done
        async with self.lock:
            if self.done == seen:  # nobody tried while this call waited (a failed try counts too)
                try:
                    await client.nodes_manager.initialize()
                finally:
                    self.done += 1


# Opening asks the cluster for its slot map a few times before it says the cluster is unreachable.
_INITIAL = Backoff(retries=2, base=0.1, cap=0.5)
_UNREACHED = (rex.RedisClusterException, rex.ConnectionError, rex.TimeoutError, OSError)
