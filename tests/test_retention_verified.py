"""A verified index with a retention window, on a real server and on the session's cluster: each
document's sketch and band values live and expire with its period, as its tables and maps do.

As in test_retention.py, checks that depend on the clock are made against the server's clock (TIME),
never against a sleep's length.
"""

from __future__ import annotations

import asyncio
import io
import random
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from simhash_redis import (
    ConfigurationMismatch,
    Outcome,
    Retention,
    SimhashIndex,
    VerifiedIndex,
    VerifiedMatch,
    distance,
)
from simhash_redis.asyncio import AsyncVerifiedIndex
from simhash_redis.jobs.dump import export_index, import_index
from simhash_redis.jobs.stats import collect
from simhash_redis.transport import Backoff
from tests.faultproxy import FaultProxy
from tests.servers import ServerProcess
from tests.test_retention import server_ms, wait_for_next_period
from tests.test_verified_mode import K8, race
from tests.test_verified_one_writer import one_word_edit, page, templated

_WORDS = [f"w{n}" for n in range(400)]


def scan(client: Any, pattern: str) -> list[bytes]:
    if isinstance(client, RedisCluster):
        return list(client.scan_iter(match=pattern.encode(), target_nodes=RedisCluster.PRIMARIES))
    return list(client.scan_iter(pattern.encode()))


#: The longer scenarios' window: 60 periods as in Retention(60, 1), but a round of writes has 4 s to fit
#: in its period and the scenario 4 minutes in the window, which a machine loaded by other jobs needs
#: (1 s periods made a single writer's add-if-new rounds conflict, and documents expire mid-scenario).
ROOMY = Retention(240, 4)
#: Few id buckets: on a cluster count() sums their sizes in each live period (60 of them in most tests
#: here), 2 x 1024 round trips a period with 1024 buckets; these indexes hold tens of documents.
BUCKETS = 64


def windowed(client: Any, name: str, retention: Retention, **options: Any) -> VerifiedIndex:
    return VerifiedIndex(SimhashIndex(client, name, id_buckets=BUCKETS, retention=retention, **options))


#: The cluster's case of a scenario whose other checks on a cluster run in CI (the oracle, the races):
#: minutes of the suite's time, run with `-m slow`.
SLOW_ON_A_CLUSTER = pytest.mark.parametrize(
    "client", ["server", pytest.param("cluster", marks=pytest.mark.slow)], indirect=True
)


@pytest.fixture(params=["server", "cluster"])
def client(request: pytest.FixtureRequest) -> Any:
    name = "redis_client" if request.param == "server" else "redis_cluster_client"
    return request.getfixturevalue(name)


def test_created_verified_with_a_retention_window(redis_url: str, redis_client: redis.Redis) -> None:
    index = VerifiedIndex.from_url(redis_url, "vr", retention="1d")
    meta = redis_client.hgetall(b"simhash:vr:meta")
    assert meta[b"format"] == b"4" and meta[b"retention"] == b"86400;period=14400"
    assert meta[b"verified"] == index.verification.to_meta().encode()
    again = VerifiedIndex.from_url(redis_url, "vr")
    assert (
        again.index.config.retention == index.index.config.retention
        and again.verification == index.verification
    )
    # An empty index created with a retention window is made verified by its first VerifiedIndex.
    plain = SimhashIndex(redis_client, "wr", retention="1d")
    assert VerifiedIndex(plain).index.config.verification is not None
    assert redis_client.hget(b"simhash:wr:meta", b"verified") is not None


def test_a_document_and_its_sketch_are_found_for_the_retention_and_gone_a_period_later(client: Any) -> None:
    index = windowed(client, "short", Retention(2, 1))
    text = page(1)
    before = server_ms(client)
    assert index.add("a", text) is Outcome.ADDED
    after = server_ms(client)
    keys = scan(client, "simhash:short:w*")
    bands = scan(client, "simhash:short:w*:b*")
    assert len(bands) == index.verification.bands  # the band values live in the period too
    assert all(client.pttl(key) > 0 for key in keys)
    edit = one_word_edit(text, 3)
    while True:
        found, sketch = index.near(edit), index.sketch_of("a")
        if server_ms(client) >= before + 2000:
            break
        assert [m.id for m in found] == ["a"] and sketch is not None  # found until t + retention
        time.sleep(0.05)
    while server_ms(client) < after + 3000:  # t + retention + one period
        time.sleep(0.05)
    assert index.near(edit) == [] and index.sketch_of("a") is None and index.index.get("a") is None
    assert index.index.count() == (0, 0) and scan(client, "simhash:short:w*") == []
    assert index.add_if_new("b", edit) is None


@SLOW_ON_A_CLUSTER
def test_rewriting_moves_the_sketch_and_bands_into_the_current_period(client: Any) -> None:
    index = windowed(client, "moves", Retention(60, 1))
    windows = index.index.windows
    assert windows is not None
    text = page(2)
    assert index.add("a", text) is Outcome.ADDED
    first = windows.view().current
    sketch = index.sketch_of("a")
    wait_for_next_period(index.index)
    # The same text again: unchanged, and it lives on from now, its sketch and bands with it.
    assert index.add("a", text) is Outcome.UNCHANGED
    second = windows.view().current
    assert index.sketch_of("a") == sketch is not None
    assert {w: docs for w, docs, _ in windows.counts(sketched=True)}[second] == 1
    assert len(scan(client, f"simhash:moves:w{second}:b*")) == index.verification.bands
    if not isinstance(client, RedisCluster):  # a cluster leaves them to verify --repair (cluster.md)
        assert scan(client, f"simhash:moves:w{first}:b*") == []
    assert [m.id for m in index.near(one_word_edit(text, 5))] == ["a"]
    wait_for_next_period(index.index)
    # Another text: replaced, found by its own near-duplicates only.
    other = page(3)
    assert index.add("a", other) is Outcome.REPLACED
    assert [m.id for m in index.near(one_word_edit(other, 5))] == ["a"]
    assert index.near(one_word_edit(text, 5)) == []
    report = index.index.verify()
    # Band values left in the periods it left: cleaned on a server, garbage on a cluster until a repair.
    assert report.ok and (report.garbage > 0) is isinstance(client, RedisCluster), report.garbage
    assert index.index.verify(repair=True).ok and index.index.verify().garbage == 0
    assert index.index.count() == (1, 1) and index.index.verify().ok
    assert index.remove("a") is True and index.remove("a") is False
    assert index.sketch_of("a") is None and index.index.count() == (0, 0)
    assert index.index.verify().ok


def _text(rng: random.Random, centre: list[str]) -> str:
    words = list(centre)
    for _ in range(rng.choice([0, 1, 2, 5, 20, 60])):
        words[rng.randrange(len(words))] = rng.choice(_WORDS)
    return " ".join(words)


def _oracle(
    verified: VerifiedIndex, stored: dict[str, str], query: str, k: int
) -> list[tuple[str, int, float]]:
    """By brute force over the live documents: those within k of the query or sharing a band value with
    it, confirmed by their sketches (the verified index's rule)."""
    hasher, mode, index = verified.hasher, verified.verification, verified.index
    fp, sketch = index.fingerprint(query), hasher.sketch_many([query])[0]
    span = mode.band_bytes
    out = []
    for doc_id, text in stored.items():
        other = index.fingerprint(text)
        mine = hasher.stored(hasher.sketch_many([text])[0])
        banded = any(
            sketch[i * span : (i + 1) * span] == mine[i * span : (i + 1) * span] for i in range(mode.bands)
        )
        if distance(fp, other) > k and not banded:
            continue
        estimate = float(hasher.estimate_many(sketch, [mine])[0])
        if estimate >= verified.threshold:
            out.append((doc_id, distance(fp, other), round(estimate, 9)))
    return sorted(out)


def _seen(matches: list[VerifiedMatch]) -> list[tuple[str, int, float]]:
    return sorted((m.id, m.distance, round(m.jaccard, 9)) for m in matches)


def test_near_equals_the_plain_windowed_index_confirmed_by_sketches(client: Any) -> None:
    """Adds, rewrites and removals over several periods, in a verified and a plain windowed index: the
    plain one's candidates equal the model's, the verified one's answers the brute force oracle's."""
    rng = random.Random(11)
    verified = windowed(client, "model", ROOMY, batch_size=7)
    plain = SimhashIndex(client, "plain", id_buckets=BUCKETS, retention=ROOMY, batch_size=7)
    centres = [[rng.choice(_WORDS) for _ in range(80)] for _ in range(4)]
    stored: dict[str, str] = {}
    for phase in range(3):
        for _ in range(25):
            doc_id = f"d{rng.randrange(30)}"
            if rng.random() < 0.2:
                gone = stored.pop(doc_id, None) is not None
                assert verified.remove(doc_id) is gone and plain.remove(doc_id) is gone
            else:
                text = _text(rng, rng.choice(centres))
                assert verified.add(doc_id, text) is plain.add(doc_id, text)
                stored[doc_id] = text
        pairs = [(f"b{phase}-{n}", _text(rng, rng.choice(centres))) for n in range(15)]
        assert verified.add_many(pairs) == plain.add_many(pairs)
        stored.update(pairs)
        probes = [_text(rng, rng.choice(centres)) for _ in range(8)] + list(stored.values())[:3]
        fps = [plain.fingerprint(p) for p in probes]
        for k in (0, 3):
            hamming = plain.near_many(fps, k=k)
            for probe, fp, found, answer in zip(
                probes, fps, hamming, verified.near_many(probes, k=k), strict=True
            ):
                assert sorted(m.id for m in found) == sorted(
                    i for i, text in stored.items() if distance(fp, plain.fingerprint(text)) <= k
                )
                assert _seen(answer) == _oracle(verified, stored, probe, k)
        assert verified.index.count()[0] == plain.count()[0] == len(stored)
        ids = [*sorted(stored), "never"]
        assert (
            verified.index.get_many(ids)
            == plain.get_many(ids)
            == [plain.fingerprint(stored[i]) if i in stored else None for i in ids]
        )
        if phase < 2:
            wait_for_next_period(verified.index)
    report = verified.index.verify()
    assert report.ok and report.docs == len(stored), report.examples


@SLOW_ON_A_CLUSTER
def test_add_if_new_finds_near_duplicates_across_periods(client: Any) -> None:
    index = windowed(client, "unique", ROOMY)
    assert index.add_if_new("p0", page(0)) is None
    wait_for_next_period(index.index)
    match = index.add_if_new("e0", one_word_edit(page(0), 1))
    assert match is not None and match.id == "p0"
    # Pages of one template and edits of some in one batch, a single writer: no contention, and every
    # edit found as its page's copy, earlier in the same batch.
    docs = templated(120, 12)
    found = index.add_if_new_many(docs)
    for (doc_id, _), result in zip(docs, found, strict=True):
        if doc_id.startswith("e"):
            assert result is not None and result.id == "p" + doc_id[1:], doc_id
    stored = [doc_id for (doc_id, _), result in zip(docs, found, strict=True) if result is None]
    assert len(stored) == 119  # p0 is there already
    # Per period, the fingerprints counted without their sketches (a cluster counts the maps' fields).
    periods = collect(index.index).periods
    assert sum(p.documents for p in periods) == 120 and all(p.documents == p.fingerprints for p in periods)
    assert index.index.count()[0] == 120 and index.index.verify().ok  # e0 was not stored


@SLOW_ON_A_CLUSTER
def test_a_sliding_window_moves_the_sketch_of_what_is_seen_again(client: Any) -> None:
    index = windowed(client, "seen", Retention.of(60, 1, sliding=True))
    windows = index.index.windows
    assert windows is not None
    assert index.add("p", page(4)) is Outcome.ADDED
    sketch = index.sketch_of("p")
    first = windows.view().current
    wait_for_next_period(index.index)
    match = index.add_if_new("e", one_word_edit(page(4), 2))
    assert match is not None and match.id == "p"
    now = windows.view().current
    per_period = {w: docs for w, docs, _ in windows.counts(sketched=True)}
    assert per_period.get(first, 0) == 0 and per_period[now] == 1
    assert index.sketch_of("p") == sketch is not None
    assert len(scan(client, f"simhash:seen:w{now}:b*")) == index.verification.bands
    if not isinstance(client, RedisCluster):  # a cluster leaves them to verify --repair (cluster.md)
        assert scan(client, f"simhash:seen:w{first}:b*") == []
    assert [m.id for m in index.near(one_word_edit(page(4), 7))] == ["p"]
    assert index.index.verify().ok


def test_verify_repairs_a_band_key_without_expiry(redis_client: redis.Redis) -> None:
    index = windowed(redis_client, "checked", Retention(600, 100))
    index.add("a", page(5))
    band = scan(redis_client, "simhash:checked:w*:b*")[0]
    redis_client.persist(band)
    report = index.index.verify()
    assert report.problems == {"key without expiry": 1}
    assert index.index.verify(repair=True).problems == {"key without expiry": 1}
    assert redis_client.pttl(band) > 0 and index.index.verify().ok


def test_asyncio(client: Any, request: pytest.FixtureRequest) -> None:
    cluster = isinstance(client, RedisCluster)
    url = request.getfixturevalue("redis_cluster").url if cluster else request.getfixturevalue("redis_url")
    docs = templated(60, 10)

    async def main() -> None:
        options = {"retention": "1d", "id_buckets": 1024}
        async with await AsyncVerifiedIndex.from_url(url, "man", **options) as index:
            found = await index.add_if_new_many(docs)
            for (doc_id, _), match in zip(docs, found, strict=True):
                assert (
                    (match is not None and match.id == "p" + doc_id[1:])
                    if doc_id.startswith("e")
                    else match is None
                )
            assert [m.id for m in await index.near(one_word_edit(page(3), 9))] == ["p3"]
            assert (await index.count())[0] == 60
            assert await index.remove("p3") is True and await index.near(one_word_edit(page(3), 9)) == []

    asyncio.run(main())
    assert client.hget(b"simhash:man:meta", b"format") == b"4"


def test_export_and_import_carry_the_sketches(client: Any) -> None:
    index = windowed(client, "dumped", Retention(600, 100))
    docs = [(f"p{i}", page(i)) for i in range(20)]
    index.add_many(docs)
    dump = io.BytesIO()
    assert export_index(index.index, dump) == 20
    dump.seek(0)
    imported = import_index(client, dump, name="copy")
    assert imported.added == 20
    copy = VerifiedIndex(SimhashIndex(client, "copy"))
    assert copy.index.config.retention == index.index.config.retention
    assert all(copy.sketch_of(doc_id) == index.sketch_of(doc_id) is not None for doc_id, _ in docs)
    assert [m.id for m in copy.near(one_word_edit(page(7), 1))] == ["p7"]
    assert copy.index.verify().ok


@SLOW_ON_A_CLUSTER
def test_a_new_sketch_under_the_same_fingerprint_replaces_the_old_one(client: Any) -> None:
    """Rewritten in its period with the fingerprint it has and another sketch: unchanged, found by the
    new sketch only (pages of one template are at Jaccard ~0.7 of each other, under the threshold)."""
    index = windowed(client, "same", Retention(60, 1))
    first, second = index.hasher.sketch_many([page(6), page(8)])
    fp = index.index.fingerprint(page(6))
    assert index.add_sketched(["a"], [fp], [first]) == [Outcome.ADDED]
    assert index.add_sketched(["a"], [fp], [second]) == [Outcome.UNCHANGED]
    assert index.sketch_of("a") == index.hasher.stored(second)
    assert [m.id for m in index.near(one_word_edit(page(8), 1))] == ["a"]
    assert index.near(one_word_edit(page(6), 1)) == []
    report = index.index.verify()
    # A cluster leaves the old sketch's band values (garbage) to verify --repair (cluster.md).
    assert report.ok and (report.garbage > 0) is isinstance(client, RedisCluster), report.garbage
    index.index.verify(repair=True)
    report = index.index.verify()
    assert report.ok and report.garbage == 0
    assert [m.id for m in index.near(one_word_edit(page(8), 1))] == ["a"]


def test_racing_workers_store_one_document_per_group_across_periods(
    client: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Six processes adding one-word edits of the same stories while periods go by (ROOMY: in a minute's
    window, a race slowed by a loaded machine saw its first documents expire before they were read)."""
    cluster = isinstance(client, RedisCluster)
    url = request.getfixturevalue("redis_cluster").url if cluster else request.getfixturevalue("redis_url")
    VerifiedIndex(SimhashIndex(client, "vrace", retention=ROOMY, **K8))
    # On a cluster twelve groups: the racers meet each other's locks about twenty times a group (more
    # groups would only repeat that). Asserted: that they met at all.
    retried = race(url, client, tmp_path, groups=12 if cluster else 45)
    assert retried > 0 or not cluster


def test_the_race_catches_check_then_insert_across_periods(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    VerifiedIndex(SimhashIndex(redis_client, "vrace", retention=ROOMY, **K8))
    with pytest.raises(AssertionError):
        race(redis_url, redis_client, tmp_path, groups=45, mode="naive")


def test_lost_replies_change_nothing_more(redis_server: ServerProcess) -> None:
    """Every write reply lost once (the server applied it): the retry finds the work done, the sketches
    and band values where they belong."""
    redis_server.flushall()
    with FaultProxy(redis_server.port) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = VerifiedIndex(
            SimhashIndex(
                client, "lost", retention=Retention(60, 1), backoff=Backoff(retries=3, base=0.001, cap=0.01)
            )
        )
        index.add_many([("x", page(10)), ("y", page(11))])
        wait_for_next_period(index.index)
        for step in (
            lambda: index.add("x", page(12)),  # a move into the new period and a replacement
            lambda: index.add_if_new("z", page(13)),
            lambda: index.remove("y"),
        ):
            proxy.arm()
            step()
            assert proxy.dropped_after_write == 1
            proxy.disarm()
            proxy.dropped_after_write = 0
        expected = {"x": page(12), "y": None, "z": page(13)}
        for doc_id, text in expected.items():
            stored = index.sketch_of(doc_id)
            assert stored == (
                None if text is None else index.hasher.stored(index.hasher.sketch_many([text])[0])
            )
        assert index.index.count() == (2, 2) and index.index.verify().ok
        assert [m.id for m in index.near(one_word_edit(page(12), 1))] == ["x"]
        assert index.near(one_word_edit(page(10), 1)) == [] and index.near(one_word_edit(page(11), 1)) == []
        client.close()


def test_a_lost_meta_is_restored_with_its_retention_and_mode(redis_client: redis.Redis) -> None:
    index = windowed(redis_client, "lost", Retention.of("1d"))
    index.add_many([(f"p{i}", page(i)) for i in range(5)])
    mode = index.verification
    redis_client.delete(b"simhash:lost:meta")
    with pytest.raises(ConfigurationMismatch, match="verified"):
        SimhashIndex.restore(redis_client, "lost", k=3, id_buckets=BUCKETS, retention="1d")
    with pytest.raises(ConfigurationMismatch, match="retention"):
        SimhashIndex.restore(redis_client, "lost", k=3, id_buckets=BUCKETS, verification=mode)
    SimhashIndex.restore(redis_client, "lost", k=3, id_buckets=BUCKETS, retention="1d", verification=mode)
    restored = VerifiedIndex(SimhashIndex(redis_client, "lost"))
    assert [m.id for m in restored.near(one_word_edit(page(3), 1))] == ["p3"]
