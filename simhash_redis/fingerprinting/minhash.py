"""b-bit MinHash sketches (Li and König, WWW 2010) of the library's token n-shingles, vectorised with numpy:
compact per-document Jaccard estimates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import xxhash

from ..checks import check_int
from ..errors import InvalidArgument, InvalidType
from . import engine_choice
from .hashing import mix
from .tokens import tokenize

__all__ = ["BITS", "MinHasher", "check_shingles", "doc_tokens", "shingle_hashes"]

#: Bits kept per permutation: whole bytes, so sketches compare with one numpy equality.
BITS = (8, 16)

_U64 = npt.NDArray[np.uint64]
_MASK = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Shingles per block of the (shingles x permutations) product, bounding memory to ~8 MB.
_BLOCK = 4096


def check_shingles(n: object, seed: object) -> None:
    """Check a sketcher's tokens per shingle and seed."""
    check_int("n", n, 1, 16)
    check_int("seed", seed, 0, _MASK)


def doc_tokens(doc: object, name: str) -> list[str]:
    """The normalised tokens of a document (name: for messages): text, UTF-8 bytes or str tokens
    (normalised too, empty ones dropped); InvalidType for any other, or a non-str token."""
    if isinstance(doc, (bytes, bytearray, memoryview)):
        doc = bytes(doc).decode("utf-8", errors="replace")
    if isinstance(doc, str):
        return tokenize(doc)
    if isinstance(doc, Sequence):
        out: list[str] = []
        for token in doc:
            if not isinstance(token, str):
                raise InvalidType(f"{name} must hold str tokens only, got {type(token).__name__}")
            # A given token stays one token even if it has inner spaces, as in the fingerprint.
            out.append(" ".join(tokenize(token)))
        return [token for token in out if token]
    raise InvalidType(f"{name} must be a str, bytes or a sequence of str tokens, got {type(doc).__name__}")


def check_many(docs: object) -> None:
    """Refuse (InvalidType) one text or bytes (each character would be a document), a mapping, or a
    non-iterable as many documents."""
    if isinstance(docs, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(docs, Iterable):
        raise InvalidType(f"docs must be an iterable of documents, got {type(docs).__name__}")


def checked_sketch(value: object, sizes: tuple[int, ...], what: str) -> bytes:
    """A sketch argument as bytes (InvalidType: not bytes; InvalidArgument: not of one of the sizes)."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidType(f"{what} must be bytes, got {type(value).__name__}")
    if len(value) not in sizes:
        raise InvalidArgument(f"{what} must be {' or '.join(map(str, sizes))} bytes, got {len(value)}")
    return bytes(value)


def shingle_hashes(tokens: Sequence[str], n: int, seed: int = 0) -> _U64:
    """The sorted distinct 64-bit hashes of the tokens' n-shingles (one for 1..n-1 tokens, none for 0)."""
    if not tokens:
        return np.zeros(0, dtype=np.uint64)
    cache: dict[str, int] = {}
    ids = np.fromiter(
        (
            cache.get(t) or cache.setdefault(t, xxhash.xxh3_64_intdigest(t.encode("utf-8"), seed))
            for t in tokens
        ),
        dtype=np.uint64,
        count=len(tokens),
    )
    width = min(n, len(ids))
    count = len(ids) - width + 1
    acc: _U64 = np.full(count, _GOLDEN, dtype=np.uint64)
    for offset in range(width):
        # Order-dependent: mixing after each step makes (a, b) and (b, a) hash differently.
        acc = acc * _GOLDEN + ids[offset : offset + count]
        mix(acc, np.empty_like(acc))
    return np.unique(acc)


class MinHasher:
    """Makes and compares b-bit MinHash sketches of documents' word (or CJK character) shingle sets.

    Its methods raise InvalidType for a document of another type (naming it, ``docs[i]`` in a batch)
    and InvalidArgument for a sketch of another length than `sketch_bytes`.

    Args:
        num_perm: permutations, 16 to 4096 (default 256).
        bits: bits kept per permutation, 8 or 16 (default 8).
        n: tokens per shingle (default 3).
        seed: seed of the token hashes and of the permutations.

    Raises:
        InvalidArgument: an argument is out of range.
        InvalidType: an argument is not an int.
    """

    def __init__(self, num_perm: int = 256, bits: int = 8, n: int = 3, seed: int = 0) -> None:
        check_int("num_perm", num_perm, 16, 4096)
        if check_int("bits", bits, 0) not in BITS:
            raise InvalidArgument(f"bits must be one of {BITS}, got {bits}")
        check_shingles(n, seed)
        self.num_perm = num_perm
        self.bits = bits
        self.n = n
        self.seed = seed
        rng = np.random.default_rng(seed)
        #: The permutations x -> a*x + b, read-only (the compiled core reads them too). Odd multipliers
        #: make each a bijection of uint64, i.e. a permutation of hash values.
        self.a = rng.integers(0, 1 << 63, size=num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        self.b = rng.integers(0, 1 << 63, size=num_perm, dtype=np.uint64)
        # Read-only: the compiled core keeps its own copy, which a change in place would leave behind.
        self.a.flags.writeable = self.b.flags.writeable = False
        self._dtype = np.dtype(np.uint8) if bits == 8 else np.dtype("<u2")
        self._chance = 2.0**-bits

    @property
    def sketch_bytes(self) -> int:
        """Size of one sketch in bytes (a query's too, unlike `BandedOddSketcher`'s)."""
        return self.num_perm * self.bits // 8

    query_bytes = sketch_bytes

    @staticmethod
    def stored(query: bytes) -> bytes:
        """The stored form of a query's sketch: the sketch itself."""
        return query

    def stored_sketch(self, doc: str | bytes | Sequence[str]) -> bytes:
        """The sketch stored for a document: `sketch`'s."""
        return self.sketch(doc)

    def describe(self) -> str:
        """A stable description of the parameters, e.g. "minhash;perm=256;bits=8;n=3;seed=0"."""
        return f"minhash;perm={self.num_perm};bits={self.bits};n={self.n};seed={self.seed}"

    def signature(self, hashes: _U64) -> _U64:
        """The num_perm 64-bit minima of a set of shingle hashes (all 2**64-1 for the empty set)."""
        mins = np.full(self.num_perm, np.uint64(_MASK), dtype=np.uint64)
        for start in range(0, len(hashes), _BLOCK):
            block = hashes[start : start + _BLOCK, None]
            np.minimum(mins, (block * self.a + self.b).min(axis=0), out=mins)
        return mins

    def sketch_of_hashes(self, hashes: _U64) -> bytes:
        """The b-bit sketch (sketch_bytes) of a set of shingle hashes."""
        # Keep high bits of a re-mixed minimum: the minimum's own high bits are biased towards zero.
        mins = self.signature(hashes)
        top = mix(mins, np.empty_like(mins)) >> np.uint64(64 - self.bits)
        return bytes(top.astype(self._dtype).tobytes())

    def sketch(self, doc: str | bytes | Sequence[str]) -> bytes:
        """The sketch of one document: text, UTF-8 bytes, or str tokens."""
        native = engine_choice.native
        if native is not None:
            return native.minhash(self).sketch(native.sketch_doc(doc, "doc"), "doc")  # type: ignore[no-any-return]
        return self.sketch_of_hashes(shingle_hashes(doc_tokens(doc, "doc"), self.n, self.seed))

    def sketch_many(self, docs: Sequence[str | bytes | Sequence[str]]) -> list[bytes]:
        """The sketches of many documents (as `sketch` takes), in order."""
        check_many(docs)
        native = engine_choice.native
        if native is not None:
            return native.minhash(self).sketch_many(native.sketch_docs(docs))  # type: ignore[no-any-return]
        return [
            self.sketch_of_hashes(shingle_hashes(doc_tokens(doc, f"docs[{i}]"), self.n, self.seed))
            for i, doc in enumerate(docs)
        ]

    def estimate(self, a: bytes, b: bytes) -> float:
        """The Jaccard estimate of two sketches, clipped to [0, 1]."""
        return float(self.estimate_many(a, [b])[0])

    def estimate_many(self, query: bytes, others: Sequence[bytes]) -> npt.NDArray[np.float64]:
        """The Jaccard estimates of one sketch with many others, in order, clipped to [0, 1]."""
        for sketch in (query, *others):
            checked_sketch(sketch, (self.sketch_bytes,), "a sketch")
        if not others:
            return np.zeros(0, dtype=np.float64)
        mine = np.frombuffer(query, dtype=self._dtype)
        theirs = np.frombuffer(b"".join(others), dtype=self._dtype).reshape(len(others), self.num_perm)
        agree = (theirs == mine).mean(axis=1)
        out: npt.NDArray[np.float64] = np.clip((agree - self._chance) / (1.0 - self._chance), 0.0, 1.0)
        return out
