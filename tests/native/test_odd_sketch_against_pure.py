"""The compiled odd sketcher against the pure one: the same bytes, floats and exceptions for every input.

Texts of every kind (any code point, Chinese, empty, short), token lists, and long documents of more
than 1,024 shingles at their own level and at every level, one by one, in batches and several levels
at once; verified mode's query sketches (`BandedOddSketcher`: band values and three levels, made in
one pass by the compiled core) and stored ones (band values and the own level). The pure engine is the
definition.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("simhash_redis_native")

from hypothesis import given
from hypothesis import strategies as st

from simhash_redis.compiled import odd_estimate
from simhash_redis.errors import SimhashRedisError
from simhash_redis.fingerprinting import BandedOddSketcher, engine_choice
from simhash_redis.fingerprinting.banded_odd import storing
from simhash_redis.fingerprinting.odd_sketch import MAX_LEVEL, SKETCH_BYTES, OddSketcher
from tests.native.conftest import pure_engine
from tests.native.test_native_equivalence import CHECK, FEW, MASK, SKETCH_DOCS, _case_id, same

SKETCHERS = st.builds(
    OddSketcher,
    n=st.one_of(st.just(3), st.integers(1, 5)),
    seed=st.one_of(st.sampled_from([0, 1, MASK]), st.integers(0, MASK)),
)
LEVELS = st.one_of(st.none(), st.integers(0, MAX_LEVEL))
CHINESE = "近似重复检测是搜索引擎网页抓取和数据清洗中的常见任务新闻文章一个词的改动"


@st.composite
def long_docs(draw: st.DrawFn) -> Any:
    """A document of 300 to 7,000 tokens, English words or Chinese characters, as text or tokens."""
    rng = random.Random(draw(st.integers(0, 1 << 32)))
    count = draw(st.sampled_from([300, 1030, 2100, 7000]))
    if draw(st.booleans()):
        text = "".join(rng.choice(CHINESE) for _ in range(count))
    else:
        text = " ".join(f"w{rng.randrange(count * 4)}" for _ in range(count))
    return text.split() if draw(st.booleans()) else text


DOCS = st.one_of(SKETCH_DOCS, st.sampled_from(["", " ", "中", "a b", "中文"]), long_docs())


@CHECK
@given(sketcher=SKETCHERS, docs=st.lists(DOCS, max_size=5), level=LEVELS)
def test_sketches(sketcher: OddSketcher, docs: list[Any], level: int | None) -> None:
    assert engine_choice.native is not None, "the compiled core is not in use"
    for doc in docs:
        same(lambda d: sketcher.sketch(d, level), lambda d: sketcher.sketch(d, level), doc)
    same(lambda d: sketcher.sketch_many(d, level), lambda d: sketcher.sketch_many(d, level), docs)


@FEW
@given(sketcher=SKETCHERS, doc=long_docs(), levels=st.lists(st.integers(0, MAX_LEVEL), max_size=17))
def test_every_level_of_long_documents(sketcher: OddSketcher, doc: Any, levels: list[int]) -> None:
    same(lambda d: sketcher.sketch(d), lambda d: sketcher.sketch(d), doc)
    same(lambda d: sketcher.sketch_levels(d, levels), lambda d: sketcher.sketch_levels(d, levels), doc)
    same(
        lambda d: sketcher.sketch_levels(d, list(range(16))),
        lambda d: sketcher.sketch_levels(d, list(range(16))),
        doc,
    )


BANDED = st.builds(
    BandedOddSketcher,
    n=st.one_of(st.just(3), st.integers(1, 5)),
    seed=st.one_of(st.sampled_from([0, 1, MASK]), st.integers(0, MASK)),
)
#: Documents around the sizes where a query sketch carries the level above (480 shingles kept) and
#: where the own level leaves 0 (1,024).
EDGES = st.builds(
    lambda count, words: " ".join(f"w{i}" for i in range(count)) if words else "中" * count,
    st.sampled_from([479, 480, 481, 482, 483, 1025, 1026, 1027]),
    st.booleans(),
)


@CHECK
@given(sketcher=BANDED, docs=st.lists(st.one_of(DOCS, EDGES), max_size=5))
def test_banded_query_sketches(sketcher: BandedOddSketcher, docs: list[Any]) -> None:
    assert engine_choice.native is not None, "the compiled core is not in use"
    for doc in docs:
        same(sketcher.sketch, sketcher.sketch, doc)
    same(sketcher.sketch_many, sketcher.sketch_many, docs)


@CHECK
@given(sketcher=BANDED, docs=st.lists(st.one_of(DOCS, EDGES), max_size=5))
def test_banded_stored_sketches(sketcher: BandedOddSketcher, docs: list[Any]) -> None:
    # The stored form a load's workers make, in one pass by the compiled core: the pure stored form,
    # and the first bytes of the query sketch.
    assert engine_choice.native is not None, "the compiled core is not in use"
    storer = storing(sketcher)
    same(storer.sketch_many, storer.sketch_many, docs)
    try:
        queries = sketcher.sketch_many(docs)
    except SimhashRedisError:
        return  # a bad document: the same error, checked above
    assert storer.sketch_many(docs) == [sketcher.stored(query) for query in queries]


@pytest.mark.parametrize(
    "doc", [5, None, {"a": 1}, ["a", 1], ("a", None), iter(["a"]), range(3)], ids=_case_id
)
def test_bad_documents(doc: Any) -> None:
    sketcher = OddSketcher()
    same(sketcher.sketch, sketcher.sketch, doc)
    same(sketcher.sketch_many, sketcher.sketch_many, ["ok", doc])
    same(lambda d: sketcher.sketch_levels(d, [0, 1]), lambda d: sketcher.sketch_levels(d, [0, 1]), doc)
    banded = BandedOddSketcher()
    same(banded.sketch, banded.sketch, doc)
    same(banded.sketch_many, banded.sketch_many, ["ok", doc])
    same(storing(banded).sketch_many, storing(banded).sketch_many, ["ok", doc])


def test_bad_levels_and_parameters() -> None:
    sketcher = OddSketcher()
    for level in (-1, 16, 1 << 70, "1", 1.0, True):
        same(lambda lv: sketcher.sketch("a b c", lv), lambda lv: sketcher.sketch("a b c", lv), level)
        same(lambda lv: sketcher.sketch_many(["a"], lv), lambda lv: sketcher.sketch_many(["a"], lv), level)
        same(
            lambda lv: sketcher.sketch_levels("a", [0, lv]),
            lambda lv: sketcher.sketch_levels("a", [0, lv]),
            level,
        )


@FEW
@given(
    a=st.binary(min_size=126, max_size=126),
    flips=st.lists(st.integers(0, 1007), max_size=600),
    sizes=st.tuples(st.integers(0, 4095), st.integers(0, 4095)),
    level=st.integers(0, MAX_LEVEL),
)
def test_estimates(a: bytes, flips: list[int], sizes: tuple[int, int], level: int) -> None:
    other = bytearray(a)
    for i in flips:
        other[i // 8] ^= 0x80 >> (i % 8)
    one = a + (sizes[0] | level << 12).to_bytes(2, "little")
    two = bytes(other) + (sizes[1] | level << 12).to_bytes(2, "little")
    assert odd_estimate(one, two) == OddSketcher().estimate(one, two)


def test_estimates_of_every_bit_count_and_the_errors() -> None:
    sketcher = OddSketcher()
    zero = bytes(126)
    for z in range(1009):
        bits = bytearray(zero)
        for i in range(z):
            bits[i // 8] |= 0x80 >> (i % 8)
        for sizes in ((0, 0), (0, 1), (500, 520), (1024, 1024), (4095, 4095), (3, 900)):
            one = zero + sizes[0].to_bytes(2, "little")
            two = bytes(bits) + sizes[1].to_bytes(2, "little")
            assert odd_estimate(one, two) == sketcher.estimate(one, two), (z, sizes)
    good = bytes(SKETCH_BYTES)
    for a, b in ((good[1:], good), (good, good + b"x"), (good, bytes(127) + b"\x20")):
        same(sketcher.estimate, odd_estimate, a, b)


def test_real_texts() -> None:
    corpus = pytest.importorskip("benchmarks.corpus")
    texts = [
        *corpus.documents("en", 20, 3500),
        *corpus.documents("zh", 20, 3500),
        *corpus.documents("en", 4, 60000),
    ]
    sketcher = OddSketcher()
    got = sketcher.sketch_many(texts)
    with pure_engine():
        assert sketcher.sketch_many(texts) == got
    assert {sketcher.size_and_level(s)[1] for s in got} != {0}
    banded = BandedOddSketcher().sketch_many(texts)
    stored = storing(BandedOddSketcher()).sketch_many(texts)
    assert stored == [BandedOddSketcher.stored(query) for query in banded]
    with pure_engine():
        assert BandedOddSketcher().sketch_many(texts) == banded
        assert storing(BandedOddSketcher()).sketch_many(texts) == stored


def test_a_compiled_core_without_the_banded_sketches_is_refused() -> None:
    # Built from an older checkout: an OddSketch without banded_many. =native says why.
    done = _engine_with_core_changed("old.OddSketch = type('OddSketch', (), {})")
    assert done.returncode == 1
    assert "older than this simhash-redis (no OddSketch.banded_many): upgrade it" in done.stderr


def test_two_empty_sets_estimate_1_in_both_engines() -> None:
    # Texts with nothing to hash are near-duplicates (docs/fingerprints.md); at a level above 0 an empty
    # sample tells nothing.
    for level, expected in ((0, 1.0), (3, 0.0)):
        empty = bytes(126) + (level << 12).to_bytes(2, "little")
        assert odd_estimate(empty, empty) == OddSketcher().estimate(empty, empty) == expected
        with pure_engine():
            assert OddSketcher().estimate(empty, empty) == expected
    banded = BandedOddSketcher()
    with pure_engine():
        pure = banded.sketch_many(["", "!!!", "hello world"])
    assert banded.sketch_many(["", "!!!", "hello world"]) == pure
    stored = [banded.stored(one) for one in pure]
    assert list(banded.estimate_many(pure[0], stored)) == [1.0, 1.0, 0.0]
    assert list(banded.estimate_pairs(pure, [1, 0, 0], stored)) == [1.0, 1.0, 0.0]


def test_a_compiled_core_with_the_former_estimator_is_refused() -> None:
    # Built before the estimate was rounded: odd_estimate of 6 bits apart at sizes 27 + 27 a hair below 0.8.
    done = _engine_with_core_changed("old.odd_estimate = lambda a, b: 0.7998")
    assert done.returncode == 1
    assert "older than this simhash-redis (its odd_estimate is not rounded): upgrade it" in done.stderr


def test_a_compiled_core_that_estimates_two_empty_sets_0_is_refused() -> None:
    # Built before two empty sets estimated 1: the engines would disagree on texts with nothing to hash.
    done = _engine_with_core_changed(
        "old.odd_estimate = lambda a, b, f=core.odd_estimate: 0.0 if a == b == bytes(128) else f(a, b)"
    )
    assert done.returncode == 1
    assert "(its odd_estimate of two empty sets is not 1): upgrade it" in done.stderr


def _engine_with_core_changed(change: str) -> subprocess.CompletedProcess[str]:
    """`simhash_redis.engine()` with SIMHASH_REDIS_ENGINE=native in a fresh process, over a copy of the
    compiled core (`old`) that one statement changed."""
    code = (
        "import sys, types, simhash_redis_native as core\n"
        "old = types.ModuleType('simhash_redis_native')\n"
        "old.__dict__.update(vars(core))\n"
        f"{change}\n"
        "sys.modules['simhash_redis_native'] = old\n"
        "import simhash_redis\n"
        "print(simhash_redis.engine())\n"
    )
    env = dict(os.environ, SIMHASH_REDIS_ENGINE="native")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
