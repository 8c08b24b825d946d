"""Progress on stderr: a one-line bar on a terminal, plain periodic lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "format_duration"]

_TTY_INTERVAL = 0.2
_PLAIN_INTERVAL = 10.0
_BAR = 24


def format_duration(seconds: float) -> str:
    """A duration as H:MM:SS, or M:SS under an hour.

    Args:
        seconds: the duration.
    """
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Reports done/total, docs/s and the ETA, at most every few seconds.

    Args:
        total: the expected count, or None when unknown.
        enabled: False prints nothing (--quiet).
        stream: where to write; default stderr.
        interval: seconds between plain lines when the stream is not a terminal.
        unit: what is counted, e.g. "docs".
    """

    def __init__(
        self,
        total: int | None = None,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = _PLAIN_INTERVAL,
        unit: str = "docs",
    ) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.enabled = enabled
        self.tty = enabled and _isatty(self.stream)
        self.interval = _TTY_INTERVAL if self.tty else interval
        self.unit = unit
        self.started = time.monotonic()
        self._last = self.started
        self._drawn = False

    def update(self, done: int, *, force: bool = False) -> None:
        """Report that done items are finished (printed only if the interval has passed).

        Args:
            done: items finished so far.
            force: print now regardless of the interval.
        """
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < self.interval):
            return
        self._last = now
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        count = f"{done:,}/{self.total:,}" if self.total else f"{done:,}"
        eta = ""
        if self.total and rate > 0 and done <= self.total:
            eta = f"  ETA {format_duration((self.total - done) / rate)}"
        if self.tty:
            bar = ""
            if self.total:
                filled = min(_BAR, int(_BAR * done / self.total))
                bar = f"[{'#' * filled}{'.' * (_BAR - filled)}] {min(100.0, 100 * done / self.total):5.1f}%  "
            self.stream.write(f"\r\x1b[K{bar}{count} {self.unit}  {rate:,.0f} {self.unit}/s{eta}")
            self._drawn = True
        else:
            self.stream.write(f"progress: {count} {self.unit}, {rate:,.0f} {self.unit}/s{eta}\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear the bar so that the next message starts on a clean line."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
