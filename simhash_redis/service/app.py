"""The ASGI application: the /v1 routes, the probes, /metrics and /openapi.json (Starlette, msgspec).

Every /v1 operation is ``POST /v1/indexes/{name}/{operation}`` for one document, and
``POST /v1/indexes/{name}/{operation}/batch`` for many: a JSON array in and out, or JSON Lines in and
out (Content-Type: application/x-ndjson) for bulk. ``GET /v1/indexes/{name}/stats`` describes an index.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import IndexNotFound, InvalidArgument
from . import operations, schemas
from .config import ServiceConfig
from .guard import Guard, refuse
from .indexes import Opened, Registry
from .metrics import CONTENT_TYPE_LATEST, Metrics
from .openapi import document
from .problems import ServiceError
from .streams import LinesResponse, is_json_lines, json_lines, read_body

__all__ = ["create_app"]

_encode = msgspec.json.Encoder().encode
_JSON = "application/json"


@dataclass(frozen=True)
class _Operation:
    """One /v1 operation: the type of one document, whether it may create the index, and its call."""

    item: type[Any]
    single: type[Any]
    create: bool
    run: Callable[[Opened, Sequence[Any], Request], Awaitable[Sequence[msgspec.Struct]]]


def _query_number(request: Request, name: str, kind: type[int] | type[float]) -> Any:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        return kind(raw)
    except ValueError:
        raise InvalidArgument(f"query parameter {name} must be a number, got {raw[:40]!r}") from None


async def _fingerprint(
    index: Opened, items: Sequence[schemas.Text], _: Request
) -> list[schemas.FingerprintResult]:
    return operations.fingerprint(index, [t.text for t in items])


async def _near(index: Opened, items: Sequence[Any], request: Request) -> list[schemas.NearResult]:
    if len(items) == 1 and isinstance(items[0], schemas.Query):
        return await operations.near(index, items, items[0].k, items[0].threshold)
    k = _query_number(request, "k", int)
    return await operations.near(index, items, k, _query_number(request, "threshold", float))


async def _add(index: Opened, items: Sequence[schemas.Document], _: Request) -> list[schemas.AddResult]:
    return await operations.add(index, items)


async def _add_if_new(
    index: Opened, items: Sequence[schemas.Document], _: Request
) -> list[schemas.AddIfNewResult]:
    return await operations.add_if_new(index, items)


async def _remove(index: Opened, items: Sequence[schemas.Id], _: Request) -> list[schemas.RemoveResult]:
    return await operations.remove(index, [i.id for i in items])


async def _get(index: Opened, items: Sequence[schemas.Id], _: Request) -> list[schemas.StoredResult]:
    return await operations.get(index, [i.id for i in items])


#: The operations, by the name in their path.
OPERATIONS: dict[str, _Operation] = {
    "fingerprint": _Operation(schemas.Text, schemas.Text, False, _fingerprint),
    "near": _Operation(schemas.QueryItem, schemas.Query, False, _near),
    "add": _Operation(schemas.Document, schemas.Document, True, _add),
    "add_if_new": _Operation(schemas.Document, schemas.Document, True, _add_if_new),
    "remove": _Operation(schemas.Id, schemas.Id, False, _remove),
    "get": _Operation(schemas.Id, schemas.Id, False, _get),
}
_SINGLE = {name: msgspec.json.Decoder(op.single) for name, op in OPERATIONS.items()}
_BATCH = {name: msgspec.json.Decoder(list[op.item]) for name, op in OPERATIONS.items()}  # type: ignore[name-defined]


class Service:
    """The routes' shared state: the configuration and the open indexes.

    Args:
        config: the service's configuration.
    """

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
        """Resolve the server's URL (starting the embedded server if it is the one), then close at the end."""
        url = self.config.redis_url
        if not url:
            from ..tools.connect import default_url

            url = await asyncio.to_thread(default_url)
        self._registry = Registry(self.config, url)
        try:
            yield
        finally:
            await self._registry.aclose()

    def error(self, exc: BaseException, request: Request) -> Response:
        """The error response of an exception (its code noted for the metrics and the access log)."""
        status, problem = refuse(exc, request.scope.setdefault("state", {}))
        if isinstance(exc, IndexNotFound) and self._registry is not None:
            self._registry.forget(request.path_params.get("name", ""))
        return Response(_encode(schemas.ErrorBody(problem)), status, media_type=_JSON)

    async def operation(self, request: Request) -> Response:
        """``POST /v1/indexes/{name}/{operation}[/batch]``."""
        try:
            name, op_name = request.path_params["name"], request.path_params["op"]
            op = OPERATIONS.get(op_name)
            if op is None:
                raise ServiceError(404, "not_found", f"no operation {op_name!r}: {', '.join(OPERATIONS)}")
            batch = request.url.path.endswith("/batch")
            if batch and is_json_lines(request):
                index = await self.registry.get(name, create=op.create)
                lines = json_lines(
                    request,
                    op.item,
                    lambda items: op.run(index, items, request),
                    self.config.batch,
                    self.config.max_body,
                )
                return LinesResponse(lines)
            body = await read_body(request, self.config.max_body)
            items = _BATCH[op_name].decode(body) if batch else [_SINGLE[op_name].decode(body)]
            index = await self.registry.get(name, create=op.create)
            results = await asyncio.wait_for(op.run(index, items, request), self.config.timeout)
            return Response(_encode(results if batch else results[0]), media_type=_JSON)
        except asyncio.TimeoutError:
            timeout = self.config.timeout
            message = f"the request took longer than {timeout:g} s: send smaller batches"
            return self.error(ServiceError(504, "timeout", message), request)
        except Exception as exc:
            return self.error(exc, request)

    async def stats(self, request: Request) -> Response:
        """``GET /v1/indexes/{name}/stats``."""
        try:
            index = await self.registry.get(request.path_params["name"])
            return Response(_encode(await operations.stats(index)), media_type=_JSON)
        except Exception as exc:
            return self.error(exc, request)

    async def healthz(self, request: Request) -> Response:
        """``GET /healthz``: the process answers."""
        return Response(b'{"status":"ok"}', media_type=_JSON)

    async def readyz(self, request: Request) -> Response:
        """``GET /readyz``: Redis answers, and the configured index (if it exists) can be read."""
        try:
            await self.registry.ping()
            with contextlib.suppress(IndexNotFound):
                await operations.stats(await self.registry.get(self.config.index))
            return Response(b'{"status":"ready"}', media_type=_JSON)
        except Exception as exc:
            return self.error(exc, request)

    async def metrics(self, request: Request) -> Response:
        """``GET /metrics``: Prometheus's text exposition."""
        return Response(Metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    async def openapi(self, request: Request) -> Response:
        """``GET /openapi.json``: the OpenAPI document of the API."""
        return Response(document(), media_type=_JSON)


def create_app(config: ServiceConfig | None = None) -> Guard:
    """The service's ASGI application.

    Args:
        config: the configuration; default: the one ``simhash-redis serve`` put in the environment.

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

    routes = [
        Route("/v1/indexes/{name}/{op}", service.operation, methods=["POST"]),
        Route("/v1/indexes/{name}/{op}/batch", service.operation, methods=["POST"]),
        Route("/v1/indexes/{name}/stats", service.stats, methods=["GET"]),
        Route("/healthz", service.healthz, methods=["GET"]),
        Route("/readyz", service.readyz, methods=["GET"]),
        Route("/metrics", service.metrics, methods=["GET"]),
        Route("/openapi.json", service.openapi, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=service.lifespan, exception_handlers={HTTPException: refused})
    return Guard(app, config.token, config.access_log)
