"""Stored forms: signed 64-bit decimals for intsets, netstring id lists."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_redis.codec import _parse_any, decode_fp, decode_ids, encode_fp, encode_ids, parse_fingerprint
from simhash_redis.errors import InvalidArgument
from simhash_redis.store import candidates


@given(fp=st.integers(0, 2**64 - 1))
def test_fp64_round_trip_fits_int64(fp: int) -> None:
    raw = encode_fp(fp, 64)
    assert -(2**63) <= int(raw) < 2**63
    assert decode_fp(raw, 64) == fp


@given(fp=st.integers(0, 2**128 - 1))
def test_fp128_round_trip(fp: int) -> None:
    assert decode_fp(encode_fp(fp, 128), 128) == fp


def test_edges() -> None:
    assert encode_fp(0, 64) == b"0"
    assert encode_fp(2**64 - 1, 64) == b"-1"
    assert encode_fp(2**63, 64) == b"-9223372036854775808"


@given(ids=st.lists(st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20)))
def test_ids_round_trip(ids: list[str]) -> None:
    assert decode_ids(encode_ids(ids)) == ids


def test_ids_readable() -> None:
    assert encode_ids(["doc-1", "d:2", "新闻"]) == "5:doc-13:d:26:新闻".encode()


@given(
    text=st.one_of(
        st.text(alphabet="0123456789abcdefABCDEFxX -_+\n", max_size=40),
        st.integers(min_value=0, max_value=2**130).map(lambda v: format(v, "x")),
    ),
    f=st.sampled_from([64, 32, 128, 8]),
    base=st.sampled_from(["auto", "hex", "dec"]),
)
def test_parse_fingerprint_short_way(text: str, f: int, base: str) -> None:
    """Plain hex digits take a short way through parse_fingerprint: the same value or error as the
    general one."""

    def outcome(parse: Callable[[str, int, str], int]) -> int | str:
        try:
            return parse(text, f, base)
        except InvalidArgument as exc:
            return str(exc)

    assert outcome(parse_fingerprint) == outcome(_parse_any)


@pytest.mark.parametrize(
    "member",
    [b"-18446744073709551616", b"99999999999999999999", b"9223372036854775808", b"-9223372036854775809"],
)
def test_the_filter_believes_no_saturated_number(member: bytes) -> None:
    """numpy reads a number beyond int64 as one of its bounds: no filter may."""
    replies = [[member, b"9223372036854775807", b"-9223372036854775808"] + [b"%d" % i for i in range(60)]]
    for fps in ([0], [0, 5]):
        many = replies * len(fps)
        expected = candidates.pure_hits(fps, many, 1, 64, 64)
        assert candidates.hits(fps, many, 1, 64, 64) == expected


def test_the_filter_reads_a_bound_beside_an_empty_table_set() -> None:
    """A stored 2**63 (int64's bound, as stored) and an empty table set in one query: found, not refused."""
    replies = [[], [b"-9223372036854775808", b"0"], [], [b"9223372036854775807"]]
    for fps in ([0], [0, 1 << 63]):
        many = replies * len(fps)
        found = candidates.pure_hits(fps, many, 4, 64, 64)
        assert candidates.hits(fps, many, 4, 64, 64) == found
        assert (1 << 63, 1) in found[0].values()


def test_the_filter_raises_on_an_unhashable_member() -> None:
    # The pure filter and the compiled kernel hash every member, near or not.
    replies = [[bytearray(b"5"), *[b"%d" % (1 << 40 | i) for i in range(60)]]]
    for filter_ in (candidates.pure_hits, candidates.hits):
        with pytest.raises(TypeError, match="unhashable"):
            filter_([0], replies, 1, 0, 64)
