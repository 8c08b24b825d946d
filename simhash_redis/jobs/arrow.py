"""Parquet and Arrow IPC (Feather) inputs, a record batch at a time; a dataset directory is read file by file
in name order, rows numbered from 1 in each file (``part-0003.parquet:1207: empty text``)."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import IO, Any, NamedTuple

from ..errors import InputError, InvalidArgument, SimhashRedisError
from .read_ahead import read_ahead
from .records import STDIN, ReadOptions, Record, files_under, source_name
from .shared_ring import SharedRing
from .text_rows import PackedTexts, SharedTexts, TextRows, offsets_of

__all__ = [
    "ARROW_FORMATS",
    "BATCH_ROWS",
    "EXTENSIONS",
    "ArrowRows",
    "arrow_chunks",
    "checked_columns",
    "count_rows",
    "dataset_files",
    "is_dataset",
    "pyarrow",
    "record_batches",
    "schema_of",
]

#: The formats read here: Parquet, and Arrow IPC (the file format, Feather v2, or a stream).
ARROW_FORMATS = ("parquet", "arrow")
EXTENSIONS = dict.fromkeys((".parquet", ".pq"), "parquet") | dict.fromkeys(
    (".arrow", ".arrows", ".feather", ".ipc"), "arrow"
)
#: Rows per record batch read: what a reader holds at a time is a few of these, of the columns it reads.
BATCH_ROWS = 4096
#: Bytes of a Parquet column read at a time.
_STREAM_BUFFER = 1 << 20
#: Bytes of texts per piece sent to a fingerprinting worker, about: below the C allocator's threshold
#: for mapping a block of its own (128 KiB), so that the worker reuses its memory run after run.
_PIECE_BYTES = 64 << 10
_MISSING = "reading Parquet or Arrow files needs pyarrow: `pip install pyarrow` (the parquet extra)"


def pyarrow() -> tuple[ModuleType, ModuleType, ModuleType]:
    """pyarrow, pyarrow.parquet and pyarrow.ipc, imported only when a table is read or written.

    Raises:
        SimhashRedisError: pyarrow is not installed (the message names the extra that installs it).
    """
    try:
        import pyarrow as pa
        import pyarrow.ipc as ipc
        import pyarrow.parquet as pq
    except ImportError:
        raise SimhashRedisError(_MISSING) from None
    return pa, pq, ipc


def is_dataset(path: str) -> bool:
    """Tell whether a directory is a Parquet dataset: one ``.parquet`` file at least, nothing else visible."""
    parquet = (
        EXTENSIONS.get(file.suffix.lower()) == "parquet" for file in files_under(Path(path), (".", "_"))
    )
    return next(parquet, False) and all(parquet)


def dataset_files(path: str, fmt: str) -> list[str]:
    """The files an input stands for: a file (or "-") itself, or a directory's files of the format.

    Raises:
        InvalidArgument: a directory that holds no file of the format.
    """
    if path == STDIN or not os.path.isdir(path):
        return [path]
    files = [str(f) for f in files_under(Path(path), (".", "_")) if EXTENSIONS.get(f.suffix.lower()) == fmt]
    if not files:
        raise InvalidArgument(f"{path!r} holds no {fmt} files")
    return files


def _column(spec: str, names: list[str], source: str, option: str) -> str:
    """The column a --id-field / --text-field / --fingerprint-field names: a name, or a 1-based number."""
    if spec in names:
        return spec
    if spec.isdigit() and 1 <= int(spec) <= len(names):
        return names[int(spec) - 1]
    columns = ", ".join(names)
    raise InvalidArgument(f"{source}: no column {spec!r} (columns: {columns}); choose one with {option}")


def checked_columns(schema: Any, source: str, options: ReadOptions) -> tuple[str, str]:
    """The names of the id and document columns, their types checked once for the whole file.

    Raises:
        InvalidArgument: a column the schema does not have, or of a type that cannot hold what it should.
    """
    types, names, fp = pyarrow()[0].types, list(schema.names), options.fingerprint_field is not None
    id_name = _column(options.id_field, names, source, "--id-field")
    if fp:
        doc_name = _column(str(options.fingerprint_field), names, source, "--fingerprint-field")
    else:
        doc_name = _column(options.text_field, names, source, "--text-field")
    texts: tuple[Any, ...] = (types.is_string, types.is_large_string, types.is_binary, types.is_large_binary)
    if hasattr(types, "is_string_view"):
        texts += (types.is_string_view, types.is_binary_view)
    ints = (*texts, types.is_integer)
    checks = {id_name: ("an id", ints), doc_name: ("a fingerprint", ints) if fp else ("a text", texts)}
    for name, (what, accepted) in checks.items():
        kind = schema.field(name).type
        if types.is_dictionary(kind):  # pandas' categorical: read decoded (`arrow_chunks`)
            kind = kind.value_type
        if not any(check(kind) for check in accepted):
            raise InvalidArgument(f"{source}: column {name!r} is of type {kind}, which cannot hold {what}")
    return id_name, doc_name


def record_batches(path: str, fmt: str, columns: list[str] | None, rows: int = BATCH_ROWS) -> Iterator[Any]:
    """The record batches of one file (or an Arrow stream on "-"), of `rows` rows at most, each holding its
    own buffers, dictionary-encoded columns as stored; columns None reads all of them.

    Raises:
        InvalidArgument: Parquet asked of standard input (it needs a file it can seek in).
        pyarrow.ArrowException, OSError: the file is not of the format, or is corrupt.
    """
    pa, pq, ipc = pyarrow()
    if fmt == "parquet":
        if path == STDIN:
            raise InvalidArgument(
                "Parquet cannot be read from standard input (it needs a file): give its path"
            )
        # Streamed page by page: pyarrow's default pre-buffers a whole row group (up to a million rows).
        with pq.ParquetFile(path, buffer_size=_STREAM_BUFFER, pre_buffer=False) as table:
            yield from table.iter_batches(batch_size=rows, columns=columns, use_threads=False)
        return
    with contextlib.ExitStack() as stack:
        if path == STDIN:
            batches = iter(ipc.open_stream(_stream_on_stdin()))
        else:
            batches = _ipc_opened(stack.enter_context(pa.memory_map(path)))[1]
        for batch in batches:
            batch = batch if columns is None else batch.select(columns)
            if batch.num_rows <= rows:
                yield batch
                continue
            # Copied in batches of `rows`: a slice shares, and would pickle, all of its parent's buffers.
            for part in (batch.slice(start, rows) for start in range(0, batch.num_rows, rows)):
                yield pa.RecordBatch.from_arrays(
                    [pa.concat_arrays([c]) for c in part.columns], schema=part.schema
                )


#: The magic bytes an Arrow IPC file (.arrow, .feather) begins with; a stream begins otherwise.
_FILE_MAGIC = b"ARROW1"


class _Prefixed(io.RawIOBase):
    """A stream's bytes read ahead, then the rest of it."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._head[: len(buffer)] if self._head else self._rest.read(len(buffer))
        self._head = self._head[len(data) :]
        buffer[: len(data)] = data
        return len(data)


def _stream_on_stdin() -> IO[bytes]:
    """Standard input as an Arrow IPC stream (InvalidArgument: it holds an Arrow IPC file, not a stream)."""
    head = b""
    while len(head) < len(_FILE_MAGIC) and (more := sys.stdin.buffer.read(len(_FILE_MAGIC) - len(head))):
        head += more
    if head == _FILE_MAGIC:
        raise InvalidArgument(
            "standard input holds an Arrow IPC file (.arrow, .feather), which cannot be read from standard "
            "input (it needs a file): give its path, or pipe an Arrow IPC stream (.arrows)"
        )
    return io.BufferedReader(_Prefixed(head, sys.stdin.buffer))


def _ipc_opened(source: Any) -> tuple[Any, Iterator[Any]]:
    """The schema and the record batches of an Arrow IPC file, or of an IPC stream (.arrows)."""
    pa, _, ipc = pyarrow()
    try:
        reader = ipc.open_file(source)
        return reader.schema, (reader.get_batch(at) for at in range(reader.num_record_batches))
    except pa.ArrowInvalid:  # not the file format: a stream
        source.seek(0)
        stream = ipc.open_stream(source)
        return stream.schema, iter(stream)


def decoded(batch: Any) -> Any:
    """The batch with its dictionary-encoded columns (pandas' categorical) decoded to their values."""
    types = pyarrow()[0].types
    if not any(types.is_dictionary(kind) for kind in batch.schema.types):
        return batch
    columns = [
        column.dictionary_decode() if types.is_dictionary(column.type) else column for column in batch.columns
    ]
    return type(batch).from_arrays(columns, names=batch.schema.names)


def schema_of(path: str, fmt: str) -> Any:
    """The schema of one Parquet or Arrow file (None for an Arrow stream on standard input: not read ahead).

    Raises:
        pyarrow.ArrowException, OSError: the file is not of the format, or is corrupt.
    """
    pa, pq, _ = pyarrow()
    if path == STDIN:
        return None
    if fmt == "parquet":
        return pq.read_schema(path)
    with pa.memory_map(path) as source:
        return _ipc_opened(source)[0]


class ArrowRows(NamedTuple):
    """Consecutive rows of a Parquet or Arrow input (its id and document columns), read where they are
    fingerprinted: a worker process gets texts as `TextRows` (UTF-8 bytes, sent packed: `for_worker`)."""

    source: str
    #: The number of the first row (rows are numbered from 1 in each file).
    first: int
    batch: Any
    options: ReadOptions
    id_name: str
    doc_name: str

    def records(self) -> list[Record | InputError]:
        """The rows' records, an InputError for each bad row (one not valid UTF-8 among them)."""
        return self.rows().records()

    def rows(self) -> TextRows:
        """The rows as lists, a text column as its UTF-8 bytes."""
        texts = self.batch.column(self.doc_name)
        # A view, not a cast: the same buffers, and no import of pyarrow.compute (40 ms of each worker).
        texts = texts if (binary := self._binary()) is None else texts.view(binary)
        return self._rows(texts.to_pylist())

    def _rows(self, raws: list[Any]) -> TextRows:
        return TextRows(
            self.source, self.first, self.batch.column(self.id_name).to_pylist(), raws, self.options
        )

    def _binary(self) -> Any:
        """The binary type the text column can be viewed as (None: fingerprints, or other types)."""
        pa = pyarrow()[0]
        if self.options.fingerprint_field is not None:
            return None
        kind = self.batch.column(self.doc_name).type
        return {pa.string(): pa.binary(), pa.large_string(): pa.large_binary()}.get(kind)

    def text_bytes(self) -> int | None:
        """The bytes of the rows' texts, about (None: fingerprints, or texts read by `records`)."""
        return None if self._binary() is None else int(self.batch.column(self.doc_name).nbytes)

    def for_worker(self, ring: SharedRing | None = None) -> ArrowRows | TextRows | PackedTexts | SharedTexts:
        """What a worker process is sent of these rows (it needs no pyarrow): texts as `SharedTexts` when the
        ring has room, else as `PackedTexts` (`TextRows` when some are null), other columns as they are."""
        if (binary := self._binary()) is None:
            return self
        texts = self.batch.column(self.doc_name)
        if texts.null_count or not len(texts):
            return self._rows(texts.view(binary).to_pylist())
        ids = self.batch.column(self.id_name).to_pylist()
        if ring is not None and (shared := _shared(texts, ring)) is not None:
            return SharedTexts(self.source, self.first, ids, *shared, self.options)
        return PackedTexts(self.source, self.first, ids, *_packed(texts), self.options)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # As an Arrow IPC stream (texts go as `for_worker` gives them): pickle's protocol 4 copies Arrow
        # buffers slowly.
        pa, _, ipc = pyarrow()
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, self.batch.schema) as writer:
            writer.write_batch(self.batch)
        data = sink.getvalue().to_pybytes()
        return _rows_of_ipc, (self.source, self.first, data, self.options, self.id_name, self.doc_name)


def _offsets(texts: Any) -> tuple[Any, bytes, Any, bool]:
    """A column of texts' values buffer, its offsets as an array's bytes and as ints, and whether wide."""
    _, offsets, values = texts.buffers()
    wide = pyarrow()[0].types.is_large_string(texts.type)
    width = 8 if wide else 4
    ends = offsets.slice(texts.offset * width, (len(texts) + 1) * width).to_pybytes()
    return values, ends, offsets_of(ends, wide), wide


def _shared(texts: Any, ring: SharedRing) -> tuple[int, bytes, bool] | None:
    """A column of texts with no null copied into the ring, as `SharedTexts` hold it (start, offsets,
    wide); None when the ring has no room for them now, or every text is empty."""
    values, ends, bounds, wide = _offsets(texts)
    if values is None:
        return None
    start = ring.place(memoryview(values)[bounds[0] : bounds[-1]])
    return None if start is None else (start, ends, wide)


def _packed(texts: Any) -> tuple[list[bytes], int, bytes, bool]:
    """A column of texts with no null as `PackedTexts` hold it (pieces of about `_PIECE_BYTES`, a whole
    number of texts each; texts per piece; offsets; wide)."""
    values, ends, bounds, wide = _offsets(texts)
    rows = len(bounds) - 1
    step = max(1, rows * _PIECE_BYTES // max(1, bounds[-1] - bounds[0]))
    cuts = [bounds[at] for at in range(0, rows, step)] + [bounds[-1]]
    if values is None:  # every text empty
        return [b""] * (len(cuts) - 1), step, ends, wide
    pieces = [values.slice(low, high - low).to_pybytes() for low, high in itertools.pairwise(cuts)]
    return pieces, step, ends, wide


def _rows_of_ipc(
    source: str, first: int, data: bytes, options: ReadOptions, id_name: str, doc_name: str
) -> ArrowRows:
    """`ArrowRows` unpickled: its batch read back from the Arrow IPC stream (zero-copy)."""
    batch = pyarrow()[2].open_stream(data).read_next_batch()
    return ArrowRows(source, first, batch, options, id_name, doc_name)


def arrow_chunks(path: str, fmt: str, options: ReadOptions, size: int) -> Iterator[ArrowRows | InputError]:
    """A Parquet or Arrow input (a file, a dataset directory, or an Arrow stream on "-") as runs of `size`
    rows; a file that is not of the format, or is corrupt, ends with a fatal InputError.

    Raises:
        InvalidArgument: a column the file does not have, or of a type that cannot hold what it should.
        SimhashRedisError: pyarrow is not installed.
    """
    pa = pyarrow()[0]
    for file in dataset_files(path, fmt):
        source = source_name(file)
        row = 1
        try:
            columns = None if file == STDIN else list(checked_columns(schema_of(file, fmt), source, options))
            names: tuple[str, str] | None = None
            batches: Iterator[Any] = map(decoded, record_batches(file, fmt, columns, size))
            if fmt == "parquet":  # decoded on a thread (without the GIL) while the loader writes
                batches = read_ahead(batches)
            for batch in batches:
                names = names or checked_columns(batch.schema, source, options)
                yield ArrowRows(source, row, batch, options, *names)
                row += batch.num_rows
        except (pa.ArrowException, OSError) as exc:
            what = "a Parquet" if fmt == "parquet" else "an Arrow"
            if row == 1:
                yield InputError(source, None, f"not {what} file, or a corrupt one: {exc}", fatal=True)
            else:
                reason = f"cannot be read as {what} file after row {row - 1}: {exc}"
                yield InputError(source, row, reason, fatal=True)


def count_rows(path: str, fmt: str) -> int | None:
    """The rows of a Parquet or Arrow file or dataset, from the metadata; None when unknown (a stream, a file
    that cannot be read: its error comes when it is read)."""
    if path == STDIN:
        return None
    pa, pq, ipc = pyarrow()
    total = 0
    try:
        for file in dataset_files(path, fmt):
            if fmt == "parquet":
                total += pq.ParquetFile(file).metadata.num_rows
                continue
            with pa.memory_map(file) as source:
                reader = ipc.open_file(source)
                total += sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (pa.ArrowException, OSError, InvalidArgument):
        return None
    return total
