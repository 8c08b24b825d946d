"""What the write paths send besides their order: guards, writes, their commands (`write_command`), and
how a round's replies and conflicts are read."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar, cast

from ..codec import decode_fp, decode_sketches, pack_fps
from ..results import Outcome
from ..transport import Command, pause
from .keys import KeySchema
from .store import BAND_MEMBER, WRITE
from .verification import Verification
from .windows import View, WindowedSets, Windows

__all__ = [
    "CONFLICT_ROUNDS",
    "Guard",
    "InPeriod",
    "Pending",
    "SketchedGuard",
    "Write",
    "conflict_pause",
    "conflict_paused",
    "outcome_of",
    "sketch_in",
    "table_calls",
    "windows_of",
    "write_command",
]

T = TypeVar("T")

#: The members read from each table set of a document's fingerprint.
Guard = list[list[bytes]]


class SketchedGuard(list[list[bytes]]):
    """A guard that also carries the document's sketch, set with the document or not at all (`members`
    None: no guard; `sketch` b"": none; `moving`: a sliding window's move)."""

    def __init__(self, members: Guard | None, sketch: bytes, *, moving: bool = False) -> None:
        super().__init__(members or [])
        self.checks = members is not None
        self.sketch = sketch
        self.windows: tuple[int, ...] | None = getattr(members, "windows", None)
        self.moving = moving


Write = tuple[bytes, bytes, Guard | None]
#: A document of a round: its position in the batch, id, new and old fingerprints, guard.
Pending = tuple[int, bytes, bytes, bytes, Guard | None]
#: A document of a round with a retention window: `Pending`, old's period (0: none known) before its guard.
InPeriod = tuple[int, bytes, bytes, bytes, int, Guard | None]

_OUTCOMES = {
    b"a": Outcome.ADDED,
    b"r": Outcome.REPLACED,
    b"u": Outcome.UNCHANGED,
    b"d": Outcome.REMOVED,
    b"n": Outcome.MISSING,
}
#: Attempts at a write whose documents keep changing under it (16 were too few for 12 tasks on one id).
CONFLICT_ROUNDS = 32


def outcome_of(status: bytes, old: bytes) -> Outcome:
    # A removal that finds nothing to remove, after an earlier round saw the id present, was done by
    # that earlier attempt of ours whose reply was lost and resent.
    if status == b"n" and old:
        return Outcome.REMOVED
    return _OUTCOMES[status]


def conflict_pause(conflicts: int) -> None:
    """Pause before a round after `conflicts` rounds in conflict: none after the first, then a random one,
    growing (tasks of one event loop run in lockstep: a random pause breaks the step)."""
    if conflict_paused(conflicts):
        pause(random.uniform(0, min(0.05, 0.0005 * 2.0**conflicts)))


def conflict_paused(conflicts: int) -> bool:
    return conflicts >= 2


def sketch_in(stored: bytes | None, doc_id: bytes) -> bytes | None:
    """The sketch of `doc_id` in a stored sketches field; None where none or malformed (verify reports it)."""
    try:
        return decode_sketches(bytes(stored)).get(doc_id.decode()) if stored else None
    except ValueError:
        return None


def table_calls(
    keys: KeySchema, f: int, new: bytes, sketch: bytes, mode: Verification | None, expire: int | None = None
) -> list[Command]:
    """A cluster's first step for a new stored fingerprint: into its tables and its sketch's band values."""
    tail = [] if expire is None else [expire]
    calls: list[Command] = []
    for key in keys.tables(decode_fp(new, f)):
        calls += [(b"SADD", key, new)] + [(b"PEXPIREAT", key, *tail)] * len(tail)
    packed = pack_fps([new], f)
    calls += [
        BAND_MEMBER.command([key], [b"+", field, packed, *tail])
        for key, field in keys.band_places(sketch, mode)
    ]
    return calls


def write_command(
    into: KeySchema | tuple[Windows, View],
    f: int,
    tables: int,
    pending: Sequence[Pending] | Sequence[InPeriod],
    record: bytes,
    verification: Verification | None = None,
) -> Command:
    """A call of write.lua, its reply kept under `record`: format '' into an index's keys, or with a
    retention window format 'w' against a view's periods (`pending`: `InPeriod` documents)."""
    if isinstance(into, KeySchema):
        schemas: tuple[KeySchema, ...] = (into,)
        numbers: tuple[int, ...] = ()
        here, keys = 1, [into.counts]
        args: list[bytes | int] = [tables, b""]
    else:
        windows, view = into
        schemas, numbers = view.schemas, view.windows
        here = numbers.index(view.current) + 1
        keys = [schema.counts for schema in schemas]
        args = [tables, b"w", windows.period_ms, windows.retention_ms, len(numbers), here, *numbers]
    current = schemas[here - 1]
    for doc in pending:
        doc_id, new, old, guard = doc[1], doc[2], doc[3], doc[-1]
        if not numbers:
            keys.append(current.id_bucket(doc_id))
            where = 1 if old else 0
        else:
            keys += view.id_keys(doc_id)
            old_window = cast(int, doc[4])
            where = numbers.index(old_window) + 1 if old and old_window in numbers else 0
        if new:
            keys.append(current.fp_bucket(new))
            keys.extend(current.tables(decode_fp(new, f)))
        if not where:  # its period expired since: the script finds the id
            old = b""
        elif old != new or where != here:
            keys.append(schemas[where - 1].fp_bucket(old))
            keys.extend(schemas[where - 1].tables(decode_fp(old, f)))
        sketched = guard if isinstance(guard, SketchedGuard) else None
        sketch = b"" if sketched is None else sketched.sketch
        if sketched is None:
            kind = b"" if guard is None else b"1"
        else:  # verified mode
            kind = b"m" if sketched.moving else b"s" if sketched.checks else b"k"
        args.extend((doc_id, new, old, kind) if not numbers else (doc_id, new, old, where or b"", kind))
        bands = 0
        if sketched is not None:  # the band places of its sketch, the fingerprint packed, their fields
            places = current.band_places(sketch, verification) if new else []
            keys.extend(key for key, _ in places)
            args.append(bands := len(places))
            if places:
                args += [pack_fps([new], f), *[field for _, field in places]]
        if guard is not None and (sketched is None or sketched.checks):
            # Without a window the guard's sets are the new fingerprint's tables, whose keys are sent already.
            read = None if not numbers else windows_of(guard) if sketched is None else sketched.windows or ()
            count = 1 if read is None else len(read)
            if (read is not None or sketched is not None) and len(guard) != count * (tables + bands):
                # Any other count would shift every later document's arguments.
                sets = f"{tables} tables" if read is None else f"{count} periods of {tables} tables"
                raise ValueError(f"a guard of {len(guard)} sets, for {sets} + {bands} bands")
            if read is not None:
                fp = decode_fp(new, f)
                for window in read:
                    keys.extend(windows.schema(window).tables(fp))
                for window in read if sketched is not None else ():
                    keys.extend(key for key, _ in windows.schema(window).band_places(sketch, verification))
                args.append(len(guard))
            # Its set sizes, then its members: the tables' as read, the bands' packed.
            args.extend(len(members) for members in guard)
            for t, members in enumerate(guard):
                args.extend(members if t < tables * count else [pack_fps([one], f) for one in members])
        if sketched is not None:
            args.append(sketch)
    keys.append(record)
    return WRITE.command(keys, args)


def windows_of(guard: Guard) -> tuple[int, ...]:
    """The periods a guard of an index with a retention window read (TypeError: not a `WindowedSets`)."""
    if not isinstance(guard, WindowedSets):
        raise TypeError("a guard of an index with a retention window comes from its reads (WindowedSets)")
    return guard.windows
