"""JSON Lines inputs (runs of raw lines parsed where they are used: by the compiled core where it runs), and
JSON arrays read element by element, never whole (the scanner looks at ASCII bytes only, which no byte of a
UTF-8 character can be); a bad line or element is one `InputError` at its line."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import IO, Any, NamedTuple

from .. import defaults
from ..codec import parse_fingerprint
from ..errors import InputError, InvalidArgument
from ..fingerprinting import Scheme, Sketcher, engine_choice
from ..fingerprinting.banded_odd import BandedOddSketcher, stores_only
from .jsontext import loads, loads_object
from .records import (
    BOM,
    GZIP_ERRORS,
    ReadOptions,
    Record,
    checked_record,
    gzip_fault,
    is_blank,
    is_utf8,
    line_text,
    open_input,
)
from .text_rows import Fingerprinted, fingerprints_of, placed, texts_of


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


def read_json_lines(path: str | os.PathLike[str], source: str | None = None) -> Iterator[JsonLine]:
    """The objects of a JSON Lines file (gzipped or not; blank lines skipped), named source (or the path).

    Raises:
        InputError: the first bad line.
        OSError, EOFError, gzip.BadGzipFile, zlib.error: the file cannot be opened, or its gzip data is
            truncated or corrupt.
    """
    name = source if source is not None else str(path)
    with open_input(str(path)) as stream:
        for number, raw in enumerate(stream, 1):
            obj = _json_object(raw, number, name)
            if isinstance(obj, InputError):
                raise obj
            if obj is not None:
                yield JsonLine(name, number, obj)


def _json_record(raw: bytes, number: int, source: str, options: ReadOptions) -> Record | InputError | None:
    """The record of one raw JSON line (or array element), None for a blank line."""
    obj = _json_object(raw, number, source, options.encoding)
    return _record_of(obj, number, source, options) if isinstance(obj, dict) else obj


def _record_of(obj: dict[str, Any], number: int, source: str, options: ReadOptions) -> Record | InputError:
    doc_field = options.fingerprint_field or options.text_field
    if missing := [name for name in (options.id_field, doc_field) if name not in obj]:
        return InputError(source, number, f"no {missing[0]!r} field")
    return checked_record(obj[options.id_field], obj[doc_field], source, number, options)


def read_jsonl(
    lines: Iterable[tuple[int, bytes]], source: str, options: ReadOptions
) -> Iterator[Record | InputError]:
    """The records of numbered raw JSON lines, and an InputError for each bad line (blank lines skipped)."""
    for number, raw in lines:
        if (item := _json_record(raw, number, source, options)) is not None:
            yield item


class JsonLines(NamedTuple):
    """Consecutive raw lines of a JSON Lines input, to be parsed where they are fingerprinted."""

    source: str
    #: The line number of raws[0].
    first: int
    raws: list[bytes]
    options: ReadOptions

    def records(self) -> list[Record | InputError]:
        """The lines' records and errors, in input order (blank lines left out)."""
        return list(read_jsonl(enumerate(self.raws, self.first), self.source, self.options))

    def fingerprints(
        self, scheme: Scheme, hasher: Sketcher | None, f: int, fp_base: str, most: int | None = None
    ) -> Fingerprinted | None:
        """The lines' `Fingerprinted` as `records` gives them (sketches too, with a `storing` hasher), the
        compiled core reading the lines of the plain shape; None where only the pure reader could read
        texts (the pure engine, a namespace, another hasher), or (precomputed fingerprints) where more
        than `most` lines are left to the pure reader (they cost it 3-20 times more: a worker does them)."""
        core, options = engine_choice.native, self.options
        fp_field = options.fingerprint_field
        fields = (options.id_field, fp_field or options.text_field)
        # Field names from a command line may hold lone surrogates, which no line can.
        plain = options.encoding == "utf-8" and not options.namespace and is_utf8(*fields)
        if fp_field is not None and hasher is None:
            ids, fps, others = [], [], range(len(self.raws))
            if core is not None and plain and fp_base in ("auto", "hex", "dec"):
                ids, fps, others = core.fingerprint_lines(
                    self.raws, *fields, f, fp_base, defaults.MAX_ID_BYTES
                )
            if most is not None and len(others) > most:
                return None
            items = [self._line(at, f, fp_base) for at in others]
            return placed(items, [], None, Fingerprinted(ids, fps, []), others)
        if core is None or not plain or fp_field is not None or (hasher and not stores_only(hasher)):
            return None
        sketches: list[bytes] | None = None
        if hasher is None:
            ids, fps, others = core.fingerprint_text_lines(self.raws, scheme, *fields, defaults.MAX_ID_BYTES)
        else:
            assert isinstance(hasher, BandedOddSketcher)
            bands = (hasher.n, hasher.seed, hasher.bands)
            read = core.sketch_text_lines(self.raws, scheme, *bands, *fields, defaults.MAX_ID_BYTES)
            ids, fps, sketches, others = read
        items = [_json_record(self.raws[at], self.first + at, self.source, options) for at in others]
        core_read = Fingerprinted(ids, fps, [], sketches)
        return placed(items, *fingerprints_of(texts_of(items), scheme, hasher), core_read, others)

    def _line(self, position: int, f: int, fp_base: str) -> Record | InputError | None:
        """One line's record (its fingerprint read), its error, or None for a blank line (the pure reader)."""
        options, source, number = self.options, self.source, self.first + position
        obj = _json_object(self.raws[position], number, source, options.encoding)
        if obj is None or isinstance(obj, InputError):
            return obj
        doc_id, text = obj.get(options.id_field), obj.get(options.fingerprint_field or options.text_field)
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
            return Record(source, number, doc_id, parse_fingerprint(text, f, fp_base))
        except InvalidArgument as exc:
            return InputError(source, number, str(exc))


def jsonl_chunks(
    stream: IO[bytes], source: str, options: ReadOptions, size: int
) -> Iterator[JsonLines | InputError]:
    """A JSON Lines stream as runs of `size` raw lines, then the fatal error of truncated gzip data if any
    (read line by line: cutting bigger reads into runs measured slower)."""
    first, raws, fault = 1, [], None
    try:
        for raw in stream:
            raws.append(raw)
            if len(raws) == size:
                yield JsonLines(source, first, raws, options)
                first += size
                raws = []
    except GZIP_ERRORS as exc:
        fault = gzip_fault(source, exc, first + len(raws) - 1)
    if raws:
        yield JsonLines(source, first, raws, options)
    if fault is not None:
        yield fault


_WHITE = b" \t\r\n"
#: What ends or nests an element outside strings.
_OUTSIDE = re.compile(rb'[\[\]{}",]')
_NOT_WHITE = re.compile(rb"[^ \t\r\n]")
_CHUNK = 1 << 20


def starts_array(stream: IO[bytes]) -> bool:
    """Tell, by a peek, whether a buffered stream holds a JSON array ("[" after white space and a BOM)."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return False
    head: bytes = peek(4096)[:4096].removeprefix(BOM).lstrip(_WHITE)
    return head[:1] == b"["


class _Scanner:
    """The raw elements of the array a stream holds, each with the line it starts on."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.buf, self.pos, self.eof = stream, b"", 0, False
        self.line = 1  # the line at self.pos

    def _more(self) -> bool:
        """Read another chunk, dropping what is consumed; False at the end of the input."""
        chunk = b"" if self.eof else self.stream.read(_CHUNK)
        self.eof = not chunk
        if chunk:
            self.buf, self.pos = self.buf[self.pos :] + chunk, 0
        return not self.eof

    def _skip_white(self) -> bytes:
        """Move past white space; the next byte, or b"" at the end of the input."""
        while True:
            found = _NOT_WHITE.search(self.buf, self.pos)
            end = len(self.buf) if found is None else found.start()
            self.line += self.buf.count(b"\n", self.pos, end)
            self.pos = end
            if found is not None:
                return self.buf[end : end + 1]
            if not self._more():
                return b""

    def elements(self, source: str) -> Iterator[tuple[int, bytes] | InputError]:
        """(line, raw element) of each element, then an InputError if the array is malformed."""
        self._more()
        self.pos = len(BOM) if self.buf.startswith(BOM) else 0
        if self._skip_white() != b"[":
            yield InputError(source, self.line, "expected a JSON array")
            return
        self.pos, closer = self.pos + 1, b","
        if self._skip_white() == b"]":  # an empty array
            self.pos, closer = self.pos + 1, b"]"
        while closer == b",":
            self._skip_white()
            line = self.line
            end, closer = self._element_end()  # may read on: the element starts at pos still
            raw = self.buf[self.pos : end]
            self.line += raw.count(b"\n")
            self.pos = end + 1
            if closer == b"":
                yield InputError(source, line, "the JSON array is not closed: the input ends inside it")
                return
            if not raw.strip(_WHITE):
                yield InputError(source, line, "not valid JSON (an empty element of the array)")
            else:
                yield line, raw
        if self._skip_white():
            yield InputError(source, self.line, "not valid JSON (more after the array's closing bracket)")

    def _element_end(self) -> tuple[int, bytes]:
        """Where the element at `pos` ends (the offset of the "," or "]" after it) and that byte; b""
        when the input ends first. The buffer may be read further (offsets stay relative to it)."""
        depth, scan, in_string = 0, self.pos, False
        while True:
            if in_string:
                # bytes.find (memchr) rather than a regular expression: strings are most of a document.
                quote = self.buf.find(b'"', scan)
                if quote >= 0:
                    slash = self.buf.find(b"\\", scan, quote)
                    if slash < 0:
                        in_string, scan = False, quote + 1
                        continue
                    if slash + 1 < len(self.buf):  # else the escaped byte is in the next chunk
                        scan = slash + 2
                        continue
            else:
                found = _OUTSIDE.search(self.buf, scan)
                if found is not None:
                    byte, scan = found.group(), found.end()
                    if byte == b'"':
                        in_string = True
                    elif byte in b"[{":
                        depth += 1
                    elif depth == 0 and byte in b",]":
                        return found.start(), byte
                    elif byte in b"]}":
                        depth = max(0, depth - 1)  # a stray closer stays in the element: JSON refuses it
                    continue
            consumed = self.pos
            if not self._more():
                return len(self.buf), b""
            scan -= consumed


def read_json_array(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Record | InputError]:
    """The records of a stream holding one JSON array of objects, an InputError for each bad element."""
    for item in _Scanner(stream).elements(source):
        record = item if isinstance(item, InputError) else _json_record(item[1], item[0], source, options)
        if record is not None:  # an element of only Unicode white space (a form feed) reads as blank
            yield record
