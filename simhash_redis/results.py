"""What the index returns: matches of a lookup and outcomes of a write."""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["Match", "Outcome", "VerifiedMatch", "duplicate_of"]


class Match(NamedTuple):
    """A stored document within the query's distance."""

    id: str
    fingerprint: int
    distance: int


class VerifiedMatch(NamedTuple):
    """A stored document confirmed as a near-duplicate: id, fingerprint, distance, estimated Jaccard."""

    id: str
    fingerprint: int
    distance: int
    jaccard: float


class Outcome(str, enum.Enum):
    """What a write did to one document id."""

    ADDED = "added"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"
    REMOVED = "removed"
    MISSING = "missing"


def duplicate_of(doc_id: str, matches: list[Match]) -> Match | None:
    """The stored near-duplicate to report among a document's matches: its own entry, else the nearest."""
    return next((m for m in matches if m.id == doc_id), matches[0] if matches else None)
