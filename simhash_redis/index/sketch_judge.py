"""Add-if-new's judge in verified mode: the candidates within k that their sketches confirm."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..results import Match
from ..store import Guard, SketchedGuard
from ..transport import Command

if TYPE_CHECKING:
    from .verified_index import VerifiedIndex

__all__ = ["SketchJudge"]


class SketchJudge:
    """Add-if-new's judge in verified mode: candidates confirmed by their sketches; each document's own
    sketch stored with it (in the write script's step on a standalone server, just before it under the
    buckets' locks on a cluster).

    Args:
        owner: the verified index.
        ids: the batch's encoded ids.
        sketches: their documents' sketches.
    """

    def __init__(self, owner: VerifiedIndex, ids: list[bytes], sketches: list[bytes]) -> None:
        self.owner, self.ids, self.sketches = owner, ids, sketches
        #: (position in the batch, candidate id) -> estimated Jaccard, for the confirmed candidates.
        self.jaccard: dict[tuple[int, str], float] = {}

    def duplicates(self, docs: list[int], found: list[list[Match]]) -> list[list[Match]]:
        """The candidates whose stored sketch estimates a Jaccard similarity at the threshold (one round
        trip for the candidates' sketches)."""
        owner = self.owner
        wanted = list(dict.fromkeys(m.id for matches in found for m in matches))
        stored: dict[str, bytes] = {}
        if wanted:
            replies = owner.store.execute([(b"HGET", owner.sketch_key(i), i.encode()) for i in wanted])
            stored = {i: bytes(r) for i, r in zip(wanted, replies, strict=True) if r is not None}
        out: list[list[Match]] = []
        for i, matches in zip(docs, found, strict=True):
            kept = [m for m in matches if m.id in stored]
            similar: list[float] = []
            if kept:
                similar = owner.hasher.estimate_many(self.sketches[i], [stored[m.id] for m in kept]).tolist()
            confirmed = []
            for match, estimate in zip(kept, similar, strict=True):
                if estimate >= owner.threshold:
                    self.jaccard[(i, match.id)] = float(estimate)
                    confirmed.append(match)
            confirmed.sort(key=lambda m: (-self.jaccard[(i, m.id)], m.distance, m.id))
            out.append(confirmed)
        return out

    def guarded(self, doc: int, members: Guard) -> Guard:
        """The document's guard, carrying its sketch: the write script stores both, or neither."""
        raw = self.ids[doc]
        return SketchedGuard(members, self.owner.sketch_key(raw.decode()), self.sketches[doc])

    def before_write(self, docs: list[int]) -> None:
        """Write the documents' sketches before them, where no script can (a cluster).

        Acknowledged by a replica, like the documents: a failover keeps a stored document's sketch.
        """
        key = self.owner.sketch_key
        commands: list[Command] = [
            (b"HSET", key(self.ids[i].decode()), self.ids[i], self.sketches[i]) for i in docs
        ]
        self.owner.store.execute(commands, durable=True)
