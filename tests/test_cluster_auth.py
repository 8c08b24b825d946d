"""Refused credentials and ACL refusals on a Redis Cluster are reported at once, as on a standalone server
(tests/test_security.py): not taken for an unreachable node and retried for the failover time.

Each test makes an ACL user on every node of the session cluster, opens a transport as that user, then
changes the password (or the user's rights) on every node and drops the client's connections: the next
round trip connects again and the node refuses the AUTH. The retry loop's pause fails the test at its
first call, so a retried refusal fails at once instead of waiting out the failover time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from simhash_redis import SimhashIndex, drop_index
from simhash_redis.asyncio import AsyncSimhashIndex
from simhash_redis.errors import RedisAuthError, RedisPermissionError
from simhash_redis.transport import standalone
from simhash_redis.transport.aio import AsyncClusterTransport
from simhash_redis.transport.cluster import ClusterTransport
from simhash_redis.transport.connection import client_from_url
from simhash_redis.transport.greenlet_bridge import run
from tests.servers import HOST, ClusterProcess

pytestmark = pytest.mark.cluster

USER = "rotated"
PASSWORD = "old-pw-7f3a"
NEW_PASSWORD = "new-pw-91c2"


class Retried(AssertionError):
    """The retry loop was about to wait before another attempt."""


@pytest.fixture
def no_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any pause of the retry loop fails the test at once."""

    def pause(seconds: float) -> None:
        raise Retried(f"the retry loop paused {seconds:.3f} s before another attempt")

    monkeypatch.setattr(standalone, "pause", pause)


def set_user(cluster: ClusterProcess, *rules: str) -> None:
    for port in cluster.ports:
        with cluster.nodes[port].client() as node:
            node.execute_command("ACL", "SETUSER", USER, *rules)


@pytest.fixture
def user(redis_cluster: ClusterProcess) -> Iterator[ClusterProcess]:
    """USER with PASSWORD and every right on every node of the session cluster (deleted after)."""
    redis_cluster.wait_ok()
    redis_cluster.flushall()
    set_user(redis_cluster, "reset", "on", f">{PASSWORD}", "~*", "&*", "+@all")
    yield redis_cluster
    for port in redis_cluster.ports:
        with redis_cluster.nodes[port].client() as node:
            node.execute_command("ACL", "DELUSER", USER)


@pytest.fixture
def login(user: ClusterProcess) -> Iterator[Callable[[], Any]]:
    """Make clients of USER on the cluster, closed after the test (an open socket fails the next test)."""
    made: list[Any] = []

    def client() -> Any:
        made.append(user.client(username=USER, password=PASSWORD))
        return made[-1]

    yield client
    for client_made in made:
        client_made.close()


def no_secret(error: BaseException) -> None:
    for text in (str(error), repr(error)):
        assert PASSWORD not in text and NEW_PASSWORD not in text


def test_a_rotated_password_is_an_auth_error_at_once(
    user: ClusterProcess, no_retry: None, login: Callable[[], Any]
) -> None:
    client = login()
    transport = ClusterTransport(client)
    keys = [f"simhash:auth:{i}" for i in range(30)]  # on every primary
    transport.execute([(b"HSET", key, b"f", b"1") for key in keys])
    set_user(user, "resetpass", f">{NEW_PASSWORD}")
    client.disconnect_connection_pools()  # the next round trip connects, and AUTHs, again
    with pytest.raises(RedisAuthError) as info:
        transport.execute([(b"HGET", key, b"f") for key in keys])
    assert not isinstance(info.value, RedisPermissionError)
    no_secret(info.value)
    with pytest.raises(RedisAuthError) as info:
        transport.broadcast((b"SCRIPT", b"LOAD", b"return 1"))
    no_secret(info.value)
    with pytest.raises(RedisAuthError) as info:
        list(transport.scan("simhash:auth:*", 100))
    no_secret(info.value)


def test_an_index_opened_before_the_rotation_reports_it_at_once(
    user: ClusterProcess, no_retry: None, login: Callable[[], Any]
) -> None:
    client = login()
    index = SimhashIndex(client, "rotation", k=3, id_buckets=64)
    index.add("a", 1)
    set_user(user, "resetpass", f">{NEW_PASSWORD}")
    client.disconnect_connection_pools()
    with pytest.raises(RedisAuthError) as info:
        index.add_many([(f"d{i}", i << 20) for i in range(20)])
    no_secret(info.value)
    with pytest.raises(RedisAuthError):
        index.near(1)


def test_a_refused_command_is_a_permission_error_at_once(
    user: ClusterProcess, no_retry: None, login: Callable[[], Any]
) -> None:
    transport = ClusterTransport(login())
    set_user(user, "-hset")
    with pytest.raises(RedisPermissionError) as info:
        transport.execute([(b"HSET", f"simhash:auth:{i}", b"f", b"1") for i in range(30)])
    assert info.value.command == "hset"
    set_user(user, "-script")
    with pytest.raises(RedisPermissionError):
        transport.broadcast((b"SCRIPT", b"LOAD", b"return 1"))


def test_a_refused_scan_is_a_permission_error(
    user: ClusterProcess, no_retry: None, login: Callable[[], Any]
) -> None:
    # SCAN's error reply was unpacked as a page of keys: a TypeError from creating an index (which looks
    # for data left without a meta), listing indexes, verify and drop.
    client = login()
    set_user(user, "-scan")
    with pytest.raises(RedisPermissionError) as info:
        SimhashIndex(client, "noscan", k=3, id_buckets=64)
    assert info.value.command == "scan"
    with pytest.raises(RedisPermissionError):
        drop_index(client, "noscan")


def test_a_durable_write_refused_its_replica_check_is_a_permission_error(
    user: ClusterProcess, no_retry: None, login: Callable[[], Any]
) -> None:
    # A write on a cluster first asks the primary (INFO replication) whether a replica can confirm it with
    # WAIT: a user refused INFO is told so, not taken for a primary without replicas, written unconfirmed.
    set_user(user, "-info")
    index = SimhashIndex(login(), "replica-check", k=3, id_buckets=64)
    with pytest.raises(RedisPermissionError) as info:
        index.add("a", 1)
    assert info.value.command == "info"
    no_secret(info.value)


def test_an_asyncio_durable_write_refused_its_replica_check_is_a_permission_error(
    user: ClusterProcess, no_retry: None
) -> None:
    async def add() -> None:
        client = AsyncRedisCluster(host=HOST, port=user.primaries()[0], username=USER, password=PASSWORD)
        try:
            await AsyncSimhashIndex(client, "replica-check", k=3, id_buckets=64).add("a", 1)
        finally:
            await client.aclose()

    set_user(user, "-info")
    with pytest.raises(RedisPermissionError) as info:
        asyncio.run(add())
    assert info.value.command == "info"


def test_the_asyncio_transport_reports_a_new_password_at_once(user: ClusterProcess, no_retry: None) -> None:
    async def rotated() -> BaseException:
        client = AsyncRedisCluster(host=HOST, port=user.primaries()[0], username=USER, password=PASSWORD)
        try:
            transport = await run(lambda: AsyncClusterTransport(client))
            keys = [f"simhash:auth:{i}" for i in range(30)]
            await run(lambda: transport.execute([(b"HSET", key, b"f", b"1") for key in keys]))
            set_user(user, "resetpass", f">{NEW_PASSWORD}")
            for node in client.get_nodes():
                await node.disconnect()
            with pytest.raises(RedisAuthError) as info:
                await run(lambda: transport.execute([(b"HGET", key, b"f") for key in keys]))
            with pytest.raises(RedisAuthError):
                await run(lambda: transport.broadcast((b"SCRIPT", b"LOAD", b"return 1")))
            return info.value
        finally:
            await client.aclose()

    no_secret(asyncio.run(rotated()))


def test_the_asyncio_transport_refuses_a_wrong_password_at_once(user: ClusterProcess, no_retry: None) -> None:
    async def opened() -> None:
        client = AsyncRedisCluster(host=HOST, port=user.primaries()[0], username=USER, password=NEW_PASSWORD)
        try:
            await run(lambda: AsyncClusterTransport(client))
        finally:
            await client.aclose()

    with pytest.raises(RedisAuthError) as info:
        asyncio.run(opened())
    no_secret(info.value)


def test_a_cluster_url_with_a_wrong_password_is_an_auth_error(user: ClusterProcess, no_retry: None) -> None:
    url = f"redis://{USER}:{NEW_PASSWORD}@{HOST}:{user.primaries()[0]}"
    with pytest.raises(RedisAuthError) as info:
        client_from_url(url, cluster=True)  # redis-py wraps the refusal in a RedisClusterException
    no_secret(info.value)
    with pytest.raises(RedisAuthError) as info:
        SimhashIndex.from_url(url, "rotation")
    no_secret(info.value)


def test_a_replica_check_answered_by_another_error_writes_without_waiting(
    redis_cluster: ClusterProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server where INFO is renamed or disabled answers an error that is no refusal: the write goes on
    # without a replica to WAIT for, as it did before refusals were told apart.
    from redis.exceptions import ResponseError

    asked: list[bytes] = []
    round_trip = ClusterTransport._node_round_trip

    def info_unknown(self: ClusterTransport, node: object, commands: list[tuple[bytes, ...]]) -> list[object]:
        if commands[0][0] == b"INFO":
            asked.append(commands[0][0])
            return [ResponseError("ERR unknown command 'INFO'")]
        return round_trip(self, node, commands)  # type: ignore[arg-type]

    monkeypatch.setattr(ClusterTransport, "_node_round_trip", info_unknown)
    client = redis_cluster.client()
    try:
        index = SimhashIndex(client, "info-renamed", k=3, id_buckets=64)
        index.add("a", 1)
        assert index.get("a") == 1 and asked
    finally:
        client.close()


@pytest.fixture
def default_needs_password(redis_cluster: ClusterProcess) -> Iterator[int]:
    """The session cluster's default user asks for PASSWORD on every node (nopass again after, on every
    node whatever failed); the port of a primary (the cluster's own helpers connect without a password)."""
    redis_cluster.wait_ok()
    primary = redis_cluster.primaries()[0]
    set_default = ("ACL", "SETUSER", "default")
    try:
        for port in redis_cluster.ports:
            with redis_cluster.nodes[port].client() as node:
                node.execute_command(*set_default, "resetpass", f">{PASSWORD}")
        yield primary
    finally:
        for port in redis_cluster.ports:
            for password in (PASSWORD, None):  # a node the set-up did not reach has no password
                try:
                    with redis_cluster.nodes[port].client(password=password) as node:
                        node.execute_command(*set_default, "nopass")
                    break
                except (redis.AuthenticationError, redis.ResponseError):
                    continue
        redis_cluster.wait_ok()


def test_a_cluster_asking_for_a_password_not_given_is_an_auth_error_at_once(
    default_needs_password: int, no_retry: None
) -> None:
    url = f"redis://{HOST}:{default_needs_password}"
    with pytest.raises(RedisAuthError) as info:
        client_from_url(url, cluster=True)  # NOAUTH while reading the slot map
    assert "the server asks for a password" in str(info.value)
    with pytest.raises(RedisAuthError):
        SimhashIndex.from_url(url, "no-password")

    async def opened() -> None:
        client = AsyncRedisCluster(host=HOST, port=default_needs_password)
        try:
            await run(lambda: AsyncClusterTransport(client))
        finally:
            await client.aclose()

    with pytest.raises(RedisAuthError):
        asyncio.run(opened())
