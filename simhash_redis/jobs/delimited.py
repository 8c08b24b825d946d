"""CSV and TSV input: rows with the line each starts on, a stray quote caught where it opens."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterator
from typing import IO, Any

from ..errors import InputError, InvalidArgument
from .records import ReadOptions, Record, checked_record, decode, encoding_name, is_utf8

# csv's default field limit (128 KiB) would reject ordinary long articles.
_CSV_FIELD_LIMIT = 64 * 1024 * 1024


def _column(spec: str, header: list[str] | None, source: str) -> int:
    if spec.isdigit() and int(spec) >= 1:
        return int(spec) - 1
    if header is None:
        raise InvalidArgument(f"{source}: column {spec!r} is not a number and the input has no header row")
    if spec not in header:
        raise InvalidArgument(f"{source}: no column {spec!r} in the header (columns: {', '.join(header)})")
    return header.index(spec)


def read_table(
    stream: IO[bytes], source: str, options: ReadOptions, delimiter: str
) -> Iterator[Record | InputError]:
    """The records of a CSV (delimiter ",") or TSV ("\\t") input, an InputError for each bad row; columns
    are named by header name or 1-based number.

    Raises:
        InvalidArgument: a column the header does not have, or an unreadable header row.
    """
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    encoding = "utf-8-sig" if options.encoding == "utf-8" else options.encoding
    text = io.TextIOWrapper(stream, encoding=encoding, errors="surrogateescape", newline="")
    try:
        table = _Rows(text, source, delimiter)
        rows = iter(table)
        header: list[str] | None = None
        if options.header:
            first = next(rows, None)
            if first is None:
                return
            if isinstance(first[1], InputError):
                raise InvalidArgument(f"{source}:1: unreadable header row ({first[1].reason})") from None
            header = first[1]
        id_col = _column(options.id_field, header, source)
        doc_col = _column(options.fingerprint_field or options.text_field, header, source)
        need = max(id_col, doc_col) + 1
        for number, row in rows:
            if isinstance(row, InputError):
                yield row
            elif not row or row == [""]:
                continue
            elif len(row) < need:
                yield InputError(source, number, f"has {len(row)} columns, need at least {need}")
            elif not is_utf8(row[id_col], row[doc_col]):
                yield table.undecodable(number, options.encoding)
            else:
                yield checked_record(row[id_col], row[doc_col], source, number, options)
    finally:
        text.detach()  # the caller closes the byte stream; the wrapper must not (nor warn about it)


class _Runaway(Exception):
    """A quoted field that has gone on for more lines than any real field."""


class _Rows:
    """CSV or TSV rows, each with the number of the line it starts on; a quoted field left open (a stray
    quote) is an error at its line, and the rows after that line are read again."""

    #: Lines one quoted field may span (an article's paragraphs stay far below).
    MAX_FIELD_LINES = 2000

    def __init__(self, text: IO[str], source: str, delimiter: str) -> None:
        self.source, self.delimiter = source, delimiter
        self._lines: Iterator[tuple[int, str]] = enumerate(text, 1)
        self._record: list[tuple[int, str]] = []  # the lines of the row being read
        self._reader = self._new_reader()

    def _new_reader(self) -> Any:
        return csv.reader(self._feed(), delimiter=self.delimiter, strict=True)

    def _feed(self) -> Iterator[str]:
        for number, line in self._lines:
            self._record.append((number, line))
            if len(self._record) > self.MAX_FIELD_LINES:
                raise _Runaway
            yield line

    def __iter__(self) -> Iterator[tuple[int, list[str] | InputError]]:
        """(the row's first line number, its fields or the InputError that replaces it)."""
        while True:
            self._record = []
            try:
                row = next(self._reader)
            except StopIteration:
                return
            except (csv.Error, _Runaway) as exc:
                yield self._fault(exc)
                continue
            yield self._record[0][0] if self._record else 0, row

    def undecodable(self, number: int, encoding: str) -> InputError:
        """The error of the row just read, which holds bytes that do not decode: where the first one is, in
        bytes from the start of the row's first line (as a line's error of JSON Lines says)."""
        raw = "".join(line for _, line in self._record).encode(encoding, "surrogateescape")
        error = decode(raw, self.source, number, encoding)
        return (
            error
            if isinstance(error, InputError)
            else InputError(self.source, number, f"not valid {encoding_name(encoding)}")
        )

    def _fault(self, exc: Exception) -> tuple[int, InputError]:
        record = self._record
        first = record[0][0] if record else 0
        kind = "CSV" if self.delimiter == "," else "TSV"
        if isinstance(exc, _Runaway) or "unexpected end of data" in str(exc):
            reason = f"malformed {kind}: a quoted field opened here is never closed (a stray quote?)"
        else:
            reason = f"malformed {kind}: {exc}"
        # Read again what the bad row swallowed: the lines after its first.
        self._lines = itertools.chain(record[1:], self._lines)
        self._reader = self._new_reader()
        return first, InputError(self.source, first, reason)
