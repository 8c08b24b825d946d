"""The SimHash vote: per document and bit j, how many of its features have bit j ((hash >> j) & 1) set."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["bit_sums"]

# Byte-lane counters of a uint64 word overflow past 255, so lanes are summed over at most this many rows.
_LANE_ROWS = 255


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
