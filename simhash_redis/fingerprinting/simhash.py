"""SimHash fingerprints (Charikar; every bit defined in docs/fingerprints.md): `fingerprint`,
`fingerprint_many` and `distance`."""

from __future__ import annotations

from collections.abc import Iterable

from ..checks import is_int
from ..errors import InvalidArgument, InvalidType
from .documents import Document
from .scheme import DEFAULT_SCHEME, Scheme

__all__ = [
    "DEFAULT_SCHEME",
    "Document",
    "Scheme",
    "check_scheme",
    "distance",
    "fingerprint",
    "fingerprint_many",
]


def check_scheme(scheme: object) -> Scheme:
    """A Scheme argument, or `DEFAULT_SCHEME` for None (InvalidType for anything else)."""
    if scheme is None:
        return DEFAULT_SCHEME
    if not isinstance(scheme, Scheme):
        raise InvalidType(f"scheme must be a Scheme, got {type(scheme).__name__}")
    return scheme


def fingerprint(doc: Document, scheme: Scheme | None = None) -> int:
    """Fingerprint one document: an int in [0, 2**scheme.f), 0 for a document without any token.

    Args:
        doc: a text (str); UTF-8 bytes (invalid bytes become U+FFFD); a sequence of str tokens (already
            segmented: normalised, stopwords dropped, then made into the scheme's features); or weighted
            features, a mapping feature → weight or an iterable of (feature, weight) pairs (normalised,
            duplicates summed, hashed as given).
        scheme: the scheme; None for `DEFAULT_SCHEME`.

    Raises:
        InvalidType: doc or scheme is of no accepted type; the message names it.
        InvalidArgument: a weight is NaN or infinite.
    """
    return check_scheme(scheme).fingerprint(doc)


def fingerprint_many(docs: Iterable[Document], scheme: Scheme | None = None) -> list[int]:
    """Fingerprint many documents (any iterable, consumed once), batched: ``[fingerprint(d, scheme) for d in
    docs]``.

    Raises:
        InvalidType: docs is not an iterable of documents, or a document's type is wrong; the message names it
            (``docs[i]``).
        InvalidArgument: a weight is NaN or infinite.
    """
    return check_scheme(scheme).fingerprint_many(docs)


def distance(a: int, b: int) -> int:
    """The Hamming distance between two fingerprints (non-negative ints): the bits in which they differ.

    Raises:
        InvalidType: a or b is not an int (bools are refused).
        InvalidArgument: a or b is negative.
    """
    for name, value in (("a", a), ("b", b)):
        if not is_int(value):
            raise InvalidType(f"{name} must be an int, got {type(value).__name__}")
        if value < 0:
            raise InvalidArgument(f"{name} must be a non-negative fingerprint, got {value}")
    return (a ^ b).bit_count()
