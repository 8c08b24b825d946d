"""The benchmark suite: simhash-redis side by side with the alternatives, measured in the same run.

Run everything with ``python -m benchmarks`` (``make bench``), or ``python -m benchmarks --quick``;
``python -m benchmarks --help`` lists the options. Every figure is printed with the alternative measured
in the same process and the ratio between them: absolute times drift on a loaded machine, ratios hold.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Figure", "percentile", "rate", "server_cpu", "timed"]


@dataclass
class Figure:
    """One measured figure, the alternative measured in the same run, and the target.

    Args:
        name: what was measured.
        ours: our value.
        unit: its unit.
        alternative: what it is compared with ("" when nothing is).
        theirs: the alternative's value (None when there is none).
        higher_is_better: for the ratio's direction (rates: yes; latencies, bytes: no).
        target: the target, as text.
        met: whether the target is met (None: no target).
        command: the command that produced the figure.
        extra: other values worth keeping (printed in the JSON only).
    """

    name: str
    ours: float
    unit: str
    alternative: str = ""
    theirs: float | None = None
    higher_is_better: bool = True
    target: str = ""
    met: bool | None = None
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    ratio_target: float | None = None
    ratio_basis: str = ""

    @property
    def ratio_met(self) -> bool | None:
        """Whether the ratio reaches the ratio the target implies against the anchors (None: no such)."""
        ratio = self.ratio
        if self.ratio_target is None or ratio is None:
            return None
        return ratio >= self.ratio_target

    @property
    def ratio(self) -> float | None:
        """How many times better ours is than the alternative (>1: ours is better)."""
        if self.theirs is None or not self.theirs or not self.ours:
            return None
        return self.ours / self.theirs if self.higher_is_better else self.theirs / self.ours

    def line(self) -> str:
        """The figure as one printed line."""
        ratio = self.ratio
        theirs = "" if self.theirs is None else f"{self.alternative}: {_fmt(self.theirs)} {self.unit}"
        ratio_text = "" if ratio is None else f"  ratio {ratio:.1f}x"
        met = "" if self.met is None else ("  MET" if self.met else "  NOT MET")
        target = f"  target {self.target}" if self.target else ""
        if self.ratio_target is not None:
            target += f" (= ratio >= {self.ratio_target:.1f}x: {'met' if self.ratio_met else 'NOT met'})"
        return f"{self.name:48} {_fmt(self.ours):>10} {self.unit:8} {theirs}{ratio_text}{target}{met}"

    def to_json(self) -> dict[str, Any]:
        """The figure as a JSON-ready dict."""
        out = asdict(self)
        out["ratio"] = self.ratio
        out["ratio_met"] = self.ratio_met
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        """A figure written by `to_json`."""
        fields = {k: v for k, v in data.items() if k not in ("ratio", "ratio_met")}
        return cls(**fields)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of the values, nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def timed(run: Callable[[], object], repeat: int = 1) -> float:
    """The best wall-clock time of `repeat` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def rate(count: int, seconds: float) -> float:
    """Items per second."""
    return count / seconds if seconds > 0 else float("inf")


def median(values: list[float]) -> float:
    """The median."""
    return statistics.median(values)


def server_cpu(client: Any) -> float:
    """The server's CPU seconds so far, user + sys (INFO cpu): deltas give its CPU per operation.

    Args:
        client: a redis-py client of the server.
    """
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
