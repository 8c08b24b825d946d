"""What each endpoint does with an open index: a batch to the library, its results in the service's JSON
(msgspec structs); and the OpenAPI 3.1 document of them, generated from those (served at /openapi.json).

Fingerprints travel as hex strings, as the CLI prints them (a request may also give decimal, as a string):
a 64-bit number does not survive a JSON parser that reads numbers as doubles (JavaScript's).
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .. import results
from ..codec import format_fingerprint, parse_fingerprint
from ..errors import InvalidArgument, InvalidType
from ..index.arguments import check_k, check_text
from ..index.mode import add_if_new_many
from ..store.keys import encode_id
from .indexes import Opened
from .problems import CODES, ErrorBody

__all__ = [
    "OPERATIONS",
    "Operation",
    "add",
    "add_if_new",
    "check_documents",
    "check_near",
    "document",
    "fingerprint",
    "get",
    "near",
    "remove",
    "stats",
]


class _In(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A request body: unknown fields are refused (a misspelt "k" would silently be ignored)."""


class _Out(msgspec.Struct, omit_defaults=True, frozen=True):
    """A response body: fields that do not apply are left out."""


class Text(_In, frozen=True):
    """A text to fingerprint."""

    text: str


class QueryItem(_In, frozen=True):
    """One query of a batch of `near`: a text, or a fingerprint (of a plain index)."""

    text: str | None = None
    fingerprint: str | None = None


class Query(QueryItem, frozen=True):
    """A `near` query: a text or a fingerprint, the largest distance k, and a verified index's threshold."""

    k: int | None = None
    threshold: float | None = None


class Document(_In, frozen=True):
    """A document to store: its id and its text (or, in a plain index, its fingerprint)."""

    id: str
    text: str | None = None
    fingerprint: str | None = None


class Id(_In, frozen=True):
    """A document id."""

    id: str


class Match(_Out, frozen=True):
    """A stored near-duplicate: its id, Hamming distance, fingerprint, and (verified) estimated Jaccard."""

    id: str
    distance: int
    fingerprint: str
    jaccard: float | None = None


class FingerprintResult(_Out, frozen=True):
    """A text's fingerprint in the index's scheme."""

    fingerprint: str


class NearResult(_Out, frozen=True):
    """The matches of a query: nearest first (verified: most similar first)."""

    matches: list[Match]


class AddResult(_Out, frozen=True):
    """What `add` did: added, replaced or unchanged."""

    id: str
    outcome: str
    fingerprint: str


class AddIfNewResult(_Out, frozen=True):
    """What `add_if_new` did: stored, or not, because of the stored near-duplicate `duplicate`."""

    id: str
    stored: bool
    fingerprint: str
    duplicate: Match | None = None


class RemoveResult(_Out, frozen=True):
    """Whether the id was stored (and is now removed)."""

    id: str
    removed: bool


class StoredResult(msgspec.Struct, frozen=True):
    """The fingerprint stored for an id, null when it is not stored."""

    id: str
    fingerprint: str | None


class Stats(_Out, frozen=True):
    """An index's configuration and counts."""

    name: str
    documents: int
    fingerprints: int
    f: int
    k: int
    layout: str
    verified: bool
    threshold: float | None = None


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
    found: list[list[results.Match]] | list[list[results.VerifiedMatch]]
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
        duplicate = _match(result, f) if isinstance(result, (results.Match, results.VerifiedMatch)) else None
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


def stats(index: Opened) -> Stats:
    """The index's configuration and counts."""
    plain = index.plain
    documents, fps = plain.count()
    threshold = None if index.verified is None else index.verified.threshold
    layout, verified = plain.layout.describe(), index.verified is not None
    return Stats(plain.name, documents, fps, plain.f, plain.k, layout, verified, threshold)


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


def _match(m: results.Match | results.VerifiedMatch, f: int) -> Match:
    jaccard = round(m.jaccard, 4) if isinstance(m, results.VerifiedMatch) else None
    return Match(m.id, m.distance, format_fingerprint(m.fingerprint, f), jaccard)


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


def _ref(kind: Any) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _answers(description: str, content: dict[str, Any]) -> dict[str, Any]:
    """The responses of a /v1 operation: 200 with its content, and every error status."""
    error = {"description": "an error; body.error.code is stable", "content": _json(_ref(ErrorBody))}
    return {
        "200": {"description": description, "content": content},
        **{str(status): error for status in sorted(set(CODES.values()))},
    }


@functools.lru_cache(maxsize=1)
def document() -> bytes:
    """The OpenAPI document, as JSON."""
    kinds: set[Any] = {ErrorBody, Stats}
    for op in OPERATIONS.values():
        kinds |= {op.single, op.item, op.result}
    _, components = msgspec.json.schema_components(sorted(kinds, key=lambda k: k.__name__))
    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    paths: dict[str, Any] = {}
    for path, op in OPERATIONS.items():
        paths[f"/v1/indexes/{{name}}/{path}"] = {
            "post": {
                "summary": op.summary,
                "operationId": path,
                "parameters": [name],
                "requestBody": {"required": True, "content": _json(_ref(op.single))},
                "responses": _answers("the result", _json(_ref(op.result))),
            }
        }
        queries = (("k", "integer"), ("threshold", "number")) if path == "near" else ()
        params = [
            name,
            *({"name": q, "in": "query", "required": False, "schema": {"type": t}} for q, t in queries),
        ]
        lines = {"type": "string", "description": f"JSON Lines: one {op.item.__name__} a line"}
        results = {"type": "array", "items": _ref(op.result)}
        paths[f"/v1/indexes/{{name}}/{path}/batch"] = {
            "post": {
                "summary": f"{op.summary}: a batch (a JSON array, or JSON Lines streamed in and out)",
                "operationId": f"{path}_batch",
                "parameters": params,
                "requestBody": {
                    "required": True,
                    "content": {
                        **_json({"type": "array", "items": _ref(op.item)}),
                        "application/x-ndjson": {"schema": lines},
                    },
                },
                "responses": _answers(
                    "a result per document, in order (JSON Lines: an error line for a malformed line)",
                    {**_json(results), "application/x-ndjson": {"schema": {"type": "string"}}},
                ),
            }
        }
    paths["/v1/indexes/{name}/stats"] = {
        "get": {
            "summary": "An index's configuration and counts",
            "operationId": "stats",
            "parameters": [name],
            "responses": _answers("the stats", _json(_ref(Stats))),
        }
    }
    ok = {"200": {"description": "ok"}}
    paths["/healthz"] = {"get": {"summary": "The process answers", "responses": ok}}
    paths["/readyz"] = {
        "get": {
            "summary": "Redis answers and the index can be read",
            "responses": {**ok, "503": {"description": "not ready"}},
        }
    }
    paths["/metrics"] = {"get": {"summary": "Prometheus metrics", "responses": ok}}
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "simhash-redis", "version": importlib.metadata.version("simhash-redis")},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }
    return msgspec.json.encode(doc)
