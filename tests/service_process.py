"""The index service run as a real process (`simhash-redis serve`) on a free loopback port, for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from tests.servers import HOST, free_port

__all__ = ["ServiceProcess", "in_thread", "until"]


class ServiceProcess:
    """``simhash-redis --redis-url URL [global options] serve --port P [serve options]``, started and stopped.

    Args:
        redis_url: the Redis the service uses.
        options: global options (before serve), e.g. ["--verified"].
        serve_options: options of serve, e.g. ["--workers", "2"].
        env: extra environment variables.
        stderr: where the process's stderr goes (the access log); default a file in log_dir.
    """

    def __init__(
        self,
        redis_url: str,
        log_dir: Path,
        options: Sequence[str] = (),
        serve_options: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.redis_url = redis_url
        self.log_path = log_dir / f"service-{self.port}.log"
        self.args = [
            sys.executable,
            "-m",
            "simhash_redis.cli",
            "--redis-url",
            redis_url,
            *options,
            "serve",
            "--port",
            str(self.port),
            *serve_options,
        ]
        self.env = {**os.environ, **(env or {})}
        self.env.pop("SIMHASH_REDIS_TOKEN", None) if env is None or "SIMHASH_REDIS_TOKEN" not in env else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.scheme = "http"

    @property
    def url(self) -> str:
        """The service's base URL."""
        return f"{self.scheme}://{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> ServiceProcess:
        """Start the process and wait until /healthz answers (or it exits).

        Raises:
            RuntimeError: it exited or did not answer in time (its log is in the message).
        """
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the service exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0, verify=False).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # polling the service's state: it answers once its socket is bound
        self.stop()
        raise RuntimeError(f"the service did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        """What the process wrote (its access log and messages)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def terminate(self) -> None:
        """Send SIGTERM (a graceful stop)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit; its exit code."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit within 30 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def until(condition: Callable[[], bool]) -> None:
    """Wait for a server's state to come (30 s: a bound against a hang, not a timing)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the server's state never came"
        time.sleep(0.01)


@contextmanager
def in_thread(redis_url: str) -> Iterator[tuple[Any, int]]:
    """The service's app under uvicorn with the service's protocol, in a thread of this process (so a test
    can read its state): the app and its port, once it has started."""
    import uvicorn

    from simhash_redis.service import runner
    from simhash_redis.service.app import create_app
    from simhash_redis.service.config import ServiceConfig

    port = free_port()
    app = create_app(ServiceConfig(redis_url=redis_url, access_log=False))
    config = uvicorn.Config(app, host=HOST, port=port, http=runner.Protocol, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        until(lambda: server.started)
        yield app, port
    finally:
        server.should_exit = True
        thread.join(30)
