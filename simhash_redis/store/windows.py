"""The periods of an index with a retention window: which are live, their keys, the server's clock
(every key of period p expires at (p + 1) x period + retention by that clock: docs/retention.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..transport import Exchange, Sender, raise_first_error
from .config import Retention
from .keys import KeySchema
from .store import map_sizes

__all__ = ["View", "WindowedSets", "Windows"]

_SCHEMAS_KEPT = 64
# How far this worker's estimate of the server's clock may be off (read from TIME, to within a round
# trip, and corrected by every write refused for another period).
_MARGIN_MS = 1000
_RESYNC_S = 60.0
# A TIME round trip under this is taken at once (an error under 50 ms, against the 1 s margin); of
# slower ones, the quickest of three.
_QUICK_S = 0.1
_SAMPLES = 3


@dataclass(frozen=True)
class View:
    """The periods a call reads and writes: the live ones, oldest first, and their keys."""

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
    """The periods of one index and the server's clock as this worker estimates it."""

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
        """Estimate the server's clock again from its TIME (the middle of the round trip)."""

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
        # Against the monotonic clock, which a step of the wall clock does not move (`view` resyncs).
        local = time.monotonic() if local is None else local
        self._offset_ms, self._synced = server_ms - local * 1000, local
        self._wall = time.time() - time.monotonic()
        self._view_until = 0  # the periods are worked out again by this clock

    def now_ms(self) -> int:
        return int(time.monotonic() * 1000 + self._offset_ms)

    def expires_at(self, window: int) -> int:
        return (window + 1) * self.period_ms + self.retention_ms

    def view(self) -> View:
        """The periods a call reads now: the live ones, and near a boundary the one that expires at it or
        the next one."""
        # Also when the wall clock moved against the monotonic one: a machine that slept, a stepped clock.
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
        if last == current and not self._sender.cluster:
            windows += self._ahead(current)
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

    def _ahead(self, current: int) -> tuple[int, ...]:
        # The periods after the server's that hold documents: written before its clock was stepped back
        # (by up to a retention), they are read until they expire. A round trip a view, not a lookup
        # (a period's counts hash exists once it holds anything; a cluster has none).
        ahead = range(current + 1, current + 2 + self.retention_ms // self.period_ms)
        found = self._sender.execute([(b"EXISTS", self.schema(w).counts) for w in ahead])
        return tuple(w for w, exists in zip(ahead, found, strict=True) if exists)

    def counts(self, *, sketched: bool = False) -> list[tuple[int, int, int]]:
        """(period, documents, fingerprints) of each live period."""
        view = self.view()
        if self._sender.cluster:  # no counts hash: the sizes of each period's maps
            sizes = map_sizes(self._sender, view.schemas, sketched)
            return [(window, docs, fps) for window, (docs, fps) in zip(view.windows, sizes, strict=True)]
        replies = self._sender.execute(
            [(b"HMGET", schema.counts, b"docs", b"fingerprints") for schema in view.schemas]
        )
        return [
            (window, int(docs or 0), int(fps or 0))
            for window, (docs, fps) in zip(view.windows, replies, strict=True)
        ]

    def held(self, ids: list[bytes]) -> list[tuple[int, bytes]]:
        """Each id's (period, stored value) in the newest live period holding it ((0, b"") for none)."""
        view = self.view()
        schemas, windows, n = view.schemas, view.windows, len(view.schemas)
        got = self._sender.execute([(b"HGET", s.id_bucket(i), i) for i in ids for s in schemas])
        return [
            ([(w, v) for w, v in zip(windows, got[j * n : j * n + n], strict=True) if v] or [(0, b"")])[-1]
            for j in range(len(ids))
        ]

    def schema(self, window: int) -> KeySchema:
        schema = self._schemas.get(window)
        if schema is None:
            if len(self._schemas) >= _SCHEMAS_KEPT:
                self._schemas.clear()
            schema = self._schemas[window] = self.keys.in_window(window)
        return schema
