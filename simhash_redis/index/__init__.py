"""The index floor: `SimhashIndex`, its MinHash-verified form, and its consistency check."""

from __future__ import annotations

from ..results import Match, Outcome
from .consistency import VerifyReport
from .lifecycle import drop_index, list_indexes
from .simhash_index import Document, SimhashIndex
from .verified_index import VerifiedIndex, VerifiedMatch

__all__ = [
    "Document",
    "Match",
    "Outcome",
    "SimhashIndex",
    "VerifiedIndex",
    "VerifiedMatch",
    "VerifyReport",
    "drop_index",
    "list_indexes",
]
