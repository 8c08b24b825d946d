"""Locks of Redis Cluster, where no script spans slots: add-if-new's table-bucket locks (near-duplicates
share a bucket), and the id locks every cluster write holds from its first step to its last
(docs/cluster.md: why no cycle of waiting documents forms, what a lock's time to live guarantees).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import secrets
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import SimhashRedisError, WriteContention
from ..transport import Command, pause
from .keys import KeySchema
from .store import LOCK, UNLOCK, Store

__all__ = [
    "TTL_MS",
    "BucketLocks",
    "LockWaits",
    "first_id_lock",
    "granted",
    "id_lock_call",
    "in_id_turns",
    "release_ids",
    "too_many",
    "unlock_call",
]

_log = logging.getLogger(__name__)

#: How long a lock outlives a worker that never releases it: longer than a live worker's stalls.
TTL_MS = 30_000

T = TypeVar("T")

#: A lock and the token of the document holding it.
Held = tuple[bytes, bytes]


class BucketLocks:
    """The table-bucket locks of a batch of documents, round by round, a token each document."""

    def __init__(self, store: Store) -> None:
        self.store, self.keys, self.ttl_ms = store, store.keys, TTL_MS
        self.token = secrets.token_hex(16).encode()
        # By document: the locks kept across rounds by those that got only some (a sorted prefix), those
        # of the ones that got all this round, and the token holding a document's first missing lock.
        self.kept: dict[int, list[bytes]] = {}
        self.holding: dict[int, list[bytes]] = {}
        self.blockers: dict[int, bytes] = {}

    def token_of(self, doc: int) -> bytes:
        return b"%s:%d" % (self.token, doc)

    def acquire(self, documents: list[tuple[int, list[bytes]]]) -> tuple[list[bool], list[Held]]:
        """Try to lock every bucket of each document, in one round trip (one that gets only some keeps those
        below its first miss); whether each got all, and the locks to release after the round.

        Raises:
            SimhashRedisError: the locks could not be asked for (every lock taken or kept given back).
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
            # The server may have taken any of them (a lost reply); a release checks the token.
            with contextlib.suppress(Exception):
                self.release(asked)
            self.kept.clear()
            self.holding.clear()
            raise
        return got, [(lock, self.token_of(doc)) for doc, locks in self.holding.items() for lock in locks]

    def renew(self, docs: list[int]) -> list[bool]:
        """Extend the locks of documents about to be written; whether each still held all of its own."""
        pairs = [(lock, self.token_of(doc)) for doc in docs for lock in self.holding[doc]]
        calls = [self._lock(lock, token, renew=True) for lock, token in pairs]
        replies = self.store.run_script(LOCK, calls)
        still = {pair for pair, reply in zip(pairs, replies, strict=True) if reply == 1}
        return [all((lock, self.token_of(doc)) in still for lock in self.holding[doc]) for doc in docs]

    def release(self, locks: list[Held]) -> None:
        if locks:
            self.store.run_script(UNLOCK, [UNLOCK.command([lock], [token]) for lock, token in locks])

    def release_kept(self) -> None:
        kept = [(lock, self.token_of(doc)) for doc, locks in self.kept.items() for lock in locks]
        self.kept.clear()
        self.release(kept)

    def _lock(self, lock: bytes, token: bytes, renew: bool = False) -> Command:
        return LOCK.command([lock], [token, self.ttl_ms, b"renew" if renew else b"take"])


def id_lock_call(keys: KeySchema, doc_id: bytes, token: bytes) -> Command:
    return LOCK.command([keys.id_lock(doc_id)], [token, TTL_MS, b"take"])


def first_id_lock(keys: KeySchema, doc_id: bytes, token: bytes) -> Command:
    """The first ask for an id's lock: a plain SET, cheaper than lock.lua (refused when resent, the
    document then asks with lock.lua, which knows the call's token)."""
    return (b"SET", keys.id_lock(doc_id), token, b"NX", b"PX", TTL_MS)


def granted(reply: object) -> bool:
    return reply == 1 or reply == b"OK"


def unlock_call(keys: KeySchema, doc_id: bytes, token: bytes) -> Command:
    return UNLOCK.command([keys.id_lock(doc_id)], [token])


def release_ids(store: Store, ids: list[bytes], token: bytes) -> None:
    """Release, best effort, the id locks a failed call may hold."""
    try:
        store.run_script(UNLOCK, [unlock_call(store.keys, doc_id, token) for doc_id in ids])
    except SimhashRedisError as exc:
        _log.warning("id locks left to their time to live after a failed write: %s", exc)


def too_many(count: int) -> WriteContention:
    return WriteContention(
        f"{count} documents kept changing under concurrent writers; nothing of them was written"
    )


class LockWaits:
    """How long documents wait for id locks other writers hold."""

    def __init__(self) -> None:
        self.holders: dict[int, bytes] = {}
        self.rounds = 0
        self.patience = 0.0

    def take(self, docs: list[T], replies: list[object], at: Callable[[T], int]) -> tuple[list[T], list[T]]:
        """Split documents by their id locks' replies: the turn's (granted), and those left to wait (`at`:
        a document's position in its call, by which a lock that changed hands is waited for afresh)."""
        holders = {
            at(docs[n]): bytes(reply)
            for n, reply in enumerate(replies)
            if isinstance(reply, bytes) and not granted(reply)
        }
        if any(self.holders.get(i, holder) != holder for i, holder in holders.items()):
            self.patience = 0.0
        self.holders = holders
        turn = [doc for doc, reply in zip(docs, replies, strict=True) if granted(reply)]
        return turn, [doc for doc, reply in zip(docs, replies, strict=True) if not granted(reply)]

    def wait(self, count: int) -> None:
        """Pause (random, growing) before asking again for the locks of `count` documents.

        Raises:
            WriteContention: a lock kept its holder longer than a lock lives, plus 5 s.
        """
        now = time.monotonic()
        if not self.patience:
            self.patience = now + TTL_MS / 1000 + 5
        if now > self.patience:
            raise too_many(count)
        self.rounds += 1
        pause(random.uniform(0, min(0.05, 0.0005 * 2.0**self.rounds)))


def in_id_turns(store: Store, ids: list[bytes], write: Callable[[list[int]], None]) -> None:
    """Run `write` on the positions of the ids (each named once) whose lock a call holds, turn by turn.

    Raises:
        WriteContention: as `LockWaits.wait`; any error of `write` (the turn's locks released first).
    """
    token, waits, keys = secrets.token_hex(8).encode(), LockWaits(), store.keys
    waiting = list(range(len(ids)))
    while waiting:
        try:
            calls = [id_lock_call(keys, ids[i], token) for i in waiting]
            replies = store.run_script(LOCK, calls, durable=True)
            turn, left = waits.take(waiting, replies, int)
            write(turn)
        except BaseException:
            # The server may hold any of them (a lost reply): each released only if still the call's.
            release_ids(store, [ids[i] for i in waiting], token)
            raise
        store.run_script(UNLOCK, [unlock_call(keys, ids[i], token) for i in turn])
        waiting = left
        if waiting:
            waits.wait(len(waiting))
