"""How a batch of document writes reaches Redis, written once as steps without I/O (`Writes`).

A write is (id, new stored fingerprint or b'' to remove, guard): a guarded document (add-if-new's) is only
written while the table sets it read are unchanged (else its outcome is None: read again). With a
retention window (docs/retention.md), each round goes over the periods of the server's clock
(`windowed_writes`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from operator import itemgetter

from ..codec import decode_fp, pack_fps
from ..errors import SimhashRedisError
from ..results import Outcome
from ..transport import Command, Steps
from ..transport.wire import Volatile
from .keys import KeySchema
from .locks import LockWaits, first_id_lock, id_lock_call, release_ids, too_many, unlock_call
from .store import BAND_DROP, FP_IDS, ID_CAS, WRITE, Store, in_parts, parts_of, round_trip
from .verification import Verification
from .windowed_writes import guard_covers, in_rounds, on_cluster, period_steps, refused, sketches_of
from .windows import View, Windows
from .write_args import (
    CONFLICT_ROUNDS,
    Guard,
    InPeriod,
    Pending,
    SketchedGuard,
    Write,
    conflict_pause,
    conflict_paused,
    outcome_of,
    table_calls,
    write_command,
)

__all__ = ["Progress", "Writes"]

_log = logging.getLogger(__name__)


class Progress:
    """What of a call of writes (each id named once) the server has acknowledged, kept across new starts
    of its conversation; `fps`, `tables`: each write's new fingerprint and table keys, if known."""

    def __init__(
        self, ops: list[Write], fps: list[int] | None = None, tables: list[list[bytes]] | None = None
    ) -> None:
        self.ops, self.fps, self.tables = ops, fps, tables
        self.outcomes: list[Outcome | None] = [None] * len(ops)
        #: The current round's documents (the first assumes every id is new).
        self.pending: list[Pending] = [
            (i, doc_id, new, b"", guard) for i, (doc_id, new, guard) in enumerate(ops)
        ]
        self.rounds = 0
        #: The replies of the current round's script calls (its parts) acknowledged so far.
        self.acked: list[list[bytes]] = []
        #: On a cluster: the fingerprints are in their tables; the round's ids are to be detached first.
        self.tabled = self.detaching = False
        #: (stored fingerprint, the sketch a write dropped for one of its ids): band tables to clean.
        self.dropped: list[tuple[bytes, bytes]] = []
        #: Names this call's script calls apart from any other's (random: forked workers share any
        #: counter's state).
        self.token = os.urandom(8).hex().encode()
        #: On a cluster: each id's value read before the first commit (b"": none), whether a round of
        #: commits is on the wire, and whether the current one was sent again after a lost connection.
        self.prior: list[bytes] = []
        self.committing = self.resent = False
        #: On a cluster, the turns of id locks: the ids whose lock this call holds (positions in `ops`),
        #: the documents of the turn that holds them, whether the turn's ids are attached, the documents
        #: waiting for a lock another writer holds, and whether a round trip asking for theirs is due.
        self.locked: list[int] = []
        self.turn: list[int] = []
        self.attached = self.locking = False
        self.waiting: list[Pending] = []
        self.waits: LockWaits | None = None  # made on a cluster's first turn

    def record(self, keys: KeySchema, part: int) -> bytes:
        return keys.reply(b"%s:%d.%d" % (self.token, self.rounds, part))

    def next_round(self, retry: list[Pending]) -> None:
        self.rounds += 1
        if retry and self.rounds >= CONFLICT_ROUNDS:
            raise too_many(len(retry))
        if retry:
            conflict_pause(self.rounds)
        self.pending, self.acked = retry, []


class Writes:
    """An index's writes, as steps without I/O: the one class through which every write of documents goes.

    A standalone server's round is one call of write.lua; a cluster's, ordered single-key steps that never
    show a document half-written (docs/cluster.md; its guards are bucket locks, not checked here). With
    `windows`, each round goes over the periods of the server's clock.
    """

    def __init__(
        self,
        store: Store,
        f: int,
        tables: int,
        verification: Verification | None = None,
        check: Callable[[], None] | None = None,
        windows: Windows | None = None,
    ) -> None:
        self.store, self.keys, self.f, self.tables = store, store.keys, f, tables
        self.verification, self.windows = verification, windows
        #: Raises if the index changed under this writer (called before each write).
        self.check = check or (lambda: None)

    def apply(
        self, ops: list[Write], fps: list[int] | None = None, tables: list[list[bytes]] | None = None
    ) -> list[Outcome | None]:
        """Apply the writes in order (an id named twice: the last wins); None for a guarded write whose tables
        changed since they were read (with a retention window, guards are the `WindowedSets` read).

        Raises:
            WriteContention: documents kept changing under concurrent writers (nothing of them written).
            IndexNotFound, ConfigurationMismatch: as `check` (nothing written).
        """
        self.check()
        if not ops:
            return []
        if len({doc_id for doc_id, _, _ in ops}) == len(ops):  # the common case: no id twice
            return self._apply_unique(ops, fps, tables)
        # Within one call, writes of one id would be judged against the same stored state (x -> A,
        # x -> B, x -> A would leave B): the writes go in waves that each name an id once.
        waves: list[list[int]] = []
        seen: dict[bytes, int] = {}
        for i, (doc_id, _, _) in enumerate(ops):
            wave = seen[doc_id] = seen.get(doc_id, -1) + 1
            if wave == len(waves):
                waves.append([])
            waves[wave].append(i)
        outcomes: list[Outcome | None] = [None] * len(ops)
        for members in waves:
            wave_fps = None if fps is None else [fps[i] for i in members]
            for i, outcome in zip(
                members, self._apply_unique([ops[i] for i in members], wave_fps), strict=True
            ):
                outcomes[i] = outcome
        return outcomes

    def seen(self, docs: list[tuple[bytes, bytes]]) -> None:
        """In a sliding window, move (id, stored fingerprint) documents found again into the current one,
        best effort: on an error they keep their period."""
        if self.windows is None or not self.windows.retention.sliding or not docs:
            return
        try:
            if self.store.cluster:
                on_cluster(
                    self.store,
                    self.windows,
                    self.f,
                    self.verification,
                    list(dict(docs).items()),
                    only_moves=True,
                )
            else:
                self._refresh(self.windows, docs)
        except SimhashRedisError:
            return

    def _apply_unique(
        self, ops: list[Write], fps: list[int] | None, tables: list[list[bytes]] | None = None
    ) -> list[Outcome | None]:
        if self.windows is not None:
            return self._in_periods(self.windows, ops)
        progress = Progress(ops, fps, tables)
        try:
            self.store.run(lambda: self.steps(progress), durable=self.store.cluster)
        except BaseException:
            # The server may hold any of the call's id locks (a lost reply, an error mid-call): released,
            # each only if still the call's, rather than left to their time to live.
            if self.store.cluster:
                release_ids(self.store, [doc_id for doc_id, _, _ in ops], progress.token)
            raise
        self.drop_bands([(self.keys, fp, sketch) for fp, sketch in progress.dropped])
        return progress.outcomes

    def steps(self, progress: Progress) -> Steps[list[Outcome | None]]:
        if self.windows is not None:  # its steps would write keys of no period, which never expire
            raise TypeError("a retention window's writes go through apply(), over the periods")
        return self._ordered(progress) if self.store.cluster else self._atomic(progress)

    def _atomic(self, progress: Progress) -> Steps[list[Outcome | None]]:
        while progress.pending:
            pending = progress.pending
            # A bulk load's: every write adds a document without a guard.
            first = progress.rounds == 0 and all(new and guard is None for _, new, guard in progress.ops)
            yield from in_parts(*self._calls(progress, first), progress.acked)
            statuses = [status for reply in progress.acked for status in reply]
            retry = []
            for (i, doc_id, new, old, guard), status in zip(pending, statuses, strict=True):
                if status == b"a":
                    progress.outcomes[i] = Outcome.ADDED
                elif status[:1] == b"c":
                    retry.append((i, doc_id, new, status[1:], guard))
                elif status != b"g":
                    progress.outcomes[i] = outcome_of(status[:1], old)
                    if len(status) > 1:  # the sketch this write dropped: 'u' kept new, 'r' and 'd' left old
                        progress.dropped.append((new if status[:1] == b"u" else old, status[1:]))
            progress.next_round(retry)
            if progress.pending and conflict_paused(progress.rounds):
                # The value a conflict answered is as old as the pause (writers that never paused wrote
                # the id meanwhile): read the ids' values again right before the resend.
                id_bucket = self.keys.id_bucket
                reads: list[Command] = [(b"HGET", id_bucket(doc[1]), doc[1]) for doc in progress.pending]
                values = yield from round_trip(reads)
                progress.pending = [
                    (i, doc_id, new, value or b"", guard)
                    for (i, doc_id, new, _, guard), value in zip(progress.pending, values, strict=True)
                ]
        return progress.outcomes

    def _ordered(self, progress: Progress) -> Steps[list[Outcome | None]]:
        keys, ops = self.keys, progress.ops
        # A commit whose reply was lost may have been applied: sent again, it finds its own write.
        progress.resent = progress.resent or progress.committing
        if not progress.tabled:
            sets: list[Command] = []
            for _, new, guard in ops:
                if new:
                    sketch = guard.sketch if isinstance(guard, SketchedGuard) else b""
                    sets += table_calls(keys, self.f, new, sketch, self.verification)
            # Each id's value before the call, in the same round trip: what a resent commit that finds
            # its own write was judged against. Then each id's lock.
            sets += [(b"HGET", keys.id_bucket(doc_id), doc_id) for doc_id, _, _ in ops]
            sets += [first_id_lock(keys, doc_id, progress.token) for doc_id, _, _ in ops]
            replies = yield from round_trip(sets)
            count = len(ops)
            progress.prior = [bytes(value or b"") for value in replies[len(sets) - 2 * count : -count]]
            _take_turn(progress, progress.pending, replies[-count:])
            progress.tabled = True
        while True:
            if progress.locking:
                # The ids' values are read with their locks: a detach and commit need no conflict first.
                waiting = progress.waiting
                calls = [id_lock_call(keys, doc[1], progress.token) for doc in waiting]
                calls += [(b"HGET", keys.id_bucket(doc[1]), doc[1]) for doc in waiting]
                replies = yield from round_trip(calls)
                docs = [
                    (i, doc_id, new, bytes(value or b""), guard)
                    for (i, doc_id, new, _, guard), value in zip(
                        waiting, replies[len(waiting) :], strict=True
                    )
                ]
                for i, _, _, value, _ in docs:  # what a commit of this turn resent is judged against
                    progress.prior[i] = value
                _take_turn(progress, docs, replies[: len(waiting)])
                progress.locking = False
            yield from self._committed(progress)
            if progress.turn and not progress.attached:
                turn = [ops[i] for i in progress.turn]
                yield from round_trip(
                    self._ids(b"+", [(doc_id, new, guard) for doc_id, new, guard in turn if new])
                )
                progress.attached = True
            if progress.locked:
                # A release lost in a failover only keeps others waiting until the lock's time to live.
                releases = [unlock_call(keys, ops[i][0], progress.token) for i in progress.locked]
                yield from round_trip(Volatile(releases))
                progress.locked = []
            if not progress.waiting:
                return progress.outcomes
            if progress.waits is not None:
                progress.waits.wait(len(progress.waiting))
            progress.locking = True

    def _committed(self, progress: Progress) -> Steps[None]:
        keys = self.keys
        while progress.pending:
            if progress.detaching:
                # Each id leaves the fingerprint it has now before the new one is committed, so that a
                # lost reply (resent, answered 'unchanged') cannot leave it listed under both.
                detached: list[tuple[bytes, bytes, Guard | None]] = [
                    (doc_id, old, None) for _, doc_id, _, old, _ in progress.pending if old
                ]
                yield from round_trip(self._ids(b"-", detached))
                progress.detaching = False
            pending = progress.pending
            calls = [
                ID_CAS.command([keys.id_bucket(doc_id)], [doc_id, new, old])
                for _, doc_id, new, old, _ in pending
            ]
            retry = []
            progress.committing = True
            statuses = yield from round_trip(calls)
            for (i, doc_id, new, old, guard), status in zip(pending, statuses, strict=True):
                if status[:1] == b"c":
                    retry.append((i, doc_id, new, status[1:], guard))
                elif status == b"u" and progress.resent:
                    # The first round expects no value (old b""): the value read before is the one judged.
                    before = old or (progress.prior[i] if progress.rounds == 0 else b"")
                    progress.outcomes[i] = _committed(before, new)
                else:
                    progress.outcomes[i] = outcome_of(status, old)
            progress.committing = progress.resent = False
            progress.next_round(retry)
            progress.detaching = True

    def _calls(self, progress: Progress, first: bool) -> tuple[int, Callable[[int], Command]]:
        if first or (progress.rounds == 0 and _guarded_adds(progress.ops, self.tables)):
            # A later part's guards expect what the earlier parts add: parts keep one call's guarantees.
            parts = parts_of(range(len(progress.ops)), True)
            return len(parts), lambda n: self._adds(progress, n, parts[n][0], len(parts[n]), not first)
        pending = progress.pending
        return 1, lambda _: write_command(
            self.keys, self.f, self.tables, pending, progress.record(self.keys, 0), self.verification
        )

    def _adds(self, progress: Progress, part: int, start: int, count: int, guarded: bool = False) -> Command:
        ops = progress.ops[start : start + count]
        fps = progress.fps
        ints = [decode_fp(new, self.f) for _, new, _ in ops] if fps is None else fps[start : start + count]
        keys = self.keys
        id_bucket, fp_bucket_of = keys.id_bucket, keys.fp_bucket_of
        built = progress.tables
        tables = map(keys.table_builder(), ints) if built is None else built[start : start + count]
        key_list: list[bytes] = [keys.counts]
        args: list[bytes | int] = [self.tables, b"g" if guarded else b"a"]
        add_key, add_keys, add_args = key_list.append, key_list.extend, args.extend
        for (doc_id, new, guard), fp, table_keys in zip(ops, ints, tables, strict=True):
            add_key(id_bucket(doc_id))
            add_key(fp_bucket_of(fp))
            add_keys(table_keys)
            add_args((doc_id, new))
            if guarded:
                args.append(b" %s " % b" ".join([member for read in guard or () for member in read]))
        add_key(progress.record(keys, part))
        return WRITE.command(key_list, args)

    def _ids(self, op: bytes, pairs: list[tuple[bytes, bytes, Guard | None]]) -> list[Command]:
        calls = []
        for doc_id, fp, guard in pairs:
            args: list[bytes | int] = [op, fp, doc_id]
            if isinstance(guard, SketchedGuard):
                args += [b"", guard.sketch]
            calls.append(FP_IDS.command([self.keys.fp_bucket(fp)], args))
        return calls

    def _in_periods(self, windows: Windows, ops: list[Write]) -> list[Outcome | None]:
        if self.store.cluster:
            sketches = [g.sketch if isinstance(g, SketchedGuard) else None for _, _, g in ops]
            return on_cluster(
                self.store,
                windows,
                self.f,
                self.verification,
                [(doc_id, new) for doc_id, new, _ in ops],
                sketches=sketches,
            )
        # By write.lua (guards: the `WindowedSets` a read returned).
        outcomes: list[Outcome | None] = [None] * len(ops)

        def attempt(view: View, pending: list[InPeriod]) -> tuple[list[InPeriod], int | None]:
            # A guard that did not read every live period is not written with: read again (None).
            sent = [doc for doc in pending if guard_covers(doc[5], view)]
            statuses, moved = self._round(windows, view, sent)
            retry = sent[len(statuses) :]  # not sent, or refused by the clock: the same again
            for (i, doc_id, new, old, _, guard), status in zip(sent[: len(statuses)], statuses, strict=True):
                if status[:1] == b"c":
                    where, _, current = status[1:].partition(b":")
                    window = view.windows[int(where) - 1] if current else 0
                    retry.append((i, doc_id, new, current, window, guard))
                elif status != b"g":
                    outcomes[i] = outcome_of(status[:1], old)
            return retry, moved

        def read_again(pending: list[InPeriod]) -> list[InPeriod]:
            held = zip(pending, windows.held([d[1] for d in pending]), strict=True)
            return [(d[0], d[1], d[2], value, window, d[5]) for d, (window, value) in held]

        pending = [(i, doc_id, new, b"", 0, guard) for i, (doc_id, new, guard) in enumerate(ops)]
        in_rounds(windows, attempt, pending, read_again)
        return outcomes

    def _refresh(self, windows: Windows, docs: list[tuple[bytes, bytes]]) -> None:
        """Move documents found again into the current period, if still stored so: one call finds each
        where it is, a second moves it only while its id still has that fingerprint."""
        view = windows.view()
        pending: list[InPeriod] = [
            (i, doc_id, fp, fp, view.current, None) for i, (doc_id, fp) in enumerate(dict(docs).items())
        ]
        for _ in range(2):
            statuses, refused_at = self._round(windows, view, pending)
            if refused_at is not None:
                windows.set_server_time(refused_at)
                return  # a boundary passed: the documents will be seen again soon enough
            moved: list[InPeriod] = []
            for (i, doc_id, fp, _, _, _), status in zip(pending, statuses, strict=True):
                where, _, current = status[1:].partition(b":")
                if status[:1] == b"c" and current == fp:  # in an older period, unchanged: move it
                    moved.append((i, doc_id, fp, fp, view.windows[int(where) - 1], None))
            if not moved:
                return
            if self.verification is not None:  # each moves with its sketch; one without (changed since) stays
                places = [(w, fp, doc_id) for _, doc_id, fp, _, w, _ in moved]
                found = self.store.run(functools.partial(sketches_of, windows, places))
                moved = [
                    (i, doc_id, fp, old, w, SketchedGuard(None, sketch, moving=True))
                    for (i, doc_id, fp, old, w, _), sketch in zip(moved, found, strict=True)
                    if sketch is not None
                ]
            pending = moved

    def _round(self, windows: Windows, view: View, sent: list[InPeriod]) -> tuple[list[bytes], int | None]:
        """A round's calls of write.lua: the statuses of the documents done, and the server's time (ms) if
        a call was refused."""
        acked: list[list[bytes]] = []
        token = os.urandom(8).hex().encode()  # the same for each new start of the conversation
        if sent:
            self.store.run(
                lambda: period_steps(
                    windows, self.f, self.tables, view, sent, acked, token, self.verification
                )
            )
        # A call refused for another period is the round's last (`in_parts` stops there).
        refused_at = int(acked[-1][0][1:]) if acked and refused(acked[-1]) else None
        statuses = [status for reply in acked if not refused(reply) for status in reply]
        dropped = []
        for status in statuses:
            if len(status) > 1 and status[:1] in b"urd":  # the period, ':', the fingerprint, ':', the sketch
                where, fp, sketch = status[1:].split(b":", 2)
                dropped.append((windows.schema(view.windows[int(where) - 1]), fp, sketch))
        self.drop_bands(dropped)
        return statuses, refused_at

    def drop_bands(self, dropped: list[tuple[KeySchema, bytes, bytes]]) -> None:
        """Take (keys of its period, stored fingerprint, dropped sketch) out of the sketch's band tables, best
        effort (near() reads what is left as unconfirmed candidates, verify removes it); not on a cluster."""
        v, calls = self.verification, []
        for keys, fp, sketch in [] if self.store.cluster else dropped:
            if v is None or len(sketch) < v.bands * v.band_bytes:
                continue
            bucket, packed = keys.fp_bucket(fp), pack_fps([fp], self.f)
            for i, (key, field) in enumerate(keys.band_places(sketch, v)):
                calls.append(BAND_DROP.command([key, bucket], [fp, i * v.band_bytes, field, packed]))
        try:
            self.store.run_script(BAND_DROP, calls)
        except SimhashRedisError as exc:
            _log.warning("band tables not cleaned after a write (verify --repair removes the rest): %s", exc)


def _committed(before: bytes, new: bytes) -> Outcome:
    if before == new:
        return Outcome.UNCHANGED
    return Outcome.REPLACED if before else Outcome.ADDED


def _guarded_adds(ops: list[Write], tables: int) -> bool:
    return all(new and type(guard) is list and len(guard) == tables for _, new, guard in ops)


def _take_turn(progress: Progress, docs: list[Pending], replies: list[object]) -> None:
    if progress.waits is None:
        progress.waits = LockWaits()
    turn, progress.waiting = progress.waits.take(docs, replies, itemgetter(0))
    progress.pending = turn
    progress.turn = [doc[0] for doc in turn]
    progress.locked = list(progress.turn)
    progress.attached = False
    progress.detaching = True
    # A turn's conflicts are its own (another writer's uncommitted value, read with the locks): its
    # rounds count from 0, and its first compares with the values read (the prior ones).
    progress.rounds = 0
