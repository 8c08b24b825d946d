"""Retention windows on Redis Cluster: the standalone semantics, kept by ordered one-key steps.

The session's 3+3 cluster. As in test_retention.py, checks that depend on the clock are made against
the server's clock (TIME), never against a sleep's length.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

import pytest
from redis.cluster import RedisCluster

from simhash_redis import Match, Outcome, Retention, SimhashIndex, SimhashRedisError
from simhash_redis.asyncio import AsyncSimhashIndex
from simhash_redis.codec import encode_fp
from simhash_redis.errors import WriteContention
from simhash_redis.jobs.stats import collect
from simhash_redis.store import Store, Writes
from simhash_redis.store import store as scripts
from simhash_redis.transport.cluster import ClusterTransport
from tests.servers import ClusterProcess
from tests.test_add_if_new import race
from tests.test_asyncio import groups_of_near_duplicates
from tests.test_asyncio import race as race_tasks
from tests.test_retention import (
    RACE_WINDOW,
    equals_the_model,
    found_then_gone,
    moves_into_the_current_period,
    wait_for_next_period,
)

A = 0x0123456789ABCDEF
# Few id buckets: on a cluster count() and stats sum their sizes in each live period (60 in most tests
# here), 2 x 1024 round trips a period with 1024 buckets; these indexes hold at most hundreds of documents.
BUCKETS = 64


def server_ms(client: RedisCluster) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def windowed(client: RedisCluster, name: str, retention: Retention) -> SimhashIndex:
    return SimhashIndex(client, name, k=3, id_buckets=BUCKETS, retention=retention)


def period_keys(client: RedisCluster, name: str) -> list[bytes]:
    return list(client.scan_iter(match=f"simhash:{name}:w*".encode(), target_nodes=RedisCluster.PRIMARIES))


def test_a_document_is_found_for_the_retention_and_gone_a_period_later(
    redis_cluster_client: RedisCluster,
) -> None:
    index = windowed(redis_cluster_client, "short", Retention(2, 1))
    found_then_gone(index, redis_cluster_client, lambda: period_keys(redis_cluster_client, "short"))


def test_rewriting_a_document_moves_it_into_the_current_period(redis_cluster_client: RedisCluster) -> None:
    moves_into_the_current_period(windowed(redis_cluster_client, "moves", Retention(60, 1)))


def test_near_equals_brute_force_across_periods(redis_cluster_client: RedisCluster) -> None:
    retention = Retention(60, 1)
    index = SimhashIndex(
        redis_cluster_client, "model", k=3, id_buckets=BUCKETS, retention=retention, batch_size=7
    )
    equals_the_model(index, phases=3, ops=30)


def test_eight_processes_racing_across_periods(redis_cluster: ClusterProcess) -> None:
    """Exactly one document per group of near-duplicates, while periods go by."""
    redis_cluster.flushall()
    client = redis_cluster.client()
    # The racers' id buckets (tests/test_add_if_new.py's RACER opens the index with 1024).
    SimhashIndex(client, "race", k=3, id_buckets=1024, retention=RACE_WINDOW)
    race(redis_cluster.url, client, "single", groups=40)


def test_hundreds_of_tasks_racing_across_periods(redis_cluster: ClusterProcess) -> None:
    """200 tasks on one event loop, the periods going by meanwhile.

    Periods of 2 s: a write round reads the id in every live period (31 here), and with 200 tasks
    sharing one loaded core a round of 1 s periods (62 of them) can take longer than a period for as
    long as the writer waits (`windowed_writes._STALL_S`); a boundary still passes every other second.
    """
    redis_cluster.flushall()
    docs = groups_of_near_duplicates(groups=20, size=10, seed=5)

    async def main() -> tuple[list[int], bool]:
        options = {"k": 3, "id_buckets": BUCKETS, "retention": Retention(60, 2)}
        async with await AsyncSimhashIndex.from_url(redis_cluster.url, "arace", **options) as index:
            stored = await race_tasks([index], docs, naive=False)
            return stored, (await index.verify()).ok

    stored, ok = asyncio.run(main())
    assert sorted(stored) == list(range(20)) and ok


def test_verify_and_stats_see_the_periods(redis_cluster_client: RedisCluster) -> None:
    client = redis_cluster_client
    index = windowed(client, "checked", Retention(60, 1))
    assert index.windows is not None
    index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(3)])
    wait_for_next_period(index)
    index.add_many([(f"e{i}", A ^ (i << 40)) for i in range(2)])
    assert [p.documents for p in collect(index).periods] == [3, 2]
    assert index.verify().ok
    index = windowed(client, "checked-long", Retention(600, 100))  # no boundary during the checks
    assert index.windows is not None
    index.add("e", A)
    table_key = index.windows.schema(index.windows.view().current).tables(A)[0]
    assert client.persist(table_key)
    report = index.verify()
    assert set(report.problems) == {"key without expiry"}, report.problems
    assert index.verify(repair=True).repaired and index.verify().ok
    assert client.pttl(table_key) > 0


def cut_at(store: Store, monkeypatch: pytest.MonkeyPatch, script: str, arguments: int) -> list[int]:
    """Make the next round trip calling a script (with that many arguments) fail before it is sent, as a
    lost server would; once."""
    sender: Any = store.sender
    execute = sender.execute
    sha = getattr(scripts, script.upper()).sha
    cuts: list[int] = []

    def cut(commands: list[Any], **kwargs: Any) -> list[Any]:
        called = [len(c) for c in commands if c[0] == b"EVALSHA" and c[1] == sha and len(c) == arguments]
        if not cuts and called:
            cuts.append(called[0])
            raise SimhashRedisError("cut off")
        return execute(commands, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(sender, "execute", cut)
    return cuts


@pytest.mark.parametrize(
    ("script", "arguments", "between"),
    [
        ("id_cas", 10, "before the commit"),  # the commit names the period: 10 arguments
        ("fp_ids", 8, "after the commit"),  # the new list entry carries the expiry: 8
        ("id_cas", 7, "while the old period is cleared"),  # the old entry's removal: 7
    ],
)
def test_a_replacement_cut_off_is_never_half_visible_and_a_rerun_completes_it(
    redis_cluster_client: RedisCluster,
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    arguments: int,
    between: str,
) -> None:
    index = windowed(redis_cluster_client, "cut", Retention(60, 1))
    index.add("a", A)
    wait_for_next_period(index)
    cuts = cut_at(index.store, monkeypatch, script, arguments)
    with pytest.raises(SimhashRedisError):
        index.add("a", A ^ 0xFF)
    assert cuts, between
    # Never listed under a fingerprint it no longer has (hidden from near() during a replacement, as on
    # any cluster); get finds it as the one or the other.
    assert index.get("a") in (A, A ^ 0xFF)
    assert index.near(A) == [] and index.near(A ^ 0xFF) in ([], [Match("a", A ^ 0xFF, 0)])
    monkeypatch.undo()
    assert index.add("a", A ^ 0xFF) in (Outcome.REPLACED, Outcome.UNCHANGED)
    assert index.near(A ^ 0xFF) == [Match("a", A ^ 0xFF, 0)] and index.near(A) == []
    assert index.get("a") == A ^ 0xFF and index.count() == (1, 1) and index.verify().ok


def test_a_move_with_the_same_fingerprint_is_never_hidden(
    redis_cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = windowed(redis_cluster_client, "same", Retention(60, 1, sliding=True))
    assert index.windows is not None
    index.add("a", A)
    wait_for_next_period(index)
    for script, arguments in (("id_cas", 10), ("fp_ids", 8), ("id_cas", 7)):
        cuts = cut_at(index.store, monkeypatch, script, arguments)
        with pytest.raises(SimhashRedisError):
            index.add("a", A)
        assert cuts and index.near(A) == [Match("a", A, 0)] and index.get("a") == A
        monkeypatch.undo()
    # A sliding refresh cut off anywhere leaves the document found, too.
    wait_for_next_period(index)
    cut_at(index.store, monkeypatch, "id_cas", 10)
    index._writes.seen([(b"a", encode_fp(A, 64))])  # a refresh that cannot be made is skipped
    assert index.near(A) == [Match("a", A, 0)] and index.get("a") == A
    monkeypatch.undo()
    assert index.add("a", A) is Outcome.UNCHANGED and index.count() == (1, 1) and index.verify().ok


def test_a_removal_takes_the_id_out_of_every_period(redis_cluster_client: RedisCluster) -> None:
    index = windowed(redis_cluster_client, "removed", Retention(60, 1))
    assert index.windows is not None
    index.add("a", A)
    wait_for_next_period(index)
    # An entry left in an older period (a write cut off after its commit) goes with the removal too.
    old = index.windows.view().windows[0]
    redis_cluster_client.hset(index.windows.schema(old).id_bucket(b"a"), b"a", encode_fp(A ^ 1, 64))
    assert index.remove("a") is True
    assert index.get("a") is None and index.near(A) == [] and index.count() == (0, 0)
    assert index.remove("a") is False


def test_a_sliding_window_keeps_what_is_seen_again(redis_cluster_client: RedisCluster) -> None:
    index = windowed(redis_cluster_client, "sliding", Retention(60, 1, sliding=True))
    assert index.windows is not None
    index.add_many([("a", A), ("c", A ^ 0xFFFF_0000)])
    wait_for_next_period(index)
    assert index.add_if_new("b", A ^ 1) == Match("a", A, 1)
    assert index.add_many([("d", A ^ 0xFFFF_0001)], unique=True) == [Match("c", A ^ 0xFFFF_0000, 1)]
    now = index.windows.view().current
    assert {w: docs for w, docs, _ in index.windows.counts()}[now] == 2
    wait_for_next_period(index)
    index.add("a", A ^ 0xFF00_0000_0000)
    index._writes.seen([(b"a", encode_fp(A, 64)), (b"gone", encode_fp(A, 64))])
    assert index.get("a") == A ^ 0xFF00_0000_0000 and index.get("gone") is None
    assert index.verify().ok and index.count() == (2, 2)


def test_a_worker_whose_clock_estimate_is_off_writes_where_the_node_says(
    redis_cluster_client: RedisCluster,
) -> None:
    index = windowed(redis_cluster_client, "skewed", Retention(30, 1))
    assert index.windows is not None
    index.windows.set_server_time(index.windows.now_ms() + 10_000)  # ten seconds ahead
    assert index.add("a", A) is Outcome.ADDED  # refused at the commit, written by the node's clock
    truth = server_ms(redis_cluster_client) // 1000
    assert {w for w, docs, _ in index.windows.counts() if docs} <= {truth, truth - 1}
    assert index.near(A) == [Match("a", A, 0)]


def test_bulk_loads_and_dumps_of_a_windowed_index(redis_cluster_client: RedisCluster) -> None:
    import io

    from simhash_redis.jobs.dump import export_index, import_index

    client = redis_cluster_client
    index = windowed(client, "loaded", Retention.of("1h"))
    pairs = [(f"d{i}", A ^ (i << 30)) for i in range(300)]
    assert index.bulk_add(pairs, window=120) == [Outcome.ADDED] * 300
    assert all(client.pttl(key) > 0 for key in period_keys(client, "loaded"))
    out = io.BytesIO()
    assert export_index(index, out) == 300
    index.drop()
    assert period_keys(client, "loaded") == []
    out.seek(0)
    assert import_index(client, out).added == 300
    again = SimhashIndex(client, "loaded")
    assert again.config.retention == Retention.of("1h")
    assert again.get_many([i for i, _ in pairs]) == [fp for _, fp in pairs]
    assert again.verify().ok


def test_a_race_that_fails_closes_every_connection(
    redis_cluster: ClusterProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One task of hundreds fails (as a WriteContention would end it): the others are stopped, and
    closing the index closes every connection (no socket left for the garbage collector to warn of)."""
    redis_cluster.flushall()
    docs = groups_of_near_duplicates(groups=20, size=10, seed=6)
    apply = Writes.apply
    calls: list[int] = []

    def failing(self: Writes, ops: list[Any], *fps: Any) -> list[Any]:
        calls.append(len(ops))
        if len(calls) == 20:
            raise WriteContention("the server's clock kept moving between periods")
        return apply(self, ops, *fps)

    monkeypatch.setattr(Writes, "apply", failing)

    async def main() -> None:
        options = {"k": 3, "id_buckets": BUCKETS, "retention": Retention(60, 1)}
        async with await AsyncSimhashIndex.from_url(redis_cluster.url, "afail", **options) as index:
            with pytest.raises(WriteContention):
                await race_tasks([index], docs, naive=False)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not unclosed, unclosed[:3]


def test_only_round_trips_that_write_wait_for_a_replica(
    redis_cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A windowed write's steps that only read (where each id is: HGET) send no WAIT; its writes do."""
    sent: list[list[Any]] = []
    original = ClusterTransport._send

    def recording(self: ClusterTransport, node: Any, commands: list[Any]) -> Any:
        sent.append(list(commands))
        return original(self, node, commands)

    index = SimhashIndex(redis_cluster_client, "waits", retention=Retention(60, 10), id_buckets=BUCKETS)
    monkeypatch.setattr(ClusterTransport, "_send", recording)
    assert index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(20)]) == [Outcome.ADDED] * 20
    monkeypatch.undo()
    names = [{bytes(command[0]).upper() for command in batch} for batch in sent]
    reads = [batch for batch in names if batch <= {b"HGET", b"WAIT"}]
    assert reads and all(b"WAIT" not in batch for batch in reads)
    assert any(b"WAIT" in batch for batch in names)  # the writes wait for a replica


@pytest.mark.parametrize(
    ("script", "arguments", "new"),
    [
        ("fp_ids", 7, A),  # a move with its fingerprint: cut before the old period's list lets it go
        ("id_cas", 7, A ^ 0xFF),  # a replacement: cut before the old period's id map lets it go
    ],
)
def test_a_move_cut_off_in_its_last_step_is_reported_and_repaired_by_verify(
    redis_cluster_client: RedisCluster,
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    arguments: int,
    new: int,
) -> None:
    index = windowed(redis_cluster_client, f"superseded-{script}", Retention(60, 1))
    index.add("a", A)
    wait_for_next_period(index)
    cuts = cut_at(index.store, monkeypatch, script, arguments)
    with pytest.raises(SimhashRedisError):
        index.add("a", new)
    assert cuts
    monkeypatch.undo()
    # Before, verify saw each period consistent on its own (or, for the replacement, completed the old
    # entry: near(A) then found the document under the fingerprint it no longer has).
    assert "id in an older period too" in index.verify().problems
    assert index.verify(repair=True).repaired
    assert index.verify().ok and index.count() == (1, 1) and index.get("a") == new
    assert index.near(new) == [Match("a", new, 0)]
    assert new == A or index.near(A) == []
