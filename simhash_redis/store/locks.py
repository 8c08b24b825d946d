"""Table-bucket locks: how add-if-new stays race-free on Redis Cluster, where no script spans slots.

Any two fingerprints within distance k share at least one table bucket (pigeonhole), so a worker that
holds the locks of all its document's buckets while it checks and writes cannot race another add-if-new
of a near-duplicate. Locks are SET NX PX keys with a random token and a time to live, so a crashed
worker's locks expire; a worker stalled for longer than the time to live loses that guarantee.
"""

from __future__ import annotations

import secrets

from ..transport import Command
from .scripts import Script
from .store import Store

__all__ = ["BucketLocks"]

_UNLOCK = Script("unlock")


class BucketLocks:
    """Acquires and releases the locks of the table buckets of a batch of documents.

    Args:
        store: the index's keys and sender.
        ttl_ms: how long a lock lives if its holder never releases it.
    """

    def __init__(self, store: Store, ttl_ms: int = 5000) -> None:
        self.store, self.keys, self.ttl_ms = store, store.keys, ttl_ms
        self.token = secrets.token_hex(16).encode()

    def acquire(self, buckets: list[list[bytes]]) -> tuple[list[bool], list[bytes]]:
        """Try to lock every bucket of each document, at most one document per bucket.

        Args:
            buckets: each document's table keys.

        Returns:
            Whether each document got all its locks, and the locks to release afterwards.
        """
        claimed: set[bytes] = set()
        wanted: list[list[bytes] | None] = []
        for keys in buckets:
            locks = [self.keys.lock(key) for key in keys]
            # Two documents of one batch that share a bucket must not be checked in the same round.
            if claimed.isdisjoint(locks):
                claimed.update(locks)
                wanted.append(locks)
            else:
                wanted.append(None)
        attempted = list(claimed)
        commands: list[Command] = [
            (b"SET", lock, self.token, b"NX", b"PX", self.ttl_ms) for lock in attempted
        ]
        replies = self.store.execute(commands)
        taken = {lock for lock, reply in zip(attempted, replies, strict=True) if reply}
        got = [locks is not None and taken.issuperset(locks) for locks in wanted]
        # Every attempted lock is released, not only those reported taken: a SET resent after a lost
        # reply answers nil for a lock this worker already holds. Releasing checks the token.
        return got, attempted

    def release(self, locks: list[bytes]) -> None:
        """Release locks taken by `acquire`.

        Args:
            locks: the locks.
        """
        if locks:
            self.store.run_script(_UNLOCK, [_UNLOCK.command([lock], [self.token]) for lock in locks])
