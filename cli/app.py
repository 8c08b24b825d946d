"""The Typer app: global options, command registration, and the one place errors become exit codes."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from simhash_redis import __version__, engine
from simhash_redis.defaults import URL_ENV
from simhash_redis.errors import (
    ConfigurationMismatch,
    InputError,
    InvalidArgument,
    InvalidType,
    RedisAuthError,
    RedisOutOfMemory,
    RedisPermissionError,
    RedisTimeout,
    RedisUnavailable,
    SimhashRedisError,
    TooManyErrors,
    detail,
)
from simhash_redis.links import doc_url
from simhash_redis.store import validate_name

from .common import ExitCode, Settings, fail
from .quick_exit import leave

__all__ = ["COMMAND_MODULES", "app", "main", "run"]

#: Command modules of this package, in help order; each defines ``register(app: typer.Typer)``, the one
#: way a command joins the app. Adding a command group is one more name here; ``demo``, the README's
#: main job, comes first.
COMMAND_MODULES = (
    "demo",
    "load",
    "dedupe",
    "query",
    "fingerprint",
    "admin",
    "verify",
    "server",
    "serve",
    "plan",
    "eval",
)

EPILOG = f"""\b
Exit codes:
  0    success
  1    error (see the message), e.g. an unknown index or an unreadable file
  2    usage error: a bad option or argument
  3    bad input: more bad records than --max-errors, or a malformed dump
  4    Redis unavailable: unreachable, wrong password, timeout, out of memory
  5    the index exists with another configuration (--k, --layout, --scheme, --f, or the mode:
       --verified or --plain)
  130  interrupted (Ctrl-C); rerun the same command to resume a load (an import with --merge)
  143  terminated (SIGTERM: docker stop, systemd); rerun the same command to resume
\b
Docs (this command; --verified, --plain and --k; --retention; --id-buckets and --band-buckets):
  {doc_url("cli.md")}
  {doc_url("choosing.md")}
  {doc_url("quality.md")}
  {doc_url("retention.md")}
  {doc_url("operations.md")}
\b
Example:
  simhash-redis --index news load articles.jsonl.gz
  simhash-redis --index news near "text of an article"
"""


#: The command line's advice for each `SimhashRedisError.remedy` whose library hint names the library's
#: arguments or methods: the one place where such a hint is said in the command's words. "{index}" is
#: the index's name.
_REMEDIES = {
    "merge": "give --merge to do that, or to resume an interrupted import of this dump; or import under "
    "another --index",
    "another-name": "import it under another --index",
    "restore-meta": "restore the meta with the options the index was created with (simhash-redis --index "
    "{index} --k K restore-meta, with --id-buckets and --band-buckets too where they were given; an "
    "export's header record names them), or drop the index (simhash-redis --index {index} drop)",
    "state-config": "give restore-meta the options the index was created with (--k, and --layout, --scheme, "
    "--f, --verified, --threshold, --retention, --id-buckets or --band-buckets where it was created with "
    "them; an export's header record names them)",
    "state-retention": "give restore-meta the --retention (and --sliding) the index was created with",
    "no-retention": "leave out --retention",
    "state-verified": "give restore-meta --verified, and the --threshold the index was created with",
}
#: The option that states each part of an index's configuration, by the library's argument (the
#: remedy "without-ARG" of a configuration that disagrees with the stored one).
_OPTIONS = {
    "k": "--k",
    "f": "--f",
    "layout": "--layout",
    "scheme": "--scheme",
    "verification": "--verified",
    "retention": "--retention",
    "id_buckets": "--id-buckets",
    "band_buckets": "--band-buckets",
}


def _hint(exc: SimhashRedisError, state: Settings | None, command: str | None) -> str | None:
    """The command line's words for the library hint of an error (None where it has none)."""
    remedy = exc.remedy or ""
    if remedy.startswith("without-") and remedy[len("without-") :] in _OPTIONS:
        argument = remedy[len("without-") :]
        option = _OPTIONS[argument]
        stated: dict[str, object] = (
            {}
            if state is None
            else {
                "k": state.k,
                "f": state.f,
                "layout": state.layout,
                "scheme": state.scheme,
                "verification": True if state.verified or state.threshold is not None else None,
                "retention": state.retention,
                "id_buckets": state.id_buckets,
                "band_buckets": state.band_buckets,
            }
        )
        if stated.get(argument) is None:
            # Stated by the command itself: import states the dump's configuration.
            return "import the dump under another --index" if command == "import" else "pass another --index"
        hint = (
            f"{option} states the index's own configuration, fixed when it is created: leave out {option} to "
            "use the stored one, or pass another --index"
        )
        if option == "--k" and command == "near" and state is not None and state.k is not None:
            # --k after the command is the global option too: the query's distance is near's own -k.
            hint += f". For the largest distance of this query, give near -k {state.k} (--distance {state.k})"
        return hint
    text = _REMEDIES.get(remedy)
    return None if text is None else text.format(index=state.index_name if state is not None else "NAME")


def _message(exc: SimhashRedisError, state: Settings | None, command: str | None) -> tuple[ExitCode, str]:
    """The exit code and the one-line message for a library error, in the command line's words."""
    hint = _hint(exc, state, command)
    text = str(exc) if hint is None else f"{exc.problem}: {hint}"
    where = state.shown_url() if state is not None else "Redis"
    if isinstance(exc, RedisPermissionError):
        return ExitCode.UNAVAILABLE, (
            f"Redis at {where} accepted the credentials, but its ACL user may not run every command the "
            f"index needs ({exc}): grant it ({doc_url('security.md')} lists the minimal ACL)"
        )
    if isinstance(exc, RedisAuthError):
        return ExitCode.UNAVAILABLE, (
            f"Redis at {where} refused the credentials ({detail(exc)}): check the user and password in "
            f"--redis-url or {URL_ENV}"
        )
    if isinstance(exc, RedisOutOfMemory):
        return ExitCode.UNAVAILABLE, (
            f"Redis at {where} is out of memory (maxmemory with noeviction): free memory or raise "
            "maxmemory, then run the same command again"
        )
    if isinstance(exc, RedisUnavailable):
        tls = ""
        if isinstance(exc, RedisTimeout) and where.startswith("rediss://"):
            # A TLS handshake sent to a port that does not speak TLS waits for an answer that never comes.
            tls = " (a rediss:// URL to a port without TLS times out like this: check scheme and port)"
        return ExitCode.UNAVAILABLE, (
            f"cannot reach Redis at {where} ({detail(exc)}){tls}: check --redis-url or {URL_ENV}, or leave "
            "both unset to use the embedded server (simhash-redis server start)"
        )
    if isinstance(exc, ConfigurationMismatch):
        return ExitCode.MISMATCH, text
    if isinstance(exc, (InputError, TooManyErrors)):
        return ExitCode.INPUT, text
    if isinstance(exc, (InvalidArgument, InvalidType)):
        return ExitCode.USAGE, text
    return ExitCode.ERROR, text


#: The global options that take a value, accepted after the command too (`load f.jsonl --index x`).
_GLOBAL_OPTIONS = frozenset(
    {
        "--redis-url",
        "--index",
        "--k",
        "--layout",
        "--scheme",
        "--f",
        "--threshold",
        "--retention",
        "--id-buckets",
        "--band-buckets",
    }
)
#: The global flags, likewise.
_GLOBAL_FLAGS = frozenset({"--verified", "--plain", "--sliding"})


def _hoisted(group: TyperGroup, args: list[str]) -> list[str]:
    """The arguments with global options given after the command moved before it, except where the
    command has an option of that name itself (`plan --k`, `eval --k`)."""
    at = 0
    while at < len(args):  # the command: the first argument that is not an option or a global's value
        if args[at] == "--" or not args[at].startswith("-"):
            break
        at += 2 if args[at] in _GLOBAL_OPTIONS else 1
    command = group.commands.get(args[at]) if at < len(args) else None
    if command is None:
        return args
    own = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    moved: list[str] = []
    kept: list[str] = []
    rest = args[at + 1 :]
    i = 0
    while i < len(rest):
        name = rest[i].split("=", 1)[0]
        if rest[i] == "--":
            kept += rest[i:]
            break
        if name in _GLOBAL_FLAGS and name not in own:
            moved.append(rest[i])
            i += 1
            continue
        if name in _GLOBAL_OPTIONS and name not in own and ("=" in rest[i] or i + 1 < len(rest)):
            width = 1 if "=" in rest[i] else 2
            moved += rest[i : i + width]
            i += width
            continue
        kept.append(rest[i])
        i += 1
    return [*args[:at], *moved, args[at], *kept]


class _Group(TyperGroup):
    """Turns every user-facing failure into one line on stderr and a documented exit code."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _hoisted(self, list(args)))

    def invoke(self, ctx: Any) -> Any:
        try:
            engine()  # SIMHASH_REDIS_ENGINE, checked before a command (and its worker processes) needs it
            return super().invoke(ctx)
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except typer.Abort as exc:
            # A prompt's Ctrl-C (or end of input): the prompt raised Abort in place of what it caught.
            typer.echo("")  # the prompt's line ends here
            if isinstance(exc.__context__, KeyboardInterrupt):
                typer.echo("interrupted", err=True)
                raise typer.Exit(ExitCode.INTERRUPTED) from None
            code, message = ExitCode.ERROR, "no answer (end of input): nothing was done"
        except SimhashRedisError as exc:
            code, message = _message(exc, ctx.find_object(Settings), ctx.invoked_subcommand)
        except BrokenPipeError:
            # stdout went away (| head): leave quietly, without a second error while flushing
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(ExitCode.ERROR) from None
        except OSError as exc:
            name = f" {exc.filename}" if getattr(exc, "filename", None) else ""
            code, message = ExitCode.ERROR, f"cannot read or write{name}: {exc.strerror or exc}"
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(code)


app = typer.Typer(
    cls=_Group,
    name="simhash-redis",
    help="Find near-duplicate documents at scale with SimHash fingerprints in a shared Redis index.",
    epilog=EPILOG,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"simhash-redis {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            envvar=URL_ENV,
            show_envvar=True,
            help="Redis URL (redis://[user:password@]host:port/db, rediss://, unix://). "
            "Default: the embedded server, started on first use.",
        ),
    ] = None,
    index: Annotated[
        str | None, typer.Option("--index", help="Index name (default: 'default').", show_default=False)
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(
            "--k",
            min=0,
            help="Largest Hamming distance, used when the index is created; an existing index must "
            "agree (default: the stored one, or 3 for a new index). In a --plain index, k = 3 finds "
            "copies and light edits but misses about 1 in 4 one-word edits of a 300-word article and "
            "most of a 60-word text; a verified index (the default) finds them at k = 3 (quality.md, "
            "under Docs below).",
            show_default=False,
        ),
    ] = None,
    layout: Annotated[
        str | None,
        typer.Option(
            "--layout",
            help="Table layout, used when the index is created; an existing index must agree: "
            "'pigeonhole' (k+1 tables, the default) or 'permuted-B' (B blocks), as `plan` names them.",
            show_default=False,
        ),
    ] = None,
    scheme: Annotated[
        str | None,
        typer.Option(
            "--scheme",
            help="Fingerprint features, used when the index is created; an existing index must agree: "
            "'shingles-N/W', 'words/W' or 'chars-N/W' (W: tf or binary), as `eval` names its settings "
            "(default: shingles-3/tf).",
            show_default=False,
        ),
    ] = None,
    f: Annotated[
        int | None,
        typer.Option(
            "--f",
            help="Fingerprint width in bits (32, 64 or 128), used when the index is created; an existing "
            "index must agree (default: 64).",
            show_default=False,
        ),
    ] = None,
    verified: Annotated[
        bool,
        typer.Option(
            "--verified",
            help="Verified mode, the default for a new index made from texts (load, add, dedupe); an "
            "existing index must agree. Each document also stores a sketch and joins LSH band tables "
            "of it; a candidate (within k, or sharing a band) counts as a near-duplicate only when its "
            "estimated Jaccard similarity reaches --threshold. Measured: F1 0.983 at Jaccard >= 0.8 on "
            "the evaluation corpus (plain: 0.764 at its best k); finds every one-word edit of a "
            "250-400 word article (plain k = 3: 0.754 of them); 482 bytes of Redis per document at "
            "10^6 documents, 447 at 10^7 with sized buckets (plain: about 130); loads at about 0.6 of "
            "plain's rate (choosing.md, quality.md).",
        ),
    ] = False,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="A plain index, used when the index is created; an existing index must agree: SimHash "
            "fingerprints within distance k, no sketches (about 130 bytes per document, the fastest "
            "loads), but it misses edits that move a fingerprint beyond k (see --verified). An index "
            "loaded from precomputed fingerprints (--fingerprint-field, a fingerprints file) is plain.",
        ),
    ] = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            help="Verified mode's Jaccard threshold in (0, 1], used when the index is created (implies "
            "--verified; default 0.8); an existing index must agree.",
            show_default=False,
        ),
    ] = None,
    retention: Annotated[
        str | None,
        typer.Option(
            "--retention",
            help="Forget each document this long after it was last written (90s, 30m, 12h, 7d, 2w: the "
            "unit is required), "
            "used when the index is created, verified or plain; an existing index must agree. "
            "Redis frees the memory by "
            "itself: a document is found for the retention and gone within a sixth of it more "
            "(retention.md, under Docs below).",
            show_default=False,
        ),
    ] = None,
    sliding: Annotated[
        bool,
        typer.Option(
            "--sliding",
            help="With --retention: a stored document found again as a near-duplicate (add-if-new, "
            "dedupe, unique loads) is kept another retention from then.",
        ),
    ] = False,
    id_buckets: Annotated[
        int | None,
        typer.Option(
            "--id-buckets",
            min=1,
            max=1 << 30,
            help="Buckets of the id and fingerprint maps, used when the index is created; an existing "
            "index must agree (default 131,072; sizes for more documents: operations.md, under Docs "
            "below).",
            show_default=False,
        ),
    ] = None,
    band_buckets: Annotated[
        int | None,
        typer.Option(
            "--band-buckets",
            min=1,
            max=1 << 24,
            help="With --verified: the hashes each band table is spread over, used when the index is "
            "created; an existing index must agree (default 16,384: about N / 100 for N documents, "
            "operations.md under Docs below).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Find near-duplicate documents with SimHash fingerprints in a shared Redis index."""
    if index is not None:
        # Checked here, not when the index is opened: an empty --index (a script's unset variable)
        # would otherwise fall back to the default index, or to a dump's own name, even for drop.
        try:
            validate_name(index, "--index")
        except InvalidArgument as exc:
            raise fail(str(exc), ExitCode.USAGE) from None
    if redis_url == "":  # a script's unset variable: not the embedded server, silently
        raise fail(
            "--redis-url is empty: give a URL, or leave the option out for the embedded server",
            ExitCode.USAGE,
        )
    if plain:
        stated = [
            option
            for option, given in (
                ("--verified", verified),
                ("--threshold", threshold is not None),
                ("--band-buckets", band_buckets is not None),
            )
            if given
        ]
        if stated:
            raise fail(f"--plain cannot go with {', '.join(stated)}: choose one mode", ExitCode.USAGE)
    ctx.obj = Settings(
        redis_url=redis_url,
        index=index,
        k=k,
        layout=layout,
        scheme=scheme,
        f=f,
        verified=verified,
        plain=plain,
        threshold=threshold,
        retention=retention,
        sliding=sliding,
        id_buckets=id_buckets,
        band_buckets=band_buckets,
    )


for _name in COMMAND_MODULES:
    importlib.import_module(f"{__package__}.{_name}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Run the command line.

    Args:
        argv: the arguments; default sys.argv[1:].
    """
    app(args=argv, prog_name="simhash-redis")


def run() -> None:
    """The ``simhash-redis`` console script: `main`, then a quick exit (`quick_exit.leave`)."""
    try:
        main()
    except SystemExit as done:
        leave(done.code)
        raise
