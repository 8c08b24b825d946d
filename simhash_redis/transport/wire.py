"""Hand-built RESP commands and hiredis-parsed replies over a pooled redis-py connection.

It reaches under redis-py's public API: the hot paths send thousands of small commands per round trip, and
redis-py's `pack_commands` / `read_response` cost microseconds each. Replies are read straight off a plain or
TLS socket into the connection's `hiredis.Reader`, or kept raw for the compiled candidate filter
(`read_sets`); any other connection goes through redis-py's own calls, with the same results. Error replies
come back as `ResponseError` objects in place; the caller must disconnect the connection when anything raises,
so no half-read connection goes back to a pool.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.exceptions as rex

from .packing import Command, CommandPerKey, pack

try:  # the compiled core's scanner of whole replies, for `read_sets` (the transport parses no more)
    from ..compiled import scan_sets

    _scan_sets: Callable[[bytes, int, int], tuple[int, int, bool]] | None = scan_sets
except ImportError:  # pragma: no cover - without it, replies are read by hiredis only
    _scan_sets = None

try:  # redis-py's hiredis parser: the reader's "not enough data" sentinel and the parser class
    from redis._parsers.hiredis import NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _HiredisParser as _Hiredis

    _HIREDIS_PARSER: type | None = _Hiredis
except ImportError:  # pragma: no cover - a redis-py without it: always take the fallback
    NOT_ENOUGH_DATA = None
    _HIREDIS_PARSER = None

try:
    import hiredis as _hiredis_module

    PUSH: type | None = getattr(_hiredis_module, "PushNotification", None)
except ImportError:  # pragma: no cover
    PUSH = None

__all__ = [
    "CLOSED",
    "NOT_ENOUGH_DATA",
    "PUSH",
    "Command",
    "CommandPerKey",
    "Exchange",
    "HeldConnection",
    "count_send",
    "fast",
    "pack",
    "read",
    "read_sets",
    "round_trips",
    "send",
]

CLOSED = "Connection closed by server."


def fast(connection: Any) -> bool:
    """Whether replies can be read straight off this connection's socket with its hiredis reader."""
    parser = getattr(connection, "_parser", None)
    return (
        _HIREDIS_PARSER is not None
        and type(parser) is _HIREDIS_PARSER
        and getattr(parser, "_reader", None) is not None
        and isinstance(getattr(parser, "_sock", None), socket.socket)
    )


# Round trips of this process's transports (a list: incremented without a global statement).
_SENDS = [0]


def round_trips() -> int:
    """How many round trips to a server this process's indexes have made so far (for metrics)."""
    return _SENDS[0]


def count_send() -> None:
    """Count a send made elsewhere (the asyncio transports' own)."""
    _SENDS[0] += 1


def send(connection: Any, commands: Sequence[Command]) -> None:
    """Send the commands on the connection (connecting it first if needed).

    Raises:
        redis.exceptions.ConnectionError, TimeoutError: the send failed (redis-py has disconnected).
        redis.exceptions.DataError: an argument of an unsupported type.
    """
    payload = _payload(connection, [commands])
    _SENDS[0] += 1
    connection.send_packed_command(payload, check_health=False)


def _payload(connection: Any, batches: Sequence[Sequence[Command]]) -> list[bytes]:
    # Our packer writes what redis-py's packers write; a connection with its own packer (or a non-UTF-8
    # encoder for str arguments) keeps its own.
    packer = type(getattr(connection, "_command_packer", None)).__name__
    encoder = getattr(connection, "encoder", None)
    if packer in ("HiredisRespSerializer", "PythonRespSerializer") and (
        encoder is None or (encoder.encoding in ("utf-8", "utf8") and encoder.encoding_errors == "strict")
    ):
        return [b"".join([pack(batch) for batch in batches])]
    return [part for batch in batches for part in connection.pack_commands(batch)]


def read(connection: Any, count: int) -> list[Any]:
    """Read `count` replies, raw (not decoded), error replies as ResponseError objects in place.

    Raises:
        redis.exceptions.ConnectionError: the connection was lost or answered a connection error.
        redis.exceptions.TimeoutError: no reply within the connection's socket timeout.
    """
    if not fast(connection):
        return _read_slow(connection, count)
    parser = connection._parser
    reader = parser._reader
    sock = parser._sock
    buffer = parser._buffer
    gets = reader.gets
    feed = reader.feed
    recv_into = sock.recv_into
    out: list[Any] = []
    append = out.append
    remaining = count
    try:
        while remaining:
            reply = gets(False)
            if reply is NOT_ENOUGH_DATA:
                received = recv_into(buffer)
                if not received:
                    raise rex.ConnectionError(CLOSED)
                feed(buffer, 0, received)
                continue
            kind = type(reply)
            if kind is list:
                if reply and type(reply[0]) is not bytes and isinstance(reply[0], rex.ConnectionError):
                    raise reply[0]
            elif kind is not bytes:
                if PUSH is not None and isinstance(reply, PUSH):
                    # RESP3 out-of-band message (e.g. a client-side-cache invalidation): not a reply.
                    parser.handle_push_response(reply)
                    continue
                if isinstance(reply, rex.ConnectionError):
                    raise reply
            append(reply)
            remaining -= 1
    except OSError as exc:
        raise _read_error(connection, exc) from None
    return out


def read_sets(connection: Any, count: int, head: bytes = b"") -> tuple[bytes | None, bytes]:
    """The next `count` replies in their RESP form, and the bytes read past them, when each is an array, set
    or map of bulk strings (SMEMBERS, HGETALL) and the compiled core can check them. Otherwise (None, b""):
    every byte read, `head` (bytes an earlier call read past its replies) included, is left to the reader.

    Raises:
        redis.exceptions.ConnectionError, TimeoutError: see `read`.
    """
    if _scan_sets is None or not fast(connection):
        return None, _feed(connection, head)
    parser = connection._parser
    buffered = getattr(parser._reader, "has_data", None)  # hiredis >= 2.1
    # redis-py < 5.1 keeps a reply its can_read() took from the reader in _next_response.
    kept = getattr(parser, "_next_response", NOT_ENOUGH_DATA) is not NOT_ENOUGH_DATA
    if buffered is None or buffered() or kept:
        return None, _feed(connection, head)
    recv_into, buffer = parser._sock.recv_into, parser._buffer
    whole: list[bytes] = []
    pending = head
    try:
        while True:
            if pending:
                end, found, other = _scan_sets(pending, 0, count)
                whole.append(pending[:end])
                pending = pending[end:]
                count -= found
                # A partial reply is scanned again from its start at every read: a large one goes to
                # hiredis, which reads on where it stopped.
                if other or (count and len(pending) > _RAW_MOST):
                    return None, _feed(connection, b"".join(whole) + pending)
            if not count:
                break
            received = recv_into(buffer)
            if not received:
                raise rex.ConnectionError(CLOSED)
            pending += memoryview(buffer)[:received]
    except OSError as exc:
        raise _read_error(connection, exc) from None
    return b"".join(whole), pending


_RAW_MOST = 1 << 18


def _feed(connection: Any, data: bytes) -> bytes:
    if data:
        connection._parser._reader.feed(data)
    return b""


def _read_error(connection: Any, exc: OSError) -> Exception:
    if isinstance(exc, rex.RedisError):
        return exc
    if isinstance(exc, TimeoutError):
        return rex.TimeoutError(f"Timeout reading from {_where(connection)}")
    return rex.ConnectionError(f"Error while reading from {_where(connection)}: {exc.args}")


def _read_slow(connection: Any, count: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(count):
        try:
            out.append(connection.read_response(disable_decoding=True))
        except rex.ResponseError as exc:
            out.append(exc)
    return out


def _where(connection: Any) -> str:
    try:
        return str(connection._host_error())
    except Exception:
        return "Redis"


def checkout(pool: Any) -> Any:
    """A connection from a redis-py pool, whatever the redis-py version."""
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3 requires a command name (and 5.3+ warns when given one)
        return pool.get_connection("EXECUTE")


class Exchange:
    """Commands sent and replies read on one connection (the caller's for the conversation), interleaved at
    will.

    Replies come back in the order the commands were sent, raw, error replies in place. The methods raise as
    `send` and `read` do, and RuntimeError for more replies than commands sent (a bug).
    """

    __slots__ = ("connection", "tail", "unread")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.unread = 0
        #: Bytes `read_sets` read past its replies, not yet handed to the connection's reader.
        self.tail = b""

    def send(self, *batches: Sequence[Command]) -> None:
        """Send batches of commands in one write."""
        payload = _payload(self.connection, batches)
        self.unread += sum(map(len, batches))
        _SENDS[0] += 1
        self.connection.send_packed_command(payload, check_health=False)

    def read(self, count: int) -> list[Any]:
        """The next `count` replies."""
        if count > self.unread:
            raise RuntimeError(f"{count} replies asked for, {self.unread} due")
        self.tail = _feed(self.connection, self.tail)
        replies = read(self.connection, count)
        self.unread -= count
        return replies

    def read_sets(self, count: int) -> bytes | None:
        """The next `count` replies in their RESP form (see `read_sets`); None: read them with `read`."""
        if count > self.unread:
            raise RuntimeError(f"{count} replies asked for, {self.unread} due")
        tail = self.tail
        if tail and _scan_sets is not None:
            end, found, _ = _scan_sets(tail, 0, count)
            if found == count:  # read off the socket with earlier replies: the connection is not touched
                self.tail, self.unread = tail[end:], self.unread - count
                return tail[:end]
        raw, self.tail = read_sets(self.connection, count, tail)
        if raw is not None:
            self.unread -= count
        return raw

    def round_trip(self, commands: Sequence[Command]) -> list[Any]:
        """Send the commands and read all their replies."""
        self.send(commands)
        return self.read(len(commands))


class HeldConnection:
    """Keeps one connection of a pool checked out between round trips, for a sender's hot path.

    Taking a connection from a redis-py pool and giving it back costs more than a small round trip. Only a
    fast-path connection of a plain `redis.ConnectionPool` is held, while at most a quarter of the pool's
    limit is in use; it is let go when garbage-collected, and a forked child forgets it.
    """

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self._held: list[Any] = []
        self._poller: tuple[Any, Any] | None = None
        self._enabled = type(pool) is redis.ConnectionPool
        _HELD_CONNECTIONS.add(self)
        weakref.finalize(self, _release_all, pool, self._held, os.getpid())

    def take(self) -> Any:
        """A connection: the held one if it is still clean, else one from the pool."""
        if self._held:
            try:
                connection = self._held.pop()
            except IndexError:  # another thread took it
                pass
            else:
                try:
                    if self._idle(connection):
                        return connection
                except (rex.ConnectionError, OSError, ValueError):
                    pass
                connection.disconnect()
                self.pool.release(connection)
        return checkout(self.pool)

    def give(self, connection: Any, clean: bool) -> None:
        """Take back a connection after a round trip; `clean`: every reply was read, nothing raised."""
        if clean and self._enabled and not self._held and fast(connection) and self._roomy():
            self._held.append(connection)
        else:
            self.pool.release(connection)

    def forget(self) -> None:
        """Drop the held connection without touching it (in a forked child it is the parent's)."""
        self._held.clear()
        self._poller = None

    def _idle(self, connection: Any) -> bool:
        # What redis-py's can_read(0) checks, without allocating a poller on every call.
        parser = connection._parser
        sock, reader = getattr(parser, "_sock", None), getattr(parser, "_reader", None)
        if sock is None or reader is None:
            return False
        if getattr(parser, "_next_response", NOT_ENOUGH_DATA) is not NOT_ENOUGH_DATA:
            return False  # redis-py < 5.1 keeps a reply its can_read() took from the reader
        buffered = getattr(reader, "has_data", None)  # hiredis >= 2.1
        if not _HAS_POLL or buffered is None:
            return not parser.can_read(0)
        if buffered():
            return False
        pending = getattr(sock, "pending", None)  # TLS: decrypted bytes above the socket
        if pending is not None and pending():
            return False
        cached = self._poller
        if cached is None or cached[0] is not sock:
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            cached = self._poller = (sock, poller)
        return not cached[1].poll(0)

    def _roomy(self) -> bool:
        # Hold a connection only while the pool has plenty left for everyone else.
        limit = self.pool.max_connections
        in_use = getattr(self.pool, "_in_use_connections", None)
        return in_use is not None and (limit is None or len(in_use) <= limit // 4)


_HAS_POLL = hasattr(select, "poll")
_HELD_CONNECTIONS: weakref.WeakSet[HeldConnection] = weakref.WeakSet()


def _forget_all() -> None:
    for held in list(_HELD_CONNECTIONS):
        held.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all)


def _release_all(pool: Any, held: list[Any], pid: int) -> None:
    if os.getpid() != pid:
        return
    while held:
        with contextlib.suppress(Exception):  # the pool may be half torn down at interpreter exit
            pool.release(held.pop())
