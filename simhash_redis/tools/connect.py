"""Opening an index where the CLI would: the URL given, else $SIMHASH_REDIS_URL, else the embedded server."""

from __future__ import annotations

import os
from typing import Any

from ..defaults import URL_ENV
from ..index import SimhashIndex

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


def open_index(name: str, url: str | None = None, **kwargs: Any) -> SimhashIndex:
    """Open (or create) an index on the server the CLI would use, so that a script and the command line
    share it without a URL to copy.

    Args:
        name: the index name.
        url: a Redis URL; default: $SIMHASH_REDIS_URL, else the embedded server.
        **kwargs: the other arguments of `SimhashIndex` (k, layout, ...).

    Raises:
        InvalidArgument: the URL is malformed.
        RedisUnavailable: the server cannot be reached, or no embedded server can be started.
    """
    return SimhashIndex.from_url(url or default_url(), name, **kwargs)
