"""The read path's candidate filter: table members decoded and compared with the query by popcount."""

from __future__ import annotations

from typing import Any

from ..codec import decode_fp
from ..fingerprinting import engines
from ..results import Match
from ..transport.packing import arrays

__all__ = ["hits", "matches_of", "pure_hits", "takes_raw"]


def takes_raw() -> bool:
    """Whether the filter takes table sets' replies in their RESP form (the compiled core runs)."""
    return engines.native is not None


def hits(fps: list[int], replies: Any, tables: int, k: int, f: int) -> list[dict[bytes, tuple[int, int]]]:
    """For each query, {stored value: (fingerprint, distance)} of its candidates within distance k.

    The compiled core's filter when it runs, else `pure_hits`: the same exact result.

    Args:
        fps: the query fingerprints.
        replies: the members of each table set read, query-major (`tables` sets per query): as lists,
            or in their RESP form (bytes of whole replies, as `Exchange.read_sets` gives them).
        tables: table sets per query.
        k: the largest distance kept.
        f: the fingerprint width.

    Raises:
        ValueError: a member is not a decimal integer (stored data this library did not write), or
            RESP bytes are not whole replies.
    """
    native = engines.native
    if native is not None:
        found: list[dict[bytes, tuple[int, int]]] | None = native.hits(fps, replies, tables, k, f)
        if found is not None:
            return found
    if type(replies) is bytes:  # replies of SMEMBERS have the form of commands: arrays of bulk strings
        replies = [list(members) for members in arrays(replies)]
    return pure_hits(fps, replies, tables, k, f)


def pure_hits(
    fps: list[int], replies: list[list[bytes]], tables: int, k: int, f: int
) -> list[dict[bytes, tuple[int, int]]]:
    """`hits` in Python: each distinct member of a query's sets decoded (`codec.decode_fp`) and kept,
    in the order met, when within distance k."""
    found_all = []
    for q, fp in enumerate(fps):
        found: dict[bytes, tuple[int, int]] = {}
        for raws in replies[q * tables : (q + 1) * tables]:
            for raw in raws:
                if raw not in found:
                    candidate = decode_fp(raw, f)
                    d = (candidate ^ fp).bit_count()
                    if d <= k:
                        found[raw] = (candidate, d)
        found_all.append(found)
    return found_all


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
