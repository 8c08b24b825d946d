"""Bulk loading: parallel fingerprinting and pipelined, idempotent writes of what the readers yield.

`Loader` fingerprints texts in a process pool (the index's scheme is pickled to each worker;
`Loader.load` sends JSON Lines there unparsed, so that parsing runs on every core too) and writes
batches with `SimhashIndex.add_many`. Every write is idempotent (re-adding an id with the same
fingerprint is UNCHANGED), so an interrupted load is resumed by running it again: the loader keeps no
state between runs and needs none.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.pool import Pool

from ..codec import parse_fingerprint
from ..errors import InputError, InvalidArgument, TooManyErrors
from ..fingerprinting import Scheme
from ..index import Match, Outcome, SimhashIndex
from .dedupe import DryRun, Pair
from .readers import (
    FORMATS,
    STDIN,
    JsonLines,
    ReadOptions,
    Record,
    check_inputs,
    detect_format,
    estimate_total,
    read,
    read_all,
    read_chunks,
)

__all__ = [
    # The readers' names, kept here for code written against simhash-redis 0.1's loader module.
    "FORMATS",
    "STDIN",
    "LoadStats",
    "Loader",
    "Pair",
    "ReadOptions",
    "Record",
    "detect_format",
    "estimate_total",
    "read",
    "read_all",
]


# -- parallel fingerprinting ---------------------------------------------------------------------------

_worker_scheme: Scheme | None = None


def _init_worker(scheme: Scheme) -> None:
    # Ctrl-C reaches the whole process group: only the parent reacts, and it stops the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _worker_scheme
    _worker_scheme = scheme


def _fingerprint_texts(texts: list[str]) -> list[int]:
    assert _worker_scheme is not None
    return _worker_scheme.fingerprint_many(texts)


def _parse_in_worker(lines: JsonLines, f: int, fp_base: str) -> list[Record | InputError]:
    assert _worker_scheme is not None
    return _parse_lines(lines, _worker_scheme, f, fp_base)


def _parse_lines(lines: JsonLines, scheme: Scheme, f: int, fp_base: str) -> list[Record | InputError]:
    """The records of a run of JSON lines with their fingerprints computed, errors in place."""
    items = [item if isinstance(item, InputError) else _parsed(item, f, fp_base) for item in lines.records()]
    return _with_fingerprints(items, scheme.fingerprint_many)


def _parsed(record: Record, f: int, fp_base: str) -> Record | InputError:
    """The record with a precomputed fingerprint's text read (other records as they are)."""
    if not (record.is_fingerprint and isinstance(record.doc, str)):
        return record
    try:
        return record._replace(doc=parse_fingerprint(record.doc, f, fp_base))
    except InvalidArgument as exc:
        return InputError(record.source, record.line, str(exc))


def _texts(items: list[Record | InputError]) -> list[str]:
    return [item.doc for item in items if isinstance(item, Record) and isinstance(item.doc, str)]


def _with_fingerprints(
    items: list[Record | InputError], fingerprint_many: Callable[[list[str]], list[int]]
) -> list[Record | InputError]:
    """The items with every text replaced by its fingerprint, in one call of `fingerprint_many`."""
    texts = _texts(items)
    return _filled(items, fingerprint_many(texts)) if texts else items


def _filled(items: list[Record | InputError], fps: list[int]) -> list[Record | InputError]:
    computed = iter(fps)
    return [
        item._replace(doc=next(computed)) if isinstance(item, Record) and isinstance(item.doc, str) else item
        for item in items
    ]


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork is fastest, but forking a process that runs other threads can deadlock the child.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


# -- loading -------------------------------------------------------------------------------------------


@dataclass
class LoadStats:
    """What a load has done so far; every count is of acknowledged writes.

    Attributes:
        read: good records read.
        added: new ids stored (with dry_run: that would be stored).
        replaced: ids that got another fingerprint.
        unchanged: ids already stored with the same fingerprint (all of them, when a load is resumed).
        duplicates: documents not stored because a near-duplicate was (unique loads only).
        errors: bad records reported.
        written: documents whose batch Redis has acknowledged.
        total: the expected number of records, when known.
        started: time.monotonic() at the start.
    """

    read: int = 0
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    duplicates: int = 0
    errors: int = 0
    written: int = 0
    total: int | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        """Documents written per second."""
        return self.written / self.elapsed if self.elapsed > 0 else 0.0

    def as_dict(self) -> dict[str, float | int | None]:
        """The counts, elapsed seconds and docs/s, for JSON output."""
        return {
            "read": self.read,
            "added": self.added,
            "replaced": self.replaced,
            "unchanged": self.unchanged,
            "duplicates": self.duplicates,
            "errors": self.errors,
            "written": self.written,
            "elapsed": round(self.elapsed, 3),
            "docs_per_s": round(self.rate, 1),
        }


class Loader:
    """Loads records into an index: texts fingerprinted in parallel, writes batched and idempotent.

    Args:
        index: the index to write to.
        workers: fingerprinting processes (default: every core); 1 fingerprints in this process.
        batch_size: documents per fingerprinting chunk and per write batch.
        max_errors: stop (raising TooManyErrors) when more records than this are bad; None: never.
        unique: store only documents with no near-duplicate in the index or earlier in the load
            (`SimhashIndex.add_many(unique=True)`); the others are reported through on_duplicate.
        dry_run: with unique, write nothing: check against the index and the load's own documents.
        fp_base: how precomputed fingerprints are written, see `parse_fingerprint`.
        on_error: called with each bad record's InputError.
        on_progress: called with the stats after each acknowledged batch.
        on_duplicate: called with each near-duplicate pair (unique loads).

    Raises:
        InvalidArgument: an argument is out of range.
    """

    def __init__(
        self,
        index: SimhashIndex,
        *,
        workers: int | None = None,
        batch_size: int | None = None,
        max_errors: int | None = None,
        unique: bool = False,
        dry_run: bool = False,
        fp_base: str = "auto",
        on_error: Callable[[InputError], None] | None = None,
        on_progress: Callable[[LoadStats], None] | None = None,
        on_duplicate: Callable[[Pair], None] | None = None,
    ) -> None:
        self.index = index
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.batch_size = batch_size or index.batch_size
        if self.workers < 1 or self.batch_size < 1:
            raise InvalidArgument("workers and batch_size must be at least 1")
        if dry_run and not unique:
            raise InvalidArgument("dry_run needs unique")
        self.max_errors = max_errors
        self.unique = unique
        self.dry_run = DryRun(index) if dry_run else None
        self.fp_base = fp_base
        self.on_error = on_error
        self.on_progress = on_progress
        self.on_duplicate = on_duplicate
        self.stats = LoadStats()
        self._pool: Pool | None = None

    def run(self, records: Iterable[Record | InputError | JsonLines]) -> LoadStats:
        """Load every record; bad ones are reported and skipped.

        Args:
            records: what `read_all` yields (or `read_chunks`: runs of JSON lines are parsed by the
                fingerprinting workers).

        Returns:
            The final stats (also in `self.stats`, which stays current if this raises).

        Raises:
            TooManyErrors: more than max_errors bad records; the records before the last one are written.
            RedisUnavailable: the server failed; run the same load again to resume.
            KeyboardInterrupt: passed on after the pool is stopped; `self.stats` tells what was done.
        """
        # Batches are fingerprinted (and JSON lines parsed) up to `window` ahead of the one being
        # written; every item is accounted for in input order when its batch comes back.
        pending: deque[Callable[[], list[Record | InputError]]] = deque()
        window = 2 * self.workers
        try:
            for unit in self._batches(records):
                pending.append(self._submit(unit))
                while len(pending) > window and not self._too_many():
                    self._finish(pending.popleft()())
                if self._too_many():
                    break
            while pending and not self._too_many():
                self._finish(pending.popleft()())
        finally:
            self._close_pool()
        if self._too_many():
            raise TooManyErrors(
                f"stopped after {self.stats.errors} bad records (more than --max-errors {self.max_errors})"
            )
        return self.stats

    def load(
        self, paths: Sequence[str], fmt: str | None = None, options: ReadOptions | None = None
    ) -> LoadStats:
        """Read and load the inputs; JSON Lines are parsed by the fingerprinting workers, not this process.

        The same records, errors (in input order) and stats as ``run(read_all(paths, fmt, options))``,
        with this process left to read lines and write batches.

        Args:
            paths: the inputs, as for `read_all`.
            fmt: one of `FORMATS`, or None to detect each input's own.
            options: where ids, texts and fingerprints are found.

        Raises:
            InvalidArgument, OSError: as `read_all`, before anything is loaded.
            TooManyErrors, RedisUnavailable, KeyboardInterrupt: as `run`.
        """
        chunks = read_chunks(paths, fmt, options or ReadOptions(), self.batch_size)
        check_inputs(paths, fmt)  # at once, not at the first record
        return self.run(chunks)

    def _batches(
        self, units: Iterable[Record | InputError | JsonLines]
    ) -> Iterator[list[Record | InputError] | JsonLines]:
        # Errors travel in their batch, so they are reported in input order with the records around them.
        batch: list[Record | InputError] = []
        for unit in units:
            if isinstance(unit, JsonLines):
                if batch:
                    yield batch
                    batch = []
                yield unit
                continue
            batch.append(unit)
            if len(batch) >= self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def _too_many(self) -> bool:
        return self.max_errors is not None and self.stats.errors > self.max_errors

    def _submit(self, unit: list[Record | InputError] | JsonLines) -> Callable[[], list[Record | InputError]]:
        """What gives the unit's items with their fingerprints: a result of the pool, or computed here."""
        f, scheme = self.index.f, self.index.scheme
        if isinstance(unit, JsonLines):
            if self._parallel(len(unit.raws)):
                return self._pool_of().apply_async(_parse_in_worker, (unit, f, self.fp_base)).get
            done = _parse_lines(unit, scheme, f, self.fp_base)
            return lambda: done
        items = [item if isinstance(item, InputError) else _parsed(item, f, self.fp_base) for item in unit]
        texts = _texts(items)
        if self._parallel(len(texts)):
            result = self._pool_of().apply_async(_fingerprint_texts, (texts,))
            return lambda: _filled(items, result.get())
        done = _with_fingerprints(items, scheme.fingerprint_many)
        return lambda: done

    def _parallel(self, size: int) -> bool:
        # A handful of documents is not worth starting (or waiting on) the pool.
        return self.workers > 1 and size >= 64

    def _pool_of(self) -> Pool:
        if self._pool is None:
            self._pool = _pool_context().Pool(self.workers, _init_worker, (self.index.scheme,))
        return self._pool

    def _finish(self, items: list[Record | InputError]) -> None:
        """Report a batch's errors and write its records, up to the error that exceeds max_errors."""
        good: list[tuple[str, int]] = []
        for item in items:
            if isinstance(item, InputError):
                self._error(item)
                if self._too_many():
                    break
                continue
            self.stats.read += 1
            assert isinstance(item.doc, int)
            good.append((item.id, item.doc))
        if good:
            self._write(good)

    def _error(self, error: InputError) -> None:
        self.stats.errors += 1
        if self.on_error is not None:
            self.on_error(error)

    def _write(self, items: list[tuple[str, int]]) -> None:
        outcomes: Sequence[Outcome | Match]
        if self.dry_run is not None:
            outcomes = self.dry_run(items)
        elif self.unique:
            outcomes = self.index.add_many(items, unique=True)
        else:
            outcomes = self.index.add_many(items)
        self._count(items, outcomes)
        self.stats.written += len(items)
        if self.on_progress is not None:
            self.on_progress(self.stats)

    def _count(self, items: list[tuple[str, int]], outcomes: Sequence[Outcome | Match]) -> None:
        for (doc_id, _), outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, Match):
                if outcome.id == doc_id:
                    self.stats.unchanged += 1  # already stored by an earlier (interrupted) run
                    continue
                self.stats.duplicates += 1
                if self.on_duplicate is not None:
                    self.on_duplicate(Pair(doc_id, outcome.id, outcome.distance))
            elif outcome is Outcome.ADDED:
                self.stats.added += 1
            elif outcome is Outcome.REPLACED:
                self.stats.replaced += 1
            else:
                self.stats.unchanged += 1

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
