"""Near-duplicate pairs and groups: a document with a near-duplicate stored (or earlier in the stream) is a
`Pair` and not stored; `groups` turns pairs into connected components ("12 copies of this story");
`near_records` queries many records (``near --file``), a batch per conversation with the server."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import NamedTuple, TypeVar

from ..errors import InputError
from ..index import Match, Outcome, SimhashIndex, VerifiedIndex, VerifiedMatch
from ..results import duplicate_of
from ..store.layout import Layout
from .records import Record, fingerprint_read

__all__ = ["Answer", "DryRun", "Group", "MemoryIndex", "Pair", "VerifiedDryRun", "groups", "near_records"]

M = TypeVar("M", Match, VerifiedMatch)


class Pair(NamedTuple):
    """A near-duplicate: a new document and the stored (or earlier) one it matched."""

    new_id: str
    existing_id: str
    distance: int
    #: The estimated Jaccard similarity, for a verified index's pair; else None.
    jaccard: float | None = None
    #: Which of its id's rows in the run the new document is (0: the first); existing_id is new_id for a
    #: copy of an earlier row of its id.
    occurrence: int = 0


class Group(NamedTuple):
    """A connected component of pairs: the document that was stored first, and its copies."""

    id: str
    copies: tuple[str, ...]

    @property
    def size(self) -> int:
        """Documents in the group, the stored one included."""
        return 1 + len(self.copies)


class MemoryIndex:
    """A small in-process Hamming index over a Redis index's tables (layout), for one batch or run."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._tables: list[dict[int, list[tuple[int, str]]]] = [{} for _ in layout.tables]

    def add(self, doc_id: str, fp: int) -> None:
        for table, key in zip(self._tables, self.layout.keys_of(fp), strict=True):
            table.setdefault(key, []).append((fp, doc_id))

    def within(self, fp: int, k: int) -> list[Match]:
        """Every stored fingerprint within distance k, once each (a match met in several tables too)."""
        found: dict[tuple[str, int], Match] = {}
        for table, key in zip(self._tables, self.layout.keys_of(fp), strict=True):
            for other, doc_id in table.get(key, ()):
                d = (other ^ fp).bit_count()
                if d <= k:
                    found[(doc_id, other)] = Match(doc_id, other, d)
        return list(found.values())


class DryRun:
    """``index.add_many(items, unique=True)`` that writes nothing: new documents are remembered in memory."""

    def __init__(self, index: SimhashIndex) -> None:
        self.index = index
        self.memory = MemoryIndex(index.layout)
        #: The ids the run would have stored, with their fingerprints: their other entries are replaced.
        self.written: dict[str, int] = {}

    def __call__(self, items: Sequence[tuple[str, int]]) -> list[Outcome | Match]:
        """Classify (id, fingerprint) items as ``add_many(items, unique=True)`` would: ADDED, REPLACED or the
        Match.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        out: list[Outcome | Match] = []
        found_all = self.index.near_many([fp for _, fp in items])
        stored = self.index.get_many([doc_id for doc_id, _ in items])
        for (doc_id, fp), found, before in zip(items, found_all, stored, strict=True):
            earlier = sorted(self.memory.within(fp, self.index.k), key=lambda m: (m.distance, m.id))
            match = duplicate_of(doc_id, self.current(found)) or duplicate_of(doc_id, self.current(earlier))
            out.append(self.stored(doc_id, fp, before) if match is None else match)
        return out

    def current(self, matches: list[M]) -> list[M]:
        """The matches whose entries the run has not replaced."""
        return [m for m in matches if self.written.get(m.id, m.fingerprint) == m.fingerprint]

    def stored(self, doc_id: str, fp: int, before: int | None) -> Outcome:
        """The outcome of storing a document (before: its id's fingerprint in the index), remembered."""
        self.memory.add(doc_id, fp)
        replaced = before is not None or doc_id in self.written
        self.written[doc_id] = fp
        return Outcome.REPLACED if replaced else Outcome.ADDED


class VerifiedDryRun(DryRun):
    """``VerifiedIndex.add_sketched(..., unique=True)`` that writes nothing: new documents are remembered in
    memory, with their sketches and band values, and judged as the verified index judges."""

    def __init__(self, verified: VerifiedIndex) -> None:
        super().__init__(verified.index)
        # add-if-new judges every band candidate, and so does its dry run, whatever cap the lookups take.
        capped = verified.max_candidates is not None
        self.verified = VerifiedIndex(verified.index, max_candidates=None) if capped else verified
        self._bands: dict[bytes, list[tuple[str, int]]] = {}
        self._sketches: dict[tuple[str, int], bytes] = {}

    def __call__(  # type: ignore[override]
        self, items: Sequence[tuple[str, int]], sketches: Sequence[bytes]
    ) -> list[Outcome | VerifiedMatch]:
        """Classify items and sketches as ``add_sketched(..., unique=True)`` would: ADDED, REPLACED, a match.

        Raises:
            InvalidArgument: a sketch is missing or of another size.
            RedisUnavailable: the server cannot be reached.
        """
        verified = self.verified
        found = verified.near_sketched([fp for _, fp in items], sketches)
        stored = verified.get_many([doc_id for doc_id, _ in items])
        out: list[Outcome | VerifiedMatch] = []
        for (doc_id, fp), sketch, matches, before in zip(items, sketches, found, stored, strict=True):
            # Its own entry first (stored by an earlier run), as add-if-new reports it.
            matches = self.current(matches)
            match = next((m for m in matches if m.id == doc_id), matches[0] if matches else None)
            match = match or self._earlier(doc_id, fp, sketch)
            if match is None:
                self._sketches[(doc_id, fp)] = verified.hasher.stored(sketch)
                for key in self._band_keys(sketch):
                    self._bands.setdefault(key, []).append((doc_id, fp))
            out.append(self.stored(doc_id, fp, before) if match is None else match)
        return out

    def _earlier(self, doc_id: str, fp: int, sketch: bytes) -> VerifiedMatch | None:
        """The earlier near-duplicate in the run add-if-new would report: of the same id, else the most
        similar (then nearest, then first by id)."""
        candidates = {
            (m.id, m.fingerprint) for m in self.current(self.memory.within(fp, self.verified.index.k))
        }
        candidates.update(
            (i, other)
            for key in self._band_keys(sketch)
            for i, other in self._bands.get(key, ())
            if self.written[i] == other
        )
        if not candidates:
            return None
        pairs = sorted(candidates)
        hasher, threshold = self.verified.hasher, self.verified.threshold
        estimates = hasher.estimate_many(sketch, [self._sketches[pair] for pair in pairs]).tolist()
        confirmed = [
            VerifiedMatch(i, other, (other ^ fp).bit_count(), float(similar))
            for (i, other), similar in zip(pairs, estimates, strict=True)
            if similar >= threshold
        ]
        return min(confirmed, key=lambda m: (m.id != doc_id, -m.jaccard, m.distance, m.id), default=None)

    def _band_keys(self, sketch: bytes) -> list[bytes]:
        return self.verified.store.keys.bands(sketch, self.verified.verification)


def groups(pairs: Iterable[Pair]) -> list[Group]:
    """Connected components of pairs (in the order found), by descending size, then id; each named by the
    stored document its members matched, copies in the order met."""
    parent: dict[str, str] = {}
    order: dict[str, int] = {}
    copies: set[str] = set()

    def find(x: str) -> str:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression keeps long chains cheap
            parent[x], x = root, parent[x]
        return root

    for pair in pairs:
        if pair.new_id == pair.existing_id:
            continue  # a copy of an earlier row of its id: no other document in it
        for doc_id in (pair.existing_id, pair.new_id):
            if doc_id not in parent:
                parent[doc_id] = doc_id
                order[doc_id] = len(order)
        copies.add(pair.new_id)
        a, b = find(pair.existing_id), find(pair.new_id)
        if a != b:
            # the earlier-met root stays the root, so a stored document names its group
            first, second = (a, b) if order[a] <= order[b] else (b, a)
            parent[second] = first
    members: dict[str, list[str]] = {}
    for doc_id in sorted(parent, key=order.__getitem__):
        members.setdefault(find(doc_id), []).append(doc_id)
    result = []
    for ids in members.values():
        heads = [i for i in ids if i not in copies] or ids[:1]
        head = heads[0]
        result.append(Group(head, tuple(i for i in ids if i != head)))
    result.sort(key=lambda g: (-g.size, g.id))
    return result


#: A record and its matches, nearest (or, verified, most similar) first.
Answer = tuple[Record, list[Match] | list[VerifiedMatch]]


def near_records(
    index: SimhashIndex,
    records: Iterable[Record | InputError],
    *,
    verified: VerifiedIndex | None = None,
    k: int | None = None,
    fp_base: str = "auto",
    batch_size: int = 500,
) -> Iterator[Answer | InputError]:
    """Each record's stored near-duplicates, in input order; bad records passed on as their InputError.

    Args:
        verified: ask its confirmed matches instead (texts only).
        k: the largest distance (default: the index's k).
        fp_base: how precomputed fingerprints are written (`parse_fingerprint`).
        batch_size: records per conversation with the server.

    Raises:
        InvalidArgument: k is out of range.
        RedisUnavailable: the server cannot be reached.
    """
    items = iter(records)
    while batch := list(islice(items, batch_size)):
        read = [
            item if isinstance(item, InputError) else _query(item, index.f, fp_base, verified)
            for item in batch
        ]
        queries = [query.doc for query in read if isinstance(query, Record)]
        found: list[list[Match]] | list[list[VerifiedMatch]]
        if verified is not None:
            found = verified.near_many([str(query) for query in queries], k=k)
        else:
            found = index.near_many(queries, k)
        answers: Iterator[list[Match] | list[VerifiedMatch]] = iter(found)
        for item, query in zip(batch, read, strict=True):
            if isinstance(query, InputError):
                yield query
            else:
                assert isinstance(item, Record)
                yield item, next(answers)


def _query(record: Record, f: int, fp_base: str, verified: VerifiedIndex | None) -> Record | InputError:
    """A record as queried: its precomputed fingerprint read (an InputError if it cannot be)."""
    if not record.is_fingerprint:
        return record
    if verified is not None:
        reason = "a verified index confirms matches from the text, not a fingerprint"
        return InputError(record.source, record.line, reason)
    return fingerprint_read(record, f, fp_base)
