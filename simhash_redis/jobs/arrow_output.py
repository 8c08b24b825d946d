"""A dedupe run's verdicts written back to Parquet or Arrow, every column of the input kept; written beside
the path and renamed into place once complete (an interrupted run leaves no partial output)."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import InvalidArgument
from .arrow import (
    ARROW_FORMATS,
    BATCH_ROWS,
    EXTENSIONS,
    ArrowRows,
    checked_columns,
    dataset_files,
    decoded,
    pyarrow,
    record_batches,
    schema_of,
)
from .dedupe import Pair
from .readers import STDIN, ReadOptions, Record, detect_format

__all__ = ["ROWS", "TableOutput"]

#: Which rows an output holds: those kept (stored as new, or already stored under their id), those
#: dropped as near-duplicates, or all of them with their verdict.
ROWS = ("kept", "dropped", "all")
#: The columns `rows="all"` adds, with their Arrow types: the verdict, the id of the near-duplicate that
#: dropped a row, its distance, and (a verified index) its estimated Jaccard similarity.
VERDICT_COLUMNS = {"status": "string", "duplicate_of": "string", "distance": "int32", "jaccard": "float64"}


class TableOutput:
    """Collects a dedupe run's dropped ids (`add`, its on_duplicate), then writes the rows asked for.

    Args:
        path: ``.parquet`` (or ``.pq``) for Parquet, ``.arrow`` / ``.feather`` for an Arrow IPC file.
        rows: one of `ROWS`.

    Raises:
        InvalidArgument: rows is not one of `ROWS`, or the path's extension names no table format.
    """

    def __init__(self, path: str, rows: str = "kept") -> None:
        if rows not in ROWS:
            raise InvalidArgument(f"rows must be one of {', '.join(ROWS)}, got {rows!r}")
        kind = EXTENSIONS.get(os.path.splitext(path.lower())[1])
        if kind is None:
            raise InvalidArgument(f"cannot tell the output format of {path!r}: name it .parquet or .arrow")
        self.path, self.rows, self.kind = path, rows, kind
        #: The dropped rows, by id and occurrence (0: the id's first row), with the pair that dropped each.
        self.dropped: dict[tuple[str, int], Pair] = {}
        self._ids: set[str] = set()

    def add(self, pair: Pair) -> None:
        """Remember a dropped document and the near-duplicate that dropped it (a run's on_duplicate)."""
        self.dropped[(pair.new_id, pair.occurrence)] = pair
        self._ids.add(pair.new_id)

    def _pair(self, item: Record | Any, met: dict[str, int]) -> Pair | None:
        """The pair that dropped a row, None for a row kept or bad; met: the rows read of dropped ids."""
        if not (isinstance(item, Record) and item.id in self._ids):
            return None
        met[item.id] = occurrence = met.get(item.id, -1) + 1
        return self.dropped.get((item.id, occurrence))

    def check(self, inputs: Sequence[str], fmt: str | None) -> Any:
        """Check, before the run, that the inputs (of format fmt, or None) can be written back: their schema.

        Raises:
            InvalidArgument: an input is not Parquet or Arrow (or is standard input), the inputs' columns
                differ, one of them would be overwritten, one has a column the output adds, or the output's
                folder does not exist.
            SimhashRedisError: pyarrow is not installed.
        """
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise InvalidArgument(f"the output's folder {folder!r} does not exist")
        schema = None
        for file, kind in _files(inputs, fmt):
            if os.path.exists(self.path) and os.path.samefile(file, self.path):
                raise InvalidArgument(f"the output {self.path!r} is one of the inputs: name another file")
            mine = schema_of(file, kind)
            if schema is None:
                schema, first = mine, file
            elif not mine.equals(schema):
                raise InvalidArgument(
                    f"{file}: its columns ({mine.to_string(show_schema_metadata=False)}) differ from "
                    f"{first}'s: write each to its own output"
                )
        if schema is not None and schema.metadata and b"pandas" in schema.metadata:
            # pandas' index of the input would not describe the rows written
            schema = schema.with_metadata({k: v for k, v in schema.metadata.items() if k != b"pandas"})
        if schema is not None and self.rows == "all":
            clash = [name for name in VERDICT_COLUMNS if name in schema.names]
            if clash:
                raise InvalidArgument(f"the input already has a {clash[0]!r} column, which --rows all adds")
        return schema

    def write(
        self, inputs: Sequence[str], fmt: str | None, options: ReadOptions, *, jaccard: bool = False
    ) -> int:
        """Read the inputs again and write the rows asked for; the number written.

        Args:
            jaccard: with rows="all", add the jaccard column (the run's index is verified).

        Raises:
            InvalidArgument: as `check`.
            pyarrow.ArrowException, OSError: an input cannot be read again, or the output written.
        """
        schema = self.check(inputs, fmt)
        pa, pq, ipc = pyarrow()
        if self.rows == "all":
            for name in list(VERDICT_COLUMNS)[: 4 if jaccard else 3]:
                schema = schema.append(pa.field(name, getattr(pa, VERDICT_COLUMNS[name])()))
        partial = f"{self.path}.{os.getpid()}.partial"
        written = 0

        def put(batches: list[Any]) -> int:  # as one row group
            table = pa.Table.from_batches(batches, schema=schema)
            if table.num_rows:
                writer.write_table(table)
            return int(table.num_rows)

        try:
            with (pq.ParquetWriter if self.kind == "parquet" else ipc.new_file)(partial, schema) as writer:
                held: list[Any] = []
                rows = 0  # counted as they come: kept rows come in runs, up to a batch each
                for batch in self._batches(inputs, fmt, options, schema):
                    held.append(batch)
                    rows += batch.num_rows
                    if rows >= BATCH_ROWS:
                        written += put(held)
                        held, rows = [], 0
                written += put(held)
            os.replace(partial, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
        return written

    def _batches(
        self, inputs: Sequence[str], fmt: str | None, options: ReadOptions, schema: Any
    ) -> Iterator[Any]:
        """The rows asked for of each input batch, in input order."""
        pa = pyarrow()[0]
        met: dict[str, int] = {}
        for file, kind in _files(inputs, fmt):
            row = 1
            for batch in record_batches(file, kind, None):
                names = checked_columns(batch.schema, file, options)
                # Read with its dictionaries, which the output keeps; its texts and ids decoded.
                items = ArrowRows(file, row, decoded(batch), options, *names).records()
                pairs = [self._pair(item, met) for item in items]
                row += batch.num_rows
                if self.rows == "all":
                    yield self._with_verdicts(batch, items, pairs, schema)
                    continue
                batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
                dropped = self.rows == "dropped"
                mask = [
                    isinstance(item, Record) and (pair is not None) == dropped
                    for item, pair in zip(items, pairs, strict=True)
                ]
                # Runs of rows sliced, not filtered: pyarrow cannot filter every type (string_view).
                start = 0
                for chosen, run in itertools.groupby(mask):
                    length = len(list(run))
                    if chosen:
                        yield batch.slice(start, length)
                    start += length

    def _with_verdicts(
        self, batch: Any, items: list[Record | Any], pairs: list[Pair | None], schema: Any
    ) -> Any:
        pa = pyarrow()[0]
        status = [
            "bad" if not isinstance(item, Record) else "kept" if pair is None else "dropped"
            for item, pair in zip(items, pairs, strict=True)
        ]
        columns = [*batch.columns, pa.array(status, pa.string())]
        columns.append(pa.array([None if p is None else p.existing_id for p in pairs], pa.string()))
        columns.append(pa.array([None if p is None else p.distance for p in pairs], pa.int32()))
        if "jaccard" in schema.names:
            columns.append(pa.array([None if p is None else p.jaccard for p in pairs], pa.float64()))
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def _files(inputs: Sequence[str], fmt: str | None) -> Iterator[tuple[str, str]]:
    """Each file of the inputs, with its format (InvalidArgument: one is not Parquet or Arrow, or is "-")."""
    for path in inputs:
        kind = fmt or detect_format(path)
        if path == STDIN or kind not in ARROW_FORMATS:
            raise InvalidArgument(
                f"{path!r}: an output table needs Parquet or Arrow inputs, read from files (their columns "
                "are written back)"
            )
        yield from ((file, kind) for file in dataset_files(path, kind))
