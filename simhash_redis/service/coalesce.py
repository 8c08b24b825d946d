"""Micro-batching: single-document calls that arrive together in a worker go to the library as one batch.

Each request keeps its own result and error: the library checks a whole batch before writing any of it,
so a batch refused for one malformed document is run again one document at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ..errors import InvalidArgument, InvalidType

__all__ = ["Coalescer"]

T = TypeVar("T")
R = TypeVar("R")

#: Most single calls in one batch (more wait for the next).
MAX_BATCH = 256


class Coalescer(Generic[T, R]):
    """Gathers single calls of one kind made in one turn of the event loop, and runs them as one batch."""

    def __init__(self, run: Callable[[Sequence[T]], Sequence[R]]) -> None:
        self._run = run
        self._pending: list[tuple[T, asyncio.Future[R]]] = []

    def submit(self, item: T) -> asyncio.Future[R]:
        """The future result of one item, run with the others submitted before the loop's next turn."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if len(self._pending) == 1:
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        if self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        batch = [(item, future) for item, future in batch if not future.done()]  # timed out meanwhile
        if not batch:
            return
        try:
            results = self._run([item for item, _ in batch])
        except (InvalidArgument, InvalidType) as exc:
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            for item, future in batch:  # whose document it is: each alone (nothing was written)
                try:
                    future.set_result(self._run([item])[0])
                except Exception as alone:
                    future.set_exception(alone)
        except Exception as exc:
            for _, future in batch:
                future.set_exception(exc)
        else:
            for (_, future), result in zip(batch, results, strict=True):
                future.set_result(result)
