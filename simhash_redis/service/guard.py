"""What every request passes through: the bearer token, the access log and the metrics (pure ASGI, so
a streamed body or response passes through untouched)."""

from __future__ import annotations

import hmac
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec

from .metrics import Metrics
from .problems import Problem, ServiceError, problem_of
from .schemas import ErrorBody

__all__ = ["ERROR_CODE", "Guard", "error_response", "route_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The key of a request's scope["state"] where the error code of its response is noted.
ERROR_CODE = "error_code"

# Paths that answer without the token: a probe of a load balancer or an orchestrator carries none.
_OPEN = frozenset({"/healthz", "/readyz", "/openapi.json"})
_OPS = frozenset({"fingerprint", "near", "add", "add_if_new", "remove", "get", "stats"})

_log = logging.getLogger("simhash_redis.service.access")
_encode = msgspec.json.Encoder().encode


def route_of(path: str) -> str:
    """The route template of a path, for metrics and logs (ids and index names are unbounded)."""
    if path.startswith("/v1/indexes/"):
        parts = path.split("/")
        if len(parts) >= 5 and parts[4] in _OPS:
            tail = "/batch" if len(parts) == 6 and parts[5] == "batch" else ""
            return f"/v1/indexes/{{name}}/{parts[4]}{tail}"
        return "/v1/other"
    return path if path in _OPEN or path == "/metrics" else "other"


def error_response(status: int, problem: Problem) -> tuple[dict[str, Any], bytes]:
    """The ASGI start message and body of an error response."""
    body = _encode(ErrorBody(problem))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    return {"type": "http.response.start", "status": status, "headers": headers}, body


class Guard:
    """The ASGI middleware that checks the token (None: none needed), then logs and counts every request."""

    def __init__(self, app: ASGIApp, token: str | None, access_log: bool) -> None:
        self.app = app
        self._token = None if token is None else token.encode()
        self._metrics = Metrics.get()
        if access_log and not _log.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            _log.addHandler(handler)
            _log.setLevel(logging.INFO)
            _log.propagate = False
        self._access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state: dict[str, Any] = scope.setdefault("state", {})
        status = 500
        sent = 0

        async def sending(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            if self._token is not None and scope["path"] not in _OPEN and not self._authorized(scope):
                state[ERROR_CODE] = "unauthorized"
                start, body = error_response(
                    401, Problem("unauthorized", "this service needs an Authorization: Bearer token")
                )
                await sending(start)
                await sending({"type": "http.response.body", "body": body})
            else:
                await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = route_of(scope["path"])
            code = state.get(ERROR_CODE)
            self._metrics.observe(route, scope["method"], status, seconds, code)
            if self._access_log:
                self._log(scope, route, status, seconds, sent, code)

    def _authorized(self, scope: Scope) -> bool:
        assert self._token is not None
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                # Compared in constant time: the time taken tells nothing of the token.
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
        return False

    @staticmethod
    def _log(scope: Scope, route: str, status: int, seconds: float, sent: int, code: str | None) -> None:
        client = scope.get("client")
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
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
        _log.info(json.dumps(record, ensure_ascii=False))


def refuse(exc: BaseException, state: dict[str, Any]) -> tuple[int, Problem]:
    """The status and body of an error, its code noted in the request's state (for metrics and logs)."""
    status, problem = problem_of(exc)
    state[ERROR_CODE] = problem.code
    if status >= 500 and not isinstance(exc, ServiceError) and problem.code == "internal":
        logging.getLogger("simhash_redis.service").error("unexpected error", exc_info=exc)
    return status, problem
