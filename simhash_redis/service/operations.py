"""What each endpoint does with an open index: a batch to the library, its results in the service's JSON."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ..codec import format_fingerprint, parse_fingerprint
from ..errors import InvalidArgument, InvalidType
from ..index.arguments import check_k, check_text
from ..index.mode import add_if_new_many
from ..results import Match, VerifiedMatch
from ..store.keys import encode_id
from . import schemas
from .indexes import Opened
from .schemas import (
    AddIfNewResult,
    AddResult,
    Document,
    FingerprintResult,
    Id,
    NearResult,
    Query,
    QueryItem,
    RemoveResult,
    StoredResult,
    Text,
)

__all__ = [
    "OPERATIONS",
    "Operation",
    "add",
    "add_if_new",
    "check_documents",
    "check_near",
    "fingerprint",
    "get",
    "near",
    "remove",
    "stats",
]


class Operation:
    """One /v1 operation: its function (named as its path), its request alone and a batch's item, its
    result, whether a write to a missing index creates it, and its summary (for OpenAPI)."""

    def __init__(
        self,
        function: Callable[..., Sequence[msgspec.Struct]],
        single: type[Any],
        item: type[Any],
        result: type[Any],
        create: bool,
        summary: str,
    ) -> None:
        self.function, self.name = function, function.__name__
        self.single, self.item, self.result = single, item, result
        self.create, self.summary = create, summary
        self.decode_single = msgspec.json.Decoder(single).decode
        self.decode_batch = msgspec.json.Decoder(list[item]).decode  # type: ignore[valid-type]

    def run(self, index: Opened, items: Sequence[Any], params: tuple[Any, ...]) -> Sequence[msgspec.Struct]:
        """This operation's function on a batch."""
        return self.function(index, items, *params)


def fingerprint(index: Opened, texts: Sequence[Text]) -> list[FingerprintResult]:
    """The fingerprints of texts in the index's scheme (no Redis round trip)."""
    fps = index.plain.fingerprint_many([t.text for t in texts])
    return [FingerprintResult(format_fingerprint(fp, index.plain.f)) for fp in fps]


def near(
    index: Opened, queries: Sequence[QueryItem | Query], k: int | None, threshold: float | None
) -> list[NearResult]:
    """The matches of each query (a verified index's from texts only)."""
    if threshold is not None and index.verified is None:
        raise _not_verified(index)
    verified, f, name = index.verified is not None, index.plain.f, index.plain.name
    docs = [_document(q, verified, f, "query", name) for q in queries]
    found: list[list[Match]] | list[list[VerifiedMatch]]
    if index.verified is not None:
        texts: list[Any] = docs  # texts: `_document` refuses a fingerprint
        if len(texts) == 1:
            found = [index.verified.near(texts[0], threshold, k)]
        else:
            found = index.verified.near_many(texts, threshold, k)
    else:
        found = [index.plain.near(docs[0], k)] if len(docs) == 1 else index.plain.near_many(docs, k)
    return [NearResult([_match(m, f) for m in matches]) for matches in found]


def add(index: Opened, docs: Sequence[Document]) -> list[AddResult]:
    """Store documents (replacing an id's previous fingerprint)."""
    ids, fps, values = _prepared(index, docs)
    outcomes = (index.verified or index.plain).add_many(list(zip(ids, values, strict=True)))  # type: ignore[arg-type]
    f = index.plain.f
    return [
        AddResult(i, o.value, format_fingerprint(fp, f)) for i, o, fp in zip(ids, outcomes, fps, strict=True)
    ]


def add_if_new(index: Opened, docs: Sequence[Document]) -> list[AddIfNewResult]:
    """Store each document unless a near-duplicate is stored (also one earlier in the batch), atomically."""
    ids, fps, values = _prepared(index, docs)
    found = add_if_new_many(index.verified or index.plain, list(zip(ids, values, strict=True)))
    f = index.plain.f
    out: list[AddIfNewResult] = []
    for doc_id, fp, result in zip(ids, fps, found, strict=True):
        duplicate = _match(result, f) if isinstance(result, (Match, VerifiedMatch)) else None
        out.append(AddIfNewResult(doc_id, duplicate is None, format_fingerprint(fp, f), duplicate))
    return out


def remove(index: Opened, items: Sequence[Id]) -> list[RemoveResult]:
    """Remove documents by id (an unknown id is not an error: removed is false)."""
    ids = [i.id for i in items]
    removed = (index.verified or index.plain).remove_many(ids)
    return [RemoveResult(i, r) for i, r in zip(ids, removed, strict=True)]


def get(index: Opened, items: Sequence[Id]) -> list[StoredResult]:
    """The fingerprints stored for ids (null where not stored)."""
    ids = [i.id for i in items]
    found = index.plain.get_many(ids)
    f = index.plain.f
    return [
        StoredResult(i, None if fp is None else format_fingerprint(fp, f))
        for i, fp in zip(ids, found, strict=True)
    ]


def stats(index: Opened) -> schemas.Stats:
    """The index's configuration and counts."""
    plain = index.plain
    documents, fps = plain.count()
    threshold = None if index.verified is None else index.verified.threshold
    layout, verified = plain.layout.describe(), index.verified is not None
    return schemas.Stats(plain.name, documents, fps, plain.f, plain.k, layout, verified, threshold)


def check_near(index: Opened, k: int | None, threshold: float | None) -> None:
    """Refuse the k and threshold `near` would refuse, before they key a coalescer.

    Raises:
        InvalidArgument: k out of 0..the index's k, or a threshold out of [0, 1] or of a plain index.
    """
    check_k(k, index.plain.k)
    if threshold is not None:
        if index.verified is None:
            raise _not_verified(index)
        if not 0 <= threshold <= 1:
            raise InvalidArgument(f"threshold must be a number in [0, 1], got {threshold!r}")


def check_documents(docs: Sequence[Document], verified: bool, f: int) -> None:
    """Refuse the documents a write would refuse, the first named by its place: before an index is
    created for them (a refused write leaves nothing behind), or to tell which of a batch was refused.

    Raises:
        InvalidArgument, InvalidType: an id or a document the write would refuse.
    """
    for i, doc in enumerate(docs):
        try:
            encode_id(doc.id)
            _document(doc, verified, f, "document")
        except (InvalidArgument, InvalidType) as exc:
            where = f"document {i}: " if len(docs) > 1 else ""
            raise type(exc)(f"{where}{exc}") from None


def _not_verified(index: Opened) -> InvalidArgument:
    return InvalidArgument(
        f"index {index.plain.name!r} is not verified: threshold applies to a verified index only"
    )


def _match(m: Match | VerifiedMatch, f: int) -> schemas.Match:
    jaccard = round(m.jaccard, 4) if isinstance(m, VerifiedMatch) else None
    return schemas.Match(m.id, m.distance, format_fingerprint(m.fingerprint, f), jaccard)


def _document(
    item: QueryItem | Query | Document, verified: bool, f: int, what: str, name: str | None = None
) -> str | int:
    """The text of a query or document, or (a plain index's) its parsed fingerprint: exactly one of them."""
    if item.text is None and verified:
        index = "the index" if name is None else f"index {name!r}"
        raise InvalidArgument(
            f"{index} is verified: a {what} needs its text (a sketch is made from it), not a fingerprint"
        )
    if (item.text is None) == (item.fingerprint is None):
        raise InvalidArgument("give exactly one of text and fingerprint")
    check_text(item.text)  # as the library would, before an index is created for it
    if item.text is not None:
        return item.text
    assert item.fingerprint is not None
    return parse_fingerprint(item.fingerprint, f)


def _prepared(index: Opened, docs: Sequence[Document]) -> tuple[list[str], list[int], Sequence[str | int]]:
    """The ids and fingerprints of documents, and what to store: a verified index's texts, else the
    fingerprints."""
    verified, f, name = index.verified is not None, index.plain.f, index.plain.name
    values = [_document(d, verified, f, "document", name) for d in docs]
    fps = index.plain.fingerprint_many(values)
    return [d.id for d in docs], fps, values if index.verified is not None else fps


#: The operations, by the name in their path.
OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation(fingerprint, Text, Text, FingerprintResult, False, "A text's fingerprint (no Redis)"),
        Operation(near, Query, QueryItem, NearResult, False, "Stored documents near a text or fingerprint"),
        Operation(add, Document, Document, AddResult, True, "Store a document"),
        Operation(
            add_if_new,
            Document,
            Document,
            AddIfNewResult,
            True,
            "Store a document unless a near-duplicate is stored (atomically)",
        ),
        Operation(remove, Id, Id, RemoveResult, False, "Remove a document"),
        Operation(get, Id, Id, StoredResult, False, "The fingerprint stored for an id"),
    )
}
