"""The HTTP protocol of a worker: uvicorn's (httptools), counting the worker's open connections and
sending each response's head together with its body.

Two things a lone request's latency pays for that it need not:

- With one connection open, requests reach the worker one after another (HTTP/1.1 answers a
  connection's requests in order), so there is nothing to gather into a batch: the /v1 handler then
  calls the library at once instead of through the coalescer's extra turns of the event loop
  (`alone`).
- uvicorn writes a response's head as soon as the application starts it, then its body: two
  segments, and a client that wakes up for the head goes back to sleep for the body. The head is held
  until the body's first write, and both go in one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["PROTOCOL", "Protocol", "alone"]

#: What `uvicorn.run(http=...)` is given: importable by name in each worker process.
PROTOCOL = "simhash_redis.service.protocol:Protocol"

# The connections open in this process through `Protocol` (none when the app runs under another
# server, or in-process: then requests are always gathered).
_open = [0]
_CONTINUE = b"HTTP/1.1 100 "


def alone() -> bool:
    """Whether this worker holds exactly one connection (so no other request can be in flight)."""
    return _open[0] == 1


class _HeadWithBody:
    """One response's transport: its head (the first write) is held back until the next write (the
    body's first part), then both go in one call. A ``100 Continue`` goes at once: the client waits
    for it before it sends the body."""

    __slots__ = ("_head", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
        elif self._started or data.startswith(_CONTINUE):
            self._transport.write(data)
        else:
            self._head = data
            self._started = True

    def close(self) -> None:
        head, self._head = self._head, None
        if head is not None:  # a response cut short after its head: the head goes, as it would have
            self._transport.write(head)
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class Protocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, counting this worker's connections and writing each response's
    head with its body."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        _open[0] += 1
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        _open[0] -= 1
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        # A new request's cycle (not an upgrade's, which keeps the old one) writes through the holder.
        if cycle is not before and cycle is not None:
            cycle.transport = _HeadWithBody(cycle.transport)  # type: ignore[assignment]
