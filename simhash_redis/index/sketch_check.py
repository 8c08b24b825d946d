"""Verify's checks of verified mode: the sketches kept beside their ids, and the band tables made of them.

- A sketch kept for an id that does not have that fingerprint is removed (with the id, if it is listed
  there); a fingerprint's malformed sketches are removed; one of the wrong size is reported only.
- A stored document's fingerprint missing from one of its sketch's band tables is put back.
- A band table member none of whose fingerprint's sketches has that band is garbage (a sketch dropped
  by a write interrupted before its band tables were cleaned, or on a cluster, where they are not):
  near() only reads it as a candidate its sketches do not confirm, and repair removes it (checked again
  by the same script as it goes on a standalone server; on a cluster, where the band table and the
  fingerprint's hash are in two slots, as verify always assumes, while no worker writes).
"""

from __future__ import annotations

from typing import Any

from ..codec import decode_sketches
from ..store import KeySchema, Store, Verification
from ..store.scripts import BAND_DROP, FP_IDS
from ..transport import raise_first_error
from .report import VerifyReport

__all__ = ["SKETCHES", "check_bands", "check_sketches"]

#: The start of the field names of a fingerprint map that hold sketches.
SKETCHES = KeySchema.sketch_field(b"")



def check_sketches(
    store: Store,
    report: VerifyReport,
    chunk: list[tuple[bytes, bytes]],
    verification: Verification | None,
    repair: bool,
) -> int:
    """Check a chunk of (sketch field, sketches) entries of the fingerprint map, and the band tables of
    the stored documents' sketches.

    Args:
        store: the index's store.
        report: where problems are counted.
        chunk: the entries.
        verification: the index's verified mode (None: a plain index that holds sketches anyway).
        repair: also fix what is found.

    Returns:
        How many of the sketches are of stored documents.

    Raises:
        RedisUnavailable: the server cannot be reached.
    """
    keys = store.keys
    pairs: list[tuple[bytes, bytes, bytes]] = []  # (fingerprint, id, sketch)
    for name, raw in chunk:
        fp = name[len(SKETCHES) :]
        try:
            pairs.extend((fp, doc_id.encode(), sketch) for doc_id, sketch in decode_sketches(raw).items())
        except (ValueError, UnicodeDecodeError):
            report.found("malformed sketches", f"{name.decode(errors='replace')}: {raw[:40]!r}")
            if repair:
                store.execute([(b"HDEL", keys.fp_bucket(fp), name)])
    owners = store.execute([(b"HGET", keys.id_bucket(doc_id), doc_id) for _, doc_id, _ in pairs])
    stored, orphans = 0, []
    banded: list[tuple[bytes, bytes]] = []  # (band table, fingerprint) of the stored documents
    for (fp, doc_id, sketch), owner in zip(pairs, owners, strict=True):
        if owner != fp:
            report.found("sketch without a document", f"{doc_id!r} under {fp.decode(errors='replace')}")
            orphans.append(FP_IDS.command([keys.fp_bucket(fp)], [b"-", fp, doc_id]))
            continue
        stored += 1
        size = verification.sketch_bytes if verification is not None else len(sketch)
        if len(sketch) != size:
            report.found("malformed sketch", f"{doc_id!r}: {len(sketch)} bytes, not {size} (not repaired)")
        elif verification is not None and verification.bands:
            banded.extend((key, fp) for key in keys.bands(sketch, verification))
    if repair and orphans:
        # The id leaves with its sketch if it is listed there: the id map says it has another fingerprint.
        store.run_script(FP_IDS, orphans)
    if banded:
        # Raised, not taken as "absent": an error here is an ACL refusal, say (verify's first pass
        # lists keys of the wrong type, and checks nothing more while there are any).
        present = store.execute([(b"SISMEMBER", key, fp) for key, fp in banded])
        missing = [(key, fp) for (key, fp), there in zip(banded, present, strict=True) if there == 0]
        for key, fp in missing:
            report.found("fingerprint missing from band table", f"{fp.decode()} not in {key.decode()}")
        if repair and missing:
            store.execute([(b"SADD", key, fp) for key, fp in missing])
    return stored


def check_bands(store: Store, report: VerifyReport, verification: Verification, repair: bool) -> None:
    """Count the band tables' members that none of their fingerprint's sketches puts there (garbage).

    Args:
        store: the index's store.
        report: where garbage and malformed keys are counted.
        verification: the index's verified mode (with band tables).
        repair: also remove the garbage (each member checked again atomically as it goes).

    Raises:
        RedisUnavailable: the server cannot be reached.
    """
    keys, width = store.keys, verification.band_bytes
    start = len(keys.base) + len(":b")
    for band_keys in store.scan("band"):
        members = store.execute([(b"SMEMBERS", key) for key in band_keys], raise_on_error=False)
        found: list[tuple[bytes, int, bytes, bytes]] = []  # (key, band, its bytes, fingerprint)
        for key, fps in zip(band_keys, members, strict=True):
            parsed = _band_of(key[start:], verification.bands, width)
            if isinstance(fps, Exception) and not str(fps).startswith("WRONGTYPE"):
                raise_first_error([fps])  # an ACL refusal, say: not a malformed key
            if parsed is None or isinstance(fps, Exception):
                report.found("malformed band table", f"{key.decode(errors='replace')} (delete it by hand)")
                continue
            number, value = parsed
            found.extend((key, number, value, bytes(fp)) for fp in fps)
        fps = list(dict.fromkeys(fp for _, _, _, fp in found))
        replies = store.execute([(b"HGET", keys.fp_bucket(fp), keys.sketch_field(fp)) for fp in fps])
        sketches = {fp: _sketches(reply) for fp, reply in zip(fps, replies, strict=True)}
        garbage: list[Any] = []
        for key, number, value, fp in found:
            offset = number * width
            if not any(sketch[offset : offset + width] == value for sketch in sketches[fp]):
                report.garbage += 1
                if store.cluster:  # two slots: no script; verify runs while no worker writes
                    garbage.append((b"SREM", key, fp))
                else:
                    garbage.append(BAND_DROP.command([key, keys.fp_bucket(fp)], [fp, offset, value]))
        if repair and garbage and store.cluster:
            store.execute(garbage)
        elif repair and garbage:
            store.run_script(BAND_DROP, garbage)


def _band_of(name: bytes, bands: int, width: int) -> tuple[int, bytes] | None:
    """The band and its bytes from the part of a band table's key after `{base}:b` (None: not one)."""
    number, _, value = name.partition(b":")
    try:
        band, raw = int(number), bytes.fromhex(value.decode())
    except (ValueError, UnicodeDecodeError):
        return None
    canonical = number.isdigit() and value == raw.hex().encode()
    return (band, raw) if canonical and 0 <= band < bands and len(raw) == width else None


def _sketches(reply: bytes | None) -> list[bytes]:
    """The sketches of a fingerprint's field (none when absent or malformed: step 2 reports those)."""
    if reply is None:
        return []
    try:
        return list(decode_sketches(reply).values())
    except (ValueError, UnicodeDecodeError):
        return []
