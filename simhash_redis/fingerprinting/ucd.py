"""The Unicode data behind normalisation and tokenisation: Unicode 15.1 on every Python, from
``simhash_redis/data/unicode-15.1.json.gz`` (``scripts/gen_unicode_data.py``).

Unicode's stability policies keep an assigned code point's NFKC image and case folding, so where the
interpreter and the pinned data both assign every code point of a text, the interpreter's fast C code
gives the pinned answer; around any other ("special") code point this module's own NFKC applies.
Character kinds always come from the pinned data.
"""

from __future__ import annotations

import bisect
import functools
import gzip
import itertools
import json
import unicodedata
from importlib import resources
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["PINNED_VERSION", "BmpImages", "Images", "PinnedUnicode"]

#: The Unicode version that fingerprints and sketches pin.
PINNED_VERSION = "15.1"

# Hangul syllables compose and decompose by arithmetic (Unicode section 3.12).
_S_BASE, _L_BASE, _V_BASE, _T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_L_COUNT, _V_COUNT, _T_COUNT = 19, 21, 28
_N_COUNT = _V_COUNT * _T_COUNT
_S_COUNT = _L_COUNT * _N_COUNT


class Images(NamedTuple):
    """One image (NFKC, case folding) of every BMP code point: its first code point, its length."""

    first: npt.NDArray[np.uint32]
    length: npt.NDArray[np.intp]


#: The NFKC images and the case foldings of the BMP code points.
BmpImages = tuple[Images, Images]


@functools.cache
def _bmp_text() -> str:
    """Every BMP code point followed by U+0000, with "a" for U+0000 itself and for the surrogates."""
    cps = np.zeros(0x20000, dtype="<u4")
    cps[0::2] = np.arange(0x10000)
    cps[0] = cps[2 * 0xD800 : 2 * 0xE000 : 2] = ord("a")
    return cps.tobytes().decode("utf-32-le")


def _cut(images: str) -> Images:
    """The image of each code point from the images of `_bmp_text` (U+0000 and surrogates: themselves)."""
    cps = np.frombuffer(images.encode("utf-32-le"), dtype="<u4")
    ends = np.flatnonzero(cps == 0)
    assert len(ends) == 0x10000, "an image holds U+0000: the cut would misalign every table"
    starts = np.concatenate(([0], ends[:-1] + 1))
    first = cps[starts].astype(np.uint32)
    length = (ends - starts).astype(np.intp)
    first[0] = 0
    first[0xD800:0xE000] = np.arange(0xD800, 0xE000, dtype=np.uint32)
    return Images(first, length)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class PinnedUnicode:
    """The questions normalisation and tokenisation ask of Unicode, answered from the pinned data file."""

    version = PINNED_VERSION

    @functools.cached_property
    def _data(self) -> dict[str, Any]:
        raw = resources.files("simhash_redis.data").joinpath(f"unicode-{PINNED_VERSION}.json.gz").read_bytes()
        data: dict[str, Any] = json.loads(gzip.decompress(raw))
        return data

    @functools.cached_property
    def _kinds(self) -> tuple[list[int], str]:
        """The runs of code point kinds: their first code points and their kinds."""
        runs = self._data["kinds"]
        return [start for start, _ in runs], "".join(kind for _, kind in runs)

    @functools.cached_property
    def _space(self) -> frozenset[int]:
        return frozenset(self._data["space"])

    @functools.cached_property
    def _combining(self) -> dict[int, int]:
        return {int(cp): value for cp, value in self._data["combining"].items()}

    @functools.cached_property
    def _decompositions(self) -> dict[int, str]:
        return {int(cp): value for cp, value in self._data["decompositions"].items()}

    @functools.cached_property
    def _fold(self) -> dict[int, str]:
        return {int(cp): value for cp, value in self._data["casefold"].items()}

    @functools.cached_property
    def _composites(self) -> dict[tuple[int, int], int]:
        pairs = {}
        for cp in self._data["composites"]:
            first, second = (int(part, 16) for part in self._decompositions[cp].split())
            pairs[first, second] = cp
        return pairs

    @functools.cached_property
    def _full(self) -> dict[int, tuple[int, ...]]:
        return {}

    def _expand(self, cp: int) -> tuple[int, ...]:
        """A code point's full compatibility decomposition (Hangul syllables aside)."""
        found = self._full.get(cp)
        if found is None:
            mapping = self._decompositions.get(cp)
            if not mapping:
                return (cp,)
            parts = [int(part, 16) for part in mapping.split() if not part.startswith("<")]
            found = self._full[cp] = tuple(sub for part in parts for sub in self._expand(part))
        return found

    @functools.cached_property
    def _special(self) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
        """The inclusive ranges of code points the interpreter may answer for differently, sorted."""
        here = _version_tuple(unicodedata.unidata_version)
        pinned = _version_tuple(self._data["version"])
        if here == pinned:
            ranges: list[list[int]] = []
        elif here > pinned:
            # A newer interpreter assigns some code points that are unassigned here.
            starts, kinds = self._kinds
            ends = [*starts[1:], 0x110000]
            ranges = [[lo, hi - 1] for lo, hi, kind in zip(starts, ends, kinds, strict=True) if kind == "U"]
        elif unicodedata.unidata_version in self._data["unassigned_in"]:
            ranges = self._data["unassigned_in"][unicodedata.unidata_version]
        else:
            # The code points the interpreter and the data disagree on (assigned or not).
            ranges = [
                [cp, cp]
                for cp in range(0x110000)
                if (unicodedata.category(chr(cp)) == "Cn") != (self.kind(cp) == "U")
            ]
        lows = np.array([lo for lo, _ in ranges], dtype=np.uint32)
        highs = np.array([hi for _, hi in ranges], dtype=np.uint32)
        return lows, highs

    def kind(self, cp: int) -> str:
        """The kind of a code point: "L" (letter or number), "M" (mark), "O" (other assigned), "U"."""
        starts, kinds = self._kinds
        return kinds[bisect.bisect_right(starts, cp) - 1]

    def bmp_kinds(self) -> npt.NDArray[np.uint8]:
        """`kind` of every BMP code point, as ASCII codes."""
        starts, kinds = self._kinds
        bounds = np.array([*starts, 0x110000], dtype=np.int64).clip(max=0x10000)
        codes = np.frombuffer(kinds.encode("ascii"), dtype=np.uint8)
        return np.repeat(codes, np.diff(bounds))

    def isspace(self, cp: int) -> bool:
        """Whether a code point is whitespace (what `str.split` splits on)."""
        return cp in self._space

    @functools.cached_property
    def special_bmp(self) -> npt.NDArray[np.bool_]:
        """Per BMP code point, whether the interpreter may answer for it differently."""
        table: npt.NDArray[np.bool_] = self.special_table[:0x10000].copy()
        return table

    def is_special(self, text: str) -> bool:
        """Whether a surrogate-free text holds a code point the interpreter may answer for otherwise."""
        if not len(self._special[0]) or text.isascii():
            return False
        if len(text) <= 8:
            return any(self._special_cp(ord(char)) for char in text)
        return bool(np.take(self.special_table, np.frombuffer(text.encode("utf-32-le"), dtype="<u4")).any())

    def own_normalize(self, text: str) -> str:
        """The case folding of the NFKC form of a surrogate-free text, by the pinned tables."""
        fold = self._fold
        return "".join([fold.get(ord(char), char) for char in self._nfkc(text)])

    def nfkc_char(self, cp: int) -> str:
        """The NFKC image of one code point (not a surrogate)."""
        return self._nfkc(chr(cp)) if self._special_cp(cp) else unicodedata.normalize("NFKC", chr(cp))

    def bmp_images(self) -> BmpImages:
        """The NFKC images and the case foldings of the BMP code points (surrogates: themselves)."""
        # The interpreter's images from one call over all code points, cut apart at U+0000 (a starter that
        # composes with nothing and is its own image, so no image reaches across it), then the special ones.
        text = _bmp_text()
        images, folds = _cut(unicodedata.normalize("NFKC", text)), _cut(text.casefold())
        for cp in np.flatnonzero(self.special_bmp).tolist():
            for table, image in ((images, self._nfkc(chr(cp))), (folds, self._fold.get(cp, chr(cp)))):
                table.first[cp], table.length[cp] = ord(image[0]), len(image)
        return images, folds

    @functools.cached_property
    def bmp_spaces(self) -> npt.NDArray[np.bool_]:
        """`isspace` of every BMP code point."""
        spaces = np.zeros(0x10000, dtype=bool)
        spaces[[cp for cp in self._space if cp <= 0xFFFF]] = True
        return spaces

    def bmp_composition_data(self) -> tuple[dict[int, int], dict[int, str]]:
        """The BMP code points' non-zero combining classes and their decomposition mappings."""
        return (
            {cp: value for cp, value in self._combining.items() if cp <= 0xFFFF},
            {cp: value for cp, value in self._decompositions.items() if cp <= 0xFFFF},
        )

    @functools.cached_property
    def special_table(self) -> npt.NDArray[np.bool_]:
        """Per code point, whether the interpreter may answer for it differently (1.1 MB: a single lookup
        per character is the fastest check)."""
        table = np.zeros(0x110000, dtype=bool)
        for lo, hi in zip(*self._special, strict=True):
            table[lo : hi + 1] = True
        return table

    def _special_cp(self, cp: int) -> bool:
        return bool(self.special_table[cp])

    def is_nfkc(self, text: str) -> bool:
        """Whether a surrogate-free text is in NFKC form."""
        return self._nfkc(text) == text if self.is_special(text) else unicodedata.is_normalized("NFKC", text)

    def _nfkc(self, text: str) -> str:
        """NFKC by the pinned tables (Unicode Standard Annex 15): decompose, reorder, compose."""
        ccc = self._combining
        decomposed: list[int] = []
        for char in text:
            cp = ord(char)
            if _S_BASE <= cp < _S_BASE + _S_COUNT:
                index = cp - _S_BASE
                decomposed += [_L_BASE + index // _N_COUNT, _V_BASE + index % _N_COUNT // _T_COUNT]
                if index % _T_COUNT:
                    decomposed.append(_T_BASE + index % _T_COUNT)
            else:
                decomposed.extend(self._expand(cp))
        # Canonical ordering: each run of code points of non-zero combining class sorted by class, stably.
        runs = itertools.groupby(decomposed, lambda cp: ccc.get(cp, 0) > 0)
        ordered = [cp for marks, run in runs for cp in (sorted(run, key=ccc.__getitem__) if marks else run)]
        return "".join(map(chr, self._compose(ordered)))

    def _compose(self, cps: list[int]) -> list[int]:
        """The canonical composition of a canonically ordered, fully decomposed sequence."""
        ccc, pairs = self._combining, self._composites
        out: list[int] = []
        starter = -1
        last = -1  # the combining class of the last code point kept after the starter; -1: none
        for cp in cps:
            cc = ccc.get(cp, 0)
            if starter >= 0 and (last == -1 or 0 < last < cc):
                composite = _hangul_pair(out[starter], cp) or pairs.get((out[starter], cp))
                if composite:
                    out[starter] = composite
                    continue
            if cc == 0:
                starter, last = len(out), -1
            else:
                last = cc
            out.append(cp)
        return out


def _hangul_pair(first: int, second: int) -> int | None:
    """The Hangul syllable that a leading and a following jamo (or syllable) compose to, if any."""
    if _L_BASE <= first < _L_BASE + _L_COUNT and _V_BASE <= second < _V_BASE + _V_COUNT:
        return _S_BASE + ((first - _L_BASE) * _V_COUNT + second - _V_BASE) * _T_COUNT
    if (
        _S_BASE <= first < _S_BASE + _S_COUNT
        and (first - _S_BASE) % _T_COUNT == 0
        and _T_BASE < second < _T_BASE + _T_COUNT
    ):
        return first + second - _T_BASE
    return None
