"""The writes a batch is made of (id, new stored fingerprint or b'' to remove, guard), and their outcomes.

A guard (add-if-new's) lists the members read from each of the new fingerprint's table sets; a guarded
document is only written while those sets are unchanged (else its outcome is None: read again).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..codec import decode_sketches
from ..errors import WriteContention
from ..results import Outcome
from ..transport import READ, SEND, Command, Steps

__all__ = [
    "CONFLICT_ROUNDS",
    "PART",
    "Guard",
    "Pending",
    "SketchedGuard",
    "Write",
    "in_parts",
    "outcome_of",
    "parts_of",
    "round_trip",
    "sketch_in",
    "too_many",
]

T = TypeVar("T")

#: The members read from each table set of a document's fingerprint.
Guard = list[list[bytes]]


class SketchedGuard(list[list[bytes]]):
    """A guard that also carries the document's sketch, set with the document or not at all.

    `members` None: no guard; `sketch` b"": stored without one. `windows`: the periods the members were
    read from (a `WindowedSets`'); `moving`: a sliding window's move, which sets the sketch only with it.
    """

    def __init__(self, members: Guard | None, sketch: bytes, *, moving: bool = False) -> None:
        super().__init__(members or [])
        self.checks = members is not None
        self.sketch = sketch
        self.windows: tuple[int, ...] | None = getattr(members, "windows", None)
        self.moving = moving


Write = tuple[bytes, bytes, Guard | None]
#: A document of a round: its position in the batch, id, new and old fingerprints, guard.
Pending = tuple[int, bytes, bytes, bytes, Guard | None]

_OUTCOMES = {
    b"a": Outcome.ADDED,
    b"r": Outcome.REPLACED,
    b"u": Outcome.UNCHANGED,
    b"d": Outcome.REMOVED,
    b"n": Outcome.MISSING,
}
#: Documents per script call of a large batch of adds sent as parts.
PART = 250
#: Attempts at a write whose documents keep changing under it.
CONFLICT_ROUNDS = 16


def round_trip(commands: list[Command]) -> Steps[list[Any]]:
    """Steps that send commands and read their replies (none for no command)."""
    if not commands:
        return []
    yield SEND, [commands]
    replies: list[Any] = yield READ, len(commands)
    return replies


def parts_of(docs: Sequence[T], plain: bool) -> list[Sequence[T]]:
    """A round's documents as its script calls': one call, or parts of `PART` for 2 x `PART` plain adds."""
    part = PART  # read at each call: tests make it small
    if plain and len(docs) >= 2 * part:
        return [docs[i : i + part] for i in range(0, len(docs), part)]
    return [docs]


def in_parts(
    count: int,
    call: Callable[[int], Command],
    acked: list[Any],
    refused: Callable[[Any], bool] = lambda _: False,
) -> Steps[None]:
    """A round's script calls, one in flight, from the first not in `acked`, each built while the server
    runs the one before; a reply `refused` stops the round."""
    if len(acked) == count or (acked and refused(acked[-1])):
        return
    yield SEND, [[call(len(acked))]]
    while True:
        following = len(acked) + 1
        prepared = call(following) if following < count else None
        acked.append((yield READ, 1)[0])
        if prepared is None or refused(acked[-1]):
            return
        yield SEND, [[prepared]]


def outcome_of(status: bytes, old: bytes) -> Outcome:
    """A document's outcome from its status in the write script's reply."""
    # A removal that finds nothing to remove, after an earlier round saw the id present, was done by
    # that earlier attempt of ours whose reply was lost and resent.
    if status == b"n" and old:
        return Outcome.REMOVED
    return _OUTCOMES[status]


def sketch_in(stored: bytes | None, doc_id: bytes) -> bytes | None:
    """The sketch of `doc_id` in a stored sketches field; None where none or malformed (verify reports it)."""
    try:
        return decode_sketches(bytes(stored)).get(doc_id.decode()) if stored else None
    except ValueError:
        return None


def too_many(count: int) -> WriteContention:
    """The error of documents that kept changing under concurrent writers."""
    return WriteContention(
        f"{count} documents kept changing under concurrent writers; nothing of them was written"
    )
