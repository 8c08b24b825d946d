# ruff: noqa: RUF001  (full-width and look-alike characters are what these tests are about)
"""Tests of fingerprints (fingerprinting floor): the bits, the document forms, edge cases, batching."""

from __future__ import annotations

import importlib
import math
import random

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis.errors import InvalidArgument, InvalidType
from simhash_redis.fingerprinting import DEFAULT_SCHEME, Document, distance, fingerprint, fingerprint_many
from simhash_redis.fingerprinting import tokens as features
from simhash_redis.fingerprinting.normalize import normalize
from simhash_redis.fingerprinting.scheme import Scheme
from simhash_redis.fingerprinting.tokens import collapse_whitespace, has_token, tokenize

# By module path: the package re-exports a function under the name "fingerprint".
fp_module = importlib.import_module("simhash_redis.fingerprinting.hashing")
documents_module = importlib.import_module("simhash_redis.fingerprinting.documents")
MASK = (1 << 64) - 1
# Real-ish text with CJK, emoji, combining marks, compatibility forms and punctuation mixed in.
_EXTRA = list("中文日本語カタカナひらがな한국어😀👍🏽\u0301\u0308\u200d ,.!?;:ＡＢＣｱｲ\u3000\n\tß İ_-'")
TEXT = st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(_EXTRA)), max_size=60)
WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "δέλτα", "中", "文", "x", "42"]), max_size=30)
SCHEMES = st.builds(
    Scheme,
    features=st.sampled_from(["shingles", "words", "chars"]),
    n=st.integers(1, 5),
    f=st.sampled_from([32, 64, 128]),
    weighting=st.sampled_from(["tf", "binary"]),
    seed=st.sampled_from([0, 1, MASK]),
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PARAGRAPH = (
    "The licenses for most software and other practical works are designed to take away your freedom "
    "to share and change the works. By contrast, the GNU General Public License is intended to "
    "guarantee your freedom to share and change all versions of a program, to make sure it remains "
    "free software for all its users. We, the Free Software Foundation, use the GNU General Public "
    "License for most of our software; it applies also to any other work released this way by its "
    "authors. You can apply it to your programs, too. When we speak of free software, we are "
    "referring to freedom, not price. Our General Public Licenses are designed to make sure that you "
    "have the freedom to distribute copies of free software, that you receive source code or can get "
    "it if you want it, that you can change the software or use pieces of it in new free programs."
)
UNRELATED = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software "
    "and associated documentation files, to deal in the Software without restriction, including "
    "without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, "
    "and/or sell copies of the Software, and to permit persons to whom the Software is furnished to "
    "do so, subject to the following conditions: the above copyright notice and this permission "
    "notice shall be included in all copies or substantial portions of the Software. The software is "
    "provided as is, without warranty of any kind, express or implied, including but not limited to "
    "the warranties of merchantability, fitness for a particular purpose and noninfringement."
)
CHINESE = (
    "近似重复检测是搜索引擎、网页抓取和数据清洗中的常见任务。两篇文档只要大部分内容相同，就应当被视为"
    "重复，即使其中有少量文字被修改、增加或删除。SimHash 把一篇文档映射为一个固定长度的指纹，相似的"
    "文档得到相似的指纹，它们之间的汉明距离很小。索引把每个指纹切成若干段，存放在 Redis 中。"
)


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * fp_module.MIX_C1) & MASK
    z = ((z ^ (z >> 27)) * fp_module.MIX_C2) & MASK
    return z ^ (z >> 31)


def _combine(lanes: list[int]) -> int:
    h = lanes[0]
    for t in lanes[1:]:
        h = _mix((h * fp_module.MIX_K + t) & MASK)
    return h


def _feature_hash(tokens: list[bytes], scheme: Scheme) -> int:
    """The documented feature hash, computed the plain way."""
    if scheme.f == 128:
        wide = [xxhash.xxh3_128_intdigest(t, scheme.seed) for t in tokens]
        return _combine([w & MASK for w in wide]) | _combine([w >> 64 for w in wide]) << 64
    h = _combine([xxhash.xxh3_64_intdigest(t, scheme.seed) for t in tokens])
    return h & 0xFFFFFFFF if scheme.f == 32 else h


def reference(text: str, scheme: Scheme) -> int:
    """A direct, unvectorised implementation of docs/fingerprints.md for text documents."""
    norm = normalize(text)
    if scheme.features == "chars":
        tokens = [c.encode() for c in collapse_whitespace(norm)] if has_token(norm) else []
    else:
        tokens = [t.encode() for t in tokenize(text) if t not in scheme.stopwords]
    n = 1 if scheme.features == "words" else scheme.n
    if len(tokens) < n:
        feats = [tokens] if tokens else []
    else:
        feats = [tokens[i : i + n] for i in range(len(tokens) - n + 1)]
    hashes = [_feature_hash(feat, scheme) for feat in feats]
    if scheme.weighting == "binary":
        hashes = list(dict.fromkeys(hashes))
    counters = [sum(1 if h >> j & 1 else -1 for h in hashes) for j in range(scheme.f)]
    return sum(1 << j for j, c in enumerate(counters) if c > 0)


def weighted_reference(weights: dict[str, float], scheme: Scheme) -> int:
    """Float counters summed feature by feature, in first-seen order, as documented."""
    totals: dict[str, float] = {}
    for key, weight in weights.items():
        norm = normalize(key)
        if norm:
            totals[norm] = totals.get(norm, 0.0) + float(weight)
    counters = [0.0] * scheme.f
    for key, weight in totals.items():
        h = _feature_hash([key.encode()], scheme)
        for j in range(scheme.f):
            counters[j] += weight if h >> j & 1 else -weight
    return sum(1 << j for j, c in enumerate(counters) if c > 0)


# ---------------------------------------------------------------- the scheme's bits


GOLDEN = {
    ("The quick brown fox jumps over the lazy dog", 32): "0xf4edb58c",
    ("The quick brown fox jumps over the lazy dog", 64): "0x9120f763f4edb58c",
    ("The quick brown fox jumps over the lazy dog", 128): "0xd7c0d9945b133b7fc2f976fb3cb932a6",
    ("近似重复检测是常见任务 SimHash", 32): "0x675b4bc4",
    ("近似重复检测是常见任务 SimHash", 64): "0xd0084838675b4bc4",
    ("近似重复检测是常见任务 SimHash", 128): "0x34a624cb0620c69d00848b4675a4bd5",
    ("Ｈｅｌｌｏ, World!", 32): "0x2aa51ad1",
    ("Ｈｅｌｌｏ, World!", 64): "0xf1e3ffa92aa51ad1",
    ("Ｈｅｌｌｏ, World!", 128): "0x990ba0d68be7f0f7d7a0a5a1a2efe50d",
}


@pytest.mark.parametrize(("text", "f"), sorted(GOLDEN))
def test_golden_values(text: str, f: int) -> None:
    # A failure here means the scheme changed: that needs a new scheme version, not new constants.
    assert hex(fingerprint(text, Scheme(f=f))) == GOLDEN[text, f]


GOLDEN_OTHER = {
    Scheme(features="words"): "0x8212868318d29267",
    Scheme(features="chars", n=4): "0x32015580a0197320",
    Scheme(weighting="binary", seed=7): "0x497cd9fd1960bd7c",
    Scheme(stopwords=("the", "over")): "0x90320016bf64010c",
}


@pytest.mark.parametrize("scheme", list(GOLDEN_OTHER), ids=lambda s: s.to_meta())
def test_golden_values_other_schemes(scheme: Scheme) -> None:
    assert hex(fingerprint("The quick brown fox jumps over the lazy dog", scheme)) == GOLDEN_OTHER[scheme]


def test_weighted_golden_value() -> None:
    assert hex(fingerprint({"simhash": 2.5, "redis": 1.0, "index": -0.5})) == "0xbb35d7ff954eb542"


@FAST
@given(TEXT, SCHEMES)
def test_matches_reference(text: str, scheme: Scheme) -> None:
    assert fingerprint(text, scheme) == reference(text, scheme)


@pytest.mark.parametrize("f", [32, 64, 128])
@pytest.mark.parametrize("features_kind", ["shingles", "chars"])
def test_matches_reference_on_long_text(f: int, features_kind: str) -> None:
    # Over 255 features per document crosses the byte-lane boundary of the vectorised counter.
    scheme = Scheme(features=features_kind, f=f)
    text = PARAGRAPH * 3 + CHINESE
    assert fingerprint(text, scheme) == reference(text, scheme)
    assert fingerprint(PARAGRAPH, Scheme(f=f, weighting="binary")) == reference(
        PARAGRAPH, Scheme(f=f, weighting="binary")
    )


def test_single_token_feature_is_the_token_hash() -> None:
    token_hash = xxhash.xxh3_64_intdigest(b"hello", 0)
    assert fingerprint("hello") == token_hash
    assert fingerprint({"hello": 1.0}) == token_hash
    assert fingerprint(["Hello"]) == token_hash
    assert fingerprint("hello", Scheme(f=32)) == token_hash & 0xFFFFFFFF


# ---------------------------------------------------------------- edge cases


@pytest.mark.parametrize("doc", ["", "   \n\t ", "!!! ... ???", "—–-_*&^%$#@", "\u3000。、", b"", [], {}, ()])
@pytest.mark.parametrize("features_kind", ["shingles", "words", "chars"])
def test_nothing_to_fingerprint_is_zero(doc: object, features_kind: str) -> None:
    scheme = Scheme(features=features_kind)
    assert fingerprint(doc, scheme) == 0  # type: ignore[arg-type]
    assert fingerprint_many([doc, doc], scheme) == [0, 0]  # type: ignore[list-item]


def test_fewer_tokens_than_n_make_one_feature() -> None:
    two = fingerprint("hello world")
    assert two != 0
    assert two == reference("hello world", DEFAULT_SCHEME)
    assert fingerprint("hello, world!") == two
    assert fingerprint("world hello") != two
    assert fingerprint("ab", Scheme(features="chars", n=5)) != 0


def test_bytes_are_utf8_with_replacement() -> None:
    assert fingerprint("naïve café".encode()) == fingerprint("naïve café")
    assert fingerprint(b"abc\xff\xfe def ghi") == fingerprint("abc\ufffd\ufffd def ghi")
    assert fingerprint(bytearray(b"one two three")) == fingerprint("one two three")


def test_surrogates_become_replacement_characters() -> None:
    assert fingerprint("abc\ud800def ghi") == fingerprint("abc\ufffddef ghi")
    assert fingerprint(["abc\udfffdef", "ghi"]) == fingerprint(["abc\ufffddef", "ghi"])


@FAST
@given(TEXT)
def test_normalisation_invariance(text: str) -> None:
    assert fingerprint(text.upper()) == fingerprint(text.upper().casefold())
    assert fingerprint(text) == fingerprint(normalize(text))


def test_compatibility_forms_and_case_fold() -> None:
    assert fingerprint("ＡＢＣ ｄｅｆ ｇｈｉ") == fingerprint("abc def ghi")
    assert fingerprint("STRASSE ist groß") == fingerprint("strasse ist gross")
    assert fingerprint("ﬁle ①") == fingerprint("file 1")


@pytest.mark.parametrize("f", [32, 64, 128])
@FAST
@given(text=TEXT)
def test_fingerprint_in_range(f: int, text: str) -> None:
    value = fingerprint(text, Scheme(f=f))
    assert isinstance(value, int)
    assert 0 <= value < 1 << f


# ---------------------------------------------------------------- document forms


@FAST
@given(TEXT, st.sampled_from(["shingles", "words"]), st.integers(1, 4))
def test_tokens_path_equals_text_path(text: str, kind: str, n: int) -> None:
    scheme = Scheme(features=kind, n=n, stopwords=("the", "中"))
    assert fingerprint(tokenize(text), scheme) == fingerprint(text, scheme)


def test_tokens_are_normalised_and_filtered() -> None:
    scheme = Scheme(stopwords=("The",))
    assert fingerprint(["THE", "Ｑuick", "", "brown", "fox"], scheme) == fingerprint("quick brown fox")
    assert fingerprint(("new york", "city")) == fingerprint(["NEW YORK", "City"])
    assert fingerprint(iter(["quick", "brown", "fox"])) == fingerprint("quick brown fox")
    assert fingerprint(["a\x00b", "c"]) == fingerprint(["A\x00B", "C"])


def test_tokens_with_chars_features_are_joined_with_spaces() -> None:
    scheme = Scheme(features="chars")
    assert fingerprint(["hello", "world"], scheme) == fingerprint("hello world", scheme)


def test_weights_forms_agree_and_sum_duplicates() -> None:
    as_map = fingerprint({"alpha": 2.0, "beta": 1.0, "gamma": 0.5})
    assert fingerprint([("alpha", 2.0), ("beta", 1), ("gamma", 0.5)]) == as_map
    assert fingerprint([("ALPHA", 1.0), ("beta", 1), ("alpha", 1.0), ("gamma", 0.5)]) == as_map
    assert fingerprint(iter([("alpha", 2), ("beta", 1), ("gamma", 0.5)])) == as_map
    assert fingerprint({"": 3.0, "  ": 1.0}) == fingerprint({"  ": 1.0})
    assert fingerprint({"alpha": -1.0}) == ~xxhash.xxh3_64_intdigest(b"alpha", 0) & MASK


@FAST
@given(
    st.dictionaries(st.sampled_from(["a", "A", "b", "ｃ", "中文", "x y"]), st.floats(-1e6, 1e6), max_size=6),
    st.sampled_from([32, 64, 128]),
)
def test_weights_match_reference(weights: dict[str, float], f: int) -> None:
    assert fingerprint(weights, Scheme(f=f)) == weighted_reference(weights, Scheme(f=f))


def test_weight_sums_do_not_depend_on_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    weights = {f"w{i}": rng.choice([1e16, -1e16, 1.0, -1.0, 0.1, 3.3e-3]) for i in range(300)}
    whole = fingerprint(weights)
    assert whole == weighted_reference(weights, DEFAULT_SCHEME)
    monkeypatch.setattr(documents_module, "WEIGHT_BLOCK", 7)
    assert fingerprint(weights) == whole


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (123, "doc must be"),
        (None, "doc must be"),
        (1.5, "doc must be"),
        (["a", 3], "doc must hold str tokens"),
        ([("a", 1.0), "b"], "doc must hold (feature, weight) pairs"),
        ({"a": "1"}, "doc weight must be a real number"),
        ({"a": True}, "doc weight must be a real number"),
        ({1: 1.0}, "doc feature must be a str"),
        ([("a", 1.0, 2.0)], "doc must hold (feature, weight) pairs"),
    ],
)
def test_wrong_document_types(doc: object, message: str) -> None:
    with pytest.raises(InvalidType, match=message.replace("(", r"\(").replace(")", r"\)")):
        fingerprint(doc)  # type: ignore[arg-type]


@pytest.mark.parametrize("weight", [math.nan, math.inf, -math.inf])
def test_non_finite_weights(weight: float) -> None:
    with pytest.raises(InvalidArgument, match="doc weight must be finite"):
        fingerprint({"a": weight})


def test_wrong_many_and_scheme_types() -> None:
    with pytest.raises(InvalidType, match="docs must be an iterable"):
        fingerprint_many("abc")
    with pytest.raises(InvalidType, match="docs must be an iterable"):
        fingerprint_many(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidType, match=r"docs\[1\] must be"):
        fingerprint_many(["ok", 5])  # type: ignore[list-item]
    with pytest.raises(InvalidType, match="scheme must be a Scheme"):
        fingerprint("abc", "shingles")  # type: ignore[arg-type]
    with pytest.raises(InvalidType, match=r"docs\[0\] must hold str tokens"):
        fingerprint_many([["a", 1]], Scheme(features="chars"))  # type: ignore[list-item]


# ---------------------------------------------------------------- batches and chunks


DOCS = st.lists(
    st.one_of(
        TEXT,
        TEXT.map(str.encode),
        WORDS,
        st.dictionaries(st.sampled_from(["a", "b", "中", "ｘ"]), st.integers(-3, 3), max_size=4),
    ),
    max_size=12,
)


@FAST
@given(DOCS, SCHEMES)
def test_many_equals_single(docs: list[Document], scheme: Scheme) -> None:
    assert fingerprint_many(docs, scheme) == [fingerprint(d, scheme) for d in docs]


def test_many_across_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [PARAGRAPH[i:] for i in range(0, 400, 7)] + [CHINESE, "", "x", UNRELATED]
    expected = [fingerprint(d) for d in docs]
    monkeypatch.setattr(documents_module, "BATCH_TOKENS", 50)
    assert fingerprint_many(docs) == expected
    monkeypatch.setattr(documents_module, "BATCH_DOCS", 3)
    assert fingerprint_many(iter(docs)) == expected
    assert DEFAULT_SCHEME.fingerprint_many(docs) == expected


def test_token_cache_eviction(monkeypatch: pytest.MonkeyPatch) -> None:
    scheme = Scheme(seed=12345)
    expected = [reference(PARAGRAPH, scheme), reference(CHINESE, scheme)]
    monkeypatch.setattr(fp_module, "CACHE_MAX", 10)
    assert fingerprint_many([PARAGRAPH, CHINESE], scheme) == expected
    assert [fingerprint(PARAGRAPH, scheme), fingerprint(CHINESE, scheme)] == expected


LONG = (PARAGRAPH + " 中文混排，测试。\n\n  " + CHINESE + " ｆｕｌｌｗｉｄｔｈ ") * 20


@pytest.mark.parametrize(
    "scheme",
    [
        DEFAULT_SCHEME,
        Scheme(features="words", f=128),
        Scheme(features="chars", n=4, f=32),
        Scheme(weighting="binary"),
        Scheme(n=7, stopwords=("the",)),
    ],
    ids=lambda s: s.to_meta(),
)
def test_long_documents_in_chunks_equal_whole(monkeypatch: pytest.MonkeyPatch, scheme: Scheme) -> None:
    whole = fingerprint(LONG, scheme)
    tokens_whole = fingerprint(tokenize(LONG), scheme)
    monkeypatch.setattr(features, "CHUNK_CHARS", 50)
    assert fingerprint(LONG, scheme) == whole
    assert fingerprint_many(["x", LONG, "y"], scheme)[1] == whole
    assert fingerprint(tokenize(LONG), scheme) == tokens_whole


@FAST
@given(TEXT, SCHEMES, st.integers(1, 12))
def test_chunking_never_changes_bits(text: str, scheme: Scheme, size: int) -> None:
    whole = fingerprint(text, scheme)
    original = features.CHUNK_CHARS
    features.CHUNK_CHARS = size
    try:
        assert fingerprint(text, scheme) == whole
    finally:
        features.CHUNK_CHARS = original


def test_chunked_few_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "!" * 200 + " lonely " + "?" * 200 + " words" + "." * 100
    whole = [fingerprint(text, Scheme(n=n)) for n in (1, 2, 3)]
    monkeypatch.setattr(features, "CHUNK_CHARS", 16)
    assert [fingerprint(text, Scheme(n=n)) for n in (1, 2, 3)] == whole
    assert fingerprint("." * 500, Scheme(features="chars")) == 0


# ---------------------------------------------------------------- similarity and distance


@pytest.mark.parametrize("f", [64, 128])
def test_near_duplicates_are_close_and_unrelated_texts_far(f: int) -> None:
    scheme = Scheme(f=f)
    base = fingerprint(PARAGRAPH, scheme)
    one_word = distance(base, fingerprint(PARAGRAPH.replace("price", "cost"), scheme))
    two_words = distance(
        base, fingerprint(PARAGRAPH.replace("works", "things").replace("price", "cost"), scheme)
    )
    assert one_word <= f // 8
    assert two_words <= f // 5
    assert distance(base, fingerprint(PARAGRAPH.upper() + "  ", scheme)) == 0
    assert f // 4 <= distance(base, fingerprint(UNRELATED, scheme)) <= 3 * f // 4
    assert f // 4 <= distance(base, fingerprint(CHINESE, scheme)) <= 3 * f // 4


def test_near_duplicate_chinese() -> None:
    edited = CHINESE.replace("常见任务", "普遍任务")
    assert distance(fingerprint(CHINESE), fingerprint(edited)) <= 8


@given(st.integers(0, (1 << 128) - 1), st.integers(0, (1 << 128) - 1), st.integers(0, (1 << 128) - 1))
def test_distance_is_a_metric(a: int, b: int, c: int) -> None:
    assert distance(a, b) == distance(b, a) == bin(a ^ b).count("1")
    assert distance(a, a) == 0
    assert distance(a, c) <= distance(a, b) + distance(b, c)


@pytest.mark.parametrize(
    ("a", "b", "error", "name"),
    [
        (True, 1, InvalidType, "a"),
        (1, 1.0, InvalidType, "b"),
        (-1, 0, InvalidArgument, "a"),
        (0, -5, InvalidArgument, "b"),
    ],
)
def test_distance_rejects_bad_arguments(a: object, b: object, error: type[Exception], name: str) -> None:
    with pytest.raises(error, match=f"^{name} must be"):
        distance(a, b)  # type: ignore[arg-type]
