"""`open_index` for asyncio code: the index in the mode the library chooses (verified for a new one)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..index import VerifiedIndex
from ..index.mode import open_in_mode
from ..tools.connect import default_url
from ..transport import client_from_url
from ..transport.greenlet_bridge import run
from .index import AsyncSimhashIndex
from .verified import AsyncVerifiedIndex

__all__ = ["open_index"]


async def open_index(
    name: str, url: str | None = None, *, verified: bool | None = None, **kwargs: Any
) -> AsyncSimhashIndex | AsyncVerifiedIndex:
    """`simhash_redis.open_index` for asyncio code, with its arguments and errors: an
    `AsyncVerifiedIndex`, or an `AsyncSimhashIndex` for a plain index (closed by `aclose`, or `async with`).
    """
    # The embedded server may have to be started: a blocking wait, kept off the event loop.
    target = url or await asyncio.to_thread(default_url)
    client: Any = await run(client_from_url, target, asyncio=True)
    try:
        index = await run(open_in_mode, client, name, verified=verified, **kwargs)
    except BaseException:
        await client.aclose()
        raise
    handle: AsyncSimhashIndex | AsyncVerifiedIndex
    if isinstance(index, VerifiedIndex):
        handle = AsyncVerifiedIndex(client, name)
        handle.adopt(index)
    else:
        handle = AsyncSimhashIndex(client, name)
        handle.adopt(index)
    handle.owns_client = True
    return handle
