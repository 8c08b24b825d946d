"""SharedRing: spans placed after the newest, at the start when the end is reached, never over one not
taken back; taken back in the order placed; seen by a forked child."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from simhash_redis.jobs.shared_ring import SharedRing


def test_spans_wrap_around_and_never_overlap() -> None:
    ring = SharedRing(100)
    try:
        assert ring.place(memoryview(b"a" * 40)) == 0
        assert ring.place(memoryview(b"b" * 40)) == 40
        assert ring.place(memoryview(b"c" * 30)) is None  # 20 left at the end, the start is held
        ring.take_back(0)
        assert ring.place(memoryview(b"c" * 30)) == 0  # wrapped: before the oldest (40)
        assert ring.place(memoryview(b"d" * 11)) is None  # 10 left between the newest and the oldest
        assert ring.place(memoryview(b"d" * 10)) == 30
        assert ring.used == 80 and ring.memory[:40] == b"c" * 30 + b"d" * 10
        assert ring.memory[40:80] == b"b" * 40
        with pytest.raises(ValueError):
            ring.take_back(0)  # not the oldest
        ring.take_back(40)
        ring.take_back(0)
        with pytest.raises(ValueError):
            ring.withdraw(0)  # not the newest
        ring.withdraw(30)
        assert ring.used == 0
        assert ring.place(memoryview(b"e" * 100)) == 0  # empty again: the whole ring
        assert ring.place(memoryview(b"")) is None and ring.place(memoryview(b"f")) is None
    finally:
        ring.close()


def test_too_large_for_the_ring() -> None:
    ring = SharedRing(10)
    try:
        assert ring.place(memoryview(b"x" * 11)) is None and ring.used == 0
    finally:
        ring.close()


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork")
def test_a_forked_child_sees_what_is_placed_after_it_started() -> None:
    ring = SharedRing(1 << 12)
    reading, writing = os.pipe()
    answer_r, answer_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits for where the bytes are, reads them from its own mapping
        try:
            start, size = map(int, os.read(reading, 100).split())
            os.write(answer_w, ring.memory[start : start + size])
        finally:
            os._exit(0)
    try:
        ring.place(memoryview(b"first"))
        assert ring.place(memoryview("\u4f60\u597d".encode())) == 5
        os.write(writing, b"5 6")
        assert os.read(answer_r, 100).decode() == "\u4f60\u597d"
    finally:
        os.waitpid(pid, 0)
        for fd in (reading, writing, answer_r, answer_w):
            os.close(fd)
        ring.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ring is used with forked workers")
def test_a_worker_killed_while_runs_are_in_the_ring_is_reported_as_a_dead_worker() -> None:
    import signal

    pa = pytest.importorskip("pyarrow")
    from simhash_redis.errors import SimhashRedisError
    from simhash_redis.fingerprinting import Scheme
    from simhash_redis.jobs.arrow import ArrowRows
    from simhash_redis.jobs.fingerprinter import Fingerprinter
    from simhash_redis.jobs.records import ReadOptions

    batch = pa.record_batch(
        {
            "id": pa.array([f"d{i}" for i in range(200)]),
            "text": pa.array([f"some text number {i} " * 20 for i in range(200)]),
        }
    )
    fingerprinter = Fingerprinter(Scheme(), 64, "auto", 2, 1000)

    def units() -> Iterator[ArrowRows]:
        for n in range(6):
            if n == 2:  # runs of the first units are out in the ring
                executor: Any = fingerprinter._executor
                os.kill(next(iter(executor._processes)), signal.SIGKILL)
                deadline = time.monotonic() + 120  # a guard against a hang, not a timing
                while not executor._broken:  # the pool notices it (its own thread): wait for that state
                    assert time.monotonic() < deadline, "the pool never noticed its dead worker"
                    time.sleep(0.01)
            yield ArrowRows("t.arrow", 1 + 200 * n, batch, ReadOptions(), "id", "text")

    try:
        with pytest.raises(SimhashRedisError, match="worker process died"):
            for _ in fingerprinter.batches(units()):
                pass
    finally:
        fingerprinter.close()
