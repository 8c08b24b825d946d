"""The asyncio API on redis.asyncio: the synchronous index's own code with its I/O awaited (docs/asyncio.md);
needs greenlet (the ``asyncio`` extra)."""

from __future__ import annotations

from ..transport.greenlet_bridge import GREENLET, greenlet_installed

if not greenlet_installed():  # pragma: no cover - only without the `asyncio` extra
    raise ImportError(GREENLET)

from .index import AsyncSimhashIndex, AsyncVerifiedIndex, open_index

__all__ = ["AsyncSimhashIndex", "AsyncVerifiedIndex", "open_index"]
