"""A run of input fingerprinted (`Fingerprinted`: the compiled core's results and the pure reader's placed in
input order, `placed`), and rows of a table as a worker gets them, without pyarrow: ids, and texts' UTF-8
bytes sent packed (`PackedTexts`) or through shared memory to a forked worker (`SharedTexts`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from ..errors import InputError
from ..fingerprinting import Scheme, Sketcher, engine_choice
from ..fingerprinting.banded_odd import fingerprints_and_sketches
from .records import ReadOptions, Record, checked_id, checked_record, decode, fingerprint_read

#: Records and bad records in input order, as the readers give them (None: a blank line of a run).
Items = Sequence[Record | InputError | None]


class Fingerprinted(NamedTuple):
    """A run fingerprinted, as it comes back from a worker cheaply: the good records' ids and fingerprints
    (and sketches, for a verified index), and each bad record with the number of good ones before it."""

    ids: list[str]
    fps: list[int]
    errors: list[tuple[int, InputError]]
    sketches: list[bytes] | None = None


def fingerprints_of(
    texts: Sequence[str | bytes], scheme: Scheme, hasher: Sketcher | None
) -> tuple[list[int], list[bytes] | None]:
    """The texts' fingerprints, and their sketches when there is a hasher."""
    if hasher is None:
        return (scheme.fingerprint_many(texts) if texts else []), None
    return fingerprints_and_sketches(scheme, hasher, texts)


def records_of_lists(
    ids: list[Any],
    docs: list[Any],
    source: str,
    first: int,
    options: ReadOptions,
    done: Iterator[int] | None = None,
) -> list[Record | InputError]:
    """The records of rows read as lists (ids, and texts or fingerprints) numbered from `first`, an
    InputError for each bad row.

    Args:
        done: the compiled core's fingerprints (in row order) of the texts it has read and checked, whose
            docs are None here (their records hold the fingerprint); without it, a None doc is a null.
    """
    what = "fingerprint" if options.fingerprint_field is not None else "text"
    out: list[Record | InputError] = []
    for row, (raw_id, raw_doc) in enumerate(zip(ids, docs, strict=True), first):
        fp = next(done) if done is not None and raw_doc is None else None
        if raw_id is None or (raw_doc is None and fp is None):
            out.append(InputError(source, row, f"the {'id' if raw_id is None else what} is null"))
            continue
        if isinstance(raw_id, bytes):
            raw_id = decode(raw_id, source, row)
        if isinstance(raw_doc, bytes):
            raw_doc = decode(raw_doc, source, row)
        if isinstance(raw_id, InputError):
            out.append(raw_id)
        elif isinstance(raw_doc, InputError) or fp is not None:  # after the id's own error, checked first
            doc_id = checked_id(raw_id, source, row, options.namespace)
            if isinstance(doc_id, InputError) or fp is None:
                out.append(doc_id if isinstance(doc_id, InputError) else raw_doc)
            else:
                out.append(Record(source, row, doc_id, fp))
        else:
            out.append(checked_record(raw_id, raw_doc, source, row, options))
    return out


def parsed(items: Items, f: int, fp_base: str, hasher: Sketcher | None) -> list[Record | InputError | None]:
    """The items, precomputed fingerprints read (bad records where a verified index needs the text)."""
    out: list[Record | InputError | None] = []
    for item in items:
        if isinstance(item, Record) and item.is_fingerprint and hasher is not None:
            reason = "a verified index needs the document's text, not a fingerprint"
            item = InputError(item.source, item.line, reason)
        elif isinstance(item, Record) and item.is_fingerprint and isinstance(item.doc, str):
            item = fingerprint_read(item, f, fp_base)
        out.append(item)
    return out


def texts_of(items: Items) -> list[str]:
    """The texts of the items' records, in order."""
    return [item.doc for item in items if isinstance(item, Record) and isinstance(item.doc, str)]


def placed(
    items: Items,
    fps: list[int],
    sketches: list[bytes] | None,
    core: Fingerprinted | None = None,
    others: Sequence[int] = (),
) -> Fingerprinted:
    """The `Fingerprinted` of parsed items (None: a blank line), each text's fingerprint (and sketch) taken
    in turn from `fps` (`sketches`); with `core`, the compiled core's results of a run whose other items,
    at the positions `others` (ascending), are these, each placed where it was."""
    core = core or Fingerprinted([], [], [])
    ids: list[str] = []
    out: list[int] = []
    errors: list[tuple[int, InputError]] = []
    kept: list[bytes] | None = None if core.sketches is None and sketches is None else []
    computed, sketched = iter(fps), iter(sketches or ())
    done = 0
    for count, item in enumerate(items):
        if others and others[count] - count > done:  # the core's results before this item
            plain = others[count] - count
            ids += core.ids[done:plain]
            out += core.fps[done:plain]
            if kept is not None and core.sketches is not None:
                kept += core.sketches[done:plain]
            done = plain
        if isinstance(item, InputError):
            errors.append((len(ids), item))
        elif item is not None:
            ids.append(item.id)
            if isinstance(doc := item.doc, int):
                out.append(doc)
                continue
            out.append(next(computed))
            if kept is not None:
                kept.append(next(sketched))
    if done < len(core.ids):
        ids += core.ids[done:]
        out += core.fps[done:]
        if kept is not None and core.sketches is not None:
            kept += core.sketches[done:]
    return Fingerprinted(ids, out, errors, kept)


def by_records(items: Items, scheme: Scheme, hasher: Sketcher | None, f: int, fp_base: str) -> Fingerprinted:
    """Records and errors, every precomputed fingerprint read and every text fingerprinted (and sketched)."""
    items = parsed(items, f, fp_base, hasher)
    return placed(items, *fingerprints_of(texts_of(items), scheme, hasher))


def offsets_of(offsets: bytes, wide: bool) -> memoryview:
    """An Arrow column's offsets, given as an array's bytes, as ints (of 64 bits if wide, else 32)."""
    return memoryview(offsets).cast("q" if wide else "i")


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

    def fingerprinted(self, scheme: Scheme, hasher: Sketcher | None, f: int, fp_base: str) -> Fingerprinted:
        """`by_records` of the rows' records."""
        items = self.records()
        fps = self.options.fingerprint_field is not None
        return _by_rows(parsed(items, f, fp_base, hasher) if fps else items, self.raws, scheme, hasher)


def _by_rows(items: Items, raws: Sequence[Any], scheme: Scheme, hasher: Sketcher | None) -> Fingerprinted:
    """`by_records` of parsed records of rows (one item a row), each text fingerprinted from its row's
    UTF-8 bytes as read: the compiled core would encode its str again."""
    texts = [
        raws[at] for at, item in enumerate(items) if isinstance(item, Record) and isinstance(item.doc, str)
    ]
    return placed(items, *fingerprints_of(texts, scheme, hasher))


class PackedTexts(NamedTuple):
    """`TextRows` as sent to a worker process (unpickled, they are `TextRows`): a few dozen pieces to pickle,
    none of the run's size, which the C allocator would map afresh (and fault in) for each run."""

    source: str
    first: int
    ids: list[Any]
    #: The texts' UTF-8 bytes, end to end, cut every `step` texts.
    pieces: list[bytes]
    step: int
    #: One offset more than there are texts, as an array's bytes (the Arrow column's own offsets), of 64
    #: bits if `wide` (a large_string column), else 32.
    offsets: bytes
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
    """`TextRows` whose texts (no null) were copied into a `SharedRing` the worker shares: where they are."""

    source: str
    first: int
    ids: list[Any]
    #: Where the texts' UTF-8 bytes, end to end, start in the ring.
    start: int
    #: As `PackedTexts`'.
    offsets: bytes
    wide: bool
    options: ReadOptions

    def fingerprinted(self, memory: Any, scheme: Scheme, hasher: Sketcher | None) -> Fingerprinted:
        """`TextRows.fingerprinted`, the texts read where they lie in `memory` (the ring as this process
        maps it): by the compiled core, but for a verified index (its sketches need the texts)."""
        core = engine_choice.native
        bounds = offsets_of(self.offsets, self.wide)
        data = memory[self.start : self.start + bounds[-1] - bounds[0]]
        fps: list[int] = []
        others: Sequence[int] = range(len(self.ids))
        if core is not None and hasher is None:
            fps, others = core.fingerprint_packed_texts(data, self.offsets, self.wide, scheme)
        base = bounds[0]
        raws: list[bytes | None] = [None] * len(self.ids)
        for at in others:
            raws[at] = data[bounds[at] - base : bounds[at + 1] - base]
        items = records_of_lists(self.ids, raws, self.source, self.first, self.options, iter(fps))
        return _by_rows(items, raws, scheme, hasher)
