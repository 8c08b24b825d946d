"""Shared memory through which a table's texts cross to forked fingerprinting workers, reused run after run
(the pool's pipe would copy them four times into fresh memory)."""

from __future__ import annotations

import mmap
from collections import deque

__all__ = ["SharedRing"]


class SharedRing:
    """A fixed-size ring of anonymous shared memory, spans taken back in the order placed."""

    def __init__(self, size: int) -> None:
        # Anonymous and MAP_SHARED (mmap's default): a child forked after this sees the same pages.
        self.size, self.memory = size, mmap.mmap(-1, size)
        #: The (start, end) of each span not taken back, oldest first.
        self._spans: deque[tuple[int, int]] = deque()

    def place(self, data: memoryview) -> int | None:
        """Copy a buffer into the ring; its start, or None when there is no room now (or it is empty)."""
        size = len(data)
        start = self._room_for(size) if size else None
        if start is None:
            return None
        self.memory[start : start + size] = data
        self._spans.append((start, start + size))
        return start

    def take_back(self, start: int) -> None:
        """Free the oldest span, which starts at `start` (else ValueError: spans are taken back in order)."""
        if not self._spans or self._spans[0][0] != start:
            raise ValueError(f"span at {start} taken back out of order")
        self._spans.popleft()

    def withdraw(self, start: int) -> None:
        """Free the newest span, never handed to a worker, which starts at `start` (else ValueError)."""
        if not self._spans or self._spans[-1][0] != start:
            raise ValueError(f"span at {start} withdrawn out of order")
        self._spans.pop()

    @property
    def used(self) -> int:
        """Bytes held by spans not taken back."""
        return sum(end - start for start, end in self._spans)

    def _room_for(self, size: int) -> int | None:
        if size > self.size:
            return None
        if not self._spans:
            return 0
        oldest, newest = self._spans[0][0], self._spans[-1]
        if newest[0] < oldest:  # wrapped: the free space lies between the newest and the oldest
            return newest[1] if oldest - newest[1] >= size else None
        if self.size - newest[1] >= size:
            return newest[1]
        return 0 if oldest >= size else None

    def close(self) -> None:
        """Unmap the ring (the workers' own mappings stay until they end)."""
        self.memory.close()
