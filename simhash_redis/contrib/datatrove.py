"""A datatrove pipeline step that keeps a document only if the shared index stores it as new; give every
snapshot's documents ids of their own (a reader's ``id_key``; docs/pipelines.md)."""

from __future__ import annotations

from typing import Any

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.writers.disk_base import DiskWriter

from .new_documents import NewDocuments

__all__ = ["NearDuplicateFilter"]

#: Why a document was dropped, in datatrove's stats and an exclusion writer's metadata (``filter_reason``).
REASON = "near_duplicate"


class NearDuplicateFilter(BaseFilter):  # type: ignore[misc]
    """Keeps a document only if the shared index stores it as new (or stored it before under its id).

    Args:
        url: the Redis server's URL (credentials in it never appear in messages or logs).
        index: the index name every task (and every run) shares.
        verified: True to confirm near-duplicates with stored sketches, False for plain SimHash; None (the
            default): verified for a new index, the stored mode for an existing one.
        exclusion_writer: a datatrove writer that saves the dropped documents (``duplicate_of``: the stored
            near-duplicate's id).
        **options: the index's other settings (k, prefix, threshold, ...), used when it is created.
    """

    name = "simhash-redis near-duplicates"

    def __init__(
        self,
        url: str,
        index: str,
        *,
        verified: bool | None = None,
        batch_size: int = 500,
        exclusion_writer: DiskWriter | None = None,
        **options: Any,
    ) -> None:
        super().__init__(exclusion_writer, batch_size)
        self.documents = NewDocuments(url, index, verified=verified, **options)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        """One document's verdict: True to keep it."""
        return self.filter_batch([doc])[0]

    def filter_batch(self, batch: list[Document]) -> list[bool | tuple[bool, str]]:
        """Each document's verdict, the batch checked and stored in one call."""
        found = self.documents.check([str(doc.id) for doc in batch], [doc.text for doc in batch])
        verdicts: list[bool | tuple[bool, str]] = []
        for doc, match in zip(batch, found, strict=True):
            if match is None:
                verdicts.append(True)
                continue
            doc.metadata["duplicate_of"] = match.id
            self.stat_update("near_duplicate_distance", value=match.distance)
            verdicts.append((False, REASON))
        return verdicts
