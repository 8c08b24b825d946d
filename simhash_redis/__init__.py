"""simhash-redis: near-duplicate detection with SimHash fingerprints in a shared Redis Hamming index.

>>> from simhash_redis import SimhashIndex
>>> index = SimhashIndex.from_url("redis://127.0.0.1:6379/0", name="news", k=3)  # doctest: +SKIP
>>> index.add("doc-1", "text of a document")  # doctest: +SKIP
>>> index.near("text of a document")  # doctest: +SKIP
[Match(id='doc-1', fingerprint=..., distance=0)]
"""

from __future__ import annotations

from .connection import redact_url
from .errors import (
    ConfigurationMismatch,
    IndexCorrupted,
    InputError,
    InvalidArgument,
    InvalidFingerprint,
    InvalidType,
    RedisAuthError,
    RedisOutOfMemory,
    RedisTimeout,
    RedisUnavailable,
    SimhashRedisError,
)
from .fingerprint import distance, fingerprint, fingerprint_many
from .index import Document, Match, Outcome, SimhashIndex
from .layout import Layout
from .retry import Backoff
from .scheme import Scheme
from .verified import VerifiedIndex
from .verify import VerifyReport

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "ConfigurationMismatch",
    "Document",
    "IndexCorrupted",
    "InputError",
    "InvalidArgument",
    "InvalidFingerprint",
    "InvalidType",
    "Layout",
    "Match",
    "Outcome",
    "RedisAuthError",
    "RedisOutOfMemory",
    "RedisTimeout",
    "RedisUnavailable",
    "Scheme",
    "SimhashIndex",
    "SimhashRedisError",
    "VerifiedIndex",
    "VerifyReport",
    "__version__",
    "distance",
    "fingerprint",
    "fingerprint_many",
    "redact_url",
]
