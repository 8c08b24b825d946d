"""Running the service: uvicorn with its worker processes, TLS, and a graceful stop on SIGTERM; its HTTP
protocol, uvicorn's (httptools), giving each new plain-HTTP connection to the fast lane (`lane.Lane`),
which gives back those it does not serve, counting the requests read and not answered (a lone one skips
the coalescer: `alone`) and sending each response's head in one segment with its body."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..errors import InvalidArgument
from .config import ServiceConfig
from .lane import Lane
from .streams import INLINE, Scope

__all__ = ["PROTOCOL", "Listen", "Protocol", "alone", "serve"]

_APP = "simhash_redis.service.app:create_app"


@dataclass(frozen=True)
class Listen:
    """Where and how the service listens.

    Attributes:
        host: the address to bind (127.0.0.1: this machine only; 0.0.0.0: every interface).
        workers: worker processes (each an event loop serving requests concurrently).
        tls_cert, tls_key: a PEM certificate and key to serve HTTPS; None: plain HTTP.
        grace: seconds a stop (SIGTERM, Ctrl-C) waits for requests in flight before cutting them
            (rounded up to a whole second; 0: cut at once).
        keep_alive: seconds an idle keep-alive connection stays open.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    tls_cert: str | None = None
    tls_key: str | None = None
    grace: float = 30.0
    keep_alive: float = 5.0


def serve(config: ServiceConfig, listen: Listen) -> None:
    """Serve until SIGTERM or SIGINT, then stop taking connections and let requests in flight finish
    (InvalidArgument for a malformed configuration)."""
    config.check()
    if listen.workers < 1:
        raise InvalidArgument(f"workers must be >= 1, got {listen.workers}")
    if (listen.tls_cert is None) != (listen.tls_key is None):
        raise InvalidArgument("TLS needs both a certificate and its key (--tls-cert and --tls-key)")
    os.environ.update(config.to_env())  # workers start afresh and import the app by name
    metrics_dir = None
    if listen.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Each worker writes its metrics there, and /metrics (in any worker) adds them up.
        metrics_dir = tempfile.mkdtemp(prefix="simhash-redis-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        uvicorn.run(
            _APP,
            factory=True,
            http=PROTOCOL,  # uvicorn's httptools protocol, with a lone request's shortcuts
            host=listen.host,
            port=listen.port,
            workers=listen.workers,
            ssl_certfile=listen.tls_cert,
            ssl_keyfile=listen.tls_key,
            # uvicorn's wait takes whole seconds, and None (not 0) is its "for ever".
            timeout_graceful_shutdown=math.ceil(listen.grace),
            timeout_keep_alive=int(listen.keep_alive),
            access_log=False,  # the service writes its own, as JSON lines
            log_level="warning",
            server_header=False,
        )
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


#: What `uvicorn.run(http=...)` is given: importable by name in each worker process.
PROTOCOL = "simhash_redis.service.runner:Protocol"

# The requests this process has read through `Protocol` and not yet answered (none when the app runs
# under another server, or in-process: then requests are always gathered).
_unanswered = [0]
_CONTINUE = b"HTTP/1.1 100 "


def alone(scope: Scope) -> bool:
    """Whether a request is answered on its own: the fast lane's always (one at a time, on its thread),
    uvicorn's when it is the only one this worker has read and not answered."""
    return _unanswered[0] == 1 or INLINE in scope.get("extensions", ())


class _HeadWithBody:
    """One response's transport: its head (the first write) is held back until the body's first part,
    then both go in one call. A ``100 Continue`` goes at once: the client waits for it to send the body."""

    __slots__ = ("_done", "_head", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, done: Callable[[], None]) -> None:
        self._transport = transport
        self._done = done
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
        elif self._started or data.startswith(_CONTINUE):
            self._transport.write(data)
        else:
            self._head = data
            self._started = True

    def flush(self) -> None:
        """Send a head still held: its response ended without a body write (HEAD, or cut short)."""
        head, self._head = self._head, None
        if head is not None:
            self._transport.write(head)

    def complete(self) -> None:
        """Its response ended: send the head still held, then call its cycle's `on_response`."""
        self.flush()
        self._done()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class Protocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, giving a new connection to the fast lane, counting the requests read
    and not answered, each head with its body (`given`: a connection the lane gave back, with the bytes it
    had read of it)."""

    def __init__(self, *args: Any, given: bytes | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mine = 0  # this connection's share of the count (queued pipelined requests too)
        self._given = given
        self._laned = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self._given is None:
            lane = Lane.of(self)
            if lane is not None and lane.take(transport):
                self._laned = True
                return
        super().connection_made(transport)
        read, self._given = self._given, None
        if read:
            self.data_received(read)

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        # A new request's cycle (not an upgrade's, which keeps the old one) writes through the holder.
        if cycle is not before and cycle is not None:
            # Its own response's end flushes it: with pipelining, self.cycle is already the next request's.
            holder = _HeadWithBody(cycle.transport, cycle.on_response)
            cycle.transport = holder  # type: ignore[assignment]
            cycle.on_response = holder.complete
            self._mine += 1
            _unanswered[0] += 1

    def on_response_complete(self) -> None:
        if self._mine:
            self._mine -= 1
            _unanswered[0] -= 1
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._laned:  # the lane's now: uvicorn never served it
            return
        # Requests cut off with their connection are answered by no one.
        _unanswered[0] -= self._mine
        self._mine = 0
        super().connection_lost(exc)
