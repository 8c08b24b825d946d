"""Writes into an index with a retention window on a standalone server, as steps.

Each round is one call of the write script in its format 'w' (see write.lua; a large batch of adds: parts
of `PART`): into the period of the server's clock, moving a rewritten document out of the period it was
in, every key written set to expire with its period (`store.windows`). The script finds each id in the
newest period that has it; a call refused for another period than the call's view comes back with the
server's time, which the rounds adopt (`windowed_writes_cluster.in_rounds`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..codec import decode_fp
from ..results import Outcome
from ..transport import Command, Steps
from .scripts import WRITE
from .store import Store
from .windowed_writes_cluster import in_rounds
from .windows import View, WindowedSets, Windows
from .write_ops import Guard, Write, in_parts, outcome_of, parts_of

__all__ = ["refresh", "write"]

# A document of a call: its position in the batch, id, new and old fingerprints, old's period (0: none
# known), guard.
_InPeriod = tuple[int, bytes, bytes, bytes, int, Guard | None]


def write(store: Store, windows: Windows, f: int, tables: int, ops: list[Write]) -> list[Outcome | None]:
    """Apply writes that name each id once (guards: the `WindowedSets` a read returned): rounds until no
    conflict is left.

    Raises:
        WriteContention: documents kept changing under concurrent writers (nothing of them written).
    """
    outcomes: list[Outcome | None] = [None] * len(ops)

    def attempt(view: View, pending: list[_InPeriod]) -> tuple[list[_InPeriod], int | None]:
        # A guard that did not read every live period is not written with: read again (None).
        sent = [doc for doc in pending if _guard_covers(doc[5], view)]
        acked: list[list[bytes]] = []
        if sent:
            store.run(lambda: steps(windows, f, tables, view, sent, acked))
        statuses, moved = _statuses(acked)
        retry = sent[len(statuses) :]  # not sent, or refused by the clock: the same again
        for (i, doc_id, new, old, _, guard), status in zip(sent[: len(statuses)], statuses, strict=True):
            if status[:1] == b"c":
                where, _, current = status[1:].partition(b":")
                window = view.windows[int(where) - 1] if current else 0
                retry.append((i, doc_id, new, current, window, guard))
            elif status != b"g":
                outcomes[i] = outcome_of(status, old)
        return retry, moved

    in_rounds(
        windows, attempt, [(i, doc_id, new, b"", 0, guard) for i, (doc_id, new, guard) in enumerate(ops)]
    )
    return outcomes


def steps(
    windows: Windows, f: int, tables: int, view: View, sent: list[_InPeriod], acked: list[list[bytes]]
) -> Steps[None]:
    """A round's script calls, each reply appended to `acked`: from the first not acknowledged, up to the
    last or to one refused for another period (the calls after it are not sent).

    A large batch of adds goes in parts of `PART`, each sent as soon as the one before is answered and
    built while the server runs it.
    """
    parts = parts_of(sent, all(doc[5] is None for doc in sent))
    yield from in_parts(len(parts), lambda n: command(windows, f, tables, view, parts[n]), acked, _refused)


def refresh(store: Store, windows: Windows, f: int, tables: int, docs: list[tuple[bytes, bytes]]) -> None:
    """Move documents found again into the current period (a sliding window), if still stored so.

    A document is moved only while its id still has that fingerprint: one script call finds it where it
    is (already in the current period: it changes nothing), a second moves it. One that was replaced or
    removed meanwhile is left alone, never written back.

    Raises:
        SimhashRedisError: an error reply, or the server cannot be reached.
    """
    view = windows.view()
    pending: list[_InPeriod] = [
        (i, doc_id, fp, fp, view.current, None) for i, (doc_id, fp) in enumerate(dict(docs).items())
    ]
    for _ in range(2):
        acked: list[list[bytes]] = []
        store.run(functools.partial(steps, windows, f, tables, view, pending, acked))
        # A large call goes as parts (`steps`): the statuses of every part up to one refused.
        statuses, refused_at = _statuses(acked)
        if refused_at is not None:
            windows.set_server_time(refused_at)
            return  # a period boundary passed: the documents will be seen again soon enough
        moved: list[_InPeriod] = []
        for (i, doc_id, fp, _, _, _), status in zip(pending, statuses, strict=True):
            where, _, current = status[1:].partition(b":")
            if status[:1] == b"c" and current == fp:  # in an older period, unchanged: move it
                moved.append((i, doc_id, fp, fp, view.windows[int(where) - 1], None))
        if not moved:
            return
        pending = moved


def command(windows: Windows, f: int, tables: int, view: View, pending: Sequence[_InPeriod]) -> Command:
    """A script call in format 'w' (see write.lua) for the documents, against the view's periods."""
    schemas, numbers = view.schemas, view.windows
    here = numbers.index(view.current) + 1
    current = schemas[here - 1]
    id_keys = view.id_keys
    keys: list[bytes] = [schema.counts for schema in schemas]
    args: list[bytes | int] = [tables, b"w", windows.period_ms, windows.retention_ms]
    args += [len(numbers), here, *numbers]
    for _, doc_id, new, old, old_window, guard in pending:
        keys += id_keys(doc_id)
        if new:
            keys.append(current.fp_bucket(new))
            keys.extend(current.tables(decode_fp(new, f)))
        where = numbers.index(old_window) + 1 if old and old_window in numbers else 0
        if not where:  # its period expired since: the script says where the id is now
            old = b""
        elif old != new or where != here:
            keys.append(schemas[where - 1].fp_bucket(old))
            keys.extend(schemas[where - 1].tables(decode_fp(old, f)))
        args.extend((doc_id, new, old, where or b"", b"" if guard is None else b"1"))
        if guard is not None:
            fp = decode_fp(new, f)
            for window in _windows_of(guard):
                keys.extend(windows.schema(window).tables(fp))
            args.append(len(guard))
            args.extend(len(members) for members in guard)
            for members in guard:
                args.extend(members)
    return WRITE.command(keys, args)


def _statuses(acked: list[list[bytes]]) -> tuple[list[bytes], int | None]:
    """The statuses of the documents done, and the server's time (ms) if a call was refused."""
    statuses: list[bytes] = []
    for reply in acked:
        if _refused(reply):
            return statuses, int(reply[0][1:])
        statuses += reply
    return statuses, None


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
    """
    if guard is None:
        return True
    read = set(_windows_of(guard))
    return all(window in read for window in view.windows if window <= view.current)
