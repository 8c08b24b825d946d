"""`load`: bulk import, and the reading, progress and summary machinery `dedupe` shares."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from simhash_redis.errors import InputError, SimhashRedisError
from simhash_redis.jobs.dedupe import Pair
from simhash_redis.jobs.loader import Loader, LoadStats
from simhash_redis.jobs.readers import FORMATS, ReadOptions, estimate_total

from .common import ExitCode, echo_json, fail, settings
from .progress import Progress

__all__ = ["LoadRun", "format_pair", "register", "run_load"]

Format = enum.Enum("Format", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]


class FpBase(str, enum.Enum):
    """How precomputed fingerprints are written."""

    auto = "auto"
    hex = "hex"
    dec = "dec"


Files = Annotated[
    list[str],
    typer.Argument(
        help="Input files (optionally .gz), directories of text files, or - for stdin.",
        metavar="FILE...",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        help="Input format; default: from each file's extension (.jsonl/.ndjson/.json, .csv, .tsv, "
        ".txt, .fp; a directory is dir; stdin is jsonl).",
        show_default=False,
    ),
]
IdField = Annotated[
    str, typer.Option("--id-field", help="JSON field, or CSV/TSV column name or 1-based number, of the id.")
]
TextField = Annotated[str, typer.Option("--text-field", help="JSON field or CSV/TSV column of the text.")]
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
        help="Plain text: ids are this prefix plus the line number (default: the file name as given "
        "plus ':', e.g. news.txt:7; stdin:7 for stdin).",
        show_default=False,
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
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary on stderr.")]
ProgressEvery = Annotated[
    float,
    typer.Option(
        "--progress-every",
        min=0.0,
        help="Seconds between progress lines when stderr is not a terminal (a terminal gets a live bar).",
    ),
]


@dataclass
class LoadRun:
    """The options `load` and `dedupe` share."""

    files: list[str]
    fmt: str | None
    read: ReadOptions
    fp_base: str
    workers: int | None
    batch_size: int
    max_errors: int
    quiet: bool
    progress_every: float


def _summary(stats: LoadStats, verb: str) -> str:
    parts = [f"{stats.added:,} added", f"{stats.replaced:,} replaced", f"{stats.unchanged:,} unchanged"]
    if stats.duplicates:
        parts.append(f"{stats.duplicates:,} duplicates")
    parts.append(f"{stats.errors:,} errors")
    return (
        f"{verb}: {stats.written:,} documents in {stats.elapsed:.2f} s ({stats.rate:,.0f} docs/s): "
        + ", ".join(parts)
    )


def run_load(
    ctx: typer.Context,
    run: LoadRun,
    *,
    unique: bool = False,
    dry_run: bool = False,
    on_duplicate: Callable[[Pair], None] | None = None,
    verb: str = "loaded",
) -> LoadStats:
    """Read, fingerprint and write the inputs with progress, error reports and a summary on stderr.

    Args:
        ctx: the command's context (for the global settings).
        run: the shared options.
        unique: store only documents without a near-duplicate.
        dry_run: with unique, write nothing.
        on_duplicate: called with each near-duplicate pair.
        verb: the summary's first word.

    Returns:
        The final stats.

    Raises:
        typer.Exit: 130 after Ctrl-C, with the summary so far and how to resume.
        SimhashRedisError: passed on (after the summary so far) for the app's handler to report.
    """
    index = settings(ctx).open_index(create=not dry_run)
    total = None if run.quiet else estimate_total(run.files, run.fmt, run.read)
    progress = Progress(total, enabled=not run.quiet, interval=run.progress_every)

    def report(error: InputError) -> None:
        progress.close()
        typer.echo(str(error), err=True)

    loader = Loader(
        index,
        workers=run.workers,
        batch_size=run.batch_size,
        max_errors=None if run.max_errors < 0 else run.max_errors,
        unique=unique,
        dry_run=dry_run,
        fp_base=run.fp_base,
        on_error=report,
        on_progress=lambda stats: progress.update(stats.written),
        on_duplicate=on_duplicate,
    )
    loader.stats.total = total
    try:
        loader.load(run.files, run.fmt, run.read)
    except KeyboardInterrupt:
        progress.close()
        typer.echo(_summary(loader.stats, "interrupted"), err=True)
        typer.echo(
            "to resume, run the same command again: documents already stored come back as unchanged, "
            "nothing is lost or stored twice",
            err=True,
        )
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except SimhashRedisError:
        progress.close()
        if not run.quiet:
            typer.echo(_summary(loader.stats, "stopped"), err=True)
            typer.echo("fix the problem, then run the same command again to resume", err=True)
        raise
    progress.close()
    if not run.quiet:
        typer.echo(_summary(loader.stats, verb), err=True)
    return loader.stats


def format_pair(pair: Pair, as_json: bool) -> str:
    """One near-duplicate pair as "new<TAB>existing<TAB>distance", or as a JSON object.

    Args:
        pair: the pair.
        as_json: give {"id", "duplicate_of", "distance"} JSON instead.
    """
    if as_json:
        return json.dumps(
            {"id": pair.new_id, "duplicate_of": pair.existing_id, "distance": pair.distance},
            ensure_ascii=False,
        )
    return f"{pair.new_id}\t{pair.existing_id}\t{pair.distance}"


def load(
    ctx: typer.Context,
    files: Files,
    fmt: FormatOpt = None,
    id_field: IdField = "id",
    text_field: TextField = "text",
    fingerprint_field: FpField = None,
    no_header: NoHeader = False,
    id_prefix: IdPrefix = None,
    fp_base: FpBaseOpt = FpBase.auto,
    workers: Workers = None,
    batch_size: BatchSize = 1000,
    max_errors: MaxErrors = 100,
    dedupe: Annotated[
        bool,
        typer.Option(
            "--dedupe",
            help="Store only documents with no near-duplicate in the index or earlier in the load.",
        ),
    ] = False,
    pairs: Annotated[
        Path | None,
        typer.Option(
            "--pairs",
            help="With --dedupe: write 'new<TAB>existing<TAB>distance' lines here (default: stdout).",
            show_default=False,
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    quiet: Quiet = False,
    progress_every: ProgressEvery = 10.0,
) -> None:
    """Bulk-import documents: JSON Lines, CSV, TSV, plain text, a directory, or precomputed fingerprints.

    Texts are fingerprinted on all cores and written in pipelined batches. Bad records are reported
    as FILE:LINE: reason and skipped. Loading is idempotent: after Ctrl-C, kill -9 or a Redis
    restart, run the same command again to complete it, with nothing lost or stored twice.

    \b
    Examples:
      simhash-redis --index news load articles.jsonl.gz
      simhash-redis load --format csv --id-field url --text-field body export.csv
      simhash-redis load --fingerprint-field fp other-system.tsv
      zcat dump.gz | simhash-redis load --format lines --id-prefix dump: -
    """
    if pairs is not None and not dedupe:
        raise fail("--pairs needs --dedupe", ExitCode.USAGE)
    if json_out and dedupe and (pairs is None or str(pairs) == "-"):
        raise fail("--json with --dedupe needs --pairs FILE (stdout carries the summary)", ExitCode.USAGE)
    run = LoadRun(
        files=files,
        fmt=fmt.value if fmt is not None else None,
        read=ReadOptions(
            id_field=id_field,
            text_field=text_field,
            fingerprint_field=fingerprint_field,
            header=not no_header,
            id_prefix=id_prefix,
        ),
        fp_base=fp_base.value,
        workers=workers,
        batch_size=batch_size,
        max_errors=max_errors,
        quiet=quiet,
        progress_every=progress_every,
    )
    if not dedupe:
        stats = run_load(ctx, run)
    elif pairs is None or str(pairs) == "-":
        stats = run_load(ctx, run, unique=True, on_duplicate=lambda p: typer.echo(format_pair(p, False)))
    else:
        with pairs.open("w", encoding="utf-8") as out:

            def write(pair: Pair) -> None:
                out.write(format_pair(pair, False) + "\n")

            stats = run_load(ctx, run, unique=True, on_duplicate=write)
    if json_out:
        echo_json(stats.as_dict())


def register(app: typer.Typer) -> None:
    """Add the load command to the app.

    Args:
        app: the Typer app.
    """
    app.command("load")(load)
