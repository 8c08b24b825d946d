"""Writes into an index with a retention window on Redis Cluster, and the rounds of every windowed write.

The steps (docs/retention.md, "On Redis Cluster") are idempotent and never show a document
half-written; a batch cut off anywhere is completed by sending it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ..codec import decode_fp, pack_fps
from ..errors import WriteContention
from ..results import Outcome
from ..transport import Command, Steps
from .scripts import BAND_MEMBER, FP_IDS, ID_CAS
from .store import Store
from .verification import Verification
from .windows import View, Windows
from .write_ops import CONFLICT_ROUNDS, round_trip, sketch_in, too_many

__all__ = ["in_rounds", "steps", "write"]

T = TypeVar("T")

# Rounds in a row that settled nothing, refused with a period reported before (clocks that disagree).
_CLOCK_ROUNDS = 4
# Seconds of rounds that settle nothing while the clock moves on (each round slower than a period):
# within the 30 s of a bucket lock (`locks.TTL_MS`), which add-if-new on a cluster holds meanwhile.
_STALL_S = 20.0


def in_rounds(
    windows: Windows, attempt: Callable[[View, list[T]], tuple[list[T], int | None]], pending: list[T]
) -> None:
    """Run rounds of a windowed write until nothing is left to retry, on the server's clock.

    `attempt` runs one round: what to try again, and the server's time (ms) if refused for another period.

    Raises:
        WriteContention: rounds kept settling nothing (clocks that disagree, rounds slower than a
            period, writes that kept conflicting).
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


def write(
    store: Store,
    windows: Windows,
    f: int,
    ops: list[tuple[bytes, bytes]],
    only_moves: bool = False,
    *,
    sketches: list[bytes | None] | None = None,
    verification: Verification | None = None,
) -> list[Outcome | None]:
    """Apply writes that name each id once, on a cluster, in rounds until no conflict is left.

    Args:
        ops: (id, new fingerprint or b"" to remove); no guards (add-if-new on a cluster takes bucket locks).
        only_moves: only move a document whose id has that fingerprint in an older period (a sliding
            refresh).
        sketches: in verified mode, each write's sketch (b"": stored without one).

    Raises:
        WriteContention: documents kept changing under concurrent writers.
    """
    outcomes: list[Outcome | None] = [None] * len(ops)
    # Each id's value before the call: a later round may find it half-moved by an earlier one.
    prior: dict[int, bytes] = {}

    def attempt(view: View, pending: list[int]) -> tuple[list[int], int | None]:
        # A round started again takes every step again (each idempotent); outcomes are set at its end.
        return store.run(
            lambda: steps(
                windows, f, view, ops, pending, outcomes, prior, only_moves, sketches, verification
            ),
            durable=True,
        )

    in_rounds(windows, attempt, list(range(len(ops))))
    return outcomes


def steps(
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
    """A round of the steps: the documents to try again, and a node's time if refused."""
    current = view.current
    here = windows.schema(current)
    # 1. where each id is
    held = yield from _where(view, ops, pending)
    for i in pending:
        prior.setdefault(i, held[i][-1][1] if held[i] else b"")
    if only_moves:
        pending = [i for i in pending if held[i] and held[i][-1][1] == ops[i][1] and held[i][-1][0] < current]
        if verification is not None:  # each moves with its sketch, or not at all
            sketches = yield from _sketches_of(windows, ops, held, pending)
            pending = [i for i in pending if sketches[i] is not None]
    writing = [i for i in pending if ops[i][1]]
    removing = [i for i in pending if not ops[i][1]]
    expire = windows.expires_at(current)
    # 2. the new fingerprint into the current period's tables
    tables: list[Command] = []
    for i in writing:
        for key in here.tables(decode_fp(ops[i][1], f)):
            tables += [(b"SADD", key, ops[i][1]), (b"PEXPIREAT", key, expire)]
        sketch = sketches[i] if sketches is not None else None
        if sketch:
            packed = pack_fps([ops[i][1]], f)
            tables += [
                BAND_MEMBER.command([key], [b"+", field, packed, expire])
                for key, field in here.band_places(sketch, verification)
            ]
    yield from round_trip(tables)
    # 3. the id out of other fingerprints' lists, never listed under one it no longer has
    yield from round_trip(
        _unlist(windows, [(i, w, v) for i in writing for w, v in held[i] if v != ops[i][1]], ops)
    )
    # 4. the commit
    retry: set[int] = set()
    moved = None
    committed = []
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
            retry.add(i)
        elif status[:1] == b"c":
            retry.add(i)
        else:
            committed.append(i)
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
    yield from round_trip(_unlist(windows, entries, ops))
    calls = [
        ID_CAS.command([windows.schema(w).id_bucket(ops[i][0])], [ops[i][0], b"", v]) for i, w, v in entries
    ]
    statuses = yield from round_trip(calls)
    retry.update(i for (i, _, _), status in zip(entries, statuses, strict=True) if status[:1] == b"c")
    for i in pending:
        if i not in retry:
            outcomes[i] = _outcome(prior[i], ops[i][1])
    return sorted(retry), moved


def _where(
    view: View, ops: list[tuple[bytes, bytes]], docs: list[int]
) -> Steps[dict[int, list[tuple[int, bytes]]]]:
    """(period, fingerprint) of each document's id-map entries, oldest period first."""
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


def _sketches_of(
    windows: Windows,
    ops: list[tuple[bytes, bytes]],
    held: dict[int, list[tuple[int, bytes]]],
    docs: list[int],
) -> Steps[list[bytes | None]]:
    """The sketch each document's id has in its period (None where none), by position."""
    places = [(i, held[i][-1]) for i in docs]
    replies = yield from round_trip(
        [(b"HGET", windows.schema(w).fp_bucket(v), windows.keys.sketch_field(v)) for _, (w, v) in places]
    )
    found: list[bytes | None] = [None] * len(ops)
    for (i, _), stored in zip(places, replies, strict=True):
        found[i] = sketch_in(stored, ops[i][0])
    return found


def _unlist(
    windows: Windows, entries: list[tuple[int, int, bytes]], ops: list[tuple[bytes, bytes]]
) -> list[Command]:
    """Calls taking each id out of a period's fingerprint-map list."""
    return [FP_IDS.command([windows.schema(w).fp_bucket(v)], [b"-", v, ops[i][0]]) for i, w, v in entries]


def _outcome(prior: bytes, new: bytes) -> Outcome:
    """A document's outcome from its id's prior value and the one written (b"": none)."""
    if not new:
        return Outcome.REMOVED if prior else Outcome.MISSING
    if not prior:
        return Outcome.ADDED
    return Outcome.UNCHANGED if prior == new else Outcome.REPLACED


def _superseded(window: int, entries: list[tuple[int, bytes]], current: int) -> bool:
    """Whether an id's entry in a period gives way after a commit into `current` (the newest stays)."""
    newest = max(w for w, _ in entries) if entries else current
    return window != max(newest, current)
