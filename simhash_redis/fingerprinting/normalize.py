"""Normalisation of texts (surrogates to U+FFFD, NFKC, casefold), by table lookups where they are exact;
`PINNED` answers from Unicode 15.1 (`ucd`), the same on every Python."""

from __future__ import annotations

import functools
import re
import threading
import unicodedata

import numpy as np
import numpy.typing as npt

from .charclass import class_of_kind, classes_from_kinds
from .ucd import BmpImages, PinnedUnicode

__all__ = ["PINNED", "Normalizer", "code_points", "normalize"]

_SURROGATES = re.compile("[\ud800-\udfff]")

Parts = tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16], bool]


class Normalizer(PinnedUnicode):
    """Normalises and classifies text by the pinned Unicode data; tables built on first use."""

    def __init__(self) -> None:
        self._nfkc_images: dict[int, str] = {}
        self._parts: dict[int, Parts | None] = {}
        self._astral_class: dict[int, int] = {}
        self._lock = threading.Lock()

    @functools.cached_property
    def bmp_classes(self) -> npt.NDArray[np.uint8]:
        """The tokenisation class (`charclass`) of every BMP code point."""
        return classes_from_kinds(self.bmp_kinds())

    def class_of(self, cp: int) -> int:
        if cp <= 0xFFFF:
            return int(self.bmp_classes[cp])
        known = self._astral_class.get(cp)
        if known is None:
            known = self._astral_class[cp] = class_of_kind(cp, self.kind(cp))
        return known

    def classes_of(self, cps: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
        astral = cps > 0xFFFF
        classes: npt.NDArray[np.uint8] = np.take(self.bmp_classes, np.where(astral, 0, cps))
        if astral.any():
            with self._lock:
                classes[astral] = [self.class_of(cp) for cp in cps[astral].tolist()]
        return classes

    @functools.cached_property
    def _bmp_images(self) -> BmpImages:
        return self.bmp_images()

    @functools.cached_property
    def bmp_tables(self) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
        """Per BMP code point: its class, its single-code-point NFKC image (or itself), and whether its
        NFKC image is longer; built on first use (about 25 ms, once per process)."""
        images = self._bmp_images[0]
        single = images.length == 1
        premap = np.where(single, images.first, np.arange(0x10000, dtype=np.uint32)).astype(np.uint32)
        return self.bmp_classes, premap, ~single

    @functools.cached_property
    def bmp16_tables(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]]:
        """The packed tables the compiled core normalises with (25 ms more on first use): per BMP code point
        of a raw text, bits 0-15 its single-code-point NFKC image (or itself), bits 16-35 that image's entry
        in the second table, bit 36 set where a closer look is needed (the NFKC or casefold image is longer
        or astral, or `PinnedUnicode.special_bmp`); per BMP code point of a text mapped to NFKC images,
        bits 0-15 its casefold image (or itself), bits 16-17 that image's class, bit 18 set where the
        casefold image is longer or astral, bit 19 where it may compose with what precedes it."""
        classes, premap, long_image = self.bmp_tables
        odd = long_image | (premap > 0xFFFF) | self.special_bmp
        premap16 = np.where(odd, np.arange(0x10000, dtype=np.uint32), premap).astype(np.uint16)
        images = self._bmp_images[1]
        multi = (images.length != 1) | (images.first > 0xFFFF)
        fold = np.where(multi, np.arange(0x10000, dtype=np.uint32), images.first).astype(np.uint16)
        folded = (
            fold.astype(np.uint32)
            | classes[fold].astype(np.uint32) << 16
            | multi.astype(np.uint32) << 18
            | self.composing_flags().astype(np.uint32) << 19
        )
        closer = odd | multi[premap16]
        raw = (
            premap16.astype(np.uint64)
            | folded[premap16].astype(np.uint64) << 16
            | closer.astype(np.uint64) << 36
        )
        self.__dict__.pop("_bmp_images", None)  # needed by neither table any more
        return raw.astype(np.uint64), folded.astype(np.uint32)

    def composing_flags(self) -> npt.NDArray[np.bool_]:
        """Per BMP code point, whether it may compose with what precedes it, or reorder, under NFKC: a
        combining class other than 0, a second part of a canonical decomposition, or a Hangul jamo."""
        composing = np.zeros(0x10000, dtype=bool)
        composing[0x1100:0x1200] = True
        combining, decompositions = self.bmp_composition_data()
        composing[list(combining)] = True
        for decomposition in decompositions.values():
            if not decomposition.startswith("<"):
                for part in decomposition.split()[1:]:
                    if int(part, 16) <= 0xFFFF:
                        composing[int(part, 16)] = True
        return composing

    def nfkc_image(self, cp: int) -> str:
        image = self._nfkc_images.get(cp)
        if image is None:
            image = self._nfkc_images[cp] = self.nfkc_char(cp)
        return image

    def _premap(self, text: str) -> str:
        """Replace each character by its own NFKC image (the text's NFKC is unchanged: NFKD(NFKC(c)) ==
        NFKD(c)), which is usually normalised already: CPython's NFKC is slow on text that is not."""
        cps = code_points(text)
        _, premap, long_image = self.bmp_tables
        bmp = np.minimum(cps, 0xFFFF)
        astral = cps > 0xFFFF
        mapped = np.where(astral, cps, premap[bmp])
        odd = long_image[bmp] & ~astral
        if astral.any():
            for index in np.flatnonzero(astral).tolist():
                image = self.nfkc_image(int(cps[index]))
                if len(image) == 1:
                    mapped[index] = ord(image)
                else:
                    odd[index] = True
        text = mapped.astype("<u4").tobytes().decode("utf-32-le")
        if not odd.any():
            return text
        pieces, last = [], 0
        for index in np.flatnonzero(odd).tolist():
            pieces += [text[last:index], self.nfkc_image(int(cps[index]))]
            last = index + 1
        return "".join([*pieces, text[last:]])

    def normalize(self, text: str) -> str:
        """Normalise a text: surrogates to U+FFFD, then NFKC, then casefold."""
        if text.isascii():
            return text.lower()
        try:  # several times faster than a regular expression search: strict UTF-16 refuses surrogates
            text.encode("utf-16-le")
        except UnicodeEncodeError:
            text = _SURROGATES.sub("\ufffd", text)
        if self.is_special(text):
            return self._mixed(text)
        return self._plain(text)

    def _plain(self, text: str) -> str:
        """`normalize` of a surrogate-free text whose code points both the data and the interpreter assign."""
        if not unicodedata.is_normalized("NFKC", text):
            text = self._premap(text)
            if not unicodedata.is_normalized("NFKC", text):
                # What is left to compose (combining marks, jamo) is normalised line by line: a newline
                # composes with nothing, and untouched lines keep CPython on its fast quick-check path.
                lines = text.split("\n")
                text = "\n".join(
                    line if unicodedata.is_normalized("NFKC", line) else unicodedata.normalize("NFKC", line)
                    for line in lines
                )
        return text.casefold()

    def _mixed(self, text: str) -> str:
        """`normalize` of a surrogate-free text holding code points the data answers for by its own rules:
        only the stretch around each, cut at stable starters; the rest through `_plain`."""
        cps = code_points(text)
        special = np.take(self.special_table, cps)
        cuts = np.flatnonzero(self.stable_starters[np.minimum(cps, 0xFFFF)] & (cps < 0xFFFF) & ~special)
        pieces: list[str] = []
        done = 0
        for at in np.flatnonzero(special).tolist():
            if at < done:
                continue  # within the last stretch already
            where = int(np.searchsorted(cuts, at, side="right"))
            start = int(cuts[where - 1]) if where else 0
            end = int(cuts[where]) if where < len(cuts) else len(text)
            if start > done:
                pieces.append(self._plain(text[done:start]))
            pieces.append(self.own_normalize(text[max(start, done) : end]))
            done = end
        if done < len(text):
            pieces.append(self._plain(text[done:]))
        return "".join(pieces)

    @functools.cached_property
    def stable_starters(self) -> npt.NDArray[np.bool_]:
        """Per BMP code point, whether a text may be cut before it without changing its NFKC: combining
        class 0, its own NFKC image, and no second part of a composition (nor a Hangul jamo)."""
        _, premap, long_image = self.bmp_tables
        combining, _ = self.bmp_composition_data()
        stable: npt.NDArray[np.bool_] = (premap == np.arange(0x10000)) & ~long_image & ~self.composing_flags()
        stable[list(combining)] = False
        stable[0xD800:0xE000] = False
        return stable

    def image_parts(self, cp: int) -> Parts | None:
        """The casefold images and classes of a BMP code point's long NFKC image's code points, and whether
        one may compose with what precedes it (None where the tables cannot tell); cached."""
        if cp in self._parts:
            return self._parts[cp]
        image = "" if self.special_bmp[cp] else self.nfkc_image(cp)
        data = image.encode("utf-16-le")
        parts = None
        if len(image) > 1 and len(data) == 2 * len(image):
            entries = np.take(self.bmp16_tables[1], np.frombuffer(data, dtype="<u2").astype(np.intp))
            if not (entries & (1 << 18)).any():
                composing = bool((entries & (1 << 19)).any())
                parts = (entries & 0xFFFF).astype(np.uint16), (entries >> 16 & 3).astype(np.uint16), composing
        self._parts[cp] = parts
        return parts


def code_points(text: str) -> npt.NDArray[np.uint32]:
    """The code points of a surrogate-free text, as a uint32 array."""
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint32, copy=False)


#: Unicode 15.1, the same on every Python: fingerprints and sketches.
PINNED = Normalizer()

normalize = PINNED.normalize
