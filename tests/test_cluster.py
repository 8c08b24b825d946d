"""The index on a local Redis Cluster (3 primaries + 3 replicas): contract, slots, failover, resharding."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import Match, Outcome, Retention, SimhashIndex, SimhashRedisError, VerifiedIndex, distance
from simhash_redis.transport.cluster import ClusterTransport, bucket_slots, command_keys
from simhash_redis.transport.connection import client_from_url
from simhash_redis.transport.wire import SlotCommands
from tests.servers import ClusterProcess
from tests.test_verified_one_writer import page

pytestmark = pytest.mark.cluster

A = 0x0123456789ABCDEF
# Few id buckets keep count(), which sums bucket sizes on a cluster, quick in tests.
BUCKETS = 1024


def fps(n: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(64) for _ in range(n)]


def test_contract_on_cluster(redis_cluster_client: RedisCluster) -> None:
    index = SimhashIndex(redis_cluster_client, "c", k=3, id_buckets=BUCKETS)
    assert index.cluster
    assert index.add_many([("a", A), ("b", A ^ 0b111), ("c", A ^ 0b1111), ("d", A)]) == [Outcome.ADDED] * 4
    assert index.near(A) == [Match("a", A, 0), Match("d", A, 0), Match("b", A ^ 0b111, 3)]
    assert index.add("a", A) is Outcome.UNCHANGED
    assert index.add("a", 5) is Outcome.REPLACED
    assert index.near(A, k=0) == [Match("d", A, 0)]
    assert index.remove("d") is True
    assert index.remove("d") is False
    assert index.near(A, k=0) == []
    assert index.get("a") == 5
    assert index.count() == (3, 3)
    assert index.add_if_new("e", A ^ 0b11) == Match("b", A ^ 0b111, 1)
    assert index.add_if_new("f", 2**64 - 1) is None
    report = index.verify()
    assert report.ok, report.examples
    assert report.garbage == 4  # A's table entries, left when its last id went; near() ignores them
    assert index.verify(repair=True).garbage == 4
    assert index.verify().garbage == 0
    assert SimhashIndex(redis_cluster_client, "c").config == index.config
    index.drop()
    assert list(redis_cluster_client.scan_iter(match="simhash:c:*")) == []


def test_near_equals_brute_force_on_cluster(redis_cluster_client: RedisCluster) -> None:
    index = SimhashIndex(redis_cluster_client, "bf", k=3, id_buckets=BUCKETS)
    rng = random.Random(3)
    centres = fps(30)
    stored = {
        f"s{i}": c ^ sum(1 << rng.randrange(64) for _ in range(rng.randrange(5)))
        for i, c in enumerate(centres * 4)
    }
    index.add_many(stored.items())
    queries = [c ^ (1 << rng.randrange(64)) for c in centres]
    for query, got in zip(queries, index.near_many(queries), strict=True):
        want = sorted(
            (Match(i, fp, distance(fp, query)) for i, fp in stored.items() if distance(fp, query) <= 3),
            key=lambda m: (m.distance, m.id),
        )
        assert got == want


def test_no_command_spans_slots(redis_cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[bytes]] = []
    original = ClusterTransport.execute

    def recording(self: ClusterTransport, commands: list, **kwargs: object) -> list:  # type: ignore[type-arg]
        seen.extend(command_keys(c) for c in commands)
        return original(self, commands, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ClusterTransport, "execute", recording)
    index = SimhashIndex(redis_cluster_client, "slots", k=3, id_buckets=BUCKETS)
    index.add_many([(f"d{i}", fp) for i, fp in enumerate(fps(300))])
    index.add_many([(f"d{i}", fp) for i, fp in enumerate(fps(300, seed=8))])  # replacements
    index.add_many([(f"u{i}", fp) for i, fp in enumerate(fps(50))], unique=True)
    index.near_many(fps(50))
    index.remove_many([f"d{i}" for i in range(100)])
    index.count()
    index.verify(repair=True)
    index.drop()
    assert len(seen) > 3000
    for keys in seen:
        assert len({key_slot(k) for k in keys}) <= 1, keys


# Adds docN (N from 0) in batches of 200 until the file named by its third argument exists: the test
# stops it once the fault it causes is over, so the load spans the fault whatever the machine's speed,
# and holds no more documents than that takes (verify() in _check_loaded takes seconds per 10,000).
LOADER = textwrap.dedent(
    """
    import os, random, sys
    from redis.cluster import RedisCluster, ClusterNode
    from simhash_redis import SimhashIndex
    ports = [int(p) for p in sys.argv[1].split(",")]
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], socket_timeout=2)
    index = SimhashIndex(client, "load", k=3, id_buckets=1024, batch_size=200)
    rng = random.Random(11)
    done = 0
    while not os.path.exists(sys.argv[2]):
        index.add_many([(f"doc{i}", rng.getrandbits(64)) for i in range(done, done + 200)])
        done += 200
        print(done, flush=True)
    """
)


def _load_in_background(
    cluster: ClusterProcess, stop: Path
) -> tuple[subprocess.Popen[str], list[int], threading.Thread]:
    """Start a loader process, which loads until `stop` exists; `acked` collects the counts it reports
    after each acknowledged batch, read by the thread returned (all of them once `_finish` returns)."""
    ports = ",".join(str(p) for p in cluster.primaries())
    proc = subprocess.Popen(
        [sys.executable, "-c", LOADER, ports, str(stop)], stdout=subprocess.PIPE, text=True
    )
    acked: list[int] = []

    def follow() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked.append(int(line))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    return proc, acked, reader


def _finish(proc: subprocess.Popen[str], reader: threading.Thread) -> int:
    code = proc.wait(timeout=120)
    reader.join(timeout=30)  # the last line taken: the pipe is at its end
    assert not reader.is_alive(), "the loader's output was not read to its end"
    assert proc.stdout is not None
    proc.stdout.close()
    return code


def _wait_for(proc: subprocess.Popen[str], acked: list[int], count: int, timeout: float = 30) -> None:
    """Until the loader has acknowledged `count` documents, or ended, or `timeout` seconds went by."""
    deadline = time.monotonic() + timeout
    while (not acked or acked[-1] < count) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)


def _check_loaded(client: RedisCluster, count: int, acked: int) -> None:
    index = SimhashIndex(client, "load")
    rng = random.Random(11)
    expected = {f"doc{i}": rng.getrandbits(64) for i in range(count)}
    ids = list(expected)[:acked]
    assert index.get_many(ids) == [expected[i] for i in ids]
    report = index.verify()
    assert report.ok, report.examples
    assert report.docs == len(expected)


@pytest.fixture
def own_cluster() -> Iterator[ClusterProcess]:
    """A cluster of this test's own, since the test kills or reshapes it."""
    with ClusterProcess() as cluster:
        yield cluster


def test_primary_killed_during_load(own_cluster: ClusterProcess, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    proc, acked, reader = _load_in_background(own_cluster, stop)
    _wait_for(proc, acked, 2000, timeout=600)  # the bound only stops a hang
    victim = own_cluster.primaries()[0]
    own_cluster.kill9(victim)
    # Every batch writes to every primary: the loader acknowledges nothing more until the failover is
    # over, then goes on (4,000 documents more than it had acknowledged at the kill).
    assert acked and proc.poll() is None, "the loader stopped before the kill"
    after = acked[-1] + 4000
    _wait_for(proc, acked, after, timeout=600)  # however long a loaded machine's failover takes
    stop.touch()
    assert _finish(proc, reader) == 0, "the load did not survive the failover"
    assert acked[-1] >= after, "the load did not go on after the failover"
    own_cluster.wait_ok()
    _check_loaded(own_cluster.client(), acked[-1], acked[-1])


def test_an_acknowledged_write_waits_for_a_lagging_replica(own_cluster: ClusterProcess) -> None:
    """A replica that lags past WAIT's first second (a loaded machine) still gets the write before it is
    acknowledged: otherwise the failover of its primary would lose an acknowledged document."""
    index = SimhashIndex(own_cluster.client(), "lag", k=3)
    stopped = [own_cluster.nodes[port].pid for port in own_cluster.replicas()]
    resumed: list[float] = []

    def resume() -> None:
        resumed.append(time.monotonic())
        for pid in stopped:
            os.kill(pid or 0, signal.SIGCONT)

    for pid in stopped:
        os.kill(pid or 0, signal.SIGSTOP)
    timer = threading.Timer(2.5, resume)
    timer.start()
    try:
        assert index.add("doc", 0x1234_5678_9ABC_DEF0) is Outcome.ADDED
        acknowledged = time.monotonic()
    finally:
        timer.join()
    assert resumed and acknowledged > resumed[0]


def _migrate(source: redis.Redis, target: redis.Redis, slot: int) -> None:
    """Move one slot between primaries the way redis-cli --cluster reshard does."""
    source_id = source.execute_command("CLUSTER MYID")
    target_id = target.execute_command("CLUSTER MYID")
    target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
    source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
    port = target.connection_pool.connection_kwargs["port"]
    while keys := source.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
        source.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", *keys)
    for node in (target, source):
        node.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)


def test_live_reshard_during_load(own_cluster: ClusterProcess, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    proc, acked, reader = _load_in_background(own_cluster, stop)
    _wait_for(proc, acked, 2000)
    first, second = own_cluster.primaries()[:2]
    source = redis.Redis(port=first)
    target = redis.Redis(port=second)
    mine = [
        slot
        for start, end, primary, *_ in source.execute_command("CLUSTER SLOTS")
        if int(primary[1]) == first
        for slot in range(int(start), int(end) + 1)
    ][:100]
    for slot in mine:
        _migrate(source, target, slot)
    assert proc.poll() is None, "the loader ended before the slots had moved"
    stop.touch()
    assert _finish(proc, reader) == 0
    assert _owner(source, mine[-1]) == second
    source.close()
    target.close()
    _check_loaded(own_cluster.client(), acked[-1], acked[-1])


def _owner(client: redis.Redis, slot: int) -> int:
    for start, end, primary, *_ in client.execute_command("CLUSTER SLOTS"):
        if int(start) <= slot <= int(end):
            return int(primary[1])
    raise AssertionError(f"slot {slot} has no owner")


def test_a_cluster_url_opens_a_cluster_index(redis_cluster: ClusterProcess) -> None:
    redis_cluster.flushall()
    index = SimhashIndex.from_url(redis_cluster.url, "byurl", id_buckets=BUCKETS)
    try:
        assert index.cluster
        index.add("a", A)
        assert index.near(A) == [Match("a", A, 0)]
    finally:
        # Left to the garbage collector, a socket can be finalized before the connection that would
        # close it: a ResourceWarning in whichever test runs then.
        index.client.close()


def test_closing_the_client_of_a_cluster_url_closes_every_node_connection(
    redis_cluster: ClusterProcess,
) -> None:
    """close() on a client made from a cluster URL closes the connections it opened to every node
    (redis-py's RedisCluster.from_url gives the nodes pools that its own close() leaves open)."""
    redis_cluster.flushall()
    client = client_from_url(redis_cluster.url, client_name="closing")
    index = SimhashIndex(client, "closing", id_buckets=BUCKETS)
    assert index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(50)]) == [Outcome.ADDED] * 50
    assert named_connections(redis_cluster, "closing") > 0
    client.close()
    deadline = time.monotonic() + 30  # the server drops a closed connection at its next event loop turn
    while (left := named_connections(redis_cluster, "closing")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == 0


def named_connections(cluster: ClusterProcess, name: str) -> int:
    """How many connections named `name` the cluster's nodes hold, as they list them."""
    count = 0
    for node in cluster.nodes.values():
        with node.client() as admin:
            count += sum(entry.get("name") == name for entry in admin.client_list())
    return count


def test_cli_on_a_cluster(redis_cluster: ClusterProcess, tmp_path: Path) -> None:
    redis_cluster.flushall()
    source = tmp_path / "docs.jsonl"
    source.write_text(
        "\n".join(
            json.dumps({"id": f"d{i}", "text": f"story number {i} about the harbour and the ships {i % 3}"})
            for i in range(50)
        )
    )
    base = ["--redis-url", redis_cluster.url, "--index", "clicl"]
    runner = CliRunner()
    loaded = runner.invoke(app, [*base, "load", str(source)])
    assert loaded.exit_code == 0, loaded.output
    near = runner.invoke(app, [*base, "near", "story number 7 about the harbour and the ships 1", "--json"])
    assert near.exit_code == 0, near.output
    assert "d7" in near.stdout
    verified = runner.invoke(app, [*base, "verify"])
    assert verified.exit_code == 0, verified.output


def test_a_plain_client_to_a_cluster_node_gets_a_clear_error(redis_cluster: ClusterProcess) -> None:
    slot = key_slot(b"simhash:plain:meta")
    owner = redis_cluster.client().nodes_manager.get_node_from_slot(slot).port
    other = next(port for port in redis_cluster.primaries() if port != owner)
    client = redis.Redis(port=other)
    with pytest.raises(SimhashRedisError, match="Redis Cluster node"):
        SimhashIndex(client, "plain")
    client.close()


def test_count_is_what_the_maps_hold(redis_cluster_client: RedisCluster) -> None:
    """count() on a cluster sums the maps' sizes, one script call per hash slot routed by the slots it was
    made with (checked against the keys it names): plain, verified (sketches not counted), a retention
    window's periods, and on nodes that forgot the scripts."""
    seen: list[tuple[int, list[bytes]]] = []
    original = ClusterTransport.execute

    def recording(self: ClusterTransport, commands: Any, **kwargs: Any) -> list[Any]:
        if isinstance(commands, SlotCommands):
            seen.extend(zip(commands.slots, map(command_keys, commands), strict=True))
        return original(self, commands, **kwargs)

    plain = SimhashIndex(redis_cluster_client, "sizes", k=3, id_buckets=BUCKETS)
    pairs = [(f"d{i}", fp) for i, fp in enumerate(fps(300))]
    plain.add_many(pairs + [(f"twin{i}", fp) for i, (_, fp) in enumerate(pairs[:40])])
    plain.remove_many([f"d{i}" for i in range(10)])  # 10 fingerprints keep a twin
    verified = VerifiedIndex(SimhashIndex(redis_cluster_client, "sizes-v", id_buckets=BUCKETS))
    verified.add_many([(f"p{i}", page(i)) for i in range(20)] + [("copy", page(3))])
    windowed = SimhashIndex(
        redis_cluster_client, "sizes-w", k=3, id_buckets=BUCKETS, retention=Retention(600, 60)
    )
    windowed.add_many(pairs[:50])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClusterTransport, "execute", recording)
        assert plain.count() == (330, 300)
        assert verified.count() == (21, 20)
        # The periods a count reads, on the server's clock: one more from near a period's end.
        periods = {len(windowed.windows.view().schemas)}  # type: ignore[union-attr]
        assert windowed.count() == (50, 50)
        periods.add(len(windowed.windows.view().schemas))  # type: ignore[union-attr]
        for node in redis_cluster_client.get_primaries():
            redis_cluster_client.execute_command("SCRIPT", "FLUSH", target_nodes=node)
        assert plain.count() == (330, 300)
    assert seen and all({key_slot(key) for key in keys} == {slot} for slot, keys in seen)
    assert sum(len(keys) for _, keys in seen) in {2 * BUCKETS * (3 + n) for n in periods}


def test_bucket_slots_are_the_slots_of_the_keys() -> None:
    for prefix, count in ((b"simhash:news:id:", 131_072), (b"p:x.y:w123:fp:", 1000), (b"a:b:id:", 1)):
        assert bucket_slots(prefix, count).tolist() == [key_slot(prefix + b"%d" % b) for b in range(count)]
