"""Errors that used to come out untyped or unactionable: each now has a type and says what to do."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator

import pytest
import redis.exceptions as rex
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import InvalidArgument, RedisUnavailable, SimhashIndex
from simhash_redis.transport import translate_error
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
