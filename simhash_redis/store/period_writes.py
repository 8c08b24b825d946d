"""Writes into an index with a retention window, and the choice of an index's write path.

An index with a retention window writes each batch with one call of the write script in its format 'w'
(see write.lua): into the period of the server's clock, moving a rewritten document out of the period
it was in, every key written set to expire with its period (`store.windows`).
"""

from __future__ import annotations

from ..codec import decode_fp
from ..errors import SimhashRedisError
from ..results import Outcome
from ..transport import Command
from . import writes as plain
from .config import Verification
from .period_steps import ClusterWindowedWrites, in_rounds
from .scripts import WRITE
from .store import Store
from .windows import View, WindowedSets, Windows
from .writes import Guard, Write, Writes, WriteSteps, in_waves, outcome_of, run_in_parts

__all__ = ["WindowedWrites", "writes_for"]

# A document of a call: its position in the batch, id, new and old fingerprints, old's period (0: none
# known), guard.
_InPeriod = tuple[int, bytes, bytes, bytes, int, Guard | None]


class WindowedWrites:
    """An index with a retention window: each batch is one script call writing into the current period.

    The script finds each id in the newest period that has it and moves a rewritten document into the
    current one; the documents' keys expire with their period (`store.windows`).

    Args:
        store: the index's keys and sender (a standalone server).
        windows: the index's periods.
        f: fingerprint width.
        tables: number of tables.
    """

    def __init__(self, store: Store, windows: Windows, f: int, tables: int) -> None:
        self.store, self.windows, self.f, self.tables = store, windows, f, tables

    def apply(self, ops: list[Write]) -> list[Outcome | None]:
        """Apply the writes; None for a guarded write whose table sets changed since they were read.

        Args:
            ops: the writes; guards are the `WindowedSets` a read returned.

        Raises:
            WriteContention: documents kept changing under concurrent writers (nothing of them written).
        """
        return in_waves(ops, self._apply_unique)

    def _apply_unique(self, ops: list[Write]) -> list[Outcome | None]:
        """`apply` for writes that name each id once: rounds until no conflict is left."""
        outcomes: list[Outcome | None] = [None] * len(ops)

        def attempt(view: View, pending: list[_InPeriod]) -> tuple[list[_InPeriod], int | None]:
            # A guard that did not read every live period is not written with: read again (None).
            sent = [doc for doc in pending if _guard_covers(doc[5], view)]
            statuses, moved = self._run(view, sent)
            retry = sent[len(statuses) :]  # not sent, or refused by the clock: the same again
            for (i, doc_id, new, old, _, guard), status in zip(sent[: len(statuses)], statuses, strict=True):
                if status[:1] == b"c":
                    where, _, current = status[1:].partition(b":")
                    window = view.windows[int(where) - 1] if current else 0
                    retry.append((i, doc_id, new, current, window, guard))
                elif status != b"g":
                    outcomes[i] = outcome_of(status, old)
            return retry, moved

        first = [(i, doc_id, new, b"", 0, guard) for i, (doc_id, new, guard) in enumerate(ops)]
        in_rounds(self.windows, attempt, first)
        return outcomes

    def _run(self, view: View, sent: list[_InPeriod]) -> tuple[list[bytes], int | None]:
        """Run the documents' script calls: the statuses of those done, and the server's time or None.

        The server's time comes back when a call was refused for another period: it and the calls
        after it are not done. A large batch of adds goes in parts of `writes.PART`, each built while the
        server runs the previous one.

        Args:
            view: the periods of the calls.
            sent: the documents.

        Raises:
            SimhashRedisError: an error reply (the calls before it are applied).
        """
        if not sent:
            return [], None
        part = plain.PART  # read at each call: one knob for both paths
        if len(sent) >= 2 * part and all(doc[5] is None for doc in sent):
            parts = [sent[i : i + part] for i in range(0, len(sent), part)]
            replies = run_in_parts(
                self.store, WRITE, lambda n: self._command(view, parts[n]), len(parts), _refused
            )
        else:
            replies = self.store.run_script(WRITE, [self._command(view, sent)])
        statuses: list[bytes] = []
        for reply in replies:
            if _refused(reply):
                return statuses, int(reply[0][1:])
            statuses += reply
        return statuses, None

    def seen(self, docs: list[tuple[bytes, bytes]]) -> None:
        """In a sliding window, move documents found again into the current period, if still stored so.

        A document is moved only while its id still has that fingerprint: one script call finds it
        where it is (already in the current period: it changes nothing), a second moves it. One that
        was replaced or removed meanwhile is left alone, never written back. The refresh is a courtesy
        to the documents found: when it cannot be made (a full server, a period boundary, an
        unreachable server), they keep their period, and the caller's add-if-new, whose own writes are
        done, is not failed for it.

        Args:
            docs: (id, stored fingerprint) of each document found again.
        """
        if not self.windows.retention.sliding or not docs:
            return
        try:
            self._move_to_current(docs)
        except SimhashRedisError:
            return

    def _move_to_current(self, docs: list[tuple[bytes, bytes]]) -> None:
        """`seen`'s moves, errors passed on.

        Raises:
            SimhashRedisError: an error reply, or the server cannot be reached.
        """
        view = self.windows.view()
        pending: list[_InPeriod] = [
            (i, doc_id, fp, fp, view.current, None) for i, (doc_id, fp) in enumerate(dict(docs).items())
        ]
        for _ in range(2):
            reply: list[bytes] = self.store.run_script(WRITE, [self._command(view, pending)])[0]
            if _refused(reply):
                self.windows.set_server_time(int(reply[0][1:]))
                return  # a period boundary passed: the documents will be seen again soon enough
            moved: list[_InPeriod] = []
            for (i, doc_id, fp, _, _, _), status in zip(pending, reply, strict=True):
                where, _, current = status[1:].partition(b":")
                if status[:1] == b"c" and current == fp:  # in an older period, unchanged: move it
                    moved.append((i, doc_id, fp, fp, view.windows[int(where) - 1], None))
            if not moved:
                return
            pending = moved

    def _command(self, view: View, pending: list[_InPeriod]) -> Command:
        """A script call in format 'w' (see write.lua) for the documents, against the view's periods."""
        schemas, windows = view.schemas, view.windows
        here = windows.index(view.current) + 1
        current = schemas[here - 1]
        id_keys = view.id_keys
        keys: list[bytes] = [schema.counts for schema in schemas]
        args: list[bytes | int] = [self.tables, b"w", self.windows.period_ms, self.windows.retention_ms]
        args += [len(windows), here, *windows]
        for _, doc_id, new, old, old_window, guard in pending:
            keys += id_keys(doc_id)
            if new:
                keys.append(current.fp_bucket(new))
                keys.extend(current.tables(decode_fp(new, self.f)))
            where = windows.index(old_window) + 1 if old and old_window in windows else 0
            if not where:  # its period expired since: the script says where the id is now
                old = b""
            elif old != new or where != here:
                keys.append(schemas[where - 1].fp_bucket(old))
                keys.extend(schemas[where - 1].tables(decode_fp(old, self.f)))
            args.extend((doc_id, new, old, where or b"", b"" if guard is None else b"1"))
            if guard is not None:
                fp = decode_fp(new, self.f)
                for window in _windows_of(guard):
                    keys.extend(self.windows.schema(window).tables(fp))
                args.append(len(guard))
                args.extend(len(members) for members in guard)
                for members in guard:
                    args.extend(members)
        return WRITE.command(keys, args)


def _refused(reply: list[bytes]) -> bool:
    """Whether a call was refused because the server's clock is in another period than the call's."""
    return bool(reply) and reply[0][:1] == b"w"


def _windows_of(guard: Guard) -> tuple[int, ...]:
    """The periods a guard was read from.

    Raises:
        TypeError: the guard was not read from the periods (a bug in the caller).
    """
    if not isinstance(guard, WindowedSets):
        raise TypeError("a guard of an index with a retention window comes from its reads (WindowedSets)")
    return guard.windows


def _guard_covers(guard: Guard | None, view: View) -> bool:
    """Whether a guard read the sets of every period up to the current one (else: read again).

    The write script checks that the view names every live period.

    Args:
        guard: a document's guard, or None.
        view: the periods of the write.
    """
    if guard is None:
        return True
    read = set(_windows_of(guard))
    return all(window in read for window in view.windows if window <= view.current)


def writes_for(
    store: Store,
    f: int,
    tables: int,
    windows: Windows | None = None,
    verification: Verification | None = None,
) -> Writes:
    """The writes of an index (`WriteSteps`; with a retention window, those of its periods).

    Args:
        store: the index's keys and sender.
        f: fingerprint width.
        tables: number of tables.
        windows: the periods of an index with a retention window.
        verification: the verified mode of an index that has one (its band tables).
    """
    if windows is not None and store.cluster:
        return ClusterWindowedWrites(store, windows, f)
    if windows is not None:
        return WindowedWrites(store, windows, f, tables)
    return WriteSteps(store, f, tables, verification)
