"""Table-bucket locks: how add-if-new stays race-free on Redis Cluster, where no script spans slots.

Any two fingerprints within distance k share at least one table bucket (pigeonhole), so a worker that
holds the locks of all its document's buckets while it checks and writes cannot race another add-if-new
of a near-duplicate. Locks are keys with a token and a time to live, so a crashed worker's locks expire.

Each document asks for its locks with a token of its own (the worker's, numbered), so the server
arbitrates between the documents of one batch as between workers. A document asks for all its locks
in one round trip; one that gets only some keeps those below its first miss in a global order (the
keys' bytes) and asks for the rest next round. A document therefore only ever waits for locks above
every lock it holds, so no cycle of documents waiting for each other can form, and of any number of
contenders for the same buckets one always gets them all.

Just before a document is written its locks are held for the write (`hold`): each one that the
document's token still holds becomes its writer's record (the document's id, fingerprint and locks),
with no time to live. One that expired meanwhile (its worker stalled past the time to live, and another
may have held it since) is refused, and the document is read again. The write is thus made under locks
that cannot expire, however long it takes: correctness does not depend on the time to live, which only
frees the locks of a worker that crashed before its write. A worker that dies while writing leaves its
records, which its near-duplicates' writers settle (`settle`): the write is completed on its behalf if
all its locks hold its record (it decided while holding them all), else the records are removed (one
of its locks expired first, so it never writes).
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from collections.abc import Callable
from typing import NamedTuple

from ..codec import netstring, netstrings
from ..transport import Command
from .scripts import LOCK, UNLOCK
from .store import Store

__all__ = ["TTL_MS", "BucketLocks", "Writer", "is_writer"]

#: How long a lock taken for a check outlives a worker that never releases it. A stall past it before
#: the write only costs a new read (`hold` refuses the expired lock); the write itself is made under
#: locks without a time to live.
TTL_MS = 30_000

#: A lock and the value (a document's token, or its writer's record) it holds.
Held = tuple[bytes, bytes]

#: The first byte of a writer's record (a token is hex digits).
_WRITER = b"w"


class Writer(NamedTuple):
    """A document being written, as its locks' record says: enough to complete its write."""

    record: bytes
    #: The value its locks held before the write (the document's token).
    token: bytes
    doc_id: bytes
    fp: bytes
    #: The sketch stored with it (verified mode), else None.
    sketch: bytes | None
    locks: list[bytes]

    @classmethod
    def parse(cls, record: bytes) -> Writer:
        """The writer a lock's record names.

        Raises:
            ValueError: not a record `BucketLocks.hold` wrote.
        """
        head, sep, body = record.partition(b"|")
        if not sep or not head.startswith(_WRITER):
            raise ValueError("not a writer's record")
        doc_id, fp, sketch, *locks = netstrings(body)
        token = head[len(_WRITER) :].rpartition(b"#")[0]
        return cls(record, token, doc_id, fp, sketch[1:] if sketch else None, locks)


def is_writer(value: bytes) -> bool:
    """Whether a lock's value is a writer's record (its document is being written), not a token."""
    return value.startswith(_WRITER)


class BucketLocks:
    """Acquires and releases the locks of the table buckets of a batch of documents, round by round."""

    def __init__(self, store: Store, ttl_ms: int | None = None) -> None:
        self.store, self.keys = store, store.keys
        self.ttl_ms = TTL_MS if ttl_ms is None else ttl_ms
        self.token = secrets.token_hex(16).encode()
        #: Numbers each `hold`, so that a record is never written twice: one removed stays removed.
        self._holds = itertools.count()
        #: The records of the documents whose locks are held for their write, until it is done.
        self.writing: dict[int, bytes] = {}
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
        """Try to lock every bucket of each document.

        Returns:
            Whether each document got all its locks, and the locks to release once the round is over
            (those of the documents that got all theirs).

        Raises:
            RedisUnavailable: (or another library error) the locks could not be asked for; every lock
                this call may have taken, and every lock kept, is given back first.
        """
        self.holding.clear()
        self.blockers.clear()
        self.writing.clear()
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
                # Taken past its first miss: given back now, not after the round, since a document
                # that keeps a lower lock of the same buckets may be waiting for it.
                spare += [(lock, token) for lock in locks[len(prefix) :] if (lock, token) in taken]
            self.release(spare)
        except BaseException:
            # The server may have taken any of them (a lost reply, a cancelled call): give them all
            # back, as far as the server can be reached; a release checks the token.
            with contextlib.suppress(Exception):
                self.release(asked)
            self.kept.clear()
            self.holding.clear()
            raise
        return got, [(lock, self.token_of(doc)) for doc, locks in self.holding.items() for lock in locks]

    def hold(self, docs: list[int], writes: list[tuple[bytes, bytes, bytes | None]]) -> list[bool]:
        """Hold the locks of documents about to be written for their write; whether each held all its own.

        Each lock its document's token still holds becomes the document's writer's record, with no time
        to live. A document that lost a lock since it was taken (its worker stalled past the time to
        live) may have met a near-duplicate written meanwhile: it must be read again, not written; its
        locks are given back (those held for the write here, the others with the round's).

        Args:
            docs: the documents (positions in the batch), each holding all its locks.
            writes: each document's (id, fingerprint, sketch or None), as stored.

        Raises:
            RedisUnavailable: (or another library error) the locks could not be asked for; those this
                call may have held for the write are given back first.
        """
        nonce = b"%d" % next(self._holds)
        records = {doc: self._record(doc, nonce, write) for doc, write in zip(docs, writes, strict=True)}
        pairs = [(doc, lock) for doc in docs for lock in self.holding[doc]]
        calls = [
            LOCK.command([lock], [self.token_of(doc), self.ttl_ms, b"hold", records[doc]])
            for doc, lock in pairs
        ]
        try:
            replies = self.store.run_script(LOCK, calls)
        except BaseException:
            with contextlib.suppress(Exception):
                self.release([(lock, records[doc]) for doc, lock in pairs])
            raise
        held = {pair for pair, reply in zip(pairs, replies, strict=True) if reply == 1}
        still = [all((doc, lock) in held for lock in self.holding[doc]) for doc in docs]
        self.writing = {doc: records[doc] for doc, ok in zip(docs, still, strict=True) if ok}
        self.release([(lock, records[doc]) for doc, lock in held if doc not in self.writing])
        return still

    def written(self, docs: list[int]) -> None:
        """Release the locks of documents whose write is done."""
        records = [(doc, self.writing.pop(doc)) for doc in docs]
        self.release([(lock, record) for doc, record in records for lock in self.holding[doc]])

    def settle(self, record: bytes, complete: Callable[[Writer], None]) -> bool:
        """Settle a writer whose record has blocked others for long (its worker stalled or died).

        If every lock of its document holds its record, the document was checked and decided while
        all were held: `complete` writes it on the writer's behalf (idempotent), then the records are
        removed. If one of them holds neither its record nor its token, that lock expired before it was
        held for the write, so the writer never writes: its records are removed. Otherwise it is still
        holding its locks, and is left alone.

        Returns:
            Whether the writer's records were removed.

        Raises:
            RedisUnavailable: (or another library error) the locks or the write could not be made.
        """
        writer = Writer.parse(record)
        states = self.store.execute([(b"GET", lock) for lock in writer.locks])
        if all(state == record for state in states):
            complete(writer)
        elif all(state in (record, writer.token) for state in states):
            return False
        self.release(
            [(lock, record) for lock, state in zip(writer.locks, states, strict=True) if state == record]
        )
        return True

    def release(self, locks: list[Held]) -> None:
        """Release locks, each only if its document's token still holds it."""
        if locks:
            self.store.run_script(UNLOCK, [UNLOCK.command([lock], [token]) for lock, token in locks])

    def release_kept(self) -> None:
        """Release the locks documents kept for a later round (the caller is done or gives up)."""
        kept = [(lock, self.token_of(doc)) for doc, locks in self.kept.items() for lock in locks]
        self.kept.clear()
        self.release(kept)

    def _lock(self, lock: bytes, token: bytes) -> Command:
        return LOCK.command([lock], [token, self.ttl_ms, b"take"])

    def _record(self, doc: int, nonce: bytes, write: tuple[bytes, bytes, bytes | None]) -> bytes:
        """A document's writer's record: its token and this hold's number, then what its write needs."""
        doc_id, fp, sketch = write
        fields = [doc_id, fp, b"" if sketch is None else b"s" + sketch, *self.holding[doc]]
        return _WRITER + self.token_of(doc) + b"#" + nonce + b"|" + b"".join(map(netstring, fields))
