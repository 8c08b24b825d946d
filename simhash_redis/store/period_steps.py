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

from ..codec import decode_fp
from ..errors import SimhashRedisError, WriteContention
from ..results import Outcome
from ..transport import Command
from .scripts import Script
from .store import Store
from .windows import View, Windows
from .writes import CONFLICT_ROUNDS, Write, in_waves, too_many

__all__ = ["ClusterWindowedWrites"]

_CAS = Script("id_cas")
_IDS = Script("fp_ids")
# Commits refused because this worker's estimate of the clock was in another period than the node's.
_CLOCK_ROUNDS = 4


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

    def _apply_unique(
        self, ops: list[tuple[bytes, bytes]], only_moves: bool = False
    ) -> list[Outcome | None]:
        """`apply` for writes naming each id once: rounds of the steps until no conflict is left.

        Args:
            ops: (id, new fingerprint or b"" to remove).
            only_moves: move a document into the current period only if its id has that fingerprint
                in an older one (a sliding refresh); write nothing else.
        """
        outcomes: list[Outcome | None] = [None] * len(ops)
        pending = list(range(len(ops)))
        # Each id's value before the call: a later round may find it half-moved by an earlier one.
        prior: dict[int, bytes] = {}
        conflicts = clock = 0
        while pending:
            view = self.windows.view()
            retry, moved = self._round(view, ops, pending, outcomes, prior, only_moves)
            if moved is not None:  # the node's clock is in another period: adopt it
                clock += 1
                if clock > _CLOCK_ROUNDS:
                    raise WriteContention(
                        "the server's clock kept moving to another period; run the call again (the "
                        "documents it had written already are left as they are)"
                    )
                self.windows.set_server_time(moved)
            elif retry:
                conflicts += 1
                if conflicts >= CONFLICT_ROUNDS:
                    raise too_many(len(retry))
            pending = retry
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
        """The six steps for the pending documents: those to try again, and a node's time if refused.

        Args:
            view: the periods.
            ops: every write of the call.
            pending: the writes (positions in ops) of this round.
            outcomes: filled in for the writes this round settles.
            prior: each id's value when the call first read it (b"" for none); filled in here.
            only_moves: as `_apply_unique`.
        """
        current, windows = view.current, view.windows
        here = self.windows.schema(current)
        per = len(windows)
        # 1. where each id is
        found = self.store.execute(
            [(b"HGET", key, ops[i][0]) for i in pending for key in view.id_keys(ops[i][0])]
        )
        held = {
            i: [(w, v) for w, v in zip(windows, found[n * per : (n + 1) * per], strict=True) if v is not None]
            for n, i in enumerate(pending)
        }
        for i in pending:
            prior.setdefault(i, held[i][-1][1] if held[i] else b"")
        if only_moves:
            # A sliding refresh: only ids whose newest entry has that fingerprint, in an older period.
            pending = [i for i in pending if held[i] and held[i][-1] == (held[i][-1][0], ops[i][1])]
            pending = [i for i in pending if held[i][-1][0] != current]
        # Already stored so in the current period alone: nothing to write.
        for i in [i for i in pending if ops[i][1] and held[i] == [(current, ops[i][1])]]:
            outcomes[i] = _outcome(prior[i], ops[i][1])
            pending.remove(i)
        expire = self.windows.expires_at(current)
        # 2. the new fingerprint into the current period's tables
        tables: list[Command] = []
        for i in pending:
            if ops[i][1]:
                for key in here.tables(decode_fp(ops[i][1], self.f)):
                    tables += [(b"SADD", key, ops[i][1]), (b"PEXPIREAT", key, expire)]
        if tables:
            self.store.execute(tables, durable=True)
        # 3. the id out of every list it leaves
        leaving = [
            (i, w, v) for i in pending for w, v in held[i] if (w, v) != (current, ops[i][1]) or not ops[i][1]
        ]
        if leaving:
            calls = [
                _IDS.command([self.windows.schema(w).fp_bucket(v)], [b"-", v, ops[i][0]])
                for i, w, v in leaving
            ]
            self.store.run_script(_IDS, calls, durable=True)
        # 4. the id out of the older periods' id maps (and of the current one's, for a removal)
        retry: set[int] = set()
        old_entries = [(i, w, v) for i, w, v in leaving if w != current or not ops[i][1]]
        if old_entries:
            calls = [
                _CAS.command([self.windows.schema(w).id_bucket(ops[i][0])], [ops[i][0], b"", v])
                for i, w, v in old_entries
            ]
            statuses = self.store.run_script(_CAS, calls, durable=True)
            pairs = zip(old_entries, statuses, strict=True)
            retry.update(i for (i, _, _), status in pairs if status[:1] == b"c")
        # 5. the commit, and 6. the id into the current period's list
        writing = [i for i in pending if ops[i][1] and i not in retry]
        moved = None
        if writing:
            here_value = {i: dict(held[i]).get(current, b"") for i in writing}
            calls = [
                _CAS.command(
                    [here.id_bucket(ops[i][0])],
                    [ops[i][0], ops[i][1], here_value[i], self.windows.period_ms, current, expire],
                )
                for i in writing
            ]
            committed = []
            for i, status in zip(writing, self.store.run_script(_CAS, calls, durable=True), strict=True):
                if status[:1] == b"w":
                    moved = int(status[1:])
                    retry.add(i)
                elif status[:1] == b"c":
                    retry.add(i)
                else:
                    committed.append(i)
            if committed:
                calls = [
                    _IDS.command([here.fp_bucket(ops[i][1])], [b"+", ops[i][1], ops[i][0], expire])
                    for i in committed
                ]
                self.store.run_script(_IDS, calls, durable=True)
        for i in pending:
            if i not in retry:
                outcomes[i] = _outcome(prior[i], ops[i][1])
        return sorted(retry), moved


def _outcome(prior: bytes, new: bytes) -> Outcome:
    """A document's outcome from the value its id had (b"" for none) and the one written (b"": removed)."""
    if not new:
        return Outcome.REMOVED if prior else Outcome.MISSING
    if not prior:
        return Outcome.ADDED
    return Outcome.UNCHANGED if prior == new else Outcome.REPLACED
