"""Checking an index's internal consistency, and repairing it (the rules: docs/guarantees.md); with a
retention window, each period as an index of its own, and every key's expiry."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ..codec import decode_fp, decode_ids, decode_sketches, encode_ids
from ..store import Store, Verification, Windows
from ..store.store import FP_IDS, ID_CAS, KeyKind
from ..store.windowed_writes import leaving
from ..transport import raise_first_error
from .arguments import chunks
from .report import EXAMPLES, Found, VerifyReport, settle
from .sketch_check import SKETCHES, check_bands, check_sketches

__all__ = ["NO_SKETCH", "WRONG_TYPE", "check_consistency", "find_wrong_types", "verify_windows"]

_BATCH = 500
#: Atomic recounts of the listed map buckets (`_recount`) while a writer keeps making buckets.
_RECOUNTS = 3
#: Most id buckets for which a difference that moves is settled by recounting every bucket the index can
#: have, by name, in one atomic step (the default's 2 x 131,072 keys: a listing races a writer beside it).
_NAMED_MOST = 1 << 18
#: The problem no repair fixes: a key another program wrote, which only a person may delete.
WRONG_TYPE = "key of the wrong type"
#: What no repair fixes either: a sketch is made from the text, which the index does not keep.
NO_SKETCH = "documents without a sketch"


class _Target(NamedTuple):
    store: Store
    f: int
    tables: int
    repair: bool = False


def check_consistency(
    store: Store, f: int, tables: int, repair: bool = False, verification: Verification | None = None
) -> VerifyReport:
    """Check every id, fingerprint and table entry of an index against the others (on a standalone server
    each problem is checked again, and fixed, in one atomic step with its keys: docs/guarantees.md)."""
    report = VerifyReport(repaired=repair)
    target = _Target(store, f, tables, repair)
    if find_wrong_types(store, report, store.scan("all")):
        report.repaired = False
        return report

    # 1. The id map: each id's fingerprint must be in the fingerprint map under that id, and in the tables.
    seen: dict[KeyKind, set[bytes]] = {"id": set(), "fp": set()}  # the map buckets, for `_recount`
    for bucket_keys in store.scan("id"):
        seen["id"].update(bucket_keys)
        contents = _typed(report, bucket_keys, store.hashes(bucket_keys, raise_on_error=False))
        entries, drops = [], []
        for key, reply in zip(bucket_keys, contents, strict=True):
            for doc_id, fp in reply:
                # Else no call can read the entry (another program's): the repair deletes it.
                if _fingerprint(fp, target.f) is None or doc_id.decode(errors="replace").encode() != doc_id:
                    report.found("malformed id-map entry", f"{doc_id!r} -> {fp!r} in {key.decode()}")
                    drops.append((b"HDEL", key, doc_id))
                else:
                    entries.append((doc_id, fp))
        if repair and drops:
            store.execute(drops)
        report.docs += len(entries)
        for chunk in chunks(entries, _BATCH):
            _check_ids(target, report, chunk)

    # 2. The fingerprint map: every listed id must map back to it, and its sketches be of such ids.
    with_sketch = 0
    for bucket_keys in store.scan("fp"):
        seen["fp"].update(bucket_keys)
        contents = _typed(report, bucket_keys, store.hashes(bucket_keys, raise_on_error=False))
        placed: list[tuple[bytes, bytes, bytes]] = []  # (bucket key, fingerprint, ids)
        sketches: list[tuple[bytes, bytes]] = []
        moved: list[tuple[bytes, bytes, bytes]] = []  # sketch fields in another bucket than their own
        for key, reply in zip(bucket_keys, contents, strict=True):
            for name, value in reply:
                if not name.startswith(SKETCHES):
                    placed.append((key, name, value))
                elif key == store.keys.fp_bucket(name[len(SKETCHES) :]):
                    sketches.append((name, value))
                else:
                    moved.append((key, name, value))
        for chunk in chunks(placed, _BATCH):
            report.fingerprints += _check_fingerprints(target, report, chunk)
        for chunk in chunks(sketches, _BATCH):
            with_sketch += check_sketches(store, report, chunk, verification, repair, f)
        with_sketch += _move_sketches(target, report, moved)

    # 3. The tables: every member must have a fingerprint-map entry and sit in the right bucket.
    for t in range(tables):
        for table_keys in store.scan_table(t):
            replies = store.execute([(b"SMEMBERS", key) for key in table_keys], raise_on_error=False)
            members = _typed(report, table_keys, replies)
            found = [(key, fp) for key, fps in zip(table_keys, members, strict=True) for fp in fps]
            for chunk in chunks(found, _BATCH):
                _check_tables(target, report, t, chunk)

    if verification is not None and verification.bands:
        check_bands(store, report, verification, repair, f)
    if verification is not None and with_sketch < report.docs:
        missing = report.docs - with_sketch
        report.found(NO_SKETCH, f"{missing} (not repaired: add them again with their texts)", missing)

    held, (docs, fps) = (report.docs, report.fingerprints), store.counts(sketched=verification is not None)
    if (docs, fps) != held and not store.cluster:  # writers beside the scan move both
        held, (docs, fps) = _recount(store, seen, verification is not None, repair)
    if (docs, fps) != held:
        report.found("counts differ from data", f"counts say {docs} docs/{fps} fingerprints")
        if repair and store.cluster:
            store.set_counts(*held)
    return report


def _recount(
    store: Store, seen: dict[KeyKind, set[bytes]], sketched: bool, repair: bool
) -> tuple[tuple[int, int], tuple[int, int]]:
    """`Store.recount` over every map bucket listed so far, listed again while writers make new ones; a
    difference that moves between recounts is a writer's, settled over every bucket the index can have."""
    found: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for _ in range(_RECOUNTS):
        found.append(store.recount(sorted(seen["id"]), sorted(seen["fp"]), sketched=sketched, repair=False))
        if found[-1][0] == found[-1][1]:
            return found[-1]
        # Recounted even when the listing finds no new bucket: a writer may have made one, and emptied
        # it, between the recount and the listing.
        for kind, known in seen.items():
            known.update(key for batch in store.scan(kind) for key in batch)
    keys = store.keys
    if len(set(found)) > 1 and keys.id_buckets <= _NAMED_MOST:
        # Named, no bucket a writer makes between a listing and a recount is missed.
        every = range(keys.id_buckets)
        named = [keys.id_form.key(i) for i in every], [keys.fp_form.key(i) for i in every]
        return store.recount(*named, sketched=sketched, repair=repair)
    if repair:  # a difference that holds still is real
        return store.recount(sorted(seen["id"]), sorted(seen["fp"]), sketched=sketched, repair=True)
    return found[-1]


def find_wrong_types(store: Store, report: VerifyReport, batches: Iterable[list[bytes]]) -> bool:
    """Report each of the keys that holds another type of value than its kind's; True if any does."""
    found = False
    for batch in batches:
        typed = [(key, kind) for key in batch if (kind := store.keys.stored_type(key)) is not None]
        held = store.execute([(b"TYPE", key) for key, _ in typed])
        for (key, kind), reply in zip(typed, held, strict=True):
            actual = reply.encode() if isinstance(reply, str) else bytes(reply)
            if actual not in (kind, b"none"):  # none: deleted since the scan
                found = True
                detail = f"{key.decode(errors='replace')} holds a {actual.decode()}, not a {kind.decode()}"
                report.wrong_type.append(detail)
                report.found(WRONG_TYPE, f"{detail} (delete it by hand)")
    return found


def _move_sketches(target: _Target, report: VerifyReport, entries: list[tuple[bytes, bytes, bytes]]) -> int:
    """Report sketch fields (bucket key, field, sketches) in another bucket than their fingerprint's; on
    repair, move each stored document's sketch to its own. The number of those."""
    keys, run = target.store.keys, target.store.execute
    pairs: list[tuple[bytes, bytes, bytes]] = []  # (fingerprint, id, sketch)
    for key, name, raw in entries:
        fp = name[len(SKETCHES) :]
        report.found("misplaced fingerprint-map entry", f"{name.decode(errors='replace')} in {key.decode()}")
        try:
            pairs.extend((fp, doc_id.encode(), sketch) for doc_id, sketch in decode_sketches(raw).items())
        except (ValueError, UnicodeDecodeError):
            report.found("malformed sketches", f"{name.decode(errors='replace')}: {raw[:40]!r}")
    owners = run([(b"HGET", keys.id_bucket(doc_id), doc_id) for _, doc_id, _ in pairs])
    stored = [pair for pair, owner in zip(pairs, owners, strict=True) if owner == pair[0]]
    if target.repair and entries:
        calls = [
            FP_IDS.command([keys.fp_bucket(fp)], [b"m", fp, doc_id, b"", sketch])
            for fp, doc_id, sketch in stored
        ]
        target.store.run_script(FP_IDS, calls)
        run([(b"HDEL", key, name) for key, name, _ in entries])
    return len(stored)


def _check_ids(target: _Target, report: VerifyReport, chunk: list[tuple[bytes, bytes]]) -> None:
    """Step 1 for a chunk of (id, stored fingerprint) entries of the id map."""
    keys, run, tables = target.store.keys, target.store.execute, target.tables
    # Each fingerprint's list read and decoded once: a page copied under thousands of ids, else quadratic.
    distinct = list(dict.fromkeys(fp for _, fp in chunk))
    replies = run([(b"HGET", keys.fp_bucket(fp), fp) for fp in distinct])
    listed: dict[bytes, tuple[bytes | None, frozenset[str] | None]] = {}
    for fp, raw in zip(distinct, replies, strict=True):
        decoded = _ids(raw) if raw is not None else []
        listed[fp] = (raw, None if decoded is None else frozenset(decoded))
    # An error here is raised, not taken for a member (an ACL refusal: keys of the wrong type stopped us).
    member = run([(b"SISMEMBER", t, fp) for _, fp in chunk for t in keys.tables(decode_fp(fp, target.f))])
    resets: list[Any] = []
    additions: list[tuple[bytes, bytes]] = []
    table_fixes: list[Any] = []
    malformed: set[bytes] = set()
    found: list[Found] = []  # on a cluster, fixed here
    for n, (doc_id, fp) in enumerate(chunk):
        raw, ids = listed[fp]
        if ids is None and fp not in malformed:
            malformed.add(fp)
            report.found("malformed fingerprint-map entry", f"{fp.decode()}: {raw!r}")
            resets.append((b"HDEL", keys.fp_bucket(fp), fp))
        if ids is None:
            additions.append((doc_id, fp))
        elif doc_id.decode() not in ids:
            detail, id_keys = f"{doc_id!r} -> {fp.decode()}", [keys.id_bucket(doc_id), keys.fp_bucket(fp)]
            found.append(("id missing from fingerprint map", detail, b"listed", id_keys, fp, doc_id))
        for t, key in enumerate(keys.tables(decode_fp(fp, target.f))):
            if member[n * tables + t] == 0:
                detail, id_keys = f"{fp.decode()} not in {key.decode()}", [keys.id_bucket(doc_id), key]
                found.append(("fingerprint missing from table", detail, b"tabled", id_keys, fp, doc_id))
    still = settle(target.store, report, found, target.repair)
    for _, _, kind, problem_keys, fp, doc_id in still if target.store.cluster else []:
        if kind == b"listed":
            additions.append((doc_id, fp))
        else:
            table_fixes.append((b"SADD", problem_keys[1], fp))
    if target.repair:
        # One by one with the idempotent script: several missing ids of one fingerprint all land.
        run(resets + table_fixes)
        calls = [FP_IDS.command([keys.fp_bucket(fp)], [b"+", fp, doc_id]) for doc_id, fp in additions]
        target.store.run_script(FP_IDS, calls)


def _check_fingerprints(
    target: _Target, report: VerifyReport, chunk: list[tuple[bytes, bytes, bytes]]
) -> int:
    """Step 2 for a chunk of (bucket key, stored fingerprint, id list) entries; how many are in use."""
    keys, run = target.store.keys, target.store.execute
    parsed = []
    fixes: list[Any] = []
    for key, fp, raw in chunk:
        ids = _ids(raw)
        if ids is None or _fingerprint(fp, target.f) is None:
            report.found("malformed fingerprint-map entry", f"{fp!r}: {raw!r}")
            fixes.append((b"HDEL", key, fp))
        else:
            parsed.append((key, fp, ids))
    flat_ids = [(fp, doc_id) for _, fp, ids in parsed for doc_id in ids]
    owners = run([(b"HGET", keys.id_bucket(d.encode()), d.encode()) for _, d in flat_ids])
    found: list[Found] = [
        (
            "stale id in fingerprint map",
            f"{listed!r} listed under {fp.decode()}",
            b"stale",
            [keys.fp_bucket(fp), keys.id_bucket(listed.encode()), *keys.tables(decode_fp(fp, target.f))],
            fp,
            listed.encode(),
        )
        for (fp, listed), owner in zip(flat_ids, owners, strict=True)
        if owner != fp
    ]
    # Checked again and fixed by `settle` on a standalone server (nothing of them left to `fixes`).
    stale: dict[bytes, set[str]] = {}
    for *_, fp, doc_id in settle(target.store, report, found, target.repair):
        stale.setdefault(fp, set()).add(doc_id.decode())
    in_use = 0
    for key, fp, ids in parsed:
        kept = [d for d in ids if d not in stale.get(fp, ())]
        if key != keys.fp_bucket(fp):
            report.found("misplaced fingerprint-map entry", f"{fp.decode()} in {key.decode()}")
            fixes.append((b"HDEL", key, fp))
            continue
        in_use += bool(kept)
        if fp in stale and target.store.cluster:
            if kept:
                fixes.append((b"HSET", key, fp, encode_ids(kept)))
            else:
                fixes.append((b"HDEL", key, fp))
                fixes.extend((b"SREM", t, fp) for t in keys.tables(decode_fp(fp, target.f)))
    if target.repair and fixes:
        run(fixes)
    return in_use


def _check_tables(
    target: _Target, report: VerifyReport, table: int, chunk: list[tuple[bytes, bytes]]
) -> None:
    """Step 3 for a chunk of (table key, member) pairs of one table."""
    keys, run = target.store.keys, target.store.execute
    known = run([(b"HEXISTS", keys.fp_bucket(fp), fp) for _, fp in chunk])
    fixes = []
    orphans: list[Found] = []
    for (key, fp), exists in zip(chunk, known, strict=True):
        value = _fingerprint(fp, target.f)
        misplaced = value is not None and keys.tables(value)[table] != key
        if value is None:
            report.found("malformed table member", f"{fp!r} in {key.decode()}")
        elif misplaced:
            report.found("misplaced table member", f"{fp.decode()} in {key.decode()}")
        elif not exists and target.store.cluster:
            report.garbage += 1
        elif not exists:  # checked again, and removed on repair, in one step
            detail = f"{fp.decode()} in {key.decode()}"
            orphans.append(("orphan table member", detail, b"orphan", [key, keys.fp_bucket(fp)], fp, b""))
            continue
        if value is None or misplaced or not exists:
            fixes.append((b"SREM", key, fp))
    settle(target.store, report, orphans, target.repair)
    if target.repair and fixes:
        run(fixes)


def _ids(raw: bytes) -> list[str] | None:
    try:
        return decode_ids(raw)
    except (ValueError, UnicodeDecodeError):
        return None


def _fingerprint(raw: bytes, f: int) -> int | None:
    try:
        value = decode_fp(raw, f)
    except ValueError:
        return None
    return value if 0 <= value < 1 << f else None


def _typed(report: VerifyReport, keys: list[bytes], replies: list[Any]) -> list[Any]:
    """Replies with those of keys holding the wrong type (WRONGTYPE) reported and read as empty."""
    out = []
    for key, reply in zip(keys, replies, strict=True):
        if isinstance(reply, Exception):
            if not str(reply).startswith("WRONGTYPE"):
                raise_first_error([reply])
            report.found(WRONG_TYPE, f"{key.decode()} (delete it by hand)")
            reply = []
        out.append(reply)
    return out


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
    _check_superseded(store, windows, report, repair)
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


def _check_superseded(store: Store, windows: Windows, report: VerifyReport, repair: bool) -> None:
    """Find each id-map entry of a period that a newer period's entry of its id supersedes (a cluster's
    move cut off in its last step); on repair, take it out of its period as that step would have."""
    live = sorted(windows.view().windows)
    for at, window in enumerate(live[:-1]):
        older = Store(store.sender, windows.schema(window))
        newer = [windows.schema(w) for w in live[at + 1 :]]
        for bucket_keys in older.scan("id"):
            # A key of the wrong type is reported by the period's own check.
            buckets = [
                b for b in older.hashes(bucket_keys, raise_on_error=False) if b and isinstance(b, list)
            ]
            # An id's bucket has the same number in every period: one HKEYS a bucket and newer period.
            held = store.execute([(b"HKEYS", k.id_bucket(b[0][0])) for b in buckets for k in newer])
            stale = []
            for row, bucket in enumerate(buckets):
                later = {i for ids in held[row * len(newer) : (row + 1) * len(newer)] for i in ids}
                stale += [(window, fp, doc_id) for doc_id, fp in bucket if doc_id in later]
            for _, _, doc_id in stale:
                report.found("id in an older period too", f"{doc_id!r} in period {window}")
            if repair and stale:
                unlist, unmap = leaving(windows, stale)
                store.run_script(FP_IDS, unlist)
                store.run_script(ID_CAS, unmap)


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
