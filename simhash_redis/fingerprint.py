"""SimHash fingerprints (Charikar): `fingerprint`, the vectorised `fingerprint_many`, and `distance`.

Each feature is hashed to f bits; bit j's counter gains the feature's weight where the hash has a 1 and
loses it where it has a 0; the fingerprint has bit j set where the counter is > 0. Token hashes come
from xxh3 (cached per process, or for 64-bit word tokens of large batches computed in numpy, bit for
bit as xxhash does); shingle hashes combine them with a fixed 64-bit mixer in numpy, and the counters
are summed as bit-sliced counters (byte lanes of uint64 words for small batches). docs/fingerprints.md
defines every bit.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import xxhash

from . import features as _features
from .errors import InvalidArgument, InvalidType
from .features import (
    ascii_word_spans,
    classified_code_points,
    collapse_whitespace,
    has_token,
    normalize,
    split_chunks,
    token_parts,
    token_parts_at,
    token_parts_of,
    token_spans_of,
)
from .scheme import DEFAULT_SCHEME, Scheme

__all__ = ["DEFAULT_SCHEME", "Document", "Scheme", "distance", "fingerprint", "fingerprint_many"]

#: A document: text, UTF-8 bytes, a sequence of tokens, or weighted features (mapping or pairs).
Document = str | bytes | bytearray | Iterable[str] | Mapping[str, float] | Iterable[tuple[str, float]]

#: Multiplier of the shingle combiner (2**64 / golden ratio).
MIX_K = 0x9E3779B97F4A7C15
#: Multipliers of the splitmix64 finaliser.
MIX_C1 = 0xBF58476D1CE4E5B9
MIX_C2 = 0x94D049BB133111EB
#: Token hashes kept per (seed, width) before the cache is cleared; bounds memory in long-running processes.
CACHE_MAX = 1 << 18
#: Tokens gathered into one vectorised batch of `fingerprint_many`.
BATCH_TOKENS = 1 << 18
#: Documents gathered into one vectorised batch at most.
BATCH_DOCS = 4096
# Spans of `_span_keys` cut one by one below this count, else from the text decoded once.
_FEW_SPANS = 64
#: Fewest characters of texts for which the vectorised xxh3 hashes word tokens: it makes about a
#: hundred numpy calls, slower than the token cache on a text or two.
VECTOR_MIN_CHARS = 1 << 14
#: Weighted features whose counters are summed per block; bounds memory of huge weighted documents.
WEIGHT_BLOCK = 1 << 15

_U64 = npt.NDArray[np.uint64]
_Key = str | bytes
# The mixing constants and shifts as numpy scalars, made once.
_K, _C1, _C2 = np.uint64(MIX_K), np.uint64(MIX_C1), np.uint64(MIX_C2)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)
# Tokens mixed per chunk: 256 KiB per array, which stays in the CPU cache.
_MIX_CHUNK = 1 << 15
# Byte-lane counters of a uint64 word overflow past 255, so lanes are summed over at most this many rows.
_LANE_ROWS = 255
# Fewest features for which `_sliced_sums` beats `_lane_sums`.
_SLICED_MIN_ROWS = 1 << 13
# At most 2**7 = 128 rows per block: a block's counts then fit the 8 bit planes of one byte.
_MAX_DEPTH = 7
# (keep, move, shift) of the three steps of an 8x8 bit matrix transpose (Hacker's Delight, 7-3).
_TRANSPOSE_STEPS = tuple(
    (np.uint64(keep), np.uint64(move), np.uint64(shift))
    for keep, move, shift in (
        (0xAA55AA55AA55AA55, 0x00AA00AA00AA00AA, 7),
        (0xCCCC3333CCCC3333, 0x0000CCCC0000CCCC, 14),
        (0xF0F0F0F00F0F0F0F, 0x00000000F0F0F0F0, 28),
    )
)


class _HashTable(dict[_Key, int]):
    """Token → row of `hashes`, the token's xxh3 hash (one uint64 lane, or two for f=128)."""

    def __init__(self, seed: int, lanes: int) -> None:
        super().__init__()
        self.seed = seed
        self.lanes = lanes
        self.hashes: _U64 = np.zeros((1024, lanes), dtype=np.uint64)
        self.pending: list[_Key] = []
        self.lock = threading.Lock()

    def __missing__(self, key: _Key) -> int:
        row = len(self)
        self[key] = row
        self.pending.append(key)
        return row

    def _flush(self) -> None:
        """Hash the tokens met since the last flush into `hashes`."""
        start = len(self) - len(self.pending)
        data = [key.encode("utf-8") if isinstance(key, str) else key for key in self.pending]
        self.pending = []
        rows = _digest(data, self.seed, self.lanes)
        if len(self) > len(self.hashes):
            grown = np.zeros((max(len(self), 2 * len(self.hashes)), self.lanes), dtype=np.uint64)
            grown[:start] = self.hashes[:start]
            self.hashes = grown
        self.hashes[start : len(self)] = rows

    def lookup(self, keys: Iterable[_Key], count: int) -> _U64:
        """Return the hashes of some tokens, hashing the ones not cached yet.

        Args:
            keys: tokens (str, or their UTF-8 bytes).
            count: how many.

        Returns:
            A (len(keys), lanes) uint64 array.
        """
        with self.lock:
            if len(self) > CACHE_MAX:
                self.clear()
            rows = np.fromiter(map(self.__getitem__, keys), dtype=np.intp, count=count)
            if self.pending:
                self._flush()
            return self.hashes[rows]


class _CodePointTable:
    """Code point → xxh3 hash of its UTF-8, for CJK single-character tokens, filled on first sight."""

    def __init__(self, seed: int, lanes: int) -> None:
        self.seed = seed
        self.lanes = lanes
        self.hashes: _U64 = np.zeros((_features.CJK_RANGES[-1][1] + 1, lanes), dtype=np.uint64)
        self.known = np.zeros(len(self.hashes), dtype=bool)
        self.lock = threading.Lock()

    def filled(self, cps: npt.NDArray[np.uint16] | npt.NDArray[np.uint32]) -> _U64:
        """Hash the CJK code points not hashed yet, and return the whole table.

        Args:
            cps: code points, each within `features.CJK_RANGES`.

        Returns:
            The (code points, lanes) uint64 table, filled at least for cps.
        """
        with self.lock:
            if not np.take(self.known, cps).all():
                missing = np.unique(cps[~np.take(self.known, cps)])
                data = [chr(cp).encode("utf-8") for cp in missing.tolist()]
                self.hashes[missing] = _digest(data, self.seed, self.lanes)
                self.known[missing] = True
            return self.hashes

    def lookup(self, cps: npt.NDArray[np.uint32]) -> _U64:
        """Return the hashes of CJK code points.

        Args:
            cps: code points, each within `features.CJK_RANGES`.

        Returns:
            A (len(cps), lanes) uint64 array.
        """
        with self.lock:
            known = self.known[cps]
            missing = _NO_CPS if known.all() else np.unique(cps[~known])
            if len(missing):
                data = [chr(cp).encode("utf-8") for cp in missing.tolist()]
                self.hashes[missing] = _digest(data, self.seed, self.lanes)
                self.known[missing] = True
            return self.hashes[cps]


def _digest(data: list[bytes], seed: int, lanes: int) -> _U64:
    """Hash byte strings with xxh3: 64 bits, or 128 bits as (low, high) 64-bit lanes.

    Args:
        data: the byte strings.
        seed: the xxh3 seed.
        lanes: 1 for xxh3_64, 2 for xxh3_128.

    Returns:
        A (len(data), lanes) uint64 array.
    """
    if lanes == 1:
        digest64 = xxhash.xxh3_64_intdigest
        return np.array([digest64(item, seed) for item in data], dtype=np.uint64).reshape(-1, 1)
    digest128 = xxhash.xxh3_128_intdigest
    mask = (1 << 64) - 1
    wide = [digest128(item, seed) for item in data]
    return np.array([(v & mask, v >> 64) for v in wide], dtype=np.uint64).reshape(-1, 2)


# xxh3's default secret, its first 128 bytes: all that inputs of up to 128 bytes read.
_XXH3_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
)
#: Longest input `_xxh3_spans` hashes itself; longer ones go through the xxhash package.
XXH3_VECTOR_MAX = 128
_U64_MASK = (1 << 64) - 1
_M32 = np.uint64(0xFFFFFFFF)
_P64_1, _P64_2, _P64_3 = (
    np.uint64(0x9E3779B185EBCA87),
    np.uint64(0xC2B2AE3D27D4EB4F),
    np.uint64(0x165667B19E3779F9),
)
_MX1, _MX2 = np.uint64(0x165667919E3779F9), np.uint64(0x9FB21C651E98DF25)


def _secret64(offset: int) -> int:
    """Read a little-endian 64-bit word of the xxh3 secret.

    Args:
        offset: its byte offset.

    Returns:
        The word.
    """
    return int.from_bytes(_XXH3_SECRET[offset : offset + 8], "little")


def _fold64(a: _U64, b: _U64) -> _U64:
    """Multiply as 128-bit products and fold each to 64 bits (low XOR high), xxh3's mul128_fold64.

    Args:
        a: uint64 values.
        b: as many.

    Returns:
        The folded products.
    """
    # numpy has no 64x64 -> 128-bit product: build it from 32-bit halves.
    a_lo, a_hi = a & _M32, a >> np.uint64(32)
    b_lo, b_hi = b & _M32, b >> np.uint64(32)
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    cross = (lo_lo >> np.uint64(32)) + (hi_lo & _M32) + a_lo * b_hi
    upper = (hi_lo >> np.uint64(32)) + (cross >> np.uint64(32)) + a_hi * b_hi
    lower = (cross << np.uint64(32)) | (lo_lo & _M32)
    folded: _U64 = lower ^ upper
    return folded


def _xxh3_avalanche(h: _U64) -> _U64:
    """Apply xxh3's final avalanche in place.

    Args:
        h: uint64 values.

    Returns:
        h, mixed.
    """
    h ^= h >> np.uint64(37)
    h *= _MX1
    h ^= h >> np.uint64(32)
    return h


def _xxh3_1to3(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
    """xxh3-64 of inputs of 1 to 3 bytes.

    Args:
        buf: the bytes holding the inputs.
        starts: each input's offset in buf.
        lengths: each input's length.
        seed: the xxh3 seed.

    Returns:
        The hashes.
    """
    c1 = buf[starts].astype(np.uint64)
    c2 = buf[starts + (lengths >> 1)].astype(np.uint64)
    c3 = buf[starts + lengths - 1].astype(np.uint64)
    h: _U64 = (c1 << np.uint64(16)) | (c2 << np.uint64(24)) | c3 | (lengths.astype(np.uint64) << np.uint64(8))
    h ^= np.uint64(((_secret64(0) & 0xFFFFFFFF) ^ (_secret64(4) & 0xFFFFFFFF)) + seed & _U64_MASK)
    # xxh64's avalanche.
    h ^= h >> np.uint64(33)
    h *= _P64_2
    h ^= h >> np.uint64(29)
    h *= _P64_3
    h ^= h >> np.uint64(32)
    return h


def _xxh3_4to8(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
    """xxh3-64 of inputs of 4 to 8 bytes.

    Args:
        buf: the bytes holding the inputs.
        starts: each input's offset in buf.
        lengths: each input's length.
        seed: the xxh3 seed.

    Returns:
        The hashes.
    """
    words = _words32(buf)
    first = words[starts].astype(np.uint64)
    last = words[starts + lengths - 4].astype(np.uint64)
    swapped = int.from_bytes((seed & 0xFFFFFFFF).to_bytes(4, "little"), "big")
    flip = (_secret64(8) ^ _secret64(16)) - (seed ^ swapped << 32) & _U64_MASK
    h: _U64 = (last + (first << np.uint64(32))) ^ np.uint64(flip)
    # rrmxmx
    h ^= ((h << np.uint64(49)) | (h >> np.uint64(15))) ^ ((h << np.uint64(24)) | (h >> np.uint64(40)))
    h *= _MX2
    h ^= (h >> np.uint64(35)) + lengths.astype(np.uint64)
    h *= _MX2
    h ^= h >> np.uint64(28)
    return h


def _xxh3_9to16(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
    """xxh3-64 of inputs of 9 to 16 bytes.

    Args:
        buf: the bytes holding the inputs.
        starts: each input's offset in buf.
        lengths: each input's length.
        seed: the xxh3 seed.

    Returns:
        The hashes.
    """
    words = _words64(buf)
    low = words[starts] ^ np.uint64((_secret64(24) ^ _secret64(32)) + seed & _U64_MASK)
    high = words[starts + lengths - 8] ^ np.uint64((_secret64(40) ^ _secret64(48)) - seed & _U64_MASK)
    acc = lengths.astype(np.uint64) + low.byteswap() + high + _fold64(low, high)
    return _xxh3_avalanche(acc)


def _mix16(words: npt.NDArray[np.uint64], at: npt.NDArray[np.intp], secret: int, seed: int) -> _U64:
    """xxh3's mix16B: fold 16 input bytes keyed by 16 secret bytes.

    Args:
        words: the input bytes as unaligned little-endian uint64 at every offset.
        at: each input's offset of the 16 bytes.
        secret: the offset in the secret.
        seed: the xxh3 seed.

    Returns:
        The folded values.
    """
    low = words[at] ^ np.uint64(_secret64(secret) + seed & _U64_MASK)
    high = words[at + 8] ^ np.uint64(_secret64(secret + 8) - seed & _U64_MASK)
    return _fold64(low, high)


def _xxh3_17to128(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
    """xxh3-64 of inputs of 17 to 128 bytes.

    Args:
        buf: the bytes holding the inputs.
        starts: each input's offset in buf.
        lengths: each input's length.
        seed: the xxh3 seed.

    Returns:
        The hashes.
    """
    words = _words64(buf)
    acc = lengths.astype(np.uint64) * _P64_1
    acc += _mix16(words, starts, 0, seed) + _mix16(words, starts + lengths - 16, 16, seed)
    # Longer inputs mix 16 more bytes from each end per 32 bytes past 32, with the next secret bytes.
    for level in range(1, 4):
        chosen = np.flatnonzero(lengths > 32 * level)
        if not len(chosen):
            break
        first, size = starts[chosen], lengths[chosen]
        acc[chosen] += _mix16(words, first + 16 * level, 32 * level, seed) + _mix16(
            words, first + size - 16 * (level + 1), 32 * level + 16, seed
        )
    return _xxh3_avalanche(acc)


def _words64(buf: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """View bytes as the little-endian uint64 starting at every offset (overlapping, unaligned).

    Args:
        buf: the bytes.

    Returns:
        The view: item i is made of buf[i : i + 8].
    """
    view: npt.NDArray[np.uint64] = np.ndarray((max(0, len(buf) - 7),), dtype="<u8", buffer=buf, strides=(1,))
    return view


def _words32(buf: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """View bytes as the little-endian uint32 starting at every offset (overlapping, unaligned).

    Args:
        buf: the bytes.

    Returns:
        The view: item i is made of buf[i : i + 4].
    """
    view: npt.NDArray[np.uint32] = np.ndarray((max(0, len(buf) - 3),), dtype="<u4", buffer=buf, strides=(1,))
    return view


def _xxh3_spans(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
    """Hash many byte strings of 1 to `XXH3_VECTOR_MAX` bytes with xxh3-64, bit for bit as xxhash does.

    The xxh3 formulas for short inputs, vectorised: one numpy pass per step instead of one Python
    call (about 100 ns) per string.

    Args:
        buf: the bytes holding the strings.
        starts: each string's offset in buf.
        lengths: each string's length, 1 to `XXH3_VECTOR_MAX`.
        seed: the xxh3 seed.

    Returns:
        The hashes, a 1-D uint64 array.
    """
    out = np.empty(len(starts), dtype=np.uint64)
    for low, high, formula in (
        (1, 3, _xxh3_1to3),
        (4, 8, _xxh3_4to8),
        (9, 16, _xxh3_9to16),
        (17, 128, _xxh3_17to128),
    ):
        chosen = np.flatnonzero((lengths >= low) & (lengths <= high))
        if len(chosen):
            out[chosen] = formula(buf, starts[chosen], lengths[chosen], seed)
    return out


_NO_CPS = np.zeros(0, dtype=np.uint32)
_tables: dict[tuple[int, int], _HashTable] = {}
_cp_tables: dict[tuple[int, int], _CodePointTable] = {}
_tables_lock = threading.Lock()


_T = TypeVar("_T")


def _shared(registry: dict[tuple[int, int], _T], factory: Callable[[int, int], _T], scheme: Scheme) -> _T:
    """Return the process-wide hash table of one kind for a scheme's seed and width, made once.

    Args:
        registry: the tables of that kind made so far.
        factory: makes one from (seed, lanes).
        scheme: the scheme.

    Returns:
        The table.
    """
    key = (scheme.seed, 2 if scheme.f == 128 else 1)
    table = registry.get(key)
    if table is None:
        with _tables_lock:
            table = registry.setdefault(key, factory(*key))
    return table


def _mix(z: _U64, scratch: _U64) -> _U64:
    """Apply the splitmix64 finaliser in place.

    Args:
        z: uint64 values.
        scratch: a uint64 array of the same shape, overwritten.

    Returns:
        z, mixed.
    """
    # In place with a scratch array: no temporary allocated per step.
    for shift, multiplier in ((_S30, _C1), (_S27, _C2)):
        np.right_shift(z, shift, out=scratch)
        z ^= scratch
        z *= multiplier
    np.right_shift(z, _S31, out=scratch)
    z ^= scratch
    return z


def _combine_windows(column: _U64, n: int) -> _U64:
    """Combine every window of n consecutive token hashes of one lane, as if zeros followed the last.

    Args:
        column: one lane of the token hashes, 1-D.
        n: window length, at least 2.

    Returns:
        For each token, the combined hash of the window starting there.
    """
    size = len(column)
    out = np.empty(size, dtype=np.uint64)
    scratch = np.empty(min(size, _MIX_CHUNK), dtype=np.uint64)
    # Chunks small enough to stay in the CPU cache through all n-1 rounds: about twice as fast.
    for start in range(0, size, _MIX_CHUNK):
        stop = min(size, start + _MIX_CHUNK)
        state = out[start:stop]
        state[:] = column[start:stop]
        for j in range(1, n):
            state *= _K
            # Windows running past the last token add nothing for the missing tokens.
            inside = max(0, min(size, stop + j) - start - j)
            state[:inside] += column[start + j : start + j + inside]
            _mix(state, scratch[: stop - start])
    return out


def _combine_short(column: _U64, firsts: npt.NDArray[np.intp], length: int) -> _U64:
    """Combine all the tokens of short units of one length, one lane.

    Args:
        column: one lane of the token hashes, 1-D.
        firsts: the index of each unit's first token.
        length: their token count, at least 1.

    Returns:
        Each unit's combined hash.
    """
    state = column[firsts]
    scratch = np.empty_like(state)
    for j in range(1, length):
        state *= _K
        state += column[firsts + j]
        _mix(state, scratch)
    return state


def _features_of(
    hashes: _U64, lengths: npt.NDArray[np.intp], short: npt.NDArray[np.bool_], n: int
) -> tuple[_U64, npt.NDArray[np.intp]]:
    """Build the feature hashes of consecutive token units: every window of n tokens.

    A short unit (a whole document with fewer than n tokens) gives one feature of all its tokens.

    Args:
        hashes: the token hashes of all units, concatenated, shape (T, lanes).
        lengths: tokens per unit.
        short: per unit, whether the short-document rule applies.
        n: window length.

    Returns:
        The feature hashes (M, lanes), each unit's contiguously, and the feature count of each unit.
    """
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
        feats[:, lane] = np.take(_combine_windows(column, n), windows)
        for j in range(1, n):
            wanted = np.flatnonzero(short & (lengths == j))
            if len(wanted):
                feats[firsts[wanted], lane] = _combine_short(column, starts[wanted], j)
    return feats, counts


def _transpose8(words: _U64) -> _U64:
    """Transpose each uint64 as an 8x8 bit matrix: bit 8 * i + j goes to bit 8 * j + i.

    Args:
        words: uint64 values.

    Returns:
        The transposed values (a new array).
    """
    for keep, move, shift in _TRANSPOSE_STEPS:
        words = (words & keep) | ((words & move) << shift) | ((words >> shift) & move)
    return words


def _add_planes(a: list[_U64], b: list[_U64]) -> list[_U64]:
    """Add two sets of bit-sliced counters: plane i holds bit i of a counter in each bit position.

    Args:
        a: the planes of one set, low bit first.
        b: the planes of the other, as many, of the same shapes.

    Returns:
        The planes of the sums, one more than given.
    """
    total = [a[0] ^ b[0]]
    carry = a[0] & b[0]
    for plane_a, plane_b in zip(a[1:], b[1:], strict=True):
        half = plane_a ^ plane_b
        out_carry = plane_a & plane_b
        out_carry |= carry & half
        half ^= carry
        total.append(half)
        carry = out_carry
    total.append(carry)
    return total


def _bit_sums(feats: _U64, per_doc: npt.NDArray[np.intp], f: int) -> npt.NDArray[np.int64]:
    """Count, per document and bit, the features whose hash has that bit set.

    Args:
        feats: feature hashes (M, lanes), each document's contiguously.
        per_doc: features per document.
        f: fingerprint width.

    Returns:
        A (documents, f) array of counts.
    """
    # The bit-sliced sum makes about a hundred numpy calls: faster from some thousands of features on.
    if len(feats) < _SLICED_MIN_ROWS:
        return _lane_sums(feats, per_doc, f)
    return _sliced_sums(feats, per_doc, f)


def _lane_sums(feats: _U64, per_doc: npt.NDArray[np.intp], f: int) -> npt.NDArray[np.int64]:
    """Count, per document and bit, the features whose hash has that bit set: bits unpacked to bytes.

    Args:
        feats: feature hashes (M, lanes), each document's contiguously.
        per_doc: features per document.
        f: fingerprint width.

    Returns:
        A (documents, f) array of counts.
    """
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


def _sliced_sums(feats: _U64, per_doc: npt.NDArray[np.intp], f: int) -> npt.NDArray[np.int64]:
    """Count, per document and bit, the features whose hash has that bit set: bit-sliced adders.

    Each document's features are laid out in blocks of up to 128 rows, padded with zero rows (which
    add nothing). A block's rows are added as bit-sliced counters, halving the rows at each step with
    word-wide XOR/AND, until one row of 8 bit planes is left; transposing those 8x8 bit matrices gives
    each bit's count in one byte. Bit j of a feature is (hash >> j) & 1 on every platform.

    Args:
        feats: feature hashes (M, lanes), each document's contiguously.
        per_doc: features per document.
        f: fingerprint width.

    Returns:
        A (documents, f) array of counts.
    """
    sums = np.zeros((len(per_doc), f), dtype=np.int64)
    nonempty = np.flatnonzero(per_doc)
    if not len(nonempty):
        return sums
    m, lanes = feats.shape
    # Blocks of about half a document, at most 128 rows, so that padding costs little.
    depth = min(_MAX_DEPTH, max(0, int(m / len(nonempty)).bit_length() - 2))
    size = 1 << depth
    blocks = (per_doc + size - 1) >> depth
    nblocks = int(blocks.sum())
    first_block = np.cumsum(blocks) - blocks
    # Row r of every block side by side: the halves added at each step are then contiguous.
    at = np.arange(m, dtype=np.intp) - np.repeat(np.cumsum(per_doc) - per_doc, per_doc)
    grid = np.zeros((size * nblocks, lanes), dtype=np.uint64)
    grid[(at & (size - 1)) * nblocks + np.repeat(first_block, per_doc) + (at >> depth)] = feats
    sliced = [grid.reshape(size, nblocks * lanes)]
    while len(sliced[0]) > 1:
        half = len(sliced[0]) // 2
        sliced = _add_planes([p[:half] for p in sliced], [p[half:] for p in sliced])
    planes = np.zeros((nblocks, 8, lanes), dtype="<u8")
    for index, plane in enumerate(sliced):
        planes[:, index] = plane.reshape(nblocks, lanes)
    # Byte k of plane i, for i = 0..7, make one uint64; transposed, its byte j is the count of bit 8k + j.
    octets = planes.view(np.uint8).reshape(nblocks, 8, lanes * 8).transpose(0, 2, 1)
    words = np.ascontiguousarray(octets).view("<u8").reshape(nblocks, lanes * 8)
    counts = _transpose8(words).view(np.uint8).reshape(nblocks, lanes * 64)[:, :f]
    # Per-document totals fit in 32 bits unless a document has 2**32 features or more.
    wide = np.int64 if int(per_doc.max()) >= 1 << 32 else np.uint32
    sums[nonempty] = np.add.reduceat(counts.astype(wide), first_block[nonempty], axis=0)
    return sums


def _to_ints(bits: npt.NDArray[np.bool_], f: int) -> list[int]:
    """Pack rows of f booleans (bit j in column j) into ints.

    Args:
        bits: a (documents, f) boolean array.
        f: fingerprint width.

    Returns:
        One int per row.
    """
    packed = np.ascontiguousarray(np.packbits(bits, axis=1, bitorder="little"))
    if f == 32:
        return [int(v) for v in packed.view("<u4").ravel().tolist()]
    words = packed.view("<u8").reshape(len(bits), f // 64).tolist()
    if f == 64:
        return [int(row[0]) for row in words]
    return [int(lo) | int(hi) << 64 for lo, hi in words]


def _dedupe(feats: _U64, per_doc: npt.NDArray[np.intp]) -> tuple[_U64, npt.NDArray[np.intp]]:
    """Keep each document's distinct features once (binary weighting).

    Args:
        feats: feature hashes (M, lanes), each document's contiguously.
        per_doc: features per document.

    Returns:
        The distinct features, each document's contiguously, and their count per document.
    """
    if not len(feats):
        return feats, per_doc
    owner = np.repeat(np.arange(len(per_doc), dtype=np.intp), per_doc)
    order = np.lexsort([feats[:, lane] for lane in range(feats.shape[1])] + [owner])
    feats, owner = feats[order], owner[order]
    first = np.ones(len(feats), dtype=bool)
    first[1:] = (owner[1:] != owner[:-1]) | (feats[1:] != feats[:-1]).any(axis=1)
    return feats[first], np.bincount(owner[first], minlength=len(per_doc)).astype(np.intp)


def _span_keys(
    cps: npt.NDArray[np.uint16] | npt.NDArray[np.uint32],
    starts: npt.NDArray[np.intp],
    ends: npt.NDArray[np.intp],
) -> list[_Key]:
    """Return the UTF-8 of some spans of a text given as code points.

    Args:
        cps: the text's code points.
        starts: each span's first index.
        ends: each span's past-the-end index.

    Returns:
        The spans' UTF-8 bytes.
    """
    if len(starts) <= _FEW_SPANS:
        return [
            cps[a:b].astype("<u4").tobytes().decode("utf-32-le").encode("utf-8")
            for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
        ]
    # Many spans: decoding the whole text once is cheaper than a few numpy calls per span.
    text = cps.astype("<u4").tobytes().decode("utf-32-le")
    return [text[a:b].encode("utf-8") for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _counts_between(starts: npt.NDArray[np.intp], cuts: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Count the tokens of each text of a joined text.

    Args:
        starts: each token's first index in the joined text, ascending.
        cuts: the index of each separator between two texts, ascending.

    Returns:
        The number of tokens of each text: len(cuts) + 1 counts.
    """
    before = np.searchsorted(starts, cuts)
    return np.diff(before, prepend=0, append=len(starts)).astype(np.intp)


class _Engine:
    """Fingerprints batches of token units for one scheme; a unit is the token hashes of a text."""

    def __init__(self, scheme: Scheme) -> None:
        self.scheme = scheme
        self.lanes = 2 if scheme.f == 128 else 1
        self.table = _shared(_tables, _HashTable, scheme)
        self.n = 1 if scheme.features == "words" else scheme.n
        self.stop: frozenset[bytes] = frozenset(word.encode("utf-8") for word in scheme.stopwords)
        single = [ord(word) for word in scheme.stopwords if len(word) == 1]
        self.stop_cps = np.array(single, dtype=np.uint32)
        # Word tokens are hashed by the vectorised xxh3 when the hashes are 64-bit and none is dropped.
        self.vector_words = self.lanes == 1 and not self.stop

    def hashes(self, keys: list[_Key]) -> _U64:
        """Look up the hashes of tokens.

        Args:
            keys: the tokens, str or UTF-8 bytes.

        Returns:
            A (len(keys), lanes) uint64 array.
        """
        return self.table.lookup(keys, len(keys))

    def features(
        self, units: list[_U64], short: list[bool], owners: list[int], ndocs: int
    ) -> tuple[_U64, npt.NDArray[np.intp]]:
        """Return the features of token units, grouped by document.

        Args:
            units: token hash arrays; the units of one document are consecutive.
            short: per unit, whether the short-document rule applies.
            owners: per unit, its document's index in [0, ndocs).
            ndocs: number of documents.

        Returns:
            The feature hashes, each document's contiguously, and their count per document.
        """
        lengths = np.fromiter(map(len, units), dtype=np.intp, count=len(units))
        hashes = units[0] if len(units) == 1 else np.concatenate(units)
        feats, counts = _features_of(hashes, lengths, np.array(short, dtype=bool), self.n)
        per_doc = np.bincount(np.array(owners, dtype=np.intp), weights=counts, minlength=ndocs)
        return feats, per_doc.astype(np.intp)

    def finish(self, sums: npt.NDArray[np.int64], totals: npt.NDArray[np.int64]) -> list[int]:
        """Turn bit counts into fingerprints: bit j is set where 2 * sums[j] > total.

        Args:
            sums: (documents, f) counts of features with each bit set.
            totals: features per document.

        Returns:
            The fingerprints.
        """
        return _to_ints(2 * sums > totals[:, None], self.scheme.f)

    def run_joined(self, hashes: _U64, lengths: npt.NDArray[np.intp]) -> list[int]:
        """Fingerprint whole documents given as one token unit each, their units concatenated.

        Args:
            hashes: the token hashes of all documents, one after the other.
            lengths: tokens per document.

        Returns:
            The fingerprints, in order.
        """
        feats, per_doc = _features_of(hashes, lengths, lengths < self.n, self.n)
        return self._count(feats, per_doc)

    def _count(self, feats: _U64, per_doc: npt.NDArray[np.intp]) -> list[int]:
        """Fingerprint documents from their features.

        Args:
            feats: the feature hashes, each document's contiguously.
            per_doc: features per document.

        Returns:
            The fingerprints, by document index.
        """
        if self.scheme.weighting == "binary":
            feats, per_doc = _dedupe(feats, per_doc)
        sums = _bit_sums(feats, per_doc, self.scheme.f)
        return self.finish(sums, per_doc.astype(np.int64))

    def text_tokens(self, norm: str) -> _U64:
        """Tokenise a normalised text, drop stopwords and hash the tokens.

        Args:
            norm: the normalised text.

        Returns:
            The token hashes in text order.
        """
        return self._hash_parts(*token_parts(norm))[0]

    def span_hashes(
        self, buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], ends: npt.NDArray[np.intp]
    ) -> _U64:
        """Hash tokens given as spans of a byte buffer (for `vector_words` engines only).

        Args:
            buf: the bytes.
            starts: each token's first byte index.
            ends: each token's past-the-end byte index; tokens are not empty.

        Returns:
            A (len(starts), 1) uint64 array.
        """
        lengths = ends - starts
        out = _xxh3_spans(buf, starts, lengths, self.scheme.seed)
        longer = np.flatnonzero(lengths > XXH3_VECTOR_MAX)
        if len(longer):
            keys: list[_Key] = [buf[starts[i] : ends[i]].tobytes() for i in longer.tolist()]
            out[longer] = self.hashes(keys)[:, 0]
        return out.reshape(-1, 1)

    def ascii_tokens(self, texts: list[str]) -> tuple[_U64, npt.NDArray[np.intp]]:
        """Normalise, tokenise and hash many ASCII texts in one pass (for `vector_words` engines only).

        Args:
            texts: the raw texts, all ASCII.

        Returns:
            The token hashes of all texts, one after the other, and the number of tokens of each.
        """
        # A space separates tokens, so the texts joined by spaces tokenise as each would alone.
        buf, starts, ends = ascii_word_spans(" ".join(texts))
        lengths = np.fromiter(map(len, texts), dtype=np.intp, count=len(texts)) + 1
        return self.span_hashes(buf, starts, ends), _counts_between(starts, np.cumsum(lengths)[:-1] - 1)

    def texts_tokens(self, texts: list[str], vector: bool = True) -> tuple[_U64, npt.NDArray[np.intp]]:
        """Normalise and tokenise many raw texts in one pass, drop stopwords and hash the tokens.

        Args:
            texts: the raw texts.
            vector: whether word tokens may be hashed by the vectorised xxh3 (see `vector_words`).

        Returns:
            The token hashes of all texts, one after the other, and the number of tokens of each.
        """
        # NUL separates tokens, never composes under NFKC and is never made or removed by it, so the
        # texts joined by NUL normalise and tokenise exactly as each would alone.
        joined = "\x00".join(texts)
        if joined.count("\x00") == len(texts) - 1:
            cps, classes = classified_code_points(joined)
            ends = np.flatnonzero(cps == 0)
            firsts = np.concatenate([[0], ends + 1])
            if vector and self.vector_words:
                found = self._vector_text(cps, classes)
                if found is not None:
                    return found[0], _counts_between(found[1], ends)
            words, cjk, is_cjk, starts = token_parts_of(cps, classes)
        else:
            norms = [normalize(text) for text in texts]
            norm = "\n".join(norms)
            lengths = np.fromiter(map(len, norms), dtype=np.intp, count=len(norms)) + 1
            firsts = np.cumsum(lengths) - lengths
            ends = firsts[1:] - 1
            words, cjk, is_cjk, starts = token_parts_at(norm)
        hashes, keep = self._hash_parts(words, cjk, is_cjk)
        if keep is not None:
            owner = np.searchsorted(firsts, starts[keep], side="right") - 1
            return hashes, np.bincount(owner, minlength=len(texts)).astype(np.intp)
        return hashes, _counts_between(starts, ends)

    def _vector_text(
        self, cps: npt.NDArray[np.uint16] | npt.NDArray[np.uint32], classes: npt.NDArray[np.uint8] | None
    ) -> tuple[_U64, npt.NDArray[np.intp]] | None:
        """Tokenise a normalised text and hash its tokens, word tokens by the vectorised xxh3.

        Args:
            cps: the text's code points.
            classes: their classes, if known already.

        Returns:
            The token hashes in text order and each token's first code point index; None when more
            than a quarter of the word tokens are not ASCII, which the bytes path does faster.
        """
        word_starts, word_ends, wide, firsts, is_cjk, starts = token_spans_of(cps, classes)
        wide_at = np.flatnonzero(wide)
        if 4 * len(wide_at) > len(wide):
            return None
        # Below 128 a code point is its own UTF-8 byte; the bytes of wider ones are never read.
        word_hashes = self.span_hashes(cps.astype(np.uint8), word_starts, word_ends)
        if len(wide_at):
            word_hashes[wide_at] = self.hashes(_span_keys(cps, word_starts[wide_at], word_ends[wide_at]))
        if len(word_starts) == len(starts):
            return word_hashes, starts
        table = _shared(_cp_tables, _CodePointTable, self.scheme).filled(firsts[is_cjk])
        # Every token looked up by its first code point, the words' rows then overwritten: fewer passes
        # than putting CJK and word hashes in place each through a mask.
        out = np.take(table[:, 0], firsts, mode="clip")
        out[np.flatnonzero(~is_cjk)] = word_hashes[:, 0]
        return out.reshape(-1, 1), starts

    def _hash_parts(
        self, words: list[bytes], cjk: npt.NDArray[np.uint32], is_cjk: npt.NDArray[np.bool_]
    ) -> tuple[_U64, npt.NDArray[np.bool_] | None]:
        """Drop stopwords from tokens given as `features.token_parts` returns them, and hash the rest.

        Args:
            words: word tokens.
            cjk: CJK tokens' code points.
            is_cjk: per token in text order, whether it is CJK.

        Returns:
            The token hashes in text order, and which tokens were kept (None: all).
        """
        keep = None
        if self.stop:
            kept_words = [word not in self.stop for word in words]
            kept_cjk = ~np.isin(cjk, self.stop_cps)
            words = [word for word, kept in zip(words, kept_words, strict=True) if kept]
            cjk = cjk[kept_cjk]
            keep = np.empty(len(is_cjk), dtype=bool)
            keep[~is_cjk] = kept_words
            keep[is_cjk] = kept_cjk
            is_cjk = is_cjk[keep]
        if not len(cjk):
            return self.hashes(list(words)), keep
        out = np.empty((len(is_cjk), self.lanes), dtype=np.uint64)
        out[~is_cjk] = self.hashes(list(words))
        out[is_cjk] = _shared(_cp_tables, _CodePointTable, self.scheme).lookup(cjk)
        return out, keep

    def given_tokens(self, tokens: list[str], name: str) -> _U64:
        """Normalise caller-given tokens, drop empty ones and stopwords, and hash them.

        Args:
            tokens: the tokens.
            name: the argument's name, for messages.

        Returns:
            The token hashes.

        Raises:
            InvalidType: a token is not a str.
        """
        try:
            joined = "\x00".join(tokens)
        except TypeError:
            bad = next(token for token in tokens if not isinstance(token, str))
            raise InvalidType(f"{name} must hold str tokens only, got {type(bad).__name__}") from None
        # NUL never composes under NFKC, so normalising the joined tokens normalises each on its own.
        if joined.count("\x00") == len(tokens) - 1:
            parts = normalize(joined).encode("utf-8").split(b"\x00")
        else:
            parts = [normalize(token).encode("utf-8") for token in tokens]
        return self.hashes([part for part in parts if part and part not in self.stop])

    def text_unit(self, norm: str) -> _U64:
        """Return the token hashes of a normalised text under the scheme's feature kind.

        Args:
            norm: the normalised text.

        Returns:
            Token hashes, or for "chars" the hashes of the whitespace-collapsed text's characters
            (none when the text has no token).
        """
        if self.scheme.features != "chars":
            return self.text_tokens(norm)
        return self.hashes(list(collapse_whitespace(norm)) if has_token(norm) else [])


def _weights_of(doc: Iterable[object], name: str) -> dict[str, float]:
    """Validate weighted features, normalise them and sum duplicates, keeping first-seen order.

    Args:
        doc: a mapping of feature → weight, or an iterable of (feature, weight) pairs.
        name: the argument's name, for messages.

    Returns:
        Normalised feature → total weight; empty features are dropped.

    Raises:
        InvalidType: a feature is not a str, a weight not a real number, or an item not a pair.
        InvalidArgument: a weight is NaN or infinite.
    """
    items = doc.items() if isinstance(doc, Mapping) else doc
    totals: dict[str, float] = {}
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidType(f"{name} must hold (feature, weight) pairs, got {type(item).__name__}")
        key, weight = item
        if not isinstance(key, str):
            raise InvalidType(f"{name} feature must be a str, got {type(key).__name__}")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise InvalidType(f"{name} weight must be a real number, got {type(weight).__name__}")
        value = float(weight)
        if not math.isfinite(value):
            raise InvalidArgument(f"{name} weight must be finite, got {value} for {key!r}")
        norm = normalize(key)
        if norm:
            totals[norm] = totals.get(norm, 0.0) + value
    return totals


def _weighted(totals: dict[str, float], engine: _Engine) -> int:
    """Fingerprint weighted features: counters are float64 sums taken in feature order.

    Args:
        totals: normalised feature → weight, in first-seen order.
        engine: the scheme's engine.

    Returns:
        The fingerprint.
    """
    f = engine.scheme.f
    counter = np.zeros((1, f), dtype=np.float64)
    keys: list[_Key] = list(totals)
    weights = np.fromiter(totals.values(), dtype=np.float64, count=len(totals))
    for start in range(0, len(keys), WEIGHT_BLOCK):
        hashes = engine.hashes(keys[start : start + WEIGHT_BLOCK])
        octets = hashes.astype("<u8", copy=False).view(np.uint8).reshape(len(hashes), -1)[:, : f // 8]
        bits = np.unpackbits(octets, axis=1, bitorder="little").astype(bool)
        block = weights[start : start + WEIGHT_BLOCK, None]
        # Reducing along axis 0 adds row after row, so the sum is the same in any block size.
        signed = np.concatenate([counter, np.where(bits, block, -block)])
        counter = np.add.reduce(signed, axis=0, keepdims=True)
    return _to_ints(counter > 0, f)[0]


def _stream(engine: _Engine, pieces: Iterator[_U64]) -> int:
    """Fingerprint one long document from consecutive token pieces, in bounded memory.

    Windows spanning two pieces are kept by carrying the last n-1 tokens into the next unit; term
    frequencies add up, so the result equals that of the whole document in one unit.

    Args:
        engine: the scheme's engine.
        pieces: the document's tokens, piece by piece.

    Returns:
        The fingerprint.
    """
    n = engine.n
    f = engine.scheme.f
    carry = np.zeros((0, engine.lanes), dtype=np.uint64)
    seen = 0
    sums = np.zeros((1, f), dtype=np.int64)
    total = 0
    distinct: list[_U64] = []
    for piece in pieces:
        if not len(piece):
            continue
        seen += len(piece)
        unit = np.concatenate([carry, piece])
        feats, per_doc = engine.features([unit], [False], [0], 1)
        if engine.scheme.weighting == "binary":
            distinct.append(np.unique(feats, axis=0))
        else:
            sums += _bit_sums(feats, per_doc, f)
            total += int(per_doc[0])
        carry = unit[max(0, len(unit) - n + 1) :] if n > 1 else carry
    if 0 < seen < n:
        feats, per_doc = engine.features([carry], [True], [0], 1)
        distinct.append(feats)
        if engine.scheme.weighting != "binary":
            sums += _bit_sums(feats, per_doc, f)
            total += int(per_doc[0])
    if engine.scheme.weighting == "binary" and distinct:
        feats = np.unique(np.concatenate(distinct), axis=0)
        sums = _bit_sums(feats, np.array([len(feats)], dtype=np.intp), f)
        total = len(feats)
    return engine.finish(sums, np.array([total], dtype=np.int64))[0]


def _long_text(engine: _Engine, text: str) -> int:
    """Fingerprint a text longer than `features.CHUNK_CHARS`, chunk by chunk.

    Args:
        engine: the scheme's engine.
        text: the raw text.

    Returns:
        The fingerprint.
    """
    if engine.scheme.features != "chars":
        return _stream(engine, (engine.text_tokens(normalize(chunk)) for chunk in split_chunks(text)))
    state = {"any": False, "started": False, "space": False}

    def pieces() -> Iterator[_U64]:
        for chunk in split_chunks(text):
            norm = normalize(chunk)
            state["any"] = state["any"] or has_token(norm)
            collapsed = collapse_whitespace(norm)
            # A whitespace run cut by a chunk boundary still collapses to one space between the pieces.
            lead = " " if state["started"] and (state["space"] or norm[:1].isspace()) and collapsed else ""
            state["space"] = norm[-1:].isspace() or (state["space"] and not collapsed)
            state["started"] = state["started"] or bool(collapsed)
            yield engine.hashes(list(lead + collapsed))

    result = _stream(engine, pieces())
    return result if state["any"] else 0


def _check_scheme(scheme: object) -> Scheme:
    """Resolve the scheme argument.

    Args:
        scheme: a Scheme or None (the default scheme).

    Returns:
        The scheme.

    Raises:
        InvalidType: scheme is neither.
    """
    if scheme is None:
        return DEFAULT_SCHEME
    if not isinstance(scheme, Scheme):
        raise InvalidType(f"scheme must be a Scheme, got {type(scheme).__name__}")
    return scheme


def _join_tokens(tokens: Sequence[object], name: str) -> str:
    """Join caller-given tokens with spaces, the text that "chars" features are taken from.

    Args:
        tokens: the tokens.
        name: the argument's name, for messages.

    Returns:
        The joined text.

    Raises:
        InvalidType: a token is not a str.
    """
    for token in tokens:
        if not isinstance(token, str):
            raise InvalidType(f"{name} must hold str tokens only, got {type(token).__name__}")
    return " ".join(tokens)  # type: ignore[arg-type]


class _Batch:
    """Documents gathered for one vectorised pass; long and weighted documents are done on the spot."""

    def __init__(self, engine: _Engine) -> None:
        self.engine = engine
        self.results: list[int] = []
        self.units: list[_U64] = []
        self.slots: list[int] = []
        self.texts: list[str] = []
        self.text_slots: list[int] = []
        self.ascii_texts: list[str] = []
        self.ascii_slots: list[int] = []
        self.tokens = 0

    def add(self, doc: object, name: str) -> None:
        """Take one document.

        Args:
            doc: the document.
            name: its name in messages.

        Raises:
            InvalidType: doc is of no accepted form.
            InvalidArgument: a weight is not finite.
        """
        engine = self.engine
        if isinstance(doc, (bytes, bytearray, memoryview)):
            doc = bytes(doc).decode("utf-8", errors="replace")
        if isinstance(doc, str):
            if len(doc) > _features.CHUNK_CHARS:
                self.results.append(_long_text(engine, doc))
                return
            ascii_text = doc.isascii()
            if engine.scheme.features == "chars" or (ascii_text and not engine.vector_words):
                self._unit(engine.text_unit(normalize(doc)))
                return
            # Other texts are normalised and tokenised together at run time: numpy's per-call cost
            # would dominate on texts of a few kilobytes. ASCII ones have a faster way of their own.
            (self.ascii_slots if ascii_text else self.text_slots).append(len(self.results))
            (self.ascii_texts if ascii_text else self.texts).append(doc)
            self.results.append(0)
            self.tokens += len(doc)
            return
        if isinstance(doc, Mapping):
            self.results.append(_weighted(_weights_of(doc, name), engine))
            return
        if not isinstance(doc, Iterable):
            raise InvalidType(
                f"{name} must be str, bytes, a sequence of str tokens or (feature, weight) pairs, "
                f"got {type(doc).__name__}"
            )
        items = doc if isinstance(doc, (list, tuple)) else list(doc)
        if items and not isinstance(items[0], str):
            self.results.append(_weighted(_weights_of(items, name), engine))
            return
        if engine.scheme.features == "chars":
            self._unit(engine.text_unit(normalize(_join_tokens(items, name))))
            return
        if len(items) > _features.CHUNK_CHARS:
            step = _features.CHUNK_CHARS
            slices = (
                engine.given_tokens(list(items[i : i + step]), name) for i in range(0, len(items), step)
            )
            self.results.append(_stream(engine, slices))
            return
        self._unit(engine.given_tokens(list(items), name))

    def _unit(self, unit: _U64, slot: int | None = None) -> None:
        """Queue a document made of one token unit.

        Args:
            unit: its token hashes.
            slot: its place in the results, if already reserved.
        """
        if slot is None:
            slot = len(self.results)
            self.results.append(0)
        self.slots.append(slot)
        self.units.append(unit)
        self.tokens += len(unit)

    def full(self) -> bool:
        """Tell whether the batch should be run now.

        Returns:
            True when it holds enough tokens or documents.
        """
        return self.tokens >= BATCH_TOKENS or len(self.results) >= BATCH_DOCS

    def run(self) -> list[int]:
        """Fingerprint the queued documents.

        Returns:
            The fingerprints of every document taken, in order.
        """
        engine = self.engine
        vector = sum(map(len, self.texts)) >= VECTOR_MIN_CHARS
        if sum(map(len, self.ascii_texts)) < VECTOR_MIN_CHARS:
            for slot, text in zip(self.ascii_slots, self.ascii_texts, strict=True):
                self._unit(engine.text_unit(normalize(text)), slot)
            self.ascii_texts = []
        # Every queued document is one token unit: units and tokenised texts are fingerprinted together,
        # their token hashes concatenated once.
        blocks = list(self.units)
        lengths = [np.fromiter(map(len, self.units), dtype=np.intp, count=len(self.units))]
        slots = list(self.slots)
        for texts, text_slots, tokenizer in (
            (self.ascii_texts, self.ascii_slots, engine.ascii_tokens),
            (self.texts, self.text_slots, lambda texts: engine.texts_tokens(texts, vector)),
        ):
            if texts:
                hashes, counts = tokenizer(texts)
                blocks.append(hashes)
                lengths.append(counts)
                slots += text_slots
        if blocks:
            joined = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
            for slot, value in zip(slots, engine.run_joined(joined, np.concatenate(lengths)), strict=True):
                self.results[slot] = value
        return self.results


def fingerprint(doc: Document, scheme: Scheme | None = None) -> int:
    """Fingerprint one document.

    Args:
        doc: a text (str); UTF-8 bytes (invalid bytes become U+FFFD); a sequence of str tokens
            (already segmented: normalised, stopwords dropped, then made into the scheme's features);
            or weighted features, a mapping feature → weight or an iterable of (feature, weight) pairs
            (normalised, duplicates summed, hashed as given).
        scheme: the scheme; None for `DEFAULT_SCHEME`.

    Returns:
        The fingerprint, an int in [0, 2**scheme.f); 0 for a document without any token.

    Raises:
        InvalidType: doc or scheme is of no accepted type; the message names it.
        InvalidArgument: a weight is NaN or infinite.
    """
    batch = _Batch(_Engine(_check_scheme(scheme)))
    batch.add(doc, "doc")
    return batch.run()[0]


def fingerprint_many(docs: Iterable[Document], scheme: Scheme | None = None) -> list[int]:
    """Fingerprint many documents, vectorised; equal to ``[fingerprint(d, scheme) for d in docs]``.

    Args:
        docs: documents, each in any form `fingerprint` accepts; any iterable, consumed once.
        scheme: the scheme; None for `DEFAULT_SCHEME`.

    Returns:
        The fingerprints, in the order of docs.

    Raises:
        InvalidType: docs is not an iterable of documents, or a document's type is wrong; the message
            names it (``docs[i]``).
        InvalidArgument: a weight is NaN or infinite.
    """
    engine = _Engine(_check_scheme(scheme))
    if isinstance(docs, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(docs, Iterable):
        raise InvalidType(f"docs must be an iterable of documents, got {type(docs).__name__}")
    out: list[int] = []
    batch = _Batch(engine)
    for index, doc in enumerate(docs):
        batch.add(doc, f"docs[{index}]")
        if batch.full():
            out.extend(batch.run())
            batch = _Batch(engine)
    out.extend(batch.run())
    return out


def distance(a: int, b: int) -> int:
    """Return the Hamming distance between two fingerprints.

    Args:
        a: a fingerprint, a non-negative int.
        b: another.

    Returns:
        The number of bits in which they differ.

    Raises:
        InvalidType: a or b is not an int (bools are refused).
        InvalidArgument: a or b is negative.
    """
    for name, value in (("a", a), ("b", b)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidType(f"{name} must be an int, got {type(value).__name__}")
        if value < 0:
            raise InvalidArgument(f"{name} must be a non-negative fingerprint, got {value}")
    return (a ^ b).bit_count()
