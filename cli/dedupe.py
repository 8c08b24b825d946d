"""`dedupe`: the news job, streaming documents against the index and each other."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from simhash_redis.errors import IndexNotFound
from simhash_redis.jobs.arrow_output import TableOutput
from simhash_redis.jobs.dedupe import Pair, groups

from .common import ExitCode, echo_json, fail, registrar, settings, tsv_row
from .load import LoadRun, format_pair, run_load
from .options import (
    BatchSize,
    Encoding,
    Files,
    FormatOpt,
    FpBase,
    FpBaseOpt,
    FpField,
    IdField,
    IdPrefix,
    IdPrefixInput,
    MaxErrors,
    NoHeader,
    ProgressEvery,
    Quiet,
    TextField,
    Workers,
)

__all__ = ["dedupe", "register"]


class Rows(str, enum.Enum):
    """Which rows --output holds."""

    kept = "kept"
    dropped = "dropped"
    all = "all"


def dedupe(
    ctx: typer.Context,
    files: Files,
    show_groups: Annotated[
        bool,
        typer.Option("--groups", help="Print groups of near-duplicates (largest first) instead of pairs."),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Write nothing: check against the index and this run's documents only."
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the input rows --rows names to this Parquet (.parquet) or Arrow (.arrow) file, "
            "every column kept; pairs are then not printed. Inputs must be Parquet or Arrow.",
            show_default=False,
        ),
    ] = None,
    rows: Annotated[
        Rows,
        typer.Option(
            "--rows",
            help="With --output: the rows kept (new, or stored before under their id), the rows dropped "
            "as near-duplicates, or all rows with status, duplicate_of, distance (and jaccard, verified).",
        ),
    ] = Rows.kept,
    fmt: FormatOpt = None,
    id_field: IdField = "id",
    text_field: TextField = "text",
    fingerprint_field: FpField = None,
    no_header: NoHeader = False,
    id_prefix: IdPrefix = None,
    id_prefix_input: IdPrefixInput = False,
    encoding: Encoding = "utf-8",
    fp_base: FpBaseOpt = FpBase.auto,
    workers: Workers = None,
    batch_size: BatchSize = 1000,
    max_errors: MaxErrors = 100,
    quiet: Quiet = False,
    progress_every: ProgressEvery = 10.0,
) -> None:
    """Find near-duplicates of new documents in the index and among themselves, and store the new ones.

    Each document is checked against the index and the documents before it: a near-duplicate is
    printed as a pair 'new<TAB>existing<TAB>distance' and not stored; every other document is stored,
    so tomorrow's run finds today's stories (use --dry-run to store nothing). --groups prints
    connected components instead: 'SIZE<TAB>FIRST<TAB>COPY,COPY,...', where FIRST is the stored one.
    Running it again on the same input stores nothing new.

    \b
    Examples:
      simhash-redis --index news dedupe today.jsonl
      simhash-redis --index news dedupe --groups --json today.jsonl > stories.jsonl
      simhash-redis --index news dedupe --dry-run candidates.csv
      simhash-redis --index crawl dedupe new-snapshot/ --output kept.parquet

    \f
    Args:
        ctx: the command's context (global settings).
        files: the inputs.
        show_groups: print groups instead of pairs.
        dry_run: write nothing.
        json_out: print JSON lines.
        output: write the input's rows there (Parquet or Arrow inputs).
        rows: which rows --output holds.
        fmt, id_field, text_field, fingerprint_field, no_header, id_prefix, id_prefix_input, encoding,
            fp_base, workers, batch_size, max_errors, quiet, progress_every: the options `load` has
            too (see `LoadRun`).

    Raises:
        typer.Exit: --rows without --output (usage), 130 after Ctrl-C.
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    if output is None and rows is not Rows.kept:
        raise fail(
            f"--rows {rows.value} chooses the rows --output writes: give --output FILE too", ExitCode.USAGE
        )
    run = LoadRun.from_params(ctx.params)
    found: list[Pair] = []
    table = None if output is None else TableOutput(str(output), rows.value)
    if table is not None:
        table.check(run.files, run.fmt)  # before anything is written to the index

    def emit(pair: Pair) -> None:
        if table is not None:
            table.add(pair)
        if show_groups:
            found.append(pair)
        elif table is None:
            typer.echo(format_pair(pair, json_out))

    run_load(ctx, run, unique=True, dry_run=dry_run, on_duplicate=emit, verb="checked")
    if table is not None:
        written = table.write(run.files, run.fmt, run.read, jaccard=rows is Rows.all and _verified(ctx))
        if not quiet:
            typer.echo(f"wrote {written:,} rows ({rows.value}) to {output}", err=True)
    for group in groups(found):
        if json_out:
            echo_json({"id": group.id, "size": group.size, "copies": list(group.copies)})
        else:
            typer.echo(tsv_row(group.size, group.id, list(group.copies)))


def _verified(ctx: typer.Context) -> bool:
    """Whether the index is verified (its pairs carry a Jaccard similarity)."""
    try:
        return settings(ctx).open_index(create=False).config.verification is not None
    except IndexNotFound:  # a dry run against no index
        return False


#: Adds this module's commands to the app.
register = registrar({"dedupe": dedupe})
