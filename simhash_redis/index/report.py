"""`VerifyReport`: what a consistency check of an index found, and whether it was repaired."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ..store import Store
from ..store.store import VERIFY_FIX

__all__ = ["EXAMPLES", "Found", "VerifyReport", "settle"]

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


#: A problem found: its name and detail, then `VERIFY_FIX`'s name of it, its keys, fingerprint and id.
Found = tuple[str, str, bytes, list[bytes], bytes, bytes]


def settle(store: Store, report: VerifyReport, found: list[Found], repair: bool) -> list[Found]:
    """Report the problems still there, and return them: on a standalone server each checked again (and
    fixed on repair) in one atomic step with its keys; on a cluster, every one (for the caller to fix)."""
    still = found
    if not store.cluster:
        flag = b"1" if repair else b"0"
        calls = [VERIFY_FIX.command(keys, [kind, flag, fp, doc_id]) for _, _, kind, keys, fp, doc_id in found]
        held = store.run_script(VERIFY_FIX, calls)
        still = [problem for problem, there in zip(found, held, strict=True) if there]
    for problem, detail, *_ in still:
        report.found(problem, detail)
    return still
