"""The OpenAPI 3.1 document of the service, generated from its msgspec schemas (served at /openapi.json)."""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Any

import msgspec

from . import schemas
from .operations import OPERATIONS
from .problems import CODES

__all__ = ["document"]


def _ref(kind: Any) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _answers(description: str, content: dict[str, Any]) -> dict[str, Any]:
    """The responses of a /v1 operation: 200 with its content, and every error status."""
    error = {"description": "an error; body.error.code is stable", "content": _json(_ref(schemas.ErrorBody))}
    return {
        "200": {"description": description, "content": content},
        **{str(status): error for status in sorted(set(CODES.values()))},
    }


@functools.lru_cache(maxsize=1)
def document() -> bytes:
    """The OpenAPI document, as JSON."""
    kinds: set[Any] = {schemas.ErrorBody, schemas.Stats}
    for op in OPERATIONS.values():
        kinds |= {op.single, op.item, op.result}
    _, components = msgspec.json.schema_components(sorted(kinds, key=lambda k: k.__name__))
    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    paths: dict[str, Any] = {}
    for path, op in OPERATIONS.items():
        paths[f"/v1/indexes/{{name}}/{path}"] = {
            "post": {
                "summary": op.summary,
                "operationId": path,
                "parameters": [name],
                "requestBody": {"required": True, "content": _json(_ref(op.single))},
                "responses": _answers("the result", _json(_ref(op.result))),
            }
        }
        queries = (("k", "integer"), ("threshold", "number")) if path == "near" else ()
        params = [
            name,
            *({"name": q, "in": "query", "required": False, "schema": {"type": t}} for q, t in queries),
        ]
        lines = {"type": "string", "description": f"JSON Lines: one {op.item.__name__} a line"}
        results = {"type": "array", "items": _ref(op.result)}
        paths[f"/v1/indexes/{{name}}/{path}/batch"] = {
            "post": {
                "summary": f"{op.summary}: a batch (a JSON array, or JSON Lines streamed in and out)",
                "operationId": f"{path}_batch",
                "parameters": params,
                "requestBody": {
                    "required": True,
                    "content": {
                        **_json({"type": "array", "items": _ref(op.item)}),
                        "application/x-ndjson": {"schema": lines},
                    },
                },
                "responses": _answers(
                    "a result per document, in order (JSON Lines: an error line for a malformed line)",
                    {**_json(results), "application/x-ndjson": {"schema": {"type": "string"}}},
                ),
            }
        }
    paths["/v1/indexes/{name}/stats"] = {
        "get": {
            "summary": "An index's configuration and counts",
            "operationId": "stats",
            "parameters": [name],
            "responses": _answers("the stats", _json(_ref(schemas.Stats))),
        }
    }
    ok = {"200": {"description": "ok"}}
    paths["/healthz"] = {"get": {"summary": "The process answers", "responses": ok}}
    paths["/readyz"] = {
        "get": {
            "summary": "Redis answers and the index can be read",
            "responses": {**ok, "503": {"description": "not ready"}},
        }
    }
    paths["/metrics"] = {"get": {"summary": "Prometheus metrics", "responses": ok}}
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "simhash-redis", "version": importlib.metadata.version("simhash-redis")},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }
    return msgspec.json.encode(doc)
