"""Running the index on Redis Cluster: a batch split by the node owning each key's slot, every share sent
before any reply is read; MOVED, ASK and lost nodes refresh the slot map and resend (writes idempotent)."""

from __future__ import annotations

import binascii
import contextlib
import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import redis.exceptions as rex
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from ..errors import RedisUnavailable, SimhashRedisError
from . import wire
from .standalone import Backoff, Exchange, lost_connection, raise_first_error, refused, retried
from .wire import Command

__all__ = ["CLUSTER_BACKOFF", "DEFAULT_NODE_TIMEOUT", "ClusterTransport", "bucket_slots", "command_keys"]

#: How a cluster's transport retries, unless given another Backoff; then on until the cluster's
#: failover time has passed since the first failure (`ClusterTransport.failover_time`).
CLUSTER_BACKOFF = Backoff(retries=12, base=0.05, cap=2.0)
#: Redis's default cluster-node-timeout, in seconds: assumed where CONFIG GET is refused (an ACL user
#: without it) or no primary answers it. A cluster configured with a longer one needs CONFIG GET.
DEFAULT_NODE_TIMEOUT = 15.0
_REDIRECTIONS = 16
_ONCE = Backoff(retries=0)  # a node's own command, which the caller's attempt retries
# Wait for one replica, a second at a time: a write counts as done once a replica has it. A replica
# that lags (a loaded machine) gets _WAIT_ROUNDS more seconds on the same connection; a slot with no
# live replica left (a failover in progress) fails the attempt, and the retry refreshes the slot map.
_WAIT: Command = (b"WAIT", 1, 1000)
_WAIT_ROUNDS = 5
# The commands the index sends that write nothing: a node's share made only of them needs no WAIT.
_READS = frozenset(
    b"HGET HMGET HGETALL HLEN HEXISTS SMEMBERS SCARD SMISMEMBER EXISTS TYPE PTTL TIME INFO PING".split()
)

T = TypeVar("T")


def command_keys(command: Command) -> list[bytes]:
    """The keys a command touches (scripts declare theirs; every other command has its key first)."""
    name = _as_bytes(command[0]).upper()
    if name in (b"EVALSHA", b"EVAL"):
        numkeys = int(command[2])
        return [_as_bytes(k) for k in command[3 : 3 + numkeys]]
    if name in (b"SCRIPT", b"PING", b"ASKING", b"TIME"):
        return []
    return [_as_bytes(command[1])]


# CRC16-XMODEM by byte, as redis.crc.key_slot (binascii.crc_hqx) computes it, for numpy passes.
_CRC16 = np.array([binascii.crc_hqx(bytes([byte]), 0) for byte in range(256)], dtype=np.uint16)


def bucket_slots(prefix: bytes, count: int) -> npt.NDArray[np.uint16]:
    """The hash slots of the keys `prefix` + decimal 0..count-1 (a map's buckets), computed in numpy
    passes; `prefix` holds no hash tag (no key name of an index has braces)."""
    numbers = np.arange(count, dtype=np.int64)
    slots = np.empty(count, dtype=np.uint16)
    start = np.uint16(binascii.crc_hqx(prefix, 0))
    low = 0
    for digits in range(1, len(str(max(count - 1, 0))) + 1):
        high = min(count, 10**digits)
        crc = np.full(high - low, start, dtype=np.uint16)
        for place in range(digits - 1, -1, -1):
            digit = (numbers[low:high] // 10**place % 10 + ord("0")).astype(np.uint16)
            crc = (crc << np.uint16(8)) ^ _CRC16[(crc >> np.uint16(8)) ^ digit]
        slots[low:high] = crc & np.uint16(16383)
        low = high
    return slots


def _as_bytes(value: bytes | str | int | float) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class ClusterTransport:
    """One concurrent round trip per batch over the nodes of a redis-py cluster client."""

    cluster = True
    #: How commands are sent and replies read on a node's connection.
    exchange = wire.Exchange

    def __init__(self, client: RedisCluster, backoff: Backoff | None = None) -> None:
        self.client = client
        self.backoff = backoff or dataclasses.replace(CLUSTER_BACKOFF, lasting=self.failover_time)
        self._failover: float | None = None
        # Each primary's connected replicas, as its INFO said when first needed since the last refresh.
        self._replicas: dict[str, int] = {}

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send the commands (each of one key's slot) to the nodes owning them: as `Transport.execute`.
        Durable: each node's share that writes ends with WAIT for one replica, so an acknowledged write
        survives the failover of its primary."""
        replies: list[Any] = [None] * len(commands)
        pending = list(range(len(commands)))
        redirections = 0

        def attempt() -> None:
            # Redirected commands are resent at once after a slot map refresh; unreachable ones
            # (a node down, a slot without owner) wait for the next attempt of the retry loop.
            nonlocal pending, redirections
            while pending:
                failed, redirected, last_error = self._attempt(commands, pending, replies, durable)
                pending = failed + redirected
                if failed:
                    raise last_error or rex.ConnectionError("cluster unavailable")
                if redirected:
                    redirections += 1
                    if redirections > _REDIRECTIONS:
                        raise RedisUnavailable("the cluster kept redirecting commands; is it resharding?")
                    self._refresh()

        retried(self.backoff, attempt, _unreached, self._refresh)
        if raise_on_error:
            raise_first_error(replies)
        return replies

    def converse(self, talk: Callable[[Exchange], T], *, durable: bool = False) -> T:
        """Run a conversation whose sends are queued; a read that outruns the buffered replies sends the
        queue as one `execute` (durable as there): the same replies as on a standalone server."""
        return talk(_QueuedExchange(self, durable))

    def broadcast(self, command: Command) -> None:
        """Send a keyless command (SCRIPT LOAD) to every primary (raises as `execute`)."""

        def attempt() -> None:
            for node in self.client.get_primaries():  # type: ignore[no-untyped-call]
                raise_first_error(self._node_round_trip(node, [command]))

        retried(self.backoff, attempt, before_retry=self._refresh)

    def scan(self, pattern: str, count: int) -> Iterator[list[bytes]]:
        """The keys matching a pattern, a SCAN page of COUNT `count` at a time, from every primary (raises
        as `execute`). Each page is asked of the owner of a slot of that primary through the retry loop:
        a primary lost mid-listing (a failover) is listed again from the start on its successor, whose
        cursors are its own (a key may come twice)."""
        first: dict[str, int] = {}  # a slot of each primary in the slot map
        for slot, nodes in sorted(self.client.nodes_manager.slots_cache.items()):
            if nodes:
                first.setdefault(nodes[0].name, slot)
        for slot in sorted(first.values()):
            scanned: list[Any] = [None, b"0"]  # the node listed, and its cursor
            while True:
                keys = self._scan_page(slot, scanned, (b"MATCH", pattern, b"COUNT", count))
                if keys:
                    yield list(keys)
                if scanned[1] in (b"0", 0):
                    break

    def _scan_page(self, slot: int, scanned: list[Any], options: Command) -> list[bytes]:
        def attempt() -> Any:
            node = self.client.nodes_manager.get_node_from_slot(slot)
            if node.name != scanned[0]:
                scanned[:] = [node.name, b"0"]  # another primary: from the start
            reply = self._node_round_trip(node, [(b"SCAN", scanned[1], *options)])[0]
            raise_first_error([reply])
            return reply

        scanned[1], keys = retried(self.backoff, attempt, _unreached, self._refresh)
        return keys  # type: ignore[no-any-return]

    def _attempt(
        self, commands: Sequence[Command], pending: list[int], replies: list[Any], durable: bool
    ) -> tuple[list[int], list[int], Exception | None]:
        groups: dict[str, tuple[ClusterNode, list[int]]] = {}
        failed: list[int] = []
        redirected: list[int] = []
        last_error: Exception | None = None
        # Each slot's owner asked once an attempt: redis-py's lookup costs microseconds, and a batch of a
        # map's 131,072 buckets has only 16,384 slots.
        owners: dict[int, ClusterNode] = {}
        per_key = commands.keys if isinstance(commands, wire.CommandPerKey) else None
        per_slot = commands.slots if isinstance(commands, wire.SlotCommands) else None
        for i in pending:
            if per_slot is not None:
                keys: list[bytes] = []
            else:
                keys = [per_key[i]] if per_key is not None else command_keys(commands[i])
            try:
                if per_slot is None and not keys:  # TIME, say: any node answers
                    node = self.client.get_default_node()  # type: ignore[no-untyped-call]
                    if node is None:  # no node known (a client closed meanwhile): as an unknown slot
                        raise rex.RedisClusterException("no cluster node is known")
                else:
                    slot = per_slot[i] if per_slot is not None else key_slot(keys[0])
                    node = owners.get(slot)
                    if node is None:
                        node = owners[slot] = self.client.nodes_manager.get_node_from_slot(slot)
            except rex.RedisClusterException as exc:  # the slot has no known owner right now
                failed.append(i)
                last_error = exc
                continue
            groups.setdefault(node.name, (node, []))[1].append(i)
        sent: list[tuple[ClusterNode, list[int], Any, int, bool]] = []
        handed = 0  # exchanges of `sent` passed to _read, which gives each back whatever happens
        try:
            # Nodes in the order of their names: a transport that waits for a node's connections (the
            # asyncio one) then never waits in a cycle with another call.
            for _, (node, indexes) in sorted(groups.items()):
                batch = _share(commands, indexes)
                waits = (
                    durable
                    and not isinstance(commands, wire.Volatile)
                    and not all(_as_bytes(command[0]).upper() in _READS for command in batch)
                    and self._has_replica(node)
                )
                if waits:
                    batch = [*batch, _WAIT]
                try:
                    exchange = self._send(node, batch)
                    sent.append((node, indexes, exchange, len(batch), waits))
                except (rex.ConnectionError, rex.TimeoutError, OSError) as exc:
                    if refused(exc):  # the node answered: no retry changes its answer
                        raise
                    failed.extend(indexes)
                    last_error = exc
            node_replies_of: list[list[Any] | Exception] = []
            for node, _, exchange, count, waits in sent:
                handed += 1
                try:
                    node_replies_of.append(self._read(node, exchange, count, waits))
                except (rex.ConnectionError, rex.TimeoutError, OSError) as exc:
                    if refused(exc):  # NOAUTH, say; the nodes left are discarded below
                        raise
                    node_replies_of.append(exc)
        except BaseException:
            # Cancelled, say, between sends or reads: the other nodes' connections hold unread replies.
            for node, _, exchange, _, _ in sent[handed:]:
                self._discard(node, exchange)
            raise
        asks: dict[str, list[int]] = defaultdict(list)
        for (node, indexes, _, _, waits), node_replies in zip(sent, node_replies_of, strict=True):
            if waits and not isinstance(node_replies, Exception) and node_replies[-1] == 0:
                node_replies = rex.ConnectionError(f"no replica of {node.name} confirmed the writes")
            if isinstance(node_replies, Exception):
                failed.extend(indexes)
                last_error = node_replies
                continue
            for i, reply in zip(indexes, node_replies[: len(indexes)], strict=True):
                if isinstance(reply, rex.AskError):  # "ASK 3999 127.0.0.1:6381"
                    asks[str(reply).split()[-1]].append(i)
                elif isinstance(reply, rex.MovedError):
                    redirected.append(i)
                elif isinstance(reply, (rex.TryAgainError, rex.ClusterDownError)):
                    # Lasts until a failover or a migration completes: wait with backoff.
                    failed.append(i)
                    last_error = reply
                else:
                    replies[i] = reply
        for target, indexes in asks.items():
            host, _, port = target.rpartition(":")
            for i in indexes:
                try:
                    node = self._node_at(host, int(port))
                    reply = self._node_round_trip(node, [[b"ASKING"], commands[i]])[1]
                except (rex.ConnectionError, rex.TimeoutError, OSError) as exc:
                    if refused(exc):
                        raise
                    failed.append(i)
                    last_error = exc
                    continue
                if isinstance(reply, (rex.AskError, rex.MovedError, rex.TryAgainError)):
                    redirected.append(i)
                else:
                    replies[i] = reply
        return failed, redirected, last_error

    def failover_time(self) -> float:
        """How long the failover of a primary may take on this cluster, in seconds, read once: twice cluster-
        node-timeout (Redis's default of 15 s measured 17.6-18.4 s from a kill to the new primary), asked of
        each primary in turn (CONFIG GET); where none answers, Redis's default."""
        if self._failover is None:
            timeout = DEFAULT_NODE_TIMEOUT
            for node in self.client.get_primaries():  # type: ignore[no-untyped-call]
                try:
                    reply = self._node_command(node, (b"CONFIG", b"GET", b"cluster-node-timeout"))
                except SimhashRedisError:
                    continue  # that node is down (the failover in progress) or refuses it, say: ask another
                if isinstance(reply, dict):  # RESP3
                    reply = [item for pair in reply.items() for item in pair]
                if isinstance(reply, list) and len(reply) == 2:
                    with contextlib.suppress(TypeError, ValueError):
                        timeout = int(reply[1]) / 1000
                        break
            self._failover = 2 * timeout
        return self._failover

    def _has_replica(self, node: ClusterNode) -> bool:
        # WAIT on a primary without replicas would sit out its timeout. The slot map cannot tell: a
        # replica that has received nothing yet is left out of CLUSTER SLOTS; the primary's INFO can.
        if node.name not in self._replicas:
            try:
                info = self._node_command(node, (b"INFO", b"replication"))
            except SimhashRedisError as exc:
                if refused(exc):  # WRONGPASS, or an ACL user without INFO: no retry changes the answer
                    raise
                if isinstance(exc, RedisUnavailable):
                    return False  # the write to it fails too, and the retry asks again
                info = b""  # another error reply (INFO renamed or disabled): no replica known, no WAIT
            text = info.decode() if isinstance(info, bytes) else str(info)
            found = re.search(r"^connected_slaves:(\d+)", text, flags=re.M)
            self._replicas[node.name] = int(found.group(1)) if found else 0
        return self._replicas[node.name] > 0

    # The I/O under the retries, one small method each, so that the asyncio transport awaits them.

    def _checkout(self, node: ClusterNode) -> Any:
        return wire.checkout(self._pool(node))

    def _release(self, node: ClusterNode, connection: Any) -> None:
        self._pool(node).release(connection)

    def _drop(self, connection: Any) -> None:
        connection.disconnect()

    def _node_at(self, host: str, port: int) -> ClusterNode:
        node = self.client.get_node(host=host, port=port)  # type: ignore[no-untyped-call]
        return node or ClusterNode(host, port)  # type: ignore[no-untyped-call]

    def _reload(self) -> None:
        self.client.nodes_manager.initialize()

    def _pool(self, node: ClusterNode) -> Any:
        connection = node.redis_connection or self.client.get_redis_connection(node)
        return connection.connection_pool

    def _send(self, node: ClusterNode, commands: Sequence[Command]) -> wire.Exchange:
        exchange = self.exchange(self._checkout(node))
        try:
            exchange.send(commands)
        except BaseException:
            self._discard(node, exchange)
            raise
        return exchange

    def _discard(self, node: ClusterNode, exchange: wire.Exchange) -> None:
        # A connection whose replies will not be read: closed, and given back to its pool in any case.
        try:
            with contextlib.suppress(Exception):
                self._drop(exchange.connection)
        finally:
            self._release(node, exchange.connection)

    def _read(self, node: ClusterNode, exchange: wire.Exchange, count: int, waits: bool = False) -> list[Any]:
        try:
            replies = exchange.read(count)
            # WAIT counts the replicas that have this connection's writes: asked again on the same one.
            for _ in range(_WAIT_ROUNDS if waits else 0):
                if replies[-1] != 0:
                    break
                replies[-1] = exchange.round_trip([_WAIT])[0]
            return replies
        except BaseException:
            self._drop(exchange.connection)
            raise
        finally:
            self._release(node, exchange.connection)

    def _node_round_trip(self, node: ClusterNode, commands: list[Command]) -> list[Any]:
        return self._read(node, self._send(node, commands), len(commands))

    def _node_command(self, node: ClusterNode, command: Command) -> Any:
        reply = retried(_ONCE, lambda: self._node_round_trip(node, [command])[0])
        raise_first_error([reply])  # a refused SCAN, say: an error of the library, never a reply to unpack
        return reply

    def _refresh(self, _: object = None) -> None:
        # The slot map is stale (failover, reshard): ask the cluster again; while it is still electing
        # a new primary this may fail, and the next attempt retries after a backoff delay.
        self._replicas.clear()
        with contextlib.suppress(rex.RedisError, rex.RedisClusterException, OSError):
            self._reload()


def _share(commands: Sequence[Command], indexes: list[int]) -> Sequence[Command]:
    """A node's share of a batch (commands of one name a key packed as one still: `wire.CommandPerKey`)."""
    if isinstance(commands, wire.CommandPerKey):
        keys = commands.keys
        return wire.CommandPerKey(commands.name, [keys[i] for i in indexes], commands.field)
    if isinstance(commands, wire.SlotCommands):
        return commands.taken(indexes)
    return [commands[i] for i in indexes]


def _unreached(exc: Exception) -> bool:
    """Whether an error is a node out of reach for now (lost, down, a slot without owner, a failover or a
    migration under way): worth a retry after refreshing the slot map."""
    return lost_connection(exc) or isinstance(
        exc, (rex.RedisClusterException, rex.TryAgainError, rex.ClusterDownError)
    )


class _QueuedExchange(wire.Exchange):
    """An exchange over a cluster: sends are queued, reads send the queue when the buffer runs dry."""

    __slots__ = ("_buffer", "_durable", "_queue", "_transport")

    def __init__(self, transport: ClusterTransport, durable: bool = False) -> None:
        super().__init__(None)
        self._transport, self._durable = transport, durable
        self._queue: Sequence[Command] = []
        self._buffer: list[Any] = []

    def read_sets(self, count: int) -> None:
        return None

    def send(self, *batches: Sequence[Command]) -> None:
        if (
            len(batches) == 1
            and isinstance(batches[0], (wire.SlotCommands, wire.Volatile))
            and not self._queue
        ):
            self.unread += len(batches[0])
            self._queue = batches[0]  # kept whole: routed by its slots, never parsed back
            return
        super().send(*batches)

    def _pack(self, batches: Sequence[Sequence[Command]]) -> list[Any]:
        return [command for batch in batches for command in batch]

    def _put(self, data: list[Any]) -> None:
        if type(self._queue) is not list:  # commands sent with volatile ones make them all durable
            self._queue = list(self._queue)
        self._queue.extend(data)

    def _get(self, count: int) -> list[Any]:
        if count > len(self._buffer):
            queued, self._queue = self._queue, []
            self._buffer.extend(self._transport.execute(queued, raise_on_error=False, durable=self._durable))
        replies, self._buffer = self._buffer[:count], self._buffer[count:]
        return replies
