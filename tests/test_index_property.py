"""near() returns exactly what a brute-force scan returns, for every k up to the index's k."""

from __future__ import annotations

import itertools

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import Layout, Match, SimhashIndex, distance

_names = itertools.count()


@st.composite
def clustered(draw: st.DrawFn, f: int, spread: int) -> list[int]:
    """Fingerprints in clusters: a few centres and copies with up to `spread` bits flipped."""
    centres = draw(st.lists(st.integers(0, 2**f - 1), min_size=1, max_size=4))
    centres += draw(st.sampled_from([[], [0], [2**f - 1]]))
    out = []
    for centre in centres:
        for bits in draw(st.lists(st.lists(st.integers(0, f - 1), max_size=spread), max_size=6)):
            fp = centre
            for b in bits:
                fp ^= 1 << b
            out.append(fp)
        out.append(centre)
    return out


def brute_force(stored: dict[str, int], query: int, k: int) -> list[Match]:
    found = [Match(i, fp, distance(fp, query)) for i, fp in stored.items() if distance(fp, query) <= k]
    return sorted(found, key=lambda m: (m.distance, m.id))


LAYOUTS = {
    "pigeonhole-k3": Layout.pigeonhole(64, 3),
    "permuted-20": Layout.permuted(64, 3, blocks=6),
    "permuted-10": Layout.permuted(64, 3, blocks=5),
    "pigeonhole-k5": Layout.pigeonhole(64, 5),
    "pigeonhole-f32": Layout.pigeonhole(32, 3),
}


def check(
    client: redis.Redis,
    layout: Layout,
    stored_fps: list[int],
    queries: list[int],
    retention: str | None = None,
) -> None:
    index = SimhashIndex(client, f"prop{next(_names)}", layout=layout, batch_size=7, retention=retention)
    try:
        stored = {f"id{i}": fp for i, fp in enumerate(stored_fps)}
        index.add_many(stored.items())
        probes = queries + stored_fps[:3]
        for k in range(layout.k + 1):
            got = index.near_many(probes, k=k)
            assert got == [brute_force(stored, q, k) for q in probes]
    finally:
        index.drop()


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_near_equals_brute_force_real(redis_client: redis.Redis, name: str, data: st.DataObject) -> None:
    layout = LAYOUTS[name]
    spread = layout.k + 2
    stored = data.draw(clustered(layout.f, spread))
    queries = data.draw(clustered(layout.f, spread))
    check(redis_client, layout, stored, queries)


@pytest.mark.parametrize("name", ["pigeonhole-k3", "permuted-10"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_near_equals_brute_force_with_a_retention_window(
    redis_client: redis.Redis, name: str, data: st.DataObject
) -> None:
    """Every period's tables read as more tables: still exactly the brute-force result."""
    layout = LAYOUTS[name]
    stored = data.draw(clustered(layout.f, layout.k + 2))
    queries = data.draw(clustered(layout.f, layout.k + 2))
    check(redis_client, layout, stored, queries, retention="1h")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_near_equals_brute_force_fake(fake_client: redis.Redis, data: st.DataObject) -> None:
    layout = LAYOUTS["pigeonhole-k3"]
    check(fake_client, layout, data.draw(clustered(64, 5)), data.draw(clustered(64, 5)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_near_equals_brute_force_128(redis_client: redis.Redis, data: st.DataObject) -> None:
    layout = Layout.pigeonhole(128, 4)
    check(redis_client, layout, data.draw(clustered(128, 6)), data.draw(clustered(128, 6)))


def test_every_distance_up_to_k_is_found(redis_client: redis.Redis) -> None:
    """Exhaustive at the boundary: every way of flipping exactly k bits in the worst-case blocks."""
    layout = Layout.pigeonhole(64, 3)
    index = SimhashIndex(redis_client, "boundary", layout=layout)
    base = 0xF0F0_F0F0_0F0F_0F0F
    # Flip bits spread over all blocks so no table key matches by luck except the guaranteed one.
    candidates = [b for b in range(0, 64, 5)]
    variants = {
        f"v{i}": base ^ sum(1 << b for b in bits)
        for i, bits in enumerate(itertools.combinations(candidates, 3))
    }
    variants["far"] = base ^ 0b1111
    index.add_many(variants.items())
    assert index.near(base) == brute_force(variants, base, 3)
    assert len(index.near(base)) == len(variants) - 1
