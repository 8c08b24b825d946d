"""Normalisation, CJK-aware tokenisation and chunking of texts, the first half of the fingerprint scheme.

The rules (docs/fingerprints.md states them in full):

* normalisation: every surrogate code point becomes U+FFFD, then Unicode NFKC, then ``str.casefold``;
* a code point of general category L* or N* is a *letter*; a letter in the Han, Hiragana, Katakana or
  Hangul ranges of `CJK_RANGES` is a token by itself, other letters form runs (word tokens);
* a combining mark (category M*) extends the word token it follows and is dropped anywhere else;
* everything else (spaces, punctuation, symbols, controls) separates tokens.

Tokens are produced as UTF-8 ``bytes``, the form they are hashed in; `tokenize` gives them as ``str``.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

__all__ = [
    "CHUNK_CHARS",
    "CJK_RANGES",
    "FEATURE_KINDS",
    "ascii_word_spans",
    "classified_code_points",
    "collapse_whitespace",
    "has_token",
    "normalize",
    "normalized_code_points",
    "split_chunks",
    "token_bytes",
    "token_parts",
    "token_parts_at",
    "token_parts_of",
    "token_spans_of",
    "tokenize",
]

#: Feature kinds a `Scheme` accepts: character n-grams, word tokens, word shingles.
FEATURE_KINDS = ("chars", "shingles", "words")

#: Texts longer than this many characters are processed in chunks, keeping memory bounded.
#: Read at call time, so tests may monkeypatch it small.
CHUNK_CHARS = 1 << 20

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

_SEPARATOR, _LETTER, _MARK, _CJK = 0, 1, 2, 3
_SPACE = 0x20
_SURROGATES = re.compile("[\ud800-\udfff]")
# A chunk may end before one of these: each is its own NFKC boundary and separates (or is) a token.
_SAFE_CUT = re.compile("[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f\u3001\u3002\u4e00-\u9fff]")
# ASCII fast path: letters and digits kept (upper case folded), every other byte becomes a space.
_ASCII_TOKEN_TABLE = bytes(
    c + 32 if 65 <= c <= 90 else c if (48 <= c <= 57 or 97 <= c <= 122) else _SPACE for c in range(256)
)
# Code points as `normalized_code_points` gives them: 16 bits when all are in the BMP.
_CodePoints = npt.NDArray[np.uint16] | npt.NDArray[np.uint32]
_astral_lock = threading.Lock()
_astral_class: dict[int, int] = {}


def _class_of(cp: int) -> int:
    """Classify one code point by the tokenisation rules.

    Args:
        cp: a code point.

    Returns:
        One of the module's class codes (separator, letter, mark, CJK letter).
    """
    if 0xD800 <= cp <= 0xDFFF:
        return _SEPARATOR
    major = unicodedata.category(chr(cp))[0]
    if major in "LN":
        return _CJK if any(lo <= cp <= hi for lo, hi in CJK_RANGES) else _LETTER
    return _MARK if major == "M" else _SEPARATOR


def _bmp_classes() -> npt.NDArray[np.uint8]:
    """`_class_of` of every BMP code point, from one category lookup each (a loop of `_class_of`
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
    classes = np.full(0x10000, _SEPARATOR, dtype=np.uint8)
    classes[letters] = _LETTER
    classes[letters & cjk] = _CJK
    classes[majors == ord("M")] = _MARK
    classes[0xD800:0xE000] = _SEPARATOR
    return classes


@functools.lru_cache(maxsize=1)
def _bmp_tables() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
    """Build the BMP lookup tables on first use of a non-ASCII text (about 25 ms, once per process).

    Returns:
        The class of every BMP code point, its single-code-point NFKC image (or itself), and whether
        its NFKC image is longer than one code point (see `_NFKC_IMAGES`).
    """
    classes = _bmp_classes()
    premap = np.arange(0x10000, dtype=np.uint32)
    long_image = np.zeros(0x10000, dtype=bool)
    for cp in range(0x80, 0x10000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        image = unicodedata.normalize("NFKC", chr(cp))
        if len(image) == 1:
            premap[cp] = ord(image)
        else:
            long_image[cp] = True
    return classes, premap, long_image


@functools.lru_cache(maxsize=1)
def _bmp16_tables() -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]]:
    """Build the packed tables of `classified_code_points` on first use (about 25 ms more, once per process).

    Returns:
        Per BMP code point of a text mapped to NFKC images: bits 0-15 its casefold image (or itself),
        bits 16-17 that image's class, bit 18 set where the casefold image is longer or outside the
        BMP, bit 19 set where the code point may compose with what precedes it (see `_composing`).
        Per BMP code point of a raw text: bits 0-15 its single-code-point NFKC image (or itself), bits
        16-35 that image's entry in the first table, bit 36 set where the NFKC image is longer or
        outside the BMP or its casefold image is (a closer look is needed).
    """
    classes, premap, long_image = _bmp_tables()
    odd = long_image | (premap > 0xFFFF)
    premap16 = np.where(odd, np.arange(0x10000, dtype=np.uint32), premap).astype(np.uint16)
    fold = np.arange(0x10000, dtype=np.uint16)
    multi = np.zeros(0x10000, dtype=bool)
    for cp in range(0x10000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        image = chr(cp).casefold()
        if len(image) == 1 and ord(image) <= 0xFFFF:
            fold[cp] = ord(image)
        else:
            multi[cp] = True
    folded = (
        fold.astype(np.uint32)
        | classes[fold].astype(np.uint32) << 16
        | multi.astype(np.uint32) << 18
        | _composing().astype(np.uint32) << 19
    )
    closer = odd | multi[premap16]
    raw = (
        premap16.astype(np.uint64) | folded[premap16].astype(np.uint64) << 16 | closer.astype(np.uint64) << 36
    )
    return raw.astype(np.uint64), folded.astype(np.uint32)


def _composing() -> npt.NDArray[np.bool_]:
    """Tell which BMP code points may compose with what precedes them, or reorder, under NFKC.

    These are the ones NFKC's quick check does not pass as they stand: a combining class other than 0,
    or a second part of a canonical decomposition (a superset of the "maybe" ones, which can be the
    second part of a primary composite), or a Hangul jamo (composed algorithmically). No code point
    outside the BMP has a canonical decomposition with a second part inside it, so BMP ones suffice
    for BMP texts.

    Returns:
        One flag per BMP code point.
    """
    composing = np.zeros(0x10000, dtype=bool)
    composing[0x1100:0x1200] = True
    for cp in range(0x10000):
        char = chr(cp)
        if unicodedata.combining(char):
            composing[cp] = True
        decomposition = unicodedata.decomposition(char)
        if decomposition and not decomposition.startswith("<"):
            for part in decomposition.split()[1:]:
                if int(part, 16) <= 0xFFFF:
                    composing[int(part, 16)] = True
    return composing


def _nfkc_image(cp: int) -> str:
    """Return the NFKC image of one code point, cached.

    Args:
        cp: the code point.

    Returns:
        NFKC of the character alone.
    """
    image = _NFKC_IMAGES.get(cp)
    if image is None:
        image = _NFKC_IMAGES[cp] = unicodedata.normalize("NFKC", chr(cp))
    return image


_NFKC_IMAGES: dict[int, str] = {}


def _premap(text: str) -> str:
    """Replace each character by its own NFKC image, which leaves the text's NFKC unchanged.

    NFKD(NFKC(c)) == NFKD(c), so the text's NFKD, hence its NFKC, is the same afterwards; but the
    result is usually already normalised, and CPython's NFKC is slow on text that is not.

    Args:
        text: a surrogate-free text.

    Returns:
        The mapped text.
    """
    cps = _code_points(text)
    _, premap, long_image = _bmp_tables()
    bmp = np.minimum(cps, 0xFFFF)
    astral = cps > 0xFFFF
    mapped = np.where(astral, cps, premap[bmp])
    odd = long_image[bmp] & ~astral
    if astral.any():
        for index in np.flatnonzero(astral).tolist():
            image = _nfkc_image(int(cps[index]))
            if len(image) == 1:
                mapped[index] = ord(image)
            else:
                odd[index] = True
    text = mapped.astype("<u4").tobytes().decode("utf-32-le")
    if not odd.any():
        return text
    return _splice_images(text, np.flatnonzero(odd).tolist(), cps)


def _splice_images(text: str, at: list[int], cps: _CodePoints) -> str:
    """Put the NFKC images of some original code points in place of the characters at their indices.

    Args:
        text: the text mapped so far, as long as the original.
        at: the indices to replace, ascending.
        cps: the original code points.

    Returns:
        The text with the images spliced in.
    """
    pieces = []
    last = 0
    for index in at:
        pieces += [text[last:index], _nfkc_image(int(cps[index]))]
        last = index + 1
    pieces.append(text[last:])
    return "".join(pieces)


def _classes(cps: _CodePoints) -> npt.NDArray[np.uint8]:
    """Classify an array of code points.

    Args:
        cps: code points.

    Returns:
        The class code of each.
    """
    table = _bmp_tables()[0]
    if cps.dtype == np.uint16:
        return np.take(table, cps)
    astral = cps > 0xFFFF
    classes = table[np.where(astral, 0, cps)]
    if astral.any():
        with _astral_lock:
            for cp in np.unique(cps[astral]).tolist():
                if cp not in _astral_class:
                    _astral_class[cp] = _class_of(cp)
            lookup = _astral_class
            classes[astral] = [lookup[cp] for cp in cps[astral].tolist()]
    return classes


def _code_points(text: str) -> npt.NDArray[np.uint32]:
    """Return the code points of a surrogate-free text.

    Args:
        text: the text.

    Returns:
        Its code points as a uint32 array.
    """
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint32, copy=False)


def normalize(text: str) -> str:
    """Normalise a text: surrogates to U+FFFD, then NFKC, then casefold.

    Args:
        text: the text.

    Returns:
        The normalised text.
    """
    if text.isascii():
        return text.lower()
    if _has_surrogates(text):
        text = _SURROGATES.sub("\ufffd", text)
    if not unicodedata.is_normalized("NFKC", text):
        text = _premap(text)
        if not unicodedata.is_normalized("NFKC", text):
            # What is left to compose (combining marks, jamo) is normalised line by line: a newline
            # composes with nothing, and untouched lines keep CPython on its fast quick-check path.
            lines = text.split("\n")
            text = "\n".join(
                line if unicodedata.is_normalized("NFKC", line) else unicodedata.normalize("NFKC", line)
                for line in lines
            )
    return text.casefold()


def _has_surrogates(text: str) -> bool:
    """Tell whether a text holds a surrogate code point.

    Args:
        text: the text.

    Returns:
        True when it does.
    """
    try:
        # Several times faster than a regular expression search, and strict UTF-16 refuses surrogates.
        text.encode("utf-16-le")
    except UnicodeEncodeError:
        return True
    return False


def normalized_code_points(text: str) -> _CodePoints:
    """Return the code points of ``normalize(text)``.

    Args:
        text: the raw text.

    Returns:
        The code points: 16-bit when they come from the tables of `classified_code_points`, else 32-bit.
    """
    return classified_code_points(text)[0]


def classified_code_points(text: str) -> tuple[_CodePoints, npt.NDArray[np.uint8] | None]:
    """Return the code points of ``normalize(text)`` and their classes, by table lookups when possible.

    A text of BMP characters is mapped character by character: to its NFKC image, which leaves the
    text's NFKC unchanged (see `_premap`), and when the result is NFKC already, to its casefold image,
    which is what ``str.casefold`` does character by character. One lookup in a packed table gives
    both images, the class and whether a closer look is needed. Any other text goes through
    `normalize`.

    Args:
        text: the raw text.

    Returns:
        The code points (16-bit when they come from the tables, else 32-bit) and their classes (None
        when not computed on the way).
    """
    try:
        data = text.encode("utf-16-le")
    except UnicodeEncodeError:  # a surrogate
        return _code_points(normalize(text)), None
    if len(data) != 2 * len(text):  # surrogate pairs: astral characters
        return _code_points(normalize(text)), None
    raw = _bmp16_tables()[0]
    cps = np.frombuffer(data, dtype="<u2")
    # np.take with an intp index: several times faster than fancy indexing with 16-bit indices.
    fields = np.take(raw, cps.astype(np.intp)).astype("<u8", copy=False).view("<u2").reshape(-1, 4)
    flags = fields[:, 2]
    norm, classes = fields[:, 1], flags & np.uint16(3)
    composing = bool((flags & 8).any())
    flagged = np.flatnonzero(flags & 16).tolist()
    if flagged:
        # The table keeps a code point itself where its NFKC image is long or astral, or where a
        # casefold image is: splice the long images in; leave the rest to `normalize`.
        parts = [part for part in map(_image_parts, cps[flagged].tolist()) if part is not None]
        if len(parts) < len(flagged):
            return _code_points(normalize(text)), None
        norm, classes = _splice_parts(norm, classes, flagged, parts)
        composing = composing or any(part[2] for part in parts)
    # Characters each of which is some NFKC image make a text that NFKC's quick check passes when
    # none may compose with what precedes it; otherwise the mapped text is checked in full.
    if composing:
        mapped_text = fields[:, 0].tobytes().decode("utf-16-le")
        if flagged:
            mapped_text = _splice_images(mapped_text, flagged, cps)
        if not unicodedata.is_normalized("NFKC", mapped_text):
            return _code_points(normalize(text)), None
    return np.ascontiguousarray(norm), classes.astype(np.uint8)


@functools.cache
def _image_parts(cp: int) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16], bool] | None:
    """Return the casefold images and classes of the code points of a BMP code point's long NFKC image.

    Cached: there are a few thousand such code points in the BMP.

    Args:
        cp: the code point, whose NFKC image is not a single BMP code point.

    Returns:
        The images, their classes and whether one of the image's code points may compose with what
        precedes it; or None when the NFKC image is a single code point, has an astral one, or has
        one whose casefold image is not a single BMP code point.
    """
    image = _nfkc_image(cp)
    data = image.encode("utf-16-le")
    if len(image) == 1 or len(data) != 2 * len(image):
        return None
    entries = np.take(_bmp16_tables()[1], np.frombuffer(data, dtype="<u2").astype(np.intp))
    if (entries & (1 << 18)).any():
        return None
    composing = bool((entries & (1 << 19)).any())
    return (entries & 0xFFFF).astype(np.uint16), (entries >> 16 & 3).astype(np.uint16), composing


def _splice_parts(
    norm: npt.NDArray[np.uint16],
    classes: npt.NDArray[np.uint16],
    at: list[int],
    parts: list[tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16], bool]],
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
    """Put the normalised code points and classes of long images in place of single entries.

    Args:
        norm: the normalised code points, one per original code point.
        classes: their classes.
        at: the indices to replace, ascending.
        parts: the images' code points and classes for each index, as `_image_parts` gives them.

    Returns:
        The spliced code points and classes.
    """
    cps_pieces, class_pieces = [], []
    last = 0
    for index, part in zip(at, parts, strict=True):
        cps_pieces += [norm[last:index], part[0]]
        class_pieces += [classes[last:index], part[1]]
        last = index + 1
    cps_pieces.append(norm[last:])
    class_pieces.append(classes[last:])
    return np.concatenate(cps_pieces), np.concatenate(class_pieces)


_NO_CODE_POINTS = np.zeros(0, dtype=np.uint32)


def token_parts(norm: str) -> tuple[list[bytes], npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
    """Tokenise a normalised text into word tokens and CJK single-character tokens, kept apart.

    CJK tokens stay code points so that their hashes can be looked up in bulk, without a Python
    object per character.

    Args:
        norm: a text already passed through `normalize`.

    Returns:
        The word tokens (UTF-8, in text order), the CJK tokens' code points (in text order), and for
        each token in text order whether it is a CJK one.
    """
    if norm.isascii():
        words = norm.encode("ascii").translate(_ASCII_TOKEN_TABLE).split()
        return words, _NO_CODE_POINTS, np.zeros(len(words), dtype=bool)
    words, cjk, is_cjk, _ = token_parts_at(norm)
    return words, cjk, is_cjk


def token_parts_at(
    norm: str,
) -> tuple[list[bytes], npt.NDArray[np.uint32], npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """Like `token_parts`, also giving where each token starts; one numpy pass, however long the text.

    Args:
        norm: a text already passed through `normalize`.

    Returns:
        As `token_parts`, plus each token's first code point index, in text order.
    """
    return token_parts_of(_code_points(norm))


def token_parts_of(
    cps: _CodePoints, classes: npt.NDArray[np.uint8] | None = None
) -> tuple[list[bytes], npt.NDArray[np.uint32], npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """Like `token_parts_at`, for a normalised text given as its code points.

    Args:
        cps: the code points of a normalised text, as `normalized_code_points` returns them.
        classes: their classes, if known already (`classified_code_points` gives them).

    Returns:
        As `token_parts_at`.
    """
    keep, after, cjk_mask, starts = _scan(cps, classes)
    words = _words(cps, keep, after)
    is_cjk = np.take(cjk_mask, starts)
    return words, cps[starts[is_cjk]].astype(np.uint32), is_cjk, starts


def token_spans_of(
    cps: _CodePoints, classes: npt.NDArray[np.uint8] | None = None
) -> tuple[
    npt.NDArray[np.intp],
    npt.NDArray[np.intp],
    npt.NDArray[np.bool_],
    _CodePoints,
    npt.NDArray[np.bool_],
    npt.NDArray[np.intp],
]:
    """Like `token_parts_of`, giving word tokens as spans of code points rather than as bytes.

    Args:
        cps: the code points of a normalised text, as `normalized_code_points` returns them.
        classes: their classes, if known already (`classified_code_points` gives them).

    Returns:
        Each word token's first and past-the-end code point indices (in text order) and whether it
        has a code point of 128 or more; then for each token in text order, its first code point,
        whether it is a CJK one, and the index of its first code point.
    """
    keep, after, cjk_mask, starts = _scan(cps, classes)
    # Word tokens are the runs of kept code points: each run starts and ends where `keep` changes.
    edges = np.flatnonzero(keep != after)
    if len(keep) and keep[-1]:
        edges = np.append(edges, len(keep))
    wide = np.zeros(len(edges) // 2, dtype=bool)
    wide_at = np.flatnonzero(keep & (cps >= 0x80))
    if len(wide_at):
        # The word holding a code point is the last one starting at or before it.
        wide[np.searchsorted(edges[0::2], wide_at, side="right") - 1] = True
    return edges[0::2], edges[1::2], wide, cps[starts], np.take(cjk_mask, starts), starts


def ascii_word_spans(
    text: str,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Normalise and tokenise an ASCII text into spans of its token bytes, in one numpy pass.

    Args:
        text: an ASCII text, raw or normalised.

    Returns:
        The text's bytes with letters lower-cased and every separator made a space, and each token's
        first and past-the-end byte index, in text order.
    """
    data = np.frombuffer(text.encode("ascii").translate(_ASCII_TOKEN_TABLE), dtype=np.uint8)
    # Tokens are the runs of non-space bytes: each starts and ends where that changes.
    edges = np.flatnonzero(np.diff(data != _SPACE, prepend=False, append=False))
    return data, edges[0::2], edges[1::2]


def _scan(
    cps: _CodePoints, classes: npt.NDArray[np.uint8] | None = None
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """Classify the code points of a normalised text for tokenisation.

    Args:
        cps: its code points.
        classes: their classes, if known already.

    Returns:
        Which code points belong to word tokens, which follow one that does, which are CJK tokens,
        and the index of every token's first code point, in text order.
    """
    if classes is None:
        classes = _classes(cps)
    keep = classes == _LETTER
    marks = classes == _MARK
    if marks.any():
        # A mark belongs to the token of the nearest preceding non-mark code point, if that is a letter.
        index = np.arange(len(cps))
        owner = np.maximum.accumulate(np.where(marks, -1, index))
        owner_class = np.where(owner >= 0, classes[np.maximum(owner, 0)], _SEPARATOR)
        keep |= marks & (owner_class == _LETTER)
    after = np.zeros(len(keep), dtype=bool)
    after[1:] = keep[:-1]
    cjk_mask = classes == _CJK
    # A token starts at a CJK letter or at a kept code point that does not follow one.
    return keep, after, cjk_mask, np.flatnonzero(cjk_mask | (keep & ~after))


def _words(cps: _CodePoints, keep: npt.NDArray[np.bool_], after: npt.NDArray[np.bool_]) -> list[bytes]:
    """Cut the word tokens out of a normalised text.

    Args:
        cps: its code points.
        keep: which code points belong to word tokens.
        after: which code points follow one that does.

    Returns:
        The word tokens, UTF-8, in text order.
    """
    # Only word code points and the one separator after each word are decoded: CJK text has few words.
    chosen = keep | after
    kept = cps[chosen]
    kept[~keep[chosen]] = _SPACE
    if kept.dtype == np.uint16:
        # No surrogate code units: `normalized_code_points` gives 16 bits for BMP texts only.
        text = kept.astype("<u2", copy=False).tobytes().decode("utf-16-le")
    else:
        text = kept.astype("<u4", copy=False).tobytes().decode("utf-32-le")
    # bytes.split() splits on ASCII whitespace only, which is all that separators have become.
    return text.encode("utf-8").split()


def token_bytes(norm: str) -> list[bytes]:
    """Tokenise a normalised text into UTF-8 tokens.

    Args:
        norm: a text already passed through `normalize`.

    Returns:
        The tokens in text order, UTF-8 encoded.
    """
    words, cjk, is_cjk = token_parts(norm)
    if not len(cjk):
        return words
    tokens: list[bytes] = [b""] * len(is_cjk)
    for index, word in zip(np.flatnonzero(~is_cjk).tolist(), words, strict=True):
        tokens[index] = word
    for index, cp in zip(np.flatnonzero(is_cjk).tolist(), cjk.tolist(), strict=True):
        tokens[index] = chr(cp).encode("utf-8")
    return tokens


def has_token(norm: str) -> bool:
    """Tell whether a normalised text holds at least one token.

    Args:
        norm: a text already passed through `normalize`.

    Returns:
        True when it has a letter or digit.
    """
    if norm.isascii():
        return bool(norm.encode("ascii").translate(_ASCII_TOKEN_TABLE).strip())
    classes = _classes(_code_points(norm))
    return bool(((classes == _LETTER) | (classes == _CJK)).any())


def tokenize(text: str) -> list[str]:
    """Normalise and tokenise a text, the way text documents are tokenised before hashing.

    Args:
        text: the text.

    Returns:
        Its tokens, normalised.

    Raises:
        InvalidType: text is not a str.
    """
    if not isinstance(text, str):
        from .errors import InvalidType

        raise InvalidType(f"text must be a str, got {type(text).__name__}")
    return [token.decode("utf-8") for token in token_bytes(normalize(text))]


def collapse_whitespace(norm: str) -> str:
    """Collapse each run of whitespace to one space and strip both ends (the text of "chars" features).

    Args:
        norm: a normalised text.

    Returns:
        The collapsed text.
    """
    return " ".join(norm.split())


def split_chunks(text: str) -> Iterator[str]:
    """Cut a raw text into pieces of about `CHUNK_CHARS` characters at boundaries safe for every rule.

    Each cut falls just before an ASCII non-alphanumeric character, an ideographic comma or full stop,
    or a CJK unified ideograph: none of them composes under NFKC with what precedes it, and each either
    separates tokens or is a token of its own. So normalising and tokenising the pieces one by one gives
    the tokens of the whole text. A piece runs on to the next such character, however far.

    Args:
        text: a raw (not yet normalised) text.

    Yields:
        Consecutive pieces whose concatenation is the text.
    """
    size = max(1, CHUNK_CHARS)
    start = 0
    while len(text) - start > size:
        found = _SAFE_CUT.search(text, start + size)
        if found is None:
            break
        yield text[start : found.start()]
        start = found.start()
    yield text[start:]


def is_cjk(cp: int) -> bool:
    """Tell whether a code point lies in `CJK_RANGES`: a letter there is a token by itself.

    Args:
        cp: a code point.
    """
    return cp >= CJK_RANGES[0][0] and any(lo <= cp <= hi for lo, hi in CJK_RANGES)
