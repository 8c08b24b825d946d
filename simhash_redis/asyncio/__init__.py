"""The asyncio API: `AsyncSimhashIndex` on redis.asyncio clients (standalone or cluster).

It runs the synchronous index's own code with its network I/O awaited (docs/asyncio.md), which needs
greenlet: ``pip install 'simhash-redis[asyncio]'``.
"""

from __future__ import annotations

from ..transport.bridge import GREENLET, greenlet_installed

if not greenlet_installed():  # pragma: no cover - only without the `asyncio` extra
    raise ImportError(GREENLET)

from .index import AsyncSimhashIndex

__all__ = ["AsyncSimhashIndex"]
