"""Near-duplicate queries of many records (``near --file``), a batch per conversation with the server."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

from ..errors import InputError
from ..index import Match, SimhashIndex, VerifiedIndex, VerifiedMatch
from .records import Record, fingerprint_read

__all__ = ["Answer", "near_records"]

#: A record and its matches, nearest (or, verified, most similar) first.
Answer = tuple[Record, list[Match] | list[VerifiedMatch]]


def near_records(
    index: SimhashIndex,
    records: Iterable[Record | InputError],
    *,
    verified: VerifiedIndex | None = None,
    k: int | None = None,
    fp_base: str = "auto",
    batch_size: int = 500,
) -> Iterator[Answer | InputError]:
    """Each record's stored near-duplicates, in input order; bad records passed on as their InputError.

    Args:
        verified: ask its confirmed matches instead (texts only).
        k: the largest distance (default: the index's k).
        fp_base: how precomputed fingerprints are written (`parse_fingerprint`).
        batch_size: records per conversation with the server.

    Raises:
        InvalidArgument: k is out of range.
        RedisUnavailable: the server cannot be reached.
    """
    items = iter(records)
    while batch := list(islice(items, batch_size)):
        read = [
            item if isinstance(item, InputError) else _query(item, index.f, fp_base, verified)
            for item in batch
        ]
        queries = [query.doc for query in read if isinstance(query, Record)]
        found: list[list[Match]] | list[list[VerifiedMatch]]
        if verified is not None:
            found = verified.near_many([str(query) for query in queries], k=k)
        else:
            found = index.near_many(queries, k)
        answers: Iterator[list[Match] | list[VerifiedMatch]] = iter(found)
        for item, query in zip(batch, read, strict=True):
            if isinstance(query, InputError):
                yield query
            else:
                assert isinstance(item, Record)
                yield item, next(answers)


def _query(record: Record, f: int, fp_base: str, verified: VerifiedIndex | None) -> Record | InputError:
    """A record as queried: its precomputed fingerprint read (an InputError if it cannot be)."""
    if not record.is_fingerprint:
        return record
    if verified is not None:
        reason = "a verified index confirms matches from the text, not a fingerprint"
        return InputError(record.source, record.line, reason)
    return fingerprint_read(record, f, fp_base)
