"""Rows of a table as a fingerprinting worker gets them, without pyarrow: ids, and texts' UTF-8 bytes sent
packed (`PackedTexts`) or through shared memory to a forked worker (`SharedTexts`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import InputError
from ..fingerprinting import Scheme, Sketcher, engine_choice
from ..fingerprinting.banded_odd import fingerprints_and_sketches
from .records import ReadOptions, Record, checked_id, checked_record, decode


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
    ids: list[Any], docs: list[Any], source: str, first: int, options: ReadOptions
) -> list[Record | InputError]:
    """The records of rows read as lists (ids, and texts or fingerprints) numbered from `first`, an
    InputError for each bad row."""
    what = "fingerprint" if options.fingerprint_field is not None else "text"
    out: list[Record | InputError] = []
    for row, (raw_id, raw_doc) in enumerate(zip(ids, docs, strict=True), first):
        if raw_id is None or raw_doc is None:
            out.append(InputError(source, row, f"the {'id' if raw_id is None else what} is null"))
            continue
        if isinstance(raw_id, bytes):
            raw_id = decode(raw_id, source, row)
        if isinstance(raw_doc, bytes):
            raw_doc = decode(raw_doc, source, row)
        if isinstance(raw_id, InputError):
            out.append(raw_id)
        elif isinstance(raw_doc, InputError):  # after the id's own error, as the id is checked first
            doc_id = checked_id(raw_id, source, row, options.namespace)
            out.append(doc_id if isinstance(doc_id, InputError) else raw_doc)
        else:
            out.append(checked_record(raw_id, raw_doc, source, row, options))
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

    def texts_fingerprinted(
        self, scheme: Scheme, hasher: Sketcher | None, done: list[int] | None = None
    ) -> Fingerprinted | None:
        """As `ArrowRows.texts_fingerprinted`.

        Args:
            done: the compiled core's fingerprints (in row order) of the texts it has read and checked, whose
                bytes are None here; without it, a None text is a null.
        """
        if engine_choice.native is None:
            return None
        source = self.source
        ids: list[str] = []
        fps: list[int] = []
        errors: list[tuple[int, InputError]] = []
        here: list[bytes] = []  # the texts fingerprinted here, and where in fps each goes
        slots: list[int] = []
        core = iter(done or ())
        for row, (raw_id, raw) in enumerate(zip(self.ids, self.raws, strict=True), self.first):
            fp = next(core) if done is not None and raw is None else 0
            if raw_id is None or (raw is None and done is None):
                reason = f"the {'id' if raw_id is None else 'text'} is null"
                errors.append((len(ids), InputError(source, row, reason)))
                continue
            # Its id's error, else (a text the core has not checked) a text not UTF-8 or empty.
            raw_id = decode(raw_id, source, row) if isinstance(raw_id, bytes) else raw_id
            doc_id = (
                raw_id
                if isinstance(raw_id, InputError)
                else checked_id(raw_id, source, row, self.options.namespace)
            )
            if raw is not None and not isinstance(doc_id, InputError):
                text = decode(raw, source, row)
                if isinstance(text, InputError) or _blank(raw):
                    doc_id = text if isinstance(text, InputError) else InputError(source, row, "empty text")
            if isinstance(doc_id, InputError):
                errors.append((len(ids), doc_id))
                continue
            if raw is not None:
                slots.append(len(ids))
                here.append(raw)
            ids.append(doc_id)
            fps.append(fp)
        computed, sketches = fingerprints_of(here, scheme, hasher)
        if done is None:
            return Fingerprinted(ids, computed, errors, sketches)
        for at, fp in zip(slots, computed, strict=True):
            fps[at] = fp
        return Fingerprinted(ids, fps, errors, sketches)


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

    def texts_fingerprinted(
        self, memory: Any, scheme: Scheme, hasher: Sketcher | None
    ) -> Fingerprinted | None:
        """As `ArrowRows.texts_fingerprinted`, the texts read where they lie in `memory` (the ring as this
        process maps it); None under the pure engine, or for a verified index (its sketches need texts)."""
        core = engine_choice.native
        if core is None or hasher is not None:
            return None
        bounds = offsets_of(self.offsets, self.wide)
        data = memory[self.start : self.start + bounds[-1] - bounds[0]]
        fps, others = core.fingerprint_packed_texts(data, self.offsets, self.wide, scheme)
        base = bounds[0]
        raws: list[bytes | None] = [None] * len(self.ids)
        for at in others:
            raws[at] = data[bounds[at] - base : bounds[at + 1] - base]
        return self._rows(raws).texts_fingerprinted(scheme, None, fps)

    def unpacked(self, memory: Any) -> TextRows:
        """The rows, each text cut out of `memory` (the ring as this process maps it) as its own bytes."""
        bounds = offsets_of(self.offsets, self.wide)
        shift = self.start - bounds[0]
        return self._rows([memory[start + shift : end + shift] for start, end in itertools.pairwise(bounds)])

    def _rows(self, raws: list[bytes | None]) -> TextRows:
        return TextRows(self.source, self.first, self.ids, raws, self.options)
