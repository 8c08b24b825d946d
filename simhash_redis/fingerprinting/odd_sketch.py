"""Odd sketches (Mitzenmacher, Pagh and Pham, WWW 2014) of shingle sets: 128 bytes a document, Jaccard
estimates precise for near pairs (docs/quality.md, "The stored sketch against its bytes").

Bit i is the parity of the document's distinct shingles (`minhash.shingle_hashes`) that hash to i, of
SKETCH_BITS; z bits of XOR give the symmetric difference D = -m/2 ln(1 - 2z/m), rounded to z plus an even
number, and J = (|A| + |B| - D) / (|A| + |B| + D). A document of more than SAMPLE_LIMIT shingles sketches
those whose sampling key is below 2**(64 - level), at the smallest level that leaves at most SAMPLE_LIMIT
(MAX_LEVEL at most); sketches compare only at one level (`estimate_doc` sketches a text at the stored one's).

The stored form, stable (s the seed, arithmetic mod 2**64, mix the splitmix64 finaliser): a shingle hash h
sets bit ``mix(h ^ (0x2545F4914F6CDD1D * (s + 1))) % 1008`` and has the sampling key ``mix(h ^
(0x9E3779B97F4A7C15 * (s + 3)))``; bytes 0-125 are the bits (numpy's `packbits`: bit i in byte i // 8, mask
0x80 >> (i % 8)), bytes 126-127 a little-endian uint16 of the shingles sketched (at most MAX_SIZE, which can
only lower an estimate) in its low 12 bits and the level in its high 4. Two sketches of empty sets (size 0
at level 0) estimate 1, as documents with nothing to hash are near-duplicates (docs/fingerprints.md); two
of size 0 at another level estimate 0, as sampled sets may be empty for non-empty documents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..checks import is_int
from ..errors import InvalidArgument, InvalidType
from . import engine_choice
from .hashing import mix
from .minhash import check_many, check_shingles, checked_sketch, doc_tokens, shingle_hashes

__all__ = ["MAX_LEVEL", "MAX_SIZE", "SAMPLE_LIMIT", "SKETCH_BITS", "SKETCH_BYTES", "OddSketcher"]

#: Bits of parity in a sketch.
SKETCH_BITS = 1008
#: Bytes of a sketch: the bits, then the size and level (2 bytes).
SKETCH_BYTES = 128
#: The most shingles a document's own level leaves (fewer at a larger level, more at a smaller one).
SAMPLE_LIMIT = 1024
#: The largest level (4 bits).
MAX_LEVEL = 15
#: The largest size a sketch records (12 bits).
MAX_SIZE = 4095

_U64 = npt.NDArray[np.uint64]
_MASK = (1 << 64) - 1
_PARITY_BYTES = SKETCH_BITS // 8
_SLOT_SALT = 0x2545F4914F6CDD1D
# Up to this many sketches an estimate runs pair by pair in the compiled core, past it in numpy.
NATIVE_PAIRS = 64
_SAMPLE_SALT = 0x9E3779B97F4A7C15


def _deltas() -> npt.NDArray[np.float64]:
    """The symmetric difference D for each count z of differing bits (inf from half of them: saturated)."""
    out = np.full(SKETCH_BITS + 1, np.inf)
    half = SKETCH_BITS / 2
    for z in range(SKETCH_BITS // 2):
        # math.log, the platform's C log, as the compiled core's ln: both engines give the same floats.
        expected = -half * math.log(1.0 - 2.0 * z / SKETCH_BITS)
        out[z] = z + 2 * math.floor((expected - z) / 2 + 0.5)
    return out


_DELTA = _deltas()


def _words(rows: npt.NDArray[np.uint8]) -> npt.NDArray[np.intp]:
    """The header word (size, level) of each row of sketches."""
    words: npt.NDArray[np.intp] = (
        rows[:, _PARITY_BYTES].astype(np.intp) | rows[:, _PARITY_BYTES + 1].astype(np.intp) << 8
    )
    return words


def _estimates(
    rows: npt.NDArray[np.uint8], mine: npt.NDArray[np.uint8], totals: npt.NDArray[np.intp]
) -> npt.NDArray[np.float64]:
    """The estimates of `rows` against `mine` (one row's parity bytes, or one per row)."""
    z = np.bitwise_count(rows[:, :_PARITY_BYTES] ^ mine).sum(axis=1, dtype=np.intp)
    delta = _DELTA[z]
    total = totals.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (total - delta) / (total + delta)
    out: npt.NDArray[np.float64] = np.nan_to_num(np.clip(value, 0.0, 1.0), nan=0.0)
    # Both sets empty (the pair is of one level): 0 / 0 above, but identical sets.
    out[(totals == 0) & (z == 0) & (_words(rows) >> 12 == 0)] = 1.0
    return out


def _checked_level(level: object, name: str) -> int:
    """A level argument, checked to be an int in 0..MAX_LEVEL."""
    if not is_int(level):
        raise InvalidType(f"{name} must be an int, got {type(level).__name__}")
    if not 0 <= level <= MAX_LEVEL:
        raise InvalidArgument(f"{name} must be in 0..{MAX_LEVEL}, got {level}")
    return level


def _sketch_bytes(sketch: object) -> bytes:
    return checked_sketch(sketch, (SKETCH_BYTES,), "an odd sketch")


def _header(sketch: bytes) -> tuple[int, int]:
    word = int.from_bytes(sketch[_PARITY_BYTES:], "little")
    return word & MAX_SIZE, word >> 12


def _mismatch(mine: int, theirs: int) -> InvalidArgument:
    return InvalidArgument(
        f"odd sketches at levels {mine} and {theirs} do not compare: sketch the document at the stored "
        "sketch's level"
    )


class OddSketcher:
    """Makes and compares odd sketches (SKETCH_BYTES bytes) of documents' word (or CJK character) shingles.

    Its methods raise InvalidType for a document, level or sketch of another type (naming a batch's
    document, ``docs[i]``), and InvalidArgument for a level outside 0..MAX_LEVEL, a sketch of another
    length than SKETCH_BYTES, or sketches of different levels compared (`estimate_doc` compares a
    document with sketches of any level).

    Args:
        n: tokens per shingle (default 3).
        seed: seed of the token hashes, the bits and the sampling keys.

    Raises:
        InvalidArgument: an argument is out of range.
        InvalidType: an argument is not an int.
    """

    sketch_bytes = SKETCH_BYTES

    def __init__(self, n: int = 3, seed: int = 0) -> None:
        check_shingles(n, seed)
        self.n = n
        self.seed = seed
        self._slot_salt = np.uint64((_SLOT_SALT * (seed + 1)) & _MASK)
        self._sample_salt = np.uint64((_SAMPLE_SALT * (seed + 3)) & _MASK)

    def describe(self) -> str:
        """A stable description of the sketch parameters, e.g. "odd;bits=1008;n=3;seed=0"."""
        return f"odd;bits={SKETCH_BITS};n={self.n};seed={self.seed}"

    @staticmethod
    def _own_level(keys: _U64) -> int:
        """The smallest level that leaves at most SAMPLE_LIMIT of these sampling keys (MAX_LEVEL at most)."""
        if len(keys) <= SAMPLE_LIMIT:
            return 0
        for level in range(1, MAX_LEVEL):
            if np.count_nonzero(keys < np.uint64(1 << (64 - level))) <= SAMPLE_LIMIT:
                return level
        return MAX_LEVEL

    def sketch_of_hashes(self, hashes: _U64, level: int | None = None) -> bytes:
        """The odd sketch of a set of shingle hashes (duplicates count once) at a sampling level, 0..MAX_LEVEL
        (None: the set's own)."""
        if level is not None:
            level = _checked_level(level, "level")
        hashes = np.unique(np.asarray(hashes, dtype=np.uint64))
        keys = mix(hashes ^ self._sample_salt, np.empty_like(hashes))
        if level is None:
            level = self._own_level(keys)
        kept = hashes[keys < np.uint64(1 << (64 - level))] if level else hashes
        slots = (mix(kept ^ self._slot_salt, np.empty_like(kept)) % np.uint64(SKETCH_BITS)).astype(np.intp)
        parity = (np.bincount(slots, minlength=SKETCH_BITS) & 1).astype(np.uint8)
        header = min(len(kept), MAX_SIZE) | level << 12
        return bytes(np.packbits(parity).tobytes()) + header.to_bytes(2, "little")

    def sketch(self, doc: str | bytes | Sequence[str], level: int | None = None) -> bytes:
        """The odd sketch of one document (text, UTF-8 bytes, or str tokens) at a sampling level,
        0..MAX_LEVEL: a stored sketch's, to compare with it; None for the document's own."""
        if level is not None:
            level = _checked_level(level, "level")
        native = engine_choice.native
        if native is not None:
            return native.odd(self.n, self.seed).sketch(native.sketch_doc(doc, "doc"), level, "doc")  # type: ignore[no-any-return]
        return self.sketch_of_hashes(shingle_hashes(doc_tokens(doc, "doc"), self.n, self.seed), level)

    def sketch_many(
        self, docs: Sequence[str | bytes | Sequence[str]], level: int | None = None
    ) -> list[bytes]:
        """The odd sketches of many documents (as `sketch` takes), at one level or (None) each at its own."""
        check_many(docs)
        if level is not None:
            level = _checked_level(level, "level")
        native = engine_choice.native
        if native is not None:
            return native.odd(self.n, self.seed).sketch_many(native.sketch_docs(docs), level)  # type: ignore[no-any-return]
        return [
            self.sketch_of_hashes(shingle_hashes(doc_tokens(doc, f"docs[{i}]"), self.n, self.seed), level)
            for i, doc in enumerate(docs)
        ]

    def sketch_levels(self, doc: str | bytes | Sequence[str], levels: Sequence[int]) -> list[bytes]:
        """The odd sketches of one document at several levels, in order, its shingles made once."""
        wanted = [_checked_level(level, f"levels[{i}]") for i, level in enumerate(levels)]
        native = engine_choice.native
        if native is not None:
            return native.odd(self.n, self.seed).sketch_levels(native.sketch_doc(doc, "doc"), wanted, "doc")  # type: ignore[no-any-return]
        hashes = shingle_hashes(doc_tokens(doc, "doc"), self.n, self.seed)
        return [self.sketch_of_hashes(hashes, level) for level in wanted]

    @staticmethod
    def size_and_level(sketch: bytes) -> tuple[int, int]:
        """The number of shingles a sketch holds (at most MAX_SIZE) and its level."""
        return _header(_sketch_bytes(sketch))

    def estimate(self, a: bytes, b: bytes) -> float:
        """The Jaccard estimate, in [0, 1], of two sketches of one level (0: too different to tell; 1 for
        two empty sets)."""
        return float(self.estimate_many(a, [b])[0])

    def estimate_many(self, query: bytes, others: Sequence[bytes]) -> npt.NDArray[np.float64]:
        """The Jaccard estimates of one sketch with many others of its level, in order."""
        mine = _sketch_bytes(query)
        if not others:
            return np.zeros(0, dtype=np.float64)
        checked = [_sketch_bytes(s) for s in others]
        size, level = _header(mine)
        if engine_choice.native is not None and len(checked) <= NATIVE_PAIRS:
            # A few pairs (a lookup's candidates): numpy's fixed cost per call would be most of the time.
            for other in checked:
                if _header(other)[1] != level:
                    raise _mismatch(level, _header(other)[1])
            estimate = engine_choice.native.odd_estimate
            return np.array([estimate(mine, other) for other in checked], dtype=np.float64)
        rows = np.frombuffer(b"".join(checked), dtype=np.uint8).reshape(len(checked), SKETCH_BYTES)
        words = _words(rows)
        wrong = np.flatnonzero(words >> 12 != level)
        if len(wrong):
            raise _mismatch(level, int(words[wrong[0]]) >> 12)
        ours = np.frombuffer(mine, dtype=np.uint8, count=_PARITY_BYTES)
        return _estimates(rows, ours, size + (words & MAX_SIZE))

    @staticmethod
    def estimate_rows(mine: npt.NDArray[np.uint8], others: npt.NDArray[np.uint8]) -> npt.NDArray[np.float64]:
        """`estimate_many` of row i of `mine` with row i of `others` (one level a pair, unchecked)."""
        sizes = _words(mine) & MAX_SIZE
        return _estimates(others, mine[:, :_PARITY_BYTES], sizes + (_words(others) & MAX_SIZE))

    def estimate_doc(
        self, doc: str | bytes | Sequence[str], stored: Sequence[bytes]
    ) -> npt.NDArray[np.float64]:
        """The Jaccard estimates of a document with stored sketches of any levels, in order."""
        checked = [_sketch_bytes(s) for s in stored]
        levels = sorted({_header(s)[1] for s in checked})
        mine = dict(zip(levels, self.sketch_levels(doc, levels), strict=True))
        out = np.zeros(len(checked), dtype=np.float64)
        for level, query in mine.items():
            at = [i for i, s in enumerate(checked) if _header(s)[1] == level]
            out[at] = self.estimate_many(query, [checked[i] for i in at])
        return out
