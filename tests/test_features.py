# ruff: noqa: RUF001  (full-width and look-alike characters are what these tests are about)
"""Tests of normalisation, CJK-aware tokenisation and safe chunking (simhash_redis.fingerprinting)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis.errors import InvalidType
from simhash_redis.fingerprinting import tokens as features
from simhash_redis.fingerprinting.normalize import normalize
from simhash_redis.fingerprinting.tokens import (
    collapse_whitespace,
    has_token,
    split_chunks,
    token_bytes,
    tokenize,
)
from simhash_redis.fingerprinting.ucd import PinnedUnicode

_EXTRA = list("中文日本語カタカナひらがな한국어😀👍🏽\u0301\u0308\u093f ,.!ＡＢＣｱﾞ\u3000\nßİ_")
TEXT = st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(_EXTRA)), max_size=80)
FAST = settings(max_examples=80, deadline=None)

_PINNED = PinnedUnicode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("abc中文", ["abc", "中", "文"]),
        ("Hello, World! hello_world", ["hello", "world", "hello", "world"]),
        ("ＡＢＣ１２３", ["abc123"]),
        ("Straße İstanbul", ["strasse", "i\u0307stanbul"]),
        ("don't stop-me now 3.14", ["don", "t", "stop", "me", "now", "3", "14"]),
        (
            "日本語のテキスト・カタカナ",
            ["日", "本", "語", "の", "テ", "キ", "ス", "ト", "カ", "タ", "カ", "ナ"],
        ),
        ("한국어 text", ["한", "국", "어", "text"]),
        ("ｶﾞｷﾞ", ["ガ", "ギ"]),
        ("cafe\u0301 naïve", ["café", "naïve"]),
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),
        ("\u0301alone ❤️ 😀x", ["alone", "x"]),
        ("中\u0301文", ["中", "文"]),
        ("①②", ["12"]),  # normalised first: NFKC makes "12"
        ("  \t\n ", []),
        ("!?.,;:—", []),
        ("", []),
    ],
)
def test_tokenize(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_normalize() -> None:
    assert normalize("ＡＢＣ") == "abc"
    assert normalize("ＡＢＣ") == normalize("abc")
    assert normalize("Straße") == "strasse"
    assert normalize("ﬁ ½") == "fi 1⁄2"
    assert normalize("a\ud800b") == "a\ufffdb"
    assert normalize("ＡＢＣ，中文：ｶﾞ") == "abc,中文:ガ"


@FAST
@given(TEXT)
def test_normalize_matches_plain_nfkc_casefold(text: str) -> None:
    # Scheme 2 pins Unicode 15.1: the interpreter's own NFKC agrees only where its Unicode version
    # assigns every code point of the text (Python 3.11 has 14.0; tests/test_unicode_pinning.py covers
    # the rest).
    if not _PINNED.is_special("".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)):
        assert normalize(text) == unicodedata.normalize("NFKC", text).casefold()
    assert normalize(normalize(text)) == normalize(text)


@FAST
@given(TEXT)
def test_token_bytes_are_the_utf8_of_tokenize(text: str) -> None:
    tokens = tokenize(text)
    assert token_bytes(normalize(text)) == [t.encode() for t in tokens]
    assert all(t and t == normalize(t) for t in tokens)
    assert has_token(normalize(text)) == bool(tokens)


@FAST
@given(st.text(st.characters(max_codepoint=127), max_size=80))
def test_ascii_fast_path_agrees_with_general_path(text: str) -> None:
    # A trailing non-ASCII word sends the text down the numpy path; it must only add that word.
    assert token_bytes(normalize(text + " é")) == [*token_bytes(normalize(text)), "é".encode()]
    assert has_token(normalize(text + " ·")) == has_token(normalize(text))


def test_ascii_letter_rule() -> None:
    for code in range(128):
        char = chr(code)
        assert (tokenize(char) == [char.lower()]) == char.isalnum()


def test_collapse_whitespace() -> None:
    assert collapse_whitespace("  a \t\n b  c ") == "a b c"
    assert collapse_whitespace("\u3000") == ""


@FAST
@given(TEXT, st.integers(1, 10))
def test_chunks_are_safe_cuts(text: str, size: int) -> None:
    original = features.CHUNK_CHARS
    features.CHUNK_CHARS = size
    try:
        chunks = list(split_chunks(text))
    finally:
        features.CHUNK_CHARS = original
    assert "".join(chunks) == text
    assert all(len(chunk) >= size for chunk in chunks[:-1])
    assert "".join(normalize(c) for c in chunks) == normalize(text)
    assert [t for c in chunks for t in tokenize(c)] == tokenize(text)


def test_chunk_runs_on_to_a_safe_character(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(features, "CHUNK_CHARS", 4)
    assert list(split_chunks("abcdefgh ij")) == ["abcdefgh", " ij"]
    assert list(split_chunks("ééééééé")) == ["ééééééé"]
    assert list(split_chunks("短文本中文内容")) == ["短文本中", "文内容"]


def test_tokenize_rejects_non_str() -> None:
    with pytest.raises(InvalidType, match="text must be a str"):
        tokenize(b"abc")  # type: ignore[arg-type]


def test_astral_letters() -> None:
    assert tokenize("𠀀𠀁 𝐀𝐁 𐐀x") == ["𠀀", "𠀁", "ab", "𐐨x"]
