"""How a batch of document writes reaches Redis: atomically on a standalone server, in a safe order on
a cluster.

A write is (id, new stored fingerprint or b'' to remove, guard). The guard, used by add-if-new, lists
the members the client read from each of the new fingerprint's table sets; a guarded document is only
written while those sets are unchanged (its outcome is None otherwise, and the caller reads again). In
verified mode the guard also carries the document's sketch (`SketchedGuard`), which the same script
sets with the document, or not at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from ..codec import decode_fp
from ..errors import SimhashRedisError, WriteContention
from ..results import Outcome
from ..transport import READ, SEND, Command, Exchange, Steps, raise_first_error
from .config import Verification
from .scripts import BAND_DROP, FP_IDS, ID_CAS, WRITE, Script, with_scripts
from .store import Store

__all__ = [
    "CONFLICT_ROUNDS",
    "PART",
    "Guard",
    "Progress",
    "SketchedGuard",
    "Write",
    "WriteSteps",
    "Writes",
    "in_waves",
    "outcome_of",
    "run_in_parts",
    "too_many",
]

_log = logging.getLogger(__name__)

#: The members read from each table set of a document's fingerprint.
Guard = list[list[bytes]]


class SketchedGuard(list[list[bytes]]):
    """A guard that also carries the document's sketch, stored with the document (beside its id in the
    fingerprint map: `KeySchema.sketch_field`).

    Args:
        members: the members read from each table set; None for a sketch without a guard.
        sketch: the sketch; b"" stores the document without one (any sketch its id had goes).
    """

    def __init__(self, members: Guard | None, sketch: bytes) -> None:
        super().__init__(members or [])
        self.checks = members is not None
        self.sketch = sketch


Write = tuple[bytes, bytes, Guard | None]
# A document of a round: its position in the batch, id, new and old fingerprints, guard.
_Pending = tuple[int, bytes, bytes, bytes, Guard | None]

_OUTCOMES = {
    b"a": Outcome.ADDED,
    b"r": Outcome.REPLACED,
    b"u": Outcome.UNCHANGED,
    b"d": Outcome.REMOVED,
    b"n": Outcome.MISSING,
}
#: Documents per script call when a large batch of adds is sent as parts (`run_in_parts`).
PART = 250
#: Attempts at a write whose documents keep changing under it (other workers replacing the same ids).
CONFLICT_ROUNDS = 16


class Writes(Protocol):
    """Applies batches of document writes."""

    def apply(self, ops: list[Write]) -> list[Outcome | None]:
        """Apply the writes; None for a guarded write whose tables changed since they were read."""
        ...

    def seen(self, docs: list[tuple[bytes, bytes]]) -> None:
        """Stored documents (id, stored fingerprint) found again as near-duplicates by add-if-new."""
        ...


class Progress:
    """What of a call of writes the server has acknowledged, kept across new starts of its conversation
    (a lost connection, a server that had forgotten the scripts): the steps resume from here.

    Args:
        ops: the writes, each id named once.
    """

    def __init__(self, ops: list[Write]) -> None:
        self.ops = ops
        self.outcomes: list[Outcome | None] = [None] * len(ops)
        #: The documents of the current round (the first assumes every id is new).
        self.pending: list[_Pending] = [
            (i, doc_id, new, b"", guard) for i, (doc_id, new, guard) in enumerate(ops)
        ]
        self.rounds = 0
        #: The current round's statuses, part by part as they are acknowledged.
        self.statuses: list[bytes] = []
        self.parts = 0
        #: On a cluster, whether the fingerprints are in their tables, and whether the ids of the current
        #: round are to be detached from the fingerprints they have first.
        self.tabled = self.detaching = False
        #: (stored fingerprint, the sketch a write dropped for one of its ids): band tables to clean.
        self.dropped: list[tuple[bytes, bytes]] = []

    def next_round(self, retry: list[_Pending]) -> None:
        """Start the round of the documents to send again.

        Raises:
            WriteContention: they kept changing under concurrent writers.
        """
        self.rounds += 1
        if retry and self.rounds >= CONFLICT_ROUNDS:
            raise too_many(len(retry))
        self.pending, self.statuses, self.parts = retry, [], 0


class WriteSteps:
    """An index's writes, as steps without I/O (`steps`): the one place a write's commands are decided.

    On a standalone server each round is one Lua script call (`write.lua`; a large batch of adds: parts of
    `PART`), so a document is never half-written. On a cluster a document's keys live in different slots,
    so no one script can write them all: it is written in single-key steps in an order that never shows
    it half-written to near(): the fingerprint into every table (invisible until ids are attached), the
    id's entry in the id map (the commit point, compare-and-set against the fingerprint read), the id
    into the fingerprint's id list; for a replacement, the id leaves the old fingerprint's list before the
    commit. Every step is idempotent, so a batch interrupted anywhere is completed by sending it again. A
    fingerprint whose last id leaves stays in the tables as an orphan that near() ignores;
    `verify(repair=True)` removes orphans. Guards are not used there: add-if-new on a cluster takes
    bucket locks instead.

    In verified mode (`SketchedGuard`), a document's sketch is set with it, and it joins its sketch's
    band tables in the same step (standalone) or with its tables (cluster). The band tables of a sketch
    the script drops are cleaned after it, one script per table that keeps the fingerprint while another
    of its sketches still has that band (`band_drop.lua`); on a cluster they are not (no script can check
    the sketches it still has from the band's slot): `verify(repair=True)` removes such members, which
    near() only reads as candidates their sketches do not confirm.

    Args:
        store: the index's keys and sender.
        f: fingerprint width.
        tables: number of tables.
        verification: the index's verified mode, if any (its band tables).
    """

    def __init__(self, store: Store, f: int, tables: int, verification: Verification | None = None) -> None:
        self.store, self.keys, self.f, self.tables = store, store.keys, f, tables
        self.verification = verification

    def apply(self, ops: list[Write]) -> list[Outcome | None]:
        """Apply the writes; None for a guarded write whose tables changed since they were read.

        The first round assumes each id is new; an id that already has another fingerprint comes back
        as a conflict carrying that fingerprint, and is resent with the keys needed to move it. An id
        named several times is written in successive waves, each holding an id once, so the outcome is
        the one of applying the writes one after another (a later pair for the same id wins).

        Args:
            ops: the writes.

        Raises:
            WriteContention: documents kept changing under concurrent writers (nothing of them written).
        """
        return in_waves(ops, self._apply_unique)

    def seen(self, docs: list[tuple[bytes, bytes]]) -> None:
        """Nothing: an index without a retention window keeps its documents anyway."""

    def _apply_unique(self, ops: list[Write]) -> list[Outcome | None]:
        if not ops:
            return []
        progress = Progress(ops)
        cluster = self.store.cluster
        self.store.run(lambda: self.steps(progress), durable=cluster)
        if progress.dropped:
            self._drop_bands(progress.dropped)
        return progress.outcomes

    def steps(self, progress: Progress) -> Steps[list[Outcome | None]]:
        """The writes of a call that names each id once, from where `progress` says; their outcomes.

        Args:
            progress: the call's writes and what of them is acknowledged (updated as replies come).

        Raises:
            WriteContention: documents kept changing under concurrent writers.
        """
        if self.store.cluster:
            yield from self._ordered(progress)
        else:
            yield from self._atomic(progress)
        return progress.outcomes

    def _atomic(self, progress: Progress) -> Steps[None]:
        """Rounds of script calls, until no document is left in conflict (see `steps`)."""
        while progress.pending:
            pending = progress.pending
            first = progress.rounds == 0 and _all_adds(progress.ops)
            if first and len(pending) >= 2 * PART:
                # Each part is sent as soon as the one before is answered, built while the server runs
                # it: the client's work overlaps the server's. Each is as atomic as a batch of its size.
                parts = [progress.ops[i : i + PART] for i in range(0, len(pending), PART)]
                yield SEND, [[self._adds(parts[progress.parts])]]
                while True:
                    following = progress.parts + 1
                    prepared = self._adds(parts[following]) if following < len(parts) else None
                    reply = yield READ, 1
                    progress.statuses += reply[0]
                    progress.parts = following
                    if prepared is None:
                        break
                    yield SEND, [[prepared]]
            else:
                call = self._adds(progress.ops) if first else self._command(pending)
                yield SEND, [[call]]
                progress.statuses = (yield READ, 1)[0]
            retry = []
            for (i, doc_id, new, old, guard), status in zip(pending, progress.statuses, strict=True):
                if status == b"a":
                    progress.outcomes[i] = Outcome.ADDED
                elif status[:1] == b"c":
                    retry.append((i, doc_id, new, status[1:], guard))
                elif status != b"g":
                    progress.outcomes[i] = outcome_of(status[:1], old)
                    if len(status) > 1:  # the sketch this write dropped: 'u' kept new, 'r' and 'd' left old
                        progress.dropped.append((new if status[:1] == b"u" else old, status[1:]))
            progress.next_round(retry)

    def _ordered(self, progress: Progress) -> Steps[None]:
        """A cluster's single-key steps (see `steps`)."""
        keys, ops = self.keys, progress.ops
        if not progress.tabled:
            sets: list[Command] = [
                (b"SADD", key, new)
                for _, new, guard in ops
                if new
                for key in keys.tables(decode_fp(new, self.f)) + self._bands(guard)
            ]
            yield from _round_trip(sets)
            progress.tabled = True
        while progress.pending:
            if progress.detaching:
                # Each id leaves the fingerprint it has now before the new one is committed, so that a
                # lost reply (resent, answered 'unchanged') cannot leave it listed under both.
                detached: list[tuple[bytes, bytes, Guard | None]] = [
                    (doc_id, old, None) for _, doc_id, _, old, _ in progress.pending if old
                ]
                yield from _round_trip(self._ids(b"-", detached))
                progress.detaching = False
            pending = progress.pending
            calls = [
                ID_CAS.command([keys.id_bucket(doc_id)], [doc_id, new, old])
                for _, doc_id, new, old, _ in pending
            ]
            retry = []
            for (i, doc_id, new, old, guard), status in zip(
                pending, (yield from _round_trip(calls)), strict=True
            ):
                if status[:1] == b"c":
                    retry.append((i, doc_id, new, status[1:], guard))
                else:
                    progress.outcomes[i] = outcome_of(status, old)
            progress.next_round(retry)
            progress.detaching = True
        yield from _round_trip(self._ids(b"+", [(doc_id, new, guard) for doc_id, new, guard in ops if new]))

    def _adds(self, ops: list[Write]) -> Command:
        """The first round's script call for adds only: id, new per document (format 'a'), keys built
        inline (a bulk load's)."""
        keys = self.keys
        id_bucket, fp_bucket, tables = keys.id_bucket, keys.fp_bucket, keys.table_builder()
        key_list: list[bytes] = [keys.counts]
        args: list[bytes | int] = [self.tables, b"a"]
        add_keys, add_args = key_list.append, args.extend
        f = self.f
        for doc_id, new, _ in ops:
            fp = decode_fp(new, f)
            add_keys(id_bucket(doc_id))
            add_keys(fp_bucket(new))
            key_list += tables(fp)
            add_args((doc_id, new))
        return WRITE.command(key_list, args)

    def _command(self, pending: list[_Pending]) -> Command:
        """A script call in the general argument format (id, new, old, guard per document)."""
        keys: list[bytes] = [self.keys.counts]
        args: list[bytes | int] = [self.tables, b""]
        for _, doc_id, new, old, guard in pending:
            keys.append(self.keys.id_bucket(doc_id))
            for fp in (new, old if old != new else b""):
                if fp:
                    keys.append(self.keys.fp_bucket(fp))
                    keys.extend(self.keys.tables(decode_fp(fp, self.f)))
            sketched = isinstance(guard, SketchedGuard)
            checks = guard is not None and (not isinstance(guard, SketchedGuard) or guard.checks)
            kind = b"" if guard is None else (b"s" if checks else b"k") if sketched else b"1"
            args.extend((doc_id, new, old, kind))
            if isinstance(guard, SketchedGuard):
                bands = self.keys.bands(guard.sketch, self.verification) if new else []
                if checks and len(guard) != self.tables + len(bands):
                    # The script reads T + B member lists: any other count would shift every later
                    # document's arguments.
                    sets = f"{self.tables} tables + {len(bands)} bands"
                    raise ValueError(f"a guard of {len(guard)} sets, for {sets}")
                keys.extend(bands)
                args.append(len(bands))
            if guard is not None and checks:
                args.extend(len(members) for members in guard)
                for members in guard:
                    args.extend(members)
            if isinstance(guard, SketchedGuard):
                args.append(guard.sketch)
        return WRITE.command(keys, args)

    def _bands(self, guard: Guard | None) -> list[bytes]:
        """The band table keys of a write's sketch (none without band tables, or for no sketch)."""
        sketch = guard.sketch if isinstance(guard, SketchedGuard) else b""
        return self.keys.bands(sketch, self.verification)

    def _ids(self, op: bytes, pairs: list[tuple[bytes, bytes, Guard | None]]) -> list[Command]:
        """Calls attaching ('+') or detaching ('-') each id at its fingerprint, with its sketch where a
        guard has one (a cluster)."""
        calls = []
        for doc_id, fp, guard in pairs:
            args: list[bytes | int] = [op, fp, doc_id]
            if isinstance(guard, SketchedGuard):
                args += [b"", guard.sketch]
            calls.append(FP_IDS.command([self.keys.fp_bucket(fp)], args))
        return calls

    def _drop_bands(self, dropped: list[tuple[bytes, bytes]]) -> None:
        """Take fingerprints out of the band tables of sketches they no longer have, in one round trip.

        Best effort, after the documents are written: a failure here (the server gone) is logged and
        leaves band table members that near() reads as candidates their sketches do not confirm, which
        `verify` counts as garbage and `verify(repair=True)` removes; so does a write script whose
        reply was lost and resent (the resent run finds nothing left to drop).

        Args:
            dropped: (stored fingerprint, the sketch the write script dropped for one of its ids).
        """
        v, calls = self.verification, []
        for fp, sketch in dropped:
            if v is None or len(sketch) < v.bands * v.band_bytes:
                continue
            bucket = self.keys.fp_bucket(fp)
            for i, key in enumerate(self.keys.bands(sketch, v)):
                start = i * v.band_bytes
                calls.append(
                    BAND_DROP.command([key, bucket], [fp, start, sketch[start : start + v.band_bytes]])
                )
        if not calls:
            return
        try:
            self.store.run_script(BAND_DROP, calls)
        except SimhashRedisError as exc:
            _log.warning("band tables not cleaned after a write (verify --repair removes the rest): %s", exc)


def _round_trip(commands: list[Command]) -> Steps[list[Any]]:
    """Steps that send commands and read their replies (none for no command)."""
    if not commands:
        return []
    yield SEND, [commands]
    replies: list[Any] = yield READ, len(commands)
    return replies


def run_in_parts(
    store: Store,
    script: Script,
    build: Callable[[int], Command],
    count: int,
    stop: Callable[[list[bytes]], bool] | None = None,
) -> list[list[bytes]]:
    """Script calls 0 .. count-1 on one connection, each built while the server runs the one before.

    Each call is sent as soon as the previous one's reply is read, so the client's work overlaps the
    server's. After a lost connection the conversation resumes at the first unacknowledged call
    (resending it is idempotent).

    Args:
        store: where the calls go.
        script: the script they call.
        build: the call of a part, by its number.
        count: how many parts.
        stop: a reply after which no further call is sent.

    Returns:
        The replies of the calls sent, in order (fewer than count after a stop).

    Raises:
        SimhashRedisError: an error reply (the calls before it are applied).
    """
    replies: list[list[bytes]] = []  # acknowledged calls: they survive a rerun of the conversation

    def done() -> bool:
        return len(replies) == count or bool(replies and stop is not None and stop(replies[-1]))

    def talk(exchange: Exchange) -> None:
        if done():
            return
        call = build(len(replies))
        exchange.send([call])
        while True:
            following = len(replies) + 1
            prepared = build(following) if following < count else None
            reply = exchange.read(1)[0]
            raise_first_error([reply])
            replies.append(reply)
            if prepared is None or done():
                return
            call = prepared
            exchange.send([call])

    with_scripts(store.sender, lambda: store.converse(talk), (script,))
    return replies


def in_waves(ops: list[Write], apply: Callable[[list[Write]], list[Outcome | None]]) -> list[Outcome | None]:
    """`apply` the writes, in waves that each hold an id once when some id is named several times.

    A conflict is resolved after the first round of the whole call, so two writes of one id in one
    call would be judged against the same stored state (x -> A, x -> B, x -> A would leave B).

    Args:
        ops: the writes.
        apply: writes a list that names each id once.
    """
    if len({doc_id for doc_id, _, _ in ops}) == len(ops):  # the common case: no id twice
        return apply(ops)
    waves: list[list[int]] = []
    seen: dict[bytes, int] = {}
    for i, (doc_id, _, _) in enumerate(ops):
        wave = seen.get(doc_id, 0)
        seen[doc_id] = wave + 1
        if wave == len(waves):
            waves.append([])
        waves[wave].append(i)
    outcomes: list[Outcome | None] = [None] * len(ops)
    for members in waves:
        for i, outcome in zip(members, apply([ops[i] for i in members]), strict=True):
            outcomes[i] = outcome
    return outcomes


def _all_adds(ops: list[Write]) -> bool:
    return all(new and guard is None for _, new, guard in ops)


def outcome_of(status: bytes, old: bytes) -> Outcome:
    """A document's outcome from its status in the write script's reply.

    Args:
        status: the status ('a', 'r', 'u', 'd' or 'n').
        old: the fingerprint the call believed the id had.
    """
    # A removal that finds nothing to remove, after an earlier round saw the id present, was done by
    # that earlier attempt of ours whose reply was lost and resent.
    if status == b"n" and old:
        return Outcome.REMOVED
    return _OUTCOMES[status]


def too_many(count: int) -> WriteContention:
    """The error of documents that kept changing under concurrent writers.

    Args:
        count: how many.
    """
    return WriteContention(
        f"{count} documents kept changing under concurrent writers; nothing of them was written"
    )
