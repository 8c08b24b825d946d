"""The compiled core (`simhash_redis_native`, built from ``native/``): the one module that imports it.
ImportError when the core is missing, or older than this package (the callers then run without it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import simhash_redis_native as _native

from .errors import InvalidArgument, InvalidType

if TYPE_CHECKING:
    from simhash_redis_native import PreparedDoc as PreparedDoc

__all__ = [
    "TOKENS",
    "WEIGHTED",
    "AttachCalls",
    "Engine",
    "GroupedCommands",
    "Lane",
    "MinHash",
    "OddSketch",
    "ScriptRuns",
    "Unicode",
    "check_tokens",
    "column_buckets",
    "fingerprint_lines",
    "fingerprint_packed_texts",
    "fingerprint_stored_many",
    "fingerprint_text_lines",
    "hash_values",
    "hits",
    "hits_in_sets",
    "odd_estimate",
    "pack_column",
    "scan_sets",
    "sketch_text_lines",
    "unpack_column",
]

# Methods added to a class after its first release, as "Class.method".
_METHODS = ("OddSketch.banded_many", "OddSketch.banded_stored_many")
_missing = next((name for name in __all__ if not hasattr(_native, name)), None) or next(
    (name for name in _METHODS if not hasattr(getattr(_native, name.split(".")[0]), name.split(".")[1])),
    None,
)
_why = None if _missing is None else f"no {_missing}"
if _why is None:
    # The odd sketch's estimator changed without a new name: 27 shingles each, 6 bits apart, is 0.8 here.
    _size = (27).to_bytes(2, "little")
    if _native.odd_estimate(bytes(126) + _size, b"\xfc" + bytes(125) + _size) != 0.8:
        _why = "its odd_estimate is not rounded"
    elif _native.odd_estimate(bytes(128), bytes(128)) != 1.0:  # two empty sets: 0 before this release
        _why = "its odd_estimate of two empty sets is not 1"
if _why is not None:
    raise ImportError(
        f"simhash_redis_native is older than this simhash-redis ({_why}): upgrade it, or rebuild it "
        "from this checkout (`pip install ./native`)"
    )

_native.set_error_types(InvalidArgument, InvalidType)

TOKENS = _native.TOKENS
WEIGHTED = _native.WEIGHTED
Engine = _native.Engine
MinHash = _native.MinHash
OddSketch = _native.OddSketch
#: `OddSketcher.estimate` of two sketches (the pure estimator, vectorised, is the one the library runs).
odd_estimate = _native.odd_estimate
Unicode = _native.Unicode
check_tokens = _native.check_tokens
fingerprint_lines = _native.fingerprint_lines
fingerprint_text_lines = _native.fingerprint_text_lines
fingerprint_packed_texts = _native.fingerprint_packed_texts
#: A verified load's fingerprints and stored sketches of texts, and of JSON lines, made together.
fingerprint_stored_many = _native.fingerprint_stored_many
sketch_text_lines = _native.sketch_text_lines
# The bulk path's kernels, called as they are by `store.grouped`, whose pure code is their twin.
GroupedCommands = _native.GroupedCommands
AttachCalls = _native.AttachCalls
ScriptRuns = _native.ScriptRuns
#: The service's fast lane: an HTTP/1.1 loop on a thread of its own (`service.lane`).
Lane = _native.Lane
pack_column = _native.pack_column
unpack_column = _native.unpack_column
column_buckets = _native.column_buckets
#: How far whole SMEMBERS / HGETALL replies reach in bytes read off the wire (`wire.read_sets`).
scan_sets = _native.scan_sets
#: The value of each field (None where absent) in one HGETALL reply in its RESP form (ValueError if it is
#: not one whole reply of bulk strings in pairs).
hash_values = _native.hash_values
#: The candidate filter's kernels (`fingerprinting.native.hits` checks their arguments).
hits = _native.hits
hits_in_sets = _native.hits_in_sets
