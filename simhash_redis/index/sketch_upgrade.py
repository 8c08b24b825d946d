"""The upgrade of a verified index of format 1: its sketches moved from hashes by id into the
fingerprint map, beside the ids they belong to (format 3).

The meta is marked first (format 3, ``upgrading``), so versions that know only format 1 refuse the
index from then on. Every opener of this version then moves what is left, idempotently: a sketch is set
only for an id listed with its fingerprint, and only where a document write has not set a newer one;
the old entry is deleted after (and at once for an id no longer stored). An opener whose pass leaves
nothing behind clears the mark. Until then a near() may miss a candidate whose sketch has not moved
yet: it is dropped, never wrongly confirmed.
"""

from __future__ import annotations

from ..errors import IndexNotFound
from ..store import Store
from ..store.scripts import Script
from ..transport import Command

__all__ = ["upgrade_pending", "upgrade_sketches"]

_MARK = Script("sketch_upgrade")
_IDS = Script("fp_ids")


def upgrade_pending(store: Store) -> bool:
    """Whether a verified index still keeps sketches of format 1 (by id): not upgraded, or under way.

    Args:
        store: the index's keys and sender.

    Raises:
        RedisUnavailable: the server cannot be reached.
    """
    meta = (b"HMGET", store.keys.meta, b"format", b"verified", b"upgrading")
    fmt, verified, upgrading = store.execute([meta])[0]
    return (fmt == b"1" and verified is not None) or upgrading == b"1"


def upgrade_sketches(store: Store) -> int:
    """Upgrade a verified index of format 1, or finish an upgrade under way; nothing for any other.

    Args:
        store: the index's keys and sender.

    Returns:
        How many sketches of stored documents this call moved (or found moved already).

    Raises:
        IndexNotFound: the index was dropped meanwhile.
        RedisUnavailable: the server cannot be reached.
    """
    meta = store.keys.meta
    mark = store.run_script(_MARK, [_MARK.command([meta], [b"begin"])])[0]
    if mark is None:
        raise IndexNotFound(f"index {store.keys.name!r} was dropped while it was being opened")
    if bytes(mark) != b"1":
        return 0
    moved = left = 0
    for keys in store.scan("sketch"):
        done, kept = _move(store, keys)
        moved, left = moved + done, left + kept
    if not left:
        store.run_script(_MARK, [_MARK.command([meta], [b"end"])])
    return moved


def _move(store: Store, sketch_keys: list[bytes]) -> tuple[int, int]:
    """Move the sketches of one SCAN page of format 1's sketch hashes.

    Returns:
        How many were moved (or found moved), and how many stay: of ids stored but not listed with
        their fingerprint (a cluster's interrupted write, which `verify --repair` completes), moved by
        a later opener.
    """
    keys = store.keys
    entries = [
        (key, bytes(doc_id), bytes(sketch))
        for key, pairs in zip(sketch_keys, store.hashes(sketch_keys), strict=True)
        for doc_id, sketch in pairs
    ]
    if not entries:
        return 0, 0
    fps = store.execute([(b"HGET", keys.id_bucket(doc_id), doc_id) for _, doc_id, _ in entries])
    stored = [(entry, bytes(fp)) for entry, fp in zip(entries, fps, strict=True) if fp is not None]
    calls = [
        _IDS.command([keys.fp_bucket(fp)], [b"m", fp, doc_id, b"", sketch])
        for (_, doc_id, sketch), fp in stored
    ]
    listed = store.run_script(_IDS, calls, durable=True) if calls else []
    staying = {entry for (entry, _), ok in zip(stored, listed, strict=True) if not ok}
    # Moved, or of an id no longer stored: gone either way.
    gone: list[Command] = [(b"HDEL", entry[0], entry[1]) for entry in entries if entry not in staying]
    if gone:
        store.execute(gone, durable=True)
    return len(stored) - len(staying), len(staying)
