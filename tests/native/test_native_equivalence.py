# ruff: noqa: RUF001  (full-width and look-alike characters are what these tests are about)
"""The native engine against the pure one: the same ints, bytes, dicts and exceptions for every input.

Hypothesis feeds both the same arbitrary documents (any code point, surrogates and astral ones included,
NUL, combining marks, jamo, mixed scripts, invalid UTF-8, token lists, weighted features with bad
weights, batches mixing every form, texts cut into chunks) under arbitrary schemes, and compares the
outcomes: the value, or the exception's type and message. The pure engine is the specification.
"""

from __future__ import annotations

import math
import os
import random
import re
import threading
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import pytest

pytest.importorskip("simhash_redis_native")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import fingerprinting
from simhash_redis.codec import encode_fp
from simhash_redis.errors import InvalidArgument, InvalidType
from simhash_redis.fingerprinting import MinHasher, Scheme
from simhash_redis.fingerprinting import native as native_module
from simhash_redis.fingerprinting import tokens as features
from simhash_redis.store import candidates
from tests.native.conftest import pure_engine


def _case_id(value: object) -> str:
    """A parameter's repr without memory addresses, the same in every process (pytest-xdist compares them)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def fingerprint(doc: Any, scheme: Scheme | None = None) -> int:
    """The pure engine's fingerprint."""
    with pure_engine():
        return fingerprinting.fingerprint(doc, scheme)


def fingerprint_many(docs: Any, scheme: Scheme | None = None) -> list[int]:
    """The pure engine's fingerprints."""
    with pure_engine():
        return fingerprinting.fingerprint_many(docs, scheme)


def pure_sketch(hasher: MinHasher, doc: Any) -> bytes:
    """The pure engine's sketch."""
    with pure_engine():
        return hasher.sketch(doc)


class adapter:
    """The library's own entry points, which dispatch to the compiled core while it is in use."""

    fingerprint = staticmethod(fingerprinting.fingerprint)
    fingerprint_many = staticmethod(fingerprinting.fingerprint_many)
    hits = staticmethod(candidates.hits)

    @staticmethod
    def sketch(hasher: MinHasher, doc: Any) -> bytes:
        return hasher.sketch(doc)

    @staticmethod
    def sketch_many(hasher: MinHasher, docs: Any) -> list[bytes]:
        return hasher.sketch_many(docs)


MASK = (1 << 64) - 1
SPECIAL = list(
    "aZ09 \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2028\u3000\x00_-'.,!?"  # ASCII, whitespace of every kind, NUL
    "\u0301\u0308\u0338\u0345\u093f\u094d\u0e31\u0e38\u3099\u309a\u200d\ufe0f"  # marks, joiners
    "\u1100\u1161\u11a8\u3131\uac00\ud7a3\ua960\ud7b0"  # Hangul jamo, syllables, extended jamo
    "中文日本語カタカナひらがなｱｲ〆々〇、。・"  # CJK, kana, halfwidth, punctuation
    "ＡＢＣ１２ﬁﬀ①⑩⅓…㈱㌀™ŉǅΩÅKⅫ"  # compatibility forms, long NFKC images
    "ßẞİıςΣéèñçøæœ"  # case folds that grow or differ
    "हिन्दीไทยعربيעברית"  # scripts with marks, without spaces, right to left
    "Tiếng Việt"  # precomposed Vietnamese
    "\ufffd\uffff\U0001f600\U0001f44d\U0001f3fd\U0001d400\U0001d7ce\U00020000\U0002f800\U0001aff0\U000e0001"
    "\U00010000\U0001e900\U00011099\U000110ba\U0001d15e"  # astral: emoji, math, CJK ext, marks, composing
    # Unicode 14.0 to 15.1 (which the interpreter's own data may not assign), unassigned ones
    "\u1b4c\u2c2f\ua7c0\U0001e030\U00011f00\U00011f41\U00031350\U0002ebf0\u0378\U00050000"
)
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
CHAR = st.one_of(
    st.sampled_from(SPECIAL),
    st.characters(exclude_categories=()),
    st.characters(max_codepoint=0x7F),
    st.characters(categories=["Cs"]),
    st.sampled_from(SURROGATES),
)
TEXT = st.text(CHAR, max_size=80)
WORDY = st.lists(
    st.one_of(st.sampled_from(["the", "Quick", "BROWN", "fox", "naïve", "Straße", "中文", "x", "42"]), TEXT),
    max_size=25,
).map(" ".join)
TEXTS = st.one_of(TEXT, WORDY)
STOPWORDS = st.lists(st.sampled_from(["the", "fox", "x", "中", "strasse", "42", "ﬁ", "naïve"]), max_size=3)


@st.composite
def schemes(draw: st.DrawFn) -> Scheme:
    """Any valid scheme: every feature kind, n 1-16, every width and weighting, any seed, stopwords."""
    kind = draw(st.sampled_from(["shingles", "words", "chars"]))
    return Scheme(
        features=kind,
        n=draw(st.one_of(st.integers(1, 4), st.integers(1, 16))),
        f=draw(st.sampled_from([32, 64, 128])),
        weighting=draw(st.sampled_from(["tf", "binary"])),
        seed=draw(st.one_of(st.sampled_from([0, 1, 7, MASK]), st.integers(0, MASK))),
        stopwords=() if kind == "chars" else tuple(draw(STOPWORDS)),
    )


SCHEMES = schemes()
# NATIVE_FUZZ_SCALE=20 multiplies every example count, for a deeper run than the suite's (~30 s).
SCALE = max(1, int(os.environ.get("NATIVE_FUZZ_SCALE", "1")))
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
CHECK = settings(max_examples=300 * SCALE, deadline=None, suppress_health_check=_QUIET)
FEW = settings(max_examples=200 * SCALE, deadline=None, suppress_health_check=_QUIET)
DEEP = settings(max_examples=5000 * SCALE, deadline=None, suppress_health_check=_QUIET)


def outcome(run: Callable[..., object], *args: Any) -> tuple[str, object]:
    """Run a call and describe what it gave: its value, or its exception's type and message."""
    try:
        return ("value", run(*args))
    except Exception as exc:
        return ("raised", (type(exc), str(exc)))


def same(pure: Callable[..., object], native: Callable[..., object], *args: Any) -> None:
    """Assert that the pure and the native call give the same value or raise the same exception."""
    with pure_engine():
        expected = outcome(pure, *args)
    got = outcome(native, *args)
    assert got == expected, (args, expected, got)


# ---------------------------------------------------------------------------------------------- texts


@CHECK
@given(text=TEXTS, scheme=SCHEMES)
def test_text(text: str, scheme: Scheme) -> None:
    same(fingerprint, adapter.fingerprint, text, scheme)


@CHECK
@given(text=TEXTS, scheme=SCHEMES)
def test_text_as_bytes(text: str, scheme: Scheme) -> None:
    data = text.encode("utf-8", "surrogatepass")
    same(fingerprint, adapter.fingerprint, data, scheme)
    same(fingerprint, adapter.fingerprint, bytearray(data), scheme)


@CHECK
@given(data=st.binary(max_size=120), scheme=SCHEMES)
def test_bytes_with_invalid_utf8(data: bytes, scheme: Scheme) -> None:
    same(fingerprint, adapter.fingerprint, data, scheme)
    same(fingerprint, adapter.fingerprint, memoryview(data), scheme)


@FEW
@given(text=TEXTS)
def test_default_scheme(text: str) -> None:
    assert adapter.fingerprint(text) == fingerprint(text)
    assert adapter.fingerprint(text, None) == fingerprint(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "  \n\t ",
        "!!! ...",
        "😀",
        "\x00",
        "\x00a\x00",
        "\u0301abc",
        "a\u0301\u0301 b",
        "\u1100\u1161\u11a8 \u1100\u1161",
        "가\u11a8",
        "e\u0301 é",
        "ﬁ ﬁ ﬁ",
        "⑩ ①② ㈱",
        "Straße STRASSE",
        "ǅemal ΣΊΣΥΦΟΣ",
        "a\ud800b",
        "\udfff",
        "日本語のテキスト・カタカナ",
        "𝐀𝐁𝐂 abc",
        "\U00020000\U00020001",
        "Tie\u0302\u0301ng Vie\u0323\u0302t",
        "हिन्दी भाषा",
        "ภาษาไทย",
        "x" * 5000,
        "ab " * 3000,
    ],
)
@pytest.mark.parametrize(
    "scheme",
    [
        Scheme(),
        Scheme(f=32),
        Scheme(f=128, n=2),
        Scheme(features="words", weighting="binary"),
        Scheme(features="chars", n=4),
        Scheme(features="chars", n=1, f=128, weighting="binary"),
        Scheme(n=16, seed=MASK),
        Scheme(stopwords=("x", "ab", "中")),
    ],
    ids=lambda s: s.to_meta(),
)
def test_edge_texts(text: str, scheme: Scheme) -> None:
    same(fingerprint, adapter.fingerprint, text, scheme)


def test_golden_values() -> None:
    from tests.test_fingerprint import GOLDEN, GOLDEN_OTHER

    for (text, f), value in GOLDEN.items():
        assert hex(adapter.fingerprint(text, Scheme(f=f))) == value
    for scheme, value in GOLDEN_OTHER.items():
        assert hex(adapter.fingerprint("The quick brown fox jumps over the lazy dog", scheme)) == value
    assert hex(adapter.fingerprint({"simhash": 2.5, "redis": 1.0, "index": -0.5})) == "0xbb35d7ff954eb542"
    assert hex(adapter.fingerprint("Hello, World!")) == "0xf1e3ffa92aa51ad1"


# ------------------------------------------------------------------------------------- long texts


@FEW
@given(
    text=st.text(st.one_of(CHAR, st.sampled_from(list(" ,.中、。ab"))), max_size=300),
    size=st.integers(-2, 40),
    scheme=SCHEMES,
)
def test_long_texts_in_chunks(text: str, size: int, scheme: Scheme) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(features, "CHUNK_CHARS", size)
        same(fingerprint, adapter.fingerprint, text, scheme)
        same(fingerprint_many, adapter.fingerprint_many, [text, text[: len(text) // 2], ""], scheme)
        tokens = text.split()
        same(fingerprint, adapter.fingerprint, tokens, scheme)


def test_long_real_text_in_chunks() -> None:
    rng = random.Random(5)
    words = ["alpha", "Beta", "中文", "、", "。", "naïve", "ﬁne", "…", "e\u0301", "\u1100\u1161", ",", "\n"]
    words.append("😀")
    text = " ".join(rng.choice(words) for _ in range(16000))  # past the size the engine works detached
    for scheme in (Scheme(), Scheme(features="chars", n=3), Scheme(weighting="binary", f=128)):
        expected = fingerprint(text, scheme)
        assert adapter.fingerprint(text, scheme) == expected
        # Computed detached from Python, on the tables alone: no astral or composing character.
        tables_only = text.replace("😀", "x").replace("e\u0301", "é").replace("\u1100\u1161", "가")
        assert adapter.fingerprint(tables_only, scheme) == fingerprint(tables_only, scheme)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(features, "CHUNK_CHARS", 997)
            assert fingerprint(text, scheme) == expected
            assert adapter.fingerprint(text, scheme) == expected
            assert adapter.fingerprint_many([text, text.encode()], scheme) == [expected, expected]


@pytest.mark.parametrize("size", [-(1 << 70), -5, 0, 1, 3, 1 << 70])
def test_any_chunk_size(size: int) -> None:
    docs: list[Any] = ["abc, def. 中文 ghi", "x" * 40, "a b c d e f", ["a", "b", "c"], ""]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(features, "CHUNK_CHARS", size)
        for scheme in (Scheme(), Scheme(features="chars")):
            same(fingerprint_many, adapter.fingerprint_many, docs, scheme)
            for doc in docs:
                same(fingerprint, adapter.fingerprint, doc, scheme)


# ----------------------------------------------------------------------------------- tokens, weights

TOKENS = st.lists(
    st.one_of(TEXT, st.sampled_from(["the", "New York", "", " ", "Straße", "中", "x"])), max_size=20
)


@CHECK
@given(tokens=TOKENS, scheme=SCHEMES, form=st.sampled_from(["list", "tuple", "iter"]))
def test_tokens(tokens: list[str], scheme: Scheme, form: str) -> None:
    def pure(items: list[str], s: Scheme) -> int:
        return fingerprint(_form(items, form), s)

    def native(items: list[str], s: Scheme) -> int:
        return adapter.fingerprint(_form(items, form), s)

    same(pure, native, tokens, scheme)


def _form(items: list[Any], form: str) -> Any:
    """Give a list as a list, a tuple or a one-shot iterator."""
    if form == "tuple":
        return tuple(items)
    if form == "iter":
        return iter(items)
    return list(items)


WEIGHT = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-10, max_value=10),
    st.integers(-5, 5),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, 0.1, 2.5]),
)
BAD_WEIGHT = st.sampled_from([math.nan, math.inf, -math.inf, True, "1", None, 10**400])


@CHECK
@given(
    pairs=st.lists(
        st.tuples(st.one_of(TEXT, st.sampled_from(["a", "A", "ａ", "hello"])), WEIGHT), max_size=12
    ),
    scheme=SCHEMES,
    as_mapping=st.booleans(),
)
def test_weighted(pairs: list[tuple[str, float]], scheme: Scheme, as_mapping: bool) -> None:
    doc: Any = dict(pairs) if as_mapping else pairs
    same(fingerprint, adapter.fingerprint, doc, scheme)


@FEW
@given(
    pairs=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(WEIGHT, BAD_WEIGHT)), min_size=1),
    scheme=SCHEMES,
)
def test_weighted_errors(pairs: list[tuple[str, Any]], scheme: Scheme) -> None:
    same(fingerprint, adapter.fingerprint, pairs, scheme)
    same(fingerprint, adapter.fingerprint, dict(pairs), scheme)


def test_weighted_forms() -> None:
    scheme = Scheme(f=128)
    for doc in (
        {"hello": 1.0},
        {"hello": Fraction(1, 3), "world": -Fraction(1, 3)},
        [("x", 1), ("X", -1), ("ｘ", 0.5)],
        {"": 5.0, " ": 2.0},
        {},
    ):
        same(fingerprint, adapter.fingerprint, doc, scheme)
    assert adapter.fingerprint({"hello": 1.0}) == adapter.fingerprint("hello")


BAD_DOCS: list[Any] = [
    5,
    None,
    1.5,
    object(),
    [1, 2],
    ["a", 1],
    ("a", b"b"),
    [("a", "b")],
    [("a", 1, 2)],
    [("a",)],
    {"a": math.nan},
    {"a": True},
    {1: 2.0},
    [("a", 1), "b"],
    [["a", 1]],
    {"a": 10**400},
]


@pytest.mark.parametrize("doc", BAD_DOCS, ids=_case_id)
@pytest.mark.parametrize("scheme", [Scheme(), Scheme(features="chars")], ids=["shingles", "chars"])
def test_bad_documents(doc: Any, scheme: Scheme) -> None:
    same(fingerprint, adapter.fingerprint, doc, scheme)
    same(fingerprint_many, adapter.fingerprint_many, ["ok", doc, 7], scheme)


@pytest.mark.parametrize("docs", ["text", b"bytes", bytearray(b"x"), memoryview(b"x"), {"a": 1.0}, 5, None])
def test_bad_batches(docs: Any) -> None:
    same(fingerprint_many, adapter.fingerprint_many, docs, None)


@pytest.mark.parametrize("scheme", ["shingles", 64, object()])
def test_bad_scheme(scheme: Any) -> None:
    same(fingerprint, adapter.fingerprint, "text", scheme)
    same(fingerprint_many, adapter.fingerprint_many, ["text"], scheme)
    with pytest.raises(InvalidType):
        adapter.fingerprint("text", scheme)


def test_error_types_are_the_projects() -> None:
    bad: Any = ["a", 1]
    with pytest.raises(InvalidType, match=r"^doc must hold str tokens only, got int$"):
        adapter.fingerprint(bad)
    with pytest.raises(InvalidType, match=r"^docs\[1\] must hold str tokens only, got bytes$"):
        adapter.fingerprint_many([["a"], ["b", b"c"]])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        adapter.fingerprint({"a": math.inf})


# ----------------------------------------------------------------------------------------- batches

DOCS = st.one_of(
    TEXTS,
    TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40),
    TOKENS,
    st.dictionaries(st.sampled_from(["a", "B", "ç", "中"]), WEIGHT, max_size=4),
    st.lists(st.tuples(st.sampled_from(["a", "b"]), WEIGHT), min_size=1, max_size=3),
)


@CHECK
@given(docs=st.lists(DOCS, max_size=12), scheme=SCHEMES)
def test_batches_mixing_forms(docs: list[Any], scheme: Scheme) -> None:
    expected = outcome(fingerprint_many, docs, scheme)
    assert outcome(adapter.fingerprint_many, docs, scheme) == expected
    assert outcome(adapter.fingerprint_many, iter(docs), scheme) == expected
    if expected[0] == "value":
        assert [adapter.fingerprint(doc, scheme) for doc in docs] == expected[1]


def test_batches_across_native_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    docs: list[Any] = []
    for i in range(200):
        words = [
            rng.choice(["alpha", "BETA", "中文", "ß", "😀", "e\u0301", "x"])
            for _ in range(rng.randint(0, 30))
        ]
        docs.append(" ".join(words) if i % 3 else words)
    monkeypatch.setattr(native_module, "BATCH_DOCS", 7)
    monkeypatch.setattr(native_module, "BATCH_CHARS", 300)
    for scheme in (Scheme(), Scheme(features="chars", f=32), Scheme(f=128, weighting="binary")):
        assert adapter.fingerprint_many(docs, scheme) == fingerprint_many(docs, scheme)


def test_threads_share_engines() -> None:
    docs = [f"document number {i} 中文 ß {'😀' if i % 5 == 0 else ''} e\u0301" for i in range(300)]
    expected = fingerprint_many(docs)
    results: list[list[int]] = []

    def work() -> None:
        results.append(adapter.fingerprint_many(docs))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


# ----------------------------------------------------------------------------------------- minhash

HASHERS = st.builds(
    MinHasher,
    num_perm=st.sampled_from([16, 17, 64, 256]),
    bits=st.sampled_from([8, 16]),
    n=st.integers(1, 5),
    seed=st.one_of(st.sampled_from([0, 1, MASK]), st.integers(0, MASK)),
)
SKETCH_DOCS = st.one_of(
    TEXTS,
    TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40),
    TOKENS,
    TOKENS.map(tuple),
)


@CHECK
@given(hasher=HASHERS, docs=st.lists(SKETCH_DOCS, max_size=6))
def test_sketches(hasher: MinHasher, docs: list[Any]) -> None:
    for doc in docs:
        same(hasher.sketch, lambda d: adapter.sketch(hasher, d), doc)
    same(hasher.sketch_many, lambda d: adapter.sketch_many(hasher, d), docs)


@pytest.mark.parametrize(
    "doc", [5, None, {"a": 1}, ["a", 1], ("a", None), iter(["a"]), range(3)], ids=_case_id
)
def test_bad_sketch_documents(doc: Any) -> None:
    hasher = MinHasher(num_perm=16)
    same(hasher.sketch, lambda d: adapter.sketch(hasher, d), doc)
    same(hasher.sketch_many, lambda d: adapter.sketch_many(hasher, d), ["ok", doc])


def test_sketch_of_real_text() -> None:
    hasher = MinHasher()
    text = "The quick brown fox jumps over the lazy dog. 近似重复检测是常见任务 " * 40
    assert adapter.sketch(hasher, text) == pure_sketch(hasher, text)
    assert adapter.sketch(hasher, text.split()) == pure_sketch(hasher, text.split())


# -------------------------------------------------------------------------------------------- hits


def _hits_pure(fps: list[int], replies: list[list[Any]], tables: int, k: int, f: int) -> object:
    return candidates.pure_hits(fps, replies, tables, k, f)


@st.composite
def hit_cases(draw: st.DrawFn) -> tuple[list[int], list[list[Any]], int, int, int]:
    """Queries, SMEMBERS replies with near and far candidates (duplicates across tables), k and f."""
    f = draw(st.sampled_from([32, 64, 128]))
    tables = draw(st.integers(1, 5))
    k = draw(st.integers(0, 8))
    nq = draw(st.integers(0, 4))
    fps = [draw(st.integers(0, (1 << f) - 1)) for _ in range(nq)]
    pool: list[int] = []
    for fp in fps:
        for _ in range(draw(st.integers(0, 6))):
            flips = draw(st.lists(st.integers(0, f - 1), max_size=k + 3))
            value = fp
            for bit in flips:
                value ^= 1 << bit
            pool.append(value)
    pool += draw(st.lists(st.integers(0, (1 << f) - 1), max_size=6))
    replies = []
    for _ in range(nq * tables + draw(st.integers(-2, 2)) if nq else draw(st.integers(0, 2))):
        members = [encode_fp(v, f) for v in draw(st.lists(st.sampled_from(pool), max_size=8))] if pool else []
        replies.append(members)
    return fps, replies, tables, k, f


@CHECK
@given(case=hit_cases())
def test_hits(case: tuple[list[int], list[list[Any]], int, int, int]) -> None:
    same(_hits_pure, adapter.hits, *case)


GARBAGE = [
    b"abc",
    b" 12",
    b"12 ",
    b"+5",
    b"1_0",
    b"-0",
    b"007",
    b"",
    b"-",
    b"-1",
    b"-18446744073709551616",
    b"-18446744073709551617",
    b"99999999999999999999999999999999999999999",
    "12",
    12,
    12.7,
    b"\xff",
    b"\x00",
    b"1\x00",
    b"\xd9\xa3",
    b"0x10",
    b"1e3",
    bytearray(b"5"),
]


@FEW
@given(
    case=hit_cases(),
    junk=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 10), st.sampled_from(GARBAGE)), max_size=3),
)
def test_hits_with_malformed_members(
    case: tuple[list[int], list[list[Any]], int, int, int], junk: list[Any]
) -> None:
    fps, replies, tables, k, f = case
    replies = [list(raws) for raws in replies]
    for at, pos, raw in junk:
        if replies:
            members = replies[at % len(replies)]
            members.insert(pos % (len(members) + 1), raw)
    same(_hits_pure, adapter.hits, fps, replies, tables, k, f)


def test_hits_odd_arguments() -> None:
    replies = [[b"1", b"-1", b"3"], [b"1", b"7"]]
    for args in (
        ([0, 1], replies, 1, 2, 64),
        ([0], replies, 2, -1, 64),
        ([0], replies, 2, 10**30, 64),
        ([0], replies, 2, 1.5, 64),
        ([True], replies, 2, 1, 32),
        ([0], replies, 0, 1, 64),
        ((0,), tuple(replies), 2, 1, 64),
        ([0], [{b"1", b"2"}, (b"3",)], 2, 5, 128),
        ([0], [[b"1", [1]]], 1, 5, 64),
        ([-1], replies, 2, 70, 64),
        ([1 << 130], replies, 2, 200, 128),
        ([0], [[b"1"], 5], 2, 5, 64),
    ):
        same(_hits_pure, adapter.hits, *args)


# ------------------------------------------------------------------------------------ deep (slow)


@pytest.mark.slow
@DEEP
@given(docs=st.lists(DOCS, max_size=8), scheme=SCHEMES, size=st.one_of(st.just(1 << 20), st.integers(0, 30)))
def test_deep_fuzz(docs: list[Any], scheme: Scheme, size: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(features, "CHUNK_CHARS", size)
        same(fingerprint_many, adapter.fingerprint_many, docs, scheme)
        for doc in docs:
            same(fingerprint, adapter.fingerprint, doc, scheme)


def _iter_docs() -> Iterator[str]:
    """Documents of the benchmark corpus, when available (a real-text sanity check)."""
    try:
        from benchmarks import corpus
    except Exception:  # the corpus needs the benchmarks package and its data
        return iter(())
    return iter([*corpus.documents("en", 30, 3500), *corpus.documents("zh", 30, 3500)])


def test_real_corpus_documents() -> None:
    docs = list(_iter_docs())
    if not docs:
        pytest.skip("benchmark corpus not available")
    for scheme in (Scheme(), Scheme(f=128, weighting="binary"), Scheme(features="chars", n=5, f=32)):
        assert adapter.fingerprint_many(docs, scheme) == fingerprint_many(docs, scheme)
        assert [adapter.fingerprint(d, scheme) for d in docs[::7]] == [
            fingerprint(d, scheme) for d in docs[::7]
        ]
