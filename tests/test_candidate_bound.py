"""The bound on a verified lookup's band candidates (`max_candidates`): pages built from one template."""

from __future__ import annotations

import random
import struct
from fractions import Fraction

import numpy as np
import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.cluster import RedisCluster

from simhash_redis import InvalidArgument, SimhashIndex, VerifiedIndex, VerifiedMatch, codec
from simhash_redis.store import reads as reads_module
from simhash_redis.store.candidates import _first, top_band_hits
from tests.test_verified_mode import _VOCAB, article, one_word_edit


def _oracle(
    found: dict[bytes, tuple[int, int]], tabled: int, fp: int, values: list[bytes | None], cap: int
) -> dict[bytes, tuple[int, int]]:
    """`top_band_hits` by brute force: each band member's shared bands weighed (1 / the band's members),
    half the cap kept by those weights, the rest by distance (of those not among the table hits)."""
    exact: dict[int, Fraction] = {}
    for value in values:
        members = struct.unpack(f"<{len(value or b'') // 8}q", value or b"")
        for member in members:
            exact[member] = exact.get(member, Fraction(0)) + Fraction(1, len(members))
    shared = {member: round(float(weight), 9) for member, weight in exact.items()}

    def distance(member: int) -> int:
        return ((member & (2**64 - 1)) ^ fp).bit_count()

    table = dict(list(found.items())[:tabled])
    by_bands = sorted(shared, key=lambda m: (-shared[m], distance(m), m))
    by_distance = sorted(shared, key=lambda m: (distance(m), -shared[m], m))
    kept: list[bytes] = []
    for ranked, limit in ((by_bands, (cap + 1) // 2), (by_distance, cap)):
        for member in ranked:
            raw = b"%d" % member
            if len(kept) < limit and raw not in table and raw in found and raw not in kept:
                kept.append(raw)
    return {raw: found[raw] for raw in kept}


@pytest.mark.parametrize("seed", range(40))
def test_the_band_candidates_kept_are_half_by_rare_bands_shared_half_by_distance(seed: int) -> None:
    rng = random.Random(seed)
    fp = rng.getrandbits(64)
    pool = [rng.getrandbits(64) - 2**63 for _ in range(rng.randint(1, 60))]
    # Few distinct distances and counts: ties decided by the later keys.
    pool += [(fp ^ (1 << rng.randrange(64))) - 2**63 for _ in range(10)]
    values: list[bytes | None] = []
    for _ in range(8):
        members = sorted(set(rng.sample(pool, rng.randint(0, len(pool)))))
        values.append(struct.pack(f"<{len(members)}q", *members) if members else None)
    members_all = {m for value in values if value for m in struct.unpack(f"<{len(value) // 8}q", value)}
    tabled_members = rng.sample(sorted(members_all), min(len(members_all), rng.randint(0, 3)))
    found = {b"%d" % m: ((m & (2**64 - 1)), ((m & (2**64 - 1)) ^ fp).bit_count()) for m in tabled_members}
    tabled = len(found)
    found[b"%d" % 12345] = (12345, (12345 ^ fp).bit_count())  # a table hit in no band
    tabled += 1
    for m in sorted(members_all):
        found.setdefault(b"%d" % m, ((m & (2**64 - 1)), ((m & (2**64 - 1)) ^ fp).bit_count()))
    for cap in (1, 2, 5, 30, 1000):
        table = dict(list(found.items())[:tabled])
        assert top_band_hits(table, fp, values, cap, 64) == _oracle(found, tabled, fp, values, cap)


def _site(client: redis.Redis, name: str, pages: int, versions: int = 0) -> list[tuple[str, str]]:
    """Pages of a 400-word template and 150 words of their own, and versions of one story (each a
    few words away from the first), stored in a verified index."""
    template = article(10**6, 400) + " "
    items = [(f"p{i}", template + article(i, 150)) for i in range(pages)]
    story = template + article(99, 150)
    for v in range(versions):
        text = story
        for edit in range(4):
            text = one_word_edit(text, 1000 * v + edit)
        items.append((f"v{v}", text))
    VerifiedIndex(SimhashIndex(client, name)).add_many(items)
    return items


def test_a_capped_lookup_finds_what_the_unbounded_one_finds_among_template_pages(
    redis_client: redis.Redis,
) -> None:
    items = _site(redis_client, "tpl", 400)
    capped = VerifiedIndex(SimhashIndex(redis_client, "tpl"), max_candidates=4)
    unbounded = VerifiedIndex(SimhashIndex(redis_client, "tpl"), max_candidates=None)
    template = article(10**6, 400) + " "
    queries = [template + article(10**5 + i, 150) for i in range(10)]
    queries += [one_word_edit(text, n) for n, (_, text) in enumerate(items[:40])]
    assert capped.near_many(queries) == unbounded.near_many(queries)
    for n, (doc_id, _) in enumerate(items[:40]):
        assert doc_id in {m.id for m in capped.near_many([queries[10 + n]])[0]}


def test_a_cluster_larger_than_the_cap_shows_its_first_members_and_add_if_new_still_finds_one(
    redis_client: redis.Redis,
) -> None:
    items = _site(redis_client, "wire", 200, versions=30)
    cap = 2
    capped = VerifiedIndex(SimhashIndex(redis_client, "wire"), max_candidates=cap)
    unbounded = VerifiedIndex(SimhashIndex(redis_client, "wire"), max_candidates=None)
    query = one_word_edit(items[-1][1], 7)
    every = unbounded.near(query)
    few = capped.near(query)
    k = capped.index.k
    assert len([m for m in every if m.distance > k]) > cap  # the cluster is larger than the cap
    assert set(few) <= set(every)
    assert {m for m in every if m.distance <= k} <= set(few)  # table hits are never capped
    assert len([m for m in few if m.distance > k]) <= cap
    # One match is all add_if_new needs: the candidates sharing the rarest bands, or nearest, come first.
    found = capped.add_if_new("new", query)
    assert found is not None and found.id.startswith("v") and found.jaccard >= capped.threshold
    assert capped.sketch_of("new") is None


def test_max_candidates_refuses_what_is_not_a_positive_int(redis_client: redis.Redis) -> None:
    index = VerifiedIndex(SimhashIndex(redis_client, "cap"))
    assert index.max_candidates == 256  # docs/quality.md measures what it costs
    for bad in (0, -1, 2.5, True, "10", np.int64(0)):
        with pytest.raises(InvalidArgument, match="max_candidates"):
            index.max_candidates = bad  # type: ignore[assignment]
    index.max_candidates = np.int64(8)
    assert index.max_candidates == 8 and type(index.max_candidates) is int
    index.max_candidates = None
    assert index.max_candidates is None


def test_a_refused_max_candidates_pins_no_mode(redis_client: redis.Redis) -> None:
    plain = SimhashIndex(redis_client, "refused")
    meta = redis_client.hgetall(plain.keys.meta)
    for bad in (0, -3, False):
        with pytest.raises(InvalidArgument, match="max_candidates"):
            VerifiedIndex(plain, max_candidates=bad)
    assert redis_client.hgetall(plain.keys.meta) == meta  # still plain: a plain index can be verified later
    assert VerifiedIndex(plain, max_candidates=np.int64(5)).max_candidates == 5


def _edit(text: str, words: int, seed: int) -> str:
    """`words` of the page's own 150 words (after the 400 of the template) replaced."""
    split = text.split()
    rng = random.Random(seed)
    for pos in rng.sample(range(400, len(split)), words):
        split[pos] = rng.choice(_VOCAB)
    return " ".join(split)


@pytest.mark.parametrize("seed", [38, 45])
def test_add_if_new_judges_every_candidate_whatever_the_cap(redis_client: redis.Redis, seed: int) -> None:
    items = _site(redis_client, "judged", 300)
    query = _edit(items[seed][1], 20, seed)  # Jaccard about 0.83 to its page
    capped = VerifiedIndex(SimhashIndex(redis_client, "judged"), max_candidates=8)
    default = VerifiedIndex(SimhashIndex(redis_client, "judged"))
    assert [m.id for m in default.near(query)] == [f"p{seed}"]
    # One of the few pages (3 of 120 seeds) that 8 others of the template outrank, by bands and by distance.
    assert capped.near(query) == []
    for index, doc_id in ((capped, "capped"), (default, "default")):
        found = index.add_if_new(doc_id, query)
        assert found is not None and found.id == f"p{seed}" and found.jaccard >= index.threshold
        assert index.sketch_of(doc_id) is None
    found_many = capped.add_if_new_many([("many", query)])[0]
    assert found_many is not None and found_many.id == f"p{seed}"
    sketch = capped.hasher.sketch_many([query])[0]
    unique = capped.add_sketched(["sketched"], [capped.index.fingerprint(query)], [sketch], unique=True)
    assert isinstance(unique[0], VerifiedMatch) and unique[0].id == f"p{seed}"
    assert redis_client.exists(*(redis_client.keys(b"*many*") or [b"none"])) == 0
    assert capped.index.get("many") is None and capped.index.get("sketched") is None


def test_an_index_of_128_bit_fingerprints_reads_every_band_candidate(redis_client: redis.Redis) -> None:
    template = article(10**6, 400) + " "
    items = [(f"p{i}", template + article(i, 150)) for i in range(150)]
    story = template + article(99, 150)
    items += [(f"v{v}", one_word_edit(one_word_edit(story, 2 * v), 2 * v + 1)) for v in range(20)]
    index = VerifiedIndex(SimhashIndex(redis_client, "wide", f=128), max_candidates=2)
    index.add_many(items)
    queries = [template + article(10**5, 150), one_word_edit(story, 7)]
    capped = index.near_many(queries)
    index.max_candidates = None
    assert capped == index.near_many(queries)  # as the docstring says: not capped
    assert len([m for m in capped[1] if m.distance > index.index.k]) > 2


def test_a_band_shared_in_several_periods_counts_once() -> None:
    def packed(*members: int) -> bytes:
        return struct.pack(f"<{len(members)}q", *members)

    fp, near_one, two_bands = 0, 1, 0b1111  # near_one is nearer; two_bands shares two distinct bands
    # Two periods of 2 band tables, period after period: near_one in band 0 of both periods.
    values: list[bytes | None] = [packed(near_one, two_bands), packed(two_bands), packed(near_one), None]
    kept = top_band_hits({}, fp, values, 1, 64, bands=2)
    assert kept == {b"%d" % two_bands: (two_bands, 4)}
    # One period of 4 band tables: near_one shares two bands too, and is nearer.
    assert top_band_hits({}, fp, values, 1, 64) == {b"%d" % near_one: (near_one, 1)}


def test_a_lookup_decodes_the_band_values_of_the_queries_not_capped_only(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = _site(redis_client, "light", 200)
    template = article(10**6, 400) + " "
    index = VerifiedIndex(SimhashIndex(redis_client, "light"), max_candidates=2)
    queries = [template + article(10**5, 150), article(10**4, 150), one_word_edit(items[4][1], 4)]
    one_by_one = [index.near(query) for query in queries]
    decoded: list[list[bytes | None]] = []
    original = codec.unpack_fps_many

    def spy(values: list[bytes | None], f: int) -> list[list[bytes]]:
        decoded.append(list(values))
        return original(values, f)

    monkeypatch.setattr(reads_module, "band_hits", lambda *args: None)  # the general path decodes
    monkeypatch.setattr(reads_module, "unpack_fps_many", spy)
    assert index.near_many(queries) == one_by_one
    per = len(decoded[0]) // len(queries)
    assert not any(decoded[0][:per])  # the template page's values: capped, so never decoded


def test_a_batch_bounds_each_query_as_a_single_lookup_does_on_either_engine(
    redis_client: redis.Redis, either_engine: str
) -> None:
    items = _site(redis_client, f"batch-{either_engine}", 300, versions=12)
    template = article(10**6, 400) + " "
    # Over the cap (the template's pages), under it (text of no site), and a version of the story: a
    # batch of more queries than the numpy filter's threshold, in one order and the other.
    queries = [template + article(10**5 + i, 150) for i in range(8)]
    queries += [article(10**4 + i, 150) for i in range(6)]
    queries += [one_word_edit(text, n) for n, (_, text) in enumerate(items[-6:])]
    queries += queries[::-1]
    capped = VerifiedIndex(SimhashIndex(redis_client, f"batch-{either_engine}"), max_candidates=3)
    one_by_one = [capped.near(query) for query in queries]
    assert capped.near_many(queries) == one_by_one
    for found in one_by_one:
        assert len([m for m in found if m.distance > capped.index.k]) <= 3
    assert all(found for found in one_by_one[14:20])  # each version finds its story


def test_an_index_with_a_retention_window_bounds_its_lookups_too(redis_client: redis.Redis) -> None:
    index = VerifiedIndex(SimhashIndex(redis_client, "bound-window", retention="7d"))
    template = article(10**6, 400) + " "
    items = [(f"p{i}", template + article(i, 150)) for i in range(200)]
    index.add_many(items)
    queries = [template + article(10**5, 150)]
    queries += [one_word_edit(text, n) for n, (_, text) in enumerate(items[:5])]
    index.max_candidates = None
    every = index.near_many(queries)
    index.max_candidates = 2
    assert index.near_many(queries) == every
    for (doc_id, _), found in zip(items[:5], every[1:], strict=True):
        assert doc_id in {m.id for m in found}


def test_a_cluster_bounds_its_lookups_as_one_server_does(redis_cluster_client: RedisCluster) -> None:
    template = article(10**6, 400) + " "
    items = [(f"p{i}", template + article(i, 150)) for i in range(150)]
    index = VerifiedIndex(SimhashIndex(redis_cluster_client, "bound-cluster"), max_candidates=None)
    index.add_many(items)
    queries = [template + article(10**5, 150)]
    queries += [one_word_edit(text, n) for n, (_, text) in enumerate(items[:5])]
    every = index.near_many(queries)
    index.max_candidates = 2
    assert index.near_many(queries) == every == [index.near(query) for query in queries]
    for (doc_id, _), found in zip(items[:5], every[1:], strict=True):
        assert doc_id in {m.id for m in found}
    found = index.add_if_new("again", queries[1])
    assert found is not None and found.id == "p0"


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(-5, 5)), min_size=1, max_size=40),
    st.integers(1, 45),
)
def test_the_first_few_are_those_a_full_sort_puts_first(rows: list[tuple[int, int, int]], count: int) -> None:
    # Few distinct values: the partition's edge falls among ties, which the later keys decide.
    primary, second, third = (np.array(column, dtype=np.float64) for column in zip(*rows, strict=True))
    expected = np.lexsort((third, second, primary))[:count]
    assert _first(count, primary, second, third).tolist() == expected.tolist()


def test_bands_shared_equally_in_exact_arithmetic_leave_the_tie_to_distance() -> None:
    # 1/2 + 1/3 + 1/6 and 1/6 + 1/3 + 1/2 differ in their last bit as floats.
    near, far = 0b1, 0xFF
    fillers = iter(range(1000, 2000))

    def band(*members: int, size: int) -> bytes:
        padded = [*members, *(next(fillers) for _ in range(size - len(members)))]
        return struct.pack(f"<{size}q", *padded)

    values: list[bytes | None] = [
        band(near, size=2), band(near, size=3), band(near, size=6),
        band(far, size=6), band(far, size=3), band(far, size=2),
    ]  # fmt: skip
    assert top_band_hits({}, 0, values, 1, 64) == {b"1": (near, 1)}
