"""Parallel fingerprinting of what the readers yield, in input order, errors in place; a worker that dies
(killed, out of memory) ends the load with an error, not a wait for ever."""

from __future__ import annotations

import contextlib
import copy
import ctypes
import mmap
import multiprocessing
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, NamedTuple, TypeVar

from ..errors import InputError, SimhashRedisError
from ..fingerprinting import Scheme, Sketcher
from .arrow import ArrowRows
from .jsonlines import JsonLines
from .records import Record
from .shared_ring import SharedRing
from .text_rows import (
    Fingerprinted,
    PackedTexts,
    SharedTexts,
    TextRows,
    by_records,
    fingerprints_of,
    parsed,
    placed,
    texts_of,
)

#: Records and bad records in input order, as the readers give them.
Batch = list[Record | InputError]


_T = TypeVar("_T")
#: Seconds `Fingerprinter.close` waits for the pool to wind down (its running batches end on their own).
_CLOSE_WAIT = 5.0
#: Seconds `Fingerprinter.close` waits, where the pool can block for ever, before it unblocks the pool.
_STUCK_WAIT = 1.0
#: Python versions whose broken process pool can block for ever on its call queue (CPython gh-94777,
#: fixed in 3.11.5 and 3.12).
_POOL_LEAVES_FEEDER_BLOCKED = sys.version_info < (3, 11, 5)
#: prctl(2) option: the signal this process gets when its parent dies.
_PR_SET_PDEATHSIG = 1
#: Bytes of shared memory the texts of a table's runs cross to forked workers through, at most and at
#: least: room for the runs in the pool and the one being placed, sized by the first run.
_RING_MOST = 128 << 20
_RING_LEAST = 4 << 20

_worker_scheme: Scheme | None = None
_worker_hasher: Sketcher | None = None
_worker_ring: mmap.mmap | None = None


def _init_worker(scheme: Scheme, parent: int, hasher: Sketcher | None, ring: mmap.mmap | None = None) -> None:
    # A signal to the process group is the parent's to handle: a worker it killed mid-result would hang
    # the pool's reader. The parent's death ends the worker instead (`_end_with`).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _end_with(parent)
    global _worker_scheme, _worker_hasher, _worker_ring
    _worker_scheme, _worker_hasher, _worker_ring = scheme, hasher, ring


def _end_with(parent: int) -> None:
    """End this worker when the process that started it dies (kill -9, OOM killer), instead of waiting
    forever for work: its siblings keep the work queue open, so it would never see an end of file."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: the worker outlives a killed loader, as elsewhere
        return
    if parent > 0 and os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _in_worker(work: Callable[..., _T], unit: object, *rest: object) -> _T:
    """``work(unit, scheme, hasher, *rest)`` with this worker's scheme and hasher."""
    assert _worker_scheme is not None
    return work(unit, _worker_scheme, _worker_hasher, *rest)


def fingerprinted(
    unit: Batch | JsonLines | ArrowRows | TextRows | SharedTexts,
    scheme: Scheme,
    hasher: Sketcher | None,
    f: int,
    fp_base: str,
) -> Fingerprinted:
    """A unit of the input read and fingerprinted: by the compiled core where it can (a run of JSON lines;
    texts in the shared ring, in a forked worker), else a record at a time (`by_records`)."""
    if isinstance(unit, list):
        return by_records(unit, scheme, hasher, f, fp_base)
    if isinstance(unit, SharedTexts):
        assert _worker_ring is not None
        return unit.fingerprinted(_worker_ring, scheme, hasher)
    if not isinstance(unit, JsonLines):
        return (unit.rows() if isinstance(unit, ArrowRows) else unit).fingerprinted(
            scheme, hasher, f, fp_base
        )
    done = unit.fingerprints(scheme, hasher, f, fp_base)
    return by_records(unit.records(), scheme, hasher, f, fp_base) if done is None else done


class _Due(NamedTuple):
    """A batch's fingerprints to come (`get`): a worker's (its future), or computed here already."""

    get: Callable[[], Fingerprinted]
    future: Future[Any] | None = None

    def ready(self) -> bool:
        """Whether `get` gives the fingerprints without waiting."""
        return self.future is None or self.future.done()


class _Killed:
    """A pool's worker whose `terminate()` is a SIGKILL: a broken pool terminates the workers left, then
    waits for them holding the lock every call of the pool takes, and they ignore SIGTERM
    (`_init_worker`): one blocked on the call queue's lock a killed sibling held would hang it for ever."""

    def terminate(self) -> None:
        self.kill()  # type: ignore[attr-defined]


class _SpawnWorker(_Killed, multiprocessing.context.SpawnProcess):
    """`_Killed`, spawned."""


_WORKERS: dict[str, type[multiprocessing.process.BaseProcess]] = {"spawn": _SpawnWorker}
if sys.platform != "win32":

    class _ForkWorker(_Killed, multiprocessing.context.ForkProcess):
        """`_Killed`, forked."""

    class _ForkServerWorker(_Killed, multiprocessing.context.ForkServerProcess):
        """`_Killed`, from the fork server."""

    _WORKERS.update(fork=_ForkWorker, forkserver=_ForkServerWorker)


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork is fastest, but forking a process that runs other threads can deadlock the child.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform.startswith("linux"):
        method = "fork"
    else:
        method = "forkserver" if "forkserver" in methods else "spawn"
    context = copy.copy(multiprocessing.get_context(method))
    context.Process = _WORKERS[method]  # type: ignore[attr-defined]
    return context


_WORKER_DIED = (
    "a fingerprinting worker process died (killed, or out of memory?); documents acknowledged so far are "
    "stored: run the same command again to resume (--workers 1 uses no worker process)"
)


def _result(future: Future[_T]) -> _T:
    try:
        return future.result()
    except BrokenProcessPool:
        raise SimhashRedisError(_WORKER_DIED) from None


class Fingerprinter:
    """Fingerprints batches of records, on worker processes when there are several cores.

    Args:
        workers: worker processes; 1 fingerprints in this process.
        hasher: also sketch each text with it (a verified index).
    """

    def __init__(
        self,
        scheme: Scheme,
        f: int,
        fp_base: str,
        workers: int,
        batch_size: int,
        hasher: Sketcher | None = None,
    ) -> None:
        self.scheme, self.hasher, self.f, self.fp_base = scheme, hasher, f, fp_base
        self.workers, self.batch_size = workers, batch_size
        self._executor: ProcessPoolExecutor | None = None
        #: Shared memory a table's texts cross to the workers through, when they are forked.
        self._ring: SharedRing | None = None

    def batches(
        self, units: Iterable[Record | InputError | JsonLines | ArrowRows]
    ) -> Iterator[Fingerprinted]:
        """The units (what `read_all` or `read_chunks` yields) in batches with their fingerprints, in input
        order, computed ahead of the caller.

        Raises:
            SimhashRedisError: a worker process died.
        """
        # Up to two batches a worker in the pool; the oldest is given as soon as it is done once every
        # worker has another, so that the caller writes instead of waiting for the pool to fill.
        pending: deque[_Due] = deque()
        ahead = 2 * self.workers
        for unit in self._grouped(units):
            pending.append(self._submit(unit))
            if len(pending) > ahead or (len(pending) > self.workers and pending[0].ready()):
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def close(self) -> None:
        """Stop the worker processes: batches not started are dropped, running ones end on their own."""
        if self._executor is not None:
            executor, self._executor = self._executor, None
            manager = getattr(executor, "_executor_manager_thread", None)
            reader = getattr(getattr(executor, "_call_queue", None), "_reader", None)  # shutdown drops it
            executor.shutdown(wait=False, cancel_futures=True)
            if manager is not None:
                # An exit during its clean-up would print an OSError traceback; bounded, not to hang.
                manager.join(timeout=_STUCK_WAIT if _POOL_LEAVES_FEEDER_BLOCKED else _CLOSE_WAIT)
                if manager.is_alive() and _POOL_LEAVES_FEEDER_BLOCKED:
                    # Its feeder thread may be blocked writing to a pipe no worker reads: closing the
                    # reading end makes that write fail (where fixed, the pool closes it itself).
                    if reader is not None:
                        with contextlib.suppress(OSError):  # closed meanwhile by the feeder thread
                            reader.close()
                    manager.join(timeout=_CLOSE_WAIT)
        if self._ring is not None:
            ring, self._ring = self._ring, None
            ring.close()

    def _grouped(
        self, units: Iterable[Record | InputError | JsonLines | ArrowRows]
    ) -> Iterator[Batch | JsonLines | ArrowRows]:
        # Errors travel in their batch, so they are reported in input order with the records around them.
        batch: Batch = []
        for unit in units:
            if isinstance(unit, (JsonLines, ArrowRows)):
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

    def _submit(self, unit: Batch | JsonLines | ArrowRows) -> _Due:
        """What gives the unit's items with their fingerprints: a worker's result, or computed here."""
        if isinstance(unit, list):
            items = parsed(unit, self.f, self.fp_base, self.hasher)
            texts = texts_of(items)
            if not self._parallel(len(texts)):
                here = placed(items, *fingerprints_of(texts, self.scheme, self.hasher))
                return _Due(lambda: here)
            result = self._run(_in_worker, fingerprints_of, texts)
            return _Due(lambda: placed(items, *_result(result)), result)
        if isinstance(unit, JsonLines) and unit.options.fingerprint_field is not None:
            # The compiled core reads them faster than they would travel to a worker and back.
            read = unit.fingerprints(self.scheme, self.hasher, self.f, self.fp_base, len(unit.raws) // 16)
            if read is not None:
                return _Due(lambda: read)
        if not self._parallel(len(unit.raws) if isinstance(unit, JsonLines) else unit.batch.num_rows):
            done = fingerprinted(unit, self.scheme, self.hasher, self.f, self.fp_base)
            return _Due(lambda: done)
        sent: JsonLines | ArrowRows | TextRows | PackedTexts | SharedTexts = unit
        if isinstance(unit, ArrowRows):
            # Packed here, not by the pool's feeder thread, whose pieces would fault their pages in afresh
            # run after run; through shared memory when the workers are forked (`SharedRing`).
            if self._executor is None:
                self._start(unit.text_bytes())
            sent = unit.for_worker(self._ring)
            if isinstance(sent, SharedTexts):
                return self._shared(sent)
        future = self._run(_in_worker, fingerprinted, sent, self.f, self.fp_base)
        return _Due(lambda: _result(future), future)

    def _shared(self, sent: SharedTexts) -> _Due:
        """The worker's result for texts placed in the ring; their span is taken back with it."""
        ring = self._ring
        assert ring is not None
        try:
            future: Future[Fingerprinted] = self._run(_in_worker, fingerprinted, sent, self.f, self.fp_base)
        except BaseException:
            # Never handed over: withdrawn, so the caller sees the pool's error, not an out-of-order one.
            ring.withdraw(sent.start)
            raise

        def taken_back() -> Fingerprinted:
            try:
                return _result(future)
            finally:  # the worker is done with it (or gone)
                ring.take_back(sent.start)

        return _Due(taken_back, future)

    def _parallel(self, size: int) -> bool:
        # A handful of documents is not worth starting (or waiting on) the pool.
        return self.workers > 1 and size >= 64

    def _run(self, function: Callable[..., _T], *args: object) -> Future[_T]:
        if self._executor is None:
            self._start(None)
        assert self._executor is not None
        try:
            return self._executor.submit(function, *args)
        except BrokenProcessPool:
            raise SimhashRedisError(_WORKER_DIED) from None

    def _start(self, run_bytes: int | None) -> None:
        """Start the pool, with a ring shared with its workers when they are forked and the first run
        is of texts (`run_bytes` of them): the ring must be mapped before they are forked."""
        context = _pool_context()
        forked = context.get_start_method() == "fork"
        if forked and run_bytes is not None:
            slots = 2 * self.workers + 2  # the runs in the pool, the one written, the one placed
            self._ring = SharedRing(min(_RING_MOST, max(_RING_LEAST, slots * run_bytes * 5 // 4)))
        # A forked worker's parent is this process; a forkserver's child is the forkserver's.
        parent = os.getpid() if forked else -1
        # A forked worker inherits its arguments; others are pickled, which a ring could not be.
        ring = None if self._ring is None else self._ring.memory
        self._executor = ProcessPoolExecutor(
            self.workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(self.scheme, parent, self.hasher, ring),
        )
