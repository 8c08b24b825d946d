"""Checking an index's internal consistency, and repairing it.

A document is consistent when its id-map entry, its fingerprint-map entry and its fingerprint's membership
in every table agree. On a standalone server every write is one atomic script, so an inconsistency can
only come from outside (a partial restore, a hand edit, a cluster node lost mid-write). The rules of
repair follow the id map, which is the commit record of a document:

- an id whose fingerprint lacks the fingerprint-map entry or a table membership is completed;
- a fingerprint-map entry listing an id that the id map does not give that fingerprint loses that id;
- a table member with no fingerprint-map entry is removed (an uncommitted write; on a cluster also the
  normal leftover of a fingerprint whose last id left, counted as garbage rather than a problem);
- the counts are set to what the data holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .codec import decode_fp, decode_ids, encode_ids

if TYPE_CHECKING:
    from .index import SimhashIndex

__all__ = ["VerifyReport", "verify_index"]

_BATCH = 500
_EXAMPLES = 20


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
    """

    docs: int = 0
    fingerprints: int = 0
    problems: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    garbage: int = 0
    repaired: bool = False

    @property
    def ok(self) -> bool:
        """True when nothing was inconsistent."""
        return not self.problems

    def _found(self, kind: str, detail: str) -> None:
        self.problems[kind] += 1
        if len(self.examples) < _EXAMPLES:
            self.examples.append(f"{kind}: {detail}")

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (for --json)."""
        return {
            "ok": self.ok,
            "docs": self.docs,
            "fingerprints": self.fingerprints,
            "problems": dict(self.problems),
            "examples": self.examples,
            "garbage": self.garbage,
            "repaired": self.repaired,
        }


def verify_index(index: SimhashIndex, repair: bool = False) -> VerifyReport:
    """Check every id, fingerprint and table entry of an index against the others.

    Run it while no worker writes to the index: a write in flight can look like an inconsistency.

    Args:
        index: the index.
        repair: also fix what is found, following the id map.

    Raises:
        RedisUnavailable: the server cannot be reached; the check (and any repair) can be run again.
    """
    report = VerifyReport(repaired=repair)
    run = index._transport.execute
    keys = index.keys
    tables = len(index.layout.tables)

    # 1. The id map: each id's fingerprint must be in the fingerprint map under that id, and in the tables.
    for bucket_keys in _scan(index, f"{keys.base}:id:*"):
        contents = run([(b"HGETALL", key) for key in bucket_keys])
        entries = [pair for reply in contents for pair in _pairs(reply)]
        report.docs += len(entries)
        for start in range(0, len(entries), _BATCH):
            chunk = entries[start : start + _BATCH]
            lists = run([(b"HGET", keys.fp_bucket(fp), fp) for _, fp in chunk])
            member = run(
                [(b"SISMEMBER", t, fp) for _, fp in chunk for t in keys.tables(decode_fp(fp, index.f))]
            )
            fixes: list[Any] = []
            for n, ((doc_id, fp), raw) in enumerate(zip(chunk, lists, strict=True)):
                ids = decode_ids(raw) if raw is not None else []
                if doc_id.decode() not in ids:
                    report._found("id missing from fingerprint map", f"{doc_id!r} -> {fp.decode()}")
                    fixes.append(
                        (b"HSET", keys.fp_bucket(fp), fp, (raw or b"") + encode_ids([doc_id.decode()]))
                    )
                for t, key in enumerate(keys.tables(decode_fp(fp, index.f))):
                    if not member[n * tables + t]:
                        report._found(
                            "fingerprint missing from table", f"{fp.decode()} not in {key.decode()}"
                        )
                        fixes.append((b"SADD", key, fp))
            if repair and fixes:
                run(fixes)

    # 2. The fingerprint map: every listed id must map back to it; tables must hold it.
    fingerprints = 0
    for bucket_keys in _scan(index, f"{keys.base}:fp:*"):
        contents = run([(b"HGETALL", key) for key in bucket_keys])
        entries = [pair for reply in contents for pair in _pairs(reply)]
        for start in range(0, len(entries), _BATCH):
            chunk = entries[start : start + _BATCH]
            flat_ids = [(fp, doc_id) for fp, raw in chunk for doc_id in decode_ids(raw)]
            owners = run([(b"HGET", keys.id_bucket(d.encode()), d.encode()) for _, d in flat_ids])
            stale: dict[bytes, set[str]] = {}
            for (fp, listed), owner in zip(flat_ids, owners, strict=True):
                if owner != fp:
                    report._found("stale id in fingerprint map", f"{listed!r} listed under {fp.decode()}")
                    stale.setdefault(fp, set()).add(listed)
            fixes = []
            for fp, raw in chunk:
                kept = [d for d in decode_ids(raw) if d not in stale.get(fp, ())]
                if kept:
                    fingerprints += 1
                if fp in stale and repair:
                    if kept:
                        fixes.append((b"HSET", keys.fp_bucket(fp), fp, encode_ids(kept)))
                    else:
                        fixes.append((b"HDEL", keys.fp_bucket(fp), fp))
                        fixes.extend((b"SREM", t, fp) for t in keys.tables(decode_fp(fp, index.f)))
            if fixes:
                run(fixes)
    report.fingerprints = fingerprints

    # 3. The tables: every member must have a fingerprint-map entry and sit in the right bucket.
    for t in range(tables):
        for table_keys in _scan(index, keys.table_pattern(t), once=False):
            members = run([(b"SMEMBERS", key) for key in table_keys])
            pairs = [(key, fp) for key, fps in zip(table_keys, members, strict=True) for fp in fps]
            for start in range(0, len(pairs), _BATCH):
                chunk = pairs[start : start + _BATCH]
                known = run([(b"HEXISTS", keys.fp_bucket(fp), fp) for _, fp in chunk])
                fixes = []
                for (key, fp), exists in zip(chunk, known, strict=True):
                    misplaced = keys.tables(decode_fp(fp, index.f))[t] != key
                    if misplaced:
                        report._found("misplaced table member", f"{fp.decode()} in {key.decode()}")
                    elif not exists and index.cluster:
                        report.garbage += 1
                    elif not exists:
                        report._found("orphan table member", f"{fp.decode()} in {key.decode()}")
                    if misplaced or not exists:
                        fixes.append((b"SREM", key, fp))
                if repair and fixes:
                    run(fixes)

    docs, fps = index.count()
    if (docs, fps) != (report.docs, report.fingerprints):
        report._found("counts differ from data", f"counts say {docs} docs/{fps} fingerprints")
        if repair:
            run([(b"HSET", keys.counts, b"docs", report.docs, b"fingerprints", report.fingerprints)])
    return report


def _pairs(reply: Any) -> list[tuple[bytes, bytes]]:
    # HGETALL is a map under RESP3 and a flat list under RESP2.
    if isinstance(reply, dict):
        return list(reply.items())
    return [(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]


def _scan(index: SimhashIndex, pattern: str, *, once: bool = True) -> Iterator[list[bytes]]:
    # SCAN may return a key twice. Where keys are counted, each is read once; table keys can be too
    # many to remember and checking one twice is harmless.
    seen: set[bytes] = set()
    for batch in index._scan_batches(pattern):
        if once:
            batch = [key for key in batch if key not in seen]
            seen.update(batch)
        if batch:
            yield batch
