"""Lost replies: connections killed during a load, and replies lost after the server applied the command.

Each scenario runs the same deterministic workload twice on a real server, once cleanly and once under
faults, and requires the two final indexes to be identical: every id's fingerprint, the counts, a clean
verify(), and the full key/value snapshot of the index's keys. The library retries whole batches, so a
batch applied by the server whose reply never arrived is sent again; the write script must make that
second application a no-op.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from simhash_redis import Match, Outcome, SimhashIndex
from simhash_redis.store import store as store_module
from simhash_redis.transport import Backoff
from tests.faultproxy import FaultProxy
from tests.servers import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
NAME = "lost"
WORKERS = 3
SIZE = 400
#: Enough retries that a batch always gets through while faults are injected every few milliseconds.
PATIENT = Backoff(retries=80, base=0.001, cap=0.02)

Snapshot = dict[bytes, tuple[str, Any]]


# -- the workload ----------------------------------------------------------------------------------------


def worker_ids(worker: int, size: int = SIZE) -> list[str]:
    """Every id the workload of one worker touches (stored or not at the end)."""
    ids = [f"w{worker}-{i}" for i in range(size)]
    ids += [f"w{worker}-missing-{i}" for i in range(20)]
    ids += [f"w{worker}-u{j}" for j in range(130)]
    return ids


def workload(index: SimhashIndex, worker: int, size: int = SIZE) -> None:
    """A deterministic mix of every kind of write, on ids and fingerprints only this worker uses.

    Adds (some ids sharing a fingerprint), replacements (some onto a fingerprint another id has),
    removals (some of unknown ids), single-document calls, unique adds of near-duplicates and of new
    documents, and a repeated batch. The final state depends only on `worker` and `size`.
    """
    rng = random.Random(1000 + worker)
    ids = [f"w{worker}-{i}" for i in range(size)]
    fps = [rng.getrandbits(64) for _ in range(size)]
    for i in range(7, size, 7):
        fps[i] = fps[i - 1]  # ids sharing one fingerprint
    index.add_many(zip(ids, fps, strict=True))
    index.add_many((ids[i], rng.getrandbits(64) if i % 3 else fps[i + 1]) for i in range(0, size - 1, 5))
    index.remove_many([ids[i] for i in range(0, size, 11)] + [f"w{worker}-missing-{i}" for i in range(20)])
    for i in range(3, 60, 4):
        index.add(ids[i], fps[i] ^ 0xFF00)
        index.remove(ids[i + 1])
    unique = [
        (f"w{worker}-u{j}", fps[j] ^ (1 << (j % 64)) if j % 2 else rng.getrandbits(64)) for j in range(100)
    ]
    unique += [(f"w{worker}-u{j}", unique[j - 100][1] ^ 0b11) for j in range(100, 110)]
    index.add_many(unique, unique=True)
    for j in range(110, 130):
        index.add_if_new(f"w{worker}-u{j}", fps[j] ^ 0b101 if j % 2 else rng.getrandbits(64))
    index.add_many(zip(ids[:100], fps[:100], strict=True))


WORKER = textwrap.dedent(
    """
    import sys
    import redis
    from simhash_redis import SimhashIndex
    from tests.test_lost_replies import NAME, PATIENT, workload
    url, worker = sys.argv[1], int(sys.argv[2])
    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    index = SimhashIndex(client, NAME, k=3, id_buckets=64, batch_size=50, backoff=PATIENT)
    workload(index, worker)
    print("done")
    """
)


def run_workers(url: str) -> None:
    """Run the workload of every worker in its own process against url, all at once."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, str(w)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for w in range(WORKERS)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0 and out.strip() == "done", err[-3000:]


# -- comparing indexes -----------------------------------------------------------------------------------


def snapshot(client: redis.Redis, pattern: str) -> Snapshot:
    """Every key matching pattern with its type and its whole value (hashes as dicts, sets as sets), but
    the write calls' reply records (named by each call, expiring within a minute)."""
    keys = sorted({key for key in client.scan_iter(match=pattern, count=1000) if b":reply:" not in key})
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.type(key)
        kinds = [k.decode() if isinstance(k, bytes) else k for k in pipe.execute()]
        for key, kind in zip(keys, kinds, strict=True):
            if kind == "hash":
                pipe.hgetall(key)
            elif kind == "set":
                pipe.smembers(key)
            else:
                pipe.dump(key)
        values = pipe.execute()
    return {key: (kind, value) for key, kind, value in zip(keys, kinds, values, strict=True)}


def state(client: redis.Redis) -> dict[str, Any]:
    """What must be equal between a clean and a faulty run."""
    index = SimhashIndex(client, NAME)
    ids = [i for w in range(WORKERS) for i in worker_ids(w)]
    report = index.verify()
    assert report.ok, report.as_dict()
    return {
        "fingerprints": dict(zip(ids, index.get_many(ids), strict=True)),
        "count": index.count(),
        "snapshot": snapshot(client, f"simhash:{NAME}:*"),
    }


def assert_same(clean: dict[str, Any], faulty: dict[str, Any]) -> None:
    """Compare two `state`s piece by piece, so a failure says which piece differs."""
    assert faulty["count"] == clean["count"]
    differing = {i for i, fp in clean["fingerprints"].items() if faulty["fingerprints"][i] != fp}
    assert not differing, sorted(differing)[:20]
    a, b = clean["snapshot"], faulty["snapshot"]
    assert set(b) == set(a), (sorted(set(a) - set(b))[:10], sorted(set(b) - set(a))[:10])
    assert [k for k in a if a[k] != b[k]] == []


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """A private server for this module."""
    with ServerProcess() as srv:
        yield srv


@pytest.fixture(scope="module")
def clean_state(server: ServerProcess) -> dict[str, Any]:
    """The index the workload leaves when nothing goes wrong."""
    server.flushall()
    run_workers(server.url)
    with server.client() as client:
        result = state(client)
    assert result["count"][0] > WORKERS * SIZE // 2  # the workload really stored something
    return result


def fresh(server: ServerProcess) -> redis.Redis:
    """An admin client to an empty server that has forgotten its scripts (so NOSCRIPT is hit too)."""
    server.flushall()
    client = server.client()
    client.script_flush()
    return client


# -- scenarios -------------------------------------------------------------------------------------------


def test_connections_killed_repeatedly_during_a_load(
    server: ServerProcess, clean_state: dict[str, Any]
) -> None:
    """CLIENT KILL TYPE normal in a loop from another client while three workers load."""
    admin = fresh(server)
    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        rng = random.Random(5)
        with server.client() as own:
            # Faults bounded in number, not only in rate: on a slow machine every attempt would die.
            while sum(killed) < 60 and not stop.wait(rng.uniform(0.002, 0.015)):
                killed.append(int(own.client_kill_filter(_type="normal")))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        # The same work again changes nothing (every write is idempotent), so it is repeated until
        # enough connections have died under it, however fast the machine runs the load.
        for _ in range(10):
            run_workers(server.url)
            if sum(killed) >= 20:
                break
    finally:
        stop.set()
        thread.join(timeout=10)
    assert sum(killed) >= 20, f"only {sum(killed)} connections were killed: the test injected no faults"
    assert_same(clean_state, state(admin))
    admin.close()


def test_replies_lost_after_the_server_applied_them(
    server: ServerProcess, clean_state: dict[str, Any]
) -> None:
    """A proxy that closes the connection instead of forwarding ~15% of the replies."""
    admin = fresh(server)
    with FaultProxy(server.port, drop_rate=0.15, seed=11) as proxy:
        run_workers(proxy.url)
    assert proxy.dropped_after_write >= 10, (proxy.dropped, proxy.dropped_after_write)
    assert_same(clean_state, state(admin))
    admin.close()


# -- one lost reply, deterministically -------------------------------------------------------------------


@pytest.fixture
def proxied(server: ServerProcess) -> Iterator[tuple[SimhashIndex, FaultProxy, redis.Redis]]:
    """An index reached through a proxy that loses nothing until armed, and an admin client."""
    admin = fresh(server)
    with FaultProxy(server.port) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = SimhashIndex(client, NAME, k=3, backoff=Backoff(retries=3, base=0.001, cap=0.01))
        yield index, proxy, admin
        client.close()
    admin.close()


A = 0x0123456789ABCDEF
B = 0xFEDCBA9876543210


def assert_consistent(index: SimhashIndex, expected: dict[str, int | None]) -> None:
    """The index holds exactly the expected ids, counted once each."""
    assert dict(zip(expected, index.get_many(list(expected)), strict=True)) == expected
    stored = [fp for fp in expected.values() if fp is not None]
    assert index.count() == (len(stored), len(set(stored)))
    assert index.verify().ok


def test_lost_reply_to_an_add_is_not_counted_twice(
    proxied: tuple[SimhashIndex, FaultProxy, redis.Redis],
) -> None:
    index, proxy, _ = proxied
    proxy.arm()
    assert index.add("x", A) is Outcome.ADDED  # the first attempt's outcome, from its reply record
    assert proxy.dropped_after_write == 1
    index.add("y", A)
    assert_consistent(index, {"x": A, "y": A})


def each_write_reply_lost(proxy: FaultProxy, writes: int = 2) -> Iterator[int]:
    """Yield the number of write round trips to let through, once per write round trip an operation may
    make (it may learn the id's current fingerprint in one and change it in the next); the caller sets
    up its state, calls ``proxy.arm(skip)`` and runs the operation. Fails if no reply was lost at all
    (the test would prove nothing)."""
    lost = 0
    for skip in range(writes):
        before = proxy.dropped_after_write
        yield skip
        if proxy.armed:
            proxy.disarm()  # the operation made fewer round trips than that
        lost += proxy.dropped_after_write - before
    assert lost >= 1, "no reply was lost"


def test_lost_reply_to_a_replacement(proxied: tuple[SimhashIndex, FaultProxy, redis.Redis]) -> None:
    index, proxy, _ = proxied
    for skip in each_write_reply_lost(proxy):
        index.drop()
        index = SimhashIndex(index.client, NAME, k=3, backoff=index.store.sender.backoff)
        index.add_many([("x", A), ("y", A)])
        proxy.arm(skip)
        # The first call finds x with A; the second replaces it: either reply lost, still REPLACED.
        assert index.add("x", B) is Outcome.REPLACED
        assert_consistent(index, {"x": B, "y": A})
        assert [m.id for m in index.near(A)] == ["y"]


def test_lost_reply_to_a_removal(proxied: tuple[SimhashIndex, FaultProxy, redis.Redis]) -> None:
    index, proxy, _ = proxied
    for skip in each_write_reply_lost(proxy):
        index.drop()
        index = SimhashIndex(index.client, NAME, k=3, backoff=index.store.sender.backoff)
        index.add_many([("x", A), ("y", B), ("z", B)])
        proxy.arm(skip)
        assert index.remove("x") is True  # even when the reply to the removal itself was lost
        if proxy.armed:
            proxy.disarm()
        proxy.arm(skip)
        assert index.remove("z") is True  # z shares its fingerprint with y
        assert_consistent(index, {"x": None, "y": B, "z": None})


def test_lost_reply_to_add_if_new(proxied: tuple[SimhashIndex, FaultProxy, redis.Redis]) -> None:
    index, proxy, _ = proxied
    proxy.arm()
    assert index.add_if_new("x", A) is None  # stored, even though the client never heard so at first
    assert proxy.dropped_after_write == 1
    assert index.add_if_new("y", A ^ 1) is not None
    assert_consistent(index, {"x": A, "y": None})


@pytest.mark.parametrize("lost_part", range(4))
def test_lost_reply_to_one_part_of_a_large_batch(
    proxied: tuple[SimhashIndex, FaultProxy, redis.Redis], monkeypatch: pytest.MonkeyPatch, lost_part: int
) -> None:
    # A large batch of adds goes as parts (here of 3); the reply to one part is lost after the server
    # applied it: the conversation resumes at that part, its outcomes are the first attempt's, and
    # nothing is stored or counted twice.
    monkeypatch.setattr(store_module, "PART", 3)
    index, proxy, _ = proxied
    index.add("warm", B)  # the script is loaded: the armed drop hits a part, not a NOSCRIPT reply
    docs = {f"p{i}": (A ^ (i << 40)) + i for i in range(12)}
    proxy.arm(skip=lost_part)
    outcomes = index.add_many(docs.items())
    assert proxy.dropped_after_write == 1
    assert outcomes == [Outcome.ADDED] * 12  # the lost part's too: its reply is kept for the resend
    assert_consistent(index, {"warm": B, **docs})


@pytest.mark.parametrize("lost", [b"HGETALL", b"$4\r\nHGET\r\n"])  # the read's first round trip, its second
def test_lost_reply_to_add_if_news_read(server: ServerProcess, lost: bytes) -> None:
    """A reply to add_if_new's read (its table sets and bucket in one pass, then the ids of hits outside
    the bucket) is lost: read again afresh, the guard built from the second read's members alone."""
    admin = fresh(server)
    with FaultProxy(server.port, write_marker=lost) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=10)
        index = SimhashIndex(client, NAME, k=3, backoff=Backoff(retries=3, base=0.001, cap=0.01))
        others = {f"n{i}": B ^ (0xF << (4 * i)) for i in range(1, 8)}  # in a table set of z, 5 bits away
        index.add_many([("x", A), *others.items()])
        proxy.arm()
        assert index.add_if_new("y", A ^ 1) == Match("x", A, 1)  # x is in another bucket: asked for
        assert proxy.dropped_after_write == 1
        proxy.arm()
        assert index.add_if_new("z", B ^ (1 << 40)) is None  # its tables hold near misses: a real guard
        assert proxy.dropped_after_write == (2 if lost == b"HGETALL" else 1)  # no hit: no second trip
        proxy.disarm()
        assert_consistent(index, {"x": A, "y": None, "z": B ^ (1 << 40), **others})
        client.close()
    admin.close()


@pytest.mark.parametrize("lost_part", range(4))
def test_lost_reply_to_one_part_of_a_large_add_if_new_batch(
    proxied: tuple[SimhashIndex, FaultProxy, redis.Redis], monkeypatch: pytest.MonkeyPatch, lost_part: int
) -> None:
    # Add-if-new's guarded adds go as parts too (here of 3): a part's reply is lost after the server
    # applied it; sent again, its documents are reported added (the reply kept for the resend), no other
    # is refused, and nothing is stored or counted twice.
    monkeypatch.setattr(store_module, "PART", 3)
    index, proxy, _ = proxied
    index.add("warm", B)
    rng = random.Random(12)
    docs = {f"p{i}": rng.getrandbits(64) for i in range(12)}
    copies = [(f"c{i}", docs[f"p{i}"] ^ 1) for i in range(0, 12, 4)]  # near-duplicates, in the batch
    proxy.arm(skip=lost_part)
    outcomes = index.add_many([*docs.items(), *copies], unique=True)
    assert proxy.dropped_after_write == 1
    assert outcomes[:12] == [Outcome.ADDED] * 12
    assert outcomes[12:] == [Match(f"p{i}", docs[f"p{i}"], 1) for i in range(0, 12, 4)]
    assert_consistent(index, {"warm": B, **docs, **{doc_id: None for doc_id, _ in copies}})


def test_a_lost_reply_reports_what_the_first_attempt_did(
    proxied: tuple[SimhashIndex, FaultProxy, redis.Redis],
) -> None:
    """Outcomes after a lost reply are the first attempt's (the loader's counts, dump's tallies and
    repeat detection rely on them): a new id ADDED, a replacement REPLACED, a removal True, in one
    batch, whichever of its calls lost its reply."""
    index, proxy, admin = proxied
    for skip in each_write_reply_lost(proxy):
        index.drop()
        index = SimhashIndex(index.client, NAME, k=3, backoff=index.store.sender.backoff)
        index.add_many([("kept", A), ("moved", A), ("gone", B)])
        proxy.arm(skip)
        outcomes = index.add_many([("new", A ^ 1), ("moved", B ^ 1), ("kept", A)])
        assert outcomes == [Outcome.ADDED, Outcome.REPLACED, Outcome.UNCHANGED]
        proxy.disarm()
        proxy.arm(skip)
        assert index.remove_many(["gone", "never"]) == [True, False]
        assert_consistent(index, {"kept": A, "moved": B ^ 1, "new": A ^ 1, "gone": None, "never": None})
    # Each call that changed something keeps its reply a minute at most; one that changed nothing, none.
    records = list(admin.scan_iter(match=f"simhash:{NAME}:reply:*"))
    assert records and all(0 < admin.pttl(key) <= 60_000 for key in records)
    assert all(index.keys.kind_of(key) == ("reply", 0) for key in records)
    assert index.add_many([("kept", A), ("new", A ^ 1)]) == [Outcome.UNCHANGED] * 2
    assert len(list(admin.scan_iter(match=f"simhash:{NAME}:reply:*"))) == len(records)
    index.drop()
    assert list(admin.scan_iter(match=f"simhash:{NAME}:*")) == []
