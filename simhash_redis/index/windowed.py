"""What an index with a retention window adds to verify: each period checked as an index of its own,
and every key of a period set to expire with it."""

from __future__ import annotations

from ..store import Store, Windows
from .consistency import VerifyReport, check_consistency

__all__ = ["verify_windows"]

_EXAMPLES = 20


def verify_windows(store: Store, windows: Windows, f: int, tables: int, repair: bool) -> VerifyReport:
    """Check each live period of an index as `check_consistency` checks an index, and every key's expiry.

    A period's keys all expire at the same moment; a key of a period without an expiry (a hand edit,
    a repair's own writes) would never be freed, and is set to expire with its period on repair.

    Args:
        store: the index's store.
        windows: its periods.
        f: its fingerprint width.
        tables: its number of tables.
        repair: also fix what is found.

    Raises:
        RedisUnavailable: the server cannot be reached; the check (and any repair) can be run again.
    """
    report = VerifyReport(repaired=repair)
    for window in windows.view().windows:
        part = check_consistency(Store(store.sender, windows.schema(window)), f, tables, repair)
        report.docs += part.docs
        report.fingerprints += part.fingerprints
        report.garbage += part.garbage
        report.problems.update(part.problems)
        report.examples += [f"period {window}: {example}" for example in part.examples]
    del report.examples[_EXAMPLES:]
    head = len(store.keys.base) + 2  # the key names go on with ":w" and the period's number
    for keys in store.scan("windows"):
        ttls = store.execute([(b"PTTL", key) for key in keys])
        lasting = [key for key, ttl in zip(keys, ttls, strict=True) if int(ttl) == -1]
        for key in lasting:
            report.found("key without expiry", key.decode(errors="replace"))
        if repair and lasting:
            window_of = [int(key[head:].partition(b":")[0]) for key in lasting]
            store.execute(
                [
                    (b"PEXPIREAT", key, windows.expires_at(w))
                    for key, w in zip(lasting, window_of, strict=True)
                ]
            )
    return report
