"""The store floor: an index's Redis half — key names, layout, configuration, reads, writes, locks."""

from __future__ import annotations

from .bulk import BulkWrites
from .config import IndexConfig
from .keys import KeySchema, encode_id, validate_name
from .layout import Layout
from .locks import BucketLocks
from .reads import Reads
from .store import Store, hash_pairs, open_meta
from .writes import Write, Writes, writes_for

__all__ = [
    "BucketLocks",
    "BulkWrites",
    "IndexConfig",
    "KeySchema",
    "Layout",
    "Reads",
    "Store",
    "Write",
    "Writes",
    "encode_id",
    "hash_pairs",
    "open_meta",
    "validate_name",
    "writes_for",
]
