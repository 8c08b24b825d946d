"""xxh3 of byte strings into uint64 arrays: `digest` by the xxhash package, `hash_spans` in numpy.

`hash_spans` computes the xxh3-64 formulas for inputs of 1 to `VECTOR_MAX` bytes as one numpy pass per
step over all the strings instead of one Python call (about 100 ns) per string, bit for bit as xxhash.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import xxhash

__all__ = ["VECTOR_MAX", "digest", "hash_spans"]

_U64 = npt.NDArray[np.uint64]

# xxh3's default secret, its first 128 bytes: all that inputs of up to 128 bytes read.
_XXH3_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
)
#: Longest input `hash_spans` hashes itself; longer ones go through the xxhash package.
VECTOR_MAX = 128
_U64_MASK = (1 << 64) - 1
_M32 = np.uint64(0xFFFFFFFF)
_P64_1, _P64_2, _P64_3 = (
    np.uint64(0x9E3779B185EBCA87),
    np.uint64(0xC2B2AE3D27D4EB4F),
    np.uint64(0x165667B19E3779F9),
)
_MX1, _MX2 = np.uint64(0x165667919E3779F9), np.uint64(0x9FB21C651E98DF25)


def digest(data: list[bytes], seed: int, lanes: int) -> _U64:
    """The (len(data), lanes) xxh3 hashes of byte strings: xxh3_64 for 1 lane, xxh3_128 (low, high) for 2."""
    if lanes == 1:
        digest64 = xxhash.xxh3_64_intdigest
        return np.array([digest64(item, seed) for item in data], dtype=np.uint64).reshape(-1, 1)
    digest128 = xxhash.xxh3_128_intdigest
    wide = [digest128(item, seed) for item in data]
    return np.array([(v & _U64_MASK, v >> 64) for v in wide], dtype=np.uint64).reshape(-1, 2)


def _secret64(offset: int) -> int:
    """Read a little-endian 64-bit word of the xxh3 secret."""
    return int.from_bytes(_XXH3_SECRET[offset : offset + 8], "little")


def _fold64(a: _U64, b: _U64) -> _U64:
    """Multiply as 128-bit products and fold each to 64 bits (low XOR high), xxh3's mul128_fold64."""
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
    """Apply xxh3's final avalanche in place."""
    h ^= h >> np.uint64(37)
    h *= _MX1
    h ^= h >> np.uint64(32)
    return h


def _xxh3_1to3(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
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
    words = _words64(buf)
    low = words[starts] ^ np.uint64((_secret64(24) ^ _secret64(32)) + seed & _U64_MASK)
    high = words[starts + lengths - 8] ^ np.uint64((_secret64(40) ^ _secret64(48)) - seed & _U64_MASK)
    acc = lengths.astype(np.uint64) + low.byteswap() + high + _fold64(low, high)
    return _xxh3_avalanche(acc)


def _mix16(words: npt.NDArray[np.uint64], at: npt.NDArray[np.intp], secret: int, seed: int) -> _U64:
    """xxh3's mix16B: fold 16 input bytes keyed by 16 secret bytes."""
    low = words[at] ^ np.uint64(_secret64(secret) + seed & _U64_MASK)
    high = words[at + 8] ^ np.uint64(_secret64(secret + 8) - seed & _U64_MASK)
    return _fold64(low, high)


def _xxh3_17to128(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
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
    """View bytes as the little-endian uint64 starting at every offset (overlapping, unaligned)."""
    view: npt.NDArray[np.uint64] = np.ndarray((max(0, len(buf) - 7),), dtype="<u8", buffer=buf, strides=(1,))
    return view


def _words32(buf: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """View bytes as the little-endian uint32 starting at every offset (overlapping, unaligned)."""
    view: npt.NDArray[np.uint32] = np.ndarray((max(0, len(buf) - 3),), dtype="<u4", buffer=buf, strides=(1,))
    return view


def hash_spans(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp], seed: int
) -> _U64:
    """The xxh3-64 hashes (1-D) of the strings of 1 to `VECTOR_MAX` bytes at starts in buf, as xxhash's."""
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
