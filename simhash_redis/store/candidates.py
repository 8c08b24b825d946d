"""The read path's candidate filter: table members decoded and compared with the query by popcount."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..codec import decode_fp
from ..fingerprinting import engine_choice
from ..results import Match, VerifiedMatch
from ..transport.greenlet_bridge import on_loop_stack
from ..transport.wire import arrays

__all__ = [
    "Group",
    "Listed",
    "band_hits",
    "grouped_all",
    "hits",
    "matches_of",
    "matches_of_groups",
    "pure_hits",
    "reported",
    "top_band_hits",
    "verified_matches_of",
]

# From this many queries, band members are filtered in numpy (below, its fixed costs are most of it).
_BANDS_VECTOR_MIN = 16
_MASK64 = (1 << 64) - 1
# Up to this many band members, a few queries' are decoded one by one (`_few_band_hits`).
_FEW_MEMBERS = 64


def hits(fps: list[int], replies: Any, tables: int, k: int, f: int) -> list[dict[bytes, tuple[int, int]]]:
    """For each query, {stored value: (fingerprint, distance)} of its candidates within distance k, from
    each table set's members (`tables` per query, as lists or RESP bytes).

    Raises:
        ValueError: a member is not a decimal integer, or RESP bytes are not whole replies.
    """
    native = engine_choice.native
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
    """`hits` in Python."""
    found_all: list[dict[bytes, tuple[int, int]]] = [{} for _ in fps]
    for q, fp in enumerate(fps):
        found = found_all[q]
        for raws in replies[q * tables : (q + 1) * tables]:
            for raw in raws:
                if raw not in found:
                    candidate = decode_fp(raw, f)
                    d = (candidate ^ fp).bit_count()
                    if d <= k:
                        found[raw] = (candidate, d)
    return found_all


@on_loop_stack
def band_hits(
    fps: list[int], values: list[bytes | None], per: int, f: int
) -> list[dict[bytes, tuple[int, int]]] | None:
    """`hits` with k = f of band tables' packed values, `per` per query; None where the caller must unpack
    them and call `hits`."""
    if f > 64 or len(values) != len(fps) * per or not per:
        return None
    if len(fps) < _BANDS_VECTOR_MIN:
        if sum(len(value) for value in values if value) > 8 * _FEW_MEMBERS:
            return None  # pages of one template: the compiled filter decodes many faster
        return _few_band_hits(fps, values, per, f)
    lengths = np.array([len(v) if v else 0 for v in values], dtype=np.int64)
    found: list[dict[bytes, tuple[int, int]]] = [{} for _ in fps]
    if not lengths.any():
        return found
    if (lengths % 8).any():
        return None
    members = np.frombuffer(b"".join([v for v in values if v]), dtype="<u8")
    if f < 64 and int(members.max()) >> f:
        return None
    owners = np.repeat(np.arange(len(fps)), lengths.reshape(len(fps), per).sum(axis=1) // 8)
    # Each query's distinct members, at their first place: pairs sorted by (query, member), stably.
    order = np.lexsort((members, owners))
    ranked_owners, ranked = owners[order], members[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (ranked_owners[1:] != ranked_owners[:-1]) | (ranked[1:] != ranked[:-1])
    kept = np.sort(order[first])
    queries = np.array(fps, dtype=np.uint64)
    kept_owners, kept_members = owners[kept], members[kept]
    distances = np.bitwise_count(kept_members ^ queries[kept_owners])
    # Stored as encode_fp writes it: signed where f is 64 (a narrower one never has its top bit set).
    stored = kept_members.view("<i8")
    for q, value, fp, d in zip(
        kept_owners.tolist(), stored.tolist(), kept_members.tolist(), distances.tolist(), strict=True
    ):
        found[q][b"%d" % value] = (fp, d)
    return found


def top_band_hits(
    tabled: dict[bytes, tuple[int, int]],
    fp: int,
    values: Sequence[bytes | None],
    cap: int,
    f: int,
    bands: int | None = None,
) -> dict[bytes, tuple[int, int]] | None:
    """One query's `cap` band candidates most likely to pass, not in `tabled`; None as `band_hits`.

    Two signals each choose half: the bands shared with the query, each counting for 1 / its member count
    (a band a template's pages share says little), then the distance; and the distance, then those
    bands (docs/quality.md). `bands`: of one period, where `values` holds several periods'.
    """
    if f > 64 or any(value and len(value) % 8 for value in values):
        return None
    if bands is None or bands >= len(values):
        per_band = [np.frombuffer(value, dtype="<i8") for value in values if value]
    else:  # each band's members once, whichever periods hold them
        per_band = [
            np.unique(np.frombuffer(b"".join([v for v in values[band::bands] if v]), dtype="<i8"))
            for band in range(bands)
        ]
    per_band = [members for members in per_band if len(members)]
    if not per_band:
        return {}
    weights = np.concatenate([np.full(len(members), 1.0 / len(members)) for members in per_band])
    members, where = np.unique(np.concatenate(per_band), return_inverse=True)
    # Sums of 1/n equal in exact arithmetic may differ in their last bit: rounded, so that distance decides.
    shared = np.round(np.bincount(where, weights=weights, minlength=len(members)), 9)
    unsigned = members.view(np.uint64)
    if f < 64 and len(members) and int(np.max(unsigned)) >> f:
        return None
    distances = np.bitwise_count(unsigned ^ np.uint64(fp))
    out: dict[bytes, tuple[int, int]] = {}
    # The first half by bands, then up to the cap by distance (the candidates the first half took skipped).
    wanted = cap + len(tabled)
    by_bands = _first(wanted, -shared, distances, members)
    by_distance = _first(wanted, distances, -shared, members)
    for order, limit in ((by_bands, (cap + 1) // 2), (by_distance, cap)):
        for member, d in zip(members[order].tolist(), distances[order].tolist(), strict=True):
            if len(out) == limit:
                break
            raw = b"%d" % member  # stored as encode_fp writes it: signed where f is 64
            if raw not in tabled and raw not in out:
                out[raw] = (member & _MASK64, d)
    return out


def _first(count: int, primary: npt.NDArray[Any], *later: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The positions of the first `count` in the order of primary, then each later key (a partition first)."""
    order: npt.NDArray[Any]
    if count < len(primary):
        edge = np.partition(primary, count - 1)[count - 1]
        within = np.flatnonzero(primary <= edge)
        keys = [key[within] for key in reversed(later)]
        order = within[np.lexsort((*keys, primary[within]))]
    else:
        order = np.lexsort((*reversed(later), primary))
    return order[:count]


def _few_band_hits(
    fps: list[int], values: list[bytes | None], per: int, f: int
) -> list[dict[bytes, tuple[int, int]]] | None:
    found: list[dict[bytes, tuple[int, int]]] = [{} for _ in fps]
    for q, fp in enumerate(fps):
        mine = found[q]
        for value in values[q * per : (q + 1) * per]:
            if not value:
                continue
            if len(value) % 8:
                return None
            for signed in struct.unpack(f"<{len(value) // 8}q", value):
                # Stored as encode_fp writes it: signed where f is 64.
                raw = b"%d" % signed
                if raw not in mine:
                    candidate = signed & _MASK64
                    if candidate >> f:
                        return None
                    mine[raw] = (candidate, (candidate ^ fp).bit_count())
    return found


class Listed:
    """The ids stored with one fingerprint (verified: sharing one sketch), one object for every query that
    matched it, so that what a batch asks of a page copied under thousands of ids is worked out once."""

    __slots__ = ("_least", "_set", "ids", "sketch")

    def __init__(self, ids: list[str], sketch: bytes | None = None) -> None:
        self.ids = ids
        self.sketch = sketch
        self._set: set[str] | frozenset[str] | None = None
        self._least: str | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def has(self, doc_id: str) -> bool:
        if len(self.ids) <= _FEW_IDS:
            return doc_id in self.ids
        if self._set is None:
            self._set = set(self.ids)
        return doc_id in self._set

    def least(self) -> str:
        if self._least is None:
            self._least = min(self.ids)
        return self._least

    def conflicts(self, written: dict[str, int], fp: int) -> bool:
        if len(written) < len(self.ids):
            return any(other != fp for doc_id, other in written.items() if self.has(doc_id))
        return any(written.get(doc_id, fp) != fp for doc_id in self.ids)


# Up to this many ids, a list is searched as it is (a set would cost more than it saves).
_FEW_IDS = 16


class Group(NamedTuple):
    """A query's matches sharing a stored fingerprint (and, verified, a sketch): every id listed."""

    fingerprint: int
    distance: int
    listed: Listed
    #: The estimated Jaccard similarity of the query with the ids' sketch (verified mode), else None.
    jaccard: float | None = None


def grouped_all(
    per_query: list[dict[bytes, tuple[int, int]]],
    ids_of: dict[bytes, list[str]],
    sketch_of: dict[bytes, bytes],
) -> list[list[Group]]:
    """Each query's matches as groups, in the order its candidates were met: one `Listed` a stored
    fingerprint, shared by the queries that matched it."""
    shared: dict[bytes, Listed] = {}
    out = []
    for found in per_query:
        groups = []
        for raw, (candidate, d) in found.items():
            listed = shared.get(raw)
            if listed is None:
                ids = ids_of.get(raw)
                if not ids:
                    continue
                listed = shared[raw] = Listed(ids, sketch_of.get(raw))
            groups.append(Group(candidate, d, listed))
        out.append(groups)
    return out


def _rank(group: Group) -> tuple[float, int]:
    return (0.0 if group.jaccard is None else -group.jaccard, group.distance)


def matches_of(found: dict[bytes, tuple[int, int]], ids_of: dict[bytes, list[str]]) -> list[Match]:
    """The matches of one query, nearest first, then by id."""
    if not found:
        return []
    if len(found) == 1:  # the common hit: one fingerprint, its ids sorted as strings
        for raw, (candidate, d) in found.items():
            ids = ids_of.get(raw)
            if not ids:
                return []
            if len(ids) == 1:
                return [Match(ids[0], candidate, d)]
            return list(map(tuple.__new__, repeat(Match), zip(sorted(ids), repeat(candidate), repeat(d))))
    if sum(len(ids_of.get(raw, ())) for raw in found) > _MANY:
        return matches_of_groups(grouped_all([found], ids_of, {})[0])
    matches = [
        Match(doc_id, candidate, d) for raw, (candidate, d) in found.items() for doc_id in ids_of.get(raw, ())
    ]
    matches.sort(key=lambda match: (match.distance, match.id))
    return matches


# From this many matches of several fingerprints, they are sorted a group at a time (`_expanded`).
_MANY = 64


def matches_of_groups(groups: list[Group]) -> list[Match]:
    return _expanded(groups, Match)


def verified_matches_of(groups: list[Group]) -> list[VerifiedMatch]:
    """The matches of one query's confirmed groups, most similar first, then nearest, then by id."""
    return _expanded(groups, VerifiedMatch)


def _expanded(groups: list[Group], kind: type[Any]) -> list[Any]:
    """A match of `kind` per id listed, ordered as a stable sort by (rank, id), a group at a time."""
    if not groups:
        return []
    new, out = tuple.__new__, list[Any]()
    verified = kind is VerifiedMatch
    rows: Iterator[tuple[Any, ...]]
    for _, tied in itertools.groupby(sorted(groups, key=_rank), key=_rank):
        same = list(tied)
        fp, d, listed, jaccard = same[0]
        if len(same) == 1:
            ids = sorted(listed.ids)
            rows = zip(ids, repeat(fp), repeat(d), *([repeat(jaccard)] if verified else []))
        else:
            ranked = [(doc_id, g.fingerprint, d, jaccard) for g in same for doc_id in g.listed.ids]
            ranked.sort(key=itemgetter(0))  # stable: an id listed twice keeps the order met
            rows = iter(ranked) if verified else (row[:3] for row in ranked)
        out.extend(map(new, repeat(kind), rows))
    return out


def reported(doc_id: str, groups: list[Group]) -> Match | VerifiedMatch | None:
    """`results.duplicate_of(doc_id, matches_of(groups))` without a match per id listed."""
    if not groups:
        return None
    ranked = sorted(groups, key=_rank) if len(groups) > 1 else groups
    chosen = next((group for group in ranked if group.listed.has(doc_id)), None)
    if chosen is None:
        best, chosen = _rank(ranked[0]), ranked[0]
        for group in ranked[1:]:
            if _rank(group) != best:
                break
            if group.listed.least() < chosen.listed.least():
                chosen = group
        doc_id = chosen.listed.least()
    if chosen.jaccard is None:
        return Match(doc_id, chosen.fingerprint, chosen.distance)
    return VerifiedMatch(doc_id, chosen.fingerprint, chosen.distance, chosen.jaccard)
