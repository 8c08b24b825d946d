"""Verified mode's default sketches (`BandedOddSketcher`): the stored and query forms, and estimates
across the odd sketch's sampling levels."""

from __future__ import annotations

import pytest

from simhash_redis.errors import InvalidArgument, InvalidType
from simhash_redis.fingerprinting import BandedOddSketcher, MinHasher, OddSketcher
from simhash_redis.fingerprinting.banded_odd import BAND_VALUES
from simhash_redis.fingerprinting.odd_sketch import SKETCH_BYTES

_SKETCHER = BandedOddSketcher()


def _words(prefix: str, count: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def test_the_forms() -> None:
    text = _words("a", 300)
    query = _SKETCHER.sketch(text)
    assert len(query) == _SKETCHER.query_bytes == BAND_VALUES + 3 * SKETCH_BYTES
    stored = _SKETCHER.stored(query)
    assert stored == _SKETCHER.stored_sketch(text) and len(stored) == _SKETCHER.sketch_bytes == 160
    # The band values are a 32-value MinHash's, from byte 0; the odd sketch at the text's own level next.
    assert stored[:BAND_VALUES] == MinHasher(BAND_VALUES, 8).sketch(text)
    assert stored[BAND_VALUES:] == OddSketcher().sketch(text)
    # A short text keeps no other level: nothing near it is stored at another.
    assert query[BAND_VALUES + SKETCH_BYTES :] == bytes(2 * SKETCH_BYTES)
    assert _SKETCHER.estimate(query, stored) == 1.0
    assert _SKETCHER.sketch_many([text, _words("b", 10)])[0] == query
    assert _SKETCHER.describe() == "odd;bits=1008;n=3;seed=0"


@pytest.mark.parametrize(("shorter", "longer"), [(1000, 1100), (700, 1250), (1900, 2200)])
def test_a_near_pair_across_levels_is_compared_both_ways(shorter: int, longer: int) -> None:
    # Documents of more than 1,024 distinct shingles are sketched at a sampling level of their own; a
    # query carries its sketch a level below and above, so the stored document's level is always there.
    a, b = _words("w", shorter), _words("w", longer)
    qa, qb = _SKETCHER.sketch(a), _SKETCHER.sketch(b)
    levels = {OddSketcher.size_and_level(q[BAND_VALUES : BAND_VALUES + SKETCH_BYTES])[1] for q in (qa, qb)}
    exact = (shorter - 2) / (longer - 2)
    for query, other in ((qa, qb), (qb, qa)):
        estimate = _SKETCHER.estimate(query, _SKETCHER.stored(other))
        assert estimate == pytest.approx(exact, abs=0.08), (levels, estimate, exact)
    assert len(levels) == 2 or shorter == 1900  # the first two pairs straddle a level


def test_levels_too_far_apart_estimate_zero() -> None:
    small, large = _SKETCHER.sketch(_words("w", 300)), _SKETCHER.sketch(_words("w", 5000))
    assert _SKETCHER.estimate(small, _SKETCHER.stored(large)) == 0.0


def test_wrong_lengths_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        _SKETCHER.estimate_many(_SKETCHER.sketch("a b c"), [b"x" * 100])


def test_a_few_pairs_and_many_give_the_same_floats() -> None:
    # Up to NATIVE_PAIRS a lookup's candidates are estimated pair by pair in the compiled core, past it
    # in numpy: one estimate either way.
    query = _SKETCHER.sketch(_words("w", 1000))
    stored = [_SKETCHER.stored_sketch(_words("w", n)) for n in range(900, 1300, 6)]
    assert len(stored) > 64
    many = _SKETCHER.estimate_many(query, stored).tolist()
    few = [_SKETCHER.estimate_many(query, [one])[0] for one in stored]
    assert many == few and max(many) > 0.9


@pytest.mark.parametrize(
    "sketcher", [BandedOddSketcher(), MinHasher(), OddSketcher()], ids=["banded", "minhash", "odd"]
)
@pytest.mark.parametrize("docs", ["one text", b"one text", {"a": 1.0}, None, 5])
def test_sketch_many_refuses_what_is_not_many_documents(sketcher: object, docs: object) -> None:
    # A text's characters were each sketched as a document.
    with pytest.raises(InvalidType, match="iterable of documents"):
        sketcher.sketch_many(docs)  # type: ignore[attr-defined]


def test_a_sketch_that_is_not_bytes_is_refused_as_such() -> None:
    query = _SKETCHER.sketch("a b c d")
    for call in (
        lambda: _SKETCHER.estimate(query, 5),
        lambda: _SKETCHER.estimate(5, query),
        lambda: _SKETCHER.estimate_many(query, [5]),
        lambda: _SKETCHER.estimate_many(None, [query]),
        lambda: MinHasher().estimate(1, 2),
    ):
        with pytest.raises(InvalidType, match="must be bytes"):
            call()  # type: ignore[no-untyped-call]
    with pytest.raises(InvalidArgument, match="got 10"):
        _SKETCHER.estimate_many(query[:10], [_SKETCHER.stored(query)])
