# ruff: noqa: RUF001  (full-width and look-alike characters are what these tests are about)
"""The fast paths of fingerprinting give the very bits of the plain ones.

Vectorised xxh3 against the xxhash package, bit-sliced counters against unpacked bits, table-driven
normalisation against `normalize`, and batches taking the fast paths against documents one by one.
"""

from __future__ import annotations

import importlib
import random
import unicodedata
from collections.abc import Callable

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis.fingerprinting import bit_votes, charclass, fingerprint, fingerprint_many, xxh3
from simhash_redis.fingerprinting import normalize as normalize_module
from simhash_redis.fingerprinting.scheme import Scheme

# By module path: the package re-exports a function under the name "fingerprint".
fp_module = importlib.import_module("simhash_redis.fingerprinting.hashing")
documents_module = importlib.import_module("simhash_redis.fingerprinting.documents")
engine_module = importlib.import_module("simhash_redis.fingerprinting.pure_engine")
engine_choice = importlib.import_module("simhash_redis.fingerprinting.engine_choice")


@pytest.fixture(autouse=True)
def pure_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check the pure engine's fast paths: run it even where the compiled core is in use."""
    monkeypatch.setattr(engine_choice, "native", None)


MASK = (1 << 64) - 1
SEEDS = [0, 1, 7, 0xFFFFFFFF, 1 << 32, 0x123456789ABCDEF0, MASK]
_EXTRA = list(
    "中文日本語カタカナひらがな한국어😀👍🏽\u0301\u0308\u200d …，。ＡＢＣｱﾞ\u3000\nßİﬁ½①㎡ΣσςДж\x00_-'"
)
TEXT = st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(_EXTRA)), max_size=120)
WORDS = [
    "alpha",
    "Beta",
    "δέλτα",
    "中",
    "文",
    "x",
    "42",
    "Straße",
    "ÉCOLE",
    "naïve",
    "…",
    "a" * 20,
    "b" * 70,
    "c" * 140,
]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _spans(rng: random.Random, lengths: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, bytes]:
    """Random bytes holding strings of the given lengths, with gaps between them."""
    starts, position = [], rng.randrange(3)
    for length in lengths:
        starts.append(position)
        position += length + rng.randrange(3)
    data = bytes(rng.randrange(256) for _ in range(position))
    return (
        np.frombuffer(data, dtype=np.uint8),
        np.array(starts, dtype=np.intp),
        np.array(lengths, dtype=np.intp),
        data,
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_vectorised_xxh3_is_xxhash(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [length for length in range(1, xxh3.VECTOR_MAX + 1) for _ in range(8)]
    lengths += [rng.randint(1, 16) for _ in range(3000)]
    rng.shuffle(lengths)
    buf, starts, sizes, data = _spans(rng, lengths)
    got = xxh3.hash_spans(buf, starts, sizes, seed)
    want = [
        xxhash.xxh3_64_intdigest(data[a : a + n], seed) for a, n in zip(starts.tolist(), lengths, strict=True)
    ]
    assert got.tolist() == want


def test_vectorised_xxh3_reads_nothing_past_a_string_at_the_end() -> None:
    for length in range(1, xxh3.VECTOR_MAX + 1):
        data = bytes(range(length))
        buf = np.frombuffer(data, dtype=np.uint8)
        got = xxh3.hash_spans(buf, np.array([0]), np.array([length]), 0)
        assert int(got[0]) == xxhash.xxh3_64_intdigest(data, 0)


@pytest.mark.parametrize("f", [32, 64, 128])
def test_bit_sliced_sums_are_the_unpacked_sums(f: int) -> None:
    rng = np.random.default_rng(f)
    lanes = 2 if f == 128 else 1
    for docs, high in [(1, 40_000), (7, 3), (30, 300), (5, 2000), (60, 40)]:
        per_doc = rng.integers(0, high, docs).astype(np.intp)
        per_doc[0] = 0
        feats = rng.integers(0, MASK, (int(per_doc.sum()), lanes), dtype=np.uint64, endpoint=True)
        feats[: len(feats) // 3] = np.uint64(MASK)  # every counter at its largest in some blocks
        expected = bit_votes.lane_sums(feats, per_doc, f)
        assert (bit_votes.sliced_sums(feats, per_doc, f) == expected).all()
    empty = np.zeros((0, lanes), dtype=np.uint64)
    assert not bit_votes.sliced_sums(empty, np.zeros(3, dtype=np.intp), f).any()


@pytest.mark.parametrize("n", [2, 3, 5])
def test_windows_combined_in_chunks_are_the_plain_combination(
    monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    monkeypatch.setattr(fp_module, "_MIX_CHUNK", 7)
    rng = np.random.default_rng(n)
    column = rng.integers(0, MASK, 50, dtype=np.uint64, endpoint=True)
    padded = column.tolist() + [0] * (n - 1)
    expected = []
    for start in range(len(column)):
        h = padded[start]
        for t in padded[start + 1 : start + n]:
            z = (h * fp_module.MIX_K + t) & MASK
            z = ((z ^ (z >> 30)) * fp_module.MIX_C1) & MASK
            z = ((z ^ (z >> 27)) * fp_module.MIX_C2) & MASK
            h = z ^ (z >> 31)
        expected.append(h)
    assert fp_module.combine_windows(column, n).tolist() == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "中文…测试",
        "Straße ﬁ",
        "㎡ ½ ①",
        "ｶﾞｷﾞ",
        "e\u0301\u0301",
        "한\u1161",
        "😀中",
        "a\ud800b",
        "…" * 3,
    ],
)
def test_table_normalisation_is_normalize(text: str) -> None:
    uni = normalize_module.PINNED
    cps, classes = uni.classified_code_points(text)
    expected = normalize_module.code_points(uni.normalize(text))
    assert cps.tolist() == expected.tolist()
    if classes is not None:
        assert classes.tolist() == uni.classes_of(expected).tolist()


@FAST
@given(TEXT)
def test_table_normalisation_is_normalize_on_any_text(text: str) -> None:
    test_table_normalisation_is_normalize(text)


@FAST
@given(
    st.lists(
        st.sampled_from([*_EXTRA, "…", "ᄀ", "\u1161", "\u11a8", "가", "\u0b47", "\u0b3e", "ｶ", "ﾞ"]),
        max_size=30,
    )
)
def test_table_normalisation_is_normalize_on_composing_text(chars: list[str]) -> None:
    test_table_normalisation_is_normalize("".join(chars))


# Scripts with combining marks, composing vowel signs, jamo, kana voicing marks and compatibility forms.
_TRICKY_RANGES = [
    (0x0041, 0x024F),
    (0x0300, 0x036F),
    (0x0900, 0x0DFF),
    (0x0F00, 0x0FFF),
    (0x1000, 0x109F),
    (0x1100, 0x11FF),
    (0x1B00, 0x1B7F),
    (0x1E00, 0x1EFF),
    (0x2000, 0x2BFF),
    (0x3040, 0x30FF),
    (0x3130, 0x318F),
    (0xA960, 0xA97F),
    (0xAC00, 0xAC40),
    (0xD7B0, 0xD7FF),
    (0xF900, 0xFDFF),
    (0xFF60, 0xFFEF),
]


def test_table_normalisation_is_normalize_on_random_tricky_text() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        chars = [chr(rng.randint(*rng.choice(_TRICKY_RANGES))) for _ in range(rng.randint(1, 12))]
        test_table_normalisation_is_normalize("".join(chars))


def test_no_astral_composite_has_a_bmp_second_part() -> None:
    # `normalize.composing_flags` looks at BMP code points only: right for BMP texts while this holds.
    for cp in range(0x10000, 0x110000):
        decomposition = unicodedata.decomposition(chr(cp))
        if decomposition and not decomposition.startswith("<"):
            assert all(int(part, 16) > 0xFFFF for part in decomposition.split()[1:]), hex(cp)


def _slow_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents_module, "VECTOR_MIN_CHARS", 1 << 62)
    monkeypatch.setattr(bit_votes, "SLICED_MIN_ROWS", 1 << 62)


def _fast_paths(monkeypatch: pytest.MonkeyPatch, few_spans: int) -> None:
    monkeypatch.setattr(documents_module, "VECTOR_MIN_CHARS", 0)
    monkeypatch.setattr(bit_votes, "SLICED_MIN_ROWS", 0)
    monkeypatch.setattr(fp_module, "_FEW_SPANS", few_spans)


SCHEMES = [
    Scheme(),
    Scheme(f=32, n=2, seed=MASK),
    Scheme(f=128),
    Scheme(weighting="binary", seed=7),
    Scheme(features="words"),
    Scheme(n=5, seed=1 << 32),
    Scheme(stopwords=("the", "中")),
]


@FAST
@given(st.lists(st.one_of(TEXT, st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join)), max_size=12))
def test_fast_paths_give_the_slow_paths_bits(docs: list[str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        _slow_paths(patch)
        expected = {scheme: [fingerprint(doc, scheme) for doc in docs] for scheme in SCHEMES}
    for few_spans in (0, 64):
        with pytest.MonkeyPatch.context() as patch:
            _fast_paths(patch, few_spans)
            for scheme in SCHEMES:
                assert fingerprint_many(docs, scheme) == expected[scheme], scheme.to_meta()


def _counting(function: Callable[..., object], calls: dict[str, int], name: str) -> Callable[..., object]:
    """Wrap a function to count its calls under a name."""

    def counted(*args: object) -> object:
        calls[name] += 1
        return function(*args)

    return counted


def test_large_batches_take_the_fast_paths_and_keep_the_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    english = "The licenses for most software are designed to take away your FREEDOM to share it, 3.14"
    chinese = "近似重复检测是搜索引擎、网页抓取和数据清洗中的常见任务……它们之间的汉明距离很小。"
    greek = "Δέλτα και άλφα είναι γράμματα"
    docs = []
    for _ in range(120):
        parts = [english] * rng.randint(0, 12) + [chinese] * rng.randint(0, 12) + [greek] * rng.randint(0, 2)
        rng.shuffle(parts)
        docs.append(" ".join(parts))
        docs.append(" ".join([english] * rng.randint(0, 6)))
    assert sum(len(doc) for doc in docs if doc.isascii()) > documents_module.VECTOR_MIN_CHARS
    assert sum(len(doc) for doc in docs if not doc.isascii()) > documents_module.VECTOR_MIN_CHARS
    calls = {"hash_spans": 0, "sliced_sums": 0}
    # Each patched where it is looked up: fingerprint calls hash_spans, bit_votes.bit_sums calls sliced_sums.
    for module, name in ((engine_module, "hash_spans"), (bit_votes, "sliced_sums")):
        monkeypatch.setattr(module, name, _counting(getattr(module, name), calls, name))
    for scheme in (Scheme(), Scheme(f=32, seed=11), Scheme(n=4)):
        assert fingerprint_many(docs, scheme) == [fingerprint(doc, scheme) for doc in docs]
    assert calls["hash_spans"] >= 6
    assert calls["sliced_sums"] >= 3


def test_bmp_classes_equal_class_of_every_code_point() -> None:
    uni = normalize_module.PINNED
    expected = [charclass.class_of_kind(cp, uni.data.kind(cp)) for cp in range(0x10000)]
    assert uni.bmp_classes.tolist() == expected
