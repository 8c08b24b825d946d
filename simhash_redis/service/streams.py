"""Request bodies: a JSON body read under the size limit, and JSON Lines streamed in and out.

A JSON Lines body is read as it arrives and answered as it goes: its documents go to the library a
batch at a time, and each batch's results (one line per input line, in order) are sent before the next
is read, so a bulk load of any size takes a bounded amount of memory. A malformed line (or a document
the library refuses) gets an error line naming its line number, and the stream goes on; a failure of
Redis ends the stream with an error line (the status was sent with the first line). Every write is
idempotent: sending the same stream again completes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..errors import InvalidArgument, InvalidType
from .guard import refuse
from .problems import Problem, ServiceError
from .schemas import ErrorBody

__all__ = ["JSON_LINES", "LinesResponse", "is_json_lines", "json_lines", "read_body"]

T = TypeVar("T")
R = TypeVar("R", bound=msgspec.Struct)

#: The media type of a JSON Lines response (requests may also say application/jsonl or json-lines).
JSON_LINES = "application/x-ndjson"
_LINE_TYPES = (
    "application/x-ndjson",
    "application/jsonl",
    "application/json-lines",
    "application/x-jsonlines",
)
_encode = msgspec.json.Encoder().encode


class LinesResponse(Response):
    """A response streamed from an async iterator while the request's body is still being read.

    Starlette's StreamingResponse listens for a disconnect meanwhile, which takes the body's messages
    from `receive`: the lines here read them through the request instead.

    Args:
        lines: the response's lines.
    """

    def __init__(self, lines: AsyncIterator[bytes]) -> None:
        super().__init__(media_type=JSON_LINES)
        self._lines = lines
        del self.headers["content-length"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for line in self._lines:
            await send({"type": "http.response.body", "body": line, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def is_json_lines(request: Request) -> bool:
    """Whether the request's body is JSON Lines (by its Content-Type)."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind in _LINE_TYPES


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused once it is larger than the limit.

    Raises:
        ServiceError: 413 body_too_large.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        parts.append(chunk)
    return b"".join(parts)


def _too_large(size: int, limit: int) -> ServiceError:
    return ServiceError(
        413,
        "body_too_large",
        f"the request body ({size:,}+ bytes) is larger than the limit of {limit:,} bytes: send a smaller "
        "batch, or JSON Lines (Content-Type: application/x-ndjson) for bulk",
    )


async def _lines(request: Request, limit: int) -> AsyncIterator[tuple[int, bytes]]:
    """The body's lines with their 1-based numbers, blank ones left out."""
    rest = b""
    number = 0
    async for chunk in request.stream():
        rest += chunk
        *complete, rest = rest.split(b"\n")
        for line in complete:
            number += 1
            if len(line) > limit:
                raise _line_too_long(number, limit)
            if line.strip():
                yield number, line
        if len(rest) > limit:
            raise _line_too_long(number + 1, limit)
    if rest.strip():
        yield number + 1, rest


def _line_too_long(number: int, limit: int) -> ServiceError:
    return ServiceError(413, "body_too_large", f"line {number} is longer than the limit of {limit:,} bytes")


async def json_lines(
    request: Request,
    item: type[T],
    run: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
    batch: int,
    limit: int,
) -> AsyncIterator[bytes]:
    """The response lines of a JSON Lines request: each line's result, or its error, in order.

    Args:
        request: the request.
        item: the type of one line.
        run: the operation on a batch of lines, their results in order.
        batch: lines per call of run.
        limit: the longest line, in bytes.
    """
    decoder = msgspec.json.Decoder(item)
    state: dict[str, Any] = request.scope.setdefault("state", {})
    pending: list[tuple[int, T]] = []
    try:
        async for number, raw in _lines(request, limit):
            try:
                pending.append((number, decoder.decode(raw)))
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                async for out in _flush(pending, run, state):
                    yield out
                yield _error_line(exc, state, number)
                continue
            if len(pending) >= batch:
                async for out in _flush(pending, run, state):
                    yield out
        async for out in _flush(pending, run, state):
            yield out
    except Exception as exc:  # the stream ends here: its status is sent, so the error is its last line
        yield _error_line(exc, state, None)


async def _flush(
    pending: list[tuple[int, T]], run: Callable[[Sequence[T]], Awaitable[Sequence[R]]], state: dict[str, Any]
) -> AsyncIterator[bytes]:
    """The results of the pending lines (emptied): one batch, or line by line if the library refuses
    a document of it (it checks a whole batch before writing any), to name the lines it refuses."""
    if not pending:
        return
    lines = list(pending)
    pending.clear()
    try:
        results = await run([value for _, value in lines])
    except (InvalidArgument, InvalidType):
        for number, value in lines:
            try:
                one = (await run([value]))[0]
            except (InvalidArgument, InvalidType) as exc:
                yield _error_line(exc, state, number)
            else:
                yield _encode(one) + b"\n"
        return
    for result in results:
        yield _encode(result) + b"\n"


def _error_line(exc: BaseException, state: dict[str, Any], number: int | None) -> bytes:
    _, problem = refuse(exc, state)
    return _encode(ErrorBody(Problem(problem.code, problem.message, number))) + b"\n"
