"""Writes into an index with a retention window on a standalone server, as steps.

Each round is one call of write.lua's format 'w': into the period of the server's clock, a rewritten
document moved out of its old period, atomically. A call refused for another period than its view comes
back with the server's time, which the rounds adopt (`windowed_writes_cluster.in_rounds`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..codec import decode_fp, pack_fps
from ..errors import SimhashRedisError
from ..results import Outcome
from ..transport import Command, Steps
from .keys import KeySchema
from .scripts import BAND_DROP, WRITE
from .store import Store
from .verification import Verification
from .windowed_writes_cluster import in_rounds
from .windows import View, WindowedSets, Windows
from .write_ops import Guard, SketchedGuard, Write, in_parts, outcome_of, parts_of, sketch_in

__all__ = ["refresh", "write"]

# A document of a call: position, id, new and old fingerprints, old's period (0: none known), guard.
_InPeriod = tuple[int, bytes, bytes, bytes, int, Guard | None]


def write(
    store: Store,
    windows: Windows,
    f: int,
    tables: int,
    ops: list[Write],
    verification: Verification | None = None,
) -> list[Outcome | None]:
    """Apply writes that name each id once (guards: the `WindowedSets` a read returned) in rounds.

    Raises:
        WriteContention: documents kept changing under concurrent writers (nothing of them written).
    """
    outcomes: list[Outcome | None] = [None] * len(ops)
    dropped: list[tuple[int, bytes, bytes]] = []

    def attempt(view: View, pending: list[_InPeriod]) -> tuple[list[_InPeriod], int | None]:
        # A guard that did not read every live period is not written with: read again (None).
        sent = [doc for doc in pending if _guard_covers(doc[5], view)]
        acked: list[list[bytes]] = []
        if sent:
            store.run(lambda: steps(windows, f, tables, view, sent, acked, verification))
        statuses, moved = _statuses(acked)
        retry = sent[len(statuses) :]  # not sent, or refused by the clock: the same again
        for (i, doc_id, new, old, _, guard), status in zip(sent[: len(statuses)], statuses, strict=True):
            if status[:1] == b"c":
                where, _, current = status[1:].partition(b":")
                window = view.windows[int(where) - 1] if current else 0
                retry.append((i, doc_id, new, current, window, guard))
            elif status != b"g":
                outcomes[i] = outcome_of(status[:1], old)
        dropped.extend(_dropped(statuses, view))
        return retry, moved

    in_rounds(
        windows, attempt, [(i, doc_id, new, b"", 0, guard) for i, (doc_id, new, guard) in enumerate(ops)]
    )
    if dropped and verification is not None:
        _drop_bands(store, windows, f, verification, dropped)
    return outcomes


def steps(
    windows: Windows,
    f: int,
    tables: int,
    view: View,
    sent: list[_InPeriod],
    acked: list[list[bytes]],
    verification: Verification | None = None,
) -> Steps[None]:
    """A round's script calls (a large batch's parts), each reply appended to `acked`, up to one refused."""
    parts = parts_of(sent, all(doc[5] is None for doc in sent))
    yield from in_parts(
        len(parts), lambda n: command(windows, f, tables, view, parts[n], verification), acked, _refused
    )


def refresh(
    store: Store,
    windows: Windows,
    f: int,
    tables: int,
    docs: list[tuple[bytes, bytes]],
    verification: Verification | None = None,
) -> None:
    """Move documents found again into the current period (a sliding window), if still stored so.

    One call finds each where it is, a second moves it only while its id still has that fingerprint.

    Raises:
        SimhashRedisError: an error reply, or the server cannot be reached.
    """
    view = windows.view()
    pending: list[_InPeriod] = [
        (i, doc_id, fp, fp, view.current, None) for i, (doc_id, fp) in enumerate(dict(docs).items())
    ]
    for _ in range(2):
        acked: list[list[bytes]] = []
        store.run(functools.partial(steps, windows, f, tables, view, pending, acked, verification))
        statuses, refused_at = _statuses(acked)
        if verification is not None and _dropped(statuses, view):
            _drop_bands(store, windows, f, verification, _dropped(statuses, view))
        if refused_at is not None:
            windows.set_server_time(refused_at)
            return  # a boundary passed: the documents will be seen again soon enough
        moved: list[_InPeriod] = []
        for (i, doc_id, fp, _, _, _), status in zip(pending, statuses, strict=True):
            where, _, current = status[1:].partition(b":")
            if status[:1] == b"c" and current == fp:  # in an older period, unchanged: move it
                moved.append((i, doc_id, fp, fp, view.windows[int(where) - 1], None))
        if not moved:
            return
        pending = moved if verification is None else _with_sketches(store, windows, moved)


def command(
    windows: Windows,
    f: int,
    tables: int,
    view: View,
    pending: Sequence[_InPeriod],
    verification: Verification | None = None,
) -> Command:
    """A call of write.lua's format 'w' for the documents, against the view's periods."""
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
        if not where:  # its period expired since: the script finds the id
            old = b""
        elif old != new or where != here:
            keys.append(schemas[where - 1].fp_bucket(old))
            keys.extend(schemas[where - 1].tables(decode_fp(old, f)))
        if isinstance(guard, SketchedGuard):
            _sketched(windows, f, tables, current, verification, keys, args, (doc_id, new, old, where, guard))
            continue
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


def _sketched(
    windows: Windows,
    f: int,
    tables: int,
    current: KeySchema,
    verification: Verification | None,
    keys: list[bytes],
    args: list[bytes | int],
    doc: tuple[bytes, bytes, bytes, int, SketchedGuard],
) -> None:
    """A verified document's keys and arguments (write.lua, format 'w')."""
    doc_id, new, old, where, guard = doc
    places = current.band_places(guard.sketch, verification) if new else []
    kind = b"m" if guard.moving else b"s" if guard.checks else b"k"
    args.extend((doc_id, new, old, where or b"", kind, len(places)))
    keys.extend(key for key, _ in places)
    if places:
        args.append(pack_fps([new], f))
        args.extend(field for _, field in places)
    if guard.checks:
        read = guard.windows or ()
        if len(guard) != len(read) * (tables + len(places)):
            # Any other count would shift every later document's arguments.
            raise ValueError(
                f"a guard of {len(guard)} sets, for {len(read)} periods of {tables} tables "
                f"+ {len(places)} bands"
            )
        fp = decode_fp(new, f)
        for window in read:
            keys.extend(windows.schema(window).tables(fp))
        for window in read:
            keys.extend(key for key, _ in windows.schema(window).band_places(guard.sketch, verification))
        args.append(len(guard))
        args.extend(len(members) for members in guard)
        at = tables * len(read)
        for n, members in enumerate(guard):
            # A band's value holds packed fingerprints: its members are compared packed.
            args.extend(members if n < at else [pack_fps([member], f) for member in members])
    args.append(guard.sketch)


def _with_sketches(store: Store, windows: Windows, moved: list[_InPeriod]) -> list[_InPeriod]:
    """Documents to move, each with its id's sketch in its period; one without (changed since) stays."""
    replies = store.execute(
        [
            (b"HGET", windows.schema(w).fp_bucket(fp), windows.keys.sketch_field(fp))
            for _, _, fp, _, w, _ in moved
        ]
    )
    out: list[_InPeriod] = []
    for (i, doc_id, fp, old, w, _), stored in zip(moved, replies, strict=True):
        sketch = sketch_in(stored, doc_id)
        if sketch is not None:
            out.append((i, doc_id, fp, old, w, SketchedGuard(None, sketch, moving=True)))
    return out


def _drop_bands(
    store: Store, windows: Windows, f: int, mode: Verification, dropped: list[tuple[int, bytes, bytes]]
) -> None:
    """Take (period, stored fingerprint, dropped sketch) out of the sketch's band tables in that period.

    Best effort: what a failure leaves, near() reads as unconfirmed candidates, and it expires.
    """
    calls = []
    for window, fp, sketch in dropped:
        if len(sketch) < mode.bands * mode.band_bytes:
            continue
        schema = windows.schema(window)
        bucket, packed = schema.fp_bucket(fp), pack_fps([fp], f)
        for i, (key, field) in enumerate(schema.band_places(sketch, mode)):
            calls.append(BAND_DROP.command([key, bucket], [fp, i * mode.band_bytes, field, packed]))
    if calls:
        try:
            store.run_script(BAND_DROP, calls)
        except SimhashRedisError:
            return


def _dropped(statuses: list[bytes], view: View) -> list[tuple[int, bytes, bytes]]:
    """(period, stored fingerprint, sketch) of each sketch the writes dropped."""
    out = []
    for status in statuses:
        if len(status) > 1 and status[:1] in b"urd":
            where, fp, sketch = status[1:].split(b":", 2)
            out.append((view.windows[int(where) - 1], fp, sketch))
    return out


def _statuses(acked: list[list[bytes]]) -> tuple[list[bytes], int | None]:
    """The statuses of the documents done, and the server's time (ms) if a call was refused."""
    statuses: list[bytes] = []
    for reply in acked:
        if _refused(reply):
            return statuses, int(reply[0][1:])
        statuses += reply
    return statuses, None


def _refused(reply: list[bytes]) -> bool:
    """Whether a call was refused for another period than the call's."""
    return bool(reply) and reply[0][:1] == b"w"


def _windows_of(guard: Guard) -> tuple[int, ...]:
    """The periods a guard was read from (TypeError for one not read from them: a caller's bug)."""
    if not isinstance(guard, WindowedSets):
        raise TypeError("a guard of an index with a retention window comes from its reads (WindowedSets)")
    return guard.windows


def _guard_covers(guard: Guard | None, view: View) -> bool:
    """Whether a guard read the sets of every period up to the current one (else: read again)."""
    if guard is None or (isinstance(guard, SketchedGuard) and not guard.checks):
        return True
    read = set(guard.windows or ()) if isinstance(guard, SketchedGuard) else set(_windows_of(guard))
    return all(window in read for window in view.windows if window <= view.current)
