"""Inputs a review found mishandled: a generator of documents on the pure engine, a weight too large for a
float, a MinHasher's permutations changed in place (the compiled core keeps its own copy)."""

from __future__ import annotations

import numpy as np
import pytest

from simhash_redis.errors import InvalidArgument
from simhash_redis.fingerprinting import BandedOddSketcher, MinHasher, Scheme
from simhash_redis.fingerprinting.banded_odd import storing

DOCS = ["the quick brown fox jumps over the lazy dog", "a b c d e f g"]


@pytest.mark.usefixtures("either_engine")
def test_banded_sketches_of_a_generator_are_those_of_a_list() -> None:
    hasher = BandedOddSketcher()
    assert hasher.sketch_many(iter(DOCS)) == hasher.sketch_many(DOCS)
    stored = storing(hasher)
    assert stored.sketch_many(iter(DOCS)) == stored.sketch_many(DOCS)


@pytest.mark.usefixtures("either_engine")
@pytest.mark.parametrize("weight", [10**400, -(10**400)])
def test_a_weight_past_a_floats_range_is_an_invalid_argument(weight: int) -> None:
    with pytest.raises(InvalidArgument, match="weight must be finite"):
        Scheme().fingerprint({"a": weight})


def test_a_minhashers_permutations_cannot_be_changed_in_place() -> None:
    hasher = MinHasher(num_perm=16)
    with pytest.raises(ValueError, match="read-only"):
        hasher.a[0] = np.uint64(12345)
    with pytest.raises(ValueError, match="read-only"):
        hasher.b[0] = np.uint64(12345)
