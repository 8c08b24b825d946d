"""Table-bucket locks: how add-if-new stays race-free on Redis Cluster, where no script spans slots.

Any two fingerprints within distance k share at least one table bucket (pigeonhole), so a worker that
holds the locks of all its document's buckets while it checks and writes cannot race another add-if-new
of a near-duplicate. Locks are keys with a random token and a time to live, so a crashed worker's locks
expire; a worker stalled for longer than the time to live loses that guarantee.

A document's locks are taken in one round trip, in a global order (the lock keys' bytes). One that gets
only some of them keeps the ones before its first miss and asks again for the rest next round, so a
document only ever waits for locks above every lock it holds: no two documents can wait for each other,
and of many near-duplicates contending for the same buckets one always gets them all. (Giving back every
partly taken set, the earlier design, let hundreds of contenders take turns at blocking each other.)
"""

from __future__ import annotations

import itertools
import secrets

from ..transport import Command
from .scripts import Script
from .store import Store

__all__ = ["BucketLocks"]

_LOCK = Script("lock")
_UNLOCK = Script("unlock")


class BucketLocks:
    """Acquires and releases the locks of the table buckets of a batch of documents, round by round.

    Args:
        store: the index's keys and sender.
        ttl_ms: how long a lock lives if its holder never releases it.
    """

    def __init__(self, store: Store, ttl_ms: int = 5000) -> None:
        self.store, self.keys, self.ttl_ms = store, store.keys, ttl_ms
        self.token = secrets.token_hex(16).encode()
        #: The locks kept across rounds by documents that got only some of theirs (a sorted prefix).
        self.kept: dict[int, list[bytes]] = {}

    def acquire(self, documents: list[tuple[int, list[bytes]]]) -> tuple[list[bool], list[bytes]]:
        """Try to lock every bucket of each document, at most one document per lock.

        Args:
            documents: (the caller's number for the document, its table keys), for each document.

        Returns:
            Whether each document got all its locks, and the locks to release once the round is over
            (those of the documents that got all theirs, and those no document keeps).
        """
        owner = {lock: doc for doc, locks in self.kept.items() for lock in locks}
        wanted: list[tuple[int, list[bytes]] | None] = []
        for doc, keys in documents:
            locks = sorted({self.keys.lock(key) for key in keys})
            # A lock that another document of this batch holds or asks for: that one goes first.
            if any(owner.get(lock, doc) != doc for lock in locks):
                wanted.append(None)
                continue
            owner.update(dict.fromkeys(locks, doc))
            wanted.append((doc, locks))
        attempted = list(owner)
        replies = self.store.run_script(_LOCK, [self._lock(lock) for lock in attempted])
        taken = {lock for lock, reply in zip(attempted, replies, strict=True) if reply == 1}
        got: list[bool] = []
        for (doc, _), entry in zip(documents, wanted, strict=True):
            # What a document still holds of its sorted locks, up to its first miss, it keeps.
            locks = self.kept.get(doc, []) if entry is None else entry[1]
            got.append(entry is not None and taken.issuperset(locks))
            prefix = list(itertools.takewhile(taken.__contains__, locks))
            if got[-1] or not prefix:
                self.kept.pop(doc, None)
            else:
                self.kept[doc] = prefix
        keep = {lock for locks in self.kept.values() for lock in locks}
        # Every attempted lock not kept is released, taken or not: a release checks the token.
        return got, [lock for lock in attempted if lock not in keep]

    def release(self, locks: list[bytes]) -> None:
        """Release locks taken by `acquire`.

        Args:
            locks: the locks.
        """
        if locks:
            self.store.run_script(_UNLOCK, [_UNLOCK.command([lock], [self.token]) for lock in locks])

    def release_kept(self) -> None:
        """Release the locks documents kept for a later round (the caller is done or gives up)."""
        kept = [lock for locks in self.kept.values() for lock in locks]
        self.kept.clear()
        self.release(kept)

    def _lock(self, lock: bytes) -> Command:
        return _LOCK.command([lock], [self.token, self.ttl_ms])
