"""How simhash-redis retries after a lost connection or a timeout: the one retry loop, and its backoff."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from .. import defaults
from .greenlet_bridge import pause

__all__ = ["Backoff"]

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter and a cap (every command sent is a read or an idempotent write).

    Args:
        retries: attempts after the first one; 0 disables retrying.
        base: the first delay's upper bound in seconds.
        cap: no delay is longer than this, in seconds.
        lasting: once the retries are spent, keep retrying (delays of up to `cap`) until this many seconds
            after the first failure; a callable is asked at the first failure.
    """

    retries: int = defaults.RETRIES
    base: float = defaults.BACKOFF_BASE
    cap: float = defaults.BACKOFF_CAP
    lasting: float | Callable[[], float] = 0.0

    def delays(self) -> Iterator[float]:
        """The delay before each retry, in seconds."""
        for attempt in range(self.retries):
            # The exponent stops growing long before a float would overflow; the cap rules by then.
            yield random.uniform(0, min(self.cap, self.base * 2.0 ** min(attempt, 64)))

    def call_with_retry(
        self,
        do: Callable[[], T],
        retryable: Callable[[Exception], bool],
        before_retry: Callable[[Exception], None] | None = None,
    ) -> T:
        """Call `do` (safe to repeat) until it returns, with a delay before each retry of a retryable error;
        before_retry is called after the delay (to refresh a slot map).

        Raises:
            Exception: the last attempt's error once the retries are spent, or a non-retryable one at once.
        """
        delays: Iterator[float] | None = None  # made at the first failure: most calls never need one
        until = 0.0
        while True:
            try:
                return do()
            except Exception as exc:
                if not retryable(exc):
                    raise
                if delays is None:
                    delays = self.delays()
                    lasting = self.lasting() if callable(self.lasting) else self.lasting
                    until = time.monotonic() + lasting
                delay = next(delays, None)
                if delay is None:
                    left = until - time.monotonic()
                    if left <= 0:
                        raise
                    delay = min(random.uniform(0, self.cap), left)  # the last one ends at the deadline
                pause(delay)  # awaited when an asyncio index runs this
                if before_retry is not None:
                    before_retry(exc)
