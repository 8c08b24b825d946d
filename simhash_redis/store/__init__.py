"""The store floor: an index's Redis half — key names, layout, configuration, reads, writes, locks."""

from __future__ import annotations

from .bulk import BulkWrites
from .config import IndexConfig, Retention
from .keys import KeySchema, encode_id, validate_name
from .layout import Layout
from .locks import BucketLocks
from .meta import find_data, open_meta, pin_meta, read_meta, restore_meta
from .reads import Reads
from .store import Store, drop_keys, hash_pairs
from .verification import Verification
from .windows import Windows
from .write_args import Guard, SketchedGuard, Write
from .writes import Writes

__all__ = [
    "BucketLocks",
    "BulkWrites",
    "Guard",
    "IndexConfig",
    "KeySchema",
    "Layout",
    "Reads",
    "Retention",
    "SketchedGuard",
    "Store",
    "Verification",
    "Windows",
    "Write",
    "Writes",
    "drop_keys",
    "encode_id",
    "find_data",
    "hash_pairs",
    "open_meta",
    "pin_meta",
    "read_meta",
    "restore_meta",
    "validate_name",
]
