"""The index's Redis half: its sender and its key schema, through which every command of an index goes.

Everything above (the index, its consistency check, verified mode, stats, dumps) reads and writes Redis
through a `Store`, so retries, error translation and key names each have one owner: the transport for
the first two, `KeySchema` for the last.
"""

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
    """One index's keys on one server or cluster.

    Args:
        sender: where commands go (from `transport.open_sender`).
        keys: the index's key names.
    """

    def __init__(self, sender: Sender, keys: KeySchema) -> None:
        self.sender = sender
        self.keys = keys
        #: Whether the fingerprint map also holds sketches (set when a verified mode is pinned on an
        #: index opened plain): a lookup then asks for ids field by field (`Reads`).
        self.sketched = False

    @property
    def cluster(self) -> bool:
        """Whether the keys live on a Redis Cluster."""
        return self.sender.cluster

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send commands in one round trip (per node) and return their raw replies in order.

        Args:
            commands: the commands.
            raise_on_error: raise the first error reply; else error replies come back in place.
            durable: on a cluster, wait for a replica to have the writes.

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
            SimhashRedisError: an error reply, when raise_on_error is set.
        """
        return self.sender.execute(commands, raise_on_error=raise_on_error, durable=durable)

    def run(self, steps: Callable[[], Steps[T]], *, durable: bool = False) -> T:
        """Run a conversation written as steps (`transport.Steps`) that may call the index's scripts.

        Args:
            steps: makes the steps; called again for each new start of the conversation (after a lost
                connection; a call refused for lack of a script is sent again on its own: `with_scripts`).
            durable: on a cluster, each round trip's writes wait for a replica.

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
            SimhashRedisError: an error reply.
        """
        return with_scripts(self.sender, lambda exchange: drive(steps(), exchange), durable=durable)

    def run_script(self, script: Script, calls: list[Command], *, durable: bool = False) -> list[Any]:
        """Run calls of a Lua script in one round trip, loading it where the server lacks it.

        Args:
            script: the script they call.
            calls: commands built by `Script.command`.
            durable: on a cluster, wait for a replica to have the writes.

        Raises:
            SimhashRedisError: an error reply.
        """
        return run_calls(self.sender, calls, (script,), durable=durable)

    def scan(self, kind: KeyKind = "all", *, once: bool = True) -> Iterator[list[bytes]]:
        """The index's keys of one kind, in batches (on a cluster, from every primary).

        Args:
            kind: "all" keys of the index, or those of the id map, fingerprint map, format 1's
                sketches, band tables, or "windows" (every period of an index with a retention window).
            once: drop keys SCAN already gave (it may give one twice); off, nothing is remembered.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        return self._scan(self.keys.pattern_of(kind), once)

    def scan_table(self, table: int) -> Iterator[list[bytes]]:
        """The bucket keys of one table, in batches; a key may come twice (too many to remember).

        Args:
            table: the table number.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        return self._scan(self.keys.table_pattern(table), False)

    def hashes(self, keys: list[bytes], *, raise_on_error: bool = True) -> list[Any]:
        """The (field, value) pairs of each hash, in one round trip (error replies in place if asked).

        Args:
            keys: the hashes' keys.
            raise_on_error: raise the first error reply (a key of another type, say).

        Raises:
            SimhashRedisError: an error reply, when raise_on_error is set.
        """
        replies = self.execute([(b"HGETALL", key) for key in keys], raise_on_error=raise_on_error)
        return [reply if isinstance(reply, Exception) else hash_pairs(reply) for reply in replies]

    def counts(self, *, sketched: bool = False) -> tuple[int, int]:
        """The number of documents and of distinct fingerprints stored.

        On a standalone server the write scripts (the atomic one, the bulk path's) keep these in the
        counts hash. On a cluster no script can span a document's slots, so they are summed from the
        sizes of the id and fingerprint maps: 2 x id_buckets HLENs, spread over the nodes (tens of
        milliseconds, not for a hot path). In verified mode the fingerprint map also holds each
        fingerprint's sketches, so its fields are counted by a script that leaves those out (a pass
        over every field).

        Args:
            sketched: the index is verified.

        Raises:
            RedisUnavailable: the server cannot be reached.
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
        """Set the counts hash to what the data holds (after a check, an import).

        Args:
            docs: documents in the id map.
            fingerprints: fingerprints in use.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        self.execute([(b"HSET", self.keys.counts, b"docs", docs, b"fingerprints", fingerprints)])

    def used_memory(self) -> int | None:
        """The server's used_memory, or None on a cluster (whose nodes each have their own).

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        if self.cluster:
            return None
        info = self.execute([(b"INFO", b"memory")])[0]
        for line in bytes(info).splitlines():
            if line.startswith(b"used_memory:"):
                return int(line.partition(b":")[2])
        return None

    def drop(self) -> int:
        """Delete every key of the index (and only the index), meta last.

        Returns:
            The number of keys deleted.

        Raises:
            RedisUnavailable: the server cannot be reached; run drop again to finish.
        """
        return drop_keys(self.sender, self.keys.prefix, self.keys.name)

    def _scan(self, pattern: str, once: bool) -> Iterator[list[bytes]]:
        seen: set[bytes] = set()
        for batch in self.sender.scan(pattern, _SCAN_COUNT):
            if once:
                batch = [key for key in batch if key not in seen]
                seen.update(batch)
            if batch:
                yield batch
