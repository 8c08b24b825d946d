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
    """What `SimhashIndex.verify` found (and, with repair, fixed).

    Attributes:
        docs: documents in the id map.
        fingerprints: distinct fingerprints in the fingerprint map.
        problems: how many of each kind of inconsistency were found.
        examples: a few of them, described.
        garbage: orphan table members on a cluster, which near() ignores and repair removes.
        repaired: whether the problems (and garbage) were fixed.
        wrong_type: every key holding another type of value than its kind's (each described); while
            there is one, nothing else is checked.
    """

    docs: int = 0
    fingerprints: int = 0
    problems: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    garbage: int = 0
    repaired: bool = False
    wrong_type: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was inconsistent."""
        return not self.problems

    def found(self, kind: str, detail: str) -> None:
        """Count a problem of a kind, and keep its description while there are few."""
        self.problems[kind] += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(f"{kind}: {detail}")

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (for --json)."""
        return {"ok": self.ok, **asdict(self), "problems": dict(self.problems)}
