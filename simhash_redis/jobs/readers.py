"""Readers of every input format (JSON Lines or array, CSV, TSV, plain text, a directory of files, precomputed
fingerprints, Parquet, Arrow): `Record`s, or an `InputError` for each bad record (CSV and TSV rows with the
line each starts on, a stray quote caught where it opens)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import itertools
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import xxhash

from ..errors import InputError, InvalidArgument
from .arrow import ARROW_FORMATS, BATCH_ROWS, ArrowRows, arrow_chunks, count_rows, is_dataset
from .arrow import EXTENSIONS as ARROW_EXTENSIONS
from .jsonlines import JsonLines, jsonl_chunks, read_json_array, read_jsonl, starts_array
from .records import (
    BOM,
    GZIP_ERRORS,
    GZIP_MAGIC,
    STDIN,
    ReadOptions,
    Record,
    checked_id,
    checked_record,
    decode,
    encoding_name,
    files_under,
    gzip_fault,
    is_utf8,
    numbered_lines,
    open_input,
    source_name,
)

__all__ = [
    "FORMATS",
    "STDIN",
    "ReadOptions",
    "Record",
    "check_inputs",
    "detect_format",
    "estimate_total",
    "holds_at_least",
    "precomputed",
    "read",
    "read_all",
    "read_chunks",
]

#: Input formats: JSON Lines, CSV, TSV, plain text (a document per line), a directory of text files,
#: precomputed fingerprints (``id<TAB>fingerprint`` lines), Parquet (a file or a directory of them) and
#: Arrow IPC (Feather) tables.
FORMATS = ("jsonl", "csv", "tsv", "lines", "files", "dir", "fingerprints", *ARROW_FORMATS)
_EXTENSIONS = {
    **dict.fromkeys((".jsonl", ".ndjson", ".json"), "jsonl"),
    **dict.fromkeys((".csv",), "csv"),
    **dict.fromkeys((".tsv", ".tab"), "tsv"),
    **dict.fromkeys((".txt", ".text"), "lines"),
    **dict.fromkeys((".fp", ".fps", ".fingerprints"), "fingerprints"),
    **ARROW_EXTENSIONS,
}


def detect_format(path: str) -> str:
    """The input format of a path (or "-": JSON Lines), from its extension (``.gz`` is looked through).

    Raises:
        InvalidArgument: the extension is not one of a known format.
    """
    if path == STDIN:
        return "jsonl"
    if os.path.isdir(path):
        return "parquet" if is_dataset(path) else "dir"
    name = path.lower().removesuffix(".gz")
    fmt = _EXTENSIONS.get(os.path.splitext(name)[1])
    if fmt is None:
        known = ", ".join(sorted(_EXTENSIONS))
        raise InvalidArgument(
            f"cannot tell the format of {path!r} from its extension (known: {known}); pass --format"
        )
    return fmt


def precomputed(paths: Sequence[str], fmt: str | None, options: ReadOptions | None) -> bool:
    """Whether any of the inputs holds precomputed fingerprints (--fingerprint-field, the format
    "fingerprints", or a path whose extension says so), not texts."""
    if options is not None and options.fingerprint_field is not None:
        return True
    if fmt is not None:
        return fmt == "fingerprints"
    for path in paths:
        with contextlib.suppress(InvalidArgument):  # the read itself says what is wrong with the path
            if detect_format(path) == "fingerprints":
                return True
    return False


def _record(
    raw_id: str, source: str, line: int | None, doc: str, namespace: str = "", is_fp: bool = False
) -> Record | InputError:
    doc_id = checked_id(raw_id, source, line, namespace)
    return doc_id if isinstance(doc_id, InputError) else Record(source, line, doc_id, doc, is_fp)


def _read_lines(
    stream: IO[bytes], source: str, path: str, options: ReadOptions
) -> Iterator[Record | InputError]:
    # Default ids name the line's text, not its number: tomorrow's batch must not replace today's.
    numbered = options.id_prefix is not None
    prefix = options.id_prefix if numbered else ("stdin:" if path == STDIN else f"{path}:")
    for number, text in numbered_lines(stream, source, options.encoding):
        if isinstance(text, InputError):
            yield text
        elif text.strip():
            name = number if numbered else xxhash.xxh3_64_hexdigest(text.encode("utf-8", "surrogatepass"))
            yield _record(f"{prefix}{name}", source, number, text, options.namespace if numbered else "")


def _read_fingerprints(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Record | InputError]:
    for number, text in numbered_lines(stream, source, options.encoding):
        if isinstance(text, InputError):
            yield text
        elif (stripped := text.strip()) and not stripped.startswith("#"):
            parts = stripped.rsplit("\t" if "\t" in stripped else ("," if "," in stripped else None), 1)
            if len(parts) != 2 or not parts[0].strip():
                reason = "expected an id and a fingerprint separated by a tab, comma or space"
                yield InputError(source, number, reason)
            else:
                yield _record(parts[0].strip(), source, number, parts[1].strip(), options.namespace, True)


def _read_file(source: str, doc_id: str, encoding: str) -> Record | InputError:
    """A whole file as one document."""
    try:
        if not stat.S_ISREG(os.stat(source).st_mode):  # opening a FIFO would wait for a writer forever
            return InputError(source, None, "not a regular file (a FIFO, socket or device): skipped")
        with open_input(source) as stream:
            data = stream.read()
    except (OSError, *GZIP_ERRORS) as exc:
        return InputError(source, None, f"cannot read: {exc}")
    text = decode(data.removeprefix(BOM) if encoding == "utf-8" else data, source, None, encoding)
    if isinstance(text, InputError) or not text.strip():
        return text if isinstance(text, InputError) else InputError(source, None, "empty file")
    return _record(doc_id, source, None, text)


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
            if (first := next(rows, None)) is None:
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
                row: list[str] | InputError = next(self._reader)
            except StopIteration:
                return
            except (csv.Error, _Runaway) as exc:
                kind = "CSV" if self.delimiter == "," else "TSV"
                stray = isinstance(exc, _Runaway) or "unexpected end of data" in str(exc)
                reason = "a quoted field opened here is never closed (a stray quote?)" if stray else str(exc)
                first = self._record[0][0] if self._record else 0
                row = InputError(self.source, first, f"malformed {kind}: {reason}")
                # Read again what the bad row swallowed: the lines after its first.
                self._lines = itertools.chain(self._record[1:], self._lines)
                self._reader = self._new_reader()
            yield self._record[0][0] if self._record else 0, row

    def undecodable(self, number: int, encoding: str) -> InputError:
        """The error of the row just read, which holds bytes that do not decode: where the first one is, in
        bytes from the start of the row's first line (as a line's error of JSON Lines says)."""
        raw = "".join(line for _, line in self._record).encode(encoding, "surrogateescape")
        error = decode(raw, self.source, number, encoding)
        reason = f"not valid {encoding_name(encoding)}"
        return error if isinstance(error, InputError) else InputError(self.source, number, reason)


def read(
    path: str, fmt: str | None = None, options: ReadOptions | None = None
) -> Iterator[Record | InputError]:
    """The records of one input (a file, gzipped or not, a directory, or "-"), and an `InputError` for each
    bad one, in input order; fmt None: `detect_format`.

    Raises:
        InvalidArgument: unknown format, or a column that the header does not have.
        OSError: the input cannot be opened (a missing file, a permission problem).
    """
    options = _of_input(options or ReadOptions(), path)
    fmt = _checked_format(path, fmt)
    if fmt == "dir":  # with prefix_input, ids are paths below the directory as given: folder/2024/a.txt
        prefix = path.rstrip("/") + "/" if options.prefix_input else ""
        for file in files_under(Path(path), "."):
            yield _read_file(str(file), prefix + file.relative_to(Path(path)).as_posix(), options.encoding)
    elif fmt == "files":  # each file one document, named by its path as given
        yield _read_file(path, path, options.encoding)
    elif fmt in ARROW_FORMATS:
        for chunk in arrow_chunks(path, fmt, options, BATCH_ROWS):
            yield from [chunk] if isinstance(chunk, InputError) else chunk.records()
    else:
        with open_input(path) as stream:
            yield from _records(stream, path, fmt, options)


def _records(stream: IO[bytes], path: str, fmt: str, options: ReadOptions) -> Iterator[Record | InputError]:
    """The records of an opened input, a truncated gzip's error last."""
    source = source_name(path)
    last = 0  # the last line read, for the message of a truncated input
    try:
        if fmt == "jsonl" and starts_array(stream):  # a .json file holding one array
            items = read_json_array(stream, source, options)
        elif fmt == "jsonl":
            items = read_jsonl(enumerate(stream, 1), source, options)
        elif fmt in ("csv", "tsv"):
            items = read_table(stream, source, options, "," if fmt == "csv" else "\t")
        elif fmt == "lines":
            items = _read_lines(stream, source, path, options)
        else:
            items = _read_fingerprints(stream, source, options)
        for item in items:
            last = item.line or last
            yield item
    except GZIP_ERRORS as exc:
        yield gzip_fault(source, exc, last)


def _of_input(options: ReadOptions, path: str) -> ReadOptions:
    """The options an input is read with: with prefix_input, its ids' namespace ("a.jsonl:", "stdin:")."""
    if not options.prefix_input:
        return options
    return dataclasses.replace(options, namespace=f"{'stdin' if path == STDIN else path}:")


def _checked_format(path: str, fmt: str | None) -> str:
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InvalidArgument(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "dir" and not os.path.isdir(path):
        raise InvalidArgument(f"{path!r} is not a directory (format dir)")
    if fmt not in ("dir", *ARROW_FORMATS) and os.path.isdir(path):
        raise InvalidArgument(f"{path!r} is a directory; pass --format dir or leave --format out")
    return fmt


def read_all(
    paths: Sequence[str], fmt: str | None = None, options: ReadOptions | None = None
) -> Iterator[Record | InputError]:
    """`read` over several inputs in turn; a format given applies to all of them.

    Raises:
        InvalidArgument, OSError: as `read`, checked for every input before the first record.
    """
    check_inputs(paths, fmt)
    for path in paths:
        yield from read(path, fmt, options)


def check_inputs(paths: Sequence[str], fmt: str | None) -> None:
    """Check, before the first is loaded, that every input exists and (fmt None) that its format is known.

    Raises:
        FileNotFoundError: an input does not exist.
        InvalidArgument: an input's format cannot be told from its extension.
    """
    for path in paths:
        if path != STDIN and not os.path.exists(path):
            raise FileNotFoundError(f"no such file or directory: {path!r}")
        if fmt is None:
            detect_format(path)


def holds_at_least(
    paths: Sequence[str], fmt: str | None, options: ReadOptions | None, count: int
) -> bool | None:
    """Whether the inputs hold `count` records or more, as their lines tell (sampled when far from it,
    counted when near); None when that is unknown (standard input, pipes and gzip)."""
    rough = estimate_total(paths, fmt, options, sample=1 << 20)
    if rough is None or not count // 2 <= rough <= 2 * count:
        return None if rough is None else rough >= count
    exact = estimate_total(paths, fmt, options, stop_at=count)
    return None if exact is None else exact >= count


def read_chunks(
    paths: Sequence[str], fmt: str | None, options: ReadOptions, size: int
) -> Iterator[Record | InputError | JsonLines | ArrowRows]:
    """`read_all` without its input checks, but JSON Lines come as `JsonLines` runs of `size` raw lines,
    Parquet and Arrow tables as `ArrowRows` runs of `size` rows."""
    for path in paths:
        kind = _checked_format(path, fmt)
        own = _of_input(options, path)
        if kind in ARROW_FORMATS:
            yield from arrow_chunks(path, kind, own, size)
        elif kind != "jsonl":
            yield from read(path, kind, options)
        else:
            with open_input(path) as stream:
                try:
                    array = starts_array(stream)
                except GZIP_ERRORS as exc:  # its header is damaged
                    yield gzip_fault(source_name(path), exc, 0)
                    continue
                yield from (
                    _records(stream, path, kind, own)
                    if array
                    else jsonl_chunks(stream, source_name(path), own, size)
                )


def estimate_total(
    paths: Sequence[str],
    fmt: str | None = None,
    options: ReadOptions | None = None,
    stop_at: int | None = None,
    sample: int | None = None,
) -> int | None:
    """Roughly how many records the inputs hold (lines or files; blank lines and multi-line CSV fields
    over-estimate), or None if it cannot be known cheaply (standard input, pipes, gzip); counting stops at
    `stop_at`, and a file's first `sample` bytes are counted and scaled to its size."""
    options = options or ReadOptions()
    total = 0
    for path in paths:
        if path == STDIN:
            return None
        kind = fmt or detect_format(path)
        if kind in ("files", "dir"):
            total += 1 if kind == "files" else sum(1 for _ in files_under(Path(path), "."))
            continue
        if kind in ARROW_FORMATS:
            if (rows := count_rows(path, kind)) is None:
                return None
            total += rows
            continue
        try:
            info = os.stat(path)
            if not stat.S_ISREG(info.st_mode):
                return None  # a pipe or a device: what is read here would be lost to the load
            with open(path, "rb") as fh:
                if fh.read(2) == GZIP_MAGIC:
                    return None
                fh.seek(0)
                if kind == "jsonl" and starts_array(fh):
                    return None  # an array's lines are not its records
                count, last, read = 0, b"\n", 0
                while chunk := fh.read(1 << 20):
                    count += chunk.count(b"\n")
                    last, read = chunk[-1:], read + len(chunk)
                    if stop_at is not None and total + count > stop_at:
                        return total + count - 1  # a header line at most
                    if sample is not None and sample <= read < info.st_size:
                        count, last = count * info.st_size // read, b"\n"
                        break
        except OSError:
            return None
        count += last != b"\n"
        total += count - (1 if kind in ("csv", "tsv") and options.header and count else 0)
    return total
