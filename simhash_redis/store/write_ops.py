"""The writes a batch is made of: (id, new stored fingerprint or b'' to remove, guard), the guards of
add-if-new, and the outcomes the write scripts report.

The guard, used by add-if-new, lists the members the client read from each of the new fingerprint's
table sets; a guarded document is only written while those sets are unchanged (its outcome is None
otherwise, and the caller reads again). In verified mode the guard also carries the document's sketch
(`SketchedGuard`), which is set with the document, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

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
    "too_many",
]

T = TypeVar("T")

#: The members read from each table set of a document's fingerprint.
Guard = list[list[bytes]]


class SketchedGuard(list[list[bytes]]):
    """A guard that also carries the document's sketch, stored with the document (beside its id in the
    fingerprint map: `KeySchema.sketch_field`). `members` None: no guard; `sketch` b"": the document is
    stored without one (any sketch its id had goes). In an index with a retention window, `windows` are
    the periods the members were read from (a `WindowedSets`'); `moving`, a sliding window's move, sets
    the sketch only with a move into the current period.
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
#: Documents per script call when a large batch of adds is sent as parts, each built while the server runs
#: the one before.
PART = 250
#: Attempts at a write whose documents keep changing under it (other workers replacing the same ids).
CONFLICT_ROUNDS = 16


def round_trip(commands: list[Command]) -> Steps[list[Any]]:
    """Steps that send commands and read their replies (none for no command)."""
    if not commands:
        return []
    yield SEND, [commands]
    replies: list[Any] = yield READ, len(commands)
    return replies


def parts_of(docs: Sequence[T], plain: bool) -> list[Sequence[T]]:
    """The documents of a round as the documents of its script calls: one call, or, for a large batch
    of plain adds (500 or more, no guard, no replacement known), parts of `PART`.
    """
    part = PART  # read at each call: one knob for every write path (tests make it small)
    if plain and len(docs) >= 2 * part:
        return [docs[i : i + part] for i in range(0, len(docs), part)]
    return [docs]


def in_parts(
    count: int,
    call: Callable[[int], Command],
    acked: list[Any],
    refused: Callable[[Any], bool] = lambda _: False,
) -> Steps[None]:
    """A round's script calls, one at a time, from the first not acknowledged: each sent as soon as the
    one before is answered, and built while the server runs that one (the client's work overlaps the
    server's); each as atomic as a batch of its size. `acked` keeps the replies acknowledged across new
    starts of the conversation; a reply `refused` stops the round.
    """
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


def too_many(count: int) -> WriteContention:
    """The error of documents that kept changing under concurrent writers."""
    return WriteContention(
        f"{count} documents kept changing under concurrent writers; nothing of them was written"
    )
