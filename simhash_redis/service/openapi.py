"""The OpenAPI 3.1 document of the service, generated from its msgspec schemas (served at /openapi.json)."""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Any

import msgspec

from . import schemas
from .problems import CODES

__all__ = ["document"]

# operation -> (its document alone, in a batch, its result, summary)
_OPERATIONS: dict[str, tuple[Any, Any, Any, str]] = {
    "fingerprint": (schemas.Text, schemas.Text, schemas.FingerprintResult, "A text's fingerprint (no Redis)"),
    "near": (
        schemas.Query,
        schemas.QueryItem,
        schemas.NearResult,
        "Stored documents near a text or fingerprint",
    ),
    "add": (schemas.Document, schemas.Document, schemas.AddResult, "Store a document"),
    "add_if_new": (
        schemas.Document,
        schemas.Document,
        schemas.AddIfNewResult,
        "Store a document unless a near-duplicate is stored (atomically)",
    ),
    "remove": (schemas.Id, schemas.Id, schemas.RemoveResult, "Remove a document"),
    "get": (schemas.Id, schemas.Id, schemas.StoredResult, "The fingerprint stored for an id"),
}


def _ref(kind: Any) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def _errors() -> dict[str, Any]:
    statuses = sorted({status for status in CODES.values()})
    error = {"content": {"application/json": {"schema": _ref(schemas.ErrorBody)}}}
    return {
        str(status): {"description": "an error; body.error.code is stable", **error} for status in statuses
    }


@functools.lru_cache(maxsize=1)
def document() -> bytes:
    """The OpenAPI document, as JSON."""
    kinds = {schemas.ErrorBody, schemas.Stats}
    for single, item, result, _ in _OPERATIONS.values():
        kinds |= {single, item, result}
    _, components = msgspec.json.schema_components(sorted(kinds, key=lambda k: k.__name__))
    name_param = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    paths: dict[str, Any] = {}
    for op, (single, item, result, summary) in _OPERATIONS.items():
        paths[f"/v1/indexes/{{name}}/{op}"] = {
            "post": {
                "summary": summary,
                "operationId": op,
                "parameters": [name_param],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(single)}}},
                "responses": {
                    "200": {
                        "description": "the result",
                        "content": {"application/json": {"schema": _ref(result)}},
                    },
                    **_errors(),
                },
            }
        }
        params = [name_param]
        if op == "near":
            params = [
                name_param,
                {"name": "k", "in": "query", "required": False, "schema": {"type": "integer"}},
                {"name": "threshold", "in": "query", "required": False, "schema": {"type": "number"}},
            ]
        many = {"type": "array", "items": _ref(item)}
        lines = {"type": "string", "description": f"JSON Lines: one {item.__name__} a line"}
        paths[f"/v1/indexes/{{name}}/{op}/batch"] = {
            "post": {
                "summary": f"{summary}: a batch (a JSON array, or JSON Lines streamed in and out)",
                "operationId": f"{op}_batch",
                "parameters": params,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": many},
                        "application/x-ndjson": {"schema": lines},
                    },
                },
                "responses": {
                    "200": {
                        "description": "a result per document, in order (JSON Lines: an error line for a "
                        "malformed line)",
                        "content": {
                            "application/json": {"schema": {"type": "array", "items": _ref(result)}},
                            "application/x-ndjson": {"schema": {"type": "string"}},
                        },
                    },
                    **_errors(),
                },
            }
        }
    paths["/v1/indexes/{name}/stats"] = {
        "get": {
            "summary": "An index's configuration and counts",
            "operationId": "stats",
            "parameters": [name_param],
            "responses": {
                "200": {
                    "description": "the stats",
                    "content": {"application/json": {"schema": _ref(schemas.Stats)}},
                },
                **_errors(),
            },
        }
    }
    plain = {"200": {"description": "ok"}, "503": {"description": "not ready"}}
    paths["/healthz"] = {
        "get": {"summary": "The process answers", "responses": {"200": {"description": "ok"}}}
    }
    paths["/readyz"] = {"get": {"summary": "Redis answers and the index can be read", "responses": plain}}
    paths["/metrics"] = {
        "get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "ok"}}}
    }
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
