"""Opening an index where the CLI would: the URL given, else $SIMHASH_REDIS_URL, else the embedded server."""

from __future__ import annotations

import os
from typing import Any, Literal, overload

from ..defaults import URL_ENV
from ..index import SimhashIndex, VerifiedIndex
from ..index.mode import open_in_mode
from ..transport import client_from_url

__all__ = ["default_url", "open_index"]


def default_url() -> str:
    """$SIMHASH_REDIS_URL if set, else the URL of the embedded server (started now if it is not running).

    Raises:
        RedisUnavailable: no embedded server can be started (no server binary installed).
    """
    from_env = os.environ.get(URL_ENV)
    if from_env:
        return from_env
    from .server import ensure_running  # only when needed: importing simhash_redis stays as fast

    return ensure_running()


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
        RedisUnavailable: the server cannot be reached, or no embedded server can be started.
    """
    client = client_from_url(url or default_url())
    try:
        return open_in_mode(client, name, verified=verified, **kwargs)
    except BaseException:
        client.close()
        raise
