"""Table-bucket locks: how add-if-new stays race-free on Redis Cluster, where no script spans slots.

Near-duplicates share a table bucket, so a worker holding all its document's bucket locks from its check
to its write races no other add-if-new. Why no cycle of waiting documents forms, and what a lock's time
to live guarantees: docs/cluster.md.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets

from ..transport import Command
from .store import LOCK, UNLOCK, Store

__all__ = ["TTL_MS", "BucketLocks"]

#: How long a lock outlives a worker that never releases it: longer than a live worker's stalls
#: (hundreds of tasks on an event loop, WAIT for a lagging replica); `renew` checks it anyway.
TTL_MS = 30_000

#: A lock and the token of the document holding it.
Held = tuple[bytes, bytes]


class BucketLocks:
    """Acquires and releases the table-bucket locks of a batch of documents, round by round.

    Each document has a token of its own, so the server arbitrates within a batch as between workers.
    """

    def __init__(self, store: Store) -> None:
        self.store, self.keys, self.ttl_ms = store, store.keys, TTL_MS
        self.token = secrets.token_hex(16).encode()
        #: The locks kept across rounds by documents that got only some of theirs (a sorted prefix).
        self.kept: dict[int, list[bytes]] = {}
        #: The locks of the documents that got all theirs this round.
        self.holding: dict[int, list[bytes]] = {}
        #: For each document that missed a lock this round, the token holding its first missing one.
        self.blockers: dict[int, bytes] = {}

    def token_of(self, doc: int) -> bytes:
        """The token a document's locks hold."""
        return b"%s:%d" % (self.token, doc)

    def acquire(self, documents: list[tuple[int, list[bytes]]]) -> tuple[list[bool], list[Held]]:
        """Try to lock every bucket of each document, in one round trip.

        A document that gets only some keeps those below its first miss in the keys' order.

        Returns:
            Whether each document got all its locks, and the locks to release after the round.

        Raises:
            SimhashRedisError: the locks could not be asked for; every lock this call may have taken,
                and every lock kept, is given back first.
        """
        self.holding.clear()
        self.blockers.clear()
        wanted = [(doc, sorted({self.keys.lock(key) for key in keys})) for doc, keys in documents]
        asked: list[Held] = [(lock, self.token_of(doc)) for doc, locks in wanted for lock in locks]
        try:
            replies = self.store.run_script(LOCK, [self._lock(lock, token) for lock, token in asked])
            answers = dict(zip(asked, replies, strict=True))
            taken = {pair for pair, reply in answers.items() if reply == 1}
            got: list[bool] = []
            spare: list[Held] = []
            for doc, locks in wanted:
                token = self.token_of(doc)
                got.append(all((lock, token) in taken for lock in locks))
                self.kept.pop(doc, None)
                if got[-1]:
                    self.holding[doc] = locks
                    continue
                mine = {lock for lock in locks if (lock, token) in taken}
                prefix = list(itertools.takewhile(mine.__contains__, locks))
                holder = answers.get((locks[len(prefix)], token))
                if isinstance(holder, bytes):
                    self.blockers[doc] = holder
                if prefix:
                    self.kept[doc] = prefix
                # Past its first miss: given back now, as a document keeping a lower lock may wait for it.
                spare += [(lock, token) for lock in locks[len(prefix) :] if (lock, token) in taken]
            self.release(spare)
        except BaseException:
            # The server may have taken any of them (a lost reply, a cancelled call); a release checks
            # the token.
            with contextlib.suppress(Exception):
                self.release(asked)
            self.kept.clear()
            self.holding.clear()
            raise
        return got, [(lock, self.token_of(doc)) for doc, locks in self.holding.items() for lock in locks]

    def renew(self, docs: list[int]) -> list[bool]:
        """Extend the locks of documents about to be written; whether each still held all of its own.

        One that lost a lock (its worker stalled past the time to live) must be read again, not written.
        """
        pairs = [(lock, self.token_of(doc)) for doc in docs for lock in self.holding[doc]]
        calls = [self._lock(lock, token, renew=True) for lock, token in pairs]
        replies = self.store.run_script(LOCK, calls)
        still = {pair for pair, reply in zip(pairs, replies, strict=True) if reply == 1}
        return [all((lock, self.token_of(doc)) in still for lock in self.holding[doc]) for doc in docs]

    def release(self, locks: list[Held]) -> None:
        """Release locks, each only if its document's token still holds it."""
        if locks:
            self.store.run_script(UNLOCK, [UNLOCK.command([lock], [token]) for lock, token in locks])

    def release_kept(self) -> None:
        """Release the locks documents kept for a later round."""
        kept = [(lock, self.token_of(doc)) for doc, locks in self.kept.items() for lock in locks]
        self.kept.clear()
        self.release(kept)

    def _lock(self, lock: bytes, token: bytes, renew: bool = False) -> Command:
        return LOCK.command([lock], [token, self.ttl_ms, b"renew" if renew else b"take"])
