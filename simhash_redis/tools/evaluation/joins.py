"""All-pairs joins: exact Jaccard similarity of shingle sets (the truth), Hamming distance (the guess)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

from ...errors import InvalidArgument

__all__ = [
    "Join",
    "brute_force_join",
    "check_threshold",
    "fingerprint_words",
    "hamming_pairs",
    "jaccard",
    "jaccard_join",
    "pair_distances",
    "shingle_sets",
]

_EPS = 1e-9


def shingle_sets(token_lists: Sequence[Sequence[str]], n: int) -> list[npt.NDArray[np.int64]]:
    """Each document's sorted distinct n-token shingles, interned to ints (a document of 1..n-1 tokens is
    one shingle of all of them); InvalidArgument if n < 1."""
    if n < 1:
        raise InvalidArgument(f"n must be >= 1, got {n}")
    ids: dict[tuple[str, ...], int] = {}
    out = []
    for tokens in token_lists:
        width = min(n, len(tokens))
        shingles = {tuple(tokens[i : i + width]) for i in range(len(tokens) - width + 1)} if tokens else set()
        row = [ids.setdefault(s, len(ids)) for s in shingles]
        out.append(np.array(sorted(row), dtype=np.int64))
    return out


@dataclasses.dataclass(frozen=True)
class Join:
    """Pairs (i < j) of similarity >= a threshold, with their Jaccard similarities, sorted by (i, j)."""

    i: npt.NDArray[np.int64]
    j: npt.NDArray[np.int64]
    sim: npt.NDArray[np.float64]


def _make_join(rows: list[tuple[int, int, float]]) -> Join:
    rows.sort()
    columns = np.array(rows, dtype=np.float64).reshape(-1, 3).T
    return Join(columns[0].astype(np.int64), columns[1].astype(np.int64), columns[2].copy())


def jaccard(a: AbstractSet[int], b: AbstractSet[int]) -> float:
    """The Jaccard similarity of two sets (0.0 for two empty ones)."""
    inter = len(a & b)
    return inter / max(1, len(a) + len(b) - inter)


def check_threshold(threshold: float) -> None:
    """Raise InvalidArgument unless a Jaccard threshold is in (0, 1]."""
    if not 0.0 < threshold <= 1.0:
        raise InvalidArgument(f"threshold must be in (0, 1], got {threshold}")


def jaccard_join(sets: Sequence[npt.NDArray[np.int64]], threshold: float) -> Join:
    """All pairs of non-empty sets (of distinct ints >= 0) with Jaccard similarity >= threshold, exactly
    (a prefix-filtered join, Bayardo et al., WWW 2007); InvalidArgument for a threshold out of range."""
    check_threshold(threshold)
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    if not len(sets) or not sizes.any():
        return _make_join([])
    # np.max, not the method: numpy 2.5's stubs match no overload of ndarray.max() for Python 3.10.
    vocab = int(max(int(np.max(s)) for s in sets if len(s))) + 1
    freq = np.bincount(np.concatenate([s for s in sets if len(s)]), minlength=vocab)
    rank = np.empty(vocab, dtype=np.int64)
    rank[np.lexsort((np.arange(vocab), freq))] = np.arange(vocab)
    records = [np.sort(rank[s]).tolist() for s in sets]
    members = [frozenset(r) for r in records]
    index: dict[int, list[int]] = {}
    rows: list[tuple[int, int, float]] = []
    for x in np.argsort(sizes, kind="stable").tolist():
        size = len(records[x])
        if not size:
            continue
        # The epsilon only lengthens the prefix and loosens the size bound: never loses a pair.
        prefix = size - math.ceil(threshold * size - _EPS) + 1
        least = threshold * size - _EPS
        candidates: set[int] = set()
        for token in records[x][:prefix]:
            bucket = index.get(token)
            if bucket is None:
                index[token] = [x]
                continue
            candidates.update(y for y in bucket if len(records[y]) >= least)
            bucket.append(x)
        for y in candidates:
            sim = jaccard(members[x], members[y])
            if sim >= threshold:
                rows.append((min(x, y), max(x, y), sim))
    return _make_join(rows)


def brute_force_join(sets: Sequence[npt.NDArray[np.int64]], threshold: float) -> Join:
    """`jaccard_join` by comparing every pair (for tests and tiny inputs)."""
    check_threshold(threshold)
    py = [set(s.tolist()) for s in sets]
    pairs = ((x, y, jaccard(py[x], py[y])) for x in range(len(py)) for y in range(x + 1, len(py)))
    return _make_join([(x, y, sim) for x, y, sim in pairs if py[x] and py[y] and sim >= threshold])


def fingerprint_words(fps: Sequence[int], f: int) -> npt.NDArray[np.uint64]:
    """Fingerprints of f bits as an (N, f/64 rounded up) uint64 array, least significant word first."""
    width = max(1, f // 64)
    out = np.zeros((len(fps), width), dtype=np.uint64)
    for w in range(width):
        out[:, w] = np.fromiter(((fp >> (64 * w)) & ((1 << 64) - 1) for fp in fps), np.uint64, len(fps))
    return out


def pair_distances(
    words: npt.NDArray[np.uint64], i: npt.NDArray[np.int64], j: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The Hamming distances of pairs (i, j) of fingerprints, as `fingerprint_words` gives them."""
    distances: npt.NDArray[np.int64] = np.bitwise_count(words[i] ^ words[j]).sum(axis=1).astype(np.int64)
    return distances


def hamming_pairs(
    fps: Sequence[int], f: int, max_k: int, block: int = 512
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Arrays i, j and distance of every pair (i < j) of fingerprints of f bits within max_k, sorted,
    comparing `block` rows at a time (memory: block * N * f/8 bytes)."""
    words = fingerprint_words(fps, f)
    empty = np.zeros(0, dtype=np.int64)
    found = [(empty, empty, empty)]
    for start in range(0, len(fps), block):
        dist = np.bitwise_count(words[start : start + block, None, :] ^ words[None, :, :]).sum(
            axis=2, dtype=np.int64
        )
        ii, jj = np.nonzero(dist <= max_k)
        keep = jj > ii + start
        found.append((ii[keep] + start, jj[keep], dist[ii[keep], jj[keep]]))
    i, j, d = (np.concatenate(column).astype(np.int64) for column in zip(*found, strict=True))
    return i, j, d
