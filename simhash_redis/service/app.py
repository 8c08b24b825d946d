"""The ASGI application: the /v1 POSTs at the ASGI level (`streams.Call`), the probes, /metrics and
/openapi.json by Starlette."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import defaults
from ..errors import ConfigurationMismatch, IndexNotFound, InvalidArgument, InvalidType
from ..index.mode import chosen_mode
from . import operations
from .config import SERVE_ASKING, ServiceConfig, check_url
from .guard import CONTENT_TYPE_LATEST, Guard, Metrics
from .indexes import MAX_BATCH, Opened, Registry, together
from .operations import OPERATIONS, Operation, document
from .problems import ErrorBody, ServiceError, not_utf8, refuse
from .runner import alone
from .streams import Call, Receive, Scope, Send, json_lines, segments, too_large

__all__ = ["create_app"]

_encode = msgspec.json.Encoder().encode
_JSON = "application/json"
_NEAR_QUERY: dict[str, type[int] | type[float]] = {"k": int, "threshold": float}


def _params(op: Operation, call: Call) -> tuple[Any, ...]:
    """A batch's parameters, from its URL: near's k and threshold (any other query parameter refused)."""
    query = call.query()
    takes = _NEAR_QUERY if op.name == "near" else {}
    for name in query:
        if name not in takes:
            allowed = "takes k and threshold" if takes else "takes no query parameters"
            raise InvalidArgument(f"unknown query parameter {name[:40]!r}: {op.name}/batch {allowed}")
    params: list[Any] = []
    for name, kind in takes.items():
        raw = query.get(name)
        try:
            params.append(None if raw is None else kind(raw))
        except ValueError:
            raise InvalidArgument(f"query parameter {name} must be a number, got {str(raw)[:40]!r}") from None
    return tuple(params)


def _decoded(op: Operation, body: bytes) -> Any:
    """A single call's request (InvalidArgument and the like for a malformed one)."""
    try:
        return op.decode_single(body)
    except UnicodeDecodeError as exc:
        raise not_utf8(exc) from None


def _run_part(op: Operation, index: Opened, params: Sequence[Any], items: Sequence[Any]) -> Sequence[Any]:
    return op.function(index, items, *params)


class Service:
    """The routes' shared state: the configuration and the open indexes."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self._registry: Registry | None = None

    @property
    def registry(self) -> Registry:
        """The open indexes (made at startup)."""
        if self._registry is None:
            raise ServiceError(503, "redis_unavailable", "the service is starting")
        return self._registry

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        """Resolve the server's URL (starting the embedded server if need be); close at the end."""
        url = self.config.redis_url
        if not url:
            from ..tools.connect import default_url

            url = await asyncio.to_thread(default_url)
            check_url(url)  # $SIMHASH_REDIS_URL: a malformed one stops the worker, not each call
        self._registry = Registry(self.config, url)
        # Frozen: a full collection no longer walks every module's objects (a fifth of a batch's CPU).
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            Metrics.get().flush()  # the last requests' figures, before the worker exits
            self._registry.close()

    def forget_missing(self, exc: BaseException, name: str) -> None:
        """After IndexNotFound or ConfigurationMismatch, open the index afresh next time."""
        if isinstance(exc, (IndexNotFound, ConfigurationMismatch)) and self._registry is not None:
            self._registry.forget(name)

    async def operation(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /v1/indexes/{name}/{operation}[/batch]`` (an ASGI app)."""
        call = Call(scope, receive, send, self.config.timeout)
        parts = segments(scope)  # "", "v1", "indexes", name, operation[, "batch"]
        name = parts[3] if len(parts) > 3 else ""
        try:
            op = OPERATIONS.get(parts[4]) if len(parts) in (5, 6) else None
            if op is None or (len(parts) == 6 and parts[5] != "batch"):
                if len(parts) == 5 and parts[4] == "stats":
                    raise ServiceError(405, "method_not_allowed", "POST is not allowed here")
                raise ServiceError(404, "not_found", f"no route {scope['path']!r}: see /openapi.json")
            if len(parts) == 6:
                await self._batch(call, name, op)
                return
            if scope.get("query_string"):  # refused: one in the URL would be ignored (options go in the body)
                given = next(iter(call.query()), "")
                where = "k and threshold go in the body" if op.name == "near" else "it takes none"
                raise InvalidArgument(f"query parameter {given[:40]!r} is not read by {op.name}: {where}")
            body = await call.body(self.config.max_body)
            if alone(scope):  # none can join its batch (a coalescer may hold only requests answered 504)
                await call.answer(*self.singles([(name, op, body)], [call.state])[0])
                return
            single = _decoded(op, body)
            index = self._index(name, op, (single,))
            params: tuple[Any, ...] = (single.k, single.threshold) if op.name == "near" else ()
            if params:  # checked before they key a coalescer: each value refused would make one
                operations.check_near(index, *params)
            coalescer = index.coalescer((op.name, *params), lambda items: op.function(index, items, *params))
            future = coalescer.submit(single)
            timer = asyncio.get_running_loop().call_later(self.config.timeout, self._expire, future)
            try:
                result = await future
            finally:
                timer.cancel()
            await call.answer(200, _encode(result))
        except Exception as exc:
            self.forget_missing(exc, name)
            await call.refuse(exc)

    def singles(
        self, calls: Sequence[tuple[str, Operation, bytes]], states: Sequence[dict[str, Any]]
    ) -> list[tuple[int, bytes]]:
        """Single calls (index name, operation, body) run now, on this thread, those of one operation on
        one index with the same parameters in one library call, as the coalescer runs them: each one's
        status and JSON answer (an error's code noted in its state). A lone request's, and the fast lane's."""
        outcomes: list[Any] = [None] * len(calls)
        groups: dict[tuple[Any, ...], list[tuple[int, Any, Opened]]] = {}
        for i, (name, op, body) in enumerate(calls):
            try:
                if len(body) > self.config.max_body:
                    raise too_large(len(body), self.config.max_body)
                single = _decoded(op, body)
                index = self._index(name, op, (single,))  # one by one: a refused write leaves nothing behind
            except Exception as exc:
                outcomes[i] = exc
                continue
            key = (name, op.name, single.k, single.threshold) if op.name == "near" else (name, op.name)
            groups.setdefault(key, []).append((i, single, index))
        for (_, _, *params), members in groups.items():
            op, index = calls[members[0][0]][1], members[0][2]
            for start in range(0, len(members), MAX_BATCH):
                part = members[start : start + MAX_BATCH]
                run = functools.partial(_run_part, op, index, params)
                done = together(run, [item for _, item, _ in part])
                for (i, _, _), outcome in zip(part, done, strict=True):
                    outcomes[i] = outcome
        answers = []
        for (name, _, _), state, outcome in zip(calls, states, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                self.forget_missing(outcome, name)
                status, problem = refuse(outcome, state)
                answers.append((status, _encode(ErrorBody(problem))))
            else:
                answers.append((200, _encode(outcome)))
        return answers

    def _index(self, name: str, op: Operation, items: Sequence[Any]) -> Opened:
        """The index an operation runs on; for a write to a missing one, created once its documents are
        checked (a refused write leaves nothing behind)."""
        try:
            return self.registry.get(name)
        except IndexNotFound:
            if not (op.create and self.config.create):
                raise
        from_text = not items or any(getattr(item, "text", None) is not None for item in items)
        config = self.config
        verified = chosen_mode(config.asked_mode(), name=name, from_text=from_text, asking=SERVE_ASKING)
        operations.check_documents(items, verified, defaults.F if config.f is None else config.f)
        return self.registry.get(name, create=True, from_text=from_text)

    def _expire(self, future: asyncio.Future[Any]) -> None:
        """Answer 504 to a single call still waiting for its batch after the timeout (the batch skips it)."""
        if not future.done():
            message = f"the request took longer than {self.config.timeout:g} s: send smaller batches"
            future.set_exception(ServiceError(504, "timeout", message))

    async def _batch(self, call: Call, name: str, op: Operation) -> None:
        """A batch: JSON Lines streamed in and out, or a JSON array in one library call."""
        params = _params(op, call)
        if call.json_lines():
            run = self._streamed(name, op, params)
            await call.stream(json_lines(call, op.item, run, self.config.batch, self.config.max_body))
            return
        try:
            items = op.decode_batch(await call.body(self.config.max_body))
        except UnicodeDecodeError as exc:
            raise not_utf8(exc) from None
        if not items and op.create and self.config.create:  # nothing to write: no index is made for it
            await call.answer(200, b"[]")
            return
        index = self._index(name, op, items)
        try:
            results = op.function(index, items, *params)
        except (InvalidArgument, InvalidType):
            if op.create and len(items) > 1:  # refused before any write: tell which document
                operations.check_documents(items, index.verified is not None, index.plain.f)
            raise
        await call.answer(200, _encode(results))

    def _streamed(
        self, name: str, op: Operation, params: tuple[Any, ...]
    ) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """The operation's call for a JSON Lines stream: each part on the index as it is then (one dropped
        or made again meanwhile is opened afresh; a missing one a write may make, made by its first part)."""
        try:  # before the stream's answer starts: Redis unreachable (503), a missing index not to be made
            self.registry.get(name)
        except IndexNotFound:
            if not (op.create and self.config.create):
                raise

        def run(items: Sequence[Any]) -> Sequence[Any]:
            return op.function(self._index(name, op, items), items, *params)

        return run

    def error(self, exc: BaseException, request: Request) -> Response:
        """The error response of an exception (its code noted for the metrics and the access log)."""
        status, problem = refuse(exc, request.scope.setdefault("state", {}))
        self.forget_missing(exc, request.path_params.get("name", ""))
        return Response(_encode(ErrorBody(problem)), status, media_type=_JSON)

    async def stats(self, request: Request) -> Response:
        """``GET /v1/indexes/{name}/stats``."""
        try:
            parts = segments(request.scope)
            if len(parts) != 5:  # an encoded '/' in the name: the route matched its decoded path only
                raise ServiceError(404, "not_found", f"no route {request.url.path!r}: see /openapi.json")
            if request.url.query:  # as on a single call: refused, not ignored (docs/service.md)
                raise InvalidArgument(f"stats takes no query parameters, got {request.url.query[:40]!r}")
            index = self.registry.get(parts[3])
            return Response(_encode(operations.stats(index)), media_type=_JSON)
        except Exception as exc:
            return self.error(exc, request)

    async def readyz(self, request: Request) -> Response:
        """``GET /readyz``: Redis answers, and the configured index (if it exists) can be read."""
        try:
            # Opening the index reads its meta: the check that Redis answers (the documented ACL has no PING).
            with contextlib.suppress(IndexNotFound):
                operations.stats(self.registry.get(self.config.index))
            return Response(b'{"status":"ready"}', media_type=_JSON)
        except Exception as exc:
            answer = self.error(exc, request)
            answer.status_code = 503  # not ready, whatever the cause: the body says which
            return answer


def _fixed(body: Callable[[], bytes], media_type: str = _JSON) -> Callable[[Request], Awaitable[Response]]:
    """A GET endpoint answering what `body` returns (/healthz, /metrics, /openapi.json)."""

    async def endpoint(request: Request) -> Response:
        return Response(body(), media_type=media_type)

    return endpoint


def create_app(config: ServiceConfig | None = None) -> Guard:
    """The service's ASGI application (default config: the one `simhash-redis serve` put in the environment).

    Raises:
        InvalidArgument: the configuration is malformed.
    """
    config = (config or ServiceConfig.from_env()).check()
    service = Service(config)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            error = ServiceError(405, "method_not_allowed", f"{request.method} is not allowed here")
        else:
            error = ServiceError(404, "not_found", f"no route {request.url.path!r}: see /openapi.json")
        return service.error(error, request)

    healthz = _fixed(lambda: b'{"status":"ok"}')
    routes = [
        Route("/v1/indexes/{name}/stats", service.stats, methods=["GET"]),
        # The POST routes, for the 405 of another method (POSTs never reach Starlette).
        Route("/v1/indexes/{name}/{op}", healthz, methods=["POST"]),
        Route("/v1/indexes/{name}/{op}/batch", healthz, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", service.readyz, methods=["GET"]),
        Route("/metrics", _fixed(Metrics.exposition, CONTENT_TYPE_LATEST), methods=["GET"]),
        Route("/openapi.json", _fixed(document), methods=["GET"]),
    ]
    rest = Starlette(routes=routes, lifespan=service.lifespan, exception_handlers={HTTPException: refused})
    # The /v1 POSTs go straight to the service's handler (Starlette's routes above only answer 405).
    return Guard(rest, service.operation, service.singles, config.token, config.access_log, config.max_body)
