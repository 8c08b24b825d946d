"""docker/: the compose file validates, the Dockerfile has its essentials, and the example worker works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"


def _compose_command() -> list[str] | None:
    """`docker compose` (the v2 plugin) if it works, else `docker-compose` (v1, from Debian), else None."""
    docker = shutil.which("docker")
    if docker:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_file_validates() -> None:
    command = _compose_command()
    if command is None:
        reason = "neither `docker compose` nor `docker-compose` is installed (apt-get install docker-compose)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: .ci/run installs it, so CI must not skip this")
        pytest.skip(reason)
    done = subprocess.run(
        [*command, "-f", str(DOCKER / "compose.yml"), "config"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SIMHASH_INPUT": str(ROOT / "simhash_redis" / "data")},
    )
    assert done.returncode == 0, done.stderr
    expected = ("redis:7", "--appendonly", "redis-data", "healthcheck", "service_healthy", "load", "worker")
    for text in expected:
        assert text in done.stdout
    for text in ("serve", "nginx", "replicas", "/readyz", "nginx.conf"):  # the service behind one port
        assert text in done.stdout


def test_nginx_front_streams_and_keeps_connections() -> None:
    text = (DOCKER / "nginx.conf").read_text()
    for line in (
        "server service:8080;",
        "keepalive 64;",
        "proxy_pass http://simhash_service;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_request_buffering off;",
        "proxy_buffering off;",
    ):
        assert line in text


def test_dockerfile_essentials() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0].startswith("FROM python:") and lines[0].endswith("-slim")
    assert any(line.startswith("RUN pip install .[server]") for line in lines)
    users = [line for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("USER root", "USER 0")
    assert 'ENTRYPOINT ["simhash-redis"]' in lines
    for copied in ("pyproject.toml", "simhash_redis", "cli", "docker/worker_example.py"):
        assert copied in text


def test_worker_example_reports_duplicates(redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("storm closes coastal roads as heavy rain hits the region on monday")
    (tmp_path / "b.txt").write_text("Storm closes coastal roads as heavy rain hits the region on Monday!")
    (tmp_path / "c.txt").write_text("the central bank kept interest rates unchanged and signalled patience")
    command = [sys.executable, str(DOCKER / "worker_example.py"), "--redis-url", redis_url]
    env = {**os.environ, "SIMHASH_REDIS_INDEX": "w"}  # as compose sets it: `run -T worker -` keeps it
    first = subprocess.run([*command, str(tmp_path)], capture_output=True, text=True, check=False, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["duplicate\tb.txt\ta.txt\t0"]
    assert "stored 2, duplicates 1" in first.stderr
    line = "the central bank kept interest rates unchanged and signalled patience"
    piped = subprocess.run(
        [*command, "-"], input=line + "\n", capture_output=True, text=True, check=False, env=env
    )
    named = f"stdin:{xxhash.xxh3_64_hexdigest(line.encode())}"
    assert piped.returncode == 0 and piped.stdout.splitlines() == [f"duplicate\t{named}\tc.txt\t0"]
    # The next day's batch, piped the same way, keeps the first one's documents (ids name the text).
    other = "a new story about the harbour ferry strike that closed the port for a day"
    again = subprocess.run(
        [*command, "-"], input=other + "\n", capture_output=True, text=True, check=False, env=env
    )
    assert again.returncode == 0 and "stored 1" in again.stderr
    check = subprocess.run(
        [*command, "-"], input=line + "\n", capture_output=True, text=True, check=False, env=env
    )
    assert check.stdout.splitlines() == [f"duplicate\t{named}\tc.txt\t0"]


def test_the_service_is_published_on_loopback_unless_a_host_is_given() -> None:
    # Without a token the API answers anyone who reaches it: the default publishes it on this machine only.
    text = (DOCKER / "compose.yml").read_text()
    published = [line.strip() for line in text.splitlines() if line.strip().endswith(':8080"')]
    assert published == ['- "${SIMHASH_SERVICE_HOST:-127.0.0.1}:${SIMHASH_SERVICE_PORT:-8080}:8080"']
    assert "SIMHASH_REDIS_TOKEN: ${SIMHASH_REDIS_TOKEN:-}" in text  # the token reaches the replicas
