"""The batch forms of the index's calls (the whole argument checked first, then sent batch by batch), and
the windows of bulk loads (`SimhashIndex.bulk_add`), checked."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import defaults
from ..checks import is_int
from ..codec import encode_fp
from ..errors import InvalidArgument, InvalidType
from ..results import Outcome
from ..store import Guard, Write, Writes, encode_id
from .arguments import as_batch, check_pairs

__all__ = [
    "DEFAULT_WINDOW",
    "BatchProgress",
    "Progress",
    "apply",
    "check_progress",
    "check_window",
    "column_windows",
    "in_batches",
    "remove_many",
    "unzipped",
    "window_fingerprints",
    "window_ids",
    "windows",
]

#: Called after each batch: the items done so far, and that batch's results.
BatchProgress = Callable[[int, list[Any]], None]


def check_progress(on_progress: object) -> BatchProgress | None:
    if on_progress is not None and not callable(on_progress):
        raise InvalidType(f"on_progress must be callable, got {type(on_progress).__name__}")
    return on_progress


def remove_many(
    size: int, writes: Writes, ids: Iterable[str], on_progress: BatchProgress | None
) -> list[bool]:
    raws = [encode_id(doc_id) for doc_id in as_batch(ids, "ids")]
    return in_batches(size, on_progress, functools.partial(_remove, writes), raws)


def _remove(writes: Writes, batch: list[bytes]) -> list[bool]:
    # An id named twice is removed once: the repeat reports False, as it would in a later call.
    unique = list(dict.fromkeys(batch))
    outcomes = writes.apply([(raw, b"", None) for raw in unique])
    first = {raw: outcome is Outcome.REMOVED for raw, outcome in zip(unique, outcomes, strict=True)}
    return [first.pop(raw, False) for raw in batch]


def in_batches(
    size: int, on_progress: BatchProgress | None, run: Callable[..., list[Any]], *columns: Any
) -> list[Any]:
    """`run` on parallel columns a batch of `size` at a time, `on_progress` called after each."""
    out: list[Any] = []
    for start in range(0, len(columns[0]), size):
        done = run(*(column[start : start + size] for column in columns))
        out.extend(done)
        if on_progress is not None:
            on_progress(len(out), done)
    return out


def apply(
    writes: Writes, f: int, raws: Sequence[bytes], fps: Sequence[int], guards: Sequence[Guard] | None = None
) -> list[Outcome]:
    """One atomic script call storing documents (fingerprints: ints or numpy's; guards: verified mode's)."""
    ints = [int(fp) for fp in fps]
    kept = [None] * len(ints) if guards is None else guards
    ops: list[Write] = [(raw, encode_fp(fp, f), g) for raw, fp, g in zip(raws, ints, kept, strict=True)]
    applied = writes.apply(ops, ints)
    # Without a guard to refuse them, every write has an outcome (None is a refused guard's).
    return [outcome for outcome in applied if outcome is not None]


#: Documents per window of a bulk load: enough that most keys get several entries per command.
DEFAULT_WINDOW = 1_000_000
#: Called after each window: pairs done so far, and that window's outcomes.
Progress = Callable[[int, list[Outcome]], None]


def check_window(window: object, on_progress: object) -> None:
    if not is_int(window) or window < 1:
        raise InvalidArgument(f"window must be a positive int, got {window!r}")
    check_progress(on_progress)


def unzipped(batch: list[Any]) -> tuple[list[Any], list[Any]]:
    if set(map(type, batch)) != {tuple} or set(map(len, batch)) != {2}:
        check_pairs(batch)  # says which item is not a pair
    ids, docs = zip(*batch, strict=True)
    return list(ids), list(docs)


def windows(
    batches: Iterable[tuple[Sequence[Any], Sequence[Any]]], window: int
) -> Iterator[tuple[list[Any], list[Any]]]:
    """The batches' ids and documents, checked, cut into windows of `window` (the last may be shorter)."""
    if isinstance(batches, (str, bytes, Mapping)) or not isinstance(batches, Iterable):
        raise InvalidType(f"batches must be an iterable of (ids, documents), got {type(batches).__name__}")

    def checked() -> Iterator[tuple[Sequence[Any], ...]]:
        for batch in batches:
            if not isinstance(batch, tuple) or len(batch) != 2 or not all(map(_is_list_like, batch)):
                shape = _shape(batch)
                raise InvalidType(f"batches must hold (ids, documents) tuples of two lists, got {shape}")
            if len(batch[0]) != len(batch[1]):
                raise InvalidArgument(f"a batch holds {len(batch[0])} ids and {len(batch[1])} documents")
            yield batch

    yield from column_windows(checked(), window)  # type: ignore[misc]  # two columns: checked


def column_windows(
    batches: Iterable[tuple[Sequence[Any], ...]], window: int
) -> Iterator[tuple[list[Any], ...]]:
    """Batches of parallel sequences of one length cut into windows of `window`, each a tuple of lists."""
    held: list[list[Any]] | None = None
    for batch in batches:
        if held is None:
            held = [[] for _ in batch]
        size, start = len(batch[0]), 0
        while start < size:
            take = min(window - len(held[0]), size - start)
            for column, more in zip(held, batch, strict=True):
                column.extend(more[start : start + take])
            start += take
            if len(held[0]) == window:
                yield tuple(held)
                held = [[] for _ in batch]
    if held is not None and held[0]:
        yield tuple(held)


def _is_list_like(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


def _shape(batch: object) -> str:
    if isinstance(batch, tuple):
        return "(" + ", ".join(type(part).__name__ for part in batch) + ")"
    return type(batch).__name__


def window_ids(ids: Sequence[Any]) -> list[bytes]:
    """A bulk window's ids encoded (plain str ids of a valid length in one pass, as `encode_id` would)."""
    if set(map(type, ids)) == {str}:
        try:
            raw = [doc_id.encode() for doc_id in ids]
        except UnicodeEncodeError:  # a lone surrogate: encode_id says which id
            return [encode_id(doc_id) for doc_id in ids]
        lengths = set(map(len, raw))
        if min(lengths) >= 1 and max(lengths) <= defaults.MAX_ID_BYTES:
            return raw
    return [encode_id(doc_id) for doc_id in ids]


def window_fingerprints(
    docs: Sequence[Any], f: int, fingerprint_many: Callable[[Sequence[Any]], list[int]]
) -> npt.NDArray[Any] | list[int]:
    """A bulk window's fingerprints (precomputed ints checked in one numpy pass, as `fingerprint_many`)."""
    if f <= 64 and set(map(type, docs)) == {int}:
        try:
            values = np.fromiter(docs, dtype=np.uint64, count=len(docs))
        except OverflowError:  # negative or too large: fingerprint_many says which one
            return fingerprint_many(docs)
        # np.max: numpy 2.5's stubs match no overload of ndarray.max() for mypy on Python 3.10.
        if f == 64 or not len(values) or int(np.max(values)) >> f == 0:
            return values
    return fingerprint_many(docs)
