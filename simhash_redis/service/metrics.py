"""The service's Prometheus metrics: requests, latency, errors by code, Redis round trips.

With several worker processes, ``simhash-redis serve`` points $PROMETHEUS_MULTIPROC_DIR at a directory
of its own, so /metrics (answered by any worker) adds up every worker's figures.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from ..transport.wire import round_trips

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

# Latency buckets from 100 us (a near() over HTTP on one machine) to 10 s (a large batch).
_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """The counters and histograms of one process (registered once per process)."""

    _instance: Metrics | None = None

    def __init__(self) -> None:
        self.requests = Counter(
            "simhash_redis_requests", "HTTP requests answered", ("route", "method", "status")
        )
        self.latency = Histogram(
            "simhash_redis_request_duration_seconds", "Time to answer a request", ("route",), buckets=_BUCKETS
        )
        self.errors = Counter("simhash_redis_errors", "Error responses by stable error code", ("code",))
        self.round_trips = Counter(
            "simhash_redis_redis_round_trips", "Round trips to Redis made by the index calls"
        )
        self._reported = round_trips()
        # Each label set's child, looked up once (prometheus_client's labels() costs microseconds a call).
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    @classmethod
    def get(cls) -> Metrics:
        """The process's metrics (prometheus_client registers each name once per process)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def observe(self, route: str, method: str, status: int, seconds: float, code: str | None) -> None:
        """Count one answered request."""
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(route, method, str(status)), self.latency.labels(route))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        if code is not None:
            self.errors.labels(code).inc()
        # The process's round trips since the last request counted (concurrent requests share them).
        now = round_trips()
        if now > self._reported:
            self.round_trips.inc(now - self._reported)
            self._reported = now

    @staticmethod
    def exposition() -> bytes:
        """The text exposition of every worker's metrics (this process's without multiprocess mode)."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest()
