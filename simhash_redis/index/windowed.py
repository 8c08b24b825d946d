"""Verify for an index with a retention window: each period checked as an index of its own, and every
key's expiry (repair sets that of a key which has none)."""

from __future__ import annotations

from ..store import Store, Verification, Windows
from .consistency import check_consistency, find_wrong_types
from .report import EXAMPLES, VerifyReport

__all__ = ["verify_windows"]


def verify_windows(
    store: Store,
    windows: Windows,
    f: int,
    tables: int,
    repair: bool,
    verification: Verification | None = None,
) -> VerifyReport:
    """Check each live period as `check_consistency` checks an index, and every key's expiry (a key
    without one, from a hand edit or a repair's own writes, would never be freed)."""
    report = VerifyReport(repaired=repair)
    if find_wrong_types(store, report, [[store.keys.meta]]):  # the periods are checked, not repaired
        repair = report.repaired = False
    # Expiries first, so that the keys a repair below writes again are not reported as problems.
    _check_expiries(store, windows, report, repair, quiet=False)
    for window in windows.view().windows:
        part = check_consistency(Store(store.sender, windows.schema(window)), f, tables, repair, verification)
        report.docs += part.docs
        report.fingerprints += part.fingerprints
        report.garbage += part.garbage
        report.problems.update(part.problems)
        report.wrong_type += [f"period {window}: {key}" for key in part.wrong_type]
        report.repaired = report.repaired and part.repaired
        report.examples += [f"period {window}: {example}" for example in part.examples]
    del report.examples[EXAMPLES:]
    if repair:
        _check_expiries(store, windows, report, repair, quiet=True)
    return report


def _check_expiries(store: Store, windows: Windows, report: VerifyReport, repair: bool, quiet: bool) -> None:
    """Find (and with repair, set) the expiry of each key of a period that has none (quiet: count none)."""
    head = len(store.keys.base) + 2  # the key names go on with ":w" and the period's number
    for keys in store.scan("windows"):
        ttls = store.execute([(b"PTTL", key) for key in keys])
        lasting = []
        for key, ttl in zip(keys, ttls, strict=True):
            number = key[head:].partition(b":")[0]
            if int(ttl) != -1:
                continue
            if not number.isdigit():  # not a period's key: another program's, reported, never changed
                if not quiet:
                    report.found("key of no period", key.decode(errors="replace"))
                continue
            if not quiet:
                report.found("key without expiry", key.decode(errors="replace"))
            lasting.append((key, windows.expires_at(int(number))))
        if repair and lasting:
            store.execute([(b"PEXPIREAT", key, at) for key, at in lasting])
