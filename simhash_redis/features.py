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
    "collapse_whitespace",
    "has_token",
    "normalize",
    "split_chunks",
    "token_bytes",
    "token_parts",
    "token_parts_at",
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


@functools.lru_cache(maxsize=1)
def _bmp_tables() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
    """Build the BMP lookup tables on first use of a non-ASCII text (about 60 ms, once per process).

    Returns:
        The class of every BMP code point, its single-code-point NFKC image (or itself), and whether
        its NFKC image is longer than one code point (see `_NFKC_IMAGES`).
    """
    classes = np.array([_class_of(cp) for cp in range(0x10000)], dtype=np.uint8)
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
    pieces = []
    last = 0
    for index in np.flatnonzero(odd).tolist():
        pieces += [text[last:index], _nfkc_image(int(cps[index]))]
        last = index + 1
    pieces.append(text[last:])
    return "".join(pieces)


def _classes(cps: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    """Classify an array of code points.

    Args:
        cps: code points.

    Returns:
        The class code of each.
    """
    table = _bmp_tables()[0]
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
    if _SURROGATES.search(text):
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
    cps = _code_points(norm)
    classes = _classes(cps)
    keep = classes == _LETTER
    marks = classes == _MARK
    if marks.any():
        # A mark belongs to the token of the nearest preceding non-mark code point, if that is a letter.
        index = np.arange(len(cps))
        owner = np.maximum.accumulate(np.where(marks, -1, index))
        owner_class = np.where(owner >= 0, classes[np.maximum(owner, 0)], _SEPARATOR)
        keep |= marks & (owner_class == _LETTER)
    kept = np.where(keep, cps, np.uint32(_SPACE))
    # bytes.split() splits on ASCII whitespace only, which is all that separators have become.
    words = kept.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8").split()
    cjk_at = np.flatnonzero(classes == _CJK)
    word_at = np.flatnonzero(keep & ~np.concatenate([[False], keep[:-1]]))
    if not len(cjk_at):
        return words, _NO_CODE_POINTS, np.zeros(len(words), dtype=bool), word_at
    starts = np.concatenate([word_at, cjk_at])
    order = np.argsort(starts, kind="stable")
    return words, cps[cjk_at], order >= len(word_at), starts[order]


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
