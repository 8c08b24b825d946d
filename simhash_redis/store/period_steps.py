"""Writes into an index with a retention window on Redis Cluster: ordered one-key steps over the periods.

No script spans a cluster's slots, so the atomic move of the standalone path (`period_writes`) becomes
the cluster's ordered steps (`writes.OrderedWrites`), taken over the periods. For each document:

1. where its id is: the id-map entry of every live period (the newest one that has it is its value);
2. the new fingerprint into the current period's tables, each key set to expire with the period;
3. the id out of the fingerprint-map lists of every period that has it, except the one it stays in;
4. the id out of the id maps of the older periods (compare-and-set against what step 1 read);
5. the commit: the id in the current period's id map (compare-and-set; refused with the node's time
   when the node's clock is in another period, which the worker then adopts);
6. the id into the current period's fingerprint-map list.

Every step is idempotent, and a document is never half-visible: between steps 3 and 6 `near` does not
find it (as during a replacement on a cluster without windows), and `get` finds it in the newest period
that has it. A batch cut off anywhere is completed by sending it again. A step that meets another
writer's change (a compare-and-set mismatch) reads the document again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ..codec import decode_fp
from ..errors import SimhashRedisError, WriteContention
from ..results import Outcome
from ..transport import Command
from .scripts import FP_IDS, ID_CAS
from .store import Store
from .windows import View, Windows
from .writes import CONFLICT_ROUNDS, Write, in_waves, too_many

__all__ = ["ClusterWindowedWrites", "in_rounds"]

T = TypeVar("T")

# Rounds in a row that settled nothing, refused with a period the server's clock had already reported
# (clocks that disagree: nodes apart, a period going back): one more gives up.
_CLOCK_ROUNDS = 4
# Seconds of rounds that settle nothing while the server's clock moves on to ever later periods (each
# round slower than a period: a loaded machine, hundreds of tasks on one event loop) before giving up:
# within the 30 s a bucket lock lives (`locks.TTL_MS`), which add-if-new on a cluster holds meanwhile.
_STALL_S = 20.0


def in_rounds(
    windows: Windows, attempt: Callable[[View, list[T]], tuple[list[T], int | None]], pending: list[T]
) -> None:
    """Run rounds of a windowed write until nothing is left to retry, on the server's clock.

    Args:
        windows: the index's periods.
        attempt: one round against the current view: what to try again, and the server's time (ms)
            when a write was refused for another period than the view's.
        pending: what the first round is for.

    Raises:
        WriteContention: the server's clock kept reporting periods it had reported before with nothing
            written, or moved on for `_STALL_S` with nothing written, or writes kept conflicting.
    """
    conflicts = clock = 0
    latest: int | None = None  # the latest period a refusal reported
    progress = time.monotonic()  # when the last round that settled some ended (or the first began)
    while pending:
        retry, moved = attempt(windows.view(), pending)
        # Refusals count only in a row of rounds that settle nothing (retry is a part of pending): a
        # long batch may cross many boundaries, and each round that settles some leaves fewer to do.
        settled = len(retry) < len(pending)
        if settled:
            clock, progress = 0, time.monotonic()
        if moved is not None:  # the server's clock is in another period: adopt it
            period = moved // windows.period_ms
            # A later period than any reported is the clock going on (a round slower than a period):
            # the next round may fit. A period seen before is clocks that disagree.
            onward = latest is None or period > latest
            latest = period if latest is None else max(latest, period)
            if not settled and not onward:
                clock += 1
            if clock > _CLOCK_ROUNDS:
                raise WriteContention(
                    "the server's clock kept moving between periods (clocks that disagree?); run the "
                    "call again (the documents it had written already are left as they are)"
                )
            if not settled and time.monotonic() - progress > _STALL_S:
                raise WriteContention(
                    f"each write round took longer than a period ({windows.period_ms / 1000:g} s) for "
                    f"{_STALL_S:g} s; run the call again (the documents it had written already are "
                    "left as they are)"
                )
            windows.set_server_time(moved)
        elif retry:
            conflicts += 1
            if conflicts >= CONFLICT_ROUNDS:
                raise too_many(len(retry))
        pending = retry


class ClusterWindowedWrites:
    """An index with a retention window on Redis Cluster: each batch in the ordered steps above.

    Args:
        store: the index's keys and sender (on a cluster).
        windows: the index's periods.
        f: fingerprint width.
    """

    def __init__(self, store: Store, windows: Windows, f: int) -> None:
        self.store, self.windows, self.f = store, windows, f

    def apply(self, ops: list[Write]) -> list[Outcome | None]:
        """Apply the writes (guards are not used: add-if-new on a cluster takes bucket locks).

        Args:
            ops: the writes; an empty new fingerprint removes the id.

        Raises:
            WriteContention: documents kept changing under concurrent writers.
        """
        return in_waves(ops, lambda wave: self._apply_unique([(doc_id, new) for doc_id, new, _ in wave]))

    def seen(self, docs: list[tuple[bytes, bytes]]) -> None:
        """In a sliding window, move documents found again into the current period, if still stored so.

        A document is moved only while its id still has that fingerprint (it is never written back
        after a replacement or a removal); a refresh that cannot be made is skipped, as on a
        standalone server.

        Args:
            docs: (id, stored fingerprint) of each document found again.
        """
        if not self.windows.retention.sliding or not docs:
            return
        try:
            self._apply_unique(list(dict(docs).items()), only_moves=True)
        except SimhashRedisError:
            return

    def _apply_unique(self, ops: list[tuple[bytes, bytes]], only_moves: bool = False) -> list[Outcome | None]:
        """`apply` for writes naming each id once: rounds of the steps until no conflict is left.

        Args:
            ops: (id, new fingerprint or b"" to remove).
            only_moves: move a document into the current period only if its id has that fingerprint
                in an older one (a sliding refresh); write nothing else.
        """
        outcomes: list[Outcome | None] = [None] * len(ops)
        # Each id's value before the call: a later round may find it half-moved by an earlier one.
        prior: dict[int, bytes] = {}
        in_rounds(
            self.windows,
            lambda view, pending: self._round(view, ops, pending, outcomes, prior, only_moves),
            list(range(len(ops))),
        )
        return outcomes

    def _round(
        self,
        view: View,
        ops: list[tuple[bytes, bytes]],
        pending: list[int],
        outcomes: list[Outcome | None],
        prior: dict[int, bytes],
        only_moves: bool,
    ) -> tuple[list[int], int | None]:
        """The steps for the pending documents: those to try again, and a node's time if refused.

        Args:
            view: the periods.
            ops: every write of the call.
            pending: the writes (positions in ops) of this round.
            outcomes: filled in for the writes this round settles.
            prior: each id's value when the call first read it (b"" for none); filled in here.
            only_moves: as `_apply_unique`.
        """
        current = view.current
        here = self.windows.schema(current)
        # 1. where each id is
        held = self._where(view, ops, pending)
        for i in pending:
            prior.setdefault(i, held[i][-1][1] if held[i] else b"")
        if only_moves:
            # A sliding refresh: only ids whose newest entry has that fingerprint, in an older period.
            pending = [
                i for i in pending if held[i] and held[i][-1][1] == ops[i][1] and held[i][-1][0] < current
            ]
        writing = [i for i in pending if ops[i][1]]
        removing = [i for i in pending if not ops[i][1]]
        expire = self.windows.expires_at(current)
        # 2. the new fingerprint into the current period's tables
        tables: list[Command] = []
        for i in writing:
            for key in here.tables(decode_fp(ops[i][1], self.f)):
                tables += [(b"SADD", key, ops[i][1]), (b"PEXPIREAT", key, expire)]
        if tables:
            self.store.execute(tables, durable=True)
        # 3. before a commit that changes the fingerprint: the id out of the other fingerprints' lists,
        # so that it is never listed under one it no longer has (a move with the same one stays found)
        self._unlist([(i, w, v) for i in writing for w, v in held[i] if v != ops[i][1]], ops)
        # 4. the commit
        retry: set[int] = set()
        moved = None
        committed = []
        if writing:
            calls = [
                ID_CAS.command(
                    [here.id_bucket(ops[i][0])],
                    [
                        ops[i][0],
                        ops[i][1],
                        dict(held[i]).get(current, b""),
                        self.windows.period_ms,
                        current,
                        expire,
                    ],
                )
                for i in writing
            ]
            for i, status in zip(writing, self.store.run_script(ID_CAS, calls, durable=True), strict=True):
                if status[:1] == b"w":
                    moved = int(status[1:])
                    retry.add(i)
                elif status[:1] == b"c":
                    retry.add(i)
                else:
                    committed.append(i)
        # 5. the id into the current period's list
        if committed:
            calls = [
                FP_IDS.command([here.fp_bucket(ops[i][1])], [b"+", ops[i][1], ops[i][0], expire])
                for i in committed
            ]
            self.store.run_script(FP_IDS, calls, durable=True)
        # 6. the entries left behind, read again (another writer may have committed into an older period
        # meanwhile): out of their lists, then out of their id maps; for a removal, every entry
        done = committed + removing
        again = self._where(view, ops, done)
        entries = [
            (i, w, v) for i in done for w, v in again[i] if i in removing or _superseded(w, again[i], current)
        ]
        self._unlist(entries, ops)
        if entries:
            calls = [
                ID_CAS.command([self.windows.schema(w).id_bucket(ops[i][0])], [ops[i][0], b"", v])
                for i, w, v in entries
            ]
            statuses = self.store.run_script(ID_CAS, calls, durable=True)
            retry.update(i for (i, _, _), status in zip(entries, statuses, strict=True) if status[:1] == b"c")
        for i in pending:
            if i not in retry:
                outcomes[i] = _outcome(prior[i], ops[i][1])
        return sorted(retry), moved

    def _where(
        self, view: View, ops: list[tuple[bytes, bytes]], docs: list[int]
    ) -> dict[int, list[tuple[int, bytes]]]:
        """(period, fingerprint) of each document's id-map entries, oldest period first."""
        if not docs:
            return {}
        per = len(view.windows)
        found = self.store.execute(
            [(b"HGET", key, ops[i][0]) for i in docs for key in view.id_keys(ops[i][0])]
        )
        return {
            i: [
                (w, v)
                for w, v in zip(view.windows, found[n * per : (n + 1) * per], strict=True)
                if v is not None
            ]
            for n, i in enumerate(docs)
        }

    def _unlist(self, entries: list[tuple[int, int, bytes]], ops: list[tuple[bytes, bytes]]) -> None:
        """Take each id out of the fingerprint-map list of a period (idempotent)."""
        if entries:
            calls = [
                FP_IDS.command([self.windows.schema(w).fp_bucket(v)], [b"-", v, ops[i][0]])
                for i, w, v in entries
            ]
            self.store.run_script(FP_IDS, calls, durable=True)


def _outcome(prior: bytes, new: bytes) -> Outcome:
    """A document's outcome from the value its id had (b"" for none) and the one written (b"": removed)."""
    if not new:
        return Outcome.REMOVED if prior else Outcome.MISSING
    if not prior:
        return Outcome.ADDED
    return Outcome.UNCHANGED if prior == new else Outcome.REPLACED


def _superseded(window: int, entries: list[tuple[int, bytes]], current: int) -> bool:
    """Whether an id's entry in a period gives way after a commit into `current`: the newest one stays.

    Args:
        window: the entry's period.
        entries: every entry of the id, oldest period first, the commit's included.
        current: the period just committed into (a writer with a later clock may have committed into a
            newer one meanwhile: then the commit gives way itself).
    """
    newest = max(w for w, _ in entries) if entries else current
    return window != max(newest, current)
