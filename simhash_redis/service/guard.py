"""What every request passes through: the bearer token, the access log and the Prometheus metrics (pure
ASGI, so a streamed body or response passes through untouched). The metrics (requests, latency, errors by
code, Redis round trips) are tallied in plain counts, flushed within `FLUSH_AFTER` seconds (each
Prometheus write locks a shared file)."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import sys
import threading
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from ..transport.wire import round_trips
from .operations import OPERATIONS, Operation
from .problems import ERROR_CODE, SENT, STATUS, ServiceError
from .streams import Call, Message, Receive, Scope, Send, segments

__all__ = ["CONTENT_TYPE_LATEST", "FLUSH_AFTER", "Guard", "LaneCall", "Metrics", "route_of"]

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_V1 = "/v1/indexes/"

# Paths that answer without the token: a probe of a load balancer or an orchestrator carries none.
_OPEN = frozenset({"/healthz", "/readyz", "/openapi.json"})
_OPS = frozenset({*OPERATIONS, "stats"})
_SINGLE_ROUTES = {name: f"{_V1}{{name}}/{name}" for name in OPERATIONS}

_log = logging.getLogger("simhash_redis.service.access")
# The name of the handler the guard adds (to stderr) when the access log has none.
_OWN_HANDLER = "simhash_redis.service.access.stderr"
_encode = msgspec.json.Encoder().encode


class LaneCall(NamedTuple):
    """A single ``POST /v1/indexes/{name}/{op}`` the fast lane read: its path (no query), index name,
    operation, body, Authorization header, and client address."""

    path: str
    name: str
    op: Operation
    body: bytes
    authorization: bytes | None
    client: tuple[str, int] | None


def route_of(scope: Scope) -> str:
    """The route template of a request's path, for metrics and logs (ids and index names are unbounded)."""
    path: str = scope["path"]
    if path.startswith(_V1):
        parts = segments(scope)  # as the service routes it: an encoded '/' stays in the name
        if len(parts) >= 5 and parts[4] in _OPS:
            tail = "/batch" if len(parts) == 6 and parts[5] == "batch" else ""
            return f"/v1/indexes/{{name}}/{parts[4]}{tail}"
        return "/v1/other"
    return path if path in _OPEN or path == "/metrics" else "other"


class Guard:
    """The ASGI middleware that checks the token (None: none needed), then logs and counts every request:
    ``POST /v1/indexes/...`` to `operation`, which notes its answer (`STATUS`, `SENT`), the rest to `app`;
    and the same for the single calls the fast lane runs without ASGI (`lane_calls`, through `single`)."""

    def __init__(
        self,
        app: ASGIApp,
        operation: ASGIApp,
        single: Callable[
            [Sequence[tuple[str, Operation, bytes]], Sequence[dict[str, Any]]], list[tuple[int, bytes]]
        ],
        token: str | None,
        access_log: bool,
        max_body: int,
    ) -> None:
        self.app, self.operation, self.single = app, operation, single
        #: The largest request body the service takes (for the fast lane, which reads bodies first).
        self.max_body = max_body
        self._token = None if token is None else token.encode()
        self._metrics = Metrics.get()
        if access_log and not _log.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            handler.set_name(_OWN_HANDLER)
            _log.addHandler(handler)
            _log.setLevel(logging.INFO)
            _log.propagate = False
        self._access_log, self._second, self._stamp = access_log, -1, ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state: dict[str, Any] = scope.setdefault("state", {})
        path = scope["path"]
        try:
            if self._token is not None and path not in _OPEN and not self._authorized(scope):
                refused = ServiceError(
                    401, "unauthorized", "this service needs an Authorization: Bearer token"
                )
                await Call(scope, receive, send).refuse(refused)
            elif scope["method"] == "POST" and path.startswith(_V1):
                await self.operation(scope, receive, send)
            else:
                await self.app(scope, receive, _noting(send, state))
        finally:
            seconds = time.perf_counter() - started
            route = route_of(scope)
            code = state.get(ERROR_CODE)
            status = state.get(STATUS, 500)  # none sent: the server answers 500 (or drops the connection)
            self._metrics.observe(route, scope["method"], status, seconds, code)
            if self._access_log:
                self._log(
                    scope["method"],
                    path,
                    scope.get("client"),
                    route,
                    status,
                    seconds,
                    state.get(SENT, 0),
                    code,
                )

    def lane_calls(self, calls: Sequence[LaneCall]) -> list[tuple[int, bytes] | None]:
        """Single calls the fast lane runs without ASGI, together (`single`): each one's status and JSON
        answer, counted and logged as `__call__` does (None for one whose token is missing or wrong: the
        app answers it)."""
        started = time.perf_counter()
        admitted = [self._token is None or self._bearer(call.authorization) for call in calls]
        taken = [call for call, ok in zip(calls, admitted, strict=True) if ok]
        states: list[dict[str, Any]] = [{} for _ in taken]
        answered = iter(
            zip(self.single([(c.name, c.op, c.body) for c in taken], states), states, strict=True)
        )
        seconds = time.perf_counter() - started
        replies: list[tuple[int, bytes] | None] = []
        for call, ok in zip(calls, admitted, strict=True):
            if not ok:
                replies.append(None)
                continue
            (status, answer), state = next(answered)
            route, code = _SINGLE_ROUTES[call.op.name], state.get(ERROR_CODE)
            self._metrics.observe(route, "POST", status, seconds, code)
            if self._access_log:
                self._log("POST", call.path, call.client, route, status, seconds, len(answer), code)
            replies.append((status, answer))
        return replies

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                return self._bearer(bytes(value))
        return False

    def _bearer(self, authorization: bytes | None) -> bool:
        """Whether an Authorization header's value carries the token."""
        assert self._token is not None
        if authorization is None:
            return False
        scheme, _, given = authorization.partition(b" ")
        # Compared in constant time: the time taken tells nothing of the token.
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)

    def _log(
        self,
        method: str,
        path: str,
        client: Any,
        route: str,
        status: int,
        seconds: float,
        sent: int,
        code: str | None,
    ) -> None:
        if not _log.isEnabledFor(logging.INFO):
            return
        now = int(time.time())
        if now != self._second:  # the time stamp, made once a second
            self._second, self._stamp = now, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        record = {
            "time": self._stamp,
            "method": method,
            "path": path,  # never the query string or headers: a token may be there
            "route": route,
            "status": status,
            "ms": round(seconds * 1000, 3),
            "bytes": sent,
            "client": f"{client[0]}:{client[1]}" if client else None,
        }
        if code is not None:
            record["error"] = code
        line = _encode(record).decode()
        handlers = _log.handlers
        handler = handlers[0] if len(handlers) == 1 else None
        if (
            handler is not None
            and handler.get_name() == _OWN_HANDLER
            and not _log.disabled
            and not _log.filters
            and not handler.filters
            and handler.level <= logging.INFO
        ):
            # Only the handler made above: straight to its stream, without a LogRecord (20-25 us a request).
            stream = handler.stream  # type: ignore[attr-defined]
            try:
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):  # stderr closed or gone: a log line never fails a request
                pass
        else:  # handlers the application set up: through logging
            _log.info(line)


def _on_a_loop() -> bool:
    """Whether this thread runs an event loop (the fast lane's does not)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _noting(send: Send, state: dict[str, Any]) -> Send:
    state[SENT] = 0

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            state[STATUS] = message["status"]
        elif message["type"] == "http.response.body":
            state[SENT] += len(message.get("body", b""))
        await send(message)

    return sending


# Latency buckets from 100 us (a near() over HTTP on one machine) to 10 s (a large batch).
_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: Seconds at most between a request and its figures in the Prometheus values other workers read.
FLUSH_AFTER = 1.0


class _Tally:
    """The requests of one label set not yet added: count, total seconds, count by bucket (last: +Inf)."""

    __slots__ = ("buckets", "count", "seconds")

    def __init__(self) -> None:
        self.count, self.seconds, self.buckets = 0, 0.0, [0] * (len(_BUCKETS) + 1)


class _Histogram(Histogram):
    """prometheus_client's histogram, which can also take many observations at once."""

    def add(self, seconds: float, buckets: list[int]) -> None:
        """As that many calls of `observe` would: their total seconds, and their count by bucket."""
        self._sum.inc(seconds)
        for bucket, count in zip(self._buckets, buckets, strict=True):
            if count:
                bucket.inc(count)


class Metrics:
    """The counters and histograms of one process (registered once per process)."""

    _instance: Metrics | None = None

    def __init__(self) -> None:
        self.requests = Counter(
            "simhash_redis_requests", "HTTP requests answered", ("route", "method", "status")
        )
        self.latency = _Histogram(
            "simhash_redis_request_duration_seconds", "Time to answer a request", ("route",), buckets=_BUCKETS
        )
        self.errors = Counter("simhash_redis_errors", "Error responses by stable error code", ("code",))
        self.round_trips = Counter(
            "simhash_redis_redis_round_trips", "Round trips to Redis made by the index calls"
        )
        self.handoffs = Counter(
            "simhash_redis_lane_handoffs", "Connections the fast lane gave back to uvicorn"
        )
        self._reported = round_trips()
        self._tallies: dict[tuple[str, str, int], _Tally] = {}
        self._codes: dict[str, int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._armed = False  # a flush is due (its timer set, or being set on the loop)
        # The fast lane's thread counts requests beside the event loop's.
        self._lock = threading.Lock()
        #: The worker's event loop, where the lane's requests arm the flush (None: they flush at once).
        self.loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def get(cls) -> Metrics:
        """The process's metrics (prometheus_client registers each name once per process)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def observe(self, route: str, method: str, status: int, seconds: float, code: str | None) -> None:
        """Count one answered request (added to the Prometheus figures within `FLUSH_AFTER` seconds)."""
        key = (route, method, status)
        with self._lock:
            tally = self._tallies.get(key)
            if tally is None:
                tally = self._tallies[key] = _Tally()
            tally.count += 1
            tally.seconds += seconds
            tally.buckets[bisect_left(_BUCKETS, seconds)] += 1  # Prometheus's le: the first bound >= seconds
            if code is not None:
                self._codes[code] = self._codes.get(code, 0) + 1
            if self._armed:
                return
            self._armed = True
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # the lane's thread: the flush is timed on the worker's loop
            try:
                if self.loop is not None:
                    self.loop.call_soon_threadsafe(self._arm)
                    return
            except RuntimeError:  # that loop is closed
                pass
            self.flush()  # no event loop: nothing would flush later
            return
        self._arm()

    def _arm(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(FLUSH_AFTER, self.flush)

    def flush(self) -> None:
        """Add the requests counted since the last flush to the Prometheus figures."""
        with self._lock:
            timer, self._timer = self._timer, None
            self._armed = False
            tallies, self._tallies = self._tallies, {}
            codes, self._codes = self._codes, {}
            now, before = round_trips(), self._reported
            self._reported = max(now, before)
        if timer is not None and _on_a_loop():  # the lane's thread leaves it to fire (and flush little)
            timer.cancel()
        for (route, method, status), tally in tallies.items():
            self.requests.labels(route, method, str(status)).inc(tally.count)
            self.latency.labels(route).add(tally.seconds, tally.buckets)
        for code, count in codes.items():
            self.errors.labels(code).inc(count)
        # The process's round trips since the last flush (concurrent requests share them).
        if now > before:
            self.round_trips.inc(now - before)

    @classmethod
    def exposition(cls) -> bytes:
        """The text exposition of every worker's metrics (this process's without multiprocess mode)."""
        if cls._instance is not None:
            cls._instance.flush()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest()
