"""`stats`, `export`, `import` and `drop`: whole-index operations."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Annotated, cast

import typer

from simhash_redis import Retention, SimhashIndex, drop_index
from simhash_redis.errors import IndexCorrupted, SimhashRedisError
from simhash_redis.index import list_indexes
from simhash_redis.jobs.dump import export_index, import_index
from simhash_redis.jobs.records import open_input
from simhash_redis.jobs.stats import IndexStats, collect
from simhash_redis.store import IndexConfig, Verification

from .common import ExitCode, Settings, echo_json, fail, plural, registrar, settings, stdin_is_terminal
from .options import JsonOut, Quiet
from .progress import Progress

__all__ = ["drop", "export", "import_", "indexes", "register", "restore_meta", "stats"]


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _print_stats(s: IndexStats) -> None:
    typer.echo(f"index          {s.name}")
    typer.echo(f"documents      {s.documents:,}")
    typer.echo(f"fingerprints   {s.fingerprints:,}")
    typer.echo(f"configuration  f={s.config.get('f')} k={s.config.get('k')} layout={s.config.get('layout')}")
    typer.echo(f"scheme         {s.config.get('scheme')}")
    verified = s.config.get("verified")
    typer.echo(f"verified       {'no' if verified is None else Verification.from_meta(verified).describe()}")
    if s.config.get("retention"):
        typer.echo(f"retention      {Retention.from_meta(s.config['retention']).describe()}")
    for period in s.periods:
        typer.echo(
            f"period         from {period.start}: {plural(period.documents, 'document')}, "
            f"{plural(period.fingerprints, 'fingerprint')}, expiring at {period.expires}"
        )
    how = (
        "exact" if s.memory.exact else f"estimated from {s.memory.sampled_keys:,} sampled keys (MEMORY USAGE)"
    )
    typer.echo(f"memory         {_mib(s.memory.bytes)} in {plural(s.memory.total_keys, 'key')}, {how}")
    if s.server_used_memory is not None:
        typer.echo(f"server memory  {_mib(s.server_used_memory)} used by the whole server")
    typer.echo(
        f"id map         {plural(s.id_map_keys, 'hash', 'hashes')}; fingerprint map "
        f"{plural(s.fp_map_keys, 'hash', 'hashes')}"
    )
    for t in s.tables:
        typer.echo(f"table {t.table:<8} {plural(t.keys, 'bucket')}, largest {t.largest:,}, mean {t.mean:g}")
    if s.bucket_sizes:
        typer.echo("bucket sizes   " + ", ".join(f"{rng}: {n:,}" for rng, n in s.bucket_sizes.items()))
    if s.largest:
        typer.echo("largest buckets (each lookup reads one bucket per table: big ones make lookups slow)")
        for b in s.largest:
            typer.echo(f"  t{b.table}:{b.key}  {b.size:,}")


def stats(
    ctx: typer.Context,
    json_out: JsonOut = False,
    sample: Annotated[
        int, typer.Option("--sample", min=1, help="Keys of each kind measured for memory.")
    ] = 2000,
    top: Annotated[int, typer.Option("--top", min=0, help="How many of the largest buckets to list.")] = 10,
) -> None:
    """Print documents, fingerprints, keys per table, bucket sizes, the largest buckets, memory and config.

    \b
    Example:
      simhash-redis --index news stats --json

    \f
    Args:
        ctx: the command's context (global settings).
        json_out: print JSON.
        sample: keys of each kind measured for memory.
        top: how many of the largest buckets to list.

    Raises:
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    result = collect(settings(ctx).open_index(create=False), sample=sample, top=top)
    if json_out:
        echo_json(result.as_dict())
    else:
        _print_stats(result)


def export(
    ctx: typer.Context,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.", show_default=False)
    ] = None,
    quiet: Quiet = False,
) -> None:
    """Write the whole index (configuration, then every id and fingerprint) as a msgpack stream.

    \b
    Examples:
      simhash-redis --index news export -o news.dump
      simhash-redis --index news export | simhash-redis --redis-url redis://other:6379 import

    \f
    Args:
        ctx: the command's context (global settings).
        output: the dump file; default stdout.
        quiet: no progress or summary.

    Raises:
        typer.Exit: stdout is a terminal (usage).
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    to_stdout = output is None or str(output) == "-"
    if to_stdout and sys.stdout.isatty():
        raise fail(
            "refusing to write a binary dump to a terminal: pass -o FILE or redirect stdout", ExitCode.USAGE
        )
    index = settings(ctx).open_index(create=False)
    progress = Progress(index.count()[0], enabled=not quiet, unit="records")
    skipped: list[str] = []
    out: IO[bytes]
    if to_stdout:
        out = typer.get_binary_stream("stdout")
        count = export_index(index, out, on_progress=progress.update, on_skipped=skipped.append)
    else:
        assert output is not None
        with output.open("wb") as out:
            count = export_index(index, out, on_progress=progress.update, on_skipped=skipped.append)
    progress.close()
    if skipped:  # said even with --quiet: the dump lacks documents of the index
        typer.echo(
            f"warning: left out {plural(len(skipped), 'document')} without a sketch (first: {skipped[0]!r}), "
            "which an import would refuse and near never finds: add them again with their texts (verify "
            "counts them)",
            err=True,
        )
    if not quiet:
        typer.echo(f"exported {plural(count, 'record')} of index {index.name!r}", err=True)


def import_(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="A dump written by export (- for stdin).")] = "-",
    json_out: JsonOut = False,
    quiet: Quiet = False,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Import into an index that already holds documents: to merge, or to resume an "
            "interrupted import of the same dump.",
        ),
    ] = False,
) -> None:
    """Recreate an index from an export stream, under --index or else the dump's own name.

    An index that already holds documents is refused unless --merge (exit code 2), one with another
    configuration always (exit code 5), and so is a configuration option (--k, --f, --scheme, --plain,
    ...) that differs from the dump's: the index takes the dump's configuration. The dump is read whole
    first (gunzipped if it is gzip data): a truncated one, or one whose checksum differs from its content
    (a byte altered), exits with code 3 with nothing written. With --merge, importing the same dump
    again, or after an interruption, is safe and stores nothing twice.

    \b
    Examples:
      simhash-redis import news.dump
      simhash-redis --index news-copy import news.dump

    \f
    Args:
        ctx: the command's context (global settings).
        file: the dump, or - for stdin.
        json_out: print the result as JSON.
        quiet: no progress or summary.
        merge: import into an index that already holds documents.

    Raises:
        typer.Exit: no file given while stdin is a terminal (usage).
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    if file == "-" and stdin_is_terminal():  # a dump is binary: nobody types one
        raise fail(
            "give the dump's file, or pipe it into stdin (... export | simhash-redis import)", ExitCode.USAGE
        )
    state = settings(ctx)
    client = state.client()
    progress = Progress(None, enabled=not quiet, unit="records")
    source_name = "<stdin>" if file == "-" else file
    accept = _dump_agrees(state, source_name)
    with open_input(file) as stream:  # gunzipped if it is gzip data
        result = import_index(
            client,
            stream,
            name=state.index,
            source_name=source_name,
            on_progress=progress.update,
            merge=merge,
            accept=accept,
        )
    progress.close()
    if json_out:
        echo_json(vars(result))
    elif not quiet:
        typer.echo(
            f"imported {plural(result.records, 'record')} into index {result.name!r}: "
            f"{result.added:,} added, {result.replaced:,} replaced, {result.unchanged:,} unchanged",
            err=True,
        )


def _dump_agrees(state: Settings, source: str) -> Callable[[IndexConfig], None]:
    """What refuses a dump whose configuration differs from one the options state (exit code 5): the
    index an import creates takes the dump's, so an option that says otherwise would be ignored."""

    def refuse(dumped: str, option: str) -> typer.Exit:
        return fail(
            f"{source} is a dump of {dumped}, not {option}: the index an import creates takes the dump's "
            "configuration (its header record names it); leave out the option, or load the documents again "
            "to index them otherwise",
            ExitCode.MISMATCH,
        )

    def check(dumped: IndexConfig) -> None:
        mode = dumped.verification
        asked = state.asked_mode()
        if asked is not None and asked != (mode is not None):
            raise refuse(
                "a verified index" if mode is not None else "a plain index",
                (state.asked_by() or "--verified") if asked else "--plain",
            )
        stated = state.configuration(dumped.f)  # labels read at the dump's width, as for its index
        sliding = " --sliding" if state.sliding else ""
        for option, words, value, theirs, shown in (
            ("--k", state.k, state.k, dumped.k, f"k={dumped.k}"),
            ("--f", state.f, state.f, dumped.f, f"f={dumped.f}"),
            ("--layout", state.layout, stated["layout"], dumped.layout, f"layout={dumped.layout.to_meta()}"),
            ("--scheme", state.scheme, stated["scheme"], dumped.scheme, f"scheme={dumped.scheme.to_meta()}"),
            (
                "--id-buckets",
                state.id_buckets,
                state.id_buckets,
                dumped.id_buckets,
                f"{dumped.id_buckets:,} id buckets",
            ),
            (
                "--retention",
                None if state.retention is None else state.retention + sliding,
                stated["retention"],
                dumped.retention,
                "no retention" if dumped.retention is None else f"retention {dumped.retention.describe()}",
            ),
            (
                "--threshold",
                state.threshold,
                state.threshold,
                getattr(mode, "threshold", None),
                f"threshold {getattr(mode, 'threshold', None)}",
            ),
            (
                "--band-buckets",
                state.band_buckets,
                state.band_buckets,
                getattr(mode, "band_buckets", None),
                f"{getattr(mode, 'band_buckets', 0):,} band buckets",
            ),
        ):
            if words is not None and value != theirs:
                raise refuse(f"an index with {shown}", f"{option} {words}")

    return check


def drop(
    ctx: typer.Context,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete an index: every key of it, and nothing else. Asks first unless --yes.

    Without --yes and with no terminal on stdin it refuses (exit code 2) rather than guess.

    \b
    Example:
      simhash-redis --index scratch drop --yes

    \f
    Args:
        ctx: the command's context (global settings).
        yes: do not ask for confirmation.

    Raises:
        typer.Exit: no --yes without a terminal (usage), or the answer was no.
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    state = settings(ctx)
    try:
        index = state.open_index(create=False)
    except IndexCorrupted:  # its meta is lost or unreadable: delete its keys by name
        _confirm(
            yes,
            f"delete every key of index {state.index_name!r} (meta unreadable) at {state.shown_url()}?",
        )
        deleted = drop_index(state.client(), state.index_name)
        typer.echo(
            f"dropped index {state.index_name!r} (its meta was lost or unreadable): {plural(deleted, 'key')}"
        )
        return
    docs = index.count()[0]
    _confirm(yes, f"delete index {index.name!r} ({plural(docs, 'document')}) at {state.shown_url()}?")
    deleted = index.drop()
    typer.echo(f"dropped index {index.name!r}: {plural(docs, 'document')}, {plural(deleted, 'key')}")


def _confirm(yes: bool, question: str) -> None:
    if yes:
        return
    if not stdin_is_terminal():
        raise fail("drop needs --yes when stdin is not a terminal (nothing was deleted)", ExitCode.USAGE)
    if not typer.confirm(question):
        raise fail("nothing was deleted")


def indexes(ctx: typer.Context, json_out: JsonOut = False) -> None:
    """List the indexes on the server: name, documents, k, f, "verified" and the retention window.

    \b
    Example:
      simhash-redis indexes --json

    \f
    Args:
        ctx: the command's context (global settings).
        json_out: print JSON lines.

    Raises:
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    state = settings(ctx)
    client = state.client()
    for name in list_indexes(client):
        try:
            index = SimhashIndex(client, name, create=False)
        except SimhashRedisError as exc:  # one unreadable meta does not hide the others
            row: dict[str, object] = {"name": name, "error": str(exc)}
        else:
            verified, retention = index.config.verification is not None, index.config.retention
            row = {"name": name, "documents": index.count()[0], "k": index.k, "f": index.f}
            row["verified"] = verified
            row["retention"] = retention.to_meta() if retention else None
        if json_out:
            echo_json(row)
        elif "error" in row:
            typer.echo(f"{name}\t(unreadable: {row['error']})")
        else:
            mode = " verified" if row["verified"] else ""
            mode += f" retention {retention.describe()}" if retention else ""
            documents = plural(cast(int, row["documents"]), "document")
            typer.echo(f"{name}\t{documents}\tk={row['k']} f={row['f']}{mode}")


def restore_meta(ctx: typer.Context) -> None:
    """Write back the lost meta key of an index whose data is still there, from --k (and defaults).

    Give every option the index was created with (--layout, --scheme, --f, --verified, --threshold,
    --retention and --sliding, --id-buckets, --band-buckets).

    The configuration must be the one the index was created with (an export's header record names it):
    a sample of the stored documents is checked against it first, and a mismatch is refused.

    \b
    Example:
      simhash-redis --index news --k 5 restore-meta

    \f
    Args:
        ctx: the command's context (global settings).

    Raises:
        typer.Exit: --k is missing (usage).
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    state = settings(ctx)
    if state.k is None:
        raise fail("restore-meta needs --k, the k the index was created with", ExitCode.USAGE)
    config = {**state.configuration(), "verification": state.verification()}
    index = SimhashIndex.restore(state.client(), state.index_name, **config)
    typer.echo(f"index {index.name!r}: meta restored (f={index.f} k={index.k}); run verify to check the rest")


#: Adds this module's commands to the app.
register = registrar(
    {
        "stats": stats,
        "indexes": indexes,
        "export": export,
        "import": import_,
        "drop": drop,
        "restore-meta": restore_meta,
    }
)
