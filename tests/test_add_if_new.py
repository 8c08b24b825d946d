"""add_if_new and add_many(unique=True): near-duplicates are refused atomically, even under races."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from simhash_redis import Match, Outcome, SimhashIndex
from simhash_redis.errors import WriteContention
from simhash_redis.index import unique
from simhash_redis.store import BucketLocks
from tests.servers import ClusterProcess

A = 0x0123456789ABCDEF
_CLIENTS = {"real": "redis_client", "fake": "fake_client", "cluster": "redis_cluster_client"}


@pytest.fixture(params=sorted(_CLIENTS))
def client(request: pytest.FixtureRequest) -> redis.Redis:
    """A real server (the guarded script), fakeredis, and a local Redis Cluster (bucket locks)."""
    found: redis.Redis = request.getfixturevalue(_CLIENTS[request.param])
    return found


def test_add_if_new_contract(client: redis.Redis) -> None:
    index = SimhashIndex(client, "uniq", k=3, id_buckets=1024)
    assert index.add_if_new("a", A) is None
    assert index.add_if_new("b", A ^ 0b111) == Match("a", A, 3)  # distance exactly k is a duplicate
    assert index.add_if_new("c", A ^ 0b1111) is None  # distance 4 is not
    assert index.add_if_new("a", A) == Match("a", A, 0)  # already stored: reports itself
    assert index.count() == (2, 2)
    assert index.get("b") is None


def test_unique_batch_checks_earlier_documents_of_the_same_batch(client: redis.Redis) -> None:
    index = SimhashIndex(client, "uniq", k=3, batch_size=4, id_buckets=1024)
    items = [("x1", A), ("x2", A ^ 1), ("y1", 0), ("x3", A ^ 0b11), ("y2", 0b1), ("z", 2**64 - 1)]
    results = index.add_many(items, unique=True)
    assert results[0] is Outcome.ADDED
    assert results[1] == Match("x1", A, 1)
    assert results[2] is Outcome.ADDED
    assert results[3] == Match("x1", A, 2)
    assert results[4] == Match("y1", 0, 1)
    assert results[5] is Outcome.ADDED
    assert len(index) == 3


def test_unique_replacement_of_far_fingerprint(client: redis.Redis) -> None:
    index = SimhashIndex(client, "uniq", k=3, id_buckets=1024)
    index.add("a", A)
    assert index.add_many([("a", A ^ (2**64 - 1))], unique=True) == [Outcome.REPLACED]
    assert index.near(A) == []


#: The first lines of a racer's script: `retried` counts its pauses before another read-check-write
#: round, each after it met another racer's write or lock.
COUNT_RETRIES = textwrap.dedent(
    """
    from simhash_redis.index import unique
    retried = 0
    pause = unique.pause

    def counted(seconds):
        global retried
        retried += 1
        pause(seconds)

    unique.pause = counted
    """
)
RACER = COUNT_RETRIES + textwrap.dedent(
    """
    import json, random, sys, time
    from simhash_redis import SimhashIndex
    from simhash_redis.transport.connection import client_from_url
    url, me, groups, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    client = client_from_url(url)  # a cluster URL gives a cluster client
    index = SimhashIndex(client, "race", k=3, batch_size=4, id_buckets=1024)
    rng = random.Random(1234)
    centres = [rng.getrandbits(64) for _ in range(groups)]
    stored = 0
    for start in range(0, groups, 4):
        # A barrier per step: all eight racers reach the same groups at the same moment.
        client.incr(f"arrive:{start}")
        while int(client.get(f"arrive:{start}")) < 8:
            time.sleep(0.0005)  # the racers share two cores with the rest of the suite
        docs = [(f"g{g}-p{me}", centres[g] ^ (1 << (7 * me))) for g in range(start, min(start + 4, groups))]
        if mode == "single":
            stored += sum(index.add_if_new(i, fp) is None for i, fp in docs)
        elif mode == "batch":
            stored += sum(not hasattr(r, "distance") for r in index.add_many(docs, unique=True))
        else:  # the naive check-then-insert this test exists to reject
            for i, fp in docs:
                if not index.near(fp):
                    index.add(i, fp)
                    stored += 1
    print(json.dumps([stored, retried]))
    """
)


def race(url: str, client: redis.Redis | RedisCluster, mode: str, groups: int) -> int:
    """Eight racer processes on `groups` groups: exactly one document of each is stored. Returns the
    read-check-write rounds the racers repeated (each after meeting another's write or lock)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, url, str(p), str(groups), mode], stdout=subprocess.PIPE
        )
        for p in range(8)
    ]
    client.set("go", 1)
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    counts = [json.loads(out) for out in outs]
    wins = sum(stored for stored, _ in counts)
    index = SimhashIndex(client, "race")
    stored_ids = [
        i for i, fp in zip(_all_ids(groups), index.get_many(_all_ids(groups)), strict=True) if fp is not None
    ]
    per_group: dict[str, int] = {}
    for doc_id in stored_ids:
        group = doc_id.split("-")[0]
        per_group[group] = per_group.get(group, 0) + 1
    assert wins == groups
    assert len(index) == groups
    assert sorted(per_group.values()) == [1] * groups
    return sum(retried for _, retried in counts)


def _all_ids(groups: int) -> list[str]:
    return [f"g{g}-p{p}" for g in range(groups) for p in range(8)]


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_eight_processes_racing(redis_url: str, redis_client: redis.Redis, mode: str) -> None:
    race(redis_url, redis_client, mode, groups=200)


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_eight_processes_racing_on_a_cluster(redis_cluster: ClusterProcess, mode: str) -> None:
    """On a cluster the check and the write hold the documents' bucket locks instead of a guard."""
    redis_cluster.flushall()
    client = redis_cluster.client()
    # Forty groups, each raced for by all eight: the racers meet each other's locks about a dozen
    # times a group (more groups would only repeat that). Asserted: that they met at all (racers a
    # loaded machine runs one after another may meet rarely, never all forty times).
    assert race(redis_cluster.url, client, mode, groups=40) > 0
    client.close()


def test_the_race_catches_check_then_insert(redis_url: str, redis_client: redis.Redis) -> None:
    with pytest.raises(AssertionError):
        race(redis_url, redis_client, "naive", groups=200)


def test_its_own_entry_comes_before_a_nearer_other(client: redis.Redis) -> None:
    index = SimhashIndex(client, "uniq", k=3, id_buckets=1024)
    index.add_many([("b", A), ("a", A ^ 1)])
    assert index.add_if_new("a", A) == Match("a", A ^ 1, 1)


@pytest.mark.parametrize("other", ["x", "y"])
def test_an_id_written_again_later_in_the_batch_keeps_its_last_text(client: redis.Redis, other: str) -> None:
    """A document left to the next round (near an earlier one of its batch) was written after the batch's
    later rewrite of that earlier id: [x: A, x: A, x: C] left x at A and reported C REPLACED; [x: A, y:
    near A, x: C] stored y, a copy of a text x no longer has. As one add-if-new at a time: x ends at C."""
    index = SimhashIndex(client, "again", k=3, id_buckets=1024)
    far = A ^ (2**64 - 1)
    assert index.add_many([("x", A), (other, A ^ 1), ("x", far)], unique=True) == [
        Outcome.ADDED,
        Match("x", A, 1),
        Outcome.REPLACED,
    ]
    assert index.get("x") == far and index.count() == (1, 1)


def test_a_match_that_an_earlier_document_of_the_batch_rewrites_is_read_again(client: redis.Redis) -> None:
    """x stored at A, then [x: C, y: A]: y was reported a copy of x's text A, which the same call replaced
    (y dropped, nothing near it left); [x: C, x: near A] left x at C, its last text dropped as a copy."""
    index = SimhashIndex(client, "moved", k=3, id_buckets=1024)
    far = A ^ (2**64 - 1)
    index.add("x", A)
    assert index.add_many([("x", far), ("y", A)], unique=True) == [Outcome.REPLACED, Outcome.ADDED]
    index.add("x", A)
    index.remove("y")
    assert index.add_many([("x", far), ("x", A ^ 1)], unique=True) == [Outcome.REPLACED, Outcome.REPLACED]
    assert index.get("x") == A ^ 1


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["real", "fake"])
def test_a_batch_answers_and_stores_as_one_add_if_new_at_a_time(
    request: pytest.FixtureRequest, kind: str, seed: int
) -> None:
    """Batches of few ids and fingerprints near each other (ids written again, near-duplicates of texts
    an id no longer has) against add_if_new called for each document in turn. (Not on a cluster, whose
    documents after one waiting for a lock go on: one may rewrite an id the waiting one then misses.)"""
    client = request.getfixturevalue(_CLIENTS[kind])
    rng = random.Random(seed)
    centres = [rng.getrandbits(64) for _ in range(4)]
    batch, one = SimhashIndex(client, "batch", k=3), SimhashIndex(client, "one", k=3)

    def doc() -> tuple[str, int]:
        fp = rng.choice(centres)
        for _ in range(rng.choice([0, 1, 2, 3, 5])):
            fp ^= 1 << rng.randrange(64)
        return f"id{rng.randrange(5)}", fp

    for _ in range(30):
        before = [doc() for _ in range(rng.randrange(3))]
        items = [doc() for _ in range(rng.randrange(2, 9))]
        for index in (batch, one):
            index.remove_many([f"id{n}" for n in range(5)])
            index.add_many(before)
        got = [r if isinstance(r, Match) else None for r in batch.add_many(items, unique=True)]
        assert got == [one.add_if_new(doc_id, fp) for doc_id, fp in items], (before, items)
        ids = [f"id{n}" for n in range(5)]
        assert batch.get_many(ids) == one.get_many(ids), (before, items)


def test_an_id_written_many_times_in_a_batch_takes_no_retries(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round writes an id once: 60 versions of a page in one batch take 60 rounds, none of them a retry
    (which would end in WriteContention after 40), nor a pause."""
    monkeypatch.setattr(unique, "pause", lambda seconds: pytest.fail("paused"))
    index = SimhashIndex(client, "versions", k=3, id_buckets=1024)
    rng = random.Random(3)
    versions = [("page", rng.getrandbits(64)) for _ in range(60)]
    assert index.add_many(versions, unique=True) == [Outcome.ADDED] + [Outcome.REPLACED] * 59
    assert index.get("page") == versions[-1][1]


class _Clock:
    """time.monotonic for unique.py: ten seconds go by at each look."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 10.0
        return self.now


@pytest.mark.parametrize("changing", [True, False], ids=["changing-hands", "held-all-along"])
def test_a_document_waiting_for_locks_that_change_hands_keeps_waiting(
    redis_cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch, changing: bool
) -> None:
    """A loaded machine: the bucket locks a document waits for are taken by one worker after another
    for longer than the patience for a stuck lock; it gives up only on a lock held all along."""
    index = SimhashIndex(redis_cluster_client, "patient", k=3, id_buckets=1024)
    real = BucketLocks.acquire
    rounds: list[int] = []

    def others_first(self: BucketLocks, documents: list[tuple[int, list[bytes]]]) -> Any:
        rounds.append(1)
        if len(rounds) <= 2 * unique._UNIQUE_ROUNDS:
            self.holding.clear()
            self.blockers = {doc: b"other:%d" % (len(rounds) if changing else 0) for doc, _ in documents}
            return [False] * len(documents), []
        return real(self, documents)

    monkeypatch.setattr(BucketLocks, "acquire", others_first)
    monkeypatch.setattr(unique, "time", _Clock())
    monkeypatch.setattr(unique, "pause", lambda seconds: None)
    if changing:
        assert index.add_if_new("waited", 0x0123456789ABCDEF) is None
        assert index.get("waited") == 0x0123456789ABCDEF
    else:
        with pytest.raises(WriteContention):
            index.add_if_new("waited", 0x0123456789ABCDEF)
        assert unique._UNIQUE_ROUNDS <= len(rounds) < 2 * unique._UNIQUE_ROUNDS


def shared_table(count: int) -> list[tuple[str, int]]:
    """`count` documents with one table key (the low 16 bits), every two at distance > 3, then a copy at
    distance 1 of every fifteenth (its near-duplicate earlier in the same batch)."""
    rng = random.Random(5)
    fps: list[int] = []
    while len(fps) < count:
        fp = rng.getrandbits(48) << 16 | 0x1234
        if all(bin(fp ^ other).count("1") > 3 for other in fps):
            fps.append(fp)
    copies = [(f"c{i}", fps[i] ^ 1 << (20 + i % 40)) for i in range(0, count, 15)]
    return [(f"d{i}", fp) for i, fp in enumerate(fps)] + copies


@pytest.mark.parametrize("kind", ["real", "fake"])
def test_one_writer_meets_no_contention_from_its_own_batch(request: pytest.FixtureRequest, kind: str) -> None:
    """A hundred and fifty documents of one batch share a table set but none is near another: the guard
    of each expects what the documents before it add, so one writer stores them all in one call (each
    added member used to fail the guards after it: one document per round, until the rounds ran out).

    A cluster's add-if-new takes bucket locks instead of guards: there, such documents take turns."""
    client = request.getfixturevalue(_CLIENTS[kind])
    index = SimhashIndex(client, "shared", k=3, id_buckets=1024)
    items = shared_table(150)
    results = index.add_many(items, unique=True)
    assert results[:150] == [Outcome.ADDED] * 150
    assert results[150:] == [Match(f"d{i}", items[i][1], 1) for i in range(0, 150, 15)]
    assert len(index) == 150


@pytest.mark.parametrize(("kind", "retention"), [("real", None), ("fake", None), ("real", "30d")])
def test_one_writer_rewriting_ids_of_a_shared_table(
    request: pytest.FixtureRequest, kind: str, retention: str | None
) -> None:
    """A re-crawl: half of a batch sharing a table set are ids stored before with other fingerprints
    (the texts changed beyond k). Such a document is written only in the write's second script call
    (the first learns the id's fingerprint); the documents after it, written in the first, must not
    fail their guards for expecting it there (one document per round until WriteContention). The same
    in an index with a retention window (its own script format, the same guard)."""
    client = request.getfixturevalue(_CLIENTS[kind])
    index = SimhashIndex(client, "rewrites", k=3, id_buckets=1024, retention=retention)
    items = shared_table(150)
    fresh = shared_table(300)[150:300]  # same table key, none within k of the batch's
    before = [(doc_id, fresh[i][1]) for i, (doc_id, _) in enumerate(items[:150]) if i % 2]
    assert index.add_many(before) == [Outcome.ADDED] * 75
    results = index.add_many(items, unique=True)
    assert results[:150] == [Outcome.REPLACED if i % 2 else Outcome.ADDED for i in range(150)]
    assert results[150:] == [Match(f"d{i}", items[i][1], 1) for i in range(0, 150, 15)]
    assert len(index) == 150
    assert index.get_many([doc_id for doc_id, _ in items[:150]]) == [fp for _, fp in items[:150]]


def test_on_a_cluster_documents_waiting_for_their_own_batch_do_not_pause(
    redis_cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster's documents sharing a bucket take turns at its lock, a round each: a document waiting
    only for documents of its own batch (done and unlocked by the end of the round) is not paused as if
    other workers were writing (one writer took minutes on pages of one template)."""
    pauses: list[float] = []
    monkeypatch.setattr(unique, "pause", pauses.append)
    index = SimhashIndex(redis_cluster_client, "turns", k=3, id_buckets=1024)
    items = shared_table(45)
    results = index.add_many(items, unique=True)
    assert results[:45] == [Outcome.ADDED] * 45
    assert results[45:] == [Match(f"d{i}", items[i][1], 1) for i in range(0, 45, 15)]
    assert pauses == []


def _rounds_settling(monkeypatch: pytest.MonkeyPatch, most: int) -> list[int]:
    """add_if_new's rounds made to settle none of their documents when they take more than `most` (as
    one that outlasts a retention window's period); the sizes of the rounds run."""
    real = unique.UniqueWrites._round
    sizes: list[int] = []

    def rounds(
        self: unique.UniqueWrites,
        ids: Any,
        fps: Any,
        judge: Any,
        locks: Any,
        pending: list[int],
        results: Any,
    ) -> tuple[list[int], bool]:
        sizes.append(len(pending))
        if len(pending) > most:
            return list(pending), False
        return real(self, ids, fps, judge, locks, pending, results)

    monkeypatch.setattr(unique.UniqueWrites, "_round", rounds)
    monkeypatch.setattr(unique, "pause", lambda seconds: None)
    return sizes


def test_rounds_too_long_to_settle_anything_are_shortened_until_they_do(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One writer whose rounds of more than 8 documents settle none: the rounds are halved until they
    settle, and every document is stored (before: WriteContention after the round budget, with no other
    writer)."""
    index = SimhashIndex(redis_client, "long-rounds", k=3)
    sizes = _rounds_settling(monkeypatch, 8)
    rng = random.Random(8)
    docs = [(f"d{i}", rng.getrandbits(64)) for i in range(100)]
    assert index.add_many(docs, unique=True) == [Outcome.ADDED] * 100
    assert [index.get(doc_id) for doc_id, _ in docs] == [fp for _, fp in docs]
    # Halved until a round settles, then doubled after each that settles its part (and halved again).
    assert sizes[:6] == [100, 50, 25, 12, 6, 12]


def test_rounds_that_never_settle_still_end_in_write_contention(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SimhashIndex(redis_client, "never", k=3)
    rounds = _rounds_settling(monkeypatch, 0)
    with pytest.raises(WriteContention):
        index.add_many([(f"d{i}", i << 20) for i in range(64)], unique=True)
    assert len(rounds) == unique._UNIQUE_ROUNDS and rounds[-1] == 1


@pytest.mark.parametrize("mode", ["plain", "verified", "windowed"])
def test_a_racer_storing_the_same_document_first_makes_it_already_stored(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Two crawlers meeting one URL with one text at once: the one whose read came before the other's
    write used to report it stored too (the script found the id stored as it would write it: unchanged),
    so both kept the page. It is the other's now: the id's own entry, "already stored"."""
    from simhash_redis import VerifiedIndex

    text = " ".join(
        random.Random(7).choice(["storm", "coast", "roads", "rain", "region", "bank"]) for _ in range(80)
    )
    options: dict[str, Any] = {"retention": "7d"} if mode == "windowed" else {}

    def opened() -> SimhashIndex | VerifiedIndex:
        if mode == "plain":
            return SimhashIndex(redis_client, "same", k=3, **options)
        return VerifiedIndex.on_client(redis_client, "same", k=3, **options)

    first, second = opened(), opened()  # two workers
    reads = first._unique.reads
    read = reads.near_and_members

    def the_other_stores_it_meanwhile(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        monkeypatch.setattr(reads, "near_and_members", read)
        assert second.add_if_new("page", text) is None
        return found

    monkeypatch.setattr(reads, "near_and_members", the_other_stores_it_meanwhile)
    duplicate = first.add_if_new("page", text)
    assert duplicate is not None and (duplicate.id, duplicate.distance) == ("page", 0)
    assert first.add_if_new("page", text) == duplicate  # as a later crawl of the page finds it


@pytest.mark.parametrize("retention", [None, "1h"])
def test_a_rewrite_whose_pauses_others_write_in_still_gets_through(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, retention: str | None
) -> None:
    """A write of an id that others keep rewriting: each round learns the id's value, and the next one
    sends the write against it. A pause came before every round from the second, so each was sent with
    a value from before the pause, which busy writers had changed by then: it met them every round until
    WriteContention (tests/test_asyncio.py's three tasks on one id, one run in five). A resend after a
    pause now reads the id's value first."""
    from simhash_redis.store import write_args, writes

    index = SimhashIndex(redis_client, "busy", k=3, retention=retention)
    others = SimhashIndex(redis_client, "busy", k=3, retention=retention)
    index.add("x", A)
    values = iter(range(1, 1000))
    busy = [False]  # the other writer's own rounds and pauses are left alone

    def another_writes() -> None:
        busy[0] = True
        try:
            others.add("x", A ^ (next(values) << 20))
        finally:
            busy[0] = False

    # Another writer writes after this one's first round, and whenever this one pauses.
    monkeypatch.setattr(write_args, "pause", lambda seconds: None if busy[0] else another_writes())
    next_round, in_rounds = writes.Progress.next_round, writes.in_rounds

    def first_round_then_another(progress: writes.Progress, retry: list[Any]) -> None:
        if progress.rounds == 0 and not busy[0]:
            another_writes()
        next_round(progress, retry)

    def windowed_first_round_then_another(
        windows: Any, attempt: Any, pending: Any, read_again: Any = None
    ) -> None:
        rounds = [0]

        def counted(view: Any, part: Any) -> Any:
            result = attempt(view, part)
            rounds[0] += 1
            if rounds[0] == 1 and not busy[0]:
                another_writes()
            return result

        in_rounds(windows, counted, pending, read_again)

    monkeypatch.setattr(writes.Progress, "next_round", first_round_then_another)
    monkeypatch.setattr(writes, "in_rounds", windowed_first_round_then_another)
    assert index.add("x", A ^ 0xFFFF) is Outcome.REPLACED
    assert index.get("x") == A ^ 0xFFFF
