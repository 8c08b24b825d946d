"""The asyncio API: `AsyncSimhashIndex`, `AsyncVerifiedIndex` and `open_index` on redis.asyncio.

It runs the synchronous index's own code with its network I/O awaited (docs/asyncio.md), which needs
greenlet (the ``asyncio`` extra).
"""

from __future__ import annotations

from ..transport.greenlet_bridge import GREENLET, greenlet_installed

if not greenlet_installed():  # pragma: no cover - only without the `asyncio` extra
    raise ImportError(GREENLET)

from .index import AsyncSimhashIndex
from .opening import open_index
from .verified import AsyncVerifiedIndex

__all__ = ["AsyncSimhashIndex", "AsyncVerifiedIndex", "open_index"]
