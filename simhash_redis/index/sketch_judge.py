"""Add-if-new's judge in verified mode: the candidates within k that their sketches confirm."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..results import Match
from ..transport import Command

if TYPE_CHECKING:
    from .verified_index import VerifiedIndex

__all__ = ["SketchJudge"]


class SketchJudge:
    """Add-if-new's judge in verified mode: candidates confirmed by their sketches, sketches written first.

    Args:
        owner: the verified index.
        ids: the batch's encoded ids.
        sketches: their documents' sketches.
    """

    def __init__(self, owner: VerifiedIndex, ids: list[bytes], sketches: list[bytes]) -> None:
        self.owner, self.ids, self.sketches = owner, ids, sketches
        #: (position in the batch, candidate id) -> estimated Jaccard, for the confirmed candidates.
        self.jaccard: dict[tuple[int, str], float] = {}
        # Each document's id's sketch as read before its write, put back if the write is refused.
        self._before: dict[int, bytes | None] = {}

    def duplicates(self, docs: list[int], found: list[list[Match]]) -> list[list[Match]]:
        """The candidates whose stored sketch estimates a Jaccard similarity at the threshold.

        One round trip reads the candidates' sketches and those the batch's own ids have now.
        """
        owner = self.owner
        wanted = list(
            dict.fromkeys([m.id for matches in found for m in matches] + [self.ids[i].decode() for i in docs])
        )
        replies = owner.store.execute([(b"HGET", owner.sketch_key(i), i.encode()) for i in wanted])
        stored = {i: bytes(r) for i, r in zip(wanted, replies, strict=True) if r is not None}
        out: list[list[Match]] = []
        for i, matches in zip(docs, found, strict=True):
            self._before[i] = stored.get(self.ids[i].decode())
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

    def before_write(self, docs: list[int]) -> None:
        """Write the documents' sketches: a document is never stored without its sketch."""
        key = self.owner.sketch_key
        self.owner.store.execute(
            [(b"HSET", key(self.ids[i].decode()), self.ids[i], self.sketches[i]) for i in docs]
        )

    def not_written(self, docs: list[int]) -> None:
        """Put back the sketches the ids had before (or none), since their documents were not written."""
        key = self.owner.sketch_key
        commands: list[Command] = []
        for i in docs:
            raw, before = self.ids[i], self._before.get(i)
            name = key(raw.decode())
            commands.append((b"HDEL", name, raw) if before is None else (b"HSET", name, raw, before))
        self.owner.store.execute(commands)
