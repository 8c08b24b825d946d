"""The JSON forms of requests and responses, as msgspec structs (the OpenAPI document is made from them).

Fingerprints travel as hex strings, as the CLI prints them (a request may also give decimal, as a string):
a 64-bit number does not survive a JSON parser that reads numbers as doubles (JavaScript's).
"""

from __future__ import annotations

import msgspec

from .problems import Problem

__all__ = [
    "AddIfNewResult",
    "AddResult",
    "Document",
    "ErrorBody",
    "FingerprintResult",
    "Id",
    "Match",
    "NearResult",
    "Query",
    "QueryItem",
    "RemoveResult",
    "Stats",
    "StoredResult",
    "Text",
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


class ErrorBody(msgspec.Struct, frozen=True):
    """The body of every error response."""

    error: Problem
