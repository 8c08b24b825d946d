"""How simhash-redis waits between attempts after a lost connection or a timeout."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from .. import defaults

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter and a cap.

    Every command simhash-redis sends is a read or an idempotent write, so a whole batch can be resent
    after a connection error without changing the result.

    Args:
        retries: attempts after the first one; 0 disables retrying.
        base: the first delay's upper bound in seconds.
        cap: no delay is longer than this, in seconds.
    """

    retries: int = defaults.RETRIES
    base: float = defaults.BACKOFF_BASE
    cap: float = defaults.BACKOFF_CAP

    def delays(self) -> Iterator[float]:
        """The delay before each retry, in seconds."""
        for attempt in range(self.retries):
            # The exponent stops growing long before a float would overflow; the cap rules by then.
            yield random.uniform(0, min(self.cap, self.base * 2.0 ** min(attempt, 64)))
