"""The service's Prometheus metrics: requests, latency, errors by code, Redis round trips; tallied in
plain counts, flushed within `FLUSH_AFTER` seconds (each Prometheus write locks a shared file)."""

from __future__ import annotations

import asyncio
import os
from bisect import bisect_left

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from ..transport.wire import round_trips

__all__ = ["CONTENT_TYPE_LATEST", "FLUSH_AFTER", "Metrics"]

# Latency buckets from 100 us (a near() over HTTP on one machine) to 10 s (a large batch).
_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: Seconds at most between a request and its figures in the Prometheus values other workers read.
FLUSH_AFTER = 1.0


class _Tally:
    """The requests of one label set not yet added: count, total seconds, count by bucket (last: +Inf)."""

    __slots__ = ("buckets", "count", "seconds")

    def __init__(self) -> None:
        self.count, self.seconds, self.buckets = 0, 0.0, [0] * (len(_BUCKETS) + 1)


class _Histogram(Histogram):
    """prometheus_client's histogram, which can also take many observations at once."""

    def add(self, seconds: float, buckets: list[int]) -> None:
        """As that many calls of `observe` would: their total seconds, and their count by bucket."""
        self._sum.inc(seconds)
        for bucket, count in zip(self._buckets, buckets, strict=True):
            if count:
                bucket.inc(count)


class Metrics:
    """The counters and histograms of one process (registered once per process)."""

    _instance: Metrics | None = None

    def __init__(self) -> None:
        self.requests = Counter(
            "simhash_redis_requests", "HTTP requests answered", ("route", "method", "status")
        )
        self.latency = _Histogram(
            "simhash_redis_request_duration_seconds", "Time to answer a request", ("route",), buckets=_BUCKETS
        )
        self.errors = Counter("simhash_redis_errors", "Error responses by stable error code", ("code",))
        self.round_trips = Counter(
            "simhash_redis_redis_round_trips", "Round trips to Redis made by the index calls"
        )
        self._reported = round_trips()
        self._tallies: dict[tuple[str, str, int], _Tally] = {}
        self._codes: dict[str, int] = {}
        self._timer: asyncio.TimerHandle | None = None

    @classmethod
    def get(cls) -> Metrics:
        """The process's metrics (prometheus_client registers each name once per process)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def observe(self, route: str, method: str, status: int, seconds: float, code: str | None) -> None:
        """Count one answered request (added to the Prometheus figures within `FLUSH_AFTER` seconds)."""
        key = (route, method, status)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = _Tally()
        tally.count += 1
        tally.seconds += seconds
        tally.buckets[bisect_left(_BUCKETS, seconds)] += 1  # Prometheus's le: the first bound >= seconds
        if code is not None:
            self._codes[code] = self._codes.get(code, 0) + 1
        if self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(FLUSH_AFTER, self.flush)
            except RuntimeError:  # no event loop: nothing would flush later
                self.flush()

    def flush(self) -> None:
        """Add the requests counted since the last flush to the Prometheus figures."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tallies, self._tallies = self._tallies, {}
        codes, self._codes = self._codes, {}
        for (route, method, status), tally in tallies.items():
            self.requests.labels(route, method, str(status)).inc(tally.count)
            self.latency.labels(route).add(tally.seconds, tally.buckets)
        for code, count in codes.items():
            self.errors.labels(code).inc(count)
        # The process's round trips since the last flush (concurrent requests share them).
        now = round_trips()
        if now > self._reported:
            self.round_trips.inc(now - self._reported)
            self._reported = now

    @classmethod
    def exposition(cls) -> bytes:
        """The text exposition of every worker's metrics (this process's without multiprocess mode)."""
        if cls._instance is not None:
            cls._instance.flush()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest()
