"""read_ahead: an iterator's items from a thread of their own, in order, bounded, errors and early exits."""

from __future__ import annotations

import threading
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
    # The thread blocks on the full queue: two items ahead of the consumer, and the one it holds.
    for thread in _alive():
        thread.join(timeout=0.2)  # it does not end (it waits for room), so this only bounds the check
    assert len(produced) <= 2 + 2 + 1
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
