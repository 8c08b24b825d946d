"""Add-if-new within one batch: the documents of a round written in one script call, each guard expecting
the fingerprints the documents before it add to its sets (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..codec import encode_fp
from ..store import Guard, Reads, Store
from ..store.candidates import Group
from ..store.windows import WindowedSets

__all__ = ["InBatch", "Judge"]


class Judge(Protocol):
    """Decides which candidates within distance k count as near-duplicates, and what goes with a write."""

    def duplicates(
        self, docs: list[int], found: list[list[Group]], sketches: dict[str, bytes]
    ) -> Sequence[list[Group]]:
        """The near-duplicates among each document's candidates (docs: positions in the batch), as groups
        of ids (`candidates.Group`), with their estimated similarity where it decides."""

    def bands(self, docs: list[int]) -> list[list[bytes]] | None:
        """The band tables whose members are candidates of the documents at these positions, or None."""

    def band_places(self, docs: list[int]) -> list[list[tuple[bytes, bytes]]] | None:
        """Where `bands`' band values are read: (bucket hash, field) each, or None."""

    def guarded(self, doc: int, members: Guard | None) -> Guard:
        """The guard to write the document at this position with (members None: a cluster's)."""

    def confirms(self, doc: int, earlier: list[int]) -> bool:
        """Whether any of the earlier documents of the batch (candidates of doc) is its near-duplicate."""


class InBatch:
    """The sets one round's writes add their fingerprints to, in the order the write script applies them;
    `near` decides which candidates count (default: every one within k), `bands` are band table keys."""

    def __init__(
        self,
        store: Store,
        reads: Reads,
        fps: Sequence[int],
        f: int,
        k: int,
        bands: dict[int, list[bytes]] | None,
        near: Judge | None,
    ) -> None:
        self.keys, self.windows, self.fps, self.f, self.k = store.keys, reads.windows, fps, f, k
        self.bands, self.near = bands or {}, near
        # The periods' writes go into the current one: it is the write script's (or, after a period
        # boundary, the guards fail and the documents are read again).
        self.current = self.windows.view().current if self.windows is not None else None
        schema = self.keys
        if self.windows is not None and self.current is not None:
            schema = self.windows.schema(self.current)
        self._tables: Callable[[int], list[bytes]] = schema.table_builder()
        # set key -> the first fingerprint the documents admitted this round add to it; and for the keys
        # that get more (pages of one template), all of them (in order, once each). Most keys get one:
        # no container is made for it.
        self._first: dict[bytes, int] = {}
        self._more: dict[bytes, dict[int, None]] = {}
        # the fingerprints admitted this round -> the first document admitted with each, and the others.
        self._admitted: dict[int, int] = {}
        self._also: dict[int, list[int]] = {}
        self._encoded: dict[int, bytes] = {}

    def admit(self, doc: int, sets: Guard, tables: list[bytes] | None = None) -> Guard | None:
        """The guard to write a document with after those admitted before it, or None to leave it to the
        next round (an earlier document of the batch is its near-duplicate); `tables`: its table keys,
        where the caller has built them."""
        fp, first = self.fps[doc], self._first
        if tables is None or self.windows is not None:
            tables = self._tables(fp)
        written = tables + self.bands.get(doc, [])
        if any(key in first for key in written):
            if self._near(doc, written):
                return None
            sets = self._expecting(doc, sets, written)
        owner = self._admitted.setdefault(fp, doc)
        if owner != doc:
            self._also.setdefault(fp, []).append(doc)
        for key in written:
            owner = first.setdefault(key, fp)
            if owner != fp:
                self._more.setdefault(key, {owner: None})[fp] = None
        return sets

    def _added(self, key: bytes) -> Sequence[int]:
        """The fingerprints the documents admitted so far add to a set (none, or in order, once each)."""
        more = self._more.get(key)
        if more is not None:
            return list(more)
        first = self._first.get(key)
        return () if first is None else (first,)

    def _expecting(self, doc: int, sets: Guard, written: list[bytes]) -> Guard:
        """The guard of a document whose sets earlier admitted documents add to: read, plus those."""
        keys = written
        if isinstance(sets, WindowedSets) and self.windows is not None:
            # Guarded in every period read: the current one's sets are among them.
            fp, schema = self.fps[doc], self.windows.schema
            keys = [key for window in sets.windows for key in schema(window).tables(fp)]
            # Then each period's band values (verified mode): only the current period's get this round's.
            bands = self.bands.get(doc, [])
            none = [b""] * len(bands)
            keys += [key for window in sets.windows for key in (bands if window == self.current else none)]
        if len(keys) != len(sets):
            return sets
        expected = []
        for members, key in zip(sets, keys, strict=True):
            more = self._added(key)
            if more:
                have = set(members)
                members = list(members) + [e for e in map(self._encode, more) if e not in have]
            expected.append(members)
        return WindowedSets(expected, sets.windows) if isinstance(sets, WindowedSets) else expected

    def _near(self, doc: int, written: list[bytes]) -> bool:
        """Whether a document admitted before doc is its near-duplicate: a candidate as a read finds
        them (within k sharing a table, or sharing a band) that `near` confirms."""
        fp, added, tables = self.fps[doc], self._added, len(written) - len(self.bands.get(doc, ()))
        tabled = {other for key in written[:tables] for other in added(key)}
        found = {other for other in tabled if (fp ^ other).bit_count() <= self.k}
        found.update(other for key in written[tables:] for other in added(key))
        if not found:
            return False
        if self.near is None:
            return True
        admitted, also = self._admitted, self._also
        return self.near.confirms(
            doc, sorted(j for other in found for j in [admitted[other], *also.get(other, ())])
        )

    def _encode(self, fp: int) -> bytes:
        encoded = self._encoded.get(fp)
        if encoded is None:
            encoded = self._encoded[fp] = encode_fp(fp, self.f)
        return encoded
