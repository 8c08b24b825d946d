"""Ids named again within one load with another text, told from updates of an earlier run's documents by a
64-bit hash of every id the load has written (8 bytes an id, in sorted runs merged as they grow)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import xxhash

from ..results import Outcome

__all__ = ["RepeatedIds"]


class RepeatedIds:
    """The ids of one load that replaced a document the same load had written (the first `keep` by name)."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        #: How many writes replaced a document of this load.
        self.count = 0
        #: The first `keep` of their ids.
        self.first: list[str] = []
        self._runs: list[npt.NDArray[np.uint64]] = []

    def written(self, ids: Sequence[str], outcomes: Sequence[object]) -> None:
        """Note a written batch: each id, in the order written, with its outcome (a `Match` if not stored)."""
        if not ids:
            return
        hashes = _hashes(ids)
        for position, outcome in enumerate(outcomes):
            if outcome is Outcome.REPLACED and (
                self._seen(hashes[position]) or bool((hashes[:position] == hashes[position]).any())
            ):
                self.count += 1
                if len(self.first) < self.keep and ids[position] not in self.first:
                    self.first.append(ids[position])
        self._runs.append(np.sort(hashes))
        # Merged like a binary counter: a few runs of growing sizes, each id sorted O(log n) times.
        while len(self._runs) > 1 and len(self._runs[-2]) <= 2 * len(self._runs[-1]):
            last = self._runs.pop()
            self._runs[-1] = np.sort(np.concatenate((self._runs[-1], last)))

    def earlier(self, ids: Sequence[str]) -> list[int]:
        """How many times each id of a batch (before `written` notes it) was written before: in the batches
        noted, and earlier in this one."""
        before = np.zeros(len(ids), dtype=np.int64)
        hashes = _hashes(ids)
        for run in self._runs:
            before += np.searchsorted(run, hashes, "right") - np.searchsorted(run, hashes, "left")
        met: Counter[str] = Counter()
        counts = []
        for doc_id, times in zip(ids, before.tolist(), strict=True):
            counts.append(times + met[doc_id])
            met[doc_id] += 1
        return counts

    def _seen(self, value: np.uint64) -> bool:
        """Whether an earlier batch had an id of this hash."""
        for run in self._runs:
            at = int(np.searchsorted(run, value))
            if at < len(run) and run[at] == value:
                return True
        return False


def _hashes(ids: Sequence[str]) -> npt.NDArray[np.uint64]:
    return np.fromiter(
        (xxhash.xxh3_64_intdigest(doc_id.encode("utf-8", "surrogatepass")) for doc_id in ids),
        dtype=np.uint64,
        count=len(ids),
    )
