"""Add-if-new's judge in verified mode: the candidates within k that their sketches confirm."""

from __future__ import annotations

from ..fingerprinting import Sketcher
from ..results import Match
from ..store import Guard, KeySchema, SketchedGuard, Verification

__all__ = ["SketchJudge"]


class SketchJudge:
    """Add-if-new's judge in verified mode: candidates confirmed by their sketches; each document's own
    sketch stored with it, in the step that stores the document.
    """

    def __init__(
        self,
        hasher: Sketcher,
        threshold: float,
        verification: Verification,
        keys: KeySchema,
        ids: list[bytes],
        sketches: list[bytes],
    ) -> None:
        self.hasher, self.threshold, self.verification, self.keys = hasher, threshold, verification, keys
        self.ids, self.sketches = ids, sketches
        #: (position in the batch, candidate id) -> estimated Jaccard, for the confirmed candidates.
        self.jaccard: dict[tuple[int, str], float] = {}

    def duplicates(
        self, docs: list[int], found: list[list[Match]], stored: dict[str, bytes]
    ) -> list[list[Match]]:
        """The candidates whose stored sketch (read with them) estimates a Jaccard similarity at the
        threshold."""
        hasher, threshold = self.hasher, self.threshold
        out: list[list[Match]] = []
        size = hasher.sketch_bytes  # one of another size (verify reports it) is never confirmed
        for i, matches in zip(docs, found, strict=True):
            kept = [m for m in matches if len(stored.get(m.id, b"")) == size]
            similar: list[float] = []
            if kept:
                similar = hasher.estimate_many(self.sketches[i], [stored[m.id] for m in kept]).tolist()
            confirmed = []
            for match, estimate in zip(kept, similar, strict=True):
                if estimate >= threshold:
                    self.jaccard[(i, match.id)] = float(estimate)
                    confirmed.append(match)
            confirmed.sort(key=lambda m: (-self.jaccard[(i, m.id)], m.distance, m.id))
            out.append(confirmed)
        return out

    def bands(self, docs: list[int]) -> list[list[bytes]] | None:
        """The band tables of the documents' sketches (None for a mode without them)."""
        mode, keys = self.verification, self.keys
        return [keys.bands(self.sketches[i], mode) for i in docs] if mode.bands else None

    def guarded(self, doc: int, members: Guard | None) -> Guard:
        """The document's guard, carrying its sketch: stored with the document, or not at all."""
        return SketchedGuard(members, self.hasher.stored(self.sketches[doc]))

    def confirms(self, doc: int, earlier: list[int]) -> bool:
        """Whether an earlier document of the batch (a candidate of doc) has a sketch at the threshold."""
        stored = self.hasher.stored
        estimates = self.hasher.estimate_many(self.sketches[doc], [stored(self.sketches[j]) for j in earlier])
        return bool((estimates >= self.threshold).any())
