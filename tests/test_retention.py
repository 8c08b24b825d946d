"""Retention windows: documents forgotten by Redis's own key expiry, on a real server.

The short retentions here (seconds) cross period boundaries while a test runs; checks that depend on the
clock are made against the server's clock (TIME), never a sleep's length or a worker's estimate alone.
"""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis

from benchmarks.bench_retention import fill_period
from simhash_redis import (
    ConfigurationMismatch,
    InvalidArgument,
    InvalidType,
    Match,
    Outcome,
    RedisOutOfMemory,
    Retention,
    SimhashIndex,
    SimhashRedisError,
    distance,
)
from simhash_redis.codec import encode_fp
from simhash_redis.jobs.dump import export_index, import_index
from simhash_redis.jobs.stats import collect
from simhash_redis.store import Writes
from simhash_redis.store import store as store_module
from simhash_redis.store.writes import Progress
from simhash_redis.transport import Backoff
from tests.faultproxy import FaultProxy
from tests.servers import ServerProcess
from tests.test_add_if_new import race, shared_table
from tests.test_oom import BATCH, MAXMEMORY, assert_consistent, documents, fill_until_oom

A = 0x0123456789ABCDEF


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def wait_for_next_period(index: SimhashIndex) -> None:
    assert index.windows is not None
    start, period = index.windows.view().current, index.windows.period_ms
    while index.windows.view().current == start or server_ms(index.client) < (start + 1) * period:
        time.sleep(0.02)


def brute_force(stored: dict[str, int], query: int, k: int) -> list[Match]:
    found = [Match(i, fp, distance(fp, query)) for i, fp in stored.items() if distance(fp, query) <= k]
    return sorted(found, key=lambda m: (m.distance, m.id))


@pytest.mark.parametrize(
    ("given", "seconds", "period"),
    [
        ("7d", 7 * 86400, 100800),
        ("12h", 43200, 7200),
        ("90s", 90, 15),
        (" 2w ", 14 * 86400, 201600),
        ("10s", 10, 2),
        (timedelta(minutes=30), 1800, 300),
        (3, 3, 1),
        (7.0, 7, 2),
    ],
)
def test_the_forms_of_a_retention(given: object, seconds: int, period: int) -> None:
    made = Retention.of(given)
    assert (made.seconds, made.period) == (seconds, period)
    assert Retention.from_meta(made.to_meta()) == made


@pytest.mark.parametrize(
    "given", ["7x", "", "d", "-1d", "7", 0, -5, 1.5, float("inf"), timedelta(0), "1d 2h"]
)
def test_malformed_retentions_are_refused(given: object) -> None:
    with pytest.raises(InvalidArgument):
        Retention.of(given)


@pytest.mark.parametrize("given", [True, None, [1], b"7d"])
def test_retentions_of_another_type_are_refused(given: object) -> None:
    with pytest.raises(InvalidType):
        Retention.of(given)


def test_a_period_longer_than_the_retention_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="period"):
        Retention(10, 11)
    assert Retention.of("1h", "10m").period == 600


def test_the_retention_is_pinned_in_the_meta(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "kept", retention="7d")
    meta = redis_client.hgetall(b"simhash:kept:meta")
    assert meta[b"format"] == b"4" and meta[b"retention"] == b"604800;period=100800"
    assert SimhashIndex(redis_client, "kept").config.retention == index.config.retention
    assert SimhashIndex(redis_client, "kept", retention=timedelta(days=7)).config.retention is not None
    with pytest.raises(ConfigurationMismatch, match=r"retention 1w \(periods of 28h\), not retention 8d "):
        SimhashIndex(redis_client, "kept", retention="8d")
    SimhashIndex(redis_client, "plain")
    with pytest.raises(ConfigurationMismatch, match=r"with no retention, not retention 1d \(periods of 4h\)"):
        SimhashIndex(redis_client, "plain", retention="1d")
    assert redis_client.hget(b"simhash:plain:meta", b"format") == b"4"


def found_then_gone(index: SimhashIndex, client: Any, period_keys: Callable[[], list[bytes]]) -> None:
    """A document found until t + retention and gone, keys included, by t + retention + one period.

    The index has a retention of 2 s in periods of 1 s; `period_keys` lists its periods' keys.
    """
    before = server_ms(client)
    assert index.add("a", A) is Outcome.ADDED
    after = server_ms(client)
    assert period_keys() and all(client.pttl(key) > 0 for key in period_keys())
    while True:
        found, got = index.near(A), index.get("a")
        now = server_ms(client)
        if now >= before + 2000:
            break
        assert found == [Match("a", A, 0)] and got == A  # found until t + retention
        time.sleep(0.05)
    while server_ms(client) < after + 3000:  # t + retention + one period
        time.sleep(0.05)
    assert index.near(A) == [] and index.get("a") is None and index.count() == (0, 0)
    assert period_keys() == []  # Redis freed it: no key of any period is left (SCAN skips expired keys)
    assert index.add_if_new("b", A) is None


def test_a_document_is_found_for_the_retention_and_gone_a_period_later(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "short", retention=Retention(2, 1))
    found_then_gone(index, redis_client, lambda: list(redis_client.scan_iter(b"simhash:short:w*")))


def moves_into_the_current_period(index: SimhashIndex) -> None:
    """Rewriting a document, replaced or unchanged, moves it into the current period (periods of 1 s)."""
    assert index.windows is not None
    assert index.add("a", A) is Outcome.ADDED
    first = index.windows.view().current
    wait_for_next_period(index)
    assert index.add("a", A ^ 0xFF00) is Outcome.REPLACED
    second = index.windows.view().current
    assert index.near(A) == [] and index.get("a") == A ^ 0xFF00
    per_period = {w: docs for w, docs, _ in index.windows.counts()}
    assert per_period[first] == 0 and per_period[second] == 1
    wait_for_next_period(index)
    # The same fingerprint again: unchanged, but it lives on from now (a refresh).
    assert index.add("a", A ^ 0xFF00) is Outcome.UNCHANGED
    third = index.windows.view().current
    per_period = {w: docs for w, docs, _ in index.windows.counts()}
    assert per_period[second] == 0 and per_period[third] == 1
    assert index.count() == (1, 1)
    assert index.remove("a") is True and index.remove("a") is False
    assert index.count() == (0, 0) and index.verify().ok


def test_rewriting_a_document_moves_it_into_the_current_period(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "moves", retention=Retention(60, 1))
    assert index.windows is not None
    moves_into_the_current_period(index)
    assert all(redis_client.pttl(key) > 0 for key in redis_client.scan_iter(b"simhash:moves:w*:counts"))


def equals_the_model(index: SimhashIndex, phases: int = 4, ops: int = 60) -> None:
    """Adds, replacements, moves and removals over several periods, checked against a model (1 s periods)."""
    rng = random.Random(7)
    centres = [rng.getrandbits(64) for _ in range(5)]
    stored: dict[str, int] = {}

    def near_copy() -> int:
        fp = rng.choice(centres)
        for _ in range(rng.randrange(6)):
            fp ^= 1 << rng.randrange(64)
        return fp

    for phase in range(phases):
        for _ in range(ops):
            doc_id = f"d{rng.randrange(40)}"
            if rng.random() < 0.2:
                assert index.remove(doc_id) is (stored.pop(doc_id, None) is not None)
            else:
                fp = near_copy()
                outcome = index.add(doc_id, fp)
                expected = Outcome.ADDED if doc_id not in stored else Outcome.UNCHANGED
                if doc_id in stored and stored[doc_id] != fp:
                    expected = Outcome.REPLACED
                assert outcome is expected
                stored[doc_id] = fp
        pairs = [(f"b{phase}-{n}", near_copy()) for n in range(30)]
        index.add_many(pairs)
        stored.update(pairs)
        probes = [near_copy() for _ in range(20)] + list(stored.values())[:5]
        for k in range(4):
            assert index.near_many(probes, k=k) == [brute_force(stored, q, k) for q in probes]
        assert index.get_many(sorted(stored)) == [stored[i] for i in sorted(stored)]
        assert index.count()[0] == len(stored)
        if phase < phases - 1:
            wait_for_next_period(index)
    report = index.verify()
    assert report.ok and report.docs == len(stored), report.examples


def test_near_equals_brute_force_across_periods(redis_client: redis.Redis) -> None:
    equals_the_model(SimhashIndex(redis_client, "model", retention=Retention(60, 1), batch_size=7))


#: The races' window: the racers have 120 s and their documents are read back after, so the window is
#: longer (in a minute's window a race slowed by a loaded machine saw its first documents expire).
RACE_WINDOW = Retention(240, 4)


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_eight_processes_racing_across_periods(redis_url: str, redis_client: redis.Redis, mode: str) -> None:
    """Exactly one document per group of near-duplicates, while periods go by."""
    SimhashIndex(redis_client, "race", k=3, id_buckets=1024, retention=RACE_WINDOW)
    race(redis_url, redis_client, mode, groups=120)


def test_verify_finds_and_repairs_a_period(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "checked", retention=Retention(600, 100))
    assert index.windows is not None
    index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(10)])
    assert index.verify().ok
    window = index.windows.view().current
    table_key = index.windows.schema(window).tables(A)[0]
    redis_client.srem(table_key, str(A))
    redis_client.persist(f"simhash:checked:w{window}:counts")
    report = index.verify()
    assert not report.ok
    assert set(report.problems) == {"fingerprint missing from table", "key without expiry"}, report.problems
    assert all(example.startswith(("period", "key without expiry")) for example in report.examples)
    assert index.verify(repair=True).repaired
    assert index.verify().ok and index.near(A)[0] == Match("d0", A, 0)
    assert redis_client.pttl(table_key) > 0


def test_export_and_import_carry_the_retention(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "dumped", retention="1h")
    pairs = [(f"d{i}", A ^ (i << 30)) for i in range(50)]
    index.add_many(pairs)
    out = io.BytesIO()
    assert export_index(index, out) == 50
    index.drop()
    out.seek(0)
    result = import_index(redis_client, out)
    assert result.added == 50
    again = SimhashIndex(redis_client, "dumped")
    assert again.config.retention == Retention.of("1h")
    assert again.get_many([i for i, _ in pairs]) == [fp for _, fp in pairs]


def test_stats_list_the_periods(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "counted", retention=Retention(60, 1))
    index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(3)])
    wait_for_next_period(index)
    index.add_many([(f"e{i}", A ^ (i << 40)) for i in range(2)])
    stats = collect(index)
    assert [p.documents for p in stats.periods] == [3, 2]
    assert stats.documents == 5 and sum(t.keys for t in stats.tables) > 0
    assert stats.periods[0].start < stats.periods[0].expires


def test_a_lost_meta_is_restored_with_its_retention(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "lost", retention="1d")
    index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(5)])
    redis_client.delete(b"simhash:lost:meta")
    with pytest.raises(ConfigurationMismatch, match="retention"):
        SimhashIndex.restore(redis_client, "lost", k=3)
    restored = SimhashIndex.restore(redis_client, "lost", k=3, retention="1d")
    assert restored.get("d3") == A ^ (3 << 20)


# -- faults: lost replies and a full server ---------------------------------------------------------------


def test_lost_replies_to_windowed_writes_change_nothing_more(redis_server: ServerProcess) -> None:
    """Every write reply lost once (the server applied it): the retry finds the work done."""
    redis_server.flushall()
    with FaultProxy(redis_server.port) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = SimhashIndex(
            client, "lost", k=3, retention=Retention(60, 1), backoff=Backoff(retries=3, base=0.001, cap=0.01)
        )
        index.add_many([("x", A), ("y", A)])
        wait_for_next_period(index)
        for step, outcome in (
            (lambda: index.add("x", A ^ 0xFF00), Outcome.REPLACED),  # a move into the new period
            (lambda: index.add_if_new("z", A ^ 0xF0F0_0000_0000), None),
            (lambda: index.remove("y"), True),
            (lambda: index.add("w", 0xFEDC_BA98_7654_3210), Outcome.ADDED),
        ):
            proxy.arm()
            assert step() == outcome  # the first attempt's, though its reply was lost
            assert proxy.dropped_after_write == 1
            proxy.disarm()
            proxy.dropped_after_write = 0
        expected = {"x": A ^ 0xFF00, "y": None, "z": A ^ 0xF0F0_0000_0000, "w": 0xFEDC_BA98_7654_3210}
        assert dict(zip(expected, index.get_many(list(expected)), strict=True)) == expected
        assert index.count() == (3, 3) and index.verify().ok
        assert index.near(A) == []
        client.close()


@pytest.fixture
def small() -> Iterator[ServerProcess]:
    """A private server with a few MB of maxmemory and the noeviction policy."""
    with ServerProcess({"maxmemory": MAXMEMORY, "maxmemory-policy": "noeviction"}) as server:
        yield server


def test_out_of_memory_leaves_nothing_half_written_and_resumes(small: ServerProcess) -> None:
    docs = documents()
    with small.client() as client:
        index = SimhashIndex(
            client, "oom", k=3, id_buckets=64, retention="1h", backoff=Backoff(retries=1, base=0.01)
        )
        refused, _ = fill_until_oom(index, docs)
        assert refused > 0
        assert_consistent(index, docs, refused)
        # Every key written so far expires with its period, whatever was refused.
        assert index.verify().ok
        client.config_set("maxmemory", "0")
        index.add_many(docs[: refused + 5 * BATCH])
        assert_consistent(index, docs, refused + 5 * BATCH)


# -- a sliding window: seen again, kept another retention ---------------------------------------------------


def test_one_writer_meets_no_contention_from_its_own_batch(redis_client: redis.Redis) -> None:
    """Documents of one batch sharing a table set, some stored a period before: each guard covers every
    period and expects what the documents before it add to the current one (test_add_if_new's test)."""
    index = SimhashIndex(redis_client, "shared", retention=Retention(60, 1, sliding=True))
    items = shared_table(150)
    index.add_many(items[:50])
    wait_for_next_period(index)
    results = index.add_many(items, unique=True)
    assert results[:50] == [Match(doc_id, fp, 0) for doc_id, fp in items[:50]]  # stored before: themselves
    assert results[50:150] == [Outcome.ADDED] * 100
    assert results[150:] == [Match(f"d{i}", items[i][1], 1) for i in range(0, 150, 15)]
    assert index.count()[0] == 150 and index.verify().ok


def test_a_sliding_window_keeps_what_is_seen_again(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "sliding", retention=Retention(60, 1, sliding=True))
    fixed = SimhashIndex(redis_client, "fixed", retention=Retention(60, 1))
    assert redis_client.hget(b"simhash:sliding:meta", b"retention") == b"60;period=1;sliding"
    assert index.windows is not None and fixed.windows is not None
    for each in (index, fixed):
        each.add_many([("a", A), ("c", A ^ 0xFFFF_0000)])
    wait_for_next_period(index)
    for each in (index, fixed):
        assert each.add_if_new("b", A ^ 1) == Match("a", A, 1)
        assert each.add_many([("d", A ^ 0xFFFF_0001)], unique=True) == [Match("c", A ^ 0xFFFF_0000, 1)]
    now = index.windows.view().current
    assert {w: docs for w, docs, _ in index.windows.counts()}[now] == 2  # a and c moved: seen again
    assert {w: docs for w, docs, _ in fixed.windows.counts()}.get(now, 0) == 0
    assert index.verify().ok and index.count() == (2, 2)
    # Only a document still stored with the fingerprint that was found moves: never one replaced since.
    wait_for_next_period(index)
    index.add("a", A ^ 0xFF00_0000_0000)
    index._writes.seen([(b"a", encode_fp(A, 64)), (b"gone", encode_fp(A, 64))])
    assert index.get("a") == A ^ 0xFF00_0000_0000 and index.get("gone") is None
    assert index.verify().ok and index.count() == (2, 2)


def test_a_document_seen_again_lives_a_retention_from_then(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "renewed", retention=Retention(2, 1, sliding=True))
    index.add("a", A)
    while server_ms(redis_client) % 1000 > 500:  # early in a period, so that the next step is in another
        time.sleep(0.01)
    wait_for_next_period(index)
    seen = server_ms(redis_client)
    assert index.add_if_new("b", A) == Match("a", A, 0)
    while server_ms(redis_client) < seen + 1900:
        time.sleep(0.05)
    found = index.near(A)
    if server_ms(redis_client) < seen + 2000:  # the check ran within the retention of the second sight
        assert found == [Match("a", A, 0)]
    while server_ms(redis_client) < seen + 3100:
        time.sleep(0.05)
    assert index.near(A) == [] and index.count() == (0, 0)


# -- clocks, failed moves, restores and imports --------------------------------------------------------------


def test_a_failed_move_leaves_every_key_of_the_old_period_expiring(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "failing", retention=Retention(60, 1))
    assert index.windows is not None
    index.add("x", A)
    wait_for_next_period(index)
    other = A ^ 0xFFFF_FFFF  # its tables 2 and 3 are not A's, so near(A) does not read the blocker
    blocker = index.windows.schema(index.windows.view().current).tables(other)[2]
    redis_client.set(blocker, "not a set")  # a hand edit: the move's write fails half-way
    with pytest.raises(SimhashRedisError):
        index.add("x", other)
    assert index.get("x") == A and index.near(A) == [Match("x", A, 0)]
    lasting = [k for k in redis_client.scan_iter(b"simhash:failing:w*") if redis_client.pttl(k) == -1]
    assert lasting == [blocker]


def test_a_worker_whose_clock_estimate_is_off_writes_where_the_server_says(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "skewed", retention=Retention(30, 1))
    assert index.windows is not None
    index.windows.set_server_time(index.windows.now_ms() + 10_000)  # ten seconds ahead
    before = server_ms(redis_client) // 1000  # the period the write lands in, or the next
    assert index.add("a", A) is Outcome.ADDED  # refused by the script, built again by the server's clock
    written = {w for w, docs, _ in index.windows.counts() if docs}
    assert written in ({before}, {server_ms(redis_client) // 1000})
    assert index.near(A) == [Match("a", A, 0)]
    # A reader that never writes reads the server's clock again once a minute.
    reader = SimhashIndex(redis_client, "skewed")
    assert reader.windows is not None
    reader.windows.set_server_time(reader.windows.now_ms() - 20_000, time.monotonic() - 61)
    assert reader.near(A) == [Match("a", A, 0)]
    assert abs(reader.windows.now_ms() - server_ms(redis_client)) < 1000


def test_a_server_clock_stepped_back_across_a_boundary_hides_nothing(redis_client: redis.Redis) -> None:
    """What a server clock stepped back across a boundary leaves: documents in the period after the one
    the server is in (written straight into that period's keys, as before the step). A worker reads
    them: one opened after the step, and one open before it once it reads the clock again (a minute at
    most); add_if_new then stores no near-duplicate of one."""
    index = SimhashIndex(redis_client, "stepped", k=3, retention=Retention(6 * 3600, 3600))
    assert index.windows is not None
    ahead = index.windows.view().current + 1  # hours from the server's next boundary: no margin covers it
    fill_period(index, ahead, [b"a"], [A])
    reader = SimhashIndex(redis_client, "stepped")  # opened after the step
    assert reader.near(A ^ 1) == [Match("a", A, 1)]
    assert reader.get("a") == A
    assert reader.add_if_new("b", A ^ 3) == Match("a", A, 2)
    assert {w: docs for w, docs, _ in reader.windows.counts() if docs} == {ahead: 1}  # stats list it
    index.windows.sync()  # what an open worker does within a minute
    assert index.near(A) == [Match("a", A, 0)]


def test_a_guard_that_missed_a_live_period_is_read_again(redis_client: redis.Redis) -> None:
    """A worker reads with a clock estimate seconds ahead; another stores a near-duplicate in the
    period the first one's guard did not read; the first one's write must read again, not store."""
    late = SimhashIndex(redis_client, "guarded", retention=Retention(3, 1))
    early = SimhashIndex(redis_client, "guarded")
    assert late.windows is not None
    late.windows.set_server_time(late.windows.now_ms() + 4500)
    members, found = late._reads.near_and_members([A ^ 1], 3)
    assert found == [[]]
    assert early.add_if_new("a", A) is None
    wait_for_next_period(early)  # the period "late" believed current has now begun on the server
    guard = members[0]
    outcome = late._writes.apply([(b"b", encode_fp(A ^ 1, 64), guard)])
    assert outcome == [None]  # not written: read again
    assert late.add_if_new("b", A ^ 1) == Match("a", A, 1)
    assert late.count() == (1, 1)


def test_a_restore_with_another_period_is_refused(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "periods", retention=Retention(600, 100))
    index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(5)])
    redis_client.delete(b"simhash:periods:meta")
    with pytest.raises(ConfigurationMismatch, match="retention"):
        SimhashIndex.restore(redis_client, "periods", k=3, retention=Retention(600, 60))
    with pytest.raises(ConfigurationMismatch, match="retention"):
        SimhashIndex.restore(redis_client, "periods", k=3, retention=Retention(900, 100))
    restored = SimhashIndex.restore(redis_client, "periods", k=3, retention=Retention(600, 100))
    assert restored.count() == (5, 5)


def test_a_plain_dump_is_not_imported_into_a_windowed_index(redis_client: redis.Redis) -> None:
    plain = SimhashIndex(redis_client, "kept")
    plain.add("a", A)
    out = io.BytesIO()
    export_index(plain, out)
    SimhashIndex(redis_client, "forgetting", retention="1d")
    out.seek(0)
    with pytest.raises(InvalidArgument, match="retention window"):
        import_index(redis_client, out, name="forgetting")
    assert SimhashIndex(redis_client, "forgetting").count() == (0, 0)


def test_a_large_batch_crossing_a_period_boundary_is_written_whole(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts of 2 documents, each call built while the server runs the one before, for long enough
    that the server's clock moves into the next period mid-batch: the parts refused by the script are
    written again into the new period, nothing twice, nothing lost."""
    monkeypatch.setattr(store_module, "PART", 2)
    index = SimhashIndex(redis_client, "parts", retention=Retention(60, 1), batch_size=5000)
    assert index.windows is not None
    while server_ms(redis_client) % 1000 < 700:  # start late in a period
        time.sleep(0.01)
    pairs = [(f"d{i}", A ^ (i << 16) ^ i) for i in range(3000)]
    outcomes = index.add_many(pairs)
    assert outcomes == [Outcome.ADDED] * len(pairs)
    assert len([w for w, docs, _ in index.windows.counts() if docs]) >= 2  # it did cross a boundary
    assert index.count() == (3000, 3000) and index.verify().ok
    assert index.get_many([i for i, _ in pairs]) == [fp for _, fp in pairs]


def test_the_documents_before_a_failed_one_are_counted(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "halfway", retention=Retention(600, 100))  # boundary: 1 in 10^4
    assert index.windows is not None
    other = A ^ 0xFFFF_FFFF
    redis_client.set(index.windows.schema(index.windows.view().current).tables(other)[2], "not a set")
    with pytest.raises(SimhashRedisError):
        index.add_many([("first", A), ("second", other)])
    assert index.get_many(["first", "second"]) == [A, None]
    assert index.count() == (1, 1)


def test_a_refresh_that_cannot_be_made_does_not_fail_add_if_new(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SimhashIndex(redis_client, "courtesy", retention=Retention(60, 1, sliding=True))
    index.add("a", A)

    def full(*_: object) -> None:
        raise RedisOutOfMemory("OOM command not allowed when used memory > 'maxmemory'")

    monkeypatch.setattr(Writes, "_refresh", full)
    assert index.add_many([("new", A ^ 0xFFFF_0000_0000), ("b", A ^ 1)], unique=True) == [
        Outcome.ADDED,
        Match("a", A, 1),
    ]
    assert index.get("new") == A ^ 0xFFFF_0000_0000


def test_a_large_batch_found_again_is_refreshed_in_parts(redis_client: redis.Redis) -> None:
    """Add-if-new of a large batch that finds itself (a dedupe run again on the same input): the refresh
    of its documents goes as parts of `PART`, every part's replies read."""
    index = SimhashIndex(redis_client, "again", retention=Retention(60, 1, sliding=True))
    assert index.windows is not None
    rng = random.Random(600)
    pairs = [(f"d{i}", rng.getrandbits(64)) for i in range(600)]
    assert index.add_many(pairs) == [Outcome.ADDED] * 600
    wait_for_next_period(index)
    before = server_ms(redis_client) // index.windows.period_ms
    results = index.add_many(pairs, unique=True)
    after = server_ms(redis_client) // index.windows.period_ms
    assert results == [Match(doc_id, fp, 0) for doc_id, fp in pairs]
    if before == after:  # no boundary passed meanwhile (the refresh gives way to one): all of them moved
        assert {w: docs for w, docs, _ in index.windows.counts()}[after] == 600
    assert index.count() == (600, 600) and index.verify().ok


def test_a_windowed_index_never_takes_the_plain_write_steps(redis_client: redis.Redis) -> None:
    # The steps it inherits write keys of no period, which would never expire.
    index = SimhashIndex(redis_client, "no_plain_steps", retention=Retention(60, 1))
    writes = index._writes
    assert writes.windows is not None
    with pytest.raises(TypeError, match="over the periods"):
        writes.steps(Progress([(b"a", b"x", None)], None, None))
    index.add("a", A)
    assert index.get("a") == A
