"""The rounds of writes into an index with a retention window (docs/retention.md), on the server's clock.

On a standalone server each round is one call of write.lua's format 'w' (a call refused for another
period comes back with the server's time, which the rounds adopt); on Redis Cluster, idempotent
single-key steps that never show a document half-written (`cluster_steps`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..errors import WriteContention
from ..results import Outcome
from ..transport import Command, Steps
from .locks import in_id_turns, too_many
from .store import FP_IDS, ID_CAS, Store, in_parts, parts_of, round_trip
from .verification import Verification
from .windows import View, Windows
from .write_args import (
    CONFLICT_ROUNDS,
    Guard,
    InPeriod,
    SketchedGuard,
    conflict_pause,
    conflict_paused,
    sketch_in,
    table_calls,
    windows_of,
    write_command,
)

__all__ = [
    "cluster_steps",
    "guard_covers",
    "in_rounds",
    "leaving",
    "on_cluster",
    "period_steps",
    "refused",
    "sketches_of",
]

T = TypeVar("T")

# Rounds in a row that settled nothing, refused with a period reported before (clocks that disagree).
_CLOCK_ROUNDS = 4
# Seconds of rounds that settle nothing while the clock moves on: within a bucket lock's 30 s.
_STALL_S = 20.0
_AGAIN = "; run the call again (the documents it had written already are left as they are)"


def in_rounds(
    windows: Windows,
    attempt: Callable[[View, list[T]], tuple[list[T], int | None]],
    pending: list[T],
    read_again: Callable[[list[T]], list[T]] | None = None,
) -> None:
    """Run rounds of a windowed write on the server's clock until nothing is left; `attempt` runs one:
    what to try again, and the server's time (ms) if refused for another period.

    Raises:
        WriteContention: rounds kept settling nothing.
    """
    conflicts = clock = 0
    latest: int | None = None  # the latest period a refusal reported
    progress = time.monotonic()  # when a round last settled some
    while pending:
        retry, moved = attempt(windows.view(), pending)
        # Refusals count only in a row of rounds that settle nothing: a long batch crosses many boundaries.
        settled = len(retry) < len(pending)
        if settled:
            clock, progress = 0, time.monotonic()
        if moved is not None:
            period = moved // windows.period_ms
            # A later period than any reported is the clock going on; one seen before, clocks that disagree.
            onward = latest is None or period > latest
            latest = period if latest is None else max(latest, period)
            if not settled and not onward:
                clock += 1
            if clock > _CLOCK_ROUNDS:
                raise WriteContention(
                    "the server's clock kept moving between periods (clocks that disagree?)" + _AGAIN
                )
            if not settled and time.monotonic() - progress > _STALL_S:
                raise WriteContention(
                    f"each write round took longer than a period ({windows.period_ms / 1000:g} s) for "
                    f"{_STALL_S:g} s" + _AGAIN
                )
            windows.set_server_time(moved)
        elif retry:
            conflicts += 1
            if conflicts >= CONFLICT_ROUNDS:
                raise too_many(len(retry))
            conflict_pause(conflicts)
            retry = read_again(retry) if read_again and conflict_paused(conflicts) else retry
        pending = retry


def on_cluster(
    store: Store,
    windows: Windows,
    f: int,
    verification: Verification | None,
    ops: list[tuple[bytes, bytes]],
    only_moves: bool = False,
    sketches: list[bytes | None] | None = None,
) -> list[Outcome | None]:
    """Apply (id, new fingerprint or b"") writes that name each id once, on a cluster, under their id
    locks, in rounds; `only_moves`: a sliding refresh; `sketches`: verified mode's (b"": none)."""
    outcomes: list[Outcome | None] = [None] * len(ops)
    # Each id's value before the call: a later round may find it half-moved by an earlier one.
    prior: dict[int, bytes] = {}

    def attempt(view: View, pending: list[int]) -> tuple[list[int], int | None]:
        return store.run(
            lambda: cluster_steps(
                windows, f, view, ops, pending, outcomes, prior, only_moves, sketches, verification
            ),
            durable=True,
        )

    in_id_turns(store, [doc_id for doc_id, _ in ops], lambda turn: in_rounds(windows, attempt, turn))
    return outcomes


def cluster_steps(
    windows: Windows,
    f: int,
    view: View,
    ops: list[tuple[bytes, bytes]],
    pending: list[int],
    outcomes: list[Outcome | None],
    prior: dict[int, bytes],
    only_moves: bool,
    sketches: list[bytes | None] | None = None,
    verification: Verification | None = None,
) -> Steps[tuple[list[int], int | None]]:
    current = view.current
    here = windows.schema(current)
    # 1. where each id is
    held = yield from _where(view, ops, pending)
    for i in pending:
        prior.setdefault(i, held[i][-1][1] if held[i] else b"")
    if only_moves:
        pending = [i for i in pending if held[i] and held[i][-1][1] == ops[i][1] and held[i][-1][0] < current]
        if verification is not None:  # each moves with its sketch, or not at all
            found = yield from sketches_of(windows, [(*held[i][-1], ops[i][0]) for i in pending])
            sketches = [None] * len(ops)
            for i, sketch in zip(pending, found, strict=True):
                sketches[i] = sketch
            pending = [i for i in pending if sketches[i] is not None]
    writing = [i for i in pending if ops[i][1]]
    removing = [i for i in pending if not ops[i][1]]
    expire = windows.expires_at(current)
    # 2. the new fingerprint into the current period's tables
    tables: list[Command] = []
    for i in writing:
        sketch = (sketches[i] if sketches is not None else None) or b""
        tables += table_calls(here, f, ops[i][1], sketch, verification, expire)
    yield from round_trip(tables)
    # 3. the id out of other fingerprints' lists, never listed under one it no longer has
    yield from round_trip(
        leaving(windows, [(w, v, ops[i][0]) for i in writing for w, v in held[i] if v != ops[i][1]])[0]
    )
    # 4. the commit
    retry: set[int] = set()
    moved = None
    committed: list[int] = []
    calls = [
        ID_CAS.command(
            [here.id_bucket(ops[i][0])],
            [ops[i][0], ops[i][1], dict(held[i]).get(current, b""), windows.period_ms, current, expire],
        )
        for i in writing
    ]
    for i, status in zip(writing, (yield from round_trip(calls)), strict=True):
        if status[:1] == b"w":
            moved = int(status[1:])
        (retry.add if status[:1] in (b"w", b"c") else committed.append)(i)
    # 5. the id into the current period's list
    attach = []
    for i in committed:
        args: list[bytes | int] = [b"+", ops[i][1], ops[i][0], expire]
        sketch = None if sketches is None else sketches[i]
        if sketch is not None:  # verified mode: the sketch beside the id (b"": none)
            args.append(sketch)
        attach.append(FP_IDS.command([here.fp_bucket(ops[i][1])], args))
    yield from round_trip(attach)
    # 6. the entries left behind, read again (another writer may have committed meanwhile); a removal's all
    done = committed + removing
    again = yield from _where(view, ops, done)
    entries = [
        (i, w, v) for i in done for w, v in again[i] if i in removing or _superseded(w, again[i], current)
    ]
    unlist, unmap = leaving(windows, [(w, v, ops[i][0]) for i, w, v in entries])
    yield from round_trip(unlist)
    statuses = yield from round_trip(unmap)
    retry.update(i for (i, _, _), status in zip(entries, statuses, strict=True) if status[:1] == b"c")
    for i in pending:
        if i not in retry:
            outcomes[i] = _outcome(prior[i], ops[i][1])
    return sorted(retry), moved


def _where(
    view: View, ops: list[tuple[bytes, bytes]], docs: list[int]
) -> Steps[dict[int, list[tuple[int, bytes]]]]:
    per = len(view.windows)
    found = yield from round_trip(
        [(b"HGET", key, ops[i][0]) for i in docs for key in view.id_keys(ops[i][0])]
    )
    return {
        i: [
            (w, v) for w, v in zip(view.windows, found[n * per : (n + 1) * per], strict=True) if v is not None
        ]
        for n, i in enumerate(docs)
    }


def sketches_of(windows: Windows, places: list[tuple[int, bytes, bytes]]) -> Steps[list[bytes | None]]:
    replies = yield from round_trip(
        [(b"HGET", windows.schema(w).fp_bucket(v), windows.keys.sketch_field(v)) for w, v, _ in places]
    )
    return [sketch_in(stored, doc_id) for (_, _, doc_id), stored in zip(places, replies, strict=True)]


def leaving(
    windows: Windows, entries: Sequence[tuple[int, bytes, bytes]]
) -> tuple[list[Command], list[Command]]:
    """The two round trips taking (period, stored fingerprint, id) entries out: of the fingerprint-map
    lists first (never listed without an id-map entry), then of the id maps (a compare-and-set)."""
    return (
        [FP_IDS.command([windows.schema(w).fp_bucket(v)], [b"-", v, doc_id]) for w, v, doc_id in entries],
        [ID_CAS.command([windows.schema(w).id_bucket(doc_id)], [doc_id, b"", v]) for w, v, doc_id in entries],
    )


def _outcome(prior: bytes, new: bytes) -> Outcome:
    if not new:
        return Outcome.REMOVED if prior else Outcome.MISSING
    if not prior:
        return Outcome.ADDED
    return Outcome.UNCHANGED if prior == new else Outcome.REPLACED


def _superseded(window: int, entries: list[tuple[int, bytes]], current: int) -> bool:
    newest = max(w for w, _ in entries) if entries else current
    return window != max(newest, current)


def period_steps(
    windows: Windows,
    f: int,
    tables: int,
    view: View,
    sent: list[InPeriod],
    acked: list[list[bytes]],
    token: bytes,
    verification: Verification | None = None,
) -> Steps[None]:
    """A round's script calls, each reply appended to `acked`, up to one refused (`token`: of the reply
    records)."""
    parts = parts_of(sent, all(doc[5] is None for doc in sent))

    def call(n: int) -> Command:
        record = windows.keys.reply(b"%s:0.%d" % (token, n))
        return write_command((windows, view), f, tables, parts[n], record, verification)

    yield from in_parts(len(parts), call, acked, refused)


def refused(reply: list[bytes]) -> bool:
    return bool(reply) and reply[0][:1] == b"w"


def guard_covers(guard: Guard | None, view: View) -> bool:
    if guard is None or (isinstance(guard, SketchedGuard) and not guard.checks):
        return True
    read = set(guard.windows or ()) if isinstance(guard, SketchedGuard) else set(windows_of(guard))
    return all(window in read for window in view.windows if window <= view.current)
