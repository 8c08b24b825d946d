"""The periods of an index with a retention window: which are live, their keys, the server's clock.

Documents are written into the period that holds the server's current time, and every key of period p
expires at (p + 1) x period + retention (PEXPIREAT, by the server's clock): a document written at t is
found until t + retention and is gone by t + retention + period, with no janitor and no SCAN. The write
script checks the period against the server's clock (`TIME`), so workers whose clocks drift still write
where the server's clock says. Reads cover every period that can still hold a document, with a margin
for the error of the worker's estimate of the server's clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..transport import Exchange, Sender, raise_first_error
from .config import Retention
from .keys import KeySchema
from .store import Store

__all__ = ["View", "WindowedSets", "Windows"]

# Periods whose key names are kept built; a long-lived worker moves on to new ones.
_SCHEMAS_KEPT = 64
# How far this worker's estimate of the server's clock may be off (it is read from TIME, to within a
# round trip, and corrected by every write that lands in another period than expected): reads cover
# the periods that may be live within this margin of the estimate.
_MARGIN_MS = 1000
# Seconds between readings of the server's clock.
_RESYNC_S = 60.0
# A TIME round trip under this is taken at once (an error under 50 ms, against the 1 s margin);
# slower ones are asked again, up to three samples, and the quickest wins.
_QUICK_S = 0.1
_SAMPLES = 3


@dataclass(frozen=True)
class View:
    """The periods a call reads and writes, fixed for the call: the live ones oldest first (near the
    current one's end, the next one last), and the keys of each, period by period."""

    windows: tuple[int, ...]
    current: int
    schemas: tuple[KeySchema, ...]
    table_keys: Callable[[int], list[bytes]]
    id_keys: Callable[[bytes], list[bytes]]
    fp_keys: Callable[[bytes], list[bytes]]


class WindowedSets(list[list[bytes]]):
    """The members read from a fingerprint's table sets in each period of a view (a guard's sets)."""

    def __init__(self, members: list[list[bytes]], windows: tuple[int, ...]) -> None:
        super().__init__(members)
        self.windows = windows


class Windows:
    """The periods of one index and the server's clock as this worker estimates it.

    Raises:
        RedisUnavailable: the server cannot be reached.
    """

    def __init__(self, keys: KeySchema, retention: Retention, sender: Sender) -> None:
        self.keys, self.retention = keys, retention
        self.period_ms, self.retention_ms = retention.period * 1000, retention.seconds * 1000
        self._offset_ms = self._synced = self._wall = 0.0
        self._view: View
        self._view_until = 0
        self._schemas: dict[int, KeySchema] = {}
        self._sender = sender
        self.sync()

    def sync(self) -> None:
        """Estimate the server's clock again from its TIME (the middle of the round trip).

        Raises:
            RedisUnavailable: the server cannot be reached.
        """

        # The estimate is off by at most half the round trip, which a busy client (an event loop with
        # hundreds of tasks, a queue for a connection) can stretch: a slow sample is taken again.
        # Timed inside the conversation: a wait for a connection does not count.
        def sample(exchange: Exchange) -> tuple[float, int, float]:
            before = time.monotonic()
            replies = exchange.round_trip([(b"TIME",)])
            after = time.monotonic()
            raise_first_error(replies)
            seconds, micros = replies[0]
            return after - before, int(seconds) * 1000 + int(micros) // 1000, (before + after) / 2

        best: tuple[float, int, float] | None = None
        for _ in range(_SAMPLES):
            taken = self._sender.converse(sample)
            if best is None or taken[0] < best[0]:
                best = taken
            if taken[0] < _QUICK_S:
                break
        assert best is not None
        self.set_server_time(best[1], best[2])

    def set_server_time(self, server_ms: int, local: float | None = None) -> None:
        """Adopt the server's time, as a reply reported it."""
        # Against the monotonic clock: a step of this machine's wall clock does not move the estimate;
        # `view` reads TIME again after one (or a sleep), and once a minute against slow drift.
        local = time.monotonic() if local is None else local
        self._offset_ms, self._synced = server_ms - local * 1000, local
        self._wall = time.time() - time.monotonic()
        self._view_until = 0  # the periods are worked out again by this clock

    def now_ms(self) -> int:
        """The server's Unix time in milliseconds, as estimated."""
        return int(time.monotonic() * 1000 + self._offset_ms)

    def expires_at(self, window: int) -> int:
        """When every key of a period expires, in Unix milliseconds."""
        return (window + 1) * self.period_ms + self.retention_ms

    def view(self) -> View:
        """The periods a call reads now: the live ones, with a margin at each end.

        Every period not expired up to the current one; within a margin of a boundary (the error this
        worker's estimate of the server's clock may have), also the one that expires at it, or the next
        one. A write needs none of the margins: the script writes only into the period of the server's
        clock, and with a guard read in every live period before it (`windowed_writes_standalone`).

        Raises:
            RedisUnavailable: the server's clock is read again (once a minute) and cannot be.
        """
        # Read again once a minute, and when the wall clock moved against the monotonic one: a machine
        # that slept (the monotonic clock stands still meanwhile) or a stepped wall clock.
        if (
            time.monotonic() - self._synced > _RESYNC_S
            or abs(time.time() - time.monotonic() - self._wall) > 0.5
        ):
            self.sync()
        now = self.now_ms()
        if now < self._view_until:  # the same periods until the next boundary or margin
            return self._view
        period, margin = self.period_ms, min(_MARGIN_MS, self.period_ms // 2)
        current = now // period
        end = (current + 1) * period
        last = current + 1 if now >= end - margin else current
        first = (now - margin - self.retention_ms) // period - 1
        windows = tuple(w for w in range(first, last + 1) if self.expires_at(w) > now - margin)
        schemas = tuple(self.schema(w) for w in windows)
        self._view = View(
            windows,
            current,
            schemas,
            self.keys.periods_builder(windows),
            self.keys.periods_map_builder(windows, "id"),
            self.keys.periods_map_builder(windows, "fp"),
        )
        changes = [end, self.expires_at(windows[0]) + margin] + ([end - margin] if last == current else [])
        self._view_until = min(changes)
        return self._view

    def counts(self, *, sketched: bool = False) -> list[tuple[int, int, int]]:
        """(period, documents, fingerprints) of each live period (on a cluster, from its maps' sizes;
        `sketched`, a verified index, counts the fingerprint maps' fields without their sketches).

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        view = self.view()
        if self._sender.cluster:  # no counts hash: the sizes of each period's maps
            sizes = [Store(self._sender, schema).counts(sketched=sketched) for schema in view.schemas]
            return [(window, docs, fps) for window, (docs, fps) in zip(view.windows, sizes, strict=True)]
        replies = self._sender.execute(
            [(b"HMGET", schema.counts, b"docs", b"fingerprints") for schema in view.schemas]
        )
        return [
            (window, int(docs or 0), int(fps or 0))
            for window, (docs, fps) in zip(view.windows, replies, strict=True)
        ]

    def schema(self, window: int) -> KeySchema:
        """The key names of one period."""
        schema = self._schemas.get(window)
        if schema is None:
            if len(self._schemas) >= _SCHEMAS_KEPT:
                self._schemas.clear()
            schema = self._schemas[window] = self.keys.in_window(window)
        return schema
