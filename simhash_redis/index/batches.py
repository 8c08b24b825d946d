"""The batch forms of the index's calls: the whole argument checked first (a refused call writes
nothing), then sent batch by batch, progress reported after each."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..codec import encode_fp
from ..errors import InvalidType
from ..results import Match, Outcome
from ..store import Layout, Reads, Store, Windows, Writes, encode_id
from .arguments import as_batch, check_pairs
from .unique import UniqueWrites

__all__ = ["BatchProgress", "Target", "add_many", "check_progress", "near_many", "remove_many"]

#: Called after each batch: the items done so far, and that batch's results.
BatchProgress = Callable[[int, list[Any]], None]


class Target(Protocol):
    """What the batch calls and a bulk load need of the index (a `SimhashIndex`)."""

    store: Store
    windows: Windows | None
    batch_size: int

    @property
    def f(self) -> int: ...

    @property
    def layout(self) -> Layout: ...

    def fingerprint_many(self, docs: Sequence[Any]) -> list[int]: ...


def check_progress(on_progress: object) -> BatchProgress | None:
    """The progress callback (None or a callable), checked."""
    if on_progress is not None and not callable(on_progress):
        raise InvalidType(f"on_progress must be callable, got {type(on_progress).__name__}")
    return on_progress


def add_many(
    index: Target,
    writes: Writes,
    unique: UniqueWrites | None,
    items: Iterable[tuple[str, Any]],
    on_progress: BatchProgress | None,
) -> list[Any]:
    """Check every pair, fingerprint every document, then write a batch at a time."""
    pairs = check_pairs(as_batch(items, "items"))
    ids = [encode_id(doc_id) for doc_id, _ in pairs]
    fps = index.fingerprint_many([doc for _, doc in pairs])
    outcomes: list[Outcome | Match] = []
    for start in range(0, len(ids), index.batch_size):
        part_ids, part_fps = ids[start : start + index.batch_size], fps[start : start + index.batch_size]
        if unique is not None:
            done: list[Any] = unique.add(part_ids, part_fps)
        else:
            f = index.f
            done = writes.apply(
                [(i, encode_fp(fp, f), None) for i, fp in zip(part_ids, part_fps, strict=True)], part_fps
            )
        outcomes.extend(done)
        if on_progress is not None:
            on_progress(len(outcomes), done)
    return outcomes


def remove_many(
    index: Target, writes: Writes, ids: Iterable[str], on_progress: BatchProgress | None
) -> list[bool]:
    """Check every id, then remove a batch at a time."""
    raws = [encode_id(doc_id) for doc_id in as_batch(ids, "ids")]
    removed: list[bool] = []
    for start in range(0, len(raws), index.batch_size):
        batch = raws[start : start + index.batch_size]
        # An id named twice is removed once: the repeat reports False, as it would in a later call.
        unique = list(dict.fromkeys(batch))
        outcomes = writes.apply([(raw, b"", None) for raw in unique])
        first = {raw: outcome is Outcome.REMOVED for raw, outcome in zip(unique, outcomes, strict=True)}
        done = [first.pop(raw, False) for raw in batch]
        removed.extend(done)
        if on_progress is not None:
            on_progress(len(removed), done)
    return removed


def near_many(
    index: Target, reads: Reads, fps: list[int], limit: int, on_progress: BatchProgress | None
) -> list[list[Match]]:
    """Look up checked fingerprints a batch (one conversation) at a time."""
    results: list[list[Match]] = []
    for start in range(0, len(fps), index.batch_size):
        done = reads.near(fps[start : start + index.batch_size], limit)
        results.extend(done)
        if on_progress is not None:
            on_progress(len(results), done)
    return results
