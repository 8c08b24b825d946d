"""A loopback TCP proxy that loses replies: the server applies a command, the client never hears back.

`FaultProxy` listens on a free 127.0.0.1 port and forwards every connection to an upstream server.
Everything the client sends is forwarded. When a reply comes back from the server, the proxy decides
(with probability ``drop_rate``, from a seeded random generator) whether to forward it or to close both
sides of the connection instead, so the command was applied but its reply is lost: exactly the fault
that a retrying client must survive without applying anything twice.

Example::

    with FaultProxy(server.port, drop_rate=0.2, seed=7) as proxy:
        client = redis.Redis(port=proxy.port)
        ...
        assert proxy.dropped > 0

Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import random
import selectors
import socket
import threading
from types import TracebackType

__all__ = ["FaultProxy"]

HOST = "127.0.0.1"
_CHUNK = 1 << 16


class FaultProxy:
    """A threaded TCP proxy to ``127.0.0.1:upstream_port`` that sometimes drops a connection instead of
    forwarding the server's reply.

    Args:
        upstream_port: the server's port on 127.0.0.1.
        drop_rate: the probability, per reply chunk received from the server, of closing the
            connection instead of forwarding it (0 forwards everything).
        seed: the seed of the generator deciding which replies are lost.
        write_marker: a byte string that marks a request as a write (default ``EVALSHA``); replies lost
            after a request containing it are counted in `dropped_after_write`, and `arm` aims at it.

    Attributes:
        port: the port clients connect to.
        connections: connections accepted so far.
        dropped: replies lost (connections closed instead of forwarding a reply).
        dropped_after_write: of those, the ones whose request contained `write_marker`.
    """

    def __init__(
        self,
        upstream_port: int,
        *,
        drop_rate: float = 0.0,
        seed: int = 0,
        write_marker: bytes = b"EVALSHA",
    ) -> None:
        if not 0.0 <= drop_rate <= 1.0:
            raise ValueError(f"drop_rate must be in [0, 1], got {drop_rate}")
        self.upstream_port = upstream_port
        self.drop_rate = drop_rate
        self.write_marker = write_marker
        self.connections = 0
        self.dropped = 0
        self.dropped_after_write = 0
        self._rng = random.Random(seed)
        self._armed: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._acceptor = threading.Thread(target=self._accept_loop, name="faultproxy-accept", daemon=True)

    # -- lifecycle

    def start(self) -> FaultProxy:
        """Start accepting connections.

        Returns:
            self.
        """
        self._acceptor.start()
        return self

    def close(self) -> None:
        """Stop accepting, close every open connection and wait for the threads to finish."""
        self._stop.set()
        self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            open_sockets = list(self._open)
        for sock in open_sockets:
            _close(sock)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>`` of the proxy."""
        return f"redis://{HOST}:{self.port}"

    def set_drop_rate(self, drop_rate: float) -> None:
        """Change the drop probability for replies from now on (0 makes the proxy transparent).

        Args:
            drop_rate: the new probability in [0, 1].
        """
        if not 0.0 <= drop_rate <= 1.0:
            raise ValueError(f"drop_rate must be in [0, 1], got {drop_rate}")
        with self._lock:
            self.drop_rate = drop_rate

    def arm(self, skip: int = 0) -> None:
        """Lose exactly one reply: the one to the (skip+1)-th request containing `write_marker` from now on.

        Deterministic, for minimal tests; it works alongside (or instead of) drop_rate.

        Args:
            skip: how many matching requests to let through first.
        """
        with self._lock:
            self._armed = skip

    def disarm(self) -> None:
        """Cancel an `arm`ed drop that has not happened yet."""
        with self._lock:
            self._armed = None

    @property
    def armed(self) -> bool:
        """Whether an `arm`ed drop is still waiting for its request."""
        with self._lock:
            return self._armed is not None

    # -- internals

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection((HOST, self.upstream_port), timeout=5)
            except OSError:
                _close(client)
                continue
            for sock in (client, upstream):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                self._open.update((client, upstream))
            thread = threading.Thread(
                target=self._pump, args=(client, upstream), name="faultproxy-conn", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _should_drop(self, request: bytes) -> bool:
        with self._lock:
            if self._armed is not None and self.write_marker in request:
                if self._armed == 0:
                    self._armed = None
                    return True
                self._armed -= 1
                return False
            return self.drop_rate > 0 and self._rng.random() < self.drop_rate

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        """Forward both ways until either side closes or a reply is dropped."""
        last_request = b""
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ)
        selector.register(upstream, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.1):
                    source = key.fileobj
                    try:
                        data = source.recv(_CHUNK)  # type: ignore[union-attr]
                    except OSError:
                        return
                    if not data:
                        return
                    if source is client:
                        # Keep the request the next reply answers (its tail is enough to see its commands).
                        last_request = (last_request + data)[-_CHUNK:]
                        upstream.sendall(data)
                    elif self._should_drop(last_request):
                        # The server has applied the request and answered: lose the answer.
                        with self._lock:
                            self.dropped += 1
                            if self.write_marker in last_request:
                                self.dropped_after_write += 1
                        return
                    else:
                        client.sendall(data)
                        last_request = b""
        except OSError:
            return
        finally:
            selector.close()
            for sock in (client, upstream):
                _close(sock)
            with self._lock:
                self._open.difference_update((client, upstream))


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
