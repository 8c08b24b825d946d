"""Bulk loading: readers for every input format, parallel fingerprinting and pipelined, idempotent writes.

Readers yield `Record`s, or an `InputError` for a bad record so that one bad line never stops the good
ones. `Loader` fingerprints texts in a process pool (the index's scheme is pickled to each worker;
`Loader.load` sends JSON Lines there unparsed, so that parsing runs on every core too) and writes
batches with `SimhashIndex.add_many`. Every write is idempotent (re-adding an id with the same
fingerprint is UNCHANGED), so an interrupted load is resumed by running it again: the loader keeps no
state between runs and needs none.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.pool import Pool
from pathlib import Path
from typing import IO, Any, NamedTuple

from .. import defaults
from ..checks import is_int
from ..codec import parse_fingerprint
from ..errors import InputError, InvalidArgument, TooManyErrors
from ..index.simhash_index import Match, Outcome, SimhashIndex
from ..scheme import Scheme
from .dedupe import DryRun, Pair, add_unique

__all__ = [
    "FORMATS",
    "STDIN",
    "LoadStats",
    "Loader",
    "Pair",
    "ReadOptions",
    "Record",
    "detect_format",
    "estimate_total",
    "read",
    "read_all",
]

#: Input formats: JSON Lines, CSV, TSV, plain text (a document per line), a directory of text files,
#: and precomputed fingerprints (``id<TAB>fingerprint`` lines).
FORMATS = ("jsonl", "csv", "tsv", "lines", "dir", "fingerprints")
#: The name that means standard input.
STDIN = "-"
_STDIN_NAME = "<stdin>"
_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": "lines",
    ".text": "lines",
    ".fp": "fingerprints",
    ".fps": "fingerprints",
    ".fingerprints": "fingerprints",
}
_GZIP_MAGIC = b"\x1f\x8b"
# csv's default field limit (128 KiB) would reject ordinary long articles.
_CSV_FIELD_LIMIT = 64 * 1024 * 1024


class Record(NamedTuple):
    """One document of bulk input."""

    source: str
    line: int | None
    id: str
    doc: str | int
    #: doc is a precomputed fingerprint's text (hex or decimal), not a document's text.
    is_fingerprint: bool = False


@dataclass(frozen=True)
class ReadOptions:
    """How records are found in the input.

    Attributes:
        id_field: JSON field, or CSV/TSV column (a header name, or a 1-based number), holding the id.
        text_field: field or column holding the text.
        fingerprint_field: when set, the field or column holding a precomputed fingerprint, read
            instead of a text.
        header: whether CSV/TSV input starts with a header row.
        id_prefix: plain text: ids are this prefix plus the line number (default: the file name as
            given plus ':', so line 7 of news.txt is ``news.txt:7``; ``stdin:7`` for standard input).
        fp_base: how fingerprints are written: "auto" (0x-prefixed or with a-f: hex; digits only,
            possibly negative: decimal), "hex" or "dec".
    """

    id_field: str = "id"
    text_field: str = "text"
    fingerprint_field: str | None = None
    header: bool = True
    id_prefix: str | None = None
    fp_base: str = "auto"


# -- opening input -------------------------------------------------------------------------------------


def detect_format(path: str) -> str:
    """The input format of a path, from its extension (``.gz`` is looked through).

    Args:
        path: a file or directory path, or "-" for standard input (JSON Lines unless told otherwise).

    Raises:
        InvalidArgument: the extension is not one of a known format.
    """
    if path == STDIN:
        return "jsonl"
    if os.path.isdir(path):
        return "dir"
    name = path.lower().removesuffix(".gz")
    fmt = _EXTENSIONS.get(os.path.splitext(name)[1])
    if fmt is None:
        known = ", ".join(sorted(_EXTENSIONS))
        raise InvalidArgument(
            f"cannot tell the format of {path!r} from its extension (known: {known}); pass --format"
        )
    return fmt


@contextmanager
def _open_binary(path: str) -> Iterator[IO[bytes]]:
    """The input as a byte stream, gunzipped when it starts with the gzip magic number."""
    if path == STDIN:
        raw: IO[bytes] = sys.stdin.buffer
        close = False
    else:
        raw = open(path, "rb")  # noqa: SIM115 - closed below, after the gzip wrapper
        close = True
    try:
        buffered: io.BufferedReader = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
        if buffered.peek(2)[:2] == _GZIP_MAGIC:
            with gzip.GzipFile(fileobj=buffered, mode="rb") as unzipped:
                yield unzipped  # type: ignore[misc]
        else:
            yield buffered
    finally:
        if close:
            raw.close()


def _source_name(path: str) -> str:
    return _STDIN_NAME if path == STDIN else path


def _decode(raw: bytes, source: str, line: int | None) -> str | InputError:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InputError(source, line, f"not valid UTF-8 (byte {exc.start})")


def _lines(stream: IO[bytes], source: str) -> Iterator[tuple[int, str | InputError]]:
    """Numbered, decoded lines without their line ends (a leading BOM is dropped)."""
    for number, raw in enumerate(stream, 1):
        yield number, _line_text(raw, number, source)


def _line_text(raw: bytes, number: int, source: str) -> str | InputError:
    """Line `number` as read (line end included), decoded, without its line end or a leading BOM."""
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return _decode(raw.rstrip(b"\r\n"), source, number)


# -- readers -------------------------------------------------------------------------------------------


def _doc_id(value: object, source: str, line: int | None) -> str | InputError:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return InputError(source, line, f"the id must be a string or an integer, got {type(value).__name__}")
    doc_id = str(value)
    try:
        size = len(doc_id.encode("utf-8"))
    except UnicodeEncodeError:
        return InputError(source, line, "the id is not valid Unicode (it contains a lone surrogate)")
    if not 1 <= size <= defaults.MAX_ID_BYTES:
        return InputError(source, line, f"the id must be 1..{defaults.MAX_ID_BYTES} UTF-8 bytes, got {size}")
    return doc_id


def _doc(value: object, source: str, line: int | None, options: ReadOptions) -> str | InputError:
    """The text (or, with fingerprint_field, the fingerprint's text) of a record, checked."""
    what = "fingerprint" if options.fingerprint_field else "text"
    if options.fingerprint_field and is_int(value):
        return str(value)
    if not isinstance(value, str):
        return InputError(source, line, f"the {what} must be a string, got {type(value).__name__}")
    if _blank(value):
        return InputError(source, line, f"empty {what}")
    return value


def _blank(text: str) -> bool:
    # Not `not text.strip()`: that copies every multi-kilobyte document just to test it.
    return not text or text.isspace()


def _read_jsonl(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Record | InputError]:
    for number, raw in enumerate(stream, 1):
        item = _jsonl_record(raw, number, source, options)
        if item is not None:
            yield item


def _jsonl_record(raw: bytes, number: int, source: str, options: ReadOptions) -> Record | InputError | None:
    """The record of one JSON line as read from the input (line end included), None for a blank line."""
    text = _line_text(raw, number, source)
    if isinstance(text, InputError):
        return text
    if _blank(text):
        return None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        return InputError(source, number, f"not valid JSON ({exc})")
    if not isinstance(obj, dict):
        return InputError(source, number, f"expected a JSON object, got {type(obj).__name__}")
    doc_field = options.fingerprint_field or options.text_field
    missing = [name for name in (options.id_field, doc_field) if name not in obj]
    if missing:
        return InputError(source, number, f"no {missing[0]!r} field")
    doc_id = _doc_id(obj[options.id_field], source, number)
    doc = _doc(obj[doc_field], source, number, options)
    bad = doc_id if isinstance(doc_id, InputError) else doc
    if isinstance(bad, InputError):
        return bad
    return Record(source, number, str(doc_id), str(doc), options.fingerprint_field is not None)


def _column(spec: str, header: list[str] | None, source: str) -> int:
    if spec.isdigit() and int(spec) >= 1:
        return int(spec) - 1
    if header is None:
        raise InvalidArgument(f"{source}: column {spec!r} is not a number and the input has no header row")
    if spec not in header:
        raise InvalidArgument(f"{source}: no column {spec!r} in the header (columns: {', '.join(header)})")
    return header.index(spec)


def _read_table(
    stream: IO[bytes], source: str, options: ReadOptions, delimiter: str
) -> Iterator[Record | InputError]:
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")
    try:
        yield from _table_rows(csv.reader(text, delimiter=delimiter), source, options, delimiter)
    finally:
        text.detach()  # the caller closes the byte stream; the wrapper must not (nor warn about it)


def _table_rows(
    reader: Any, source: str, options: ReadOptions, delimiter: str
) -> Iterator[Record | InputError]:
    header: list[str] | None = None
    if options.header:
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InvalidArgument(f"{source}:1: unreadable header row ({exc})") from None
    id_col = _column(options.id_field, header, source)
    doc_col = _column(options.fingerprint_field or options.text_field, header, source)
    need = max(id_col, doc_col) + 1
    kind = "CSV" if delimiter == "," else "TSV"
    is_fp = options.fingerprint_field is not None
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield InputError(source, reader.line_num, f"malformed {kind}: {exc}")
            continue
        number = reader.line_num
        if not row or row == [""]:
            continue
        if len(row) < need:
            yield InputError(source, number, f"has {len(row)} columns, need at least {need}")
            continue
        fields = (row[id_col], row[doc_col])
        if any(_has_surrogates(value) for value in fields):
            yield InputError(source, number, "not valid UTF-8")
            continue
        doc_id = _doc_id(fields[0], source, number)
        doc = _doc(fields[1], source, number, options)
        bad = doc_id if isinstance(doc_id, InputError) else doc
        yield bad if isinstance(bad, InputError) else Record(source, number, str(doc_id), str(doc), is_fp)


def _has_surrogates(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _read_lines(
    stream: IO[bytes], source: str, path: str, options: ReadOptions
) -> Iterator[Record | InputError]:
    default = "stdin:" if path == STDIN else f"{path}:"
    prefix = options.id_prefix if options.id_prefix is not None else default
    for number, text in _lines(stream, source):
        if isinstance(text, InputError):
            yield text
        elif text.strip():
            doc_id = _doc_id(f"{prefix}{number}", source, number)
            yield doc_id if isinstance(doc_id, InputError) else Record(source, number, doc_id, text)


def _read_fingerprints(stream: IO[bytes], source: str) -> Iterator[Record | InputError]:
    for number, text in _lines(stream, source):
        if isinstance(text, InputError):
            yield text
            continue
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        sep = "\t" if "\t" in stripped else ("," if "," in stripped else None)
        parts = stripped.rsplit(sep, 1)
        if len(parts) != 2 or not parts[0].strip():
            yield InputError(
                source, number, "expected an id and a fingerprint separated by a tab, comma or space"
            )
            continue
        doc_id = _doc_id(parts[0].strip(), source, number)
        yield (
            doc_id
            if isinstance(doc_id, InputError)
            else Record(source, number, doc_id, parts[1].strip(), True)
        )


def _read_dir(path: str) -> Iterator[Record | InputError]:
    root = Path(path)
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            file = Path(folder) / name
            rel = file.relative_to(root).as_posix()
            source = str(file)
            try:
                with _open_binary(source) as stream:
                    data = stream.read()
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                yield InputError(source, None, f"cannot read: {exc}")
                continue
            text = _decode(data.removeprefix(b"\xef\xbb\xbf"), source, None)
            if isinstance(text, InputError):
                yield text
            elif not text.strip():
                yield InputError(source, None, "empty file")
            else:
                doc_id = _doc_id(rel, source, None)
                yield doc_id if isinstance(doc_id, InputError) else Record(source, None, doc_id, text)


def read(
    path: str, fmt: str | None = None, options: ReadOptions | None = None
) -> Iterator[Record | InputError]:
    """The records of one input, and an `InputError` for each bad one, in input order.

    Args:
        path: a file (optionally gzipped), a directory, or "-" for standard input.
        fmt: one of `FORMATS`; default: `detect_format`.
        options: where ids, texts and fingerprints are found.

    Raises:
        InvalidArgument: unknown format, or a column that the header does not have.
        OSError: the input cannot be opened (a missing file, a permission problem).
    """
    options = options or ReadOptions()
    fmt = _checked_format(path, fmt)
    if fmt == "dir":
        yield from _read_dir(path)
        return
    source = _source_name(path)
    with _open_binary(path) as stream:
        try:
            if fmt == "jsonl":
                yield from _read_jsonl(stream, source, options)
            elif fmt in ("csv", "tsv"):
                yield from _read_table(stream, source, options, "," if fmt == "csv" else "\t")
            elif fmt == "lines":
                yield from _read_lines(stream, source, path, options)
            else:
                yield from _read_fingerprints(stream, source)
        except (EOFError, gzip.BadGzipFile) as exc:
            yield _gzip_fault(source, exc)


def _checked_format(path: str, fmt: str | None) -> str:
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InvalidArgument(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "dir" and not os.path.isdir(path):
        raise InvalidArgument(f"{path!r} is not a directory (format dir)")
    if fmt != "dir" and os.path.isdir(path):
        raise InvalidArgument(f"{path!r} is a directory; pass --format dir or leave --format out")
    return fmt


def _gzip_fault(source: str, exc: Exception) -> InputError:
    return InputError(source, None, f"truncated or corrupt gzip data: {exc}")


def read_all(
    paths: Sequence[str], fmt: str | None = None, options: ReadOptions | None = None
) -> Iterator[Record | InputError]:
    """`read` over several inputs in turn; a format given applies to all of them.

    Args:
        paths: the inputs.
        fmt: one of `FORMATS`, or None to detect each input's own.
        options: where ids, texts and fingerprints are found.

    Raises:
        InvalidArgument: as `read`, checked for every input before the first record.
        OSError: an input cannot be opened.
    """
    _check_inputs(paths, fmt)
    for path in paths:
        yield from read(path, fmt, options)


def _check_inputs(paths: Sequence[str], fmt: str | None) -> None:
    for path in paths:  # fail fast on a typo in the last file name, before loading the first
        if path != STDIN and not os.path.exists(path):
            raise FileNotFoundError(f"no such file or directory: {path!r}")
        if fmt is None:
            detect_format(path)


class _Lines(NamedTuple):
    """Consecutive raw lines of a JSON Lines input, parsed where they are fingerprinted."""

    source: str
    first: int  # the line number of raws[0]
    raws: list[bytes]
    options: ReadOptions


def _read_units(
    paths: Sequence[str], fmt: str | None, options: ReadOptions, size: int
) -> Iterator[Record | InputError | _Lines]:
    """`read_all` (whose input checks the caller makes), but JSON Lines come as runs of `size` raw lines."""
    for path in paths:
        kind = _checked_format(path, fmt)
        if kind != "jsonl":
            yield from read(path, kind, options)
            continue
        with _open_binary(path) as stream:
            yield from _jsonl_chunks(stream, _source_name(path), options, size)


def _jsonl_chunks(
    stream: IO[bytes], source: str, options: ReadOptions, size: int
) -> Iterator[_Lines | InputError]:
    first, raws = 1, []
    fault = None
    try:
        for raw in stream:
            raws.append(raw)
            if len(raws) == size:
                yield _Lines(source, first, raws, options)
                first += size
                raws = []
    except (EOFError, gzip.BadGzipFile) as exc:
        fault = _gzip_fault(source, exc)
    if raws:
        yield _Lines(source, first, raws, options)
    if fault is not None:
        yield fault


def estimate_total(
    paths: Sequence[str], fmt: str | None = None, options: ReadOptions | None = None
) -> int | None:
    """Roughly how many records the inputs hold (lines or files), or None if it cannot be known cheaply.

    Standard input and gzipped files make it unknown; blank lines and multi-line CSV fields make it
    a slight over-estimate.

    Args:
        paths: the inputs.
        fmt: the format given, or None.
        options: the read options (whether CSV has a header).
    """
    options = options or ReadOptions()
    total = 0
    for path in paths:
        if path == STDIN:
            return None
        kind = fmt or detect_format(path)
        if kind == "dir":
            total += sum(len([n for n in files if not n.startswith(".")]) for _, _, files in os.walk(path))
            continue
        try:
            with open(path, "rb") as fh:
                if fh.read(2) == _GZIP_MAGIC:
                    return None
                fh.seek(0)
                count, last = 0, b"\n"
                while chunk := fh.read(1 << 20):
                    count += chunk.count(b"\n")
                    last = chunk[-1:]
        except OSError:
            return None
        count += last != b"\n"
        total += count - (1 if kind in ("csv", "tsv") and options.header and count else 0)
    return total


# -- parallel fingerprinting ---------------------------------------------------------------------------

_worker_scheme: Scheme | None = None


def _init_worker(scheme: Scheme) -> None:
    # Ctrl-C reaches the whole process group: only the parent reacts, and it stops the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _worker_scheme
    _worker_scheme = scheme


def _fingerprint_texts(texts: list[str]) -> list[int]:
    assert _worker_scheme is not None
    return _worker_scheme.fingerprint_many(texts)


def _parse_in_worker(lines: _Lines, f: int, fp_base: str) -> list[Record | InputError]:
    assert _worker_scheme is not None
    return _parse_lines(lines, _worker_scheme, f, fp_base)


def _parse_lines(lines: _Lines, scheme: Scheme, f: int, fp_base: str) -> list[Record | InputError]:
    """The records of a run of JSON lines with their fingerprints computed, errors in place."""
    items: list[Record | InputError] = []
    for number, raw in enumerate(lines.raws, lines.first):
        item = _jsonl_record(raw, number, lines.source, lines.options)
        if item is not None:
            items.append(item if isinstance(item, InputError) else _parsed(item, f, fp_base))
    return _with_fingerprints(items, scheme.fingerprint_many)


def _parsed(record: Record, f: int, fp_base: str) -> Record | InputError:
    """The record with a precomputed fingerprint's text read (other records as they are)."""
    if not (record.is_fingerprint and isinstance(record.doc, str)):
        return record
    try:
        return record._replace(doc=parse_fingerprint(record.doc, f, fp_base))
    except InvalidArgument as exc:
        return InputError(record.source, record.line, str(exc))


def _texts(items: list[Record | InputError]) -> list[str]:
    return [item.doc for item in items if isinstance(item, Record) and isinstance(item.doc, str)]


def _with_fingerprints(
    items: list[Record | InputError], fingerprint_many: Callable[[list[str]], list[int]]
) -> list[Record | InputError]:
    """The items with every text replaced by its fingerprint, in one call of `fingerprint_many`."""
    texts = _texts(items)
    return _filled(items, fingerprint_many(texts)) if texts else items


def _filled(items: list[Record | InputError], fps: list[int]) -> list[Record | InputError]:
    computed = iter(fps)
    return [
        item._replace(doc=next(computed)) if isinstance(item, Record) and isinstance(item.doc, str) else item
        for item in items
    ]


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork is fastest, but forking a process that runs other threads can deadlock the child.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


# -- loading -------------------------------------------------------------------------------------------


@dataclass
class LoadStats:
    """What a load has done so far; every count is of acknowledged writes.

    Attributes:
        read: good records read.
        added: new ids stored (with dry_run: that would be stored).
        replaced: ids that got another fingerprint.
        unchanged: ids already stored with the same fingerprint (all of them, when a load is resumed).
        duplicates: documents not stored because a near-duplicate was (unique loads only).
        errors: bad records reported.
        written: documents whose batch Redis has acknowledged.
        total: the expected number of records, when known.
        started: time.monotonic() at the start.
    """

    read: int = 0
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    duplicates: int = 0
    errors: int = 0
    written: int = 0
    total: int | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        """Documents written per second."""
        return self.written / self.elapsed if self.elapsed > 0 else 0.0

    def as_dict(self) -> dict[str, float | int | None]:
        """The counts, elapsed seconds and docs/s, for JSON output."""
        return {
            "read": self.read,
            "added": self.added,
            "replaced": self.replaced,
            "unchanged": self.unchanged,
            "duplicates": self.duplicates,
            "errors": self.errors,
            "written": self.written,
            "elapsed": round(self.elapsed, 3),
            "docs_per_s": round(self.rate, 1),
        }


class Loader:
    """Loads records into an index: texts fingerprinted in parallel, writes batched and idempotent.

    Args:
        index: the index to write to.
        workers: fingerprinting processes (default: every core); 1 fingerprints in this process.
        batch_size: documents per fingerprinting chunk and per write batch.
        max_errors: stop (raising TooManyErrors) when more records than this are bad; None: never.
        unique: store only documents with no near-duplicate in the index or earlier in the load
            (`SimhashIndex.add_many(unique=True)`); the others are reported through on_duplicate.
        dry_run: with unique, write nothing: check against the index and the load's own documents.
        fp_base: how precomputed fingerprints are written, see `parse_fingerprint`.
        on_error: called with each bad record's InputError.
        on_progress: called with the stats after each acknowledged batch.
        on_duplicate: called with each near-duplicate pair (unique loads).

    Raises:
        InvalidArgument: an argument is out of range.
    """

    def __init__(
        self,
        index: SimhashIndex,
        *,
        workers: int | None = None,
        batch_size: int | None = None,
        max_errors: int | None = None,
        unique: bool = False,
        dry_run: bool = False,
        fp_base: str = "auto",
        on_error: Callable[[InputError], None] | None = None,
        on_progress: Callable[[LoadStats], None] | None = None,
        on_duplicate: Callable[[Pair], None] | None = None,
    ) -> None:
        self.index = index
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.batch_size = batch_size or index.batch_size
        if self.workers < 1 or self.batch_size < 1:
            raise InvalidArgument("workers and batch_size must be at least 1")
        if dry_run and not unique:
            raise InvalidArgument("dry_run needs unique")
        self.max_errors = max_errors
        self.unique = unique
        self.dry_run = DryRun(index) if dry_run else None
        self.fp_base = fp_base
        self.on_error = on_error
        self.on_progress = on_progress
        self.on_duplicate = on_duplicate
        self.stats = LoadStats()
        self._pool: Pool | None = None

    def run(self, records: Iterable[Record | InputError]) -> LoadStats:
        """Load every record; bad ones are reported and skipped.

        Args:
            records: what `read_all` yields.

        Returns:
            The final stats (also in `self.stats`, which stays current if this raises).

        Raises:
            TooManyErrors: more than max_errors bad records; the records before the last one are written.
            RedisUnavailable: the server failed; run the same load again to resume.
            KeyboardInterrupt: passed on after the pool is stopped; `self.stats` tells what was done.
        """
        return self._run(records)

    def load(
        self, paths: Sequence[str], fmt: str | None = None, options: ReadOptions | None = None
    ) -> LoadStats:
        """Read and load the inputs; JSON Lines are parsed by the fingerprinting workers, not this process.

        The same records, errors (in input order) and stats as ``run(read_all(paths, fmt, options))``,
        with this process left to read lines and write batches.

        Args:
            paths: the inputs, as for `read_all`.
            fmt: one of `FORMATS`, or None to detect each input's own.
            options: where ids, texts and fingerprints are found.

        Raises:
            InvalidArgument, OSError: as `read_all`, before anything is loaded.
            TooManyErrors, RedisUnavailable, KeyboardInterrupt: as `run`.
        """
        units = _read_units(paths, fmt, options or ReadOptions(), self.batch_size)
        _check_inputs(paths, fmt)  # at once, not at the first record
        return self._run(units)

    def _run(self, units: Iterable[Record | InputError | _Lines]) -> LoadStats:
        # Batches are fingerprinted (and JSON lines parsed) up to `window` ahead of the one being
        # written; every item is accounted for in input order when its batch comes back.
        pending: deque[Callable[[], list[Record | InputError]]] = deque()
        window = 2 * self.workers
        try:
            for unit in self._batches(units):
                pending.append(self._submit(unit))
                while len(pending) > window and not self._too_many():
                    self._finish(pending.popleft()())
                if self._too_many():
                    break
            while pending and not self._too_many():
                self._finish(pending.popleft()())
        finally:
            self._close_pool()
        if self._too_many():
            raise TooManyErrors(
                f"stopped after {self.stats.errors} bad records (more than --max-errors {self.max_errors})"
            )
        return self.stats

    def _batches(
        self, units: Iterable[Record | InputError | _Lines]
    ) -> Iterator[list[Record | InputError] | _Lines]:
        # Errors travel in their batch, so they are reported in input order with the records around them.
        batch: list[Record | InputError] = []
        for unit in units:
            if isinstance(unit, _Lines):
                if batch:
                    yield batch
                    batch = []
                yield unit
                continue
            batch.append(unit)
            if len(batch) >= self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def _too_many(self) -> bool:
        return self.max_errors is not None and self.stats.errors > self.max_errors

    def _submit(self, unit: list[Record | InputError] | _Lines) -> Callable[[], list[Record | InputError]]:
        """What gives the unit's items with their fingerprints: a result of the pool, or computed here."""
        f, scheme = self.index.f, self.index.scheme
        if isinstance(unit, _Lines):
            if self._parallel(len(unit.raws)):
                return self._pool_of().apply_async(_parse_in_worker, (unit, f, self.fp_base)).get
            done = _parse_lines(unit, scheme, f, self.fp_base)
            return lambda: done
        items = [item if isinstance(item, InputError) else _parsed(item, f, self.fp_base) for item in unit]
        texts = _texts(items)
        if self._parallel(len(texts)):
            result = self._pool_of().apply_async(_fingerprint_texts, (texts,))
            return lambda: _filled(items, result.get())
        done = _with_fingerprints(items, scheme.fingerprint_many)
        return lambda: done

    def _parallel(self, size: int) -> bool:
        # A handful of documents is not worth starting (or waiting on) the pool.
        return self.workers > 1 and size >= 64

    def _pool_of(self) -> Pool:
        if self._pool is None:
            self._pool = _pool_context().Pool(self.workers, _init_worker, (self.index.scheme,))
        return self._pool

    def _finish(self, items: list[Record | InputError]) -> None:
        """Report a batch's errors and write its records, up to the error that exceeds max_errors."""
        good: list[tuple[str, int]] = []
        for item in items:
            if isinstance(item, InputError):
                self._error(item)
                if self._too_many():
                    break
                continue
            self.stats.read += 1
            assert isinstance(item.doc, int)
            good.append((item.id, item.doc))
        if good:
            self._write(good)

    def _error(self, error: InputError) -> None:
        self.stats.errors += 1
        if self.on_error is not None:
            self.on_error(error)

    def _write(self, items: list[tuple[str, int]]) -> None:
        if self.unique:
            outcomes = self.dry_run(items) if self.dry_run is not None else add_unique(self.index, items)
        else:
            outcomes = list(self.index.add_many(items))
        self._count(items, outcomes)
        self.stats.written += len(items)
        if self.on_progress is not None:
            self.on_progress(self.stats)

    def _count(self, items: list[tuple[str, int]], outcomes: Sequence[Outcome | Match]) -> None:
        for (doc_id, _), outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, Match):
                if outcome.id == doc_id:
                    self.stats.unchanged += 1  # already stored by an earlier (interrupted) run
                    continue
                self.stats.duplicates += 1
                if self.on_duplicate is not None:
                    self.on_duplicate(Pair(doc_id, outcome.id, outcome.distance))
            elif outcome is Outcome.ADDED:
                self.stats.added += 1
            elif outcome is Outcome.REPLACED:
                self.stats.replaced += 1
            else:
                self.stats.unchanged += 1

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
