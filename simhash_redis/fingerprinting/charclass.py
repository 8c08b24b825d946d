"""Character classes of the tokenisation rules: letters, CJK letters, combining marks, separators."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["CJK_RANGES", "class_of_kind", "classes_from_kinds", "is_cjk"]

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


def classes_from_kinds(kinds: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """The class of every BMP code point, from their kinds (`ucd.PinnedUnicode.kind`, as ASCII codes)."""
    cjk = np.zeros(0x10000, dtype=bool)
    for lo, hi in CJK_RANGES:
        cjk[lo : min(hi, 0xFFFF) + 1] = True
    letters = kinds == ord("L")
    classes = np.full(0x10000, SEPARATOR, dtype=np.uint8)
    classes[letters] = LETTER
    classes[letters & cjk] = CJK
    classes[kinds == ord("M")] = MARK
    classes[0xD800:0xE000] = SEPARATOR
    return classes


def class_of_kind(cp: int, kind: str) -> int:
    """The class of one code point, from its kind (`ucd.PinnedUnicode.kind`)."""
    if 0xD800 <= cp <= 0xDFFF:
        return SEPARATOR
    if kind == "L":
        return CJK if is_cjk(cp) else LETTER
    return MARK if kind == "M" else SEPARATOR


def is_cjk(cp: int) -> bool:
    """Tell whether a code point lies in `CJK_RANGES`: a letter there is a token by itself."""
    return cp >= CJK_RANGES[0][0] and any(lo <= cp <= hi for lo, hi in CJK_RANGES)
