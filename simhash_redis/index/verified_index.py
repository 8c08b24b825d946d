"""A high-recall verified index: SimHash candidates at a loose k, each confirmed by a stored sketch."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from .. import defaults
from ..codec import decode_ids, decode_sketches
from ..errors import ConfigurationMismatch, IndexCorrupted, IndexNotFound, InvalidArgument, InvalidType
from ..fingerprinting import Sketcher
from ..results import Match, VerifiedMatch
from ..store import BulkWrites, Reads, SketchedGuard, Verification, pin_meta
from ..store.candidates import verified_matches_of
from ..store.keys import encode_id
from ..store.reads import Bands
from ..transport import client_from_url
from . import batches
from .arguments import as_batch, check_fp, check_k, check_max_candidates, check_pairs, texts
from .batches import in_batches
from .report import VerifyReport
from .simhash_index import Outcome, SimhashIndex, paths
from .unique import SketchJudge, confirmed_many

__all__ = ["VerifiedIndex", "VerifiedMatch", "checked_threshold", "verifiable", "verified_mode"]

#: Text, UTF-8 bytes, or pre-segmented tokens: what both a fingerprint and a sketch can be made from.
VerifiedDocument = str | bytes | Sequence[str]

# Reads of an id's fingerprint and sketches, while writers keep moving the id to other fingerprints.
_SKETCH_READS = 5

#: The band candidates a lookup verifies at most by default: fast among thousands of pages of one template,
#: at a little recall there (docs/quality.md, "A limit: pages that share a template").
MAX_CANDIDATES: int | None = 256


class VerifiedIndex:
    """Wraps a `SimhashIndex`: stores a sketch per document and verifies near() candidates with it.

    Candidates come from the wrapped index's tables (within its k) and from the sketch's band tables, at
    any distance. The first `VerifiedIndex` of an index the wrapped `SimhashIndex` created (or of an empty
    one, with convert) pins its mode in the meta; later ones adopt it. Errors as `SimhashIndex`'s.

    Args:
        index: the wrapped index (its k bounds the Hamming candidates).
        hasher: the sketch parameters (default: the pinned ones, else an odd sketch over word
            3-shingles, `BandedOddSketcher()`, with 8 band tables of 4 values).
        threshold: the estimated Jaccard similarity from which a candidate is a near-duplicate (default:
            the pinned one, else 0.8).
        band_buckets: the hashes each band table is spread over, fixed when the mode is pinned (default:
            the pinned number, else 16,384).
        max_candidates: the band candidates the near calls verify at most per query (default 256;
            None: every one; else a positive int), half those sharing its rarest bands, half the nearest.
            Never capped: table hits within k, the add-if-new paths (so that a near-duplicate is never
            stored), an index of 128-bit fingerprints.
        convert: make verified an existing plain index that holds no documents (without it, only an
            index the wrapped `SimhashIndex` created is made verified, as `open_index` does).

    Raises:
        ConfigurationMismatch: hasher, threshold or band_buckets differs from the mode pinned in the
            index's meta; the index is plain (created elsewhere, and not converted), or holds documents
            without sketches.
        IndexNotFound: the index was dropped before its mode could be pinned.
        IndexCorrupted: the pinned mode is malformed.
    """

    def __init__(
        self,
        index: SimhashIndex,
        hasher: Sketcher | None = None,
        threshold: float | None = None,
        band_buckets: int | None = None,
        max_candidates: int | None = MAX_CANDIDATES,
        *,
        convert: bool = False,
    ) -> None:
        if not isinstance(index, SimhashIndex):
            raise InvalidType(f"index must be a SimhashIndex, got {type(index).__name__}")
        cap = check_max_candidates(max_candidates)
        self.index = index
        self.store = index.store
        self.verification = verified_mode(index, hasher, threshold, band_buckets, convert)
        self.hasher = self.verification.hasher()
        self.threshold = self.verification.threshold
        # Add-if-new judges every candidate (reads of its own): a capped read could let a duplicate in.
        _, self._writes, self._unique = paths(index)
        self._reads = Reads(self.store, index.name, index.config, index.windows)
        self._reads.band_cap = cap

    @property
    def max_candidates(self) -> int | None:
        """The band candidates a query verifies at most (None: every one)."""
        return self._reads.band_cap

    @max_candidates.setter
    def max_candidates(self, cap: int | None) -> None:
        self._reads.band_cap = check_max_candidates(cap)

    @property
    def k(self) -> int:
        """The largest distance of the Hamming candidates (the wrapped index's k)."""
        return self.index.k

    @property
    def f(self) -> int:
        """Fingerprint width in bits."""
        return self.index.f

    def get(self, doc_id: str) -> int | None:
        """The fingerprint stored for an id, or None (`SimhashIndex.get`)."""
        return self.index.get(doc_id)

    def get_many(self, ids: Sequence[str]) -> list[int | None]:
        """The fingerprint stored for each id, or None (`SimhashIndex.get_many`)."""
        return self.index.get_many(ids)

    def count(self) -> tuple[int, int]:
        """The number of documents and of distinct fingerprints stored (`SimhashIndex.count`)."""
        return self.index.count()

    def verify(self, repair: bool = False) -> VerifyReport:
        """Check that the maps, tables, sketches, band tables and counts agree (`SimhashIndex.verify`)."""
        return self.index.verify(repair)

    def drop(self) -> int:
        """Delete every key of this index, meta last; the number deleted (`SimhashIndex.drop`)."""
        return self.index.drop()

    @classmethod
    def from_url(
        cls,
        url: str,
        name: str,
        *,
        hasher: Sketcher | None = None,
        threshold: float | None = None,
        band_buckets: int | None = None,
        max_candidates: int | None = MAX_CANDIDATES,
        **kwargs: Any,
    ) -> VerifiedIndex:
        """Open or create a verified index on the server at a URL (kwargs: `SimhashIndex`'s arguments)."""
        check_max_candidates(max_candidates)  # before the client, which probes the server
        client = client_from_url(url)
        mode: dict[str, Any] = {"hasher": hasher, "threshold": threshold, "band_buckets": band_buckets}
        try:
            return cls.on_client(client, name, **mode, max_candidates=max_candidates, **kwargs)
        except BaseException:
            client.close()
            raise

    @classmethod
    def on_client(
        cls,
        client: Any,
        name: str,
        *,
        hasher: Sketcher | None = None,
        threshold: float | None = None,
        band_buckets: int | None = None,
        max_candidates: int | None = MAX_CANDIDATES,
        **kwargs: Any,
    ) -> VerifiedIndex:
        """Open, or create verified, the verified index of that name through a client (kwargs:
        `SimhashIndex`'s arguments; the others and errors as `VerifiedIndex`'s)."""
        cap = check_max_candidates(max_candidates)
        index = verifiable(client, name, hasher, threshold, kwargs, band_buckets)
        return cls(index, hasher, threshold, band_buckets, cap)

    def add(self, doc_id: str, doc: VerifiedDocument) -> Outcome:
        """Store a document with its sketch, in one step: ADDED, REPLACED or UNCHANGED."""
        return self.add_many([(doc_id, doc)])[0]

    def add_many(self, items: Iterable[tuple[str, VerifiedDocument]]) -> list[Outcome]:
        """Store many documents with their sketches, a batch per write; the outcome of each pair, in order."""
        return [r for r in self._sketching(items, unique=False) if isinstance(r, Outcome)]

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
            sketches: as the hasher's sketch_many makes them (without unique, also as `sketch_of` gives
                them); None stores a document without one, never matched (`verify` reports it).
            unique: as `add_if_new`: a stored near-duplicate in place of the outcome of each document
                not stored (every sketch needed).

        Raises:
            WriteContention: as `add_if_new`.
        """
        self._check_sizes(ids, fps, sketches, unique)
        raws = [encode_id(doc_id) for doc_id in ids]
        checked = [check_fp(fp, self.index.f) for fp in fps]
        run = self._add_if_new_batch if unique else self._add_batch  # unique: every sketch given (checked)
        return in_batches(self.index.batch_size, None, run, raws, checked, sketches)

    def bulk_add_sketched(
        self, ids: Sequence[str], fps: Sequence[int], sketches: Sequence[bytes | None]
    ) -> list[Outcome]:
        """`add_sketched` (not unique) of one window by the grouped bulk path, as `SimhashIndex.bulk_add`."""
        if self.index.windows is not None:  # a period's keys expire with it, which the atomic path sets
            return [o for o in self.add_sketched(ids, fps, sketches) if isinstance(o, Outcome)]
        self._check_sizes(ids, fps, sketches, unique=False)
        store = self.hasher.stored
        forms = [store(sketch) if sketch else b"" for sketch in sketches]
        bulk = BulkWrites(self.store, self.index.layout, self._writes, self.index.batch_size)
        raws = batches.window_ids(ids)
        self._writes.check()  # the grouped commands go past `writes.apply`, which checks each batch
        fingerprints = batches.window_fingerprints(fps, self.index.f, self.index.fingerprint_many)
        return bulk.write(raws, fingerprints, forms)

    def _check_sizes(
        self, ids: Sequence[str], fps: Sequence[int], sketches: Sequence[bytes | None], unique: bool
    ) -> None:
        """Refuse unequal columns, a sketch of neither a query's nor (not unique) a stored one's size, or None
        with unique."""
        if not len(ids) == len(fps) == len(sketches):
            raise InvalidArgument("ids, fps and sketches must be of one length")
        query, stored = self.hasher.query_bytes, self.hasher.sketch_bytes
        sizes = (query,) if unique else (query, stored)
        for sketch in sketches:
            if (sketch is not None or unique) and (not isinstance(sketch, bytes) or len(sketch) not in sizes):
                size = f"{query}" if unique or query == stored else f"{query} (or, stored, {stored})"
                raise InvalidArgument(f"a sketch of this index is {size} bytes, got {sketch!r:.40}")

    def _sketching(
        self, items: Iterable[tuple[str, VerifiedDocument]], unique: bool
    ) -> list[Outcome | VerifiedMatch]:
        """`add_sketched` of the pairs, each batch sketched as it is written; every pair is checked first."""
        pairs = check_pairs(as_batch(items, "items"))
        for doc_id, _ in pairs:
            encode_id(doc_id)
        ids, docs = [doc_id for doc_id, _ in pairs], texts([doc for _, doc in pairs])
        fps, step = self.index.fingerprint_many(docs), self.index.batch_size
        out: list[Outcome | VerifiedMatch] = []
        for start in range(0, len(ids), step):
            part = slice(start, start + step)
            sketches = self.hasher.sketch_many(docs[part])
            out.extend(self.add_sketched(ids[part], fps[part], sketches, unique=unique))
        return out

    def _add_batch(
        self, raws: list[bytes], fps: list[int], sketches: Sequence[bytes | None]
    ) -> list[Outcome]:
        stored = self.hasher.stored
        guards = [SketchedGuard(None, stored(sketch) if sketch else b"") for sketch in sketches]
        return batches.apply(self._writes, self.index.f, raws, fps, guards)

    def _add_if_new_batch(
        self, raws: list[bytes], fps: list[int], sketches: list[bytes]
    ) -> list[Outcome | VerifiedMatch]:
        judge = SketchJudge(self.hasher, self.threshold, self.verification, self.store.keys, sketches)
        # The judge's confirmed groups carry their estimates: a duplicate comes as a VerifiedMatch.
        return [result for result in self._unique.add(raws, fps, judge) if not isinstance(result, Match)]

    def remove(self, doc_id: str) -> bool:
        """Remove a document and its sketch; True if it was stored."""
        return self.remove_many([doc_id])[0]

    def remove_many(self, ids: Sequence[str]) -> list[bool]:
        """Remove many documents, each with its sketch; for each id, whether it was stored."""
        return batches.remove_many(self.index.batch_size, self._writes, ids, None)

    def sketch_of(self, doc_id: str) -> bytes | None:
        """The sketch stored for an id, or None (IndexCorrupted if the fingerprint's are malformed)."""
        raw, windows = encode_id(doc_id), self.index.windows
        # Read again if a writer moved the id between reading its fingerprint and its sketches.
        for _ in range(_SKETCH_READS):
            # With a retention window, the newest period that has the id.
            schemas = windows.view().schemas if windows is not None else (self.index.keys,)
            found = self.store.execute([(b"HGET", keys.id_bucket(raw), raw) for keys in schemas])
            where = [n for n, fp in enumerate(found) if fp is not None]
            if not where:
                return None
            keys, fp = schemas[where[-1]], bytes(found[where[-1]])
            ids, stored = self.store.execute([(b"HMGET", keys.fp_bucket(fp), fp, keys.sketch_field(fp))])[0]
            try:
                if ids is not None and doc_id in decode_ids(ids):
                    return decode_sketches(stored).get(doc_id) if stored is not None else None
            except (ValueError, UnicodeDecodeError):
                raise IndexCorrupted(
                    f"index {self.index.name!r} holds a malformed entry for {fp!r}; run verify(repair=True)"
                ) from None
        return None

    def near(
        self, query: VerifiedDocument, threshold: float | None = None, k: int | None = None
    ) -> list[VerifiedMatch]:
        """Stored documents whose estimated Jaccard similarity with the query is >= threshold, most
        similar first, then nearest, then by id.

        Args:
            threshold: the Jaccard threshold, in [0, 1] (default: the index's; the band tables are made
                for that one: quality.md).
            k: the Hamming candidates' largest distance (default and at most: the index's k).
        """
        return self.near_many([query], threshold, k)[0]

    def near_many(
        self, queries: Sequence[VerifiedDocument], threshold: float | None = None, k: int | None = None
    ) -> list[list[VerifiedMatch]]:
        """near() for many queries; a candidate without a sketch cannot be verified and is dropped."""
        docs = texts(as_batch(queries, "queries"))
        fps, sketches = self.index.fingerprint_many(docs), self.hasher.sketch_many(docs)
        return self.near_sketched(fps, sketches, threshold, k)

    def near_sketched(
        self,
        fps: Sequence[int],
        sketches: Sequence[bytes],
        threshold: float | None = None,
        k: int | None = None,
    ) -> list[list[VerifiedMatch]]:
        """near_many() of queries fingerprinted and sketched (the hasher's sketch_many) already."""
        if threshold is None:
            threshold = self.threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise InvalidArgument(f"threshold must be a number in [0, 1], got {threshold!r}")
        size = self.hasher.query_bytes
        if len(fps) != len(sketches) or any(not isinstance(s, bytes) or len(s) != size for s in sketches):
            raise InvalidArgument(f"give one sketch of {size} bytes (this index's) per fingerprint")
        limit = check_k(k, self.index.k)
        checked = [check_fp(fp, self.index.f) for fp in fps]
        keys, mode = self.store.keys, self.verification
        stored: dict[str, bytes] = {}

        def confirmed(fps: list[int], queries: Sequence[bytes]) -> list[list[VerifiedMatch]]:
            bands: Bands | None = None
            if mode.bands:
                # Byte columns where the band places have that form (not with a retention window).
                bands = keys.band_columns(queries, mode) if self.index.windows is None else None
                if bands is None:
                    bands = [keys.band_places(s, mode) for s in queries]
            candidates = self._reads.near_groups(fps, limit, stored, bands)
            return [
                verified_matches_of(groups)
                for groups in confirmed_many(self.hasher, queries, candidates, stored, threshold)
            ]

        return in_batches(self.index.batch_size, None, confirmed, checked, sketches)

    def add_if_new(self, doc_id: str, doc: VerifiedDocument) -> VerifiedMatch | None:
        """`SimhashIndex.add_if_new` with verified near-duplicates (estimated Jaccard >= threshold).

        Returns:
            None if stored; else the id's own entry when it is a confirmed near-duplicate, else the most
            similar stored near-duplicate (then nearest, then by id).
        """
        return self.add_if_new_many([(doc_id, doc)])[0]

    def add_if_new_many(self, items: Iterable[tuple[str, VerifiedDocument]]) -> list[VerifiedMatch | None]:
        """`add_if_new` for many documents, a batch at a time; also checked against earlier ones."""
        found = self._sketching(items, unique=True)
        return [r if isinstance(r, VerifiedMatch) else None for r in found]


def checked_threshold(hasher: Sketcher | None, threshold: float | None, band_buckets: int | None) -> float:
    """The threshold asked for (`defaults.THRESHOLD` when None), the verified mode's arguments checked
    (InvalidArgument, InvalidType) before anything is read or written."""
    asked = defaults.THRESHOLD if threshold is None else threshold
    Verification.of(hasher, asked, (0, 0), band_buckets)
    return asked


def verifiable(
    client: Any,
    name: str,
    hasher: Sketcher | None,
    threshold: float | None,
    options: dict[str, Any],
    band_buckets: int | None = None,
) -> SimhashIndex:
    """The index a `VerifiedIndex` of that name wraps: opened, or created verified from the start."""
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
        asked = checked_threshold(hasher, threshold, band_buckets)
        mode = Verification.of(hasher, asked, band_buckets=band_buckets)
        return SimhashIndex(client, name, verification=mode, **options)


def verified_mode(
    index: SimhashIndex,
    hasher: Sketcher | None,
    threshold: float | None,
    band_buckets: int | None = None,
    convert: bool = False,
) -> Verification:
    """The verified mode pinned in an index's meta (checked against the arguments), else pinned now where
    `index` created it, or `convert` asks (errors: `VerifiedIndex`'s)."""
    asked = checked_threshold(hasher, threshold, band_buckets)
    pinned = index.config.verification or _pin(index, hasher, asked, band_buckets, convert)
    if band_buckets is not None and band_buckets != pinned.band_buckets:
        raise ConfigurationMismatch(
            f"index {index.name!r} was created with band_buckets={pinned.band_buckets}, not {band_buckets}",
            hint="open it without band_buckets to use the stored configuration, or choose another index name",
            remedy="without-band_buckets",
        )
    if (hasher is not None and hasher.describe() != pinned.hasher().describe()) or (
        threshold is not None and threshold != pinned.threshold
    ):
        given = Verification.of(
            hasher or pinned.hasher(),
            pinned.threshold if threshold is None else threshold,
            (pinned.bands, pinned.rows),
        )
        differs = "threshold" if threshold is not None and threshold != pinned.threshold else "hasher"
        raise ConfigurationMismatch(
            f"index {index.name!r} is verified with {pinned.to_meta()!r}, not {given.to_meta()!r}",
            hint="open it without hasher and threshold to use the pinned mode",
            remedy=f"without-{differs}",
        )
    return pinned


def _pin(
    index: SimhashIndex, hasher: Sketcher | None, threshold: float, band_buckets: int | None, convert: bool
) -> Verification:
    """Pin a mode in the meta of an index `index` created, or (convert) an empty one (or adopt one pinned
    meanwhile); one that holds documents stays plain (they could never be confirmed)."""
    if not (convert or index.created):  # its plain writers would be refused from the pin on
        raise ConfigurationMismatch(
            f"index {index.name!r} is not verified: it was created plain and stays so; open it as a "
            "SimhashIndex, create another index (VerifiedIndex.from_url(url, name, ...) creates one "
            "verified), or convert it while it is empty with VerifiedIndex(index, convert=True)"
        )
    docs = index.count()[0]
    if docs:
        raise ConfigurationMismatch(
            f"index {index.name!r} holds {docs:,} documents without sketches: verified mode "
            "is chosen when an index is created; create a verified index and load the documents into it"
        )
    mode = Verification.of(hasher, threshold, band_buckets=band_buckets)
    stored = pin_meta(index.store.sender, index.keys.meta, "verified", mode.to_meta())
    if stored is None:
        raise IndexNotFound(f"index {index.name!r} was dropped while it was being opened")
    try:
        pinned = Verification.from_meta(stored)
    except ValueError as exc:
        raise IndexCorrupted(f"index {index.name!r} has a malformed verified mode: {exc}") from None
    index.config = dataclasses.replace(index.config, verification=pinned)
    index.store.sketched = True  # the wrapped index's lookups read no bucket whole from now on
    return pinned
