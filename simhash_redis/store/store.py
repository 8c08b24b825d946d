"""The index's Redis half: its sender (retries, error translation) and its key schema (key names)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar

from ..transport import Command, Sender, Steps, drive
from .keys import KeySchema
from .meta import drop_keys
from .replies import hash_pairs
from .scripts import COUNT_FPS, Script, run_calls, with_scripts

__all__ = ["KeyKind", "Store"]

T = TypeVar("T")

#: The kinds of key an index has, as `Store.scan` finds them.
KeyKind = Literal["all", "id", "fp", "band", "windows"]

_SCAN_COUNT = 1000


class Store:
    """One index's keys on one server or cluster (every call raises RedisUnavailable if unreachable)."""

    def __init__(self, sender: Sender, keys: KeySchema) -> None:
        self.sender = sender
        self.keys = keys
        #: The fingerprint map also holds sketches (a verified mode pinned on an index opened plain).
        self.sketched = False

    @property
    def cluster(self) -> bool:
        """Whether the keys live on a Redis Cluster."""
        return self.sender.cluster

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send commands in one round trip (per node); their replies in order.

        Args:
            raise_on_error: raise the first error reply; else error replies come back in place.
            durable: on a cluster, wait for a replica to have the writes.

        Raises:
            SimhashRedisError: an error reply, when raise_on_error is set.
        """
        return self.sender.execute(commands, raise_on_error=raise_on_error, durable=durable)

    def run(self, steps: Callable[[], Steps[T]], *, durable: bool = False) -> T:
        """Run a conversation written as steps (`transport.Steps`) that may call the index's scripts.

        Args:
            steps: makes the steps; called again for each new start of the conversation.
            durable: on a cluster, each round trip's writes wait for a replica.

        Raises:
            SimhashRedisError: an error reply.
        """
        return with_scripts(self.sender, lambda exchange: drive(steps(), exchange), durable=durable)

    def run_script(self, script: Script, calls: list[Command], *, durable: bool = False) -> list[Any]:
        """Run calls of a script in one round trip, loading it where it is missing (`run_calls`)."""
        return run_calls(self.sender, calls, (script,), durable=durable)

    def scan(self, kind: KeyKind = "all", *, once: bool = True) -> Iterator[list[bytes]]:
        """The index's keys of one kind (`KeySchema.pattern_of`), in batches, on every primary.

        Args:
            once: drop keys SCAN already gave (it may give one twice); off, nothing is remembered.
        """
        return self._scan(self.keys.pattern_of(kind), once)

    def scan_table(self, table: int) -> Iterator[list[bytes]]:
        """The bucket keys of one table, in batches; a key may come twice (too many to remember)."""
        return self._scan(self.keys.table_pattern(table), False)

    def hashes(self, keys: list[bytes], *, raise_on_error: bool = True) -> list[Any]:
        """The (field, value) pairs of each hash, in one round trip (error replies in place if asked)."""
        replies = self.execute([(b"HGETALL", key) for key in keys], raise_on_error=raise_on_error)
        return [reply if isinstance(reply, Exception) else hash_pairs(reply) for reply in replies]

    def counts(self, *, sketched: bool = False) -> tuple[int, int]:
        """The number of documents and of distinct fingerprints stored.

        On a cluster they are summed from the maps' sizes (tens of milliseconds; `sketched`: a verified
        index, whose sketches are not counted).
        """
        keys = self.keys
        if not self.cluster:
            docs, fps = self.execute([(b"HMGET", keys.counts, b"docs", b"fingerprints")])[0]
            return int(docs or 0), int(fps or 0)
        buckets = range(keys.id_buckets)
        docs = sum(self.execute([(b"HLEN", keys.id_bucket_key(b)) for b in buckets]))
        if not sketched:
            return docs, sum(self.execute([(b"HLEN", keys.fp_bucket_key(b)) for b in buckets]))
        calls = [COUNT_FPS.command([keys.fp_bucket_key(b)], []) for b in buckets]
        return docs, sum(self.run_script(COUNT_FPS, calls))

    def set_counts(self, docs: int, fingerprints: int) -> None:
        """Set the counts hash to what the data holds (after a check, an import)."""
        self.execute([(b"HSET", self.keys.counts, b"docs", docs, b"fingerprints", fingerprints)])

    def used_memory(self) -> int | None:
        """The server's used_memory, or None on a cluster (whose nodes each have their own)."""
        if self.cluster:
            return None
        info = self.execute([(b"INFO", b"memory")])[0]
        for line in bytes(info).splitlines():
            if line.startswith(b"used_memory:"):
                return int(line.partition(b":")[2])
        return None

    def drop(self) -> int:
        """Delete every key of the index (and only the index), meta last; the number deleted (`drop_keys`)."""
        return drop_keys(self.sender, self.keys.prefix, self.keys.name)

    def _scan(self, pattern: str, once: bool) -> Iterator[list[bytes]]:
        seen: set[bytes] = set()
        for batch in self.sender.scan(pattern, _SCAN_COUNT):
            if once:
                batch = [key for key in batch if key not in seen]
                seen.update(batch)
            if batch:
                yield batch
