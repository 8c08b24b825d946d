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

import contextlib
import itertools
import secrets

from ..transport import Command
from .scripts import Script
from .store import Store

__all__ = ["TTL_MS", "BucketLocks"]

_LOCK = Script("lock")
#: How long a lock outlives a worker that never releases it. Long enough that no stall of a live
#: worker between its lock and its write (an event loop with hundreds of tasks, WAIT for a lagging
#: replica) outlasts it; `renew` checks it just before the write anyway.
TTL_MS = 30_000
_UNLOCK = Script("unlock")


class BucketLocks:
    """Acquires and releases the locks of the table buckets of a batch of documents, round by round.

    Args:
        store: the index's keys and sender.
        ttl_ms: how long a lock lives if its holder never releases it.
    """

    def __init__(self, store: Store, ttl_ms: int = TTL_MS) -> None:
        self.store, self.keys, self.ttl_ms = store, store.keys, ttl_ms
        self.token = secrets.token_hex(16).encode()
        #: The locks kept across rounds by documents that got only some of theirs (a sorted prefix).
        self.kept: dict[int, list[bytes]] = {}
        #: The locks of the documents that got all theirs this round.
        self.holding: dict[int, list[bytes]] = {}

    def acquire(self, documents: list[tuple[int, list[bytes]]]) -> tuple[list[bool], list[bytes]]:
        """Try to lock every bucket of each document, at most one document per lock.

        Args:
            documents: (the caller's number for the document, its table keys), for each document.

        Returns:
            Whether each document got all its locks, and the locks to release once the round is over
            (those of the documents that got all theirs, and those no document keeps).
        """
        self.holding.clear()
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
        try:
            replies = self.store.run_script(_LOCK, [self._lock(lock) for lock in attempted])
        except BaseException:
            # The server may have taken any of them (a lost reply, a cancelled call): give them all
            # back, as far as the server can be reached; a release checks the token.
            with contextlib.suppress(Exception):
                self.release(attempted)
            self.kept.clear()
            raise
        taken = {lock for lock, reply in zip(attempted, replies, strict=True) if reply == 1}
        got: list[bool] = []
        for (doc, _), entry in zip(documents, wanted, strict=True):
            # What a document still holds of its sorted locks, up to its first miss, it keeps.
            locks = self.kept.get(doc, []) if entry is None else entry[1]
            got.append(entry is not None and taken.issuperset(locks))
            if got[-1]:
                self.holding[doc] = locks
            prefix = list(itertools.takewhile(taken.__contains__, locks))
            if got[-1] or not prefix:
                self.kept.pop(doc, None)
            else:
                self.kept[doc] = prefix
        keep = {lock for locks in self.kept.values() for lock in locks}
        using = {lock for entry, ok in zip(wanted, got, strict=True) if ok and entry for lock in entry[1]}
        # Taken past a document's first miss: given back now, not after the round, since a document
        # that keeps a lower lock of the same bucket set may be waiting for it.
        spare = [lock for lock in attempted if lock in taken and lock not in keep and lock not in using]
        self.release(spare)
        # Every other attempted lock not kept is released after the round, taken or not (a SET resent
        # after a lost reply may have taken one): a release checks the token.
        return got, [lock for lock in attempted if lock not in keep and lock not in spare]

    def renew(self, docs: list[int]) -> list[bool]:
        """Extend the locks of documents about to be written; whether each still held all of its own.

        A document whose lock expired since it was taken (its worker stalled past the time to live)
        may have met a near-duplicate written meanwhile: it must be read again, not written.

        Args:
            docs: documents that got all their locks this round.
        """
        locks = [lock for doc in docs for lock in self.holding[doc]]
        replies = self.store.run_script(_LOCK, [self._lock(lock, renew=True) for lock in locks])
        kept = {lock for lock, reply in zip(locks, replies, strict=True) if reply == 1}
        return [kept.issuperset(self.holding[doc]) for doc in docs]

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

    def _lock(self, lock: bytes, renew: bool = False) -> Command:
        return _LOCK.command([lock], [self.token, self.ttl_ms, b"renew" if renew else b"take"])
