"""The one place an error becomes an HTTP status and a JSON body with a stable code (docs/service.md): a
request the service cannot understand is a 4xx, an unexpected failure a 500 that tells nothing of it."""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from .. import errors

__all__ = [
    "CODES",
    "ERROR_CODE",
    "SENT",
    "STATUS",
    "ErrorBody",
    "Problem",
    "ServiceError",
    "not_utf8",
    "problem_of",
    "refuse",
]

#: The keys of a request's scope["state"] where its answer's error code, status and body bytes are noted
#: (for the metrics and the access log).
ERROR_CODE = "error_code"
STATUS = "status"
SENT = "sent"


class ServiceError(Exception):
    """A request the service refuses, with its HTTP status and stable code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Problem(msgspec.Struct, frozen=True, omit_defaults=True):
    """An error's JSON form (the value of "error" in a response body): a stable code, a message for
    people, and the 1-based line of a JSON Lines body it concerns, where it concerns one."""

    code: str
    message: str
    line: int | None = None


class ErrorBody(msgspec.Struct, frozen=True):
    """The body of every error response."""

    error: Problem


#: Library errors, most specific first: (type, HTTP status, code).
_LIBRARY: tuple[tuple[type[errors.SimhashRedisError], int, str], ...] = (
    (errors.InvalidFingerprint, 400, "invalid_fingerprint"),
    (errors.InvalidArgument, 400, "invalid_argument"),
    (errors.InvalidType, 400, "invalid_type"),
    (errors.InputError, 400, "invalid_input"),
    (errors.TooManyErrors, 400, "too_many_errors"),
    (errors.IndexNotFound, 404, "index_not_found"),
    (errors.ConfigurationMismatch, 409, "configuration_mismatch"),
    (errors.WriteContention, 409, "write_contention"),
    (errors.IndexCorrupted, 500, "index_corrupted"),
    (errors.RedisOutOfMemory, 507, "redis_out_of_memory"),
    (errors.RedisPermissionError, 503, "redis_permission_denied"),
    (errors.RedisAuthError, 503, "redis_auth_failed"),
    (errors.RedisTimeout, 504, "redis_timeout"),
    (errors.RedisUnavailable, 503, "redis_unavailable"),
)

_OWN_MESSAGE = (errors.RedisOutOfMemory, errors.RedisAuthError)

#: Every code a response can carry, with its status (docs/service.md lists them).
CODES: dict[str, int] = {
    **{code: status for _, status, code in _LIBRARY},
    "malformed_json": 400,
    "invalid_request": 422,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "request_timeout": 408,
    "body_too_large": 413,
    "timeout": 504,
    "internal": 500,
}


def problem_of(exc: BaseException) -> tuple[int, Problem]:
    """The HTTP status and the error body of an exception."""
    if isinstance(exc, ServiceError):
        return exc.status, Problem(exc.code, str(exc))
    if isinstance(exc, errors.SimhashRedisError):
        status, code = next(((s, c) for kind, s, c in _LIBRARY if isinstance(exc, kind)), (500, "internal"))
        message = str(exc)
        # An out-of-memory refusal's own message says what it left (no document half-written, the batch
        # maybe partly stored), and a refused credential is not fixed by sending the request again.
        if isinstance(exc, errors.RedisUnavailable) and not isinstance(exc, _OWN_MESSAGE):
            message = f"cannot reach Redis ({errors.detail(exc)}); every write is idempotent: "
            message += "send the same request again"
        return status, Problem(code, message)
    if isinstance(exc, msgspec.ValidationError):
        return 422, Problem("invalid_request", f"the request body does not fit its schema: {exc}")
    if isinstance(exc, msgspec.DecodeError):
        return 400, Problem("malformed_json", f"the request body is not valid JSON: {exc}")
    return 500, Problem("internal", "an unexpected error; the service's log has the details")


def not_utf8(exc: UnicodeDecodeError) -> ServiceError:
    """400 malformed_json for a body whose JSON strings are not UTF-8 (msgspec raises UnicodeDecodeError)."""
    return ServiceError(
        400,
        "malformed_json",
        f"the request body is not valid JSON: a string holds bytes that are not UTF-8 ({exc})",
    )


def refuse(exc: BaseException, state: dict[str, Any]) -> tuple[int, Problem]:
    """The status and body of an error, its code noted in the request's state (for metrics and logs)."""
    status, problem = problem_of(exc)
    state[ERROR_CODE] = problem.code
    if status >= 500 and not isinstance(exc, ServiceError) and problem.code == "internal":
        logging.getLogger("simhash_redis.service").error("unexpected error", exc_info=exc)
    return status, problem
