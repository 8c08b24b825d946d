"""What the write paths send besides their order: guards, writes, and their keys and arguments."""

from __future__ import annotations

from ..codec import decode_fp, decode_sketches, pack_fps
from ..transport import Command
from .keys import KeySchema
from .store import BAND_MEMBER
from .verification import Verification

__all__ = [
    "Guard",
    "Pending",
    "SketchedGuard",
    "Write",
    "band_args",
    "guard_args",
    "sketch_in",
    "table_calls",
]

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


def band_args(
    keys: KeySchema,
    mode: Verification | None,
    f: int,
    new: bytes,
    guard: SketchedGuard,
    key_list: list[bytes],
    args: list[bytes | int],
) -> int:
    places = keys.band_places(guard.sketch, mode) if new else []
    key_list.extend(key for key, _ in places)
    args.append(len(places))
    if places:
        args.append(pack_fps([new], f))
        args.extend(field for _, field in places)
    return len(places)


def guard_args(guard: Guard, tables: int, f: int) -> list[bytes | int]:
    """A guard's set sizes, then its members: the first `tables` sets' as read, the bands' packed."""
    args: list[bytes | int] = [len(members) for members in guard]
    for t, members in enumerate(guard):
        args.extend(members if t < tables else [pack_fps([member], f) for member in members])
    return args
