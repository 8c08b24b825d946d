"""Commands in RESP, packed byte for byte as redis-py's packers write them, a run of one command at once."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt
import redis.exceptions as rex

__all__ = [
    "Arg",
    "ByteColumn",
    "Command",
    "CommandPerKey",
    "PackedCommands",
    "arrays",
    "pack",
    "pack_columns",
]

#: Arguments of many commands, one a row: a uint8 matrix, and how many bytes of each row are the
#: argument (None: all of them).
ByteColumn = tuple[npt.NDArray[np.uint8], "npt.NDArray[np.intp] | None"]

Arg = bytes | str | int | float
Command = Sequence[Arg]

_CRLF = b"\r\n"


class CommandPerKey(Sequence[tuple[bytes, ...]]):
    """The commands `(name, key)`, or `(name, key, field)` with one field, for each key.

    A sequence of those commands, so every sender accepts it; `pack` packs it with one join when the keys have
    equal length.
    """

    __slots__ = ("field", "keys", "name")

    def __init__(self, name: bytes, keys: list[bytes], field: bytes | None = None) -> None:
        self.name = name
        self.keys = keys
        self.field = field

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, i: int) -> tuple[bytes, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> CommandPerKey: ...

    def __getitem__(self, i: int | slice) -> tuple[bytes, ...] | CommandPerKey:
        if isinstance(i, slice):
            return CommandPerKey(self.name, self.keys[i], self.field)
        return self._command(self.keys[i])

    def __iter__(self) -> Iterator[tuple[bytes, ...]]:
        command = self._command
        for key in self.keys:
            yield command(key)

    def __repr__(self) -> str:
        field = "" if self.field is None else f", field {self.field!r}"
        return f"CommandPerKey({self.name!r}, {len(self.keys)} keys{field})"

    def _command(self, key: bytes) -> tuple[bytes, ...]:
        return (self.name, key) if self.field is None else (self.name, key, self.field)

    def packed(self) -> bytes:
        """The RESP form of all the commands."""
        keys = self.keys
        if not keys:
            return b""
        name, field = self.name, self.field
        if b" " in name:  # redis-py sends "SCRIPT LOAD" as two arguments: so do we
            return pack(list(self))
        # Every command is head + "$width\r\n" + key + "\r\n" + tail (the field, if any).
        head = b"*%d\r\n$%d\r\n%s\r\n" % (2 if field is None else 3, len(name), name)
        tail = b"" if field is None else b"$%d\r\n" % len(field) + field + _CRLF
        widths = set(map(len, keys))
        if len(widths) == 1:
            prefix = b"$%d\r\n" % widths.pop()
            return head + prefix + (_CRLF + tail + head + prefix).join(keys) + _CRLF + tail
        return b"".join([head + b"$%d\r\n" % len(key) + key + _CRLF + tail for key in keys])


class PackedCommands(CommandPerKey):
    """Commands packed once into their RESP form, which `pack` sends as is; iterating parses them back."""

    __slots__ = ("_count", "_resp")

    def __init__(self, resp: bytes, count: int) -> None:
        super().__init__(b"", [])
        self._resp, self._count = resp, count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> tuple[bytes, bytes]: ...

    @overload
    def __getitem__(self, i: slice) -> CommandPerKey: ...

    def __getitem__(self, i: int | slice) -> Any:
        return list(arrays(self._resp))[i]

    def __iter__(self) -> Iterator[Any]:
        return arrays(self._resp)

    def packed(self) -> bytes:
        """The RESP form of the commands."""
        return self._resp


def _encode(arg: Any) -> bytes:
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, bool):
        raise rex.DataError("Invalid input of type: 'bool'. Convert to a bytes, string, int or float first.")
    if isinstance(arg, int):
        return b"%d" % arg
    if isinstance(arg, float):
        return repr(arg).encode()
    if isinstance(arg, (bytearray, memoryview)):
        return bytes(arg)
    raise rex.DataError(
        f"Invalid input of type: '{type(arg).__name__}'. Convert to a bytes, string, int or float first."
    )


def pack(commands: Sequence[Command]) -> bytes:
    """The RESP form of the commands, byte for byte what redis-py's `pack_commands` sends.

    A command name with spaces, like b"SCRIPT LOAD", is split into arguments as redis-py does.

    Raises:
        redis.exceptions.DataError: an argument of another type (bool included).
    """
    if isinstance(commands, CommandPerKey):
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


_BULK = b"$%d\r\n%s\r\n"


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


def _bulk(arg: Any) -> bytes:
    raw = _encode(arg)
    return _BULK % (len(raw), raw)


def arrays(resp: bytes) -> Iterator[tuple[bytes, ...]]:
    """The arrays (or RESP3 sets) of bulk strings in a RESP payload: packed commands, or SMEMBERS replies.

    Raises:
        ValueError: the payload is not of that form.
    """
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
