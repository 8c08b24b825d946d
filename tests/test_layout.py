"""Layouts: exactness is checked on construction, keys come from the right bits, meta round-trips."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_redis.errors import IndexCorrupted, InvalidArgument
from simhash_redis.store.layout import Layout


def bits_of(fp: int, f: int) -> str:
    return format(fp, f"0{f}b")


def naive_keys(layout: Layout, fp: int) -> list[int]:
    """Table keys by slicing the bit string: an independent statement of the block rule."""
    s = bits_of(fp, layout.f)
    starts = list(itertools.accumulate((0, *layout.blocks)))
    pieces = [s[starts[b] : starts[b + 1]] for b in range(len(layout.blocks))]
    return [int("".join(pieces[b] for b in table), 2) for table in layout.tables]


@pytest.mark.parametrize(("f", "k"), [(64, 3), (64, 0), (32, 2), (128, 4), (64, 7)])
def test_pigeonhole_has_k_plus_one_tables(f: int, k: int) -> None:
    layout = Layout.pigeonhole(f, k)
    assert len(layout.tables) == k + 1
    assert sum(layout.blocks) == f
    assert max(layout.blocks) - min(layout.blocks) <= 1


def test_manku_20_tables() -> None:
    layout = Layout.permuted(64, 3, blocks=6)
    assert layout.blocks == (11, 11, 11, 11, 10, 10)
    assert len(layout.tables) == 20
    assert set(layout.key_bits) == {31, 32, 33}


def test_inexact_layout_refused() -> None:
    with pytest.raises(InvalidArgument, match="not exact"):
        Layout(f=64, k=2, blocks=(16, 16, 16, 16), tables=((0,), (1,)))


@pytest.mark.parametrize(
    "bad", [dict(blocks=(30, 30), tables=((0,), (1,))), dict(blocks=(32, 32), tables=((2,),))]
)
def test_malformed_layout_refused(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        Layout(f=64, k=0, **bad)  # type: ignore[arg-type]


def test_k_out_of_range() -> None:
    with pytest.raises(InvalidArgument, match="k must be"):
        Layout.pigeonhole(64, 64)
    with pytest.raises(InvalidArgument, match="blocks must be"):
        Layout.permuted(64, 3, blocks=3)


@given(fp=st.integers(0, 2**64 - 1), which=st.sampled_from([(3, None), (3, 6), (2, 5), (1, 2)]))
def test_keys_match_bit_slices(fp: int, which: tuple[int, int | None]) -> None:
    k, blocks = which
    layout = Layout.pigeonhole(64, k) if blocks is None else Layout.permuted(64, k, blocks=blocks)
    assert layout.keys_of(fp) == naive_keys(layout, fp)


@given(fp=st.integers(0, 2**128 - 1))
def test_keys_128(fp: int) -> None:
    layout = Layout.pigeonhole(128, 3)
    assert layout.keys_of(fp) == naive_keys(layout, fp)


def test_meta_round_trip() -> None:
    for layout in (Layout.pigeonhole(64, 3), Layout.permuted(64, 3, blocks=6), Layout.pigeonhole(32, 1)):
        assert Layout.from_meta(layout.to_meta(), layout.f, layout.k) == layout


@pytest.mark.parametrize("text", ["", "blocks=1;tables=0", "blocks=64;tables=9", "garbage"])
def test_bad_meta(text: str) -> None:
    with pytest.raises(IndexCorrupted):
        Layout.from_meta(text, 64, 0)
