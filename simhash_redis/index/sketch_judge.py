"""Add-if-new's judge in verified mode: the candidates within k that their sketches confirm."""

from __future__ import annotations

from collections.abc import Sequence

from ..fingerprinting import BandedOddSketcher, Sketcher
from ..results import Match
from ..store import Guard, KeySchema, SketchedGuard, Verification

__all__ = ["SketchJudge", "confirmed", "confirmed_many"]

# From this many queries, one numpy pass for all their candidates (below, numpy's fixed costs dominate).
_PAIRS_MIN = 64


class SketchJudge:
    """Add-if-new's judge in verified mode (a `unique.Judge`): candidates confirmed by their sketches."""

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
        out: list[list[Match]] = []
        queries = [self.sketches[i] for i in docs]
        confirmed_all = confirmed_many(self.hasher, queries, found, stored, self.threshold)
        for i, pairs in zip(docs, confirmed_all, strict=True):
            self.jaccard.update(((i, match.id), estimate) for match, estimate in pairs)
            out.append([match for match, _ in pairs])
        return out

    def bands(self, docs: list[int]) -> list[list[bytes]] | None:
        mode, keys = self.verification, self.keys
        return [keys.bands(self.sketches[i], mode) for i in docs] if mode.bands else None

    def band_places(self, docs: list[int]) -> list[list[tuple[bytes, bytes]]] | None:
        mode, keys = self.verification, self.keys
        return [keys.band_places(self.sketches[i], mode) for i in docs] if mode.bands else None

    def guarded(self, doc: int, members: Guard | None) -> Guard:
        """The document's guard, carrying its sketch: stored with the document, or not at all."""
        return SketchedGuard(members, self.hasher.stored(self.sketches[doc]))

    def confirms(self, doc: int, earlier: list[int]) -> bool:
        stored = self.hasher.stored
        estimates = self.hasher.estimate_many(self.sketches[doc], [stored(self.sketches[j]) for j in earlier])
        return bool((estimates >= self.threshold).any())


def confirmed(
    hasher: Sketcher, query: bytes, matches: list[Match], stored: dict[str, bytes], threshold: float
) -> list[tuple[Match, float]]:
    """The candidates whose stored sketch estimates a Jaccard similarity with the query's sketch of at
    least threshold, with that estimate, most similar first, then nearest, then by id."""
    return confirmed_many(hasher, [query], [matches], stored, threshold)[0]


def confirmed_many(
    hasher: Sketcher,
    queries: Sequence[bytes],
    candidates: Sequence[list[Match]],
    stored: dict[str, bytes],
    threshold: float,
) -> list[list[tuple[Match, float]]]:
    """`confirmed` of each query and its candidates; a batch's odd sketches estimated in one pass."""
    size = hasher.sketch_bytes  # one of another size (verify reports it) is never confirmed
    kept = [[m for m in matches if len(stored.get(m.id, b"")) == size] for matches in candidates]
    if isinstance(hasher, BandedOddSketcher) and len(queries) >= _PAIRS_MIN:
        owners = [q for q, matches in enumerate(kept) for _ in matches]
        flat = hasher.estimate_pairs(queries, owners, [stored[m.id] for ms in kept for m in ms]).tolist()
        at = 0
        estimates = []
        for matches in kept:
            estimates.append(flat[at : at + len(matches)])
            at += len(matches)
    else:
        estimates = [
            hasher.estimate_many(query, [stored[m.id] for m in matches]).tolist() if matches else []
            for query, matches in zip(queries, kept, strict=True)
        ]
    out = []
    for matches, values in zip(kept, estimates, strict=True):
        pairs = [(m, float(e)) for m, e in zip(matches, values, strict=True) if e >= threshold]
        if len(pairs) > 1:
            pairs.sort(key=_order)
        out.append(pairs)
    return out


def _order(pair: tuple[Match, float]) -> tuple[float, int, str]:
    return (-pair[1], pair[0].distance, pair[0].id)
