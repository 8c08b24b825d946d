# ruff: noqa: RUF001  (full-width and look-alike characters are what these tests are about)
"""The fast paths of fingerprinting give the very bits of the plain ones.

Vectorised shingle combining against the plain formula, and batches against documents one by one.
"""

from __future__ import annotations

import importlib
import random
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis.fingerprinting import charclass, fingerprint, fingerprint_many
from simhash_redis.fingerprinting import normalize as normalize_module
from simhash_redis.fingerprinting.scheme import Scheme

# By module path: the package re-exports a function under the name "fingerprint".
fp_module = importlib.import_module("simhash_redis.fingerprinting.hashing")
engine_choice = importlib.import_module("simhash_redis.fingerprinting.engine_choice")


@pytest.fixture(autouse=True)
def pure_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check the pure engine's fast paths: run it even where the compiled core is in use."""
    monkeypatch.setattr(engine_choice, "native", None)


MASK = (1 << 64) - 1
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


@pytest.mark.parametrize("n", [2, 3, 5])
def test_windows_combined_are_the_plain_combination(n: int) -> None:
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


def test_no_astral_composite_has_a_bmp_second_part() -> None:
    # `normalize.composing_flags` looks at BMP code points only: right for BMP texts while this holds.
    for cp in range(0x10000, 0x110000):
        decomposition = unicodedata.decomposition(chr(cp))
        if decomposition and not decomposition.startswith("<"):
            assert all(int(part, 16) > 0xFFFF for part in decomposition.split()[1:]), hex(cp)


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
def test_batches_give_each_documents_bits(docs: list[str]) -> None:
    for scheme in SCHEMES:
        assert fingerprint_many(docs, scheme) == [fingerprint(doc, scheme) for doc in docs], scheme.to_meta()


def test_large_batches_keep_the_bits() -> None:
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
    for scheme in (Scheme(), Scheme(f=32, seed=11), Scheme(n=4)):
        assert fingerprint_many(docs, scheme) == [fingerprint(doc, scheme) for doc in docs]


def test_bmp_classes_equal_class_of_every_code_point() -> None:
    uni = normalize_module.PINNED
    expected = [charclass.class_of_kind(cp, uni.kind(cp)) for cp in range(0x10000)]
    assert uni.bmp_classes.tolist() == expected
