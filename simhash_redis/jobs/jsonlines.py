"""JSON Lines inputs: an object per line, its record, and runs of raw lines parsed where they are used.

A line is parsed by orjson where installed (`jsontext`), with the stdlib's values and errors either way.
The compiled core, where it runs, reads the lines of the plain shape itself (every other line is read
here), so a large load needs no record, and no str per text, per line.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any, NamedTuple, TypeVar

from .. import defaults
from ..codec import parse_fingerprint
from ..errors import InputError, InvalidArgument
from ..fingerprinting import Scheme, Sketcher, engine_choice
from ..fingerprinting.banded_odd import BandedOddSketcher, fingerprints_and_sketches, stores_only
from .jsontext import loads, loads_object
from .records import (
    ReadOptions,
    Record,
    checked_doc,
    checked_id,
    gunzipped,
    gzip_fault,
    is_blank,
    is_utf8,
    line_text,
)
from .text_rows import Sketched

__all__ = [
    "Fingerprints",
    "JsonLine",
    "JsonLines",
    "jsonl_chunks",
    "read_json_lines",
    "read_jsonl",
]


class JsonLine(NamedTuple):
    """One JSON object of a JSON Lines input, and where it was found."""

    source: str
    line: int
    value: dict[str, Any]


def _json_object(
    raw: bytes, number: int, source: str, encoding: str = "utf-8"
) -> dict[str, Any] | InputError | None:
    """The object on one line as read (line end included), an InputError, or None for a blank line."""
    obj = loads_object(raw) if encoding == "utf-8" else None
    if obj is not None:
        return obj
    text = line_text(raw, number, source, encoding)
    if isinstance(text, InputError):
        return text
    if is_blank(text):
        return None
    try:
        obj = loads(text)
    except ValueError as exc:
        return InputError(source, number, f"not valid JSON ({exc})")
    if not isinstance(obj, dict):
        return InputError(source, number, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def read_json_lines(
    path: str | os.PathLike[str], source: str | None = None
) -> Iterator[JsonLine | InputError]:
    """The objects of a JSON Lines file (gzipped or not; blank lines skipped), and an InputError for each
    bad line, named source (default: the path).

    Raises:
        OSError: the file cannot be opened.
        EOFError, gzip.BadGzipFile: the gzip data is truncated or corrupt.
    """
    name = source if source is not None else str(path)
    with open(path, "rb") as file, gunzipped(file) as stream:
        for number, raw in enumerate(stream, 1):
            obj = _json_object(raw, number, name)
            if isinstance(obj, dict):
                yield JsonLine(name, number, obj)
            elif obj is not None:
                yield obj


def _json_record(raw: bytes, number: int, source: str, options: ReadOptions) -> Record | InputError | None:
    """The record of one JSON line as read from the input (line end included), None for a blank line."""
    obj = _json_object(raw, number, source, options.encoding)
    if not isinstance(obj, dict):
        return obj
    return _record_of(obj, number, source, options)


def _record_of(obj: dict[str, Any], number: int, source: str, options: ReadOptions) -> Record | InputError:
    """The record of one JSON line's object."""
    doc_field = options.fingerprint_field or options.text_field
    missing = [name for name in (options.id_field, doc_field) if name not in obj]
    if missing:
        return InputError(source, number, f"no {missing[0]!r} field")
    doc_id = checked_id(obj[options.id_field], source, number, options.namespace)
    doc = checked_doc(obj[doc_field], source, number, options)
    bad = doc_id if isinstance(doc_id, InputError) else doc
    if isinstance(bad, InputError):
        return bad
    return Record(source, number, str(doc_id), str(doc), options.fingerprint_field is not None)


def read_jsonl(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Record | InputError]:
    """The records of a JSON Lines stream, and an InputError for each bad line (blank lines skipped)."""
    for number, raw in enumerate(stream, 1):
        item = _json_record(raw, number, source, options)
        if item is not None:
            yield item


_V = TypeVar("_V")
#: What `JsonLines.fingerprints` gives: ids, fingerprints, and each error with the good lines before it.
Fingerprints = tuple[list[str], list[int], list[tuple[int, InputError]]]


class JsonLines(NamedTuple):
    """Consecutive raw lines of a JSON Lines input, to be parsed where they are fingerprinted."""

    source: str
    #: The line number of raws[0].
    first: int
    raws: list[bytes]
    options: ReadOptions

    def records(self) -> list[Record | InputError]:
        """The lines' records and errors, in input order (blank lines left out)."""
        items = (
            _json_record(raw, number, self.source, self.options)
            for number, raw in enumerate(self.raws, self.first)
        )
        return [item for item in items if item is not None]

    def fingerprints(self, f: int, fp_base: str) -> Fingerprints:
        """The ids and precomputed fingerprints of lines read with `fingerprint_field`, and each error
        with the number of good lines before it: what `records` and `codec.parse_fingerprint` (fp_base)
        give, without a record per line (the compiled core reads the lines of the plain shape)."""
        done = self._natively(f, fp_base, len(self.raws))
        if done is not None:
            return done
        everything = range(len(self.raws))
        return _merged([], [], everything, [self._line(at, f, fp_base) for at in everything])

    def fingerprints_here(self, f: int, fp_base: str) -> Fingerprints | None:
        """`fingerprints` when the compiled core reads all but one line in 16 itself, else None (the
        others cost the pure reader 3-20 times more each: a worker process does them faster)."""
        return self._natively(f, fp_base, len(self.raws) // 16)

    def _natively(self, f: int, fp_base: str, most: int) -> Fingerprints | None:
        """`fingerprints` by the compiled core and, for at most `most` lines, the pure reader; else None."""
        core, options = engine_choice.native, self.options
        fp_field = options.fingerprint_field or options.text_field
        if core is None or fp_base not in ("auto", "hex", "dec") or not is_utf8(options.id_field, fp_field):
            return None
        if options.encoding != "utf-8" or options.namespace:  # the compiled core reads UTF-8 ids as they are
            return None
        read: tuple[list[str], list[int], list[int]] = core.fingerprint_lines(
            self.raws, options.id_field, fp_field, f, fp_base, defaults.MAX_ID_BYTES
        )
        ids, fps, others = read
        if len(others) > most:
            return None
        return _merged(ids, fps, others, [self._line(position, f, fp_base) for position in others])

    def texts_fingerprinted(self, scheme: Scheme) -> Fingerprints | None:
        """The ids and text fingerprints of lines read with `text_field`, and each error with the number
        of good lines before it, as `records` and `scheme.fingerprint_many` give them, the lines of the
        plain shape read by the compiled core; None under the pure engine, for lines of precomputed
        fingerprints, or for field names no line can hold."""
        core, options = engine_choice.native, self.options
        # The compiled core reads UTF-8 ids as they are (without a namespace); a field name from a
        # command line may hold lone surrogates, which no line can match.
        if core is None or options.fingerprint_field is not None or options.encoding != "utf-8":
            return None
        if options.namespace or not is_utf8(options.id_field, options.text_field):
            return None
        read: tuple[list[str], list[int], list[int]] = core.fingerprint_text_lines(
            self.raws, scheme, options.id_field, options.text_field, defaults.MAX_ID_BYTES
        )
        ids, fps, others = read
        if not others:
            return ids, fps, []
        items = [
            _json_record(self.raws[position], self.first + position, self.source, options)
            for position in others
        ]
        texts = [str(item.doc) for item in items if isinstance(item, Record)]
        computed = iter(scheme.fingerprint_many(texts))
        results = [(item.id, next(computed)) if isinstance(item, Record) else item for item in items]
        return _merged(ids, fps, others, results)

    def texts_sketched(self, scheme: Scheme, hasher: Sketcher) -> Sketched | None:
        """`texts_fingerprinted` with each text's stored sketch too (hasher: a load's `storing`
        sketcher), the lines of the plain shape read, fingerprinted and sketched by the compiled core
        in one pass; None where `texts_fingerprinted` gives None, or the compiled core does not make
        these sketches with the fingerprints (`stores_only`)."""
        core, options = engine_choice.native, self.options
        if core is None or not stores_only(hasher) or options.fingerprint_field is not None:
            return None
        if (
            options.encoding != "utf-8"
            or options.namespace
            or not is_utf8(options.id_field, options.text_field)
        ):
            return None
        assert isinstance(hasher, BandedOddSketcher)
        read: tuple[list[str], list[int], list[bytes], list[int]] | None = core.sketch_text_lines(
            self.raws,
            scheme,
            hasher.n,
            hasher.seed,
            hasher.bands,
            options.id_field,
            options.text_field,
            defaults.MAX_ID_BYTES,
        )
        if read is None:
            return None
        ids, fps, sketches, others = read
        if not others:
            return ids, fps, [], sketches
        items = [
            _json_record(self.raws[position], self.first + position, self.source, options)
            for position in others
        ]
        texts = [str(item.doc) for item in items if isinstance(item, Record)]
        fps_sketches = fingerprints_and_sketches(scheme, hasher, texts)
        computed = iter(zip(*fps_sketches, strict=True))
        results = [(item.id, next(computed)) if isinstance(item, Record) else item for item in items]
        all_ids, pairs, errors = _merged(ids, list(zip(fps, sketches, strict=True)), others, results)
        return all_ids, [fp for fp, _ in pairs], errors, [sketch for _, sketch in pairs]

    def _line(self, position: int, f: int, fp_base: str) -> tuple[str, int] | InputError | None:
        """One line's id and fingerprint, its error, or None for a blank line (the pure reader)."""
        options, source, number = self.options, self.source, self.first + position
        obj = _json_object(self.raws[position], number, source, options.encoding)
        if obj is None or isinstance(obj, InputError):
            return obj
        id_field, fp_field = options.id_field, options.fingerprint_field or options.text_field
        doc_id, text = obj.get(id_field), obj.get(fp_field)
        if options.namespace or not (
            isinstance(doc_id, str)
            and doc_id.isascii()
            and 0 < len(doc_id) <= defaults.MAX_ID_BYTES
            and isinstance(text, str)
            and not is_blank(text)
        ):  # the short way is what _record_of gives for these; anything else goes through it
            record = _record_of(obj, number, source, options)
            if isinstance(record, InputError):
                return record
            doc_id, text = record.id, str(record.doc)
        try:
            return doc_id, parse_fingerprint(text, f, fp_base)
        except InvalidArgument as exc:
            return InputError(source, number, str(exc))


def _merged(
    ids: list[str],
    fps: list[_V],
    others: Sequence[int],
    results: Sequence[tuple[str, _V] | InputError | None],
) -> tuple[list[str], list[_V], list[tuple[int, InputError]]]:
    """The compiled core's ids and fingerprints (or other values) with the pure reader's `results` of
    the `others` lines (their positions, ascending), each where it was: after the plain lines before it."""
    if not others:
        return ids, fps, []
    all_ids: list[str] = []
    all_fps: list[_V] = []
    errors: list[tuple[int, InputError]] = []
    done = 0
    for count, (position, item) in enumerate(zip(others, results, strict=True)):
        plain = position - count  # plain lines before this one
        all_ids += ids[done:plain]
        all_fps += fps[done:plain]
        done = plain
        if isinstance(item, InputError):
            errors.append((len(all_ids), item))
        elif item is not None:
            all_ids.append(item[0])
            all_fps.append(item[1])
    all_ids += ids[done:]
    all_fps += fps[done:]
    return all_ids, all_fps, errors


def jsonl_chunks(
    stream: IO[bytes], source: str, options: ReadOptions, size: int
) -> Iterator[JsonLines | InputError]:
    """A JSON Lines stream as runs of `size` raw lines, then the fatal error of truncated gzip data if any.

    Read line by line: cutting bigger reads into runs measured slower (a fresh multi-megabyte allocation
    each).
    """
    first, raws = 1, []
    fault = None
    try:
        for raw in stream:
            raws.append(raw)
            if len(raws) == size:
                yield JsonLines(source, first, raws, options)
                first += size
                raws = []
    except (EOFError, gzip.BadGzipFile) as exc:
        fault = gzip_fault(source, exc, first + len(raws) - 1)
    if raws:
        yield JsonLines(source, first, raws, options)
    if fault is not None:
        yield fault
