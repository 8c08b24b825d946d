"""SimHash fingerprints (Charikar; every bit defined in docs/fingerprints.md): `fingerprint`,
`fingerprint_many` and `distance`, and the `Scheme` value object, everything that decides a document's
fingerprint bits, with a stable name.

Two fingerprints are comparable only when made with the same scheme; ``a.to_meta() == b.to_meta()`` is
the compatibility check, and the meta string is what an index stores next to its fingerprints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import xxhash

from .. import defaults
from ..checks import check_int, is_int
from ..errors import ConfigurationMismatch, IndexCorrupted, InvalidArgument, InvalidType
from . import engine_choice
from .documents import Document
from .normalize import PINNED
from .tokens import FEATURE_KINDS

__all__ = [
    "DEFAULT_SCHEME",
    "MAX_N",
    "SCHEME_VERSION",
    "WEIGHTINGS",
    "Document",
    "Scheme",
    "check_scheme",
    "distance",
    "fingerprint",
    "fingerprint_many",
    "stopwords_digest",
]

#: The scheme version, in the meta string; bumped whenever any bit of any fingerprint changes. Text is
#: normalised and classified by Unicode 15.1 on every Python.
SCHEME_VERSION = 2
#: Weightings: term frequency, or 1 for each distinct feature.
WEIGHTINGS = ("tf", "binary")
#: Longest shingle or character n-gram, in tokens or characters.
MAX_N = 16
_META_PREFIX = "simhash-redis/"
_META_KEYS = ("features", "n", "f", "weighting", "hash", "seed", "norm", "unicode", "stopwords")
_HASH_NAME = "xxh3"
_NORM_NAME = "nfkc-casefold"


def _check_choice(name: str, value: object, choices: Iterable[object]) -> None:
    if not isinstance(value, str):
        raise InvalidType(f"{name} must be a str, got {type(value).__name__}")
    allowed = tuple(choices)
    if value not in allowed:
        raise InvalidArgument(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def _normalize_stopwords(stopwords: object) -> tuple[str, ...]:
    """Normalise a stopword collection into the sorted tuple of distinct normalised words."""
    if isinstance(stopwords, (str, bytes)) or not isinstance(stopwords, Iterable):
        raise InvalidType(f"stopwords must be an iterable of str, got {type(stopwords).__name__}")
    words = set()
    for word in stopwords:
        if not isinstance(word, str):
            raise InvalidType(f"stopwords must hold str only, got {type(word).__name__}")
        norm = PINNED.normalize(word)
        if not norm:
            raise InvalidArgument(f"stopwords must not hold empty words, got {word!r}")
        words.add(norm)
    return tuple(sorted(words))


def stopwords_digest(stopwords: tuple[str, ...]) -> str:
    """The meta string's digest of `Scheme.stopwords`: "none" for no words, else the xxh64 (seed 0) hex
    digest of the words' UTF-8 encodings, each preceded by its length as 4 little-endian bytes."""
    if not stopwords:
        return "none"
    digest = xxhash.xxh64(seed=0)
    for word in stopwords:
        data = word.encode("utf-8")
        digest.update(len(data).to_bytes(4, "little") + data)
    return str(digest.hexdigest())


@dataclasses.dataclass(frozen=True)
class Scheme:
    """How documents become fingerprints: features, shingle size, width, weighting, seed and stopwords.

    Attributes:
        features: "shingles" (word n-grams, the default), "words" or "chars" (character n-grams).
        n: tokens per shingle, or characters per n-gram; 1 to 16. "words" has no n: it is stored as 1,
            so schemes that differ only in an unused n are equal and their indexes compatible.
        f: fingerprint width in bits: 32, 64 or 128.
        weighting: "tf" (a feature counts once per occurrence) or "binary" (once per document).
        seed: the xxh3 seed, 0 to 2**64-1.
        stopwords: tokens dropped before features are built; given as any iterable of str, stored
            normalised, de-duplicated and sorted. Not allowed with "chars".
    """

    features: str = defaults.FEATURES
    n: int = defaults.SHINGLE_SIZE
    f: int = defaults.F
    weighting: str = "tf"
    seed: int = defaults.SEED
    stopwords: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Validate every field (InvalidType, InvalidArgument name it) and normalise the stopwords."""
        _check_choice("features", self.features, FEATURE_KINDS)
        check_int("n", self.n, 1, MAX_N)
        check_int("f", self.f, min(defaults.SUPPORTED_F), max(defaults.SUPPORTED_F))
        if self.f not in defaults.SUPPORTED_F:
            raise InvalidArgument(f"f must be one of {defaults.SUPPORTED_F}, got {self.f}")
        _check_choice("weighting", self.weighting, WEIGHTINGS)
        check_int("seed", self.seed, 0, (1 << 64) - 1)
        words = _normalize_stopwords(self.stopwords)
        if words and self.features == "chars":
            raise InvalidArgument('stopwords apply to tokens; features="chars" cannot use them')
        object.__setattr__(self, "stopwords", words)
        if self.features == "words":
            object.__setattr__(self, "n", 1)

    def to_meta(self) -> str:
        """The scheme's compact, stable meta string, such as "simhash-redis/2;features=shingles;n=3;f=64;
        weighting=tf;hash=xxh3;seed=0;norm=nfkc-casefold;unicode=15.1;stopwords=none" (one line)."""
        return (
            f"{_META_PREFIX}{SCHEME_VERSION};features={self.features};n={self.n};f={self.f};"
            f"weighting={self.weighting};hash={_HASH_NAME};seed={self.seed};norm={_NORM_NAME};"
            f"unicode={PINNED.version};stopwords={stopwords_digest(self.stopwords)}"
        )

    @classmethod
    def from_meta(cls, meta: str | bytes, stopwords: Iterable[str] | None = None) -> Scheme:
        """Rebuild the scheme whose ``to_meta()`` is meta (bytes are decoded as UTF-8); stopwords: the list,
        needed when the meta records one (it keeps only a digest).

        Raises:
            InvalidType: meta is not str or bytes.
            IndexCorrupted: meta is not a meta string this version can read.
            ConfigurationMismatch: the stopwords are missing, or do not match the recorded digest.
        """
        if isinstance(meta, bytes):
            try:
                meta = meta.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IndexCorrupted(f"scheme meta is not UTF-8: {meta[:80]!r}") from exc
        if not isinstance(meta, str):
            raise InvalidType(f"meta must be a str, got {type(meta).__name__}")
        fields = _parse_meta(meta)
        digest = fields.pop("stopwords")
        words: tuple[str, ...] = () if stopwords is None else _normalize_stopwords(stopwords)
        if stopwords_digest(words) != digest:
            if digest != "none" and stopwords is None:
                raise ConfigurationMismatch(
                    f"the scheme uses a stopword list (digest {digest}) that its meta cannot hold: "
                    "pass the same list as Scheme.from_meta(meta, stopwords=...)"
                )
            raise ConfigurationMismatch(
                f"the stopwords given (digest {stopwords_digest(words)}) are not the scheme's "
                f"(digest {digest})"
            )
        try:
            scheme = cls(stopwords=words, **fields)
        except (InvalidArgument, InvalidType) as exc:
            raise IndexCorrupted(f"scheme meta holds an invalid value: {exc}") from exc
        if scheme.to_meta() != meta:
            raise IndexCorrupted(f"scheme meta is not in canonical form: {meta[:200]!r}")
        return scheme

    def fingerprint(self, doc: Document) -> int:
        """Fingerprint one document with this scheme; see `simhash_redis.fingerprint`."""
        return engine_choice.chosen().fingerprint(doc, self)

    def fingerprint_many(self, docs: Iterable[Document]) -> list[int]:
        """Fingerprint many documents with this scheme; see `simhash_redis.fingerprint_many`."""
        if isinstance(docs, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(docs, Iterable):
            raise InvalidType(f"docs must be an iterable of documents, got {type(docs).__name__}")
        return engine_choice.chosen().fingerprint_many(docs, self)


def _parse_meta(meta: str) -> dict[str, Any]:
    """Split a meta string into Scheme keyword arguments plus the stopwords digest."""
    head, _, rest = meta.partition(";")
    if not head.startswith(_META_PREFIX) or not rest:
        raise IndexCorrupted(f"not a simhash-redis scheme meta: {meta[:200]!r}")
    version_text = head[len(_META_PREFIX) :]
    if not version_text.isdigit() or not version_text.isascii():
        raise IndexCorrupted(f"scheme meta has a malformed version: {meta[:200]!r}")
    version = int(version_text)
    if version != SCHEME_VERSION:
        upgrade = ": upgrade simhash-redis" if version > SCHEME_VERSION else ""
        raise IndexCorrupted(
            f"scheme version {version} is not supported (this library computes version "
            f"{SCHEME_VERSION}){upgrade}"
        )
    pairs = [item.partition("=") for item in rest.split(";")]
    keys = tuple(key for key, _, _ in pairs)
    if keys != _META_KEYS or any(not sep for _, sep, _ in pairs):
        raise IndexCorrupted(f"scheme meta has unexpected fields: {meta[:200]!r}")
    values = {key: value for key, _, value in pairs}
    if values["hash"] != _HASH_NAME or values["norm"] != _NORM_NAME or values["unicode"] != PINNED.version:
        raise IndexCorrupted(
            f"scheme meta names an unknown hash, normalisation or Unicode version: {meta[:200]!r}"
        )
    fields: dict[str, Any] = {key: values[key] for key in ("features", "weighting", "stopwords")}
    for key in ("n", "f", "seed"):
        if not values[key].isascii() or not values[key].isdigit():
            raise IndexCorrupted(f"scheme meta has a malformed {key}: {meta[:200]!r}")
        fields[key] = int(values[key])
    return fields


#: The default scheme: word 3-shingles, 64 bits, term frequency, seed 0, no stopwords.
DEFAULT_SCHEME = Scheme()


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
