"""How a batch of document writes reaches Redis, written once as steps without I/O (`Writes`).

A write is (id, new stored fingerprint or b'' to remove, guard): a guarded document (add-if-new's) is only
written while the table sets it read are unchanged (else its outcome is None: read again).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TypeVar

from ..codec import decode_fp, pack_fps
from ..errors import SimhashRedisError
from ..results import Outcome
from ..transport import Command, Steps, pause
from ..transport.wire import Volatile
from .keys import KeySchema
from .locks import LockWaits, first_id_lock, id_lock_call, release_ids, too_many, unlock_call
from .store import BAND_DROP, FP_IDS, ID_CAS, WRITE, Store, in_parts, round_trip
from .verification import Verification
from .write_args import (
    Guard,
    Pending,
    SketchedGuard,
    Write,
    table_calls,
    write_command,
)

__all__ = [
    "CONFLICT_ROUNDS",
    "PART",
    "Progress",
    "Writes",
    "call_token",
    "conflict_pause",
    "conflict_paused",
    "outcome_of",
    "parts_of",
    "reply_record",
]

_log = logging.getLogger(__name__)

T = TypeVar("T")

_OUTCOMES = {
    b"a": Outcome.ADDED,
    b"r": Outcome.REPLACED,
    b"u": Outcome.UNCHANGED,
    b"d": Outcome.REMOVED,
    b"n": Outcome.MISSING,
}
#: Documents per script call of a large batch of adds sent as parts.
PART = 250
#: Attempts at a write whose documents keep changing under it (16 were too few for 12 tasks on one id).
CONFLICT_ROUNDS = 32


def call_token() -> bytes:
    # Random: forked workers share any counter's state.
    return os.urandom(8).hex().encode()


def reply_record(keys: KeySchema, token: bytes, round_: int, part: int) -> bytes:
    return keys.reply(b"%s:%d.%d" % (token, round_, part))


def parts_of(docs: Sequence[T], plain: bool) -> list[Sequence[T]]:
    """A round's documents as its script calls': parts of `PART` for 2 x `PART` plain adds."""
    part = PART  # read at each call: tests make it small
    if plain and len(docs) >= 2 * part:
        return [docs[i : i + part] for i in range(0, len(docs), part)]
    return [docs]


def outcome_of(status: bytes, old: bytes) -> Outcome:
    # A removal that finds nothing to remove, after an earlier round saw the id present, was done by
    # that earlier attempt of ours whose reply was lost and resent.
    if status == b"n" and old:
        return Outcome.REMOVED
    return _OUTCOMES[status]


def conflict_pause(conflicts: int) -> None:
    """Pause before a round after `conflicts` rounds in conflict: none after the first, then a random one,
    growing (tasks of one event loop run in lockstep: a random pause breaks the step)."""
    if conflict_paused(conflicts):
        pause(random.uniform(0, min(0.05, 0.0005 * 2.0**conflicts)))


def conflict_paused(conflicts: int) -> bool:
    return conflicts >= 2


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
        #: Names this call's script calls apart from any other's (`reply_record`).
        self.token = call_token()
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
        return reply_record(keys, self.token, self.rounds, part)

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
    show a document half-written (docs/cluster.md; its guards are bucket locks, not checked here).
    """

    def __init__(
        self,
        store: Store,
        f: int,
        tables: int,
        verification: Verification | None = None,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.store, self.keys, self.f, self.tables = store, store.keys, f, tables
        self.verification = verification
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
        """In a sliding window, move (id, stored fingerprint) documents found again into the current one."""

    def _apply_unique(
        self, ops: list[Write], fps: list[int] | None, tables: list[list[bytes]] | None = None
    ) -> list[Outcome | None]:
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
        if self.store.cluster:
            yield from self._ordered(progress)
        else:
            yield from self._atomic(progress)
        return progress.outcomes

    def _atomic(self, progress: Progress) -> Steps[None]:
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

    def _ordered(self, progress: Progress) -> Steps[None]:
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
                return
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
