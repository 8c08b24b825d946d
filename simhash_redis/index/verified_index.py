"""A high-recall verified index: SimHash candidates at a loose k, each confirmed by a stored MinHash sketch.

SimHash at k = 3 finds near-duplicates above Jaccard ~0.95; pairs at Jaccard 0.8 differ in ~10 of 64
bits. `VerifiedIndex` asks the wrapped index for everything within its (larger) k, which lets false
positives in, then keeps the candidates whose b-bit MinHash sketch estimates Jaccard >= a threshold.

Sketches live in the wrapped index's own key space, in hashes bucketed like its id map::

    {prefix}:{name}:sk:{bucket}   hash   document id -> sketch bytes   (bucket = xxh3_64(id) mod id_buckets)

so ``SimhashIndex.drop`` and the pattern ``{prefix}:{name}:*`` cover them. A sketch is written before
the document's fingerprint, and removed after it (only if the id is still absent, checked atomically by a
script on a standalone server), so every stored document has its sketch even with concurrent writers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..errors import InvalidArgument, InvalidType
from ..fingerprinting import MinHasher
from ..store.keys import encode_id
from ..store.scripts import Script
from ..transport import Command
from .simhash_index import Outcome, SimhashIndex

__all__ = ["VerifiedIndex", "VerifiedMatch"]

#: Text, UTF-8 bytes, or pre-segmented tokens: what both a fingerprint and a sketch can be made from.
VerifiedDocument = str | bytes | Sequence[str]

# Deletes a sketch only while its id is absent from the id map: a concurrent re-add keeps its sketch.
_DROP_SKETCH = Script("drop_sketch")


class VerifiedMatch(NamedTuple):
    """A stored document confirmed as a near-duplicate: id, fingerprint, distance, estimated Jaccard."""

    id: str
    fingerprint: int
    distance: int
    jaccard: float


class VerifiedIndex:
    """Wraps a `SimhashIndex`: stores a MinHash sketch per document and verifies near() candidates with it.

    Open the wrapped index with a k large enough for the recall wanted, with a layout that keeps that
    k affordable, e.g. ``SimhashIndex(client, "news", k=8, layout=Layout.permuted(64, 8, blocks=10))``.

    Args:
        index: the wrapped index (its k bounds the candidates).
        hasher: the sketch parameters (default: 256 permutations of 8 bits over word 3-shingles);
            every process of one index must use the same.

    Raises:
        InvalidType: index or hasher is of the wrong type.
    """

    def __init__(self, index: SimhashIndex, hasher: MinHasher | None = None) -> None:
        if not isinstance(index, SimhashIndex):
            raise InvalidType(f"index must be a SimhashIndex, got {type(index).__name__}")
        if hasher is not None and not isinstance(hasher, MinHasher):
            raise InvalidType(f"hasher must be a MinHasher, got {type(hasher).__name__}")
        self.index = index
        self.hasher = hasher or MinHasher()
        # The index's own store: its retries, backoff, error translation and key names apply here too.
        self.store = index.store

    def sketch_key(self, doc_id: str) -> bytes:
        """The hash holding a document's sketch.

        Args:
            doc_id: the document id.

        Returns:
            ``{base}:sk:{xxh3_64(id) mod id_buckets}``.
        """
        return self.store.keys.sketch_bucket(doc_id.encode())

    def _docs(self, docs: Sequence[object]) -> list[VerifiedDocument]:
        for i, doc in enumerate(docs):
            if isinstance(doc, (int, dict)) or not isinstance(doc, (str, bytes, Sequence)):
                raise InvalidType(
                    f"docs[{i}] must be a text, bytes or tokens (a sketch needs the text), "
                    f"got {type(doc).__name__}"
                )
        return list(docs)  # type: ignore[arg-type]

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
        pairs = list(items)
        outcomes: list[Outcome] = []
        size = self.index.batch_size
        for start in range(0, len(pairs), size):
            batch = pairs[start : start + size]
            for item in batch:
                if not isinstance(item, tuple) or len(item) != 2:
                    raise InvalidType("items must be (str id, document) pairs")
                encode_id(item[0])  # a malformed id is refused before any sketch is written
            docs = self._docs([doc for _, doc in batch])
            # Fingerprint first so a document the index would refuse leaves no sketch behind.
            fps = self.index.fingerprint_many(docs)
            sketches = self.hasher.sketch_many(docs)
            commands: list[Command] = [
                (b"HSET", self.sketch_key(doc_id), doc_id.encode(), sketch)
                for (doc_id, _), sketch in zip(batch, sketches, strict=True)
            ]
            self.store.execute(commands)
            outcomes.extend(
                self.index.add_many([(doc_id, fp) for (doc_id, _), fp in zip(batch, fps, strict=True)])
            )
        return outcomes

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
        removed = self.index.remove_many(ids)
        if self.index.cluster:
            # Cluster: the id map and the sketch hash are in different slots, so no script can check
            # and delete atomically; a re-add racing this remove may lose its sketch (it is then
            # unverifiable, never wrongly matched).
            raws = [doc_id.encode() for doc_id in ids]
            present = self.store.execute([(b"HEXISTS", self.index.keys.id_bucket(r), r) for r in raws])
            gone: list[Command] = [
                (b"HDEL", self.sketch_key(r.decode()), r) for r, p in zip(raws, present, strict=True) if not p
            ]
            self.store.execute(gone)
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
        self, query: VerifiedDocument, threshold: float = 0.8, k: int | None = None
    ) -> list[VerifiedMatch]:
        """Stored documents whose estimated Jaccard similarity with the query is >= threshold.

        Args:
            query: text, UTF-8 bytes or tokens.
            threshold: the Jaccard threshold, in [0, 1].
            k: the candidates' largest Hamming distance (default and at most: the index's k).

        Returns:
            The confirmed matches, most similar first, then nearest, then by id.

        Raises:
            InvalidArgument: threshold or k is out of range.
            RedisUnavailable: the server cannot be reached.
        """
        return self.near_many([query], threshold, k)[0]

    def near_many(
        self, queries: Sequence[VerifiedDocument], threshold: float = 0.8, k: int | None = None
    ) -> list[list[VerifiedMatch]]:
        """near() for many queries: the index's two round trips, plus one for all candidates' sketches.

        A candidate whose sketch is missing (a document added through the plain index) is dropped:
        it cannot be verified.

        Args:
            queries: the queries.
            threshold: the Jaccard threshold, in [0, 1].
            k: the candidates' largest Hamming distance.

        Returns:
            For each query, its confirmed matches.

        Raises:
            InvalidArgument: threshold or k is out of range.
            RedisUnavailable: the server cannot be reached.
        """
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise InvalidArgument(f"threshold must be a number in [0, 1], got {threshold!r}")
        docs = self._docs(queries)
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
