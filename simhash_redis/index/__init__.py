"""The index floor: `SimhashIndex`, its MinHash-verified form, and its consistency check."""

from __future__ import annotations

from ..results import Match, Outcome
from .lifecycle import drop_index, list_indexes
from .report import VerifyReport
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
