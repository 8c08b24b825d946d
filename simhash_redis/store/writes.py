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
from typing import Protocol

import redis.exceptions as rex

from ..codec import decode_fp
from ..errors import SimhashRedisError, WriteContention
from ..results import Outcome
from ..transport import Command, Exchange, raise_first_error
from .config import Verification
from .scripts import Script
from .store import Store

__all__ = [
    "CONFLICT_ROUNDS",
    "PART",
    "AtomicWrites",
    "Guard",
    "OrderedWrites",
    "SketchedGuard",
    "Write",
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
# A document of a script call: its position in the batch, id, new and old fingerprints, guard.
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


class AtomicWrites:
    """A standalone server: each batch is one Lua script call, so a document is never half-written.

    In verified mode with band tables, a document joins its sketch's band tables in the same step; the
    band tables of a sketch the step drops are cleaned after it, one script per table that keeps the
    fingerprint while another of its sketches still has that band (`band_drop.lua`).

    Args:
        store: the index's keys and sender.
        f: fingerprint width.
        tables: number of tables.
        verification: the index's verified mode, if any (its band tables).
    """

    _SCRIPT = Script("write")
    _BAND_DROP = Script("band_drop")

    def __init__(self, store: Store, f: int, tables: int, verification: Verification | None = None) -> None:
        self.store, self.keys, self.f, self.tables = store, store.keys, f, tables
        self.verification = verification

    def apply(self, ops: list[Write]) -> list[Outcome | None]:
        """Apply the writes: one script call per round (a large batch of adds: parts of `PART`).

        The first round assumes each id is new; an id that already has another fingerprint comes back
        as a conflict carrying that fingerprint, and is resent with the keys needed to move it. An id
        named several times is written in successive waves, each holding an id once, so the outcome is
        the one of applying the writes one after another (a later pair for the same id wins).

        Args:
            ops: the writes.

        Raises:
            WriteContention: documents kept changing under concurrent writers (nothing of them written).
        """
        return in_waves(ops, self._apply_once)

    def seen(self, docs: list[tuple[bytes, bytes]]) -> None:
        """Nothing: an index without a retention window keeps its documents anyway."""

    def _apply_once(self, ops: list[Write]) -> list[Outcome | None]:
        pending = [(i, doc_id, new, b"", guard) for i, (doc_id, new, guard) in enumerate(ops)]
        if len(ops) >= 2 * PART and _all_adds(ops):
            parts = [ops[i : i + PART] for i in range(0, len(ops), PART)]
            return self._finish(pending, self._run_parts(parts))
        return self._finish(pending, self._run(self._call(ops)))

    def _run_parts(self, parts: list[list[Write]]) -> list[bytes]:
        """The first round of a large batch of adds, as one script call per part (`run_in_parts`).

        Every part is atomic, as a batch of that size would be; conflicts are resolved after the last
        part (`_finish`), in batch order.
        """
        replies = run_in_parts(self.store, self._SCRIPT, lambda i: self._call(parts[i]), len(parts))
        return [status for reply in replies for status in reply]

    def _call(self, ops: list[Write]) -> Command:
        """The first round's script call: every document as if its id were new."""
        if not _all_adds(ops):
            return self._command([(i, doc_id, new, b"", guard) for i, (doc_id, new, guard) in enumerate(ops)])
        # A bulk load's adds: arguments id, new per document (format 'a'), keys built inline.
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
        return self._SCRIPT.command(key_list, args)

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
        return self._SCRIPT.command(keys, args)

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
                    self._BAND_DROP.command([key, bucket], [fp, start, sketch[start : start + v.band_bytes]])
                )
        if not calls:
            return
        try:
            self.store.run_script(self._BAND_DROP, calls)
        except SimhashRedisError as exc:
            _log.warning("band tables not cleaned after a write (verify --repair removes the rest): %s", exc)

    def _run(self, call: Command) -> list[bytes]:
        reply: list[bytes] = self.store.run_script(self._SCRIPT, [call])[0]
        return reply

    def _finish(self, pending: list[_Pending], reply: list[bytes]) -> list[Outcome | None]:
        """The outcomes, after resending the conflicts of the first round's `reply` until none is left."""
        outcomes: list[Outcome | None] = [None] * len(pending)
        dropped: list[tuple[bytes, bytes]] = []
        for _ in range(CONFLICT_ROUNDS):
            retry = []
            for (i, doc_id, new, old, guard), status in zip(pending, reply, strict=True):
                if status == b"a":
                    outcomes[i] = Outcome.ADDED
                elif status[:1] == b"c":
                    retry.append((i, doc_id, new, status[1:], guard))
                elif status != b"g":
                    outcomes[i] = outcome_of(status[:1], old)
                    if len(status) > 1:  # the sketch this write dropped: 'u' kept new, 'r' and 'd' left old
                        dropped.append((new if status[:1] == b"u" else old, status[1:]))
            if not retry:
                if dropped:
                    self._drop_bands(dropped)
                return outcomes
            pending = retry
            reply = self._run(self._command(pending))
        raise too_many(len(pending))


class OrderedWrites:
    """A cluster: single-key steps in an order that never shows a half-written document to near().

    A document's keys live in different slots, so no one script can write them all. Its steps are:
    the fingerprint into every table (invisible until ids are attached), the id's entry in the id map
    (the commit point, compare-and-set against the fingerprint read), the id into the fingerprint's id
    list; for a replacement, the id leaves the old fingerprint's list before the commit. Every step is
    idempotent, so a batch interrupted anywhere is completed by sending it again. A fingerprint whose
    last id leaves stays in the tables as an orphan that near() ignores; `verify(repair=True)` removes
    orphans. Guards are not used here: add-if-new on a cluster takes bucket locks instead. A sketch
    (`SketchedGuard`) is set in the step that attaches the id, and leaves in the one that detaches it.

    In verified mode with band tables, the fingerprint joins its sketch's band tables with its tables;
    it is not taken out of them when the sketch leaves (no script can check the sketches it still has
    from the band's slot): `verify(repair=True)` removes such members, which near() only reads as
    candidates their sketches do not confirm.

    Args:
        store: the index's keys and sender (on a cluster).
        f: fingerprint width.
        verification: the index's verified mode, if any (its band tables).
    """

    _CAS = Script("id_cas")
    _IDS = Script("fp_ids")

    def __init__(self, store: Store, f: int, verification: Verification | None = None) -> None:
        self.store, self.keys, self.f = store, store.keys, f
        self.verification = verification

    def apply(self, ops: list[Write]) -> list[Outcome | None]:
        """Apply the writes in the order the class docstring gives.

        An id named several times in one batch is written in successive waves, each holding an id
        once, so the outcome is the one of applying the writes one after another.

        Args:
            ops: the writes (guards ignored but for their sketches).

        Raises:
            WriteContention: documents kept changing under concurrent writers.
        """
        return in_waves(ops, self._apply_unique)

    def seen(self, docs: list[tuple[bytes, bytes]]) -> None:
        """Nothing: an index without a retention window keeps its documents anyway."""

    def _apply_unique(self, ops: list[Write]) -> list[Outcome | None]:
        tables: list[Command] = [
            (b"SADD", key, new)
            for _, new, guard in ops
            if new
            for key in self.keys.tables(decode_fp(new, self.f)) + self._bands(guard)
        ]
        self.store.execute(tables, durable=True)
        outcomes: list[Outcome | None] = [None] * len(ops)
        pending = [(i, doc_id, new, b"") for i, (doc_id, new, _) in enumerate(ops)]
        for _ in range(CONFLICT_ROUNDS):
            calls = [
                self._CAS.command([self.keys.id_bucket(doc_id)], [doc_id, new, old])
                for _, doc_id, new, old in pending
            ]
            retry = []
            replies = self.store.run_script(self._CAS, calls, durable=True)
            for (i, doc_id, new, old), status in zip(pending, replies, strict=True):
                if status[:1] == b"c":
                    retry.append((i, doc_id, new, status[1:]))
                else:
                    outcomes[i] = outcome_of(status, old)
            if retry:
                # Detach each id from the fingerprint it has now before committing the new one, so a
                # lost reply (resent, answered 'unchanged') cannot leave it listed under both.
                self._ids(b"-", [(doc_id, old) for _, doc_id, _, old in retry if old])
            pending = retry
            if not pending:
                break
        else:
            raise too_many(len(pending))
        attached = [op for op in ops if op[1]]
        self._ids(b"+", [(doc_id, new) for doc_id, new, _ in attached], [guard for _, _, guard in attached])
        return outcomes

    def _bands(self, guard: Guard | None) -> list[bytes]:
        """The band table keys of a write's sketch (none without band tables, or for no sketch)."""
        sketch = guard.sketch if isinstance(guard, SketchedGuard) else b""
        return self.keys.bands(sketch, self.verification)

    def _ids(
        self, op: bytes, pairs: list[tuple[bytes, bytes]], guards: list[Guard | None] | None = None
    ) -> None:
        """Attach ('+') or detach ('-') each id at its fingerprint, with its sketch where a guard has one."""
        calls = []
        for n, (doc_id, fp) in enumerate(pairs):
            guard = guards[n] if guards is not None else None
            args: list[bytes | int] = [op, fp, doc_id]
            if isinstance(guard, SketchedGuard):
                args += [b"", guard.sketch]
            calls.append(self._IDS.command([self.keys.fp_bucket(fp)], args))
        self.store.run_script(self._IDS, calls, durable=True)


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
            if isinstance(reply, rex.NoScriptError):
                # A restarted server forgets its scripts: load it, then the same call again.
                exchange.send([[b"SCRIPT", b"LOAD", script.source], call])
                loaded, reply = exchange.read(2)
                raise_first_error([loaded])
            raise_first_error([reply])
            replies.append(reply)
            if prepared is None or done():
                return
            call = prepared
            exchange.send([call])

    store.converse(talk)
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
