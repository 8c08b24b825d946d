"""Rows of a table read as lists, ids and texts' UTF-8 bytes: what a fingerprinting worker gets of a Parquet
or Arrow input (`arrow.ArrowRows`), and reads without pyarrow.

The texts travel packed (`PackedTexts`), or through shared memory to a forked worker (`SharedTexts`), and are
cut into one bytes per text where they are fingerprinted.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

from ..errors import InputError
from ..fingerprinting import Scheme, Sketcher, engine_choice
from ..fingerprinting.banded_odd import fingerprints_and_sketches
from .records import ReadOptions, Record, checked_doc, checked_id, decode

__all__ = ["PackedTexts", "SharedTexts", "Sketched", "TextRows", "offsets_of", "records_of_lists", "sketched"]

#: What `ArrowRows.texts_fingerprinted` gives: ids, fingerprints, each error with the good rows before it,
#: and the sketches (a verified index) or None.
Sketched = tuple[list[str], list[int], list[tuple[int, InputError]], list[bytes] | None]


def records_of_lists(
    ids: list[Any], docs: list[Any], source: str, first: int, options: ReadOptions
) -> list[Record | InputError]:
    """The records of rows read as lists (ids, and texts or fingerprints), an InputError for each bad
    row, in row order; rows are numbered from `first`."""
    is_fp = options.fingerprint_field is not None
    what = "fingerprint" if is_fp else "text"
    out: list[Record | InputError] = []
    for row, (raw_id, raw_doc) in enumerate(zip(ids, docs, strict=True), first):
        if raw_id is None or raw_doc is None:
            out.append(InputError(source, row, f"the {'id' if raw_id is None else what} is null"))
            continue
        if isinstance(raw_id, bytes):
            raw_id = decode(raw_id, source, row)
        if isinstance(raw_doc, bytes):
            raw_doc = decode(raw_doc, source, row)
        doc_id = (
            raw_id if isinstance(raw_id, InputError) else checked_id(raw_id, source, row, options.namespace)
        )
        doc = raw_doc if isinstance(raw_doc, InputError) else checked_doc(raw_doc, source, row, options)
        bad = doc_id if isinstance(doc_id, InputError) else doc
        out.append(bad if isinstance(bad, InputError) else Record(source, row, str(doc_id), str(doc), is_fp))
    return out


def offsets_of(offsets: bytes, wide: bool) -> memoryview:
    """An Arrow column's offsets, given as an array's bytes, as ints (of 64 bits if wide, else 32)."""
    return memoryview(offsets).cast("q" if wide else "i")


def _blank(raw: bytes) -> bool:
    """`is_blank` of a text's UTF-8 bytes, decoding no more than its first character, almost always."""
    stripped = raw.strip()  # ASCII white space
    if not stripped:
        return True
    # The first other character decides, unless it is a space too (U+3000, U+00A0, ...): then all of them.
    first = stripped[:4].decode("utf-8", "ignore")[:1]
    return first.isspace() and raw.decode("utf-8").isspace()


def sketched(
    source: str,
    first: int,
    ids_read: list[Any],
    raws: list[bytes | None],
    scheme: Scheme,
    hasher: Sketcher | None,
    namespace: str = "",
) -> Sketched:
    """`ArrowRows.texts_fingerprinted` of rows read as lists: ids, and texts as UTF-8 bytes."""
    ids: list[str] = []
    good: list[bytes] = []
    errors: list[tuple[int, InputError]] = []
    for row, (raw_id, raw) in enumerate(zip(ids_read, raws, strict=True), first):
        if raw_id is None or raw is None:
            reason = f"the {'id' if raw_id is None else 'text'} is null"
            errors.append((len(ids), InputError(source, row, reason)))
            continue
        doc_id = _checked_row(raw_id, raw, source, row, namespace)
        if isinstance(doc_id, InputError):
            errors.append((len(ids), doc_id))
            continue
        ids.append(doc_id)
        good.append(raw)
    if hasher is None:
        return ids, scheme.fingerprint_many(good) if good else [], errors, None
    fps, sketches = (
        fingerprints_and_sketches(scheme, hasher, good) if good else ([], hasher.sketch_many(good))
    )
    return ids, fps, errors, sketches


def _checked_row(raw_id: Any, raw: bytes | None, source: str, row: int, namespace: str) -> str | InputError:
    """A row's document id, or why it is not stored: its id's error, or a text not UTF-8 or empty (raw
    None: a text the compiled core fingerprinted, having checked it)."""
    doc_id = checked_id(
        decode(raw_id, source, row) if isinstance(raw_id, bytes) else raw_id, source, row, namespace
    )
    if isinstance(doc_id, InputError) or raw is None:
        return doc_id
    text = decode(raw, source, row)
    if isinstance(text, InputError):
        return text
    return InputError(source, row, "empty text") if _blank(raw) else doc_id


def _merged(
    source: str,
    first: int,
    ids_read: list[Any],
    fps: list[int],
    others: dict[int, bytes],
    scheme: Scheme,
    namespace: str,
) -> Sketched:
    """`sketched` of rows with no null text, whose texts the compiled core fingerprinted (`fps`, in
    row order) but for the `others` (their positions and bytes), read here as `sketched` reads them."""
    ids: list[str] = []
    good: list[int] = []
    errors: list[tuple[int, InputError]] = []
    pending: list[tuple[int, bytes]] = []  # where in `good`, and the text, of others to fingerprint
    computed = iter(fps)
    for position, raw_id in enumerate(ids_read):
        raw = others.get(position)
        fp = next(computed) if raw is None else 0
        row = first + position
        if raw_id is None:
            errors.append((len(ids), InputError(source, row, "the id is null")))
            continue
        doc_id = _checked_row(raw_id, raw, source, row, namespace)
        if isinstance(doc_id, InputError):
            errors.append((len(ids), doc_id))
            continue
        if raw is not None:
            pending.append((len(good), raw))
        ids.append(doc_id)
        good.append(fp)
    if pending:
        for (at, _), fp in zip(pending, scheme.fingerprint_many([raw for _, raw in pending]), strict=True):
            good[at] = fp
    return ids, good, errors, None


class TextRows(NamedTuple):
    """`ArrowRows` of texts as a worker process gets them: the ids, and the texts' UTF-8 bytes."""

    source: str
    first: int
    ids: list[Any]
    raws: list[bytes | None]
    options: ReadOptions

    def records(self) -> list[Record | InputError]:
        """The rows' records and errors, in row order."""
        return records_of_lists(self.ids, self.raws, self.source, self.first, self.options)

    def texts_fingerprinted(self, scheme: Scheme, hasher: Sketcher | None) -> Sketched | None:
        """As `ArrowRows.texts_fingerprinted`."""
        if engine_choice.native is None:
            return None
        return sketched(self.source, self.first, self.ids, self.raws, scheme, hasher, self.options.namespace)


class PackedTexts(NamedTuple):
    """`TextRows` as sent to a worker process (unpickled, they are `TextRows`): the texts (no null) as UTF-8
    bytes end to end, in pieces of `step` texts, and their offsets. A few dozen objects to pickle instead of
    one per text, none as large as the run: the worker allocates nothing of the run's size, which the C
    allocator would map afresh (and fault in) for each run."""

    source: str
    first: int
    ids: list[Any]
    #: The texts' UTF-8 bytes, end to end, cut every `step` texts.
    pieces: list[bytes]
    step: int
    #: One offset more than there are texts, as an array's bytes (the Arrow column's own offsets).
    offsets: bytes
    #: Whether the offsets are of 64 bits (a large_string column), else 32.
    wide: bool
    options: ReadOptions

    def unpacked(self) -> TextRows:
        """The rows, each text cut out of its piece as its own bytes."""
        bounds = offsets_of(self.offsets, self.wide)
        raws: list[bytes | None] = []
        for number, piece in enumerate(self.pieces):
            ends = bounds[number * self.step : (number + 1) * self.step + 1]
            base = ends[0]
            raws += [piece[start - base : end - base] for start, end in itertools.pairwise(ends)]
        return TextRows(self.source, self.first, self.ids, raws, self.options)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _text_rows, tuple(self)


def _text_rows(*fields: Any) -> TextRows:
    """`PackedTexts` unpickled: `TextRows`."""
    return PackedTexts(*fields).unpacked()


class SharedTexts(NamedTuple):
    """`TextRows` whose texts (no null among them) were copied into a `SharedRing` that the worker
    process shares: what is sent is where they are, and their offsets."""

    source: str
    first: int
    ids: list[Any]
    #: Where the texts' UTF-8 bytes, end to end, start in the ring.
    start: int
    #: One offset more than there are texts, as an array's bytes (the Arrow column's own offsets).
    offsets: bytes
    #: Whether the offsets are of 64 bits (a large_string column), else 32.
    wide: bool
    options: ReadOptions

    def texts_fingerprinted(self, memory: Any, scheme: Scheme, hasher: Sketcher | None) -> Sketched | None:
        """As `ArrowRows.texts_fingerprinted`, the texts read by the compiled core where they lie in `memory`
        (the ring as this process maps it), none made into a bytes but those it leaves to the pure reader
        (blank, or not UTF-8); None under the pure engine, or for a verified index (its sketches need each
        text)."""
        core = engine_choice.native
        if core is None or hasher is not None:
            return None
        bounds = offsets_of(self.offsets, self.wide)
        data = memory[self.start : self.start + bounds[-1] - bounds[0]]
        fps, others = core.fingerprint_packed_texts(data, self.offsets, self.wide, scheme)
        base = bounds[0]
        raws = {at: data[bounds[at] - base : bounds[at + 1] - base] for at in others}
        return _merged(self.source, self.first, self.ids, fps, raws, scheme, self.options.namespace)

    def unpacked(self, memory: Any) -> TextRows:
        """The rows, each text cut out of `memory` (the ring as this process maps it) as its own bytes."""
        bounds = offsets_of(self.offsets, self.wide)
        shift = self.start - bounds[0]
        raws: list[bytes | None] = [
            memory[start + shift : end + shift] for start, end in itertools.pairwise(bounds)
        ]
        return TextRows(self.source, self.first, self.ids, raws, self.options)
