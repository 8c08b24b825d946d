"""More layouts proven exact on data, readable table keys, and layout mismatches refused by name."""

from __future__ import annotations

import itertools
import re

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import ConfigurationMismatch, Layout, SimhashIndex
from tests.test_index_property import brute_force, check, clustered

EXTRA = {
    "f32-k3-permuted-5": Layout.permuted(32, 3, blocks=5),
    "f32-k3-permuted-6": Layout.permuted(32, 3, blocks=6),
    "f64-k2-permuted-5": Layout.permuted(64, 2, blocks=5),
    "f64-k3-permuted-7": Layout.permuted(64, 3, blocks=7),
    "f128-k3-permuted-5": Layout.permuted(128, 3, blocks=5),
    "f128-k4-permuted-6": Layout.permuted(128, 4, blocks=6),
    # Not a permuted layout: k=1 needs only one table clear of the single differing block.
    "f64-k1-paired": Layout(f=64, k=1, blocks=(16, 16, 16, 16), tables=((0, 1), (2, 3))),
}


@pytest.mark.parametrize("name", sorted(EXTRA))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_near_equals_brute_force(redis_client: redis.Redis, name: str, data: st.DataObject) -> None:
    layout = EXTRA[name]
    spread = layout.k + 2
    check(
        redis_client, layout, data.draw(clustered(layout.f, spread)), data.draw(clustered(layout.f, spread))
    )


def _low_bit(layout: Layout, block: int) -> int:
    return 1 << layout.offsets[block]


@pytest.mark.parametrize(
    "layout",
    [Layout.permuted(64, 3, blocks=6), Layout.permuted(32, 3, blocks=6), Layout.permuted(128, 3, blocks=5)],
    ids=lambda layout: f"f{layout.f}-{len(layout.tables)}tables",
)
def test_every_choice_of_k_differing_blocks_is_found(redis_client: redis.Redis, layout: Layout) -> None:
    """The worst case of the exactness argument: k bits flipped in k different blocks, every choice."""
    index = SimhashIndex(redis_client, f"worst{layout.f}", layout=layout)
    base = int("10" * (layout.f // 2), 2)
    variants = {
        f"v{'-'.join(map(str, chosen))}": base ^ sum(_low_bit(layout, b) for b in chosen)
        for chosen in itertools.combinations(range(len(layout.blocks)), layout.k)
    }
    index.add_many(variants.items())
    assert index.near(base) == brute_force(variants, base, layout.k)
    assert len(index.near(base)) == len(variants)


def test_twenty_table_keys_are_readable(redis_client: redis.Redis) -> None:
    layout = Layout.permuted(64, 3, blocks=6)
    index = SimhashIndex(redis_client, "x", layout=layout)
    fp = 0x0123_4567_89AB_CDEF
    index.add("doc", fp)
    pattern = re.compile(rb"^simhash:x:t(\d+):([0-9a-f]+)$")
    tables = {}
    for key in redis_client.scan_iter(match="simhash:x:t*"):
        match = pattern.match(key)
        assert match, key
        tables[int(match.group(1))] = match.group(2).decode()
    assert sorted(tables) == list(range(20))
    expected = layout.keys_of(fp)
    for t, text in tables.items():
        assert len(text) == -(-layout.key_bits[t] // 4)  # fixed width: ceil(bits / 4) hex digits
        assert int(text, 16) == expected[t]
    # Table 19 is blocks 3+4+5 (11+10+10 bits): the low 31 bits of the fingerprint.
    assert layout.tables[19] == (3, 4, 5)
    assert tables[19] == format(fp & (2**31 - 1), "08x")
    assert redis_client.exists(f"simhash:x:t19:{fp & (2**31 - 1):08x}")


@pytest.mark.parametrize(
    ("stored", "asked"),
    [
        (Layout.permuted(64, 3, blocks=6), Layout.pigeonhole(64, 3)),
        (Layout.pigeonhole(64, 3), Layout.permuted(64, 3, blocks=6)),
        (Layout.permuted(64, 3, blocks=6), Layout.permuted(64, 3, blocks=5)),
    ],
)
def test_other_layout_is_refused_by_name(redis_client: redis.Redis, stored: Layout, asked: Layout) -> None:
    SimhashIndex(redis_client, "shared", layout=stored).add("a", 1)
    with pytest.raises(ConfigurationMismatch) as info:
        SimhashIndex(redis_client, "shared", layout=asked)
    message = str(info.value)
    assert "'shared'" in message
    assert f"layout={stored.to_meta()}" in message
    assert f"layout={asked.to_meta()}" in message
    # Opening without a layout adopts the stored one.
    assert SimhashIndex(redis_client, "shared").layout == stored
