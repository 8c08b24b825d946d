"""What every request passes through: the bearer token, the access log and the metrics (pure ASGI, so
a streamed body or response passes through untouched)."""

from __future__ import annotations

import hmac
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from .metrics import Metrics
from .operations import OPERATIONS
from .problems import ERROR_CODE, SENT, STATUS, ServiceError
from .streams import Call, Message, Receive, Scope, Send, segments

__all__ = ["Guard", "route_of"]

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_V1 = "/v1/indexes/"

# Paths that answer without the token: a probe of a load balancer or an orchestrator carries none.
_OPEN = frozenset({"/healthz", "/readyz", "/openapi.json"})
_OPS = frozenset({*OPERATIONS, "stats"})

_log = logging.getLogger("simhash_redis.service.access")
# The name of the handler the guard adds (to stderr) when the access log has none.
_OWN_HANDLER = "simhash_redis.service.access.stderr"
_encode = msgspec.json.Encoder().encode


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
    ``POST /v1/indexes/...`` to `operation`, which notes its answer (`STATUS`, `SENT`), the rest to `app`."""

    def __init__(self, app: ASGIApp, operation: ASGIApp, token: str | None, access_log: bool) -> None:
        self.app, self.operation = app, operation
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
                self._log(scope, route, status, seconds, state.get(SENT, 0), code)

    def _authorized(self, scope: Scope) -> bool:
        assert self._token is not None
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                # Compared in constant time: the time taken tells nothing of the token.
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
        return False

    def _log(
        self, scope: Scope, route: str, status: int, seconds: float, sent: int, code: str | None
    ) -> None:
        if not _log.isEnabledFor(logging.INFO):
            return
        now = int(time.time())
        if now != self._second:  # the time stamp, made once a second
            self._second, self._stamp = now, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        client = scope.get("client")
        record = {
            "time": self._stamp,
            "method": scope["method"],
            "path": scope["path"],  # never the query string or headers: a token may be there
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


def _noting(send: Send, state: dict[str, Any]) -> Send:
    state[SENT] = 0

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            state[STATUS] = message["status"]
        elif message["type"] == "http.response.body":
            state[SENT] += len(message.get("body", b""))
        await send(message)

    return sending
