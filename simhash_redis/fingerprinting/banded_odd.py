"""The default verified mode's sketches: 32 MinHash values that key the band tables, and an odd sketch.

A document is stored with 160 bytes: the 32 values of 8 bits (8 bands of 4, from byte 0), then its odd sketch
at its own sampling level (`OddSketcher`). A near pair's levels differ by at most one, so a query carries its
odd sketch at its own level and, where a near document could be stored at another, at the level below and
above: 416 bytes (`query_bytes`). A stored level without its query sketch estimates 0 (the sizes are too far
apart for Jaccard 0.5), so pairs across levels compare at thresholds of 0.5 and up.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import InvalidArgument
from . import engine_choice
from .minhash import MinHasher, check_many, checked_sketch
from .odd_sketch import MAX_LEVEL, NATIVE_PAIRS, SKETCH_BYTES, OddSketcher
from .scheme import Scheme

__all__ = ["BAND_VALUES", "BandedOddSketcher", "Sketcher"]

#: MinHash values of 8 bits that key the band tables (8 bands of 4).
BAND_VALUES = 32
# A document keeping fewer shingles at its level than this has no near one stored a level above: that
# one keeps more than 1,024 at this level, and Jaccard 0.5 needs at least 0.5 x 1,024 (with a margin
# for the sampling).
_ABOVE = 480
_EMPTY = bytes(SKETCH_BYTES)
_TEXTS = (str, bytes)


class BandedOddSketcher:
    """Makes and compares the default verified mode's sketches (see the module), of shingles of `n` tokens
    (default 3) hashed with `seed`.

    Its methods raise InvalidType for a document of another type (naming a batch's, ``docs[i]``) and
    InvalidArgument for a sketch of the wrong length (or, in `estimate_pairs`, owners and others of
    different lengths); the constructor raises as `OddSketcher`'s.
    """

    #: Bytes of a stored sketch: the band values, then the odd sketch at the document's own level.
    sketch_bytes = BAND_VALUES + SKETCH_BYTES
    #: Bytes of a query's sketch: the stored form, then the odd sketches a level below and above.
    query_bytes = BAND_VALUES + 3 * SKETCH_BYTES
    # True in a `storing` one: `sketch_many` makes stored sketches only (the odd sketches a level below
    # and above, which only a query needs, cost about a third of a query sketch).
    _stores_only = False

    def __init__(self, n: int = 3, seed: int = 0) -> None:
        self.odd = OddSketcher(n, seed)
        self.bands = MinHasher(BAND_VALUES, 8, n, seed)
        self.n, self.seed = n, seed

    def describe(self) -> str:
        """A stable description of the parameters, e.g. "odd;bits=1008;n=3;seed=0"."""
        return self.odd.describe()

    def sketch(self, doc: str | bytes | Sequence[str]) -> bytes:
        """A document's query sketch (`query_bytes`)."""
        return self.sketch_many([doc])[0]

    def sketch_many(self, docs: Sequence[str | bytes | Sequence[str]]) -> list[bytes]:
        """The query sketches of many documents (`query_bytes` each)."""
        check_many(docs)
        native = engine_choice.native
        if native is not None:
            # One pass a document: its shingles made once for the band values and every level.
            odd, bands = native.odd(self.n, self.seed), native.minhash(self.bands)
            if self._stores_only:
                return odd.banded_stored_many(native.sketch_docs(docs), bands)  # type: ignore[no-any-return]
            return odd.banded_many(native.sketch_docs(docs), bands, _ABOVE)  # type: ignore[no-any-return]
        docs = list(docs)  # read more than once below: a generator would be spent by the first
        out = []
        own = self.odd.sketch_many(docs)
        for doc, band, mine in zip(docs, self.bands.sketch_many(docs), own, strict=True):
            if self._stores_only:
                out.append(band + mine)
                continue
            size, level = OddSketcher.size_and_level(mine)
            levels = [level - 1] if level > 0 else []
            if size >= _ABOVE and level < MAX_LEVEL:
                levels.append(level + 1)
            extra = dict(zip(levels, self.odd.sketch_levels(doc, levels), strict=True)) if levels else {}
            out.append(band + mine + extra.get(level - 1, _EMPTY) + extra.get(level + 1, _EMPTY))
        return out

    @staticmethod
    def stored(query: bytes) -> bytes:
        """The stored form of a query sketch."""
        return checked_sketch(
            query, (BandedOddSketcher.query_bytes, BandedOddSketcher.sketch_bytes), "a sketch"
        )[: BandedOddSketcher.sketch_bytes]

    def stored_sketch(self, doc: str | bytes | Sequence[str]) -> bytes:
        """The sketch stored for a document (`sketch_bytes`)."""
        return self.stored(self.sketch(doc))

    def estimate(self, query: bytes, other: bytes) -> float:
        """The Jaccard estimate of a query and a stored document (either sketch of it)."""
        return float(self.estimate_many(query, [self.stored(other)])[0])

    def estimate_many(self, query: bytes, others: Sequence[bytes]) -> npt.NDArray[np.float64]:
        """The Jaccard estimates of a query sketch (or a stored one: its own level only) with stored ones."""
        query = checked_sketch(query, (self.query_bytes, self.sketch_bytes), "a query sketch")
        native = engine_choice.native
        if native is None or len(others) > NATIVE_PAIRS:
            return self.estimate_pairs([query], [0] * len(others), others)
        # A lookup's few candidates, pair by pair in the compiled core (numpy's fixed cost per call would
        # be most of the time); the same floats as `estimate_pairs`.
        mine = [
            query[BAND_VALUES + i * SKETCH_BYTES : BAND_VALUES + (i + 1) * SKETCH_BYTES] for i in range(3)
        ]
        level = OddSketcher.size_and_level(mine[0])[1]
        by_level = {level: mine[0]}
        if len(query) == self.query_bytes:
            for sketch, wanted in ((mine[1], level - 1), (mine[2], level + 1)):
                if wanted >= 0 and sketch != _EMPTY and OddSketcher.size_and_level(sketch)[1] == wanted:
                    by_level[wanted] = sketch
        out = np.zeros(len(others), dtype=np.float64)
        for i, other in enumerate(others):
            other = checked_sketch(other, (self.sketch_bytes,), "a stored sketch")
            at_level = by_level.get(other[-1] >> 4)  # the level: the header's top 4 bits
            if at_level is not None:
                out[i] = native.odd_estimate(at_level, other[BAND_VALUES:])
        return out

    def estimate_pairs(
        self, queries: Sequence[bytes], owners: Sequence[int], others: Sequence[bytes]
    ) -> npt.NDArray[np.float64]:
        """`estimate_many` of many queries at once: stored sketch i (`sketch_bytes`) against the query
        sketch owners[i] of `queries`; the same floats, in one numpy pass."""
        if len(owners) != len(others):
            raise InvalidArgument("give one query position per stored sketch")
        out = np.zeros(len(others), dtype=np.float64)
        if not others:
            return out
        queries = [
            checked_sketch(one, (self.query_bytes, self.sketch_bytes), "a query sketch") for one in queries
        ]
        others = [checked_sketch(other, (self.sketch_bytes,), "a stored sketch") for other in others]
        pad = self.query_bytes - self.sketch_bytes  # a stored form has no sketch a level below or above
        joined = b"".join([one if len(one) == self.query_bytes else one + bytes(pad) for one in queries])
        whole = np.frombuffer(joined, dtype=np.uint8).reshape(len(queries), self.query_bytes)
        mine = whole[:, BAND_VALUES:].reshape(len(queries), 3, SKETCH_BYTES)
        levels = mine[:, :, -1].astype(np.intp) >> 4  # the header's top 4 bits
        own = levels[:, 0]
        # The levels below and above count where present (not all zero) and of that level.
        present: npt.NDArray[np.bool_] = np.any(mine, axis=2)
        usable = np.ones((len(queries), 3), dtype=bool)
        usable[:, 1] = (own >= 1) & present[:, 1] & (levels[:, 1] == own - 1)
        usable[:, 2] = present[:, 2] & (levels[:, 2] == own + 1)
        rows = np.frombuffer(b"".join(others), dtype=np.uint8).reshape(len(others), self.sketch_bytes)
        rows = rows[:, BAND_VALUES:]
        at = np.asarray(owners, dtype=np.intp)
        step = (rows[:, -1].astype(np.intp) >> 4) - own[at]
        slot = np.select([step == 0, step == -1, step == 1], [0, 1, 2], -1)
        kept = np.flatnonzero(slot >= 0)
        kept = kept[usable[at[kept], slot[kept]]]
        if len(kept):
            out[kept] = OddSketcher.estimate_rows(mine[at[kept], slot[kept]], rows[kept])
        return out


#: What makes and compares a verified mode's sketches.
Sketcher = MinHasher | BandedOddSketcher


class _StoringSketcher(BandedOddSketcher):
    _stores_only = True


def stores_only(hasher: Sketcher | None) -> bool:
    """Whether a sketcher is a `storing` one's stored-form `BandedOddSketcher` (whose sketches the
    compiled core makes with the fingerprints: `fingerprints_and_sketches`)."""
    return type(hasher) is _StoringSketcher


def fingerprints_and_sketches(
    scheme: Scheme, hasher: Sketcher, texts: Sequence[str | bytes]
) -> tuple[list[int], list[bytes]]:
    """``scheme.fingerprint_many(texts)`` and ``hasher.sketch_many(texts)`` (raising as they do): for a
    `storing` sketcher under the compiled core, in one pass a text."""
    native = engine_choice.native
    # Other documents (token lists, or of a wrong type) go to each call, which checks them.
    if native is not None and stores_only(hasher) and texts and all(type(t) in _TEXTS for t in texts):
        assert isinstance(hasher, BandedOddSketcher)
        return native.fingerprint_stored_many(scheme, hasher.n, hasher.seed, hasher.bands, texts)  # type: ignore[no-any-return]
    return scheme.fingerprint_many(texts), hasher.sketch_many(texts)


def storing(hasher: Sketcher) -> Sketcher:
    """A sketcher of the same sketches whose `sketch_many` makes only what is stored: for the workers
    of a load that stores its documents without judging them (not add-if-new)."""
    if type(hasher) is BandedOddSketcher:
        return _StoringSketcher(hasher.n, hasher.seed)
    return hasher  # a MinHash's query sketch is its stored one
