"""Errors that used to come out untyped or unactionable: each now has a type and says what to do."""

from __future__ import annotations

import functools
import http.server
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.exceptions as rex
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import InvalidArgument, RedisUnavailable, SimhashIndex
from simhash_redis.service.problems import problem_of
from simhash_redis.transport import Backoff, translate_error
from tests.servers import ServerProcess


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler)
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_an_http_server_is_named_as_not_redis(http_port: int) -> None:
    url = f"redis://127.0.0.1:{http_port}/0"
    with pytest.raises(RedisUnavailable, match="does not speak the Redis protocol"):
        SimhashIndex.from_url(url, "x")
    result = CliRunner().invoke(app, ["--redis-url", url, "stats"])
    assert result.exit_code == 4, result.output
    assert "does not speak the Redis protocol" in result.output and "Traceback" not in result.output


def test_a_database_the_server_lacks(redis_server: ServerProcess) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/99"
    with pytest.raises(InvalidArgument, match="database number"):
        SimhashIndex.from_url(url, "x")
    result = CliRunner().invoke(app, ["--redis-url", url, "stats"])
    assert result.exit_code == 2 and "database number" in result.output, result.output


def test_tls_to_a_plain_port_says_so(redis_server: ServerProcess) -> None:
    url = f"rediss://127.0.0.1:{redis_server.port}/0?ssl_cert_reqs=none&socket_connect_timeout=0.5&socket_timeout=0.5"
    result = CliRunner().invoke(app, ["--redis-url", url, "stats"])
    assert result.exit_code == 4, result.output
    assert "port without TLS" in result.output, result.output


@pytest.mark.parametrize(
    "error",
    [
        rex.ClusterDownError("The cluster is down"),
        rex.ResponseError("CLUSTERDOWN Hash slot not served"),
        rex.TryAgainError("x"),
    ],
)
def test_a_cluster_that_cannot_serve_is_unavailable(error: Exception) -> None:
    assert isinstance(translate_error(error), RedisUnavailable)


def test_a_read_only_replica_is_unavailable(redis_server: ServerProcess) -> None:
    # A primary demoted by a failover answers writes READONLY: the service answered 500 internal and
    # the CLI exit code 1 for what sending again (to the new primary) fixes.
    redis_server.flushall()
    SimhashIndex.from_url(redis_server.url, "ro", k=3).add("a", 1)
    with ServerProcess({"replicaof": ["127.0.0.1", str(redis_server.port)]}) as replica:
        with replica.client() as client:
            while client.info("replication").get("master_link_status") != "up":
                time.sleep(0.02)
            index = SimhashIndex(client, "ro")
            with pytest.raises(RedisUnavailable, match="read only replica") as info:
                index.add("b", 2)
        result = CliRunner().invoke(app, ["--redis-url", replica.url, "--index", "ro", "add", "c", "text"])
    assert result.exit_code == 4 and "read only replica" in result.output, result.output
    assert problem_of(info.value)[0] == 503


@pytest.mark.parametrize(
    "message",
    [
        "MISCONF Errors writing to the AOF file: No space left on device",
        "NOREPLICAS Not enough good replicas to write.",
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    ],
)
def test_a_server_refusing_writes_for_now_is_unavailable(message: str) -> None:
    assert isinstance(translate_error(rex.ResponseError(message)), RedisUnavailable)


def test_a_connection_error_says_its_opening_once() -> None:
    refused = translate_error(rex.ConnectionError("Error 111 connecting to 127.0.0.1:1."))
    message = problem_of(refused)[1].message
    assert message.count("cannot reach Redis") == 1 and "Error 111" in message
    cli = CliRunner().invoke(app, ["--redis-url", "redis://127.0.0.1:1/0", "stats"])
    assert cli.exit_code == 4 and cli.output.count("cannot reach") == 1, cli.output
    with ServerProcess({"requirepass": "s3cret"}) as secured:
        wrong = f"redis://:wrong@127.0.0.1:{secured.port}/0"
        cli = CliRunner().invoke(app, ["--redis-url", wrong, "stats"])
    assert cli.exit_code == 4 and cli.output.count("refused the credentials") == 1, cli.output


def test_a_connection_pool_used_up_is_named_not_an_unreachable_server(redis_server: ServerProcess) -> None:
    """More threads on one client than its pool has connections: redis-py refuses the next one ("Too many
    connections"), which used to read "cannot reach Redis" of a server that answers."""
    pool = redis.ConnectionPool.from_url(redis_server.url, max_connections=1)
    client = redis.Redis(connection_pool=pool)
    index = SimhashIndex(client, "pool", k=3, backoff=Backoff(retries=0))
    taken = pool.get_connection()  # another thread's call, still running
    try:
        with pytest.raises(RedisUnavailable, match="connection pool") as caught:
            index.add_if_new("a", 1)
        assert "cannot reach" not in str(caught.value)
        assert "BlockingConnectionPool" in str(caught.value)
    finally:
        pool.release(taken)
        client.close()
