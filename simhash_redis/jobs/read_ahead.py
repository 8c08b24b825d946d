"""Read-ahead: an iterator's items produced on a thread of their own (pyarrow decodes Parquet without the GIL
while the loader waits on Redis), a bounded few ahead.

The first item is read in the caller's thread: a loader forks its workers at its first run, and must not fork
while another thread may hold a lock (pyarrow's memory pool's).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Generator, Iterator
from typing import Generic, TypeVar

__all__ = ["DEPTH", "read_ahead"]

_T = TypeVar("_T")
#: Items read ahead of the consumer at most (besides the one the thread is reading).
DEPTH = 2
#: Seconds between the consumer's checks that a thread it stopped has ended.
_POLL = 0.05


class _Failed(Generic[_T]):
    """What the reading thread hands over when the iterator raised."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _End:
    """What the reading thread hands over after the last item."""


def read_ahead(items: Iterator[_T], depth: int = DEPTH) -> Iterator[_T]:
    """The items, in their order, those after the first read on a thread up to `depth` ahead.

    An exception of the iterator is raised here, after the items before it. Closing this generator stops the
    thread and waits for it; the iterator is closed in that thread, where it ran.
    """
    try:
        first = next(items)
    except StopIteration:
        return
    yield first
    handed: queue.Queue[_T | _Failed[_T] | _End] = queue.Queue(depth)
    stop = threading.Event()
    thread = threading.Thread(target=_read, args=(items, handed, stop), name="read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = handed.get()
            if isinstance(item, _End):
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # a thread blocked on a full queue is freed by taking an item
            with contextlib.suppress(queue.Empty):
                handed.get(timeout=_POLL)
        thread.join()


def _read(items: Iterator[_T], handed: queue.Queue[_T | _Failed[_T] | _End], stop: threading.Event) -> None:
    try:
        for item in items:
            handed.put(item)
            if stop.is_set():
                return
        handed.put(_End())
    except BaseException as exc:  # handed over, raised in the consumer's thread
        handed.put(_Failed(exc))
    finally:
        if isinstance(items, Generator):
            items.close()
