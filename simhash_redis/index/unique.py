"""Add-if-new: read, check and write until each document is stored or found to have a near-duplicate; a
round's documents written in one script call, each guard expecting what the documents before it add."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence

from ..codec import encode_fp
from ..errors import WriteContention
from ..fingerprinting import BandedOddSketcher, Sketcher
from ..results import Match, Outcome, VerifiedMatch
from ..store import BucketLocks, Guard, KeySchema, Reads, SketchedGuard, Store, Verification, Write, Writes
from ..store.candidates import Group, Listed, reported
from ..store.windows import WindowedSets
from ..transport import Backoff, off_greenlet, pause

__all__ = ["InBatch", "SketchJudge", "UniqueWrites", "confirmed_many"]


class InBatch:
    """The sets one round's writes add their fingerprints to, in the order the write script applies them;
    `near` decides which candidates count (default: every one within k), `bands` are band table keys."""

    def __init__(
        self,
        store: Store,
        reads: Reads,
        fps: Sequence[int],
        f: int,
        k: int,
        bands: dict[int, list[bytes]] | None,
        near: SketchJudge | None,
    ) -> None:
        self.keys, self.windows, self.fps, self.f, self.k = store.keys, reads.windows, fps, f, k
        self.bands, self.near = bands or {}, near
        # The writes go into the current period (after a period boundary, the guards fail: read again).
        self.current = self.windows.view().current if self.windows is not None else None
        schema = self.keys
        if self.windows is not None and self.current is not None:
            schema = self.windows.schema(self.current)
        self._tables: Callable[[int], list[bytes]] = schema.table_builder()
        # set key -> the first fingerprint admitted documents add to it; for keys that get more (pages of
        # one template), all of them, in order (most keys get one: no container for it).
        self._first: dict[bytes, int] = {}
        self._more: dict[bytes, dict[int, None]] = {}
        # the fingerprints admitted this round -> the first document admitted with each, and the others.
        self._admitted: dict[int, int] = {}
        self._also: dict[int, list[int]] = {}
        self._encoded: dict[int, bytes] = {}

    def admit(self, doc: int, sets: Guard, tables: list[bytes] | None = None) -> Guard | None:
        """The guard to write a document with after those admitted before it, or None to leave it to the
        next round (an earlier document of the batch is its near-duplicate)."""
        fp, first = self.fps[doc], self._first
        if tables is None or self.windows is not None:
            tables = self._tables(fp)
        written = tables + self.bands.get(doc, [])
        if any(key in first for key in written):
            if self._near(doc, written):
                return None
            sets = self._expecting(doc, sets, written)
        owner = self._admitted.setdefault(fp, doc)
        if owner != doc:
            self._also.setdefault(fp, []).append(doc)
        for key in written:
            owner = first.setdefault(key, fp)
            if owner != fp:
                self._more.setdefault(key, {owner: None})[fp] = None
        return sets

    def _added(self, key: bytes) -> Sequence[int]:
        """The fingerprints the documents admitted so far add to a set, in order."""
        more = self._more.get(key)
        if more is not None:
            return list(more)
        first = self._first.get(key)
        return () if first is None else (first,)

    def _expecting(self, doc: int, sets: Guard, written: list[bytes]) -> Guard:
        """The guard of a document whose sets earlier admitted documents add to: read, plus those."""
        keys = written
        if isinstance(sets, WindowedSets) and self.windows is not None:
            # Guarded in every period read: the current one's sets are among them.
            fp, schema = self.fps[doc], self.windows.schema
            keys = [key for window in sets.windows for key in schema(window).tables(fp)]
            # Then each period's band values (verified mode): only the current period's get this round's.
            bands = self.bands.get(doc, [])
            none = [b""] * len(bands)
            keys += [key for window in sets.windows for key in (bands if window == self.current else none)]
        if len(keys) != len(sets):
            return sets
        expected = []
        for members, key in zip(sets, keys, strict=True):
            more = self._added(key)
            if more:
                have = set(members)
                members = list(members) + [e for e in map(self._encode, more) if e not in have]
            expected.append(members)
        return WindowedSets(expected, sets.windows) if isinstance(sets, WindowedSets) else expected

    def _near(self, doc: int, written: list[bytes]) -> bool:
        """Whether a document admitted before doc is a candidate of it that `near` confirms."""
        fp, added, tables = self.fps[doc], self._added, len(written) - len(self.bands.get(doc, ()))
        tabled = {other for key in written[:tables] for other in added(key)}
        found = {other for other in tabled if (fp ^ other).bit_count() <= self.k}
        found.update(other for key in written[tables:] for other in added(key))
        if not found:
            return False
        if self.near is None:
            return True
        admitted, also = self._admitted, self._also
        return self.near.confirms(
            doc, sorted(j for other in found for j in [admitted[other], *also.get(other, ())])
        )

    def _encode(self, fp: int) -> bytes:
        encoded = self._encoded.get(fp)
        if encoded is None:
            encoded = self._encoded[fp] = encode_fp(fp, self.f)
        return encoded


# Read-check-write rounds of add-if-new while other workers keep writing into the same tables.
_UNIQUE_ROUNDS = 40
_CONTENTION_BACKOFF = Backoff(retries=_UNIQUE_ROUNDS, base=0.0005, cap=0.25)


class UniqueWrites:
    """Stores documents only where no near-duplicate is stored, race-free among workers."""

    def __init__(self, store: Store, reads: Reads, writes: Writes, f: int, k: int) -> None:
        self.store, self.reads, self.writes, self.f, self.k = store, reads, writes, f, k
        self.table_keys = store.keys.table_builder()

    def add(
        self, ids: list[bytes], fps: list[int], judge: SketchJudge | None = None
    ) -> list[Outcome | Match | VerifiedMatch]:
        """For each document, its outcome once stored, else its stored near-duplicate (by `judge`'s rule;
        default: any within k); WriteContention if documents keep meeting concurrent writes.

        On a standalone server the write script re-checks the sets the client read (the guard); on a
        cluster the documents' table buckets are locked from the read to the write instead.
        """
        results: list[Outcome | Match | VerifiedMatch | None] = [None] * len(ids)
        pending = list(range(len(ids)))
        delays = _CONTENTION_BACKOFF.delays()
        locks = BucketLocks(self.store) if self.store.cluster else None
        # On a cluster, try for longer than a lock lives (a crashed worker's is waited out), and longer
        # again whenever a lock a document waits for changes hands (others progress).
        wait = locks.ttl_ms / 1000 + 5 if locks is not None else 0
        patience = time.monotonic() + wait
        blockers: dict[int, bytes] = {}
        siblings = False
        # The documents a round takes, halved after a round that settles none (doubled after one that
        # settles all): a shorter round meets fewer writes, and fewer turns of a retention period.
        limit = len(pending)
        retries = 0  # rounds that left documents of their own to try again
        try:
            for _ in itertools.count():
                if retries >= _UNIQUE_ROUNDS and time.monotonic() > patience:
                    break
                part = pending[:limit]
                left, ordered = self._round(ids, fps, judge, locks, part, results)
                pending = left + pending[limit:]
                if not pending:
                    return results  # type: ignore[return-value]
                if not left:
                    limit *= 2  # this part is done: the next one, larger, at once
                    continue
                if ordered:  # left only to be written in batch order, after the ones written: at once
                    continue
                retries += 1
                if len(left) == len(part):
                    limit = max(1, limit // 2)
                if locks is not None:
                    if any(blockers.get(doc, holder) != holder for doc, holder in locks.blockers.items()):
                        patience = max(patience, time.monotonic() + wait)
                    blockers = dict(locks.blockers)
                    # Waiting only for this batch's own documents, unlocked by now: no pause.
                    own = locks.token + b":"
                    siblings = all(blockers.get(doc, b"").startswith(own) for doc in left)
                if not siblings:
                    # Others keep writing into these tables: let them finish before reading again.
                    pause(next(delays, None) or random.uniform(0, _CONTENTION_BACKOFF.cap))
        finally:
            if locks is not None and locks.kept:  # given up, or an error: nothing stays locked
                locks.release_kept()
        raise WriteContention(
            f"{len(pending)} documents kept meeting concurrent writes to their tables; "
            "nothing of them was written"
        )

    def _round(
        self,
        ids: Sequence[bytes],
        fps: Sequence[int],
        judge: SketchJudge | None,
        locks: BucketLocks | None,
        pending: list[int],
        results: list[Outcome | Match | VerifiedMatch | None],
    ) -> tuple[list[int], bool]:
        """One read-check-write round over the pending documents; those to try again next round, and
        whether each was left only to keep the batch's order (no write or lock got in its way)."""
        ready, waiting, held = pending, [], list[tuple[bytes, bytes]]()
        banded = judge.bands(pending) if judge is not None else None
        bands_of = dict(zip(pending, banded, strict=True)) if banded is not None else None
        if locks is not None:
            # The band tables a judge reads are candidates' sets too: locked like the tables.
            got, held = locks.acquire(
                [(i, self.store.keys.tables(fps[i]) + (bands_of[i] if bands_of else [])) for i in pending]
            )
            ready = [i for i, ok in zip(pending, got, strict=True) if ok]
            waiting = [i for i, ok in zip(pending, got, strict=True) if not ok]
        try:
            sketches: dict[str, bytes] | None = None if judge is None else {}
            bands = judge.band_places(ready) if judge is not None and bands_of is not None else None
            read = [fps[i] for i in ready]
            # Table keys built once, for the read, the guard and the write (without a retention window).
            tables = list(map(self.table_keys, read)) if self.reads.windows is None else None
            # Matches as groups: a page stored under thousands of ids is one, not a Match per id.
            members, groups_read = self.reads.near_and_members(read, self.k, sketches, bands, tables)
            found: Sequence[list[Group]] = groups_read
            read_of = dict(zip(ready, groups_read, strict=True))
            if judge is not None and sketches is not None:
                found = judge.duplicates(ready, groups_read, sketches)
            writes: list[Write] = []
            writing: list[int] = []
            written_keys: list[list[bytes]] = []
            changed: list[int] = []
            again: list[tuple[bytes, bytes]] = []
            # One script call writes the round: each guard expects what the documents before it add.
            batch = None if locks else InBatch(self.store, self.reads, fps, self.f, self.k, bands_of, judge)
            # One write of an id a round, in batch order: a document of an id written or left earlier in the
            # round, or matching an id the round rewrites, waits for the next round, as does every document
            # after it: what a round settles, add-if-new one at a time would. (A cluster's documents after
            # one waiting for a lock go on: holding them would make each wait a round.)
            rewritten: dict[str, int] = {}
            behind: list[int] = []  # held to keep the batch's order
            left = {ids[i].decode(): i for i in reversed(waiting)}
            holding = False
            keys_of: Sequence[list[bytes] | None] = tables or [None] * len(ready)
            for i, sets, groups, table_keys in zip(ready, members, found, keys_of, strict=True):
                doc_id = ids[i].decode()
                holding = holding or (
                    doc_id in rewritten
                    or left.get(doc_id, i) < i
                    or any(group.listed.conflicts(rewritten, group.fingerprint) for group in groups)
                )
                if holding:
                    behind.append(i)
                elif groups:
                    results[i] = duplicate = reported(doc_id, groups)
                    if duplicate is not None:
                        again.append((duplicate.id.encode(), encode_fp(duplicate.fingerprint, self.f)))
                else:
                    guard: Guard | None = None
                    if batch is not None:
                        guard = batch.admit(i, sets, table_keys)
                        if guard is None:  # near an earlier document of this call: found next round
                            changed.append(i)
                            left.setdefault(doc_id, i)
                            continue
                    if judge is not None:
                        guard = judge.guarded(i, guard)
                    writes.append((ids[i], encode_fp(fps[i], self.f), guard))
                    writing.append(i)
                    rewritten[doc_id] = fps[i]
                    if table_keys is not None:
                        written_keys.append(table_keys)
            if locks is not None and writing:
                # A lock that expired since the read may have let a near-duplicate in: read again.
                still = locks.renew(writing)
                changed += [i for i, ok in zip(writing, still, strict=True) if not ok]
                writes = [w for w, ok in zip(writes, still, strict=True) if ok]
                writing = [i for i, ok in zip(writing, still, strict=True) if ok]
            if locks is not None or len(written_keys) != len(writes):
                written_keys = []  # a cluster's writes (some may have been dropped) build their own
            # Every document a near-duplicate: nothing to write, and no write round trip either.
            applied = (
                self.writes.apply(writes, [fps[i] for i in writing], written_keys or None) if writes else []
            )
            self.writes.seen(again)
            for i, outcome in zip(writing, applied, strict=True):
                # None: a table set changed since it was read. UNCHANGED for an id the read did not find:
                # another worker stored this very document since, and the next read reports it.
                raced = outcome is Outcome.UNCHANGED and not any(
                    group.listed.has(ids[i].decode()) for group in read_of[i]
                )
                if outcome is None or raced:
                    changed.append(i)
                else:
                    results[i] = outcome
        finally:
            if locks is not None:
                locks.release(held)
        # In batch order: of near-duplicates within the batch, the earlier is the one stored.
        return sorted(changed + waiting + behind), not changed and not waiting


# From this many queries, one numpy pass for all their candidates (below, numpy's fixed costs dominate).
_PAIRS_MIN = 64


class SketchJudge:
    """Add-if-new's judge in verified mode: of the candidates within k, those its sketches confirm count as
    near-duplicates (docs: positions in the batch)."""

    def __init__(
        self,
        hasher: Sketcher,
        threshold: float,
        verification: Verification,
        keys: KeySchema,
        sketches: list[bytes],
    ) -> None:
        self.hasher, self.threshold, self.verification, self.keys = hasher, threshold, verification, keys
        self.sketches = sketches

    def duplicates(
        self, docs: list[int], found: list[list[Group]], stored: dict[str, bytes]
    ) -> list[list[Group]]:
        """The near-duplicates among each document's candidates."""
        queries = [self.sketches[i] for i in docs]
        return confirmed_many(self.hasher, queries, found, stored, self.threshold)

    def bands(self, docs: list[int]) -> list[list[bytes]] | None:
        """The band tables whose members are candidates of the documents, or None."""
        mode, keys = self.verification, self.keys
        return [keys.bands(self.sketches[i], mode) for i in docs] if mode.bands else None

    def band_places(self, docs: list[int]) -> list[list[tuple[bytes, bytes]]] | None:
        """Where `bands`' band values are read: (bucket hash, field) each, or None."""
        mode, keys = self.verification, self.keys
        return [keys.band_places(self.sketches[i], mode) for i in docs] if mode.bands else None

    def guarded(self, doc: int, members: Guard | None) -> Guard:
        """The document's guard, carrying its sketch: stored with the document, or not at all."""
        return SketchedGuard(members, self.hasher.stored(self.sketches[doc]))

    def confirms(self, doc: int, earlier: list[int]) -> bool:
        """Whether any of the earlier documents of the batch is its near-duplicate."""
        stored = self.hasher.stored
        estimates = self.hasher.estimate_many(self.sketches[doc], [stored(self.sketches[j]) for j in earlier])
        return bool((estimates >= self.threshold).any())


def confirmed_many(
    hasher: Sketcher,
    queries: Sequence[bytes],
    candidates: Sequence[list[Group]],
    stored: dict[str, bytes],
    threshold: float,
) -> list[list[Group]]:
    """Per query, its candidates' groups split by stored sketch, kept with their estimate where it is at
    least threshold; each distinct sketch estimated once, a batch's odd sketches in one pass."""
    size = hasher.sketch_bytes  # one of another size (verify reports it) is never confirmed
    parts_of: dict[int, list[tuple[bytes, Listed]]] = {}  # by the identity of the ids' list (shared)
    split: list[list[tuple[Group, bytes]]] = []
    distinct: list[list[bytes]] = []
    for groups in candidates:
        mine: list[tuple[Group, bytes]] = []
        for group in groups:
            parts = parts_of.get(id(group.listed))
            if parts is None:
                parts = parts_of[id(group.listed)] = _by_sketch(group.listed, stored, size)
            mine.extend((group._replace(listed=listed), sketch) for sketch, listed in parts)
        split.append(mine)
        distinct.append(list(dict.fromkeys(sketch for _, sketch in mine)))
    if isinstance(hasher, BandedOddSketcher) and len(queries) >= _PAIRS_MIN:
        owners = [q for q, sketches in enumerate(distinct) for _ in sketches]
        others = [one for sketches in distinct for one in sketches]
        flat = off_greenlet(hasher.estimate_pairs, queries, owners, others)  # numpy: crashes in a greenlet
        values, at, estimates = flat.tolist(), 0, []
        for sketches in distinct:
            estimates.append(values[at : at + len(sketches)])
            at += len(sketches)
    else:
        estimates = [
            hasher.estimate_many(query, sketches).tolist() if sketches else []
            for query, sketches in zip(queries, distinct, strict=True)
        ]
    out = []
    for mine, sketches, values in zip(split, distinct, estimates, strict=True):
        of = dict(zip(sketches, map(float, values), strict=True))
        out.append([group._replace(jaccard=of[sketch]) for group, sketch in mine if of[sketch] >= threshold])
    return out


def _by_sketch(listed: Listed, stored: dict[str, bytes], size: int) -> list[tuple[bytes, Listed]]:
    """The ids of a list grouped by their stored sketch of `size` bytes, in the order met."""
    if listed.sketch is not None:  # the lookup read one sketch for them all
        return [(listed.sketch, listed)] if len(listed.sketch) == size else []
    by: dict[bytes, list[str]] = {}
    for doc_id in listed.ids:
        sketch = stored.get(doc_id, b"")
        if len(sketch) == size:
            by.setdefault(sketch, []).append(doc_id)
    if len(by) == 1 and sum(map(len, by.values())) == len(listed.ids):
        return [(sketch, Listed(listed.ids, sketch)) for sketch in by]
    return [(sketch, Listed(ids, sketch)) for sketch, ids in by.items()]
