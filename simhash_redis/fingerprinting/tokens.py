"""Tokenisation and chunking of normalised texts: word tokens, CJK single-character tokens, safe cuts."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from ..errors import InvalidType
from .charclass import CJK, LETTER, MARK, SEPARATOR
from .normalize import PINNED, code_points, normalize

__all__ = [
    "CHUNK_CHARS",
    "FEATURE_KINDS",
    "collapse_whitespace",
    "has_token",
    "split_chunks",
    "token_bytes",
    "token_parts",
    "token_parts_of",
    "tokenize",
]

#: Feature kinds a `Scheme` accepts: character n-grams, word tokens, word shingles.
FEATURE_KINDS = ("chars", "shingles", "words")
#: Texts longer than this many characters are processed in chunks (read at call time: tests make it small).
CHUNK_CHARS = 1 << 20
_SPACE = 0x20
# A chunk may end before one of these: each is its own NFKC boundary and separates (or is) a token.
_SAFE_CUT = re.compile("[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f\u3001\u3002\u4e00-\u9fff]")
# ASCII fast path: letters and digits kept (upper case folded), every other byte becomes a space.
_ASCII_TOKEN_TABLE = bytes(
    c + 32 if 65 <= c <= 90 else c if (48 <= c <= 57 or 97 <= c <= 122) else _SPACE for c in range(256)
)
_NO_CODE_POINTS = np.zeros(0, dtype=np.uint32)


def token_parts(norm: str) -> tuple[list[bytes], npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
    """Tokenise a normalised text, in text order: the word tokens (UTF-8), the CJK single-character
    tokens' code points (hashed in bulk), and for each token whether it is a CJK one."""
    if norm.isascii():
        words = norm.encode("ascii").translate(_ASCII_TOKEN_TABLE).split()
        return words, _NO_CODE_POINTS, np.zeros(len(words), dtype=bool)
    words, cjk, is_cjk, _ = token_parts_of(code_points(norm))
    return words, cjk, is_cjk


def token_parts_of(
    cps: npt.NDArray[np.uint32],
) -> tuple[list[bytes], npt.NDArray[np.uint32], npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """`token_parts` of a normalised text's code points, plus each token's first index; one numpy pass,
    however long the text."""
    classes = PINNED.classes_of(cps)
    keep = classes == LETTER
    marks = classes == MARK
    if marks.any():
        # A mark belongs to the token of the nearest preceding non-mark code point, if that is a letter.
        index = np.arange(len(cps))
        owner = np.maximum.accumulate(np.where(marks, -1, index))
        owner_class = np.where(owner >= 0, classes[np.maximum(owner, 0)], SEPARATOR)
        keep |= marks & (owner_class == LETTER)
    after = np.zeros(len(keep), dtype=bool)
    after[1:] = keep[:-1]
    cjk_mask = classes == CJK
    # A token starts at a CJK letter or at a kept code point that does not follow one.
    starts = np.flatnonzero(cjk_mask | (keep & ~after))
    # Only word code points and the one separator after each word are decoded: CJK text has few words.
    chosen = keep | after
    kept = cps[chosen]
    kept[~keep[chosen]] = _SPACE
    # bytes.split() splits on ASCII whitespace only, which is all that separators have become.
    words = kept.astype("<u4", copy=False).tobytes().decode("utf-32-le").encode("utf-8").split()
    is_cjk = np.take(cjk_mask, starts)
    return words, cps[starts[is_cjk]], is_cjk, starts


def token_bytes(norm: str) -> list[bytes]:
    """The UTF-8 tokens of a normalised text, in text order."""
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
    """Tell whether a normalised text holds at least one token (a letter or digit)."""
    if norm.isascii():
        return bool(norm.encode("ascii").translate(_ASCII_TOKEN_TABLE).strip())
    classes = PINNED.classes_of(code_points(norm))
    return bool(((classes == LETTER) | (classes == CJK)).any())


def tokenize(text: str) -> list[str]:
    """Normalise and tokenise a text, as text documents are before hashing (InvalidType: not a str)."""
    if not isinstance(text, str):
        raise InvalidType(f"text must be a str, got {type(text).__name__}")
    return [token.decode("utf-8") for token in token_bytes(normalize(text))]


def collapse_whitespace(norm: str) -> str:
    """Collapse each run of whitespace to one space and strip both ends (the text of "chars" features)."""
    return " ".join(norm.split())


def split_chunks(text: str) -> Iterator[str]:
    """Cut a raw text into consecutive pieces of about `CHUNK_CHARS` characters, each cut just before a
    character that composes with nothing before it under NFKC and separates tokens or is one (`_SAFE_CUT`):
    the pieces' tokens are the whole text's."""
    size = max(1, CHUNK_CHARS)
    start = 0
    while len(text) - start > size:
        found = _SAFE_CUT.search(text, start + size)
        if found is None:
            break
        yield text[start : found.start()]
        start = found.start()
    yield text[start:]
