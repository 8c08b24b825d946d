"""Read-ahead: an iterator's items produced on a thread of their own, a bounded few ahead."""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["DEPTH", "read_ahead"]

_T = TypeVar("_T")
DEPTH = 2


class _End:
    """What the reading thread gives after the last item."""


def read_ahead(items: Iterator[_T], depth: int = DEPTH) -> Iterator[_T]:
    """The items, in their order, those after the first read on a thread up to `depth` ahead; the
    iterator's exception is raised after the items before it. Closing this stops the thread, then closes
    the iterator in the caller's thread."""
    # The first item is read here: a loader forks its workers at its first run, and must not fork while
    # another thread may hold a lock (pyarrow's memory pool's).
    try:
        first = next(items)
    except StopIteration:
        return
    yield first
    try:
        # One thread: the iterator is never entered by two at once, and its items come in order.
        with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as thread:
            ahead = deque(thread.submit(next, items, _End()) for _ in range(max(depth, 1)))
            try:
                while not isinstance(item := ahead.popleft().result(), _End):
                    yield item
                    ahead.append(thread.submit(next, items, _End()))
            finally:
                for future in ahead:
                    future.cancel()
    finally:  # the executor has shut down: the iterator is not running
        if isinstance(items, Generator):
            items.close()
