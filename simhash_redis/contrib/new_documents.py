"""Which documents of a batch a shared index stores as new: the step a data pipeline's workers share."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidArgument
from ..index import Match, SimhashIndex, VerifiedIndex
from ..index.arguments import blank
from ..index.mode import add_if_new_many
from ..results import VerifiedMatch
from ..tools.connect import open_index

__all__ = ["NewDocuments"]


class NewDocuments:
    """Checks and stores batches of documents in a shared index, from any process: a Hugging Face ``datasets``
    filter (``dataset.filter(keep, batched=True, num_proc=8)``) or a datatrove step.

    A document is kept when it is stored now, or was stored before under its own id; it is dropped when
    another id's near-duplicate is stored, so ids must name documents across every run and snapshot.
    Pickled, it is its settings alone.

    Args:
        url: the Redis server's URL (credentials in it never appear in messages).
        index: the index name every worker shares.
        verified: True to confirm each near-duplicate with stored sketches, False for plain SimHash; None
            (the default): verified for a new index, the stored mode for an existing one.
        **options: the index's other settings (k, prefix, threshold, ...), used when it is created.
    """

    def __init__(
        self,
        url: str,
        index: str,
        *,
        verified: bool | None = None,
        id_column: str = "id",
        text_column: str = "text",
        **options: Any,
    ) -> None:
        self.url, self.index, self.verified = url, index, verified
        self.id_column, self.text_column = id_column, text_column
        self.options = options
        self._opened: tuple[int, SimhashIndex | VerifiedIndex] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_opened"] = None  # each process opens its own connection
        return state

    def open(self) -> SimhashIndex | VerifiedIndex:
        """This process's index, opened (and created, the first time anywhere) on first use."""
        if self._opened is None or self._opened[0] != os.getpid():
            opened = open_index(self.index, self.url, verified=self.verified, **self.options)
            self._opened = (os.getpid(), opened)
        return self._opened[1]

    def check(self, ids: Sequence[str], texts: Sequence[str]) -> list[Match | VerifiedMatch | None]:
        """Store each document unless another id's near-duplicate is stored, atomically; in order, None
        for each document kept, else the stored near-duplicate that drops it. An empty text is kept, not
        stored; a malformed id or text: nothing of the batch is written."""
        if len(ids) != len(texts):
            raise InvalidArgument(f"{len(ids)} ids for {len(texts)} texts")
        pairs = [(doc_id, text) for doc_id, text in zip(ids, texts, strict=True) if not blank(text)]
        found = iter(add_if_new_many(self.open(), pairs))
        return [
            None if blank(text) or (m := next(found)) is None or m.id == doc_id else m
            for doc_id, text in zip(ids, texts, strict=True)
        ]

    def _columns(self, batch: Mapping[str, Sequence[Any]]) -> tuple[list[str], list[str]]:
        missing = [name for name in (self.id_column, self.text_column) if name not in batch]
        if missing:
            raise InvalidArgument(
                f"the batch has no {missing[0]!r} column (columns: {', '.join(batch)}); give id_column and "
                "text_column, or add ids: dataset.map(lambda b, i: {'id': [f'snap:{n}' for n in i]}, "
                "with_indices=True, batched=True)"
            )
        return [str(doc_id) for doc_id in batch[self.id_column]], list(batch[self.text_column])

    def __call__(self, batch: Mapping[str, Sequence[Any]]) -> list[bool]:
        """For ``dataset.filter(keep, batched=True)``: True for each row of the batch kept."""
        return [m is None for m in self.check(*self._columns(batch))]

    def verdicts(self, batch: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
        """For ``dataset.map(keep.verdicts, batched=True)``: each row's ``duplicate_of`` (None: kept),
        ``distance`` and ``jaccard`` (None unless verified)."""
        found = self.check(*self._columns(batch))
        return {
            "duplicate_of": [None if m is None else m.id for m in found],
            "distance": [None if m is None else m.distance for m in found],
            "jaccard": [m.jaccard if isinstance(m, VerifiedMatch) else None for m in found],
        }
