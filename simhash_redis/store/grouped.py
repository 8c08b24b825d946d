"""The bulk path's grouped commands (one per key, with every entry of a window for that key), sent in
chunks, two in flight; packed into RESP by the compiled core or here alike, argument tuples on a cluster."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..codec import netstring
from ..fingerprinting import engine_choice
from ..transport import READ, SEND, Command, Steps
from ..transport.wire import PackedCommands
from .keys import KeyForm, KeySchema
from .store import Store

__all__ = ["Column", "Groups", "NativeColumn", "attach_calls", "commands", "group", "send_step"]

#: Arguments per write of a step: round trips do not count, and the client builds the next meanwhile.
CHUNK_ARGS = 16_384
IN_FLIGHT = 2
BULK = b"$%d\r\n%b\r\n"
#: A command of a step: its number of arguments, and its RESP bytes in parts, or on a cluster its arguments.
Piece = tuple[int, Any]


def send_step(store: Store, parts: Iterator[Sequence[Command]], *, keep: bool, durable: bool) -> list[Any]:
    """Send a step's chunks of commands in order; their replies if `keep`."""
    stream = Stream(parts, keep, 1 if store.cluster else IN_FLIGHT)
    store.run(stream.steps, durable=durable)
    return stream.replies


class Stream:
    """A step's chunks as steps without I/O, some in flight, resumed at the first unacknowledged one."""

    def __init__(self, chunks: Iterator[Sequence[Command]], keep: bool, in_flight: int) -> None:
        self.chunks, self.keep, self.in_flight = chunks, keep, in_flight
        self.built: list[Sequence[Command] | None] = []
        self.acked = 0
        self.replies: list[Any] = []

    def chunk(self, i: int) -> Sequence[Command] | None:
        while len(self.built) <= i:
            following = next(self.chunks, None)
            if following is None:
                return None
            self.built.append(following)
        return self.built[i]

    def steps(self) -> Steps[None]:
        flight: deque[Sequence[Command]] = deque()
        while True:
            while len(flight) < self.in_flight:
                following = self.chunk(self.acked + len(flight))
                if following is None:
                    break
                yield SEND, [following]
                flight.append(following)
            if not flight:
                return
            replies = yield READ, len(flight.popleft())
            if self.keep:
                self.replies.extend(replies)
            self.built[self.acked] = None
            self.acked += 1


def chunks(pieces: Iterator[Piece], packed: bool) -> Iterator[Sequence[Command]]:
    parts: list[Any] = []
    args = commands = 0
    for count, piece in pieces:
        if packed:
            parts.extend(piece)
        else:
            parts.append(piece)
        args += count
        commands += 1
        if args >= CHUNK_ARGS:
            yield PackedCommands(b"".join(parts), commands) if packed else parts
            parts, args, commands = [], 0, 0
    if parts:
        yield PackedCommands(b"".join(parts), commands) if packed else parts


def _piece(args: Sequence[bytes], units: Sequence[Any], packed: bool) -> Piece:
    count = len(args) + len(units)
    if not packed:
        return count, (*args, *units)
    return count, [b"*%d\r\n" % count, *[BULK % (len(arg), arg) for arg in args], *units]


#: A column as the compiled core takes it: (entries, their ends as uint64 bytes), or (fingerprints, signed).
NativeColumn = tuple[bytes, bytes] | tuple[bytes, bool]


class Groups(NamedTuple):
    """Window positions grouped by key: positions in group order, group bounds, key values, key form."""

    rows: npt.NDArray[np.intp]
    bounds: npt.NDArray[np.int64]
    heads: npt.NDArray[np.uint64]
    form: KeyForm

    def spans(self) -> Iterator[tuple[int, int, int]]:
        bounds = self.bounds.tolist()
        for j, head in enumerate(self.heads.tolist()):
            yield head, bounds[j], bounds[j + 1]


def group(column: npt.NDArray[Any], rows: npt.NDArray[Any], form: KeyForm) -> Groups:
    values = column[rows]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    if not len(ordered):
        return Groups(np.zeros(0, dtype=np.intp), np.zeros(1, dtype=np.int64), np.zeros(0, np.uint64), form)
    bounds = np.concatenate(([0], starts, [len(ordered)])).astype(np.int64)
    heads = ordered[bounds[:-1]].astype(np.uint64)
    return Groups(np.asarray(rows[order], dtype=np.intp), bounds, heads, form)


class Column:
    """One entry per window position, as bytes (`raw`) or in the compiled core's form (`native`: 8 bytes a
    fingerprint, not 20), each built from the other on first use."""

    def __init__(self, raw: list[bytes] | None = None, native: NativeColumn | None = None) -> None:
        self._raw, self._native = raw, native
        self._objects: npt.NDArray[Any] | None = None
        self._bulks: npt.NDArray[Any] | None = None

    @classmethod
    def of_fingerprints(cls, fps: Sequence[int] | npt.NDArray[Any], f: int) -> Column:
        if f > 64:
            return cls([b"%d" % int(fp) for fp in fps])
        arr = np.asarray(fps, dtype=np.uint64)
        if engine_choice.native is not None:
            return cls(native=(arr.tobytes(), f == 64))
        return cls([b"%d" % fp for fp in (arr.view(np.int64) if f == 64 else arr).tolist()])

    @property
    def raw(self) -> list[bytes]:
        if self._raw is None:
            assert self._native is not None and engine_choice.native is not None  # made only by the core
            self._raw = engine_choice.native.unpack_column(self._native)
        return self._raw

    def native(self) -> NativeColumn:
        if self._native is None:
            if engine_choice.native is None:
                raise RuntimeError("this form needs the compiled core")
            self._native = engine_choice.native.pack_column(self.raw)
        return self._native

    def buckets(self, keys: KeySchema) -> npt.NDArray[Any]:
        if engine_choice.native is not None:
            return keys.native_bucket_numbers(self.native())
        return keys.bucket_numbers(self.raw)

    def objects(self) -> npt.NDArray[Any]:
        if self._objects is None:
            self._objects = _objects(self.raw)
        return self._objects

    def bulks(self) -> npt.NDArray[Any]:
        if self._bulks is None:
            self._bulks = _objects([BULK % (len(raw), raw) for raw in self.raw])
        return self._bulks


def commands(
    head: tuple[bytes, ...], groups: Groups, columns: Sequence[Column], packed: bool
) -> Iterator[Sequence[Command]]:
    """For each group, `head`, its key, then each position's entry of every column, in chunks."""
    native = engine_choice.native
    if packed and native is not None:
        found = native.GroupedCommands(
            b"".join([BULK % (len(arg), arg) for arg in head]),
            len(head),
            (groups.form.prefix, groups.form.hex_width),
            _numbers(groups),
            [column.native() for column in columns],
            CHUNK_ARGS,
        )
        return _packed(found)

    def pieces() -> Iterator[Piece]:
        per, rows, key_of = len(columns), groups.rows, groups.form.key
        if not packed:
            units = _interleaved([column.objects()[rows] for column in columns])
            for value, start, end in groups.spans():
                yield _piece((*head, key_of(value)), units[start * per : end * per], False)
            return
        # Packed here rather than by `_piece`: a step of these has the most commands, and the shortest.
        gathered = [column.bulks()[rows].tolist() for column in columns]
        joined = gathered[0] if per == 1 else [b"".join(parts) for parts in zip(*gathered, strict=True)]
        prefix = b"".join([BULK % (len(arg), arg) for arg in head])
        fixed = len(head) + 1
        for value, start, end in groups.spans():
            key = key_of(value)
            count = fixed + (end - start) * per
            piece = joined[start:end]
            piece.insert(0, b"*%d\r\n%b$%d\r\n%b\r\n" % (count, prefix, len(key), key))
            yield count, piece

    return chunks(pieces(), packed)


def script_runs(
    sha: bytes,
    counts: bytes | None,
    groups: Groups,
    columns: Sequence[Column],
    call_entries: int,
    packed: bool,
) -> Iterator[Sequence[Command]]:
    """Calls of a script on runs of groups of about `call_entries` positions: the keys (then `counts`), and
    per group its size, then each position's entry of every column; in chunks."""
    native = engine_choice.native
    if packed and native is not None:
        found = native.ScriptRuns(
            sha,
            counts,
            (groups.form.prefix, groups.form.hex_width),
            _numbers(groups),
            [column.native() for column in columns],
            call_entries,
            CHUNK_ARGS,
        )
        return _packed(found)

    def pieces() -> Iterator[Piece]:
        per, key_of, tail = len(columns), groups.form.key, [] if counts is None else [counts]
        gather = Column.bulks if packed else Column.objects
        units = _interleaved([gather(column)[groups.rows] for column in columns])
        spans = list(groups.spans())
        start = 0
        while start < len(spans):
            end, entries = start + 1, spans[start][2] - spans[start][1]
            while end < len(spans) and entries < call_entries:
                entries += spans[end][2] - spans[end][1]
                end += 1
            keys = [key_of(value) for value, _, _ in spans[start:end]] + tail
            argv: list[Any] = []
            for _, first, last in spans[start:end]:
                size = b"%d" % (last - first)
                argv += [BULK % (len(size), size) if packed else size, *units[first * per : last * per]]
            yield _piece([b"EVALSHA", sha, b"%d" % len(keys), *keys], argv, packed)
            start = end

    return chunks(pieces(), packed)


def attach_calls(
    sha: bytes,
    counts: bytes | None,
    groups: Groups,
    fps: Column,
    ids: Column,
    joined: dict[int, bytes],
    call_pairs: int,
    packed: bool,
) -> Iterator[Sequence[Command]]:
    """The calls of lua/bulk_fp.lua on runs of about `call_pairs` fingerprints, in chunks: each id's
    netstring is its fingerprint's id list, but at `joined`'s positions (ids sharing a fingerprint)."""
    native = engine_choice.native
    if packed and native is not None:
        found = native.AttachCalls(
            sha,
            counts,
            groups.form.prefix,
            _numbers(groups),
            fps.native(),
            ids.native(),
            joined,
            call_pairs,
            CHUNK_ARGS,
        )
        return _packed(found)

    def pieces() -> Iterator[Piece]:
        lists = [joined[p] if p in joined else netstring(ids.raw[p]) for p in groups.rows.tolist()]
        if packed:
            lists = [BULK % (len(one), one) for one in lists]
        stored = (Column.bulks if packed else Column.objects)(fps)[groups.rows].tolist()
        keys: list[bytes] = []
        argv: list[Any] = []
        pairs = 0
        spans = list(groups.spans())
        for j, (value, start, end) in enumerate(spans):
            # A size per group, each fingerprint, then each (fingerprint, its id list) pair.
            keys.append(groups.form.key(value))
            size = b"%d" % (end - start)
            argv += [BULK % (len(size), size) if packed else size, *stored[start:end]]
            argv += [unit for pair in zip(stored[start:end], lists[start:end], strict=True) for unit in pair]
            pairs += end - start
            if pairs >= call_pairs or j == len(spans) - 1:
                named = keys if counts is None else [*keys, counts]
                yield _piece([b"EVALSHA", sha, b"%d" % len(named), *named], argv, packed)
                keys, argv, pairs = [], [], 0

    return chunks(pieces(), packed)


def _packed(found: Iterator[tuple[bytes, int]]) -> Iterator[Sequence[Command]]:
    return (PackedCommands(data, count) for data, count in found)


def _numbers(groups: Groups) -> tuple[bytes, bytes, bytes]:
    heads = groups.heads.astype(np.uint64).tobytes()
    return heads, groups.bounds.astype(np.int64).tobytes(), groups.rows.astype(np.int64).tobytes()


def _interleaved(parts: list[npt.NDArray[Any]]) -> list[Any]:
    """Equal-length arrays as one flat list: a0, b0, a1, b1, ..."""
    if len(parts) == 1:
        single: list[Any] = parts[0].tolist()
        return single
    table = np.empty((len(parts[0]), len(parts)), dtype=object)
    for c, part in enumerate(parts):
        table[:, c] = part
    flat: list[Any] = table.ravel().tolist()
    return flat


def _objects(items: list[Any]) -> npt.NDArray[Any]:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out
