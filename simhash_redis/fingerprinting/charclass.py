"""Character classes of the tokenisation rules: letters, CJK letters, combining marks, separators."""

from __future__ import annotations

import functools
import threading
import unicodedata

import numpy as np
import numpy.typing as npt

__all__ = ["CJK_RANGES", "is_cjk"]


#: Inclusive code point ranges whose letters are single-character tokens (Han, Hiragana, Katakana, Hangul).
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK Radicals Supplement, Kangxi Radicals
    (0x3005, 0x3007),  # ideographic iteration mark, closing mark, number zero
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3038, 0x303C),  # Hangzhou numerals, masu mark
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul Compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xAC00, 0xD7FF),  # Hangul Syllables, Hangul Jamo Extended-B
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0xFF66, 0xFFDC),  # halfwidth Katakana and Hangul
    (0x1AFF0, 0x1B16F),  # Kana Extended, Kana Supplement, Small Kana Extension
    (0x20000, 0x3FFFF),  # CJK Extensions B to I, Compatibility Ideographs Supplement
)


SEPARATOR, LETTER, MARK, CJK = 0, 1, 2, 3


# Code points as `classified_code_points` gives them: 16 bits when all are in the BMP.
CodePoints = npt.NDArray[np.uint16] | npt.NDArray[np.uint32]


_astral_lock = threading.Lock()


_astral_class: dict[int, int] = {}


def class_of(cp: int) -> int:
    """Classify one code point by the tokenisation rules.

    Args:
        cp: a code point.

    Returns:
        One of the module's class codes (separator, letter, mark, CJK letter).
    """
    if 0xD800 <= cp <= 0xDFFF:
        return SEPARATOR
    major = unicodedata.category(chr(cp))[0]
    if major in "LN":
        return CJK if is_cjk(cp) else LETTER
    return MARK if major == "M" else SEPARATOR


@functools.lru_cache(maxsize=1)
def bmp_classes() -> npt.NDArray[np.uint8]:
    """`class_of` of every BMP code point, from one category lookup each (a loop of `class_of`
    costs several times more: its CJK range test runs in Python for every letter).

    Returns:
        The class of each of the 65,536 code points.
    """
    majors = np.frombuffer(
        "".join([unicodedata.category(chr(cp))[0] for cp in range(0x10000)]).encode("ascii"), dtype=np.uint8
    )
    cjk = np.zeros(0x10000, dtype=bool)
    for lo, hi in CJK_RANGES:
        cjk[lo : min(hi, 0xFFFF) + 1] = True
    letters = (majors == ord("L")) | (majors == ord("N"))
    classes = np.full(0x10000, SEPARATOR, dtype=np.uint8)
    classes[letters] = LETTER
    classes[letters & cjk] = CJK
    classes[majors == ord("M")] = MARK
    classes[0xD800:0xE000] = SEPARATOR
    return classes


def classes_of(cps: CodePoints) -> npt.NDArray[np.uint8]:
    """Classify an array of code points.

    Args:
        cps: code points.

    Returns:
        The class code of each.
    """
    table = bmp_classes()
    if cps.dtype == np.uint16:
        return np.take(table, cps)
    astral = cps > 0xFFFF
    classes = table[np.where(astral, 0, cps)]
    if astral.any():
        with _astral_lock:
            for cp in np.unique(cps[astral]).tolist():
                if cp not in _astral_class:
                    _astral_class[cp] = class_of(cp)
            lookup = _astral_class
            classes[astral] = [lookup[cp] for cp in cps[astral].tolist()]
    return classes


def is_cjk(cp: int) -> bool:
    """Tell whether a code point lies in `CJK_RANGES`: a letter there is a token by itself.

    Args:
        cp: a code point.
    """
    return cp >= CJK_RANGES[0][0] and any(lo <= cp <= hi for lo, hi in CJK_RANGES)
