"""The asyncio API: `AsyncSimhashIndex` and `AsyncVerifiedIndex` on redis.asyncio (standalone or cluster).

It runs the synchronous index's own code with its network I/O awaited (docs/asyncio.md), which needs
greenlet: ``pip install greenlet`` (the ``asyncio`` extra: ``pip install '.[asyncio]'`` in a checkout).
"""

from __future__ import annotations

from ..transport.greenlet_bridge import GREENLET, greenlet_installed

if not greenlet_installed():  # pragma: no cover - only without the `asyncio` extra
    raise ImportError(GREENLET)

from .index import AsyncSimhashIndex
from .verified import AsyncVerifiedIndex

__all__ = ["AsyncSimhashIndex", "AsyncVerifiedIndex"]
