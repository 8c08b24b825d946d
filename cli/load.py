"""`load`: bulk import, and the reading, progress and summary machinery `dedupe` shares."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from simhash_redis import SimhashIndex
from simhash_redis.errors import IndexNotFound, InputError, InvalidArgument, SimhashRedisError
from simhash_redis.index.batches import DEFAULT_WINDOW
from simhash_redis.jobs.dedupe import Pair
from simhash_redis.jobs.loader import BULK_MIN, Bulk, Loader, LoadStats
from simhash_redis.jobs.readers import (
    STDIN,
    ReadOptions,
    Record,
    check_inputs,
    detect_format,
    estimate_total,
    precomputed,
    read_all,
)

from .common import ExitCode, echo_json, fail, plural, registrar, settings, tsv_row
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
from .progress import Progress

__all__ = ["LoadRun", "format_pair", "load", "register", "run_load"]


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
    bulk: Bulk = Bulk.AUTO
    window: int = DEFAULT_WINDOW

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> LoadRun:
        """The shared options of a command that declares them all (see `load`), from its parsed values.

        Args:
            params: the command's parameters by name (``ctx.params``).

        Raises:
            typer.Exit: --id-prefix for an input that is not plain text (usage).
        """

        def plain(value: Any) -> Any:
            return value.value if isinstance(value, enum.Enum) else value

        for path in params["files"] if params["id_prefix"] is not None else []:
            with contextlib.suppress(InvalidArgument):  # an unknown format: the load itself says so
                if (plain(params["fmt"]) or detect_format(path)) != "lines":
                    raise fail(
                        f"--id-prefix numbers the lines of plain text (--format lines), and {path!r} is "
                        "not plain text: its ids come from --id-field (--id-prefix-input starts them with "
                        "its name)",
                        ExitCode.USAGE,
                    )
        return cls(
            files=list(params["files"]),
            fmt=plain(params["fmt"]),
            read=ReadOptions(
                id_field=params["id_field"],
                text_field=params["text_field"],
                fingerprint_field=params["fingerprint_field"],
                header=not params["no_header"],
                id_prefix=params["id_prefix"],
                encoding=params["encoding"],
                prefix_input=params["id_prefix_input"],
            ),
            fp_base=plain(params["fp_base"]),
            workers=params["workers"],
            batch_size=params["batch_size"],
            max_errors=params["max_errors"],
            quiet=params["quiet"],
            progress_every=params["progress_every"],
            bulk={None: Bulk.AUTO, True: Bulk.ON, False: Bulk.OFF}[params.get("bulk")],
            window=params.get("window") or DEFAULT_WINDOW,
        )


#: Replacements in one run from which the run warns (with a tenth of its documents at least).
_MANY_REPLACED = 10
#: Exit status after SIGTERM, as a shell reports a process the signal ended.
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM (docker stop, systemd, Kubernetes), raised where Ctrl-C would be, to stop the same way."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (an embedding program): leave SIGTERM alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _summary(stats: LoadStats, verb: str) -> str:
    parts = [f"{stats.added:,} added", f"{stats.replaced:,} replaced", f"{stats.unchanged:,} unchanged"]
    if stats.duplicates:
        parts.append(plural(stats.duplicates, "duplicate"))
    parts.append(plural(stats.errors, "error"))
    return (
        f"{verb}: {plural(stats.written, 'document')} in {stats.elapsed:.2f} s ({stats.rate:,.0f} docs/s): "
        + ", ".join(parts)
    )


def _unfinished(stats: LoadStats) -> str:
    """What an interrupted or failed load left: the acknowledged count is exact, the rest may be stored."""
    if not stats.in_flight:
        return ""
    what = "the bulk window" if stats.bulk else "the batch"
    return (
        f"; {plural(stats.in_flight, 'more document')} ({what} in flight) "
        f"{'was' if stats.in_flight == 1 else 'were'} not acknowledged: some may be stored, none is "
        "half-visible"
    )


#: Bytes of text files from which `_warn_if_files_look_like_documents` no longer counts their documents:
#: posts and articles are far smaller, and a big input is not read twice.
_COUNTED_BYTES = 64 << 20


def _warn_if_files_look_like_documents(run: LoadRun) -> None:
    """Warn, before anything is written, when several text files were given line by line but look like
    one document each (a shell glob of posts: `load posts/*.txt` made 6,372 one-line documents of 147
    posts). The documents are counted as the load will read them: blank lines give none."""
    paths = [path for path in run.files if path != STDIN]
    if run.fmt is not None or len(paths) < 2 or any(detect_format(path) != "lines" for path in paths):
        return
    try:
        if sum(os.path.getsize(path) for path in paths) > _COUNTED_BYTES:
            return
    except OSError:
        return  # the load itself says what is wrong with the input
    documents = sum(isinstance(item, Record) for item in read_all(paths, "lines", run.read))
    if documents >= 3 * len(paths):
        typer.echo(
            f"warning: {len(paths):,} text files give {plural(documents, 'document')}, one per line. If each "
            "file is one document (a post, an article), run again with --format files (or load their "
            "folder).",
            err=True,
        )


def _open_for_load(ctx: typer.Context, run: LoadRun, dry_run: bool) -> tuple[SimhashIndex, bool]:
    """The index a load writes to, and whether this load created it: verified unless --plain, or the
    input's fingerprints are precomputed (a sketch needs the text)."""
    state = settings(ctx)
    if dry_run:
        return state.open_index(create=False), False
    try:
        return state.open_index(create=False), False
    except IndexNotFound:
        # Any input of precomputed fingerprints (a mix with texts too) makes a new index plain: a verified
        # one could store none of them, and one asked for is refused before it is made.
        fingerprints = precomputed(run.files, run.fmt, run.read)
        if fingerprints and state.asked_mode():
            asked = state.asked_by() or "--verified"
            raise fail(
                f"a verified index ({asked}) needs each document's text for its sketch, and these inputs "
                f"hold precomputed fingerprints: leave out {asked} to load them into a plain index",
                ExitCode.USAGE,
            ) from None
        return state.open_index(create=True, from_text=not fingerprints), True


def _drop_if_unused(index: SimhashIndex, created: bool, stats: LoadStats) -> None:
    """Drop the index this load created when nothing was stored in it (every record bad, a wrong
    column, an interruption before the first write), so that `indexes` does not list an empty index."""
    if not created or stats.written:
        return
    try:
        if index.count()[0] == 0:  # from the data: another writer may have stored documents meanwhile
            index.drop()
    except SimhashRedisError:
        pass  # the load's own error is the one to report


def run_load(
    ctx: typer.Context,
    run: LoadRun,
    *,
    unique: bool = False,
    dry_run: bool = False,
    on_duplicate: Callable[[Pair], None] | None = None,
    verb: str = "loaded",
    json_out: bool = False,
) -> LoadStats:
    """Read, fingerprint and write the inputs with progress, error reports and a summary on stderr.

    Args:
        ctx: the command's context (for the global settings).
        run: the shared options.
        unique: store only documents without a near-duplicate.
        dry_run: with unique, write nothing.
        on_duplicate: called with each near-duplicate pair.
        verb: the summary's first word.
        json_out: also print the summary as JSON on stdout, with "stopped": why the run stopped short
            (None when it did not), however it ends.

    Returns:
        The final stats.

    Raises:
        typer.Exit: 130 after Ctrl-C (143 after SIGTERM), with the summary so far and how to resume.
        SimhashRedisError: passed on (after the summary so far) for the app's handler to report.
    """
    check_inputs(run.files, run.fmt)  # before a new index is made: a missing input would leave it empty
    index, created = _open_for_load(ctx, run, dry_run)
    total = None if run.quiet else estimate_total(run.files, run.fmt, run.read)
    _warn_if_files_look_like_documents(run)
    progress = Progress(total, enabled=not run.quiet, interval=run.progress_every)
    hinted = False

    def report(error: InputError) -> None:
        nonlocal hinted
        progress.close()
        typer.echo(str(error), err=True)
        if not hinted and error.reason.startswith("not valid UTF-8"):
            hinted = True
            typer.echo(
                "hint: if the input is in another encoding, give it with --encoding (e.g. --encoding "
                "latin-1, --encoding cp1252)",
                err=True,
            )

    loader = Loader(
        index,
        workers=run.workers,
        batch_size=run.batch_size,
        max_errors=None if run.max_errors < 0 else run.max_errors,
        unique=unique,
        dry_run=dry_run,
        fp_base=run.fp_base,
        bulk=run.bulk,
        window=run.window,
        on_error=report,
        on_progress=lambda stats: progress.update(stats.written),
        on_duplicate=on_duplicate,
    )
    loader.stats.total = total

    def summarise(stopped: str | None) -> None:
        if json_out:
            echo_json({**loader.stats.as_dict(), "in_flight": loader.stats.in_flight, "stopped": stopped})

    try:
        with _sigterm_as_interrupt():
            loader.load(run.files, run.fmt, run.read)
    except KeyboardInterrupt as exc:
        progress.close()
        _drop_if_unused(index, created, loader.stats)
        terminated = isinstance(exc, Terminated)
        verb = "terminated" if terminated else "interrupted"
        typer.echo(_summary(loader.stats, verb) + _unfinished(loader.stats), err=True)
        summarise(verb)
        typer.echo(
            "to resume, run the same command again: documents already stored come back as unchanged, "
            "nothing is lost or stored twice",
            err=True,
        )
        raise typer.Exit(EXIT_TERMINATED if terminated else ExitCode.INTERRUPTED) from None
    except SimhashRedisError as exc:
        progress.close()
        _drop_if_unused(index, created, loader.stats)
        summarise(str(exc))
        stats = loader.stats
        # Before the first record (a wrong column, an unreadable header) there is nothing to resume.
        if not run.quiet and (stats.sent or stats.errors):
            typer.echo(_summary(stats, "stopped") + _unfinished(stats), err=True)
            typer.echo("fix the problem, then run the same command again to resume", err=True)
        raise
    progress.close()
    _drop_if_unused(index, created, loader.stats)
    if not run.quiet:
        typer.echo(_summary(loader.stats, verb), err=True)
    stats = loader.stats
    if stats.errors and not stats.read:
        nothing = (
            f"nothing loaded: every record was bad ({plural(stats.errors, 'error')}); fix the input or the "
            "options that read it (--format, --id-field, --text-field, --encoding)"
        )
        summarise(nothing)
        raise fail(nothing, ExitCode.INPUT)
    summarise(None)
    if stats.repeated:
        names = ", ".join(repr(doc_id) for doc_id in stats.repeated_ids)
        more = ", ..." if stats.repeated > len(stats.repeated_ids) else ""
        typer.echo(
            f"warning: {plural(stats.repeated, 'document')} of this run replaced what it had stored under "
            f"the same id ({names}{more}): inputs that name their documents alike overwrite each other. "
            "Run again with --id-prefix-input to start each id with its input's name (a.jsonl:ID).",
            err=True,
        )
    if stats.replaced >= _MANY_REPLACED and stats.replaced * 10 >= stats.written:
        # Replacing is right for an updated document, but this many usually means ids that repeat
        # from run to run (line numbers, a counter), and yesterday's documents are gone.
        typer.echo(
            f"warning: {stats.replaced:,} of {plural(stats.written, 'document')} replaced stored ones of the "
            "same id with another text. If this input's ids repeat across runs (line numbers, counters), "
            "give each run's documents their own ids (--id-field, or for plain text --id-prefix with a "
            "date).",
            err=True,
        )
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
    return tsv_row(pair.new_id, pair.existing_id, pair.distance)


def load(
    ctx: typer.Context,
    files: Files,
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
    bulk: Annotated[
        bool | None,
        typer.Option(
            "--bulk/--no-bulk",
            help="Write with grouped commands, a window of documents at a time (default: for loads from "
            f"files of {BULK_MIN:,} documents or more). --no-bulk when other workers may write the same "
            "ids during the load.",
            show_default=False,
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            min=1,
            help="Documents per bulk window: larger groups more entries per command; the client holds "
            "about 0.5 KB per document of a window. Bulk writes only (not --no-bulk or --dedupe).",
            show_default=f"{DEFAULT_WINDOW:,}",
        ),
    ] = None,
) -> None:
    """Bulk-import documents: JSON Lines, CSV, TSV, plain text, a directory, or precomputed fingerprints.

    Texts are fingerprinted on all cores. Large loads from files are written a window of documents at
    a time with one command per key (--bulk), others in pipelined atomic batches; either way a
    document becomes visible to near only once all of it is written. Bad records are reported as
    FILE:LINE: reason and skipped. Loading is idempotent: after Ctrl-C, SIGTERM, kill -9 or a Redis
    restart, run the same command again to complete it, with nothing lost or stored twice.

    \b
    Examples:
      simhash-redis --index news load articles.jsonl.gz
      simhash-redis load --format csv --id-field url --text-field body export.csv
      simhash-redis load --fingerprint-field fp other-system.tsv
      zcat dump.gz | simhash-redis load --format lines --id-prefix dump: -

    \f
    Args:
        ctx: the command's context (global settings).
        files: the inputs.
        fmt, id_field, text_field, fingerprint_field, no_header, id_prefix, id_prefix_input, encoding,
            fp_base, workers, batch_size, max_errors, quiet, progress_every: the options `dedupe` has
            too (see `LoadRun`).
        dedupe: store only documents without a near-duplicate.
        pairs: where --dedupe writes its pairs.
        json_out: print the summary as JSON.
        bulk: the write path: True grouped, False atomic batches, None by the input.
        window: documents per bulk window.

    Raises:
        typer.Exit: --pairs, --json, --bulk or --window given where they do not apply (usage), 130
            after Ctrl-C, 143 after SIGTERM.
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    if pairs is not None and not dedupe:
        raise fail("--pairs needs --dedupe", ExitCode.USAGE)
    if bulk and dedupe:
        raise fail(
            "--bulk cannot go with --dedupe: each document is checked against the index", ExitCode.USAGE
        )
    if window is not None and (bulk is False or dedupe):
        raise fail(
            f"--window sizes the bulk path's windows, which {'--no-bulk' if bulk is False else '--dedupe'} "
            "leaves out: its writes are batches of --batch-size documents, each atomic",
            ExitCode.USAGE,
        )
    if json_out and dedupe and (pairs is None or str(pairs) == "-"):
        raise fail("--json with --dedupe needs --pairs FILE (stdout carries the summary)", ExitCode.USAGE)
    run = LoadRun.from_params(ctx.params)
    if not dedupe:
        run_load(ctx, run, json_out=json_out)
    elif pairs is None or str(pairs) == "-":
        run_load(ctx, run, unique=True, on_duplicate=lambda p: typer.echo(format_pair(p, False)))
    else:
        with pairs.open("w", encoding="utf-8") as out:

            def write(pair: Pair) -> None:
                out.write(format_pair(pair, False) + "\n")

            run_load(ctx, run, unique=True, on_duplicate=write, json_out=json_out)


#: Adds this module's commands to the app.
register = registrar({"load": load})
