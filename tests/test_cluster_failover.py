"""A failover with Redis's default cluster-node-timeout (15 s): writers outlast it, nothing acknowledged is
lost. The cluster's transport keeps retrying for its failover time, read from the cluster itself."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from simhash_redis import SimhashIndex
from simhash_redis.index import list_indexes
from simhash_redis.transport import Backoff, standalone
from simhash_redis.transport.aio import AsyncClusterTransport
from simhash_redis.transport.cluster import CLUSTER_BACKOFF, DEFAULT_NODE_TIMEOUT, ClusterTransport
from simhash_redis.transport.greenlet_bridge import run
from tests.servers import HOST, ClusterProcess

WRITERS = 4
BATCH = 20


def _until(check: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """Wait for a condition the writers or the cluster bring about (the timeout only stops a hang)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# 30 s of one CI worker, mostly the 15 s timeout and its election: behind the slow marker. The same
# retry budget, read from the cluster, is proven in CI by test_cluster.py's kill of a primary during a
# load and the listing below (2 and 4 s node timeouts).
@pytest.mark.slow
@pytest.mark.cluster
def test_writers_outlast_a_failover_with_the_default_node_timeout() -> None:
    with ClusterProcess(node_timeout_ms=15_000) as cluster:
        SimhashIndex(cluster.client(), "failover", k=3, id_buckets=256)
        acked: list[list[tuple[str, int]]] = [[] for _ in range(WRITERS)]
        errors: list[str] = []
        stop = threading.Event()

        def write(writer: int) -> None:
            index = SimhashIndex(cluster.client(), "failover")
            rng = random.Random(writer)
            while not stop.is_set():
                batch = [(f"w{writer}-{len(acked[writer]) + i}", rng.getrandbits(64)) for i in range(BATCH)]
                try:
                    index.add_many(batch)  # every batch has keys on every primary
                except Exception as exc:
                    errors.append(f"writer {writer}: {type(exc).__name__}: {exc}")
                    return
                acked[writer].extend(batch)

        threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(WRITERS)]
        for thread in threads:
            thread.start()
        try:
            _until(lambda: all(acked) or bool(errors), "every writer's first batch")
            cluster.kill9(cluster.primaries()[0])
            cluster.wait_ok(timeout=120)  # its replica promoted, and every node agrees
            written = [len(done) for done in acked]
            _until(
                lambda: bool(errors) or all(len(done) > n for done, n in zip(acked, written, strict=True)),
                "every writer to write after the failover",
            )
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
        assert not errors, errors
        stored = [pair for done in acked for pair in done]
        index = SimhashIndex(cluster.client(), "failover")
        assert index.get_many([doc_id for doc_id, _ in stored]) == [fp for _, fp in stored]
        report = index.verify()
        assert report.ok, report.examples
        assert report.docs == len(stored)


@pytest.fixture
def no_config_user(redis_cluster: ClusterProcess) -> Iterator[str]:
    """A user on every node of the session cluster that may run anything but CONFIG."""
    for port in redis_cluster.ports:
        with redis_cluster.nodes[port].client() as node:
            node.execute_command(
                "ACL", "SETUSER", "noconfig", "on", ">secret", "~*", "&*", "+@all", "-config"
            )
    yield "noconfig"
    for port in redis_cluster.ports:
        with redis_cluster.nodes[port].client() as node:
            node.execute_command("ACL", "DELUSER", "noconfig")


@pytest.mark.cluster
def test_the_failover_time_is_read_from_the_cluster(
    redis_cluster: ClusterProcess, no_config_user: str
) -> None:
    transport = ClusterTransport(redis_cluster.client())
    assert transport.failover_time() == 2 * redis_cluster.node_timeout_ms / 1000
    refused = ClusterTransport(redis_cluster.client(username=no_config_user, password="secret"))
    assert refused.failover_time() == 2 * DEFAULT_NODE_TIMEOUT  # Redis's default, when CONFIG is refused
    given = Backoff(retries=1)
    assert ClusterTransport(redis_cluster.client(), given).backoff is given

    async def asynchronous() -> float:  # the asyncio API's transport asks the same way
        client = AsyncRedisCluster(host=HOST, port=redis_cluster.primaries()[0])
        try:
            return await run(lambda: AsyncClusterTransport(client).failover_time())
        finally:
            await client.aclose()

    assert asyncio.run(asynchronous()) == 2 * redis_cluster.node_timeout_ms / 1000


def test_retries_last_as_long_as_asked_once_counted_ones_are_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(standalone.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(standalone, "pause", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    attempts: list[float] = []

    def fail() -> None:
        attempts.append(clock[0])
        raise ConnectionError("down")

    asked: list[bool] = []
    lasting = Backoff(retries=3, base=0.05, cap=2.0, lasting=lambda: asked.append(True) or 30.0)
    with pytest.raises(ConnectionError):
        lasting.call_with_retry(fail, lambda exc: True)
    assert asked == [True]  # asked once, at the first failure
    assert len(attempts) > 4 and attempts[-2] < 30.0 <= attempts[-1]  # the last at the deadline
    assert all(later - earlier <= 2.0 for earlier, later in itertools.pairwise(attempts))

    attempts.clear()
    with pytest.raises(ConnectionError):
        Backoff(retries=3).call_with_retry(fail, lambda exc: True)
    assert len(attempts) == 4  # without `lasting`, the count alone


@pytest.mark.cluster
def test_listing_keys_outlasts_a_failover() -> None:
    """verify, list_indexes and drop list keys with SCAN, primary by primary, all through the transport's
    one `scan`: a primary killed right after it answered a page (mid-listing, here verify's) is listed again
    from its successor once the failover is over, through the transport's retry loop, instead of failing
    with RedisUnavailable. (One failover: each costs the cluster's node timeout and an election.)"""
    with ClusterProcess(node_timeout_ms=4000) as cluster:
        client = cluster.client()
        # Patience of a minute, not the default twice the node timeout (8 s here), which a loaded machine's
        # election outlasted (RedisUnavailable); the default is what the failover tests above check.
        patient = dataclasses.replace(CLUSTER_BACKOFF, lasting=60.0)
        index = SimhashIndex(client, "listed", k=3, id_buckets=1024, backoff=patient)
        rng = random.Random(5)
        pairs = [(f"d{i}", rng.getrandbits(64)) for i in range(20_000)]  # pages of every primary's keys
        index.add_many(pairs)
        cluster.wait_replicated(timeout=120)
        cluster.wait_ok(timeout=120)
        eligible = set(cluster.primaries())
        killed: list[int] = []
        original = ClusterTransport._node_round_trip

        def killing(self: ClusterTransport, node: Any, commands: list[Any]) -> list[Any]:
            replies = original(self, node, commands)
            cursor = replies[0][0] if commands[0][0] == b"SCAN" else b"0"
            if node.port in eligible and cursor not in (b"0", 0):  # more pages of this node to come
                eligible.clear()
                killed.append(node.port)
                cluster.kill9(node.port)
            return replies

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ClusterTransport, "_node_round_trip", killing)
            report = index.verify()
        assert len(killed) == 1 and report.ok and report.docs == len(pairs), report.examples
        assert "listed" in list_indexes(client)
        index.drop()
        cluster.wait_ok(timeout=120)
        assert list(cluster.client().scan_iter(match="simhash:listed:*")) == []
