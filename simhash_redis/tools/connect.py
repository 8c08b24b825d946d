"""Opening an index where the CLI would: the URL given, else $SIMHASH_REDIS_URL, else the embedded server."""

from __future__ import annotations

import os
from typing import Any, Literal, Protocol, overload

from .. import defaults
from ..defaults import URL_ENV
from ..errors import InvalidArgument
from ..index import SimhashIndex, VerifiedIndex
from ..index.mode import open_in_mode
from ..store import Retention
from ..store.config import parse_duration
from ..transport import client_from_url
from .planner import layout_named

__all__ = ["OptionWords", "default_url", "index_options", "open_index"]


def default_url() -> str:
    """$SIMHASH_REDIS_URL if set, else the URL of the embedded server, started now if need be
    (RedisUnavailable if it cannot be)."""
    from_env = os.environ.get(URL_ENV)
    if from_env:
        return from_env
    from .server import EmbeddedServer  # only when needed: importing simhash_redis stays as fast

    return EmbeddedServer().start()


@overload
def open_index(
    name: str, url: str | None = None, *, verified: Literal[False], **kwargs: Any
) -> SimhashIndex: ...
@overload
def open_index(
    name: str, url: str | None = None, *, verified: Literal[True], **kwargs: Any
) -> VerifiedIndex: ...
@overload
def open_index(
    name: str, url: str | None = None, *, verified: bool | None = None, **kwargs: Any
) -> SimhashIndex | VerifiedIndex: ...
def open_index(
    name: str, url: str | None = None, *, verified: bool | None = None, **kwargs: Any
) -> SimhashIndex | VerifiedIndex:
    """Open (or create) an index on the server the CLI would use, so a script and the command line share it.

    Args:
        url: a Redis URL; default: $SIMHASH_REDIS_URL, else the embedded server.
        verified: True for a verified index (`VerifiedIndex`, docs/choosing.md), False for a plain
            `SimhashIndex`; None: verified for a new index, the stored mode for an existing one.
        **kwargs: the other arguments of `SimhashIndex` (k, layout, ...) and, for a verified index,
            `VerifiedIndex`'s (hasher, threshold, band_buckets, max_candidates).

    Raises:
        ConfigurationMismatch: the index exists in the other mode, or with another configuration.
        InvalidArgument: the URL is malformed.
        InvalidType: verified is not True, False or None (checked before anything is made).
        RedisUnavailable: the server cannot be reached, or no embedded server can be started.
    """
    client = client_from_url(url or default_url())
    try:
        return open_in_mode(client, name, verified=verified, **kwargs)
    except BaseException:
        client.close()
        raise


class OptionWords(Protocol):
    """The index options of the CLI and the service, in their words (a layout label, a retention "7d")."""

    @property
    def k(self) -> int | None: ...
    @property
    def f(self) -> int | None: ...
    @property
    def layout(self) -> str | None: ...
    @property
    def scheme(self) -> str | None: ...
    @property
    def retention(self) -> str | None: ...
    @property
    def sliding(self) -> bool: ...
    @property
    def id_buckets(self) -> int | None: ...


def index_options(words: OptionWords, width: int | None = None) -> dict[str, Any]:
    """The arguments of `SimhashIndex` (the mode aside) that the options state; None where not given.

    Args:
        width: the fingerprint width a --layout or --scheme label is read at without --f; default 64.

    Raises:
        InvalidArgument: --layout without --k, a label that names nothing, --sliding without
            --retention, or a malformed --retention (a bare number among them: it needs a unit).
    """
    k, f, layout, scheme, retention = words.k, words.f, words.layout, words.scheme, words.retention
    width = f if f is not None else defaults.F if width is None else width
    options: dict[str, Any] = {"k": k, "f": f, "id_buckets": words.id_buckets, "layout": None, "scheme": None}
    if layout is not None:
        if k is None:
            # The layout is cut for one k: a default k would not be the stored index's.
            raise InvalidArgument(f"--layout needs --k, as plan prints it: --k K --layout {layout}")
        options["layout"] = layout_named(layout, width, k)
    if scheme is not None:
        # Imported here: the evaluation package costs every command 15 ms to import.
        from .evaluation.settings import scheme_named

        options["scheme"] = scheme_named(scheme, width)
    if words.sliding and retention is None:
        raise InvalidArgument("--sliding needs --retention: --retention 7d --sliding")
    if retention is not None:
        parse_duration(retention, "--retention")  # refused in the option's own name
    options["retention"] = None if retention is None else Retention.of(retention, sliding=words.sliding)
    return options
