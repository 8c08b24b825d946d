"""MinHash sketches: sizes, determinism, estimates close to the exact Jaccard similarity."""

from __future__ import annotations

import random

import numpy as np
import pytest

from simhash_redis.errors import InvalidArgument, InvalidType
from simhash_redis.fingerprinting.minhash import MinHasher, shingle_hashes


def _jaccard(a: list[str], b: list[str], n: int = 3) -> float:
    sa = {tuple(a[i : i + n]) for i in range(len(a) - n + 1)}
    sb = {tuple(b[i : i + n]) for i in range(len(b) - n + 1)}
    return len(sa & sb) / len(sa | sb)


def test_shingle_hashes_are_distinct_ordered_shingles() -> None:
    assert len(shingle_hashes(["a", "b", "c", "a", "b", "c"], 3)) == 3
    assert len(shingle_hashes(["a", "b"], 3)) == 1
    assert len(shingle_hashes([], 3)) == 0
    assert not np.array_equal(shingle_hashes(["a", "b"], 2), shingle_hashes(["b", "a"], 2))


def test_sketch_size_and_determinism() -> None:
    hasher = MinHasher(num_perm=128, bits=16)
    sketch = hasher.sketch("the quick brown fox jumps over the lazy dog")
    assert len(sketch) == hasher.sketch_bytes == 256
    assert MinHasher(num_perm=128, bits=16).sketch("The quick brown fox jumps over the lazy dog!") == sketch
    assert hasher.sketch(["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]) == sketch
    assert hasher.estimate(sketch, sketch) == 1.0


@pytest.mark.parametrize("bits", [8, 16])
def test_estimates_track_exact_jaccard(bits: int) -> None:
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(3000)]
    hasher = MinHasher(num_perm=256, bits=bits)
    errors = []
    for _ in range(20):
        a = [rng.choice(vocab) for _ in range(400)]
        b = [w if rng.random() > rng.uniform(0.0, 0.1) else rng.choice(vocab) for w in a]
        est = hasher.estimate(hasher.sketch(a), hasher.sketch(b))
        errors.append(est - _jaccard(a, b))
    # 256 permutations: standard error about 0.03 at J ~ 0.7.
    assert max(abs(e) for e in errors) < 0.12
    assert abs(float(np.mean(errors))) < 0.03


def test_unrelated_documents_estimate_near_zero() -> None:
    hasher = MinHasher()
    a = hasher.sketch(" ".join(f"a{i}" for i in range(300)))
    b = hasher.sketch(" ".join(f"b{i}" for i in range(300)))
    assert hasher.estimate(a, b) < 0.05


def test_cjk_text_is_shingled_by_character() -> None:
    hasher = MinHasher()
    text = "近似重复检测是搜索引擎、网页抓取和数据清洗中的常见任务。" * 3
    assert hasher.estimate(hasher.sketch(text), hasher.sketch(text + "新增")) > 0.8


def test_estimate_many_matches_estimate() -> None:
    hasher = MinHasher(num_perm=64)
    docs = ["alpha beta gamma delta", "alpha beta gamma epsilon", "zeta eta theta iota"]
    sketches = hasher.sketch_many(docs)
    many = hasher.estimate_many(sketches[0], sketches)
    assert [hasher.estimate(sketches[0], s) for s in sketches] == pytest.approx(many.tolist())
    assert len(hasher.estimate_many(sketches[0], [])) == 0


def test_bad_arguments() -> None:
    with pytest.raises(InvalidArgument):
        MinHasher(bits=4)
    with pytest.raises(InvalidArgument):
        MinHasher(num_perm=8)
    with pytest.raises(InvalidType):
        MinHasher(num_perm=True)
    hasher = MinHasher(num_perm=64)
    with pytest.raises(InvalidArgument):
        hasher.estimate(b"x", hasher.sketch("a b c"))
    with pytest.raises(InvalidType):
        hasher.sketch(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidType):
        hasher.sketch(["a", 1])  # type: ignore[list-item]
    assert "perm=64" in hasher.describe()
