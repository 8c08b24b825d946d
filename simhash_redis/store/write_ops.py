"""The writes a batch is made of: (id, new stored fingerprint or b'' to remove, guard), the guards of
add-if-new, and the outcomes the write scripts report.

The guard, used by add-if-new, lists the members the client read from each of the new fingerprint's
table sets; a guarded document is only written while those sets are unchanged (its outcome is None
otherwise, and the caller reads again). In verified mode the guard also carries the document's sketch
(`SketchedGuard`), which is set with the document, or not at all.
"""

from __future__ import annotations

from typing import Any

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
    "outcome_of",
    "round_trip",
    "too_many",
]

#: The members read from each table set of a document's fingerprint.
Guard = list[list[bytes]]


class SketchedGuard(list[list[bytes]]):
    """A guard that also carries the document's sketch, stored with the document (beside its id in the
    fingerprint map: `KeySchema.sketch_field`).

    Args:
        members: the members read from each table set; None for a sketch without a guard.
        sketch: the sketch; b"" stores the document without one (any sketch its id had goes).
    """

    def __init__(self, members: Guard | None, sketch: bytes) -> None:
        super().__init__(members or [])
        self.checks = members is not None
        self.sketch = sketch


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


def outcome_of(status: bytes, old: bytes) -> Outcome:
    """A document's outcome from its status in the write script's reply.

    Args:
        status: the status ('a', 'r', 'u', 'd' or 'n').
        old: the fingerprint the call believed the id had.
    """
    # A removal that finds nothing to remove, after an earlier round saw the id present, was done by
    # that earlier attempt of ours whose reply was lost and resent.
    if status == b"n" and old:
        return Outcome.REMOVED
    return _OUTCOMES[status]


def too_many(count: int) -> WriteContention:
    """The error of documents that kept changing under concurrent writers.

    Args:
        count: how many.
    """
    return WriteContention(
        f"{count} documents kept changing under concurrent writers; nothing of them was written"
    )
