"""`Blocking`: an `AsyncSimhashIndex` driven from synchronous tests, so the index contract runs on it too."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from simhash_redis import InvalidArgument
from simhash_redis.asyncio import AsyncSimhashIndex

T = TypeVar("T")


class Blocking:
    """Runs each coroutine method of an `AsyncSimhashIndex` on an event loop in a thread of its own.

    Attributes that are not coroutine methods come from the async index, else from its opened
    synchronous half (`keys`, `store`, ...), as the contract tests read them from a `SimhashIndex`.

    Args:
        make: a coroutine function making the (opened) async index, run on the facade's loop.
    """

    def __init__(self, make: Callable[[], Awaitable[AsyncSimhashIndex]]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="asyncio-facade", daemon=True)
        self.thread.start()
        self.aio: AsyncSimhashIndex = self.run(make())

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run a coroutine on the facade's loop and return its result (or raise its error)."""

        async def wrapped() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout=120)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name, None)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self.run(attr(*args, **kwargs))
        if attr is not None:
            return attr
        return getattr(self.aio.index, name)

    def __len__(self) -> int:
        return self.count()[0]  # type: ignore[no-any-return]

    def __contains__(self, doc_id: object) -> bool:
        try:
            return isinstance(doc_id, str) and self.get(doc_id) is not None
        except InvalidArgument:
            return False

    def close(self) -> None:
        """Close the index's client (if it owns it) and stop the loop."""
        try:
            self.run(self.aio.aclose())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop.close()
