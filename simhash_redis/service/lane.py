"""The fast lane: a worker's plain-HTTP connections served by the compiled core's HTTP/1.1 loop on a thread
of its own, which hands over the whole requests that reached it together: single `/v1` calls to the guard,
run together (`Guard.lane_calls`), the others through the ASGI app run to its end on that thread (no event
loop, no task: the `/v1` POSTs and the GET endpoints never wait on one there). At the first request it does
not take (a JSON Lines body, a chunked or 100-continue one, one over --max-body, an upgrade, HTTP/1.0,
another method or route, a request that stops arriving) the connection goes back to uvicorn for good, that
request first. Without the compiled core, or with TLS, uvicorn serves every connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import unquote

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ..fingerprinting import engine_choice
from .guard import Guard, LaneCall, Metrics
from .operations import OPERATIONS
from .streams import INLINE, LINE_TYPES, Message, Scope

__all__ = ["MAX_BODY", "Lane"]

#: The largest body the lane reads (a larger one, or one over the service's --max-body, goes to uvicorn).
MAX_BODY = 16 * 1024 * 1024
_GETS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json"})
_V1 = "/v1/indexes/"
_SINGLE = {name.encode(): op for name, op in OPERATIONS.items()}
#: A request as the core's lane gives it: method, target, headers, body, client, server, keep-alive.
Request = tuple[
    str, bytes, list[tuple[bytes, bytes]], bytes, tuple[str, int] | None, tuple[str, int] | None, bool
]
_log = logging.getLogger("uvicorn.error")
# uvicorn's answer when the app fails before answering (after its default headers).
_FAILED = (
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 21\r\nconnection: close\r\n\r\n"
    b"Internal Server Error"
)


def _takes(method: str, path: str) -> bool:
    """Whether the app answers this request without its event loop (a JSON Lines body, which it streams
    on the loop, never reaches the lane's Python side: the core gives it back at its head)."""
    if method == "POST":
        return path.startswith(_V1)
    return method == "GET" and (path in _GETS or (path.startswith(_V1) and path.endswith("/stats")))


class _Stop:
    """The lane among uvicorn's connections: a graceful stop calls `shutdown`, and waits for it to leave
    (once its thread has ended and the connections it gave back are uvicorn's)."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self.shutdown = stop


class Lane:
    """One worker's lane (per uvicorn server): its thread, and the connections it gives back."""

    _lanes: ClassVar[weakref.WeakKeyDictionary[Any, Lane]] = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, protocol: HttpToolsProtocol) -> Lane | None:
        """The lane of the server a new connection came to (started on the first), or None: uvicorn
        serves it (TLS, no compiled core, the lane stopped)."""
        state = protocol.server_state
        lane = cls._lanes.get(state)
        if lane is None:
            if protocol.config.is_ssl or engine_choice.native is None:  # TLS, or the pure engine chosen
                return None
            from ..compiled import Lane as Core  # imported by the native adapter already

            lane = cls._lanes[state] = cls(protocol, Core)
        return lane if lane.running else None

    def __init__(self, protocol: HttpToolsProtocol, core: Any) -> None:
        self.loop = protocol.loop
        self.app = protocol.app
        self.server_state, self.app_state = protocol.server_state, protocol.app_state
        self.config = protocol.config
        self._protocol = type(protocol)
        self._root = protocol.root_path
        app = protocol.app
        while not isinstance(app, Guard) and hasattr(app, "app"):  # under uvicorn's middleware
            app = app.app
        # A single /v1 call goes to the guard without ASGI's scope and messages (the rest through the app).
        self._guard = app if isinstance(app, Guard) and not self._root else None
        self._defaults: tuple[list[tuple[bytes, bytes]], bytes] = ([], b"")
        keep_alive = float(self.config.timeout_keep_alive)
        # A larger body goes back at its head (uvicorn refuses it from its Content-Length), and so does a
        # JSON Lines one (uvicorn reads and answers it part by part).
        limit = MAX_BODY if self._guard is None else min(MAX_BODY, self._guard.max_body)
        self._core = core(self._answer, self._hand_off, keep_alive, limit, list(LINE_TYPES))
        self._handing: set[asyncio.Task[Any]] = set()
        self._stopping = self._ended = False
        self._stop = _Stop(self._shutdown)
        self.server_state.connections.add(self._stop)  # type: ignore[arg-type]
        Metrics.get().loop = self.loop  # the lane's requests arm the metrics' flush there
        self.running = True
        threading.Thread(target=self._serve, name="simhash-redis-lane", daemon=True).start()

    def take(self, transport: asyncio.BaseTransport) -> bool:
        """Give the lane a connection uvicorn accepted (False: uvicorn keeps it)."""
        sock = transport.get_extra_info("socket")
        if sock is None or not self.running:
            return False
        try:
            fd = os.dup(sock.fileno())
        except OSError:
            return False
        try:
            self._core.adopt(fd)  # the lane owns fd now
        except OSError:  # stopping, or its loop cannot be woken: fd closed, uvicorn keeps the connection
            return False
        transport.close()  # closes uvicorn's descriptor of the socket only: the connection stays open
        return True

    def _shutdown(self) -> None:
        """uvicorn stops (on its loop): the lane takes no more connections, answers what it has read,
        and gives back the rest; those given back from now on are told to stop too."""
        self._stopping = True
        self._core.stop()

    def _serve(self) -> None:
        try:
            self._core.run()
        except Exception:
            _log.exception("the service's fast lane stopped")
        finally:
            self.running = False
            with contextlib.suppress(RuntimeError):  # the loop closed already
                self.loop.call_soon_threadsafe(self._end)

    def _end(self) -> None:
        self._ended = True
        self._leave()

    def _leave(self) -> None:
        """Leave uvicorn's connections once the thread has ended and every connection given back is open
        on uvicorn's side (its stop waits for those in turn)."""
        if self._ended and not self._handing:
            self.server_state.connections.discard(self._stop)

    def _answer(self, requests: list[Request]) -> list[tuple[bytes, bool] | None]:
        """The responses to whole requests of different connections, and whether each connection stays
        open (None: it goes back to uvicorn, that request first). Single calls run together."""
        replies: list[tuple[bytes, bool] | None] = [None] * len(requests)
        guard = self._guard
        if guard is not None:
            singles = [(i, self._single(r)) for i, r in enumerate(requests) if r[0] == "POST"]
            calls = [(i, call) for i, call in singles if call is not None]
            answered = guard.lane_calls([call for _, call in calls]) if calls else []
            for (i, _), answer in zip(calls, answered, strict=True):
                if answer is not None:
                    keep_alive = requests[i][6]
                    replies[i] = self._json(answer[0], answer[1], keep_alive), keep_alive
        for i, request in enumerate(requests):
            if replies[i] is None:
                replies[i] = self._through_app(*request)
        return replies

    def _json(self, status: int, answer: bytes, keep_alive: bool) -> bytes:
        """A JSON answer's bytes, as uvicorn writes the app's."""
        head = b"content-type: application/json\r\ncontent-length: %d\r\n" % len(answer)
        if not keep_alive:
            head += b"connection: close\r\n"
        return b"".join((STATUS_LINE[status], self._default_headers(), head, b"\r\n", answer))

    def _through_app(
        self,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        client: tuple[str, int] | None,
        server: tuple[str, int] | None,
        keep_alive: bool,
    ) -> tuple[bytes, bool] | None:
        """One request run through the ASGI app (None: not one it answers without its event loop)."""
        raw_path, _, query = target.partition(b"?")
        if not raw_path.startswith(b"/"):
            return None
        try:
            path = raw_path.decode("ascii")
        except UnicodeDecodeError:
            return None
        if "%" in path:
            path = unquote(path)
        if not _takes(method, path):
            return None
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "server": server,
            "client": client,
            "scheme": "http",
            "root_path": self._root,
            "headers": headers,
            "state": self.app_state.copy(),
            "method": method,
            "path": self._root + path,
            "raw_path": self._root.encode("ascii") + raw_path,
            "query_string": query,
            "extensions": {INLINE: {}},
        }
        messages: list[Message] = []
        try:
            self._run(scope, body, messages)
        except Exception:
            _log.exception("Exception in ASGI application\n")
            if not _complete(messages):  # as uvicorn: a 500 if no answer was sent, the connection closed
                return STATUS_LINE[500] + self._default_headers() + _FAILED, False
        return _response(messages, self._default_headers(), keep_alive)

    def _single(self, request: Request) -> LaneCall | None:
        """A plain single call, for the guard (None: the app runs it, or it is not one: a name or query to
        decode, another route, a proxy's headers)."""
        _, target, headers, body, client, _, _ = request
        if b"%" in target or b"?" in target:
            return None
        parts = target.split(b"/")  # b"", b"v1", b"indexes", name, operation
        op = (
            _SINGLE.get(parts[4])
            if len(parts) == 5 and parts[1] == b"v1" and parts[2] == b"indexes"
            else None
        )
        if op is None or not parts[3].isascii():
            return None
        authorization = None
        for name, value in headers:
            if name == b"authorization" and authorization is None:  # the first, as the guard reads it
                authorization = value
            elif name.startswith(b"x-forwarded-"):  # uvicorn's proxy middleware reads them
                return None
        return LaneCall(target.decode("ascii"), parts[3].decode("ascii"), op, body, authorization, client)

    def _default_headers(self) -> bytes:
        """uvicorn's default headers (its Date, renewed each second), as bytes."""
        given = self.server_state.default_headers
        if given is not self._defaults[0]:
            self._defaults = (given, b"".join(b"%s: %s\r\n" % (name.lower(), value) for name, value in given))
        return self._defaults[1]

    def _run(self, scope: Scope, body: bytes, messages: list[Message]) -> None:
        """Run the app on one request to its end on this thread, its answer's messages into `messages`."""
        given = [False]

        async def receive() -> Message:
            if given[0]:
                return {"type": "http.disconnect"}
            given[0] = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            messages.append(message)

        call = self.app(scope, receive, send)
        try:
            while True:
                if call.send(None) is not None:  # a future of an event loop: there is none on this thread
                    call.close()
                    raise RuntimeError(f"{scope['method']} {scope['path']} waited on an event loop")
        except StopIteration:
            pass

    def _hand_off(self, fd: int, read: bytes) -> None:
        """A connection back to uvicorn (called on the lane's thread), with the bytes read of it: this
        function owns `fd` and never raises."""
        try:
            Metrics.get().handoffs.inc()
            self.loop.call_soon_threadsafe(self._resume, fd, read)
        except BaseException:  # the loop closed (the worker is ending), or worse: not left open
            os.close(fd)

    def _resume(self, fd: int, read: bytes) -> None:
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            return
        task = self.loop.create_task(self._adopt(sock, read))
        self._handing.add(task)
        task.add_done_callback(self._handed)

    async def _adopt(self, sock: socket.socket, read: bytes) -> None:
        def protocol() -> HttpToolsProtocol:
            return self._protocol(  # type: ignore[call-arg]
                config=self.config,
                server_state=self.server_state,
                app_state=self.app_state,
                _loop=self.loop,
                given=read,
            )

        try:
            _, adopted = await self.loop.connect_accepted_socket(protocol, sock)
        except BaseException:
            sock.close()
            raise
        if self._stopping:  # uvicorn told its own connections already: this one finishes, then closes
            adopted.shutdown()

    def _handed(self, task: asyncio.Task[Any]) -> None:
        self._handing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("a connection given back by the fast lane was lost: %s", task.exception())
        self._leave()


def _complete(messages: list[Message]) -> bool:
    """Whether an ASGI response was sent whole."""
    return (
        bool(messages)
        and messages[0]["type"] == "http.response.start"
        and any(m["type"] == "http.response.body" and not m.get("more_body", False) for m in messages[1:])
    )


def _response(messages: list[Message], defaults: bytes, keep_alive: bool) -> tuple[bytes, bool]:
    """The bytes of an ASGI response, as uvicorn writes them (its default headers first), and whether the
    connection stays open."""
    if not _complete(messages):
        return STATUS_LINE[500] + defaults + _FAILED, False  # the app ended without answering
    start = messages[0]
    body = b"".join(m.get("body", b"") for m in messages[1:] if m["type"] == "http.response.body")
    status = int(start["status"])
    head = [STATUS_LINE[status], defaults]
    length = False
    for name, value in start.get("headers", ()):
        name = bytes(name).lower()
        if name == b"content-length":
            length = True
        elif name == b"connection" and b"close" in bytes(value).lower():
            keep_alive = False
            continue  # written once, below
        head += [name, b": ", bytes(value), b"\r\n"]
    if not length and status not in (204, 304):
        head.append(b"content-length: %d\r\n" % len(body))
    if not keep_alive:
        head.append(b"connection: close\r\n")
    head.append(b"\r\n")
    return b"".join(head) + body, keep_alive
