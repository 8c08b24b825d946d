"""The options and arguments several commands share, each defined once."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from simhash_redis.jobs.readers import FORMATS

__all__ = [
    "BatchSize",
    "DocId",
    "Encoding",
    "Files",
    "Format",
    "FormatOpt",
    "FpBase",
    "FpBaseOpt",
    "FpField",
    "IdField",
    "IdPrefix",
    "IdPrefixInput",
    "JsonOut",
    "MaxErrors",
    "NoHeader",
    "ProgressEvery",
    "Quiet",
    "TextArg",
    "TextField",
    "TextFile",
    "Workers",
]

Format = enum.Enum("Format", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]


class FpBase(str, enum.Enum):
    """How precomputed fingerprints are written."""

    auto = "auto"
    hex = "hex"
    dec = "dec"


# -- output ------------------------------------------------------------------------------------------

JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary on stderr.")]

# -- one document ------------------------------------------------------------------------------------

DocId = Annotated[str, typer.Argument(metavar="ID", help="The document id.", show_default=False)]
TextArg = Annotated[
    str | None, typer.Argument(help="The text (default: --file, else stdin).", show_default=False)
]
TextFile = Annotated[
    Path | None,
    typer.Option("--file", help="Read the text from this file (- for stdin).", show_default=False),
]
Encoding = Annotated[
    str,
    typer.Option(
        "--encoding",
        help="How the input is encoded (any Python codec, e.g. latin-1, cp1252; UTF-16 for a single text "
        "only: input read line by line is split at the byte 0x0A); bytes that do not decode are an error, "
        "never silently replaced.",
    ),
]

# -- bulk input (load, dedupe) -----------------------------------------------------------------------

Files = Annotated[
    list[str],
    typer.Argument(
        help="Input files (optionally .gz), directories of text (or Parquet) files, or - for stdin.",
        metavar="FILE...",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        help="Input format; default: from each file's extension (.jsonl/.ndjson/.json, .csv, .tsv, "
        ".txt, .fp, .parquet, .arrow/.feather; a directory is dir, or parquet when it holds only "
        ".parquet files; stdin is jsonl).",
        show_default=False,
    ),
]
IdField = Annotated[
    str,
    typer.Option(
        "--id-field", help="JSON field, or CSV/TSV/Parquet/Arrow column name or 1-based number, of the id."
    ),
]
TextField = Annotated[
    str, typer.Option("--text-field", help="JSON field, or CSV/TSV/Parquet/Arrow column, of the text.")
]
FpField = Annotated[
    str | None,
    typer.Option(
        "--fingerprint-field",
        help="Read a precomputed fingerprint (hex or decimal) from this field or column instead of a text.",
        show_default=False,
    ),
]
NoHeader = Annotated[
    bool, typer.Option("--no-header", help="CSV/TSV input has no header row (columns by number).")
]
IdPrefix = Annotated[
    str | None,
    typer.Option(
        "--id-prefix",
        help="Plain text: ids are this prefix plus the line number (--id-prefix news: gives news:7). "
        "Default: the file name as given, ':' and the xxh3-64 hash of the line's text in hex (the line "
        "'hello world' of news.txt is news.txt:d447b1ea40e6988b; stdin:... for stdin).",
        show_default=False,
    ),
]
IdPrefixInput = Annotated[
    bool,
    typer.Option(
        "--id-prefix-input",
        help="Start each id with its input's name, so that inputs which name their documents alike keep "
        "them apart: a.jsonl:7, stdin:7; a folder's files folder/2024/a.txt.",
    ),
]
FpBaseOpt = Annotated[
    FpBase,
    typer.Option(
        "--fp-base",
        help="Precomputed fingerprints: auto (0x or a-f: hex; digits only: decimal, negative as "
        "two's complement), hex or dec.",
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(
        "--workers", "-j", min=1, help="Fingerprinting processes (default: all cores).", show_default=False
    ),
]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Documents per write batch.")]
MaxErrors = Annotated[
    int,
    typer.Option(
        "--max-errors",
        min=-1,
        help="Stop with exit code 3 after more than this many bad records (-1: never stop).",
    ),
]
ProgressEvery = Annotated[
    float,
    typer.Option(
        "--progress-every",
        min=0.0,
        help="Seconds between progress lines when stderr is not a terminal (a terminal gets a live bar).",
    ),
]
