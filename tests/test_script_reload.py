"""A server that forgets the scripts mid-call (a restart, a failed-over primary: Redis 7 does not
replicate the script cache): the calls it refused are sent again once the scripts are loaded, and the
replies of the others are kept, so the outcomes are the ones of the writes made."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from simhash_redis import Outcome, SimhashIndex
from simhash_redis.store import store as store_module
from simhash_redis.store.store import ID_CAS, WRITE
from simhash_redis.transport import wire
from simhash_redis.transport.cluster import ClusterTransport, command_keys


def _pairs(n: int, seed: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(f"d{i}", rng.getrandbits(64)) for i in range(n)]


@pytest.mark.cluster
def test_a_node_that_forgot_the_scripts_leaves_the_other_nodes_replies(
    redis_cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One primary flushes its scripts just before the commits (ID_CAS) are sent: the other nodes
    commit theirs, and the call reports each document ADDED, not UNCHANGED for those."""
    original = ClusterTransport.execute
    flushed: list[Any] = []

    def flushing(self: ClusterTransport, commands: list[Any], **kwargs: Any) -> list[Any]:
        commits = [c for c in commands if c[0] == b"EVALSHA" and c[1] == ID_CAS.sha]
        if commits and not flushed:
            node = redis_cluster_client.get_node_from_key(command_keys(commits[0])[0])
            redis_cluster_client.execute_command("SCRIPT", "FLUSH", target_nodes=node)
            flushed.append(node)
        return original(self, commands, **kwargs)

    index = SimhashIndex(redis_cluster_client, "forgot", k=3, id_buckets=1024)
    index.add("first", 0)  # every node has every script now
    monkeypatch.setattr(ClusterTransport, "execute", flushing)
    pairs = _pairs(60, seed=11)
    assert index.add_many(pairs) == [Outcome.ADDED] * len(pairs)
    assert flushed
    monkeypatch.undo()
    assert index.get_many([doc_id for doc_id, _ in pairs]) == [fp for _, fp in pairs]
    assert index.count() == (61, 61) and index.verify().ok


def test_a_server_that_forgot_the_scripts_mid_conversation_resumes_it(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large batch of adds goes as parts (one script call each, on one connection); the server flushes
    its scripts after the first part's reply: the rest is sent again once loaded, every outcome ADDED."""
    monkeypatch.setattr(store_module, "PART", 10)
    original = wire.Exchange.read
    reads: list[int] = []

    def flushing(self: wire.Exchange, count: int) -> list[Any]:
        replies = original(self, count)
        reads.append(count)
        if len(reads) == 1:
            redis_client.script_flush()
        return replies

    index = SimhashIndex(redis_client, "forgot")
    index.add("first", 0)  # the server has every script now
    monkeypatch.setattr(wire.Exchange, "read", flushing)
    pairs = _pairs(60, seed=12)
    assert index.add_many(pairs) == [Outcome.ADDED] * len(pairs)
    monkeypatch.undo()
    assert len(reads) > 2 and redis_client.script_exists(WRITE.sha) == [True]  # loaded again
    assert index.get_many([doc_id for doc_id, _ in pairs]) == [fp for _, fp in pairs]
    assert index.count() == (61, 61) and index.verify().ok
