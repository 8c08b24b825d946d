"""JSON Lines inputs: an object per line, its record, and runs of raw lines parsed where they are used.

A line is parsed by orjson where installed (`jsontext`), with the stdlib's values and errors either way.
The compiled core, where it runs, reads the lines of the plain shape itself (every other line is read
here), so a large load needs no record, and no str per text, per line.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any, NamedTuple

from .. import defaults
from ..errors import InputError
from ..fingerprinting import Scheme, Sketcher, engine_choice
from ..fingerprinting.banded_odd import BandedOddSketcher, stores_only
from .jsontext import loads, loads_object
from .records import (
    ReadOptions,
    Record,
    checked_record,
    fingerprint_read,
    gunzipped,
    gzip_fault,
    is_blank,
    is_utf8,
    line_text,
)
from .text_rows import Sketched, fingerprints_of


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
    return _record_of(obj, number, source, options) if isinstance(obj, dict) else obj


def _record_of(obj: dict[str, Any], number: int, source: str, options: ReadOptions) -> Record | InputError:
    """The record of one JSON object (a line's, or a JSON array's element)."""
    doc_field = options.fingerprint_field or options.text_field
    missing = [name for name in (options.id_field, doc_field) if name not in obj]
    if missing:
        return InputError(source, number, f"no {missing[0]!r} field")
    return checked_record(obj[options.id_field], obj[doc_field], source, number, options)


def read_jsonl(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Record | InputError]:
    """The records of a JSON Lines stream, and an InputError for each bad line (blank lines skipped)."""
    for number, raw in enumerate(stream, 1):
        item = _json_record(raw, number, source, options)
        if item is not None:
            yield item


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
            _json_record(raw, at, self.source, self.options) for at, raw in enumerate(self.raws, self.first)
        )
        return [item for item in items if item is not None]

    def fingerprints(self, f: int, fp_base: str) -> Fingerprints:
        """The ids and precomputed fingerprints of lines read with `fingerprint_field`, and each error
        with the number of good lines before it, as `records` and `codec.parse_fingerprint` give them."""
        done = self._natively(f, fp_base, len(self.raws))
        if done is not None:
            return done
        everything = range(len(self.raws))
        ids, (fps,), errors = _merged([], [[]], everything, [self._line(at, f, fp_base) for at in everything])
        return ids, fps, errors

    def fingerprints_here(self, f: int, fp_base: str) -> Fingerprints | None:
        """`fingerprints` when the compiled core reads all but one line in 16 itself, else None (the
        others cost the pure reader 3-20 times more each: a worker process does them faster)."""
        return self._natively(f, fp_base, len(self.raws) // 16)

    def _natively(self, f: int, fp_base: str, most: int) -> Fingerprints | None:
        """`fingerprints` by the compiled core and, for at most `most` lines, the pure reader; else None."""
        core, options = engine_choice.native, self.options
        fp_field = options.fingerprint_field or options.text_field
        if core is None or fp_base not in ("auto", "hex", "dec") or not self._plain(fp_field):
            return None
        read: tuple[list[str], list[int], list[int]] = core.fingerprint_lines(
            self.raws, options.id_field, fp_field, f, fp_base, defaults.MAX_ID_BYTES
        )
        ids, fps, others = read
        if len(others) > most:
            return None
        all_ids, (all_fps,), errors = _merged(
            ids, [fps], others, [self._line(at, f, fp_base) for at in others]
        )
        return all_ids, all_fps, errors

    def _plain(self, doc_field: str) -> bool:
        """Whether the compiled core can read these lines: UTF-8, ids as they are (no namespace), and
        field names a line can hold (one from a command line may hold lone surrogates)."""
        options = self.options
        return options.encoding == "utf-8" and not options.namespace and is_utf8(options.id_field, doc_field)

    def texts_fingerprinted(self, scheme: Scheme, hasher: Sketcher | None = None) -> Sketched | None:
        """The ids and text fingerprints (with hasher, a load's `storing` sketcher: and sketches) of lines
        read with `text_field`, and each error with the number of good lines before it, as `records` and
        the pure engine give them, the lines of the plain shape read by the compiled core; None under
        the pure engine, for precomputed fingerprints, lines it cannot read (`_plain`), or a hasher
        whose sketches it does not make with the fingerprints (`stores_only`)."""
        core, options = engine_choice.native, self.options
        if core is None or options.fingerprint_field is not None or not self._plain(options.text_field):
            return None
        fields = (options.id_field, options.text_field, defaults.MAX_ID_BYTES)
        sketches: list[bytes] | None = None
        if hasher is None:
            ids, fps, others = core.fingerprint_text_lines(self.raws, scheme, *fields)
        elif not stores_only(hasher):
            return None
        else:
            assert isinstance(hasher, BandedOddSketcher)
            read = core.sketch_text_lines(self.raws, scheme, hasher.n, hasher.seed, hasher.bands, *fields)
            if read is None:
                return None
            ids, fps, sketches, others = read
        if not others:
            return ids, fps, [], sketches
        items = [_json_record(self.raws[at], self.first + at, self.source, options) for at in others]
        texts = [str(item.doc) for item in items if isinstance(item, Record)]
        columns = [fps] if sketches is None else [fps, sketches]
        computed = zip(*fingerprints_of(texts, scheme, hasher)[: len(columns)], strict=True)
        results = [(item.id, *next(computed)) if isinstance(item, Record) else item for item in items]
        all_ids, merged, errors = _merged(ids, columns, others, results)
        return all_ids, merged[0], errors, None if sketches is None else merged[1]

    def _line(self, position: int, f: int, fp_base: str) -> tuple[str, int | str] | InputError | None:
        """One line's id and fingerprint, its error, or None for a blank line (the pure reader)."""
        record = _json_record(self.raws[position], self.first + position, self.source, self.options)
        if isinstance(record, Record):
            record = fingerprint_read(record, f, fp_base)
        return (record.id, record.doc) if isinstance(record, Record) else record


def _merged(
    ids: list[str],
    columns: list[list[Any]],
    others: Sequence[int],
    results: Sequence[tuple[Any, ...] | InputError | None],
) -> tuple[list[str], list[list[Any]], list[tuple[int, InputError]]]:
    """The compiled core's ids and columns (fingerprints, sketches) with the pure reader's `results` of
    the `others` lines (their positions, ascending: an id and its values, an error, or None for a blank
    line), each where it was: after the plain lines before it; and each error with the good lines
    before it."""
    if not others:
        return ids, columns, []
    all_ids: list[str] = []
    merged: list[list[Any]] = [[] for _ in columns]
    errors: list[tuple[int, InputError]] = []
    done = 0
    for count, (position, item) in enumerate(zip(others, results, strict=True)):
        plain = position - count  # plain lines before this one
        all_ids += ids[done:plain]
        for mine, column in zip(merged, columns, strict=True):
            mine += column[done:plain]
        done = plain
        if isinstance(item, InputError):
            errors.append((len(all_ids), item))
        elif item is not None:
            all_ids.append(item[0])
            for mine, value in zip(merged, item[1:], strict=True):
                mine.append(value)
    all_ids += ids[done:]
    for mine, column in zip(merged, columns, strict=True):
        mine += column[done:]
    return all_ids, merged, errors


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
