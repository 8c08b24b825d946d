"""A single verified lookup reads its band members' entries with its band values (lua/band_entries.lua),
in one round trip: the stored forms the script writes, the same matches and estimates as the two round
trips without it (template pages among them), and a server that forgot the script."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.codec import encode_fp, pack_fps
from simhash_redis.store import reads as reads_module
from simhash_redis.store.keys import KeySchema
from simhash_redis.store.layout import Layout
from simhash_redis.store.store import BAND_ENTRIES
from simhash_redis.transport import SEND, Steps

_names = itertools.count()
_VOCAB = [f"word{i}" for i in range(3000)]
_EXTREMES = [0, 1, 2**32 - 1, 2**32, 2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(words))


def _edit(text: str, words: int, rng: random.Random) -> str:
    out = text.split()
    for _ in range(words):
        out[rng.randrange(len(out))] = rng.choice(_VOCAB)
    return " ".join(out)


def _entries(client: redis.Redis, fps: list[int], buckets: int, bound: int = 32) -> list[Any]:
    """The script's reply for one band value listing `fps`, each stored with an id in the map bucket
    `KeySchema.fp_bucket` names for it."""
    keys = KeySchema("sr", f"e{next(_names)}", Layout.pigeonhole(64, 3), buckets)
    stored = [encode_fp(fp, 64) for fp in fps]
    for one in stored:
        client.hset(keys.fp_bucket(one), mapping={one: b"1:" + one[-1:], keys.sketch_field(one): b"s"})
    band = keys.band_form(0).key(5)
    client.hset(band, b"v", pack_fps(stored, 64))
    args = [b"v", keys.fp_form.prefix, buckets, bound, b"own"]
    reply: list[Any] = client.evalsha(BAND_ENTRIES.sha, 1, band, *args)  # type: ignore[no-untyped-call]
    return reply


@pytest.fixture
def loaded(any_client: redis.Redis) -> redis.Redis:
    """A real server and fakeredis (whose Lua has integers), the script loaded."""
    any_client.script_load(BAND_ENTRIES.source)
    return any_client


def test_each_fingerprint_is_written_as_encode_fp_writes_it_and_found_in_its_bucket(
    loaded: redis.Redis,
) -> None:
    # Signed extremes and the edges of the doubles Lua computes with (2^53 + 1 is the first they round).
    for buckets in (1, 3, 1000, 2**17, 2**30 - 1, 2**30):
        reply = _entries(loaded, _EXTREMES, buckets)
        assert reply[0] == pack_fps([encode_fp(fp, 64) for fp in _EXTREMES], 64)
        stored = [encode_fp(fp, 64) for fp in _EXTREMES]
        assert reply[1:] == [part for one in stored for part in (one, b"1:" + one[-1:], b"s")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fps=st.lists(st.integers(0, 2**64 - 1) | st.sampled_from(_EXTREMES), min_size=1, max_size=6),
    buckets=st.integers(1, 2**30),
)
def test_any_fingerprint_and_bucket_count(loaded: redis.Redis, fps: list[int], buckets: int) -> None:
    reply = _entries(loaded, fps, buckets)
    distinct = list(dict.fromkeys(encode_fp(fp, 64) for fp in fps))
    assert reply[1:] == [part for one in distinct for part in (one, b"1:" + one[-1:], b"s")]


def test_band_values_listing_more_than_the_bound_come_alone(loaded: redis.Redis) -> None:
    fps = list(range(1, 10))
    assert _entries(loaded, fps, 64, bound=9)[1:] != []
    assert _entries(loaded, fps, 64, bound=8) == [pack_fps([encode_fp(fp, 64) for fp in fps], 64)]


def _round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The writes of each lookup made from here on, one entry per lookup."""
    original = reads_module.Reads.lookup
    counts: list[int] = []

    def counting(self: reads_module.Reads, *args: Any, **kwargs: Any) -> Steps[Any]:
        steps, reply, sends = original(self, *args, **kwargs), None, 0
        try:
            while True:
                kind, arg = steps.send(reply)
                sends += kind is SEND
                reply = yield kind, arg
        except StopIteration as done:
            counts.append(sends)
            return done.value

    monkeypatch.setattr(reads_module.Reads, "lookup", counting)
    return counts


def _corpus(seed: int) -> tuple[list[tuple[str, str]], list[str]]:
    """Articles, pages of two templates (whose band values list tens of fingerprints), and queries: edits
    and copies of both, and unrelated texts."""
    rng = random.Random(seed)
    articles = [_text(rng, rng.randrange(40, 200)) for _ in range(120)]
    templates = [_text(rng, 150) for _ in range(2)]
    pages = [_edit(templates[n % 2], rng.randrange(1, 12), rng) for n in range(120)]
    docs = [(f"d{n}", text) for n, text in enumerate(articles + pages)]
    docs += [(f"copy{n}", articles[n]) for n in range(0, 120, 7)]  # exact copies under other ids
    stored = articles + pages
    queries = [_edit(rng.choice(stored), rng.randrange(0, 4), rng) for _ in range(70)]
    queries += [_text(rng, 80) for _ in range(10)] + templates
    return docs, queries


@pytest.mark.parametrize(("seed", "buckets"), [(1, 64), (2, 1000)])
def test_a_single_lookup_finds_what_two_round_trips_find(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, seed: int, buckets: int
) -> None:
    docs, queries = _corpus(seed)
    verified = VerifiedIndex(SimhashIndex(redis_client, f"one{next(_names)}", id_buckets=buckets))
    verified.add_many(docs)
    counts = _round_trips(monkeypatch)
    for cap in (None, 256, 4, 1):
        verified.max_candidates = cap
        for threshold in (0.8, 0.0):
            for query in queries:
                verified._reads.band_entries = True
                scripted = verified.near(query, threshold)
                verified._reads.band_entries = False
                assert verified.near(query, threshold) == scripted
    one_trip = counts[0::2].count(1)
    assert one_trip > counts[1::2].count(1)  # the point of the script: most single lookups take one
    assert counts[1::2].count(1) < len(counts) // 2 <= 2 * one_trip


def test_near_many_and_add_if_new_do_not_run_it(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs, queries = _corpus(3)
    verified = VerifiedIndex(SimhashIndex(redis_client, f"many{next(_names)}", id_buckets=64))
    verified.add_many(docs)
    one_by_one = [verified.near(query) for query in queries[:20]]
    original = reads_module.Reads.lookup
    scripted: list[bool] = []

    def watched(self: reads_module.Reads, *args: Any, **kwargs: Any) -> Steps[Any]:
        steps, reply = original(self, *args, **kwargs), None
        try:
            while True:
                kind, arg = steps.send(reply)
                if kind is SEND:
                    sent = [command for batch in arg for command in batch]
                    scripted.append(any(BAND_ENTRIES.sha in command for command in sent))
                reply = yield kind, arg
        except StopIteration as done:
            return done.value

    monkeypatch.setattr(reads_module.Reads, "lookup", watched)
    assert verified.near_many(queries[:20]) == one_by_one
    assert verified.add_if_new("new", docs[0][1]) is not None
    assert scripted and not any(scripted)
    before = len(scripted)
    verified.near(queries[0])
    assert any(scripted[before:])


def test_a_server_that_forgot_the_script_loads_it_again(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs, queries = _corpus(4)
    verified = VerifiedIndex(SimhashIndex(redis_client, f"forgot{next(_names)}", id_buckets=64))
    verified.add_many(docs)
    expected = [verified.near(query) for query in queries]
    counts = _round_trips(monkeypatch)
    for query, found in zip(queries, expected, strict=True):
        redis_client.script_flush()  # as a restart or a failover to a replica would
        assert verified.near(query) == found
        assert redis_client.script_exists(BAND_ENTRIES.sha) == [True]  # loaded by the lookup
    assert counts.count(1) > len(counts) // 2
