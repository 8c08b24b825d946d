"""A high-recall verified index: SimHash candidates at a loose k, each confirmed by a stored MinHash sketch.

SimHash at k = 3 finds near-duplicates above Jaccard ~0.95; pairs at Jaccard 0.8 differ in ~10 of 64
bits. `VerifiedIndex` asks the wrapped index for everything within its (larger) k, which lets false
positives in, then keeps the candidates whose b-bit MinHash sketch estimates Jaccard >= a threshold.

Sketches live in the wrapped index's own key space, in hashes bucketed like its id map::

    {prefix}:{name}:sk:{bucket}   hash   document id -> sketch bytes   (bucket = xxh3_64(id) mod id_buckets)

so ``SimhashIndex.drop`` and the pattern ``{prefix}:{name}:*`` cover them. A sketch is written before
the document's fingerprint, and removed after it (only if the id is still absent, checked atomically by a
script on a standalone server), so every stored document has its sketch even with concurrent writers.

The mode (the sketch's parameters and the threshold) is pinned in the index's meta (field ``verified``),
so every worker verifies alike, and a plain `SimhashIndex` of a verified index only reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..codec import encode_fp
from ..errors import ConfigurationMismatch, IndexCorrupted, IndexNotFound, InvalidArgument, InvalidType
from ..fingerprinting import MinHasher
from ..results import Match, VerifiedMatch
from ..store import Reads, SketchedGuard, Verification, Write, pin_meta, writes_for
from ..store.keys import encode_id
from ..store.scripts import Script
from ..transport import Command, client_from_url
from . import batches
from .arguments import check_fp, texts
from .simhash_index import Outcome, SimhashIndex
from .sketch_judge import SketchJudge
from .unique import UniqueWrites

__all__ = ["VerifiedIndex", "VerifiedMatch"]

#: Text, UTF-8 bytes, or pre-segmented tokens: what both a fingerprint and a sketch can be made from.
VerifiedDocument = str | bytes | Sequence[str]

# Deletes a sketch only while its id is absent from the id map: a concurrent re-add keeps its sketch.
_DROP_SKETCH = Script("drop_sketch")


class VerifiedIndex:
    """Wraps a `SimhashIndex`: stores a MinHash sketch per document and verifies near() candidates with it.

    Open the wrapped index with a k large enough for the recall wanted, with a layout that keeps that
    k affordable, e.g. ``SimhashIndex(client, "news", k=8, layout=Layout.permuted(64, 8, blocks=10))``.
    The first `VerifiedIndex` of an index pins its mode (sketch parameters, threshold) in the meta; later
    ones adopt it, and refuse parameters that differ.

    Args:
        index: the wrapped index (its k bounds the candidates).
        hasher: the sketch parameters (default: the pinned ones, else 256 permutations of 8 bits over
            word 3-shingles).
        threshold: the estimated Jaccard similarity from which a candidate is a near-duplicate (default:
            the pinned one, else 0.8).

    Raises:
        ConfigurationMismatch: hasher or threshold differs from the mode pinned in the index's meta.
        IndexNotFound: the index was dropped before its mode could be pinned.
        IndexCorrupted: the pinned mode is malformed.
        InvalidArgument: threshold is out of (0, 1].
        InvalidType: index or hasher is of the wrong type.
        RedisUnavailable: the server cannot be reached.
    """

    def __init__(
        self, index: SimhashIndex, hasher: MinHasher | None = None, threshold: float | None = None
    ) -> None:
        if not isinstance(index, SimhashIndex):
            raise InvalidType(f"index must be a SimhashIndex, got {type(index).__name__}")
        asked = Verification.of(hasher, 0.8 if threshold is None else threshold)
        self.index = index
        # The index's own store: its retries, backoff, error translation and key names apply here too.
        self.store = index.store
        self.verification = self._pinned(index.config.verification or self._pin(asked), hasher, threshold)
        self.hasher = self.verification.hasher()
        self.threshold = self.verification.threshold
        # The index's own write paths, which its public methods refuse to use on a verified index.
        tables = len(index.layout.tables)
        self._writes = writes_for(self.store, index.f, tables)
        reads = Reads(self.store, index.name, index.f, tables)
        self._unique = UniqueWrites(self.store, reads, self._writes, index.f, index.k)

    @classmethod
    def from_url(
        cls,
        url: str,
        name: str,
        *,
        hasher: MinHasher | None = None,
        threshold: float | None = None,
        **kwargs: Any,
    ) -> VerifiedIndex:
        """Open or create a verified index on the server at a URL.

        Args:
            url: the server's URL (credentials in it never appear in messages).
            name: the index name.
            hasher, threshold: as the class.
            **kwargs: the arguments of `SimhashIndex` (k, layout, ...).

        Raises:
            ConfigurationMismatch, IndexNotFound, InvalidArgument, InvalidType, RedisUnavailable: as
                `SimhashIndex` and the class.
        """
        client = client_from_url(url)
        try:
            return cls(verifiable(client, name, hasher, threshold, kwargs), hasher, threshold)
        except BaseException:
            client.close()
            raise

    def _pin(self, mode: Verification) -> Verification:
        """Pin a mode in the meta of an index that has none yet (or adopt one pinned meanwhile).

        An index that holds documents but no sketch was made plain, and stays so: its documents could
        never be confirmed. One with sketches was made by a `VerifiedIndex` before modes were pinned.
        """
        docs = self.index.count()[0]
        if docs and not any(self.store.scan("sketch")):
            raise ConfigurationMismatch(
                f"index {self.index.name!r} holds {docs:,} documents without MinHash sketches: verified mode "
                "is chosen when an index is created; create a verified index and load the documents into it"
            )
        stored = pin_meta(self.store.sender, self.index.keys.meta, "verified", mode.to_meta())
        if stored is None:
            raise IndexNotFound(f"index {self.index.name!r} was dropped while it was being opened")
        try:
            pinned = Verification.from_meta(stored)
        except ValueError as exc:
            raise IndexCorrupted(f"index {self.index.name!r} has a malformed verified mode: {exc}") from None
        self.index.config = dataclasses.replace(self.index.config, verification=pinned)
        return pinned

    def _pinned(
        self, pinned: Verification, hasher: MinHasher | None, threshold: float | None
    ) -> Verification:
        """The pinned mode, unless a hasher or threshold given explicitly differs from it."""
        if (hasher is not None and hasher.describe() != pinned.hasher().describe()) or (
            threshold is not None and threshold != pinned.threshold
        ):
            given = Verification.of(
                hasher or pinned.hasher(), pinned.threshold if threshold is None else threshold
            )
            raise ConfigurationMismatch(
                f"index {self.index.name!r} is verified with {pinned.to_meta()!r}, not {given.to_meta()!r}; "
                "open it without hasher and threshold to use the pinned mode"
            )
        return pinned

    def sketch_key(self, doc_id: str) -> bytes:
        """The hash holding a document's sketch.

        Args:
            doc_id: the document id.

        Returns:
            ``{base}:sk:{xxh3_64(id) mod id_buckets}``.
        """
        return self.store.keys.sketch_bucket(doc_id.encode())

    def add(self, doc_id: str, doc: VerifiedDocument) -> Outcome:
        """Store a document's sketch, then its fingerprint.

        Args:
            doc_id: the document id.
            doc: text, UTF-8 bytes or tokens.

        Returns:
            The wrapped index's outcome: ADDED, REPLACED or UNCHANGED.

        Raises:
            InvalidArgument, InvalidType: a malformed id or document.
            RedisUnavailable: the server cannot be reached.
        """
        return self.add_many([(doc_id, doc)])[0]

    def add_many(self, items: Iterable[tuple[str, VerifiedDocument]]) -> list[Outcome]:
        """Store many documents: one round trip of sketches per batch, then the index's own batch write.

        Args:
            items: (id, document) pairs.

        Returns:
            The outcome of each pair, in order.

        Raises:
            InvalidArgument, InvalidType: a malformed id or document (nothing of its batch is written).
            RedisUnavailable: the server cannot be reached.
        """
        outcomes: list[Outcome] = []
        for ids, docs in self._batches(items):
            # Fingerprint first so a document the index would refuse leaves no sketch behind.
            fps = self.index.fingerprint_many(docs)
            outcomes.extend(self._add_batch(ids, fps, self.hasher.sketch_many(docs)))
        return outcomes

    def add_sketched(
        self,
        ids: Sequence[str],
        fps: Sequence[int],
        sketches: Sequence[bytes | None],
        *,
        unique: bool = False,
    ) -> list[Outcome | VerifiedMatch]:
        """Store documents fingerprinted and sketched already (by a loader's worker processes).

        Args:
            ids: the document ids.
            fps: their fingerprints, by this index's scheme.
            sketches: their sketches, by this index's hasher; None stores a document without one (as an
                export of documents written before the index was verified holds them), never matched.
            unique: as `add_if_new`: a stored near-duplicate in place of the outcome of each document
                not stored (every sketch needed).

        Returns:
            Each document's outcome, or (unique) its stored near-duplicate.

        Raises:
            InvalidArgument, InvalidType, InvalidFingerprint: malformed or mismatched arguments (nothing
                of the call is written).
            WriteContention, RedisUnavailable: as `add_if_new`.
        """
        if not len(ids) == len(fps) == len(sketches):
            raise InvalidArgument("ids, fps and sketches must be of one length")
        raws = [encode_id(doc_id) for doc_id in ids]
        checked = [check_fp(fp, self.index.f) for fp in fps]
        size = self.hasher.sketch_bytes
        for sketch in sketches:
            if (sketch is not None or unique) and (not isinstance(sketch, bytes) or len(sketch) != size):
                raise InvalidArgument(f"a sketch of this index is {size} bytes, got {sketch!r:.40}")
        out: list[Outcome | VerifiedMatch] = []
        step = self.index.batch_size
        known = [sketch for sketch in sketches if sketch is not None]  # all of them when unique: checked
        for start in range(0, len(ids), step):
            part = slice(start, start + step)
            if unique:
                out.extend(self._add_if_new_batch(raws[part], checked[part], known[part]))
            else:
                out.extend(self._add_batch(list(ids[part]), checked[part], sketches[part]))
        return out

    def _batches(
        self, items: Iterable[tuple[str, VerifiedDocument]]
    ) -> Iterator[tuple[list[str], list[Any]]]:
        """The pairs a batch at a time, as ids and documents, each batch checked before it is written."""
        pairs = list(items)
        for start in range(0, len(pairs), self.index.batch_size):
            batch = pairs[start : start + self.index.batch_size]
            for item in batch:
                if not isinstance(item, tuple) or len(item) != 2:
                    raise InvalidType("items must be (str id, document) pairs")
                encode_id(item[0])  # a malformed id is refused before any sketch is written
            yield [doc_id for doc_id, _ in batch], texts([doc for _, doc in batch])

    def _add_batch(self, ids: list[str], fps: list[int], sketches: Sequence[bytes | None]) -> list[Outcome]:
        """One batch: each document with its sketch in the index's atomic write (a standalone server),
        else the sketches in one round trip and the documents after them.

        A document without a sketch (None) loses any sketch its id had: it is not its text's.
        """
        if not self.store.cluster and all(sketch is not None for sketch in sketches):
            ops: list[Write] = [
                (
                    doc_id.encode(),
                    encode_fp(fp, self.index.f),
                    SketchedGuard(None, self.sketch_key(doc_id), sketch),
                )
                for doc_id, fp, sketch in zip(ids, fps, sketches, strict=True)
                if sketch is not None
            ]
            # Without a guard to refuse them, every write has an outcome (None is a refused guard's).
            return [outcome for outcome in self._writes.apply(ops) if outcome is not None]
        commands: list[Command] = [
            (b"HDEL", self.sketch_key(doc_id), doc_id.encode())
            if sketch is None
            else (b"HSET", self.sketch_key(doc_id), doc_id.encode(), sketch)
            for doc_id, sketch in zip(ids, sketches, strict=True)
        ]
        if commands:
            # On a cluster, acknowledged by a replica like the documents after them.
            self.store.execute(commands, durable=True)
        return batches.add_many(self.index, self._writes, None, list(zip(ids, fps, strict=True)), None)

    def _add_if_new_batch(
        self, raws: list[bytes], fps: list[int], sketches: list[bytes]
    ) -> list[Outcome | VerifiedMatch]:
        """One batch of add-if-new: each document's outcome, or its confirmed near-duplicate."""
        judge = SketchJudge(self, raws, sketches)
        results: list[Outcome | VerifiedMatch] = []
        for i, result in enumerate(self._unique.add(raws, fps, judge)):
            if isinstance(result, Match):
                similar = judge.jaccard[(i, result.id)]
                results.append(VerifiedMatch(result.id, result.fingerprint, result.distance, similar))
            else:
                results.append(result)
        return results

    def remove(self, doc_id: str) -> bool:
        """Remove a document: its fingerprint, then its sketch.

        Args:
            doc_id: the document id.

        Returns:
            True if it was stored.

        Raises:
            InvalidArgument, InvalidType: the id is malformed.
            RedisUnavailable: the server cannot be reached.
        """
        return self.remove_many([doc_id])[0]

    def remove_many(self, ids: Sequence[str]) -> list[bool]:
        """Remove many documents: fingerprints first, then (one round trip) the sketches of absent ids.

        Args:
            ids: the document ids.

        Returns:
            For each id, whether it was stored.

        Raises:
            InvalidArgument, InvalidType: an id is malformed.
            RedisUnavailable: the server cannot be reached.
        """
        removed = batches.remove_many(self.index, self._writes, ids, None)
        if self.index.cluster:
            # Cluster: the id map and the sketch hash are in different slots, so no script can check
            # and delete atomically; a re-add racing this remove may lose its sketch (it is then
            # unverifiable, never wrongly matched).
            raws = [doc_id.encode() for doc_id in ids]
            present = self.store.execute([(b"HEXISTS", self.index.keys.id_bucket(r), r) for r in raws])
            gone: list[Command] = [
                (b"HDEL", self.sketch_key(r.decode()), r) for r, p in zip(raws, present, strict=True) if not p
            ]
            self.store.execute(gone, durable=True)
            return removed
        calls = [
            _DROP_SKETCH.command([self.index.keys.id_bucket(raw), self.sketch_key(doc_id)], [raw])
            for doc_id, raw in ((doc_id, doc_id.encode()) for doc_id in ids)
        ]
        self.store.run_script(_DROP_SKETCH, calls)
        return removed

    def sketch_of(self, doc_id: str) -> bytes | None:
        """The sketch stored for an id, or None.

        Args:
            doc_id: the document id.

        Returns:
            The sketch bytes.
        """
        reply = self.store.execute([(b"HGET", self.sketch_key(doc_id), doc_id.encode())])[0]
        return None if reply is None else bytes(reply)

    def near(
        self, query: VerifiedDocument, threshold: float | None = None, k: int | None = None
    ) -> list[VerifiedMatch]:
        """Stored documents whose estimated Jaccard similarity with the query is >= threshold.

        Args:
            query: text, UTF-8 bytes or tokens.
            threshold: the Jaccard threshold, in [0, 1] (default: the index's).
            k: the candidates' largest Hamming distance (default and at most: the index's k).

        Returns:
            The confirmed matches, most similar first, then nearest, then by id.

        Raises:
            InvalidArgument: threshold or k is out of range.
            RedisUnavailable: the server cannot be reached.
        """
        return self.near_many([query], threshold, k)[0]

    def near_many(
        self, queries: Sequence[VerifiedDocument], threshold: float | None = None, k: int | None = None
    ) -> list[list[VerifiedMatch]]:
        """near() for many queries: the index's two round trips, plus one for all candidates' sketches.

        A candidate whose sketch is missing (a document added through the plain index) is dropped:
        it cannot be verified.

        Args:
            queries: the queries.
            threshold: the Jaccard threshold, in [0, 1] (default: the index's).
            k: the candidates' largest Hamming distance.

        Returns:
            For each query, its confirmed matches.

        Raises:
            InvalidArgument: threshold or k is out of range.
            RedisUnavailable: the server cannot be reached.
        """
        if threshold is None:
            threshold = self.threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise InvalidArgument(f"threshold must be a number in [0, 1], got {threshold!r}")
        docs = texts(queries)
        fps = self.index.fingerprint_many(docs)
        candidates = self.index.near_many(fps, k)
        wanted = list(dict.fromkeys(m.id for found in candidates for m in found))
        if not wanted:
            return [[] for _ in docs]
        replies = self.store.execute([(b"HGET", self.sketch_key(i), i.encode()) for i in wanted])
        sketches = {i: bytes(r) for i, r in zip(wanted, replies, strict=True) if r is not None}
        results: list[list[VerifiedMatch]] = []
        for doc, found in zip(docs, candidates, strict=True):
            kept = [m for m in found if m.id in sketches]
            if not kept:
                results.append([])
                continue
            sims = self.hasher.estimate_many(self.hasher.sketch(doc), [sketches[m.id] for m in kept])
            matches = [
                VerifiedMatch(m.id, m.fingerprint, m.distance, float(s))
                for m, s in zip(kept, sims.tolist(), strict=True)
                if s >= threshold
            ]
            matches.sort(key=lambda m: (-m.jaccard, m.distance, m.id))
            results.append(matches)
        return results

    def add_if_new(self, doc_id: str, doc: VerifiedDocument) -> VerifiedMatch | None:
        """Store a document unless a verified near-duplicate is stored, atomically.

        A candidate within the index's k counts when its sketch estimates a Jaccard similarity of at
        least the index's threshold. Of several workers racing to add near-duplicates of each other,
        exactly one stores its document, as `SimhashIndex.add_if_new` guarantees.

        Args:
            doc_id: the document id.
            doc: text, UTF-8 bytes or tokens.

        Returns:
            None if stored; else the stored near-duplicate: the id's own entry when this id is stored
            with a confirmed near-duplicate text, else the most similar (then nearest, then by id).

        Raises:
            InvalidArgument, InvalidType: a malformed id or document.
            WriteContention: the document kept meeting concurrent writes (nothing of it was written).
            RedisUnavailable: the server cannot be reached.
        """
        return self.add_if_new_many([(doc_id, doc)])[0]

    def add_if_new_many(self, items: Iterable[tuple[str, VerifiedDocument]]) -> list[VerifiedMatch | None]:
        """`add_if_new` for many documents, a batch at a time; also checked against earlier ones.

        Args:
            items: (id, document) pairs.

        Returns:
            For each pair, None if stored, else the stored near-duplicate.

        Raises:
            InvalidArgument, InvalidType: a malformed id or document (nothing of its batch is written).
            WriteContention, RedisUnavailable: as `add_if_new`.
        """
        results: list[VerifiedMatch | None] = []
        for ids, docs in self._batches(items):
            raws = [doc_id.encode() for doc_id in ids]
            found = self._add_if_new_batch(
                raws, self.index.fingerprint_many(docs), self.hasher.sketch_many(docs)
            )
            results.extend(r if isinstance(r, VerifiedMatch) else None for r in found)
        return results


def verifiable(
    client: Any, name: str, hasher: MinHasher | None, threshold: float | None, options: dict[str, Any]
) -> SimhashIndex:
    """The index a `VerifiedIndex` of that name wraps: opened, or created verified from the start.

    Raises:
        InvalidArgument: options name `verification` (the mode is hasher and threshold).
        IndexNotFound, ConfigurationMismatch, RedisUnavailable: as `SimhashIndex`.
    """
    if "verification" in options:
        raise InvalidArgument("give the verified mode as hasher and threshold, not verification")
    options = dict(options)
    create = options.pop("create", True)
    try:
        return SimhashIndex(client, name, create=False, **options)
    except IndexNotFound:
        if not create:
            raise
        # Created verified from the start: no plain writer can come between creation and pinning.
        mode = Verification.of(hasher, 0.8 if threshold is None else threshold)
        return SimhashIndex(client, name, verification=mode, **options)
