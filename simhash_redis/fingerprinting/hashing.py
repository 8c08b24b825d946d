"""Feature hashing for SimHash: token hash caches, the shingle combiner (splitmix64), the vote (per document
and bit j, how many of its features have bit j, ``(hash >> j) & 1``, set) and bit sums to ints; what the
engines read of a scheme and of a MinHasher (which sit above them), as protocols."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import numpy.typing as npt
import xxhash

from .charclass import CJK_RANGES

__all__ = ["CACHE_MAX", "MIX_C1", "MIX_C2", "MIX_K", "MinHashParams", "SchemeParams"]


#: Multiplier of the shingle combiner (2**64 / golden ratio).
MIX_K = 0x9E3779B97F4A7C15
#: Multipliers of the splitmix64 finaliser.
MIX_C1 = 0xBF58476D1CE4E5B9
MIX_C2 = 0x94D049BB133111EB
#: Token hashes kept per (seed, width) before the cache is cleared; bounds memory in long-running processes.
CACHE_MAX = 1 << 18
# Byte-lane counters of a uint64 word overflow past 255, so lanes are summed over at most this many rows.
_LANE_ROWS = 255

U64 = npt.NDArray[np.uint64]
Key = str | bytes

_K, _C1, _C2 = np.uint64(MIX_K), np.uint64(MIX_C1), np.uint64(MIX_C2)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)
_U64_MASK = (1 << 64) - 1


class SchemeParams(Protocol):
    """A validated scheme, as the engines read it; a `Scheme` is one (its docstring says what each is)."""

    @property
    def features(self) -> str: ...
    @property
    def n(self) -> int: ...
    @property
    def f(self) -> int: ...
    @property
    def weighting(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def stopwords(self) -> tuple[str, ...]: ...


class MinHashParams(Protocol):
    """A MinHasher's parameters and permutations (multipliers `a`, offsets `b`), as the native sketcher
    reads them; a `MinHasher` is one."""

    @property
    def num_perm(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def a(self) -> npt.NDArray[np.uint64]: ...
    @property
    def b(self) -> npt.NDArray[np.uint64]: ...


def digest(data: list[bytes], seed: int, lanes: int) -> U64:
    """The (len(data), lanes) xxh3 hashes of byte strings: xxh3_64 for 1 lane, xxh3_128 (low, high) for 2."""
    if lanes == 1:
        digest64 = xxhash.xxh3_64_intdigest
        return np.array([digest64(item, seed) for item in data], dtype=np.uint64).reshape(-1, 1)
    digest128 = xxhash.xxh3_128_intdigest
    wide = [digest128(item, seed) for item in data]
    return np.array([(v & _U64_MASK, v >> 64) for v in wide], dtype=np.uint64).reshape(-1, 2)


class HashTable(dict[Key, int]):
    """Token → row of `hashes`, the token's xxh3 hash (one uint64 lane, or two for f=128)."""

    def __init__(self, seed: int, lanes: int) -> None:
        super().__init__()
        self.seed = seed
        self.lanes = lanes
        self.hashes: U64 = np.zeros((1024, lanes), dtype=np.uint64)
        self.pending: list[Key] = []
        self.lock = threading.Lock()

    def __missing__(self, key: Key) -> int:
        row = len(self)
        self[key] = row
        self.pending.append(key)
        return row

    def _flush(self) -> None:
        """Hash the tokens met since the last flush into `hashes`."""
        start = len(self) - len(self.pending)
        data = [key.encode("utf-8") if isinstance(key, str) else key for key in self.pending]
        self.pending = []
        rows = digest(data, self.seed, self.lanes)
        if len(self) > len(self.hashes):
            grown = np.zeros((max(len(self), 2 * len(self.hashes)), self.lanes), dtype=np.uint64)
            grown[:start] = self.hashes[:start]
            self.hashes = grown
        self.hashes[start : len(self)] = rows

    def lookup(self, keys: Iterable[Key], count: int) -> U64:
        """The (count, lanes) hashes of count tokens (str or UTF-8), hashing the ones not cached yet."""
        with self.lock:
            if len(self) > CACHE_MAX:
                self.clear()
            rows = np.fromiter(map(self.__getitem__, keys), dtype=np.intp, count=count)
            if self.pending:
                self._flush()
            return self.hashes[rows]


class CodePointTable:
    """Code point → xxh3 hash of its UTF-8, for CJK single-character tokens, filled on first sight."""

    def __init__(self, seed: int, lanes: int) -> None:
        self.seed = seed
        self.lanes = lanes
        self.hashes: U64 = np.zeros((CJK_RANGES[-1][1] + 1, lanes), dtype=np.uint64)
        self.known = np.zeros(len(self.hashes), dtype=bool)
        self.lock = threading.Lock()

    def lookup(self, cps: npt.NDArray[np.uint32]) -> U64:
        """The (len(cps), lanes) hashes of CJK code points (each within `CJK_RANGES`)."""
        with self.lock:
            if not np.take(self.known, cps).all():
                missing = np.unique(cps[~np.take(self.known, cps)])
                data = [chr(cp).encode("utf-8") for cp in missing.tolist()]
                self.hashes[missing] = digest(data, self.seed, self.lanes)
                self.known[missing] = True
            return self.hashes[cps]


_tables: dict[tuple[type, int, int], Any] = {}
_tables_lock = threading.Lock()
_T = TypeVar("_T", HashTable, CodePointTable)


def shared(kind: type[_T], scheme: SchemeParams) -> _T:
    """The process-wide table of a kind for a scheme, made once."""
    key = (kind, scheme.seed, 2 if scheme.f == 128 else 1)
    table = _tables.get(key)
    if table is None:
        with _tables_lock:
            table = _tables.setdefault(key, kind(*key[1:]))
    return cast(_T, table)


def mix(z: U64, scratch: U64) -> U64:
    """Apply the splitmix64 finaliser to z in place (scratch: as large, overwritten; no temporaries)."""
    for shift, multiplier in ((_S30, _C1), (_S27, _C2)):
        np.right_shift(z, shift, out=scratch)
        z ^= scratch
        z *= multiplier
    np.right_shift(z, _S31, out=scratch)
    z ^= scratch
    return z


def combine_windows(column: U64, n: int) -> U64:
    """Per token of one lane (1-D), the combined hash of the n tokens from it, zeros past the end."""
    state: U64 = column.copy()
    scratch = np.empty_like(column)
    for j in range(1, n):
        state *= _K
        # Windows running past the last token add nothing for the missing tokens.
        state[: max(0, len(column) - j)] += column[j:]
        mix(state, scratch)
    return state


def features_of(
    hashes: U64, lengths: npt.NDArray[np.intp], short: npt.NDArray[np.bool_], n: int
) -> tuple[U64, npt.NDArray[np.intp]]:
    """The feature hashes (every window of n tokens) of consecutive token units (`hashes`, (T, lanes), of
    `lengths` tokens each; `short` units give one feature of all their tokens), and each unit's count."""
    counts = np.where(short, lengths > 0, np.maximum(lengths - n + 1, 0)).astype(np.intp)
    total = int(counts.sum())
    firsts = np.cumsum(counts) - counts
    starts = np.cumsum(lengths) - lengths
    windows = np.repeat(starts - firsts, counts) + np.arange(total, dtype=np.intp)
    if n == 1:
        return hashes[windows], counts
    lanes = hashes.shape[1]
    feats = np.empty((total, lanes), dtype=np.uint64)
    for lane in range(lanes):
        column = np.ascontiguousarray(hashes[:, lane])
        feats[:, lane] = np.take(combine_windows(column, n), windows)
        for j in range(1, n):
            wanted = np.flatnonzero(short & (lengths == j))
            if len(wanted):
                # The first window of a unit of j tokens is all of them.
                feats[firsts[wanted], lane] = combine_windows(column, j)[starts[wanted]]
    return feats, counts


def to_ints(bits: npt.NDArray[np.bool_], f: int) -> list[int]:
    """Pack each row of a (documents, f) boolean array into an int, bit j from column j."""
    packed = np.ascontiguousarray(np.packbits(bits, axis=1, bitorder="little"))
    if f == 32:
        return [int(v) for v in packed.view("<u4").ravel().tolist()]
    words = packed.view("<u8").reshape(len(bits), f // 64).tolist()
    if f == 64:
        return [int(row[0]) for row in words]
    return [int(lo) | int(hi) << 64 for lo, hi in words]


def dedupe(feats: U64, per_doc: npt.NDArray[np.intp]) -> tuple[U64, npt.NDArray[np.intp]]:
    """Keep each document's distinct features once (binary weighting), with their count per document."""
    if not len(feats):
        return feats, per_doc
    owner = np.repeat(np.arange(len(per_doc), dtype=np.intp), per_doc)
    order = np.lexsort([feats[:, lane] for lane in range(feats.shape[1])] + [owner])
    feats, owner = feats[order], owner[order]
    first = np.ones(len(feats), dtype=bool)
    first[1:] = (owner[1:] != owner[:-1]) | (feats[1:] != feats[:-1]).any(axis=1)
    return feats[first], np.bincount(owner[first], minlength=len(per_doc)).astype(np.intp)


def bit_sums(feats: npt.NDArray[np.uint64], per_doc: npt.NDArray[np.intp], f: int) -> npt.NDArray[np.int64]:
    """The (documents, f) counts of features with each bit set, from (M, lanes) feature hashes holding
    each document's contiguously, per_doc of them."""
    sums = np.zeros((len(per_doc), f), dtype=np.int64)
    if not len(feats):
        return sums
    # Bit j of a feature is (hash >> j) & 1 on every platform: little-endian bytes, little bit order.
    octets = feats.astype("<u8", copy=False).view(np.uint8).reshape(len(feats), -1)[:, : f // 8]
    bits = np.unpackbits(octets, axis=1, bitorder="little")
    # Eight 0/1 bytes per uint64: adding up to 255 rows never carries from one byte into the next.
    lanes = bits.view(np.uint64)
    nonempty = np.flatnonzero(per_doc)
    doc_starts = (np.cumsum(per_doc) - per_doc)[nonempty]
    cuts = np.union1d(doc_starts, np.arange(0, len(feats), _LANE_ROWS, dtype=np.intp))
    partial = np.add.reduceat(lanes, cuts, axis=0)
    counts = partial.view(np.uint8).reshape(len(cuts), f).astype(np.int64)
    sums[nonempty] = np.add.reduceat(counts, np.searchsorted(cuts, doc_starts), axis=0)
    return sums
