"""Bulk loading: texts fingerprinted on every core, written by `bulk_add` (large loads from files) or
`add_many` (small loads, standard input, unique loads); idempotent, so running a load again resumes it.
Ids named again within one load with another text are told from updates of an earlier run's documents by a
64-bit hash of every id the load has written (8 bytes an id, in sorted runs merged as they grow)."""

from __future__ import annotations

import enum
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from ..checks import is_int
from ..errors import IndexNotFound, InputError, InvalidArgument, TooManyErrors
from ..fingerprinting.banded_odd import storing
from ..index import Match, Outcome, SimhashIndex, VerifiedIndex, VerifiedMatch
from ..index.batches import DEFAULT_WINDOW, column_windows
from .arrow import ArrowRows
from .dedupe import DryRun, Pair, VerifiedDryRun
from .fingerprinter import Fingerprinter
from .jsonlines import JsonLines
from .readers import STDIN, ReadOptions, Record, check_inputs, holds_at_least, precomputed, read_chunks

__all__ = ["BULK_MIN", "Bulk", "LoadStats", "Loader"]

#: Lines (or documents) a load from files must reach before `Bulk.AUTO` takes the bulk path: below it
#: the grouped commands carry about one entry per key, and the atomic path is as fast and keeps the
#: counts current.
BULK_MIN = 100_000
#: Seconds a bulk window fills before it is written though not full: when fingerprinting sets the pace,
#: the counts and the progress move, and an interruption loses at most these seconds of work.
WINDOW_SECONDS = 2.0
#: Documents a window cut by time holds at least: fewer would lose the grouping the bulk path is for.
WINDOW_MIN = 10_000

#: The fields of `LoadStats.as_dict`, with elapsed seconds and docs/s.
_COUNTS = ("read", "added", "replaced", "unchanged", "duplicates", "errors", "written", "repeated", "bulk")
#: A batch of a load: ids, fingerprints, and (a verified index) sketches.
GoodBatch = tuple[list[str], list[int], list[bytes] | None]
#: What a load reads: records and their errors, or runs of them (`read_chunks`).
Units = Iterable[Record | InputError | JsonLines | ArrowRows]


class Bulk(enum.Enum):
    """Which write path a load takes.

    AUTO: `bulk_add` for a load from files of `BULK_MIN` lines or more, else (and for standard input)
    `add_many`. ON: `bulk_add`. OFF: `add_many`, batch by batch, when other writers may write the same
    ids during the load (docs/guarantees.md).
    """

    AUTO = "auto"
    ON = "on"
    OFF = "off"


@dataclass
class LoadStats:
    """What a load has done so far; every count is of acknowledged writes.

    Attributes:
        added: new ids stored (with dry_run: that would be stored).
        unchanged: ids already stored with the same fingerprint (all of them, when a load is resumed).
        duplicates: documents not stored because a near-duplicate was (unique loads only).
        sent: documents handed to a write (written, or being written).
        total: the expected number of records, when known.
        repeated: writes that replaced a document this load had written (an id named twice, in two
            inputs or one, with another text); counted in loads of several inputs.
        started: time.monotonic() at the start.
    """

    read: int = 0
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    duplicates: int = 0
    errors: int = 0
    written: int = 0
    sent: int = 0
    total: int | None = None
    bulk: bool = False
    repeated: int = 0
    repeated_ids: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        return self.written / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def in_flight(self) -> int:
        """Documents being written but not acknowledged: after an interruption, some may be stored."""
        return self.sent - self.written

    def as_dict(self) -> dict[str, float | int | bool | None]:
        """The counts, elapsed seconds and docs/s, for JSON output."""
        counts: dict[str, float | int | bool | None] = {name: getattr(self, name) for name in _COUNTS}
        return {**counts, "elapsed": round(self.elapsed, 3), "docs_per_s": round(self.rate, 1)}


class Loader:
    """Loads records into an index: texts fingerprinted in parallel, writes grouped or batched, idempotent.

    Args:
        workers: fingerprinting processes (default: every core); 1 fingerprints in this process.
        batch_size: documents per fingerprinting chunk and per `add_many` batch.
        max_errors: stop (raising TooManyErrors) when more records than this are bad; None: never.
        unique: store only documents with no near-duplicate in the index or earlier in the load
            (`SimhashIndex.add_many(unique=True)`); the others are reported through on_duplicate.
        dry_run: with unique, write nothing: check against the index and the load's own documents.
        fp_base: how precomputed fingerprints are written, see `parse_fingerprint`.
        bulk: the write path (see `Bulk`); unique loads always take `add_many`. A verified index's
            documents are written with their sketches (computed by the workers too) either way.
        window: documents per `bulk_add` window.
        on_progress: called with the stats after each acknowledged batch or window.
        on_duplicate: called with each near-duplicate pair (unique loads).

    Raises:
        InvalidArgument: an argument is out of range, or bulk=ON with unique.
    """

    def __init__(
        self,
        index: SimhashIndex | VerifiedIndex,
        *,
        workers: int | None = None,
        batch_size: int | None = None,
        max_errors: int | None = None,
        unique: bool = False,
        dry_run: bool = False,
        fp_base: str = "auto",
        bulk: Bulk = Bulk.AUTO,
        window: int = DEFAULT_WINDOW,
        on_error: Callable[[InputError], None] | None = None,
        on_progress: Callable[[LoadStats], None] | None = None,
        on_duplicate: Callable[[Pair], None] | None = None,
    ) -> None:
        self.index = index = index.index if isinstance(index, VerifiedIndex) else index
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.batch_size = batch_size or index.batch_size
        if self.workers < 1 or self.batch_size < 1:
            raise InvalidArgument("workers and batch_size must be at least 1")
        if not is_int(window) or window < 1:
            raise InvalidArgument(f"window must be a positive int, got {window!r}")
        if dry_run and not unique:
            raise InvalidArgument("dry_run needs unique")
        if unique and bulk is Bulk.ON:
            raise InvalidArgument("a unique load checks every document against the index: it cannot be bulk")
        #: The index's verified form when it is one: every document is written with its sketch.
        self.verified = VerifiedIndex(index) if index.config.verification is not None else None
        self.max_errors, self.unique, self.window = max_errors, unique, window
        self.dry_run: DryRun | VerifiedDryRun | None = None
        if dry_run:
            self.dry_run = DryRun(index) if self.verified is None else VerifiedDryRun(self.verified)
        self.bulk = Bulk.OFF if unique else Bulk(bulk)
        self.on_error, self.on_progress, self.on_duplicate = on_error, on_progress, on_duplicate
        self.stats = LoadStats()
        hasher = None if self.verified is None else self.verified.hasher
        if hasher is not None and not unique:  # stored, never judged: no query sketch needed
            hasher = storing(hasher)
        self._fingerprinter = Fingerprinter(
            index.scheme, index.f, fp_base, self.workers, self.batch_size, hasher
        )
        self._fatal: InputError | None = None
        #: Ids written by this load: in a unique load, to tell a copy of its own earlier row from its resumed
        #: write; in a load of several inputs, to tell its own replacements (`_several`).
        self._written = RepeatedIds() if unique else None
        self._several = False
        self._window_ids: list[str] = []

    def run(self, records: Units) -> LoadStats:
        """Load every record; bad ones are reported and skipped.

        Args:
            records: what `read_all` yields (or `read_chunks`: runs of JSON lines are parsed by the
                fingerprinting workers). With `Bulk.AUTO`, records given here are treated as a stream
                (the `add_many` path); `load` decides from the inputs.

        Returns:
            The final stats (also in `self.stats`, which stays current if this raises).

        Raises:
            TooManyErrors: more than max_errors bad records; the records before the last one are written.
            InputError: an input could not be read to its end (truncated gzip data): reported like any bad
                record, then raised once everything else is loaded.
            IndexNotFound: the index was dropped (or its meta key deleted) during the load.
            RedisUnavailable: the server failed; run the same load again to resume.
            SimhashRedisError: a fingerprinting worker process died.
            KeyboardInterrupt: passed on after the workers are stopped; `self.stats` tells what was done.
        """
        return self._run(records, Bulk.OFF if self.bulk is Bulk.AUTO else self.bulk)

    def load(
        self, paths: Sequence[str], fmt: str | None = None, options: ReadOptions | None = None
    ) -> LoadStats:
        """Read and load the inputs: the same records, errors (in input order), stats and end state as
        ``run(read_all(paths, fmt, options))``, JSON Lines parsed where they are fingerprinted.

        Raises:
            InvalidArgument, OSError: as `read_all`, before anything is loaded; also precomputed
                fingerprints for a verified index (its sketches need the texts).
            TooManyErrors, IndexNotFound, RedisUnavailable, SimhashRedisError, KeyboardInterrupt: as `run`.
        """
        if self.verified is not None and precomputed(paths, fmt, options):
            # Refused once, not line by line: no line of such an input could be loaded.
            raise InvalidArgument(
                f"index {self.index.name!r} is verified: each document's sketch needs its text, so it cannot "
                "load precomputed fingerprints"
            )
        chunks = read_chunks(paths, fmt, options or ReadOptions(), self.batch_size)
        check_inputs(paths, fmt)  # at once, not at the first record
        if len(paths) > 1 and self.dry_run is None:
            self._several, self._written = True, self._written or RepeatedIds()
        mode = self.bulk
        if mode is Bulk.AUTO:
            # Decided now, so that writing overlaps fingerprinting; else held until BULK_MIN (gzip, a pipe).
            enough = False if STDIN in paths else holds_at_least(paths, fmt, options, BULK_MIN)
            mode = mode if enough is None else Bulk.ON if enough else Bulk.OFF
        return self._run(chunks, mode)

    def _run(self, records: Units, mode: Bulk) -> LoadStats:
        try:
            batches = self._good_batches(records)
            if mode is Bulk.OFF:
                for batch in batches:
                    self._write(*batch)
            else:
                self._write_bulk(batches, mode)
            if self.stats.written and self.dry_run is None:
                self._check_index()
        finally:
            self._fingerprinter.close()
        if self._too_many():
            raise TooManyErrors(
                f"stopped after {self.stats.errors} bad records (more than --max-errors {self.max_errors})"
            )
        if (fatal := self._fatal) is not None:
            reason = "this input could not be read to its end (truncated or corrupt); everything else was "
            reason += "loaded: replace it, then run the same command again"
            raise InputError(fatal.source, fatal.line, reason, fatal=True)
        return self.stats

    def _good_batches(self, records: Units) -> Iterator[GoodBatch]:
        """Each batch's ids, fingerprints and sketches, its errors reported, up to the one past max_errors."""
        for ids, fps, errors, sketches in self._fingerprinter.batches(records):
            for position, error in errors:
                self.stats.errors += 1
                if self.on_error is not None:
                    self.on_error(error)
                if error.fatal:  # the rest of that input is lost: the load goes on, then fails
                    self._fatal = self._fatal or error
                if self._too_many():
                    del ids[position:], fps[position:]
                    if sketches is not None:
                        del sketches[position:]
                    break
            self.stats.read += len(ids)
            if ids:
                yield ids, fps, sketches
            if self._too_many():
                return

    def _write_bulk(self, batches: Iterator[GoodBatch], mode: Bulk) -> None:
        if mode is Bulk.AUTO:
            head: list[GoodBatch] = []
            held = 0
            for batch in batches:
                head.append(batch)
                held += len(batch[0])
                if held >= BULK_MIN:
                    break
            if held < BULK_MIN:  # batches of batch_size documents at most, as the add_many path writes them
                for batch in head:
                    self._write(*batch)
                return
            batches = itertools.chain(head, batches)
        self.stats.bulk = True
        for ids, fps, sketches in self._windows(batches):
            self.stats.sent += len(ids)
            self._window_ids = ids
            try:
                if self.verified is None or sketches is None:
                    self.index.bulk_add_columns([(ids, fps)], window=len(ids), on_progress=self._window_done)
                else:
                    self._window_done(len(ids), self.verified.bulk_add_sketched(ids, fps, sketches))
            except IndexNotFound:
                self._check_index()  # the load's own words, as `_write`
                raise

    def _windows(self, batches: Iterator[GoodBatch]) -> Iterator[GoodBatch]:
        """Windows of `window` documents, or fewer (`WINDOW_MIN` at least) once one has been filling for
        `WINDOW_SECONDS`; the time starts again when the caller asks for the next window."""
        least = min(WINDOW_MIN, self.window)
        started = time.monotonic()
        held: list[list[Any]] = []
        # A plain index's batches carry no sketches: two columns, a verified one's three.
        columns = ((ids, fps) if sketches is None else (ids, fps, sketches) for ids, fps, sketches in batches)
        for part in column_windows(columns, least):
            if not held:
                held = list(part)
            else:
                for mine, more in zip(held, part, strict=True):
                    mine.extend(more)
            if len(held[0]) >= self.window or time.monotonic() - started >= WINDOW_SECONDS:
                yield _batch([column[: self.window] for column in held])
                held = [column[self.window :] for column in held]
                started = time.monotonic()
        if held and held[0]:
            yield _batch(held)

    def _window_done(self, done: int, outcomes: list[Outcome]) -> None:
        # After each window: a vanished index stops the load before it writes again.
        self._check_index()
        self._count(self._window_ids, outcomes)

    def _too_many(self) -> bool:
        return self.max_errors is not None and self.stats.errors > self.max_errors

    def _write(self, ids: list[str], fps: list[int], sketches: list[bytes] | None) -> None:
        outcomes: Sequence[Outcome | Match | VerifiedMatch]
        self.stats.sent += len(ids)
        items = list(zip(ids, fps, strict=True))
        if isinstance(self.dry_run, VerifiedDryRun):
            if sketches is None:  # never written instead: a dry run writes nothing
                raise InvalidArgument(f"index {self.index.name!r} is verified: its dry run needs the texts")
            outcomes = self.dry_run(items, sketches)
        elif self.dry_run is not None:
            outcomes = self.dry_run(items)
        else:
            try:
                if self.verified is not None and sketches is not None:
                    outcomes = self.verified.add_sketched(ids, fps, sketches, unique=self.unique)
                else:
                    add = self.index.add_many
                    outcomes = add(items, unique=True) if self.unique else add(items)
            except IndexNotFound:  # the index checks its meta before each batch, once a second at most
                self._check_index()  # the load's own words: what was acknowledged may be gone
                raise
        self._count(ids, outcomes)

    def _check_index(self) -> None:
        """Raise IndexNotFound if the index's meta is gone: writes would go on, but no worker could open the
        index again."""
        if not SimhashIndex.exists(self.index.client, self.index.name, prefix=self.index.prefix):
            raise IndexNotFound(
                f"index {self.index.name!r} vanished during the load (dropped, its meta key deleted or the "
                f"database flushed); {self.stats.written:,} documents acknowledged before may be gone: "
                "run `verify` to see what is left, then create the index and load again"
            )

    def _count(self, ids: Sequence[str], outcomes: Sequence[Outcome | Match | VerifiedMatch]) -> None:
        stats = self.stats
        kinds = Counter(outcomes)  # counted in C: a bulk window holds 10^5 outcomes
        matched = not all(isinstance(kind, Outcome) for kind in kinds)
        written = self._written
        replaced = Outcome.REPLACED in kinds
        earlier = written.earlier(ids) if written is not None and (matched or replaced) else None
        if written is not None:
            written.written(ids, outcomes, earlier)
            if self._several:
                stats.repeated, stats.repeated_ids = written.count, written.first
        for kind, times in kinds.items():
            if kind is Outcome.ADDED:
                stats.added += times
            elif kind is Outcome.REPLACED:
                stats.replaced += times
            elif isinstance(kind, Outcome):
                stats.unchanged += times
        if matched:  # documents not stored
            for position, (doc_id, outcome) in enumerate(zip(ids, outcomes, strict=True)):
                if isinstance(outcome, Outcome):
                    continue
                occurrence = 0 if earlier is None else earlier[position]
                if outcome.id == doc_id and not occurrence:
                    stats.unchanged += 1  # already stored by an earlier (interrupted) run
                    continue
                # Else another document's near-duplicate, or a copy of an earlier row of its id in this run.
                stats.duplicates += 1
                if self.on_duplicate is not None:
                    similar = outcome.jaccard if isinstance(outcome, VerifiedMatch) else None
                    self.on_duplicate(Pair(doc_id, outcome.id, outcome.distance, similar, occurrence))
        stats.written += len(outcomes)
        if self.on_progress is not None:
            self.on_progress(stats)


def _batch(columns: list[list[Any]]) -> GoodBatch:
    return columns[0], columns[1], columns[2] if len(columns) > 2 else None


class RepeatedIds:
    """The ids of one load that replaced a document the same load had written (the first `keep` by name)."""

    def __init__(self, keep: int = 5) -> None:
        #: How many writes replaced a document of this load, and the first `keep` of their ids.
        self.keep, self.count = keep, 0
        self.first: list[str] = []
        self._runs: list[npt.NDArray[np.uint64]] = []

    def written(self, ids: Sequence[str], outcomes: Sequence[object], earlier: list[int] | None) -> None:
        """Note a written batch: each id, in the order written, with its outcome (a `Match` if not stored)
        and (where any was REPLACED) `earlier`'s count of its writes before."""
        if not ids:
            return
        for position, outcome in enumerate(outcomes):
            if outcome is Outcome.REPLACED and earlier is not None and earlier[position]:
                self.count += 1
                if len(self.first) < self.keep and ids[position] not in self.first:
                    self.first.append(ids[position])
        self._runs.append(np.sort(_hashes(ids)))
        # Merged like a binary counter: a few runs of growing sizes, each id sorted O(log n) times.
        while len(self._runs) > 1 and len(self._runs[-2]) <= 2 * len(self._runs[-1]):
            last = self._runs.pop()
            self._runs[-1] = np.sort(np.concatenate((self._runs[-1], last)))

    def earlier(self, ids: Sequence[str]) -> list[int]:
        """How many times each id of a batch (before `written` notes it) was written before: in the batches
        noted, and earlier in this one."""
        before = np.zeros(len(ids), dtype=np.int64)
        hashes = _hashes(ids)
        for run in self._runs:
            before += np.searchsorted(run, hashes, "right") - np.searchsorted(run, hashes, "left")
        met: Counter[str] = Counter()
        counts = []
        for doc_id, times in zip(ids, before.tolist(), strict=True):
            counts.append(times + met[doc_id])
            met[doc_id] += 1
        return counts


def _hashes(ids: Sequence[str]) -> npt.NDArray[np.uint64]:
    return np.fromiter(
        (xxhash.xxh3_64_intdigest(doc_id.encode("utf-8", "surrogatepass")) for doc_id in ids),
        dtype=np.uint64,
        count=len(ids),
    )
