"""The SimHash vote: per document and bit j, how many of its features have bit j ((hash >> j) & 1) set.

Two methods give the same counts, chosen by size: `lane_sums` for small batches, `sliced_sums` from
`SLICED_MIN_ROWS` features on.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["SLICED_MIN_ROWS", "bit_sums", "lane_sums", "sliced_sums"]

_U64 = npt.NDArray[np.uint64]

# Byte-lane counters of a uint64 word overflow past 255, so lanes are summed over at most this many rows.
_LANE_ROWS = 255
#: Fewest features for which `sliced_sums` beats `lane_sums`.
SLICED_MIN_ROWS = 1 << 13
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


def _transpose8(words: _U64) -> _U64:
    """Transpose each uint64 as an 8x8 bit matrix: bit 8 * i + j goes to bit 8 * j + i."""
    for keep, move, shift in _TRANSPOSE_STEPS:
        words = (words & keep) | ((words & move) << shift) | ((words >> shift) & move)
    return words


def _add_planes(a: list[_U64], b: list[_U64]) -> list[_U64]:
    """Add two sets of bit-sliced counters: plane i holds bit i of a counter in each bit position."""
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


def bit_sums(feats: _U64, per_doc: npt.NDArray[np.intp], f: int) -> npt.NDArray[np.int64]:
    """The (documents, f) counts of features with each bit set, from (M, lanes) feature hashes holding
    each document's contiguously, per_doc of them."""
    # The bit-sliced sum makes about a hundred numpy calls: faster from some thousands of features on.
    if len(feats) < SLICED_MIN_ROWS:
        return lane_sums(feats, per_doc, f)
    return sliced_sums(feats, per_doc, f)


def lane_sums(feats: _U64, per_doc: npt.NDArray[np.intp], f: int) -> npt.NDArray[np.int64]:
    """`bit_sums` by bits unpacked to bytes and added in byte lanes of uint64 words."""
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


def sliced_sums(feats: _U64, per_doc: npt.NDArray[np.intp], f: int) -> npt.NDArray[np.int64]:
    """`bit_sums` by bit-sliced adders.

    Each document's features are laid out in blocks of up to 128 rows, padded with zero rows. A block's
    rows are added as bit-sliced counters, halving the rows at each step with word-wide XOR/AND, until
    one row of 8 bit planes is left; transposing those 8x8 bit matrices gives each bit's count in a byte.
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
    sliced: list[npt.NDArray[np.uint64]] = [grid.reshape(size, nblocks * lanes)]
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
    # Per-document totals fit in 32 bits unless a document has 2**32 features or more. np.max, not the
    # method: numpy 2.5's stubs match no overload of ndarray.max() for mypy targeting Python 3.10.
    wide = np.int64 if int(np.max(per_doc)) >= 1 << 32 else np.uint32
    sums[nonempty] = np.add.reduceat(counts.astype(wide), first_block[nonempty], axis=0)
    return sums
