"""RESP on the wire: commands packed byte for byte as redis-py packs them, replies read off its connections.

It reaches under redis-py's public API, whose `pack_commands` / `read_response` cost microseconds a command.
Error replies come back as `ResponseError` objects in place; the caller must disconnect the connection when
anything raises, so no half-read connection goes back to a pool.
"""

from __future__ import annotations

import inspect
import itertools
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import hiredis
import numpy as np
import numpy.typing as npt
import redis.exceptions as rex

from .greenlet_bridge import wait

__all__ = [
    "CLOSED",
    "NOT_ENOUGH_DATA",
    "PUSH",
    "ByteColumn",
    "Command",
    "CommandPerKey",
    "Exchange",
    "PackedCommands",
    "SlotCommands",
    "Volatile",
    "arrays",
    "checkout",
    "count_send",
    "fast",
    "pack",
    "pack_columns",
    "payload",
    "read",
    "round_trips",
]

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

#: hiredis's RESP3 out-of-band message (hiredis >= 3), which is no reply.
PUSH: type | None = getattr(hiredis, "PushNotification", None)
CLOSED = "Connection closed by server."

Command = Sequence[bytes | str | int | float]
#: Arguments of many commands, one a row: a uint8 matrix, and how many bytes of each row are the
#: argument (None: all of them).
ByteColumn = tuple[npt.NDArray[np.uint8], "npt.NDArray[np.intp] | None"]

_CRLF = b"\r\n"
_BULK = b"$%d\r\n%s\r\n"


class CommandPerKey(Sequence[tuple[bytes, ...]]):
    """The commands `(name, key)`, or `(name, key, field)` with one field, for each key; `pack` packs them
    with one join when the keys have equal length."""

    __slots__ = ("field", "keys", "name")

    def __init__(self, name: bytes, keys: list[bytes], field: bytes | None = None) -> None:
        self.name = name
        self.keys = keys
        self.field = field

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return CommandPerKey(self.name, self.keys[i], self.field)
        return self._command(self.keys[i])

    def __iter__(self) -> Iterator[tuple[bytes, ...]]:
        return map(self._command, self.keys)

    def __repr__(self) -> str:
        field = "" if self.field is None else f", field {self.field!r}"
        return f"CommandPerKey({self.name!r}, {len(self.keys)} keys{field})"

    def _command(self, key: bytes) -> tuple[bytes, ...]:
        return (self.name, key) if self.field is None else (self.name, key, self.field)

    def packed(self) -> bytes:
        keys, name, field = self.keys, self.name, self.field
        if not keys:
            return b""
        if b" " in name:  # redis-py sends "SCRIPT LOAD" as two arguments: so do we
            return pack(list(self))
        # Every command is head + "$width\r\n" + key + "\r\n" + tail (the field, if any).
        head = b"*%d\r\n$%d\r\n%s\r\n" % (2 if field is None else 3, len(name), name)
        tail = b"" if field is None else _BULK % (len(field), field)
        # One join for each run of keys of one length (a map's buckets in order: a run per digit count).
        out: list[bytes] = []
        for width, run in itertools.groupby(keys, len):
            prefix = b"$%d\r\n" % width
            out += [head, prefix, (_CRLF + tail + head + prefix).join(run), _CRLF, tail]
        return b"".join(out)


class Volatile(list[Any]):
    """Commands whose writes need not outlast a failover (a lock's release, which its time to live ends
    anyway): a cluster sends them, alone in their round trip, without waiting for a replica."""


class SlotCommands(Sequence[tuple[bytes, ...]]):
    """Commands packed one by one, each with the hash slot of its keys, so that a cluster routes them
    without parsing them back (indexing does)."""

    __slots__ = ("packs", "slots")

    def __init__(self, packs: list[bytes], slots: list[int]) -> None:
        self.packs, self.slots = packs, slots

    def __len__(self) -> int:
        return len(self.packs)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return SlotCommands(self.packs[i], self.slots[i])
        return next(arrays(self.packs[i]))

    def taken(self, indexes: list[int]) -> SlotCommands:
        packs, slots = self.packs, self.slots
        return SlotCommands([packs[i] for i in indexes], [slots[i] for i in indexes])

    def packed(self) -> bytes:
        return b"".join(self.packs)


class PackedCommands(Sequence[tuple[bytes, ...]]):
    """Commands packed once into their RESP form, which `pack` sends as is; indexing parses them back."""

    __slots__ = ("_count", "_resp")

    def __init__(self, resp: bytes, count: int) -> None:
        self._resp, self._count = resp, count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: Any) -> Any:
        return list(arrays(self._resp))[i]

    def __iter__(self) -> Iterator[tuple[bytes, ...]]:
        return arrays(self._resp)

    def packed(self) -> bytes:
        return self._resp


def pack(commands: Sequence[Command]) -> bytes:
    """The RESP form of the commands, byte for byte what redis-py's `pack_commands` sends (b"SCRIPT LOAD"
    split into arguments as there); redis-py's DataError for an argument of another type (bool included)."""
    if isinstance(commands, (CommandPerKey, PackedCommands, SlotCommands)):
        return commands.packed()
    out: list[bytes] = []
    append = out.append
    extend = out.extend
    for command in commands:
        first = command[0]
        if isinstance(first, str) or b" " in first:  # type: ignore[operator]
            command = (*_encode(first).split(), *command[1:])
        append(b"*%d\r\n" % len(command))
        extend([_BULK % (len(a), a) if type(a) is bytes else _bulk(a) for a in command])
    return b"".join(out)


def _bulk(arg: Any) -> bytes:
    raw = _encode(arg)
    return _BULK % (len(raw), raw)


def _encode(arg: Any) -> bytes:
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, int) and not isinstance(arg, bool):
        return b"%d" % arg
    if isinstance(arg, float):
        return repr(arg).encode()
    if isinstance(arg, (bytearray, memoryview)):
        return bytes(arg)
    raise rex.DataError(
        f"Invalid input of type: '{type(arg).__name__}'. Convert to a bytes, string, int or float first."
    )


def pack_columns(name: bytes, columns: Sequence[ByteColumn]) -> bytes:
    """The RESP form of one command a row, `name` then an argument from each column: what `pack`
    makes of them, in numpy passes over the rows, not Python work per command."""
    rows = len(columns[0][0])
    parts: list[npt.NDArray[np.uint8]] = []
    masks: list[npt.NDArray[np.bool_]] = []

    def fixed(raw: bytes) -> None:
        parts.append(np.broadcast_to(np.frombuffer(raw, dtype=np.uint8), (rows, len(raw))))
        masks.append(np.ones((rows, len(raw)), dtype=bool))

    fixed(b"*%d\r\n$%d\r\n%s\r\n" % (len(columns) + 1, len(name), name))
    for matrix, lengths in columns:
        width = matrix.shape[1]
        if lengths is None:
            fixed(b"$%d\r\n" % width)
            parts.append(matrix)
            masks.append(np.ones(matrix.shape, dtype=bool))
        else:
            # "$<length>\r\n" of each row, from the few lengths met, left-aligned in 22 bytes.
            sizes, which = np.unique(lengths, return_inverse=True)
            heads = [b"$%d\r\n" % size for size in sizes.tolist()]
            table = np.frombuffer(b"".join(head.ljust(22, b"\0") for head in heads), dtype=np.uint8)
            spans = np.array([len(head) for head in heads], dtype=np.intp)
            parts.append(table.reshape(len(heads), 22)[which])
            masks.append(np.arange(22) < spans[which][:, None])
            parts.append(matrix)
            masks.append(np.arange(width) < lengths[:, None])
        fixed(_CRLF)
    whole = np.concatenate(parts, axis=1)
    return bytes(whole[np.concatenate(masks, axis=1)].tobytes())


def arrays(resp: bytes) -> Iterator[tuple[bytes, ...]]:
    """The arrays (or RESP3 sets) of bulk strings in a RESP payload (packed commands, SMEMBERS replies);
    ValueError for a payload of another form."""
    pos = 0
    while pos < len(resp):
        end = resp.index(b"\r\n", pos)
        count, pos = int(resp[pos + 1 : end]), end + 2
        args = []
        for _ in range(count):
            end = resp.index(b"\r\n", pos)
            size, pos = int(resp[pos + 1 : end]), end + 2
            args.append(resp[pos : pos + size])
            pos += size + 2
        yield tuple(args)


def payload(
    connection: Any, batches: Sequence[Sequence[Command]], standard: bool | None = None
) -> list[bytes]:
    """What to write for the batches: packed by `pack` where the connection packs as redis-py's own packers
    (`standard`; None: tell a synchronous connection's packer) and encodes str as strict UTF-8."""
    if standard is None:
        packer = type(getattr(connection, "_command_packer", None)).__name__
        standard = packer in ("HiredisRespSerializer", "PythonRespSerializer")
    encoder = getattr(connection, "encoder", None)
    if standard and (
        encoder is None or (encoder.encoding in ("utf-8", "utf8") and encoder.encoding_errors == "strict")
    ):
        return [b"".join([pack(batch) for batch in batches])]
    return [part for batch in batches for part in connection.pack_commands(batch)]


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


def count_send() -> None:  # a send made elsewhere (the asyncio transports' own)
    _SENDS[0] += 1


def read(connection: Any, count: int, fill: Callable[[Any], None] | None = None) -> list[Any]:
    """Read `count` replies, raw (not decoded), error replies as ResponseError objects in place; redis-py's
    ConnectionError for a lost connection, its TimeoutError for none within the socket timeout. `fill`
    feeds an asyncio connection's hiredis reader more of its socket (awaited); None: a synchronous
    connection's own socket, or redis-py's reads where its parser is not hiredis's."""
    if fill is None:
        if not fast(connection):
            out: list[Any] = []
            for _ in range(count):
                try:
                    out.append(connection.read_response(disable_decoding=True))
                except rex.ResponseError as exc:
                    out.append(exc)
            return out
        fill = _recv
    parser = connection._parser
    gets = parser._reader.gets
    out = []
    append = out.append
    remaining = count
    try:
        while remaining:
            reply = gets(False)
            if reply is NOT_ENOUGH_DATA:
                fill(connection)
                continue
            kind = type(reply)
            if kind is list:
                if reply and type(reply[0]) is not bytes and isinstance(reply[0], rex.ConnectionError):
                    raise reply[0]
            elif kind is not bytes:
                if PUSH is not None and isinstance(reply, PUSH):
                    # RESP3 out-of-band message (e.g. a client-side-cache invalidation): not a reply.
                    handled = parser.handle_push_response(reply)
                    if inspect.isawaitable(handled):  # an asyncio parser's handler
                        wait(handled)
                    continue
                if isinstance(reply, rex.ConnectionError):
                    raise reply
            append(reply)
            remaining -= 1
    except OSError as exc:
        raise _read_error(connection, exc) from None
    return out


def _recv(connection: Any) -> None:
    parser = connection._parser
    received = parser._sock.recv_into(parser._buffer)
    if not received:
        raise rex.ConnectionError(CLOSED)
    parser._reader.feed(parser._buffer, 0, received)


def _read_sets(connection: Any, count: int, head: bytes) -> tuple[bytes | None, bytes]:
    # `Exchange.read_sets`, and the bytes read past the replies; otherwise (None, b""), every byte read
    # (`head`, read past an earlier call's replies, included) left to the reader.
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


def _feed(connection: Any, data: bytes) -> bytes:  # b"": nothing left unfed
    if data:
        connection._parser._reader.feed(data)
    return b""


def _read_error(connection: Any, exc: OSError) -> Exception:
    if isinstance(exc, rex.RedisError):
        return exc
    try:
        where = str(connection._host_error())
    except Exception:
        where = "Redis"
    if isinstance(exc, TimeoutError):
        return rex.TimeoutError(f"Timeout reading from {where}")
    return rex.ConnectionError(f"Error while reading from {where}: {exc.args}")


def checkout(pool: Any) -> Any:
    """A connection from a redis-py pool, whatever the redis-py version."""
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3 requires a command name (and 5.3+ warns when given one)
        return pool.get_connection("EXECUTE")


class Exchange:
    """Commands sent and replies read on one connection (the caller's for the conversation), interleaved at
    will: replies in the order the commands were sent, raw, error replies in place. Every method raises
    redis-py's ConnectionError or TimeoutError for a failed send or read, its DataError for an argument of
    an unsupported type, and RuntimeError for more replies asked for than commands sent (a bug)."""

    __slots__ = ("connection", "tail", "unread")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.unread = 0
        #: Bytes `read_sets` read past its replies, not yet handed to the connection's reader.
        self.tail = b""

    def send(self, *batches: Sequence[Command]) -> None:
        data = self._pack(batches)
        self.unread += sum(map(len, batches))
        self._put(data)

    def read(self, count: int) -> list[Any]:
        self._due(count)
        self.tail = _feed(self.connection, self.tail)
        replies = self._get(count)
        self.unread -= count
        return replies

    def read_sets(self, count: int) -> bytes | None:
        """The next `count` replies in their RESP form when each is an array, set or map of bulk strings
        (SMEMBERS, HGETALL) and the compiled core can check them; None: read them with `read`."""
        self._due(count)
        tail = self.tail
        if tail and _scan_sets is not None:
            end, found, _ = _scan_sets(tail, 0, count)
            if found == count:  # read off the socket with earlier replies: the connection is not touched
                self.tail, self.unread = tail[end:], self.unread - count
                return tail[:end]
        raw, self.tail = _read_sets(self.connection, count, tail)
        if raw is not None:
            self.unread -= count
        return raw

    def round_trip(self, commands: Sequence[Command]) -> list[Any]:
        self.send(commands)
        return self.read(len(commands))

    def _due(self, count: int) -> None:
        if count > self.unread:
            raise RuntimeError(f"{count} replies asked for, {self.unread} due")

    # The I/O, which the asyncio exchange awaits and a cluster's exchange queues.
    def _pack(self, batches: Sequence[Sequence[Command]]) -> list[bytes]:
        return payload(self.connection, batches)

    def _put(self, data: list[bytes]) -> None:
        _SENDS[0] += 1
        self.connection.send_packed_command(data, check_health=False)

    def _get(self, count: int) -> list[Any]:
        return read(self.connection, count)
