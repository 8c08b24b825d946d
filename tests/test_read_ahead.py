"""read_ahead: an iterator's items from a thread of their own, in order, bounded, errors and early exits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from simhash_redis.jobs.read_ahead import read_ahead


def _alive() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("read-ahead")]


def test_items_in_order_the_first_read_before_any_thread() -> None:
    threads_at_first: list[int] = []

    def items() -> Iterator[int]:
        threads_at_first.append(threading.active_count())  # a fork here must find no other thread
        yield from range(1000)

    before = threading.active_count()
    assert list(read_ahead(items(), depth=2)) == list(range(1000))
    assert threads_at_first == [before]
    assert not _alive()


def test_an_error_comes_after_the_items_before_it() -> None:
    def items() -> Iterator[int]:
        yield from range(5)
        raise OSError("corrupt page")

    got: list[int] = []
    with pytest.raises(OSError, match="corrupt page"):
        for item in read_ahead(items()):
            got.append(item)
    assert got == list(range(5))
    assert not _alive()


def test_at_most_depth_items_ahead() -> None:
    produced: list[int] = []

    def items() -> Iterator[int]:
        for i in range(100):
            produced.append(i)
            yield i

    reader = read_ahead(items(), depth=2)
    assert next(reader) == 0
    assert next(reader) == 1
    # Two reads were handed to the thread (1 and 2): once both are done it reads no more until the
    # consumer asks for the next item.
    deadline = time.monotonic() + 60  # only stops a hang
    while len(produced) < 3:
        assert time.monotonic() < deadline, produced
        time.sleep(0.01)
    assert produced == [0, 1, 2]
    reader.close()
    assert not _alive()


def test_leaving_early_stops_the_thread_and_closes_the_iterator() -> None:
    closed = threading.Event()

    def items() -> Iterator[int]:
        try:
            yield from range(10_000)
        finally:
            closed.set()

    for item in read_ahead(items()):
        if item == 3:
            break
    assert closed.is_set()
    assert not _alive()


def test_an_empty_iterator() -> None:
    assert list(read_ahead(iter([]))) == []
    assert not _alive()
