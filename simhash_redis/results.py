"""What the index returns: matches of a lookup and outcomes of a write."""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["Match", "Outcome"]


class Match(NamedTuple):
    """A stored document within the query's distance."""

    id: str
    fingerprint: int
    distance: int


class Outcome(str, enum.Enum):
    """What a write did to one document id."""

    ADDED = "added"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"
    REMOVED = "removed"
    MISSING = "missing"
