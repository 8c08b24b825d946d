"""The periods of an index with a retention window: which are live, their keys, the server's clock.

Documents are written into the period that holds the server's current time, and every key of period p
expires at (p + 1) x period + retention (PEXPIREAT, by the server's clock): a document written at t is
found until t + retention and is gone by t + retention + period, with no janitor and no SCAN. The write
script checks the period against the server's clock (`TIME`), so workers whose clocks drift still write
where the server's clock says. Reads cover every period that can still hold a document, and the next
one, where a writer may already be when the client's estimate of the server's clock lags a little.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..transport import Sender
from .config import Retention
from .keys import KeySchema

__all__ = ["View", "WindowedSets", "Windows"]

# Periods whose key names are kept built; a long-lived worker moves on to new ones.
_SCHEMAS_KEPT = 64


@dataclass(frozen=True)
class View:
    """The periods a call reads and writes, fixed for the call.

    Args:
        windows: the live periods, oldest first, ending with the one after the current.
        current: the period new documents are written into.
        schemas: the key names of each period of `windows`.
    """

    windows: tuple[int, ...]
    current: int
    schemas: tuple[KeySchema, ...]

    @property
    def current_schema(self) -> KeySchema:
        """The key names of the current period."""
        return self.schemas[self.windows.index(self.current)]


class WindowedSets(list[list[bytes]]):
    """The members read from a fingerprint's table sets in each period of a view (a guard's sets).

    Args:
        members: the members of each set, period by period, table by table.
        windows: the periods they were read from.
    """

    def __init__(self, members: list[list[bytes]], windows: tuple[int, ...]) -> None:
        super().__init__(members)
        self.windows = windows


class Windows:
    """The periods of one index and the server's clock as this worker estimates it.

    Args:
        keys: the index's key names.
        retention: its retention window.
        sender: where commands go (the server's clock is read once here, and the counts).

    Raises:
        RedisUnavailable: the server cannot be reached.
    """

    def __init__(self, keys: KeySchema, retention: Retention, sender: Sender) -> None:
        self.keys, self.retention = keys, retention
        self.period_ms, self.retention_ms = retention.period * 1000, retention.seconds * 1000
        self._offset_ms = 0.0
        self._schemas: dict[int, KeySchema] = {}
        self._sender = sender
        self.sync()

    def sync(self) -> None:
        """Estimate the server's clock again from its TIME (the middle of the round trip).

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        before = time.time()
        seconds, micros = self._sender.execute([(b"TIME",)])[0]
        after = time.time()
        self.set_server_time(int(seconds) * 1000 + int(micros) // 1000, (before + after) / 2)

    def set_server_time(self, server_ms: int, local: float | None = None) -> None:
        """Adopt the server's time, as a reply reported it.

        Args:
            server_ms: the server's Unix time in milliseconds.
            local: the local time it corresponds to (default: now).
        """
        self._offset_ms = server_ms - (time.time() if local is None else local) * 1000

    def now_ms(self) -> int:
        """The server's Unix time in milliseconds, as estimated."""
        return int(time.time() * 1000 + self._offset_ms)

    def expires_at(self, window: int) -> int:
        """When every key of a period expires, in Unix milliseconds.

        Args:
            window: the period.
        """
        return (window + 1) * self.period_ms + self.retention_ms

    def view(self) -> View:
        """The live periods now: those not yet expired, up to the one after the current."""
        now = self.now_ms()
        current = now // self.period_ms
        first = (now - self.retention_ms) // self.period_ms - 1
        windows = tuple(w for w in range(first, current + 2) if self.expires_at(w) > now)
        return View(windows, current, tuple(self.schema(w) for w in windows))

    def counts(self) -> list[tuple[int, int, int]]:
        """(period, documents, fingerprints) of each live period, from the counts the write script keeps.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        view = self.view()
        replies = self._sender.execute(
            [(b"HMGET", schema.counts, b"docs", b"fingerprints") for schema in view.schemas]
        )
        return [
            (window, int(docs or 0), int(fps or 0))
            for window, (docs, fps) in zip(view.windows, replies, strict=True)
        ]

    def schema(self, window: int) -> KeySchema:
        """The key names of one period.

        Args:
            window: the period.
        """
        schema = self._schemas.get(window)
        if schema is None:
            if len(self._schemas) >= _SCHEMAS_KEPT:
                self._schemas.clear()
            schema = self._schemas[window] = self.keys.in_window(window)
        return schema
