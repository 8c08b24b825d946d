"""The shared, persistent Hamming index: block tables of fingerprints in Redis sets."""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any, Literal, overload

import redis
from redis.cluster import RedisCluster

from .. import defaults
from ..codec import decode_fp, encode_fp
from ..errors import ConfigurationMismatch, InvalidArgument
from ..fingerprinting import Document as TextDocument
from ..fingerprinting import Scheme, engine_choice
from ..results import Match, Outcome
from ..store import (
    BulkWrites,
    KeySchema,
    Layout,
    Reads,
    Retention,
    Store,
    Verification,
    Windows,
    Writes,
    encode_id,
    validate_name,
)
from ..transport import Backoff, client_from_url, malformed, open_sender
from . import lifecycle
from .arguments import (
    as_batch,
    check_client,
    check_fp,
    check_k,
    check_options,
    check_pairs,
    check_text,
    chunks,
    fingerprints,
    is_integer,
    iterable,
)
from .batches import (
    DEFAULT_WINDOW,
    BatchProgress,
    Progress,
    apply,
    check_progress,
    check_window,
    in_batches,
    remove_many,
    unzipped,
    window_fingerprints,
    window_ids,
    windows,
)
from .consistency import check_consistency, verify_windows
from .report import VerifyReport
from .unique import UniqueWrites

__all__ = ["Document", "Match", "Outcome", "SimhashIndex"]

#: What can be added or queried: a text, tokens, weighted features, or a precomputed int fingerprint.
Document = TextDocument | int


#: Seconds a handle trusts the meta it read before a write reads it again (a round trip a second at most).
META_TRUSTED = 1.0


class SimhashIndex:
    """A near-duplicate index that any number of processes share through one Redis.

    Opening an existing index adopts its stored configuration (arguments given must agree); a missing
    one is created. Every method refuses a malformed argument (InvalidArgument, InvalidType;
    InvalidFingerprint for an int outside [0, 2**f)) before writing anything of it (a bulk load: of its
    window), and raises RedisUnavailable when the server cannot be reached (every write is idempotent).
    `on_progress` is called after each batch (or window) with the items done so far and its results.

    Args:
        client: a redis-py client (decode_responses may be either).
        name: the index name; its keys are `{prefix}:{name}:...`.
        k: the largest Hamming distance near() answers for (default 3).
        f: fingerprint width in bits: 32, 64 (default) or 128.
        layout: which bits form each table's key (default: k+1 pigeonhole tables).
        scheme: how text becomes a fingerprint (default: `Scheme()` at width f).
        prefix: the first part of every key name.
        id_buckets: buckets of the id map (only when creating).
        backoff: how to wait between retries after a connection error.
        verification: verified mode, pinned at creation; a verified index is written only through
            `VerifiedIndex` (its documents need sketches), read through either.
        retention: forget each document this long after it was last written (a timedelta, seconds,
            "7d", "12h", "90s" or a `Retention`); pinned at creation.
        batch_size: documents per round trip in the batch methods.
        create: create the index when it does not exist (else IndexNotFound is raised).

    Raises:
        ConfigurationMismatch: the stored index disagrees with an explicitly given argument.
        IndexNotFound: the index does not exist and create is false.
        IndexCorrupted: the stored meta cannot be read, or is lost while the data stayed (see `restore`).
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        name: str,
        *,
        k: int | None = None,
        f: int | None = None,
        layout: Layout | None = None,
        scheme: Scheme | None = None,
        prefix: str = defaults.PREFIX,
        id_buckets: int | None = None,
        backoff: Backoff | None = None,
        batch_size: int = defaults.BATCH_SIZE,
        create: bool = True,
        verification: Verification | None = None,
        retention: Retention | timedelta | str | float | None = None,
    ) -> None:
        check_client(client)
        self.name = validate_name(name, "name")
        self.prefix = validate_name(prefix, "prefix")
        self.batch_size = check_options(backoff, batch_size)
        self.client = client
        sender = open_sender(client, backoff)
        asked = {"k": k, "f": f, "layout": layout, "scheme": scheme, "id_buckets": id_buckets}
        wanted, given = lifecycle.requested({**asked, "verification": verification, "retention": retention})
        #: Whether this object created the index (a `VerifiedIndex` of it may then pin its mode).
        self.config, self.created = lifecycle.open_config(
            sender, self.prefix, self.name, wanted, given, create
        )
        self._f, self._k = self.config.f, self.config.k
        self.keys = KeySchema.of(self.prefix, self.name, self.config)
        #: Every command of this index (and of what works on it) goes through it.
        self.store = Store(sender, self.keys)
        #: The periods of an index with a retention window; None for one that keeps its documents.
        self.windows = (
            None if self.config.retention is None else Windows(self.keys, self.config.retention, sender)
        )
        self._reads, self._writes, self._unique = paths(self)
        self._meta_read = time.monotonic()
        # Chosen at the first fingerprint (a wrong SIMHASH_REDIS_ENGINE is not an error of opening).
        self._engine: engine_choice.Engine | None = None

    @classmethod
    def from_url(cls, url: str, name: str, **kwargs: Any) -> SimhashIndex:
        """Open an index on the server at a redis://, rediss:// or unix:// URL (its password never shown)."""
        return cls(client_from_url(url), name, **kwargs)

    @classmethod
    def exists(cls, client: redis.Redis | RedisCluster, name: str, *, prefix: str = defaults.PREFIX) -> bool:
        """Tell whether an index of that name exists on the server."""
        meta_key = KeySchema.meta_key(validate_name(prefix, "prefix"), validate_name(name, "name"))
        return bool(open_sender(client).execute([(b"EXISTS", meta_key)])[0])

    @classmethod
    def restore(cls, client: redis.Redis | RedisCluster, name: str, **config: Any) -> SimhashIndex:
        """Open an index whose meta key was lost, writing it anew from its creation arguments (k required).

        Raises:
            ConfigurationMismatch: the stored data does not fit the stated configuration.
            IndexCorrupted: there is no data to check it against.
        """
        lifecycle.restore(client, name, config)
        return cls(client, name, **config, create=False)

    @property
    def cluster(self) -> bool:
        """Whether the index runs on Redis Cluster."""
        return self.store.cluster

    @property
    def f(self) -> int:
        """Fingerprint width in bits."""
        return self._f

    @property
    def k(self) -> int:
        """The largest distance near() answers for."""
        return self._k

    @property
    def layout(self) -> Layout:
        """The table layout."""
        return self.config.layout

    @property
    def scheme(self) -> Scheme:
        """The fingerprint scheme every worker of this index uses."""
        return self.config.scheme

    def __repr__(self) -> str:
        return (
            f"SimhashIndex(name={self.name!r}, prefix={self.prefix!r}, f={self.f}, k={self.k}, "
            f"{self.layout.describe()})"
        )

    def fingerprint(self, doc: Document) -> int:
        """The fingerprint this index stores for a document (an int fingerprint is checked and returned).

        Raises:
            InvalidArgument: the text is empty or white space (every method taking a document refuses it).
        """
        if type(doc) is not str and (isinstance(doc, int) or is_integer(doc)):
            return check_fp(doc, self._f)
        if not doc or (isinstance(doc, (str, bytes, bytearray)) and doc.isspace()):
            check_text(doc)  # called for a likely blank text only: near's path stays in few modules
        return (self._engine or self._choose_engine()).fingerprint(doc, self.config.scheme)

    def fingerprint_many(self, docs: Sequence[Document]) -> list[int]:
        """Fingerprints for many documents, texts fingerprinted in one vectorised batch."""
        return fingerprints(
            docs,
            self.f,
            lambda texts: (self._engine or self._choose_engine()).fingerprint_many(texts, self.config.scheme),
        )

    def _choose_engine(self) -> engine_choice.Engine:
        self._engine = engine_choice.chosen()
        return self._engine

    def near(self, query: Document, k: int | None = None) -> list[Match]:
        """Every stored document within distance k (default and at most: the index's), nearest first."""
        limit = self._k if k is None else check_k(k, self._k)
        return self._reads.near([self.fingerprint(query)], limit)[0]

    def near_many(
        self, queries: Sequence[Document], k: int | None = None, *, on_progress: BatchProgress | None = None
    ) -> list[list[Match]]:
        """near() for many queries, each batch (`batch_size` queries) in one conversation."""
        limit, on_progress = check_k(k, self.k), check_progress(on_progress)
        fps = self.fingerprint_many(as_batch(queries, "queries"))
        return in_batches(self.batch_size, on_progress, lambda part: self._reads.near(part, limit), fps)

    def get(self, doc_id: str) -> int | None:
        """The fingerprint stored for an id, or None."""
        return self.get_many([doc_id])[0]

    def get_many(self, ids: Sequence[str]) -> list[int | None]:
        """The fingerprints stored for many ids (None where absent), in one round trip."""
        replies = self._reads.stored([encode_id(doc_id) for doc_id in as_batch(ids, "ids")])
        try:
            return [None if reply is None else decode_fp(reply, self.f) for reply in replies]
        except ValueError as exc:
            raise malformed(exc) from None

    def __contains__(self, doc_id: object) -> bool:
        try:
            return isinstance(doc_id, str) and self.get(doc_id) is not None
        except InvalidArgument:  # an id that cannot be stored is not stored
            return False

    def __len__(self) -> int:
        return self.count()[0]

    def count(self) -> tuple[int, int]:
        """The number of documents and of distinct fingerprints stored (a fingerprint in two periods of a
        retention window counts twice)."""
        if self.windows is None:
            return self.store.counts(sketched=self.config.verification is not None)
        counts = self.windows.counts(sketched=self.config.verification is not None)
        return sum(docs for _, docs, _ in counts), sum(fps for _, _, fps in counts)

    def add(self, doc_id: str, doc: Document) -> Outcome:
        """Store a document under an id (1-512 UTF-8 bytes), never half-way: ADDED, REPLACED or UNCHANGED."""
        self._check_writable()
        raw, fp = encode_id(doc_id), self.fingerprint(doc)
        return self._writes.apply([(raw, encode_fp(fp, self._f), None)], [fp])[0]  # type: ignore[return-value]

    @overload
    def add_many(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        unique: Literal[False] = False,
        on_progress: BatchProgress | None = None,
    ) -> list[Outcome]: ...

    @overload
    def add_many(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        unique: Literal[True],
        on_progress: BatchProgress | None = None,
    ) -> list[Outcome | Match]: ...

    def add_many(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        unique: bool = False,
        on_progress: BatchProgress | None = None,
    ) -> list[Outcome] | list[Outcome | Match]:
        """Store many documents, each batch in one atomic script call (a large one of adds: parts of 250).

        Args:
            items: (id, document) pairs; a later pair for the same id wins.
            unique: store a document only if no near-duplicate (distance <= k) is stored, as
                `add_if_new` does, also against the documents earlier in the same call.

        Returns:
            The outcome of each pair, in order (unique: a stored near-duplicate for each one not stored).

        Raises:
            WriteContention: (unique) a document kept meeting concurrent writes; nothing of it was written.
            RedisUnavailable: batches already acknowledged are stored, and no document is half-written.
        """
        self._check_writable()
        progress = check_progress(on_progress)
        pairs = check_pairs(as_batch(items, "items"))
        ids = [encode_id(doc_id) for doc_id, _ in pairs]
        fps = self.fingerprint_many([doc for _, doc in pairs])
        write = self._unique.add if unique else functools.partial(apply, self._writes, self.f)
        return in_batches(self.batch_size, progress, write, ids, fps)

    def bulk_add(
        self,
        items: Iterable[tuple[str, Document]],
        *,
        window: int = DEFAULT_WINDOW,
        on_progress: Progress | None = None,
    ) -> list[Outcome]:
        """Store many documents, one command per key and window (a bulk load); each pair's outcome, in order.

        Never half-visible to near(); others must not write its ids meanwhile (docs/guarantees.md).

        Args:
            items: (id, document) pairs, read lazily; a later pair for the same id wins.
            window: pairs grouped per round of commands (the larger, the more entries share a key).

        Raises:
            RedisUnavailable: earlier windows are stored; running the same load again completes it.
        """
        self._check_writable()
        check_window(window, on_progress)
        columns = (unzipped(batch) for batch in chunks(iterable(items, "items"), window))
        return self.bulk_add_columns(columns, window=window, on_progress=on_progress)

    def bulk_add_columns(
        self,
        batches: Iterable[tuple[Sequence[str], Sequence[Document]]],
        *,
        window: int = DEFAULT_WINDOW,
        on_progress: Progress | None = None,
    ) -> list[Outcome]:
        """`bulk_add` of batches of two parallel lists of equal length, ids and documents, read lazily."""
        self._check_writable()
        check_window(window, on_progress)
        writes, size = self._writes, self.batch_size
        # With a retention window, atomic script calls: the grouped commands set no expiry.
        bulk = BulkWrites(self.store, self.layout, writes, size) if self.windows is None else None
        outcomes: list[Outcome] = []
        for ids, docs in windows(batches, window):
            raws, fps = window_ids(ids), window_fingerprints(docs, self.f, self.fingerprint_many)
            if bulk is not None:
                writes.check()  # the grouped commands go past `writes.apply`, which checks each batch
                done = bulk.write(raws, fps)
            else:
                done = in_batches(size, None, functools.partial(apply, writes, self.f), raws, fps)
            outcomes.extend(done)
            if on_progress is not None:
                on_progress(len(outcomes), done)
        return outcomes

    def add_if_new(self, doc_id: str, doc: Document) -> Match | None:
        """Store a document unless a near-duplicate (distance <= k) is stored, atomically: of workers
        racing to add near-duplicates of each other, exactly one stores its document.

        Returns:
            None if stored; else a stored near-duplicate: the id's own entry when it is stored within k
            (a resumed load tells "already stored"), else the nearest (ties by id).

        Raises:
            WriteContention: the document kept meeting concurrent writes (nothing of it was written).
        """
        return self.add_if_new_many([(doc_id, doc)])[0]

    def add_if_new_many(self, items: Iterable[tuple[str, Document]]) -> list[Match | None]:
        """`add_if_new` for many documents (also checked against earlier ones of the batch)."""
        return [r if isinstance(r, Match) else None for r in self.add_many(items, unique=True)]

    def remove(self, doc_id: str) -> bool:
        """Remove a document id (its fingerprint stays while another id has it); whether it was stored."""
        return self.remove_many([doc_id])[0]

    def remove_many(self, ids: Iterable[str], *, on_progress: BatchProgress | None = None) -> list[bool]:
        """Remove many ids, batch by batch; for each id, whether it was stored."""
        self._check_writable()
        return remove_many(self.batch_size, self._writes, ids, check_progress(on_progress))

    def verify(self, repair: bool = False) -> VerifyReport:
        """Check that the id map, the fingerprint map, the tables and the counts agree.

        On a standalone server it may run beside writers (each problem is checked again, and fixed, in one
        atomic step with its keys), except verified mode's missing-sketch and band checks and a retention
        window's expiry and period checks; on a cluster, run it while no worker writes.

        Args:
            repair: also fix what is found, following the id map.
        """
        tables = len(self.layout.tables)
        if self.windows is not None:
            return verify_windows(self.store, self.windows, self.f, tables, repair, self.config.verification)
        return check_consistency(self.store, self.f, tables, repair, self.config.verification)

    def _check_writable(self) -> None:
        if self.config.verification is not None:  # a document without a sketch would never be found
            raise ConfigurationMismatch(
                f"index {self.name!r} is verified (its documents carry sketches): write to it "
                "through VerifiedIndex (simhash_redis.VerifiedIndex.from_url), or with the command line"
            )

    def check_unchanged(self) -> None:
        """Refuse to write if the index was dropped, or made again otherwise, since this object read its
        meta; every batch and bulk window calls it (the meta is read again once a second at most).

        Raises:
            IndexNotFound: the index was dropped.
            ConfigurationMismatch: its configuration is no longer this handle's.
        """
        now = time.monotonic()
        if now - self._meta_read >= META_TRUSTED:
            lifecycle.check_unchanged(self.store.sender, self.keys.meta, self.name, self.config)
            self._meta_read = now

    def drop(self) -> int:
        """Delete every key of this index (and only this index), meta last; the number deleted."""
        return self.store.drop()


def paths(index: SimhashIndex) -> tuple[Reads, Writes, UniqueWrites]:
    """The lookups, writes and add-if-new of an index, in its mode (a verified index's carry sketches)."""
    mode, tables = index.config.verification, len(index.layout.tables)
    reads = Reads(index.store, index.name, index.config, index.windows)
    # Held weakly: a cycle would leave the index's connections to the collector.
    owner = weakref.ref(index)

    def check() -> None:
        live = owner()
        if live is not None:
            live.check_unchanged()

    writes = Writes(index.store, index.f, tables, mode, check, index.windows)
    return reads, writes, UniqueWrites(index.store, reads, writes, index.f, index.k)
