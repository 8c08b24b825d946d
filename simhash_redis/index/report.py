"""`VerifyReport`: what a consistency check of an index found, and whether it was repaired."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["EXAMPLES", "VerifyReport"]

#: Problems described in a report at most (all are counted).
EXAMPLES = 20


@dataclass
class VerifyReport:
    """What `SimhashIndex.verify` found (and, with repair, fixed)."""

    #: Documents in the id map.
    docs: int = 0
    #: Distinct fingerprints in the fingerprint map.
    fingerprints: int = 0
    #: How many of each kind of inconsistency were found.
    problems: Counter[str] = field(default_factory=Counter)
    #: A few of them, described.
    examples: list[str] = field(default_factory=list)
    #: Orphan table members on a cluster, which near() ignores and repair removes.
    garbage: int = 0
    #: Whether the problems (and garbage) were fixed.
    repaired: bool = False
    #: Every key holding another type of value than its kind's (each described); while there is one,
    #: nothing else is checked.
    wrong_type: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was inconsistent."""
        return not self.problems

    def found(self, kind: str, detail: str, count: int = 1) -> None:
        """Count a problem of a kind (count of them, told in one detail), and keep its description while
        there are few."""
        self.problems[kind] += count
        if len(self.examples) < EXAMPLES:
            self.examples.append(f"{kind}: {detail}")

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (for --json)."""
        return {"ok": self.ok, **asdict(self), "problems": dict(self.problems)}
