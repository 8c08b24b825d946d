"""What every command shares: exit codes, the global settings, opening the index, and output helpers."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from simhash_redis import SimhashIndex, VerifiedIndex, redact_url
from simhash_redis.defaults import URL_ENV
from simhash_redis.errors import ConfigurationMismatch, IndexNotFound
from simhash_redis.index.mode import Asking, chosen_mode
from simhash_redis.index.verified_index import checked_threshold
from simhash_redis.store import Verification, validate_name
from simhash_redis.tools.connect import index_options
from simhash_redis.transport import client_from_url

if TYPE_CHECKING:
    import redis
    from redis.cluster import RedisCluster

__all__ = [
    "DEFAULT_INDEX",
    "ExitCode",
    "Settings",
    "echo_json",
    "fail",
    "plural",
    "registrar",
    "settings",
    "stdin_is_terminal",
    "tsv_row",
]

#: The index used when --index is not given.
DEFAULT_INDEX = "default"
#: The command line's words for each mode, in the messages that tell the user to ask for one.
CLI_ASKING = Asking(
    plain="--plain", verified="--verified", threshold="--threshold", band_buckets="--band-buckets"
)


class ExitCode(enum.IntEnum):
    """The exit codes of every command (also listed in the help epilog and docs/cli.md)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    INPUT = 3
    UNAVAILABLE = 4
    MISMATCH = 5
    INTERRUPTED = 130


@dataclass
class Settings:
    """The global options, resolved lazily so commands that need no Redis never touch it.

    Attributes:
        redis_url: --redis-url or SIMHASH_REDIS_URL; None means the embedded default server.
        index: --index, or None for the default (or, for import, the dump's name).
        k: --k, used when an index is created (and checked against an existing one).
        layout: --layout, likewise: a layout label as `plan` prints them.
        scheme: --scheme, likewise: a setting label as `eval` prints them.
        f: --f, likewise: the fingerprint width.
        verified: --verified, likewise: verified mode (MinHash-confirmed near-duplicates), the default
            for a new index made from texts.
        plain: --plain, likewise: a plain index (SimHash distance only).
        threshold: --threshold, likewise: verified mode's Jaccard threshold (implies --verified).
        retention: --retention, likewise: the retention window ("7d", "12h", ...).
        sliding: --sliding, likewise: the retention window slides when a document is found again.
        id_buckets: --id-buckets, likewise: the buckets of the id and fingerprint maps.
        band_buckets: --band-buckets, likewise: the hashes each band table of a verified index is
            spread over.
    """

    # URLs carry passwords: keep them out of the repr (tracebacks, debuggers, logs).
    redis_url: str | None = field(default=None, repr=False)
    index: str | None = None
    k: int | None = None
    layout: str | None = None
    scheme: str | None = None
    f: int | None = None
    verified: bool = False
    plain: bool = False
    threshold: float | None = None
    retention: str | None = None
    sliding: bool = False
    id_buckets: int | None = None
    band_buckets: int | None = None
    _resolved: str | None = field(default=None, repr=False)

    @property
    def index_name(self) -> str:
        """The index name to use."""
        return DEFAULT_INDEX if self.index is None else self.index

    def url(self) -> str:
        """The Redis URL: --redis-url, else SIMHASH_REDIS_URL, else the embedded server (started now).

        Raises:
            RedisUnavailable: the embedded server cannot be started.
        """
        if self._resolved is None:
            if self.redis_url:
                self._resolved = self.redis_url
            else:
                from simhash_redis.tools.server import EmbeddedServer

                self._resolved = EmbeddedServer().start()
        return self._resolved

    def shown_url(self) -> str:
        """The URL for messages, without its password ("the embedded server" before it is known)."""
        if self._resolved is None and not self.redis_url:
            return "the embedded server"
        return redact_url(self._resolved or self.redis_url or "")

    def open_index(self, *, create: bool, name: str | None = None, from_text: bool = True) -> SimhashIndex:
        """Open the index, creating it (with --k) only when create is true: verified unless --plain, or
        made from precomputed fingerprints (`chosen_mode`).

        Args:
            create: whether a missing index may be created; else IndexNotFound is raised.
            name: another index name than --index.
            from_text: whether a new index is made from texts (not from precomputed fingerprints).

        Raises:
            IndexNotFound: the index does not exist and create is false.
            ConfigurationMismatch: --k, --layout, --scheme, --f, --verified, --plain, --threshold,
                --retention, --id-buckets or --band-buckets disagrees with the stored index.
            InvalidArgument: --layout or --scheme names nothing, --f is not a supported width,
                or --threshold is out of (0, 1].
            RedisUnavailable: the server cannot be reached.
        """
        index_name = validate_name(self.index_name if name is None else name, "--index")
        client = client_from_url(self.url())
        width = None
        if self.f is None and (self.layout is not None or self.scheme is not None):
            # A label names a setting of one width: read it at an existing index's, not at 64 bits.
            with contextlib.suppress(IndexNotFound):
                width = SimhashIndex(client, index_name, create=False).f
        config = self.configuration(width)
        try:
            index = SimhashIndex(client, index_name, create=False, **config)
        except IndexNotFound:
            if not create:
                client.close()
                raise IndexNotFound(
                    f"no index named {index_name!r} at {self.shown_url()}: check --index, or load documents "
                    "first (simhash-redis --index NAME load FILE)"
                ) from None
            verified = chosen_mode(self.asked_mode(), name=index_name, from_text=from_text, asking=CLI_ASKING)
            try:
                index = SimhashIndex(client, index_name, verification=self.verification(verified), **config)
            except ConfigurationMismatch:
                # Another process created it between the look and the create, maybe in the other mode:
                # opened as it was made, its stored mode decides (adopted unless the options ask another).
                index = SimhashIndex(client, index_name, create=False, **config)
        self._check_verified(index)
        return index

    def configuration(self, width: int | None = None) -> dict[str, Any]:
        """The index configuration the options state (`connect.index_options`).

        Args:
            width: the fingerprint width --layout and --scheme are read at without --f; default 64.

        Raises:
            InvalidArgument: as `connect.index_options`.
        """
        return index_options(self, width)

    def asked_mode(self) -> bool | None:
        """The mode the options ask for: True (--verified, --threshold or --band-buckets), False
        (--plain), None (none: the default, `chosen_mode`)."""
        if self.plain:
            return False
        if self.verified or self.threshold is not None or self.band_buckets is not None:
            return True
        return None

    def asked_by(self) -> str | None:
        """What asked for verified mode, named in a refusal ("--threshold and --band-buckets"); None if
        nothing did."""
        return CLI_ASKING.asked_by(self.verified, threshold=self.threshold, band_buckets=self.band_buckets)

    def verification(self, verified: bool | None = None) -> Verification | None:
        """The verified mode of a new index, as --threshold and --band-buckets state it (None: plain).

        Args:
            verified: whether the index is verified; default: whether the options ask for it.
        """
        if not (self.asked_mode() if verified is None else verified):
            return None
        threshold = checked_threshold(None, self.threshold, self.band_buckets)
        return Verification.of(None, threshold, band_buckets=self.band_buckets)

    def _check_verified(self, index: SimhashIndex) -> None:
        """Refuse --verified for a plain index and --plain for a verified one (`chosen_mode`), and a
        --threshold or --band-buckets other than a verified index's."""
        stored = index.config.verification
        chosen_mode(
            self.asked_mode(),
            name=index.name,
            stored=stored is not None,
            asking=CLI_ASKING,
            asked_by=self.asked_by(),
        )
        if stored is not None and self.band_buckets is not None and self.band_buckets != stored.band_buckets:
            raise ConfigurationMismatch(
                f"index {index.name!r} was created with --band-buckets {stored.band_buckets}, not "
                f"{self.band_buckets}; open it without --band-buckets to use its own"
            )
        if stored is not None and self.threshold is not None and self.threshold != stored.threshold:
            raise ConfigurationMismatch(
                f"index {index.name!r} is verified with threshold {stored.threshold:g}, not "
                f"{self.threshold:g}; open it without --threshold to use its own"
            )

    @staticmethod
    def verified_of(index: SimhashIndex) -> VerifiedIndex | None:
        """The verified form of an index that is verified (its writes and near need it), else None.

        Args:
            index: an index opened by `open_index`.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        return None if index.config.verification is None else VerifiedIndex(index)

    def client(self) -> redis.Redis | RedisCluster:
        """A client of the server at `url` (for the commands that work on a server, not one index).

        Raises:
            InvalidArgument: the URL is malformed.
            RedisUnavailable: the embedded server cannot be started, or a cluster cannot be reached.
        """
        return client_from_url(self.url())


def settings(ctx: typer.Context) -> Settings:
    """The global settings stored by the app's callback.

    Args:
        ctx: the command's context.
    """
    found = ctx.find_object(Settings)
    return found if found is not None else Settings(redis_url=os.environ.get(URL_ENV))


def echo_json(value: Any) -> None:
    """Print a value as one line of JSON on stdout.

    Args:
        value: anything json can encode.
    """
    typer.echo(json.dumps(value, ensure_ascii=False))


#: Tab-separated output's escapes (PostgreSQL's text COPY format): an id holding a TAB or a line break
#: would otherwise split into other fields or rows for a script that splits on them.
_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
#: The same, for an item of a comma-separated list field.
_TSV_ITEM_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", ",": "\\,"})


def tsv_row(*fields: object) -> str:
    r"""One line of tab-separated output, every field escaped: the one place that writes such a line
    (docs/cli.md, "Tab-separated output").

    A backslash, TAB, line feed and carriage return in a field are written as ``\\``, ``\t``, ``\n``
    and ``\r``; a list or tuple field is its items joined by commas, a comma in an item written ``\,``.

    Args:
        fields: the fields, each printed with str().
    """
    cells = [
        ",".join(str(item).translate(_TSV_ITEM_ESCAPES) for item in field)
        if isinstance(field, (list, tuple))
        else str(field).translate(_TSV_ESCAPES)
        for field in fields
    ]
    return "\t".join(cells)


def fail(message: str, code: ExitCode = ExitCode.ERROR) -> typer.Exit:
    """Print "error: message" on stderr and return the Exit to raise.

    Args:
        message: what went wrong and what to do.
        code: the exit code.
    """
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(int(code))


def plural(count: int, noun: str, many: str | None = None) -> str:
    """A count with its noun, singular for one: "1 document", "2 documents", "1,000 documents".

    Args:
        count: the count.
        noun: the noun's singular.
        many: its plural, when it is not the singular plus "s".
    """
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"


def stdin_is_terminal() -> bool:
    """Whether standard input is an interactive terminal."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def registrar(commands: Mapping[str, Callable[..., None] | typer.Typer]) -> Callable[[typer.Typer], None]:
    """The ``register(app)`` of a command module: what adds its commands to the app, under their names.

    Args:
        commands: command name -> the command's function, or a Typer app of subcommands.
    """

    def register(app: typer.Typer) -> None:
        for name, command in commands.items():
            if isinstance(command, typer.Typer):
                app.add_typer(command, name=name)
            else:
                app.command(name)(command)

    return register
