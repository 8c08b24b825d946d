"""simhash-redis: near-duplicate detection with SimHash fingerprints in a shared Redis Hamming index.

>>> from simhash_redis import SimhashIndex
>>> index = SimhashIndex.from_url("redis://127.0.0.1:6379/0", name="news", k=3)  # doctest: +SKIP
>>> index.add("doc-1", "text of a document")  # doctest: +SKIP
>>> index.near("text of a document")  # doctest: +SKIP
[Match(id='doc-1', fingerprint=..., distance=0)]
"""

from __future__ import annotations

from .errors import (
    ConfigurationMismatch,
    IndexCorrupted,
    IndexNotFound,
    InputError,
    InvalidArgument,
    InvalidFingerprint,
    InvalidType,
    RedisAuthError,
    RedisOutOfMemory,
    RedisPermissionError,
    RedisTimeout,
    RedisUnavailable,
    SimhashRedisError,
    TooManyErrors,
    WriteContention,
)
from .fingerprinting import (
    BandedOddSketcher,
    MinHasher,
    Scheme,
    distance,
    engine,
    fingerprint,
    fingerprint_many,
)
from .index.lifecycle import drop_index
from .index.report import VerifyReport
from .index.simhash_index import Document, Match, Outcome, SimhashIndex
from .index.verified_index import VerifiedIndex, VerifiedMatch
from .store.config import Retention
from .store.layout import Layout
from .tools.connect import open_index
from .transport import Backoff
from .transport.connection import redact_url

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "BandedOddSketcher",
    "ConfigurationMismatch",
    "Document",
    "IndexCorrupted",
    "IndexNotFound",
    "InputError",
    "InvalidArgument",
    "InvalidFingerprint",
    "InvalidType",
    "Layout",
    "Match",
    "MinHasher",
    "Outcome",
    "RedisAuthError",
    "RedisOutOfMemory",
    "RedisPermissionError",
    "RedisTimeout",
    "RedisUnavailable",
    "Retention",
    "Scheme",
    "SimhashIndex",
    "SimhashRedisError",
    "TooManyErrors",
    "VerifiedIndex",
    "VerifiedMatch",
    "VerifyReport",
    "WriteContention",
    "__version__",
    "distance",
    "drop_index",
    "engine",
    "fingerprint",
    "fingerprint_many",
    "open_index",
    "redact_url",
]
