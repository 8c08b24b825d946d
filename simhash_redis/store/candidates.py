"""The read path's candidate filter: table members decoded and compared with the query by popcount."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import numpy.typing as npt

from ..codec import decode_fp, signed64
from ..fingerprinting import engines
from ..results import Match
from ..transport.packing import arrays

__all__ = ["hits", "hits_in_sets", "matches_of"]

# Below this many candidates in a batch, decoding them one by one beats numpy's fixed costs.
_VECTOR_MIN = 48


def hits(
    fps: list[int], replies: list[list[bytes]], tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]]:
    """For each query, {stored value: (fingerprint, distance)} of its candidates within distance k.

    The compiled core does it when it runs (`fingerprinting.engine()`); otherwise candidates are
    decoded and compared in one vectorised numpy pass when there are many of them (and the stored values
    fit an int64), else one by one. All give the same exact result.

    Args:
        fps: the query fingerprints.
        replies: the members of each table set read, query-major (`tables` sets per query).
        tables: table sets per query.
        k: the largest distance kept.
        f: the fingerprint width.

    Raises:
        ValueError: a member is not a decimal integer (stored data this library did not write).
    """
    if engines.native is not None:
        found: list[dict[bytes, tuple[int, int]]] | None = engines.native.hits(fps, replies, tables, k, f)
        if found is not None:
            return found
    if f <= 64 and sum(map(len, replies)) >= _VECTOR_MIN:
        if len(fps) == 1:
            return [_hits_one(fps[0], replies, k, f)]
        return _hits_vectorised(fps, replies, tables, k, f)
    return _hits_scalar(fps, replies, tables, k, f)


def hits_in_sets(
    fps: list[int], data: bytes, tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]]:
    """`hits` of the table sets' replies in their RESP form, as `Exchange.read_sets` gives them.

    Args:
        fps: the query fingerprints.
        data: the replies, `tables` per query, query-major.
        tables: table sets per query.
        k: the largest distance kept.
        f: the fingerprint width.

    Raises:
        ValueError: a member is not a decimal integer (stored data this library did not write).
    """
    if engines.native is not None:
        found: list[dict[bytes, tuple[int, int]]] | None
        found = engines.native.hits_in_sets(fps, data, tables, k, f)
        if found is not None:
            return found
    # The replies of SMEMBERS have the form of commands (arrays of bulk strings).
    return hits(fps, [list(members) for members in arrays(data)], tables, k, f)


def matches_of(found: dict[bytes, tuple[int, int]], ids_of: dict[bytes, list[str]]) -> list[Match]:
    """The matches of one query, nearest first, then by id, from its hits and the ids of each.

    Args:
        found: the query's hits, as `hits` gives them.
        ids_of: the ids stored under each hit's stored value (absent: none, an orphan).
    """
    if not found:
        return []
    matches = [
        Match(doc_id, candidate, d) for raw, (candidate, d) in found.items() for doc_id in ids_of.get(raw, ())
    ]
    matches.sort(key=_match_order)
    return matches


def _match_order(match: Match) -> tuple[int, str]:
    return (match.distance, match.id)


def _hits_scalar(
    fps: list[int], replies: list[list[bytes]], tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]]:
    """For each query, {stored value: (fingerprint, distance)} of the candidates within distance k."""
    hits = []
    for q, fp in enumerate(fps):
        found: dict[bytes, tuple[int, int]] = {}
        for raws in replies[q * tables : (q + 1) * tables]:
            for raw in raws:
                if raw in found:
                    continue
                candidate = decode_fp(raw, f)
                d = (candidate ^ fp).bit_count()
                if d <= k:
                    found[raw] = (candidate, d)
        hits.append(found)
    return hits


def _fromstring_warns() -> bool:
    """Tell whether this numpy warns (before 2.3) rather than raises on text it cannot parse to the end."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            np.fromstring(b"1 x", dtype=np.int64, sep=" ")
        except DeprecationWarning:
            return True
        except ValueError:
            return False
    return False


_FROMSTRING_WARNS = _fromstring_warns()
_INT64_MIN, _INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _decimals(data: bytes, count: int) -> npt.NDArray[np.int64] | None:
    """Parse space-separated decimal int64s, the same on every numpy.

    Args:
        data: the numbers, separated by single spaces.
        count: how many there are.

    Returns:
        The numbers, or None when they are not all plain decimals.
    """
    try:
        if _FROMSTRING_WARNS:
            # Only where numpy warns: catch_warnings is process-wide state, not for the hot path.
            with warnings.catch_warnings():
                warnings.simplefilter("error", DeprecationWarning)
                values = np.fromstring(data, dtype=np.int64, sep=" ")
        else:
            values = np.fromstring(data, dtype=np.int64, sep=" ")
    except (ValueError, DeprecationWarning):
        return None
    if len(values) != count:
        return None
    # numpy saturates a number beyond int64 to its bounds: a bound is believed only where it is written.
    bounds = np.flatnonzero((values == _INT64_MIN) | (values == _INT64_MAX))
    if len(bounds):
        # Split as numpy does: an empty table set leaves two spaces in a row, which make no number.
        tokens = data.split()
        if any(int(tokens[i]) != int(values[i]) for i in bounds.tolist()):
            return None
    return values


def _hits_vectorised(
    fps: list[int], replies: list[list[bytes]], tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]]:
    """`_hits_scalar` for many candidates: one int64 array, XOR and popcount for the whole batch."""
    flat = list(itertools.chain.from_iterable(replies))
    values = _decimals(b" ".join(flat), len(flat))
    if values is None:  # not all plain decimals (never written by this library)
        return _hits_scalar(fps, replies, tables, k, f)
    per_query = np.add.reduceat(
        np.fromiter(map(len, replies), dtype=np.int64, count=len(replies)),
        np.arange(0, len(replies), tables),
    )
    signed = [signed64(fp) for fp in fps]
    queries = np.repeat(np.array(signed, dtype=np.int64), per_query)
    distances = np.bitwise_count((values ^ queries).view(np.uint64))
    where = np.flatnonzero(distances <= k)
    hits: list[dict[bytes, tuple[int, int]]] = [{} for _ in fps]
    if len(where):
        ends = np.cumsum(per_query)
        owners = np.searchsorted(ends, where, side="right").tolist()
        for i, q, d in zip(where.tolist(), owners, distances[where].tolist(), strict=True):
            raw = flat[i]
            found = hits[q]
            if raw not in found:
                found[raw] = (decode_fp(raw, f), d)
    return hits


def _hits_one(fp: int, replies: list[list[bytes]], k: int, f: int) -> dict[bytes, tuple[int, int]]:
    """`_hits_scalar` for one query's many candidates: a few numpy calls, fewest when nothing is near."""
    values = _decimals(b" ".join([b" ".join(raws) for raws in replies]), sum(map(len, replies)))
    if values is None:  # not all plain decimals (never written by this library)
        return _hits_scalar([fp], replies, len(replies), k, f)[0]
    near = np.bitwise_count((values ^ np.int64(signed64(fp))).view(np.uint64)) <= k
    found: dict[bytes, tuple[int, int]] = {}
    if near.any():
        flat = list(itertools.chain.from_iterable(replies))
        for i in near.nonzero()[0].tolist():
            raw = flat[i]
            if raw not in found:
                candidate = decode_fp(raw, f)
                found[raw] = (candidate, (candidate ^ fp).bit_count())
    return found
