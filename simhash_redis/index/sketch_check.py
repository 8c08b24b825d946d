"""Verify's checks of verified mode: the sketches kept beside their ids, and the band tables made of them
(the rules: docs/guarantees.md)."""

from __future__ import annotations

from typing import Any

from ..codec import decode_sketches, pack_fps, unpack_fps
from ..store import KeySchema, Store, Verification
from ..store.store import BAND_DROP, BAND_MEMBER, FP_IDS, hash_pairs
from ..transport import raise_first_error
from .report import Found, VerifyReport, settle

__all__ = ["SKETCHES", "check_bands", "check_sketches"]

#: The start of the field names of a fingerprint map that hold sketches.
SKETCHES = KeySchema.sketch_field(b"")


def check_sketches(
    store: Store,
    report: VerifyReport,
    chunk: list[tuple[bytes, bytes]],
    verification: Verification | None,
    repair: bool,
    f: int,
) -> int:
    """Check a chunk of (sketch field, sketches) entries and their band tables; how many are of stored
    documents."""
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
    stored, found = 0, list[Found]()
    banded: list[tuple[tuple[bytes, bytes], bytes]] = []  # ((hash, field), fingerprint) of stored ones
    for (fp, doc_id, sketch), owner in zip(pairs, owners, strict=True):
        if owner != fp:  # a writer may have stored it since: `settle` checks it again
            detail = f"{doc_id!r} under {fp.decode(errors='replace')}"
            problem_keys = [keys.fp_bucket(fp), keys.id_bucket(doc_id)]
            found.append(("sketch without a document", detail, b"sketched", problem_keys, fp, doc_id))
            continue
        stored += 1
        size = verification.sketch_bytes if verification is not None else len(sketch)
        if len(sketch) != size:
            report.found("malformed sketch", f"{doc_id!r}: {len(sketch)} bytes, not {size} (not repaired)")
        elif verification is not None and verification.bands:
            banded.extend((place, fp) for place in keys.band_places(sketch, verification))
    orphans = settle(store, report, found, repair)
    if repair and orphans and store.cluster:
        # The id leaves with its sketch if it is listed there: the id map says it has another fingerprint.
        store.run_script(FP_IDS, [FP_IDS.command(k[:1], [b"-", fp, d]) for *_, k, fp, d in orphans])
    if banded and verification is not None:
        # An error here is raised (an ACL refusal: keys of the wrong type stopped verify before). Each band
        # value read and split once: a template's holds thousands of the chunk's fingerprints.
        places = list(dict.fromkeys(place for place, _ in banded))
        values = store.execute([(b"HGET", key, field) for key, field in places])
        members = {place: set(_members(value, f) or ()) for place, value in zip(places, values, strict=True)}
        missing = []
        for (key, field), fp in banded:
            if fp not in members[(key, field)]:
                report.found(
                    "fingerprint missing from band table",
                    f"{fp.decode()} not in {key.decode()} {field.hex()}",
                )
                missing.append(BAND_MEMBER.command([key], [b"+", field, pack_fps([fp], f)]))
        if repair and missing:
            store.run_script(BAND_MEMBER, missing)
    return stored


def check_bands(store: Store, report: VerifyReport, verification: Verification, repair: bool, f: int) -> None:
    """Count the band tables' members that none of their fingerprint's sketches puts there (garbage)."""
    keys, width = store.keys, verification.band_bytes
    start = len(keys.base) + len(":b")
    for band_keys in store.scan("band"):
        values = store.execute([(b"HGETALL", key) for key in band_keys], raise_on_error=False)
        found: list[tuple[bytes, int, bytes, bytes]] = []  # (key, band, its bytes, fingerprint)
        unreadable: list[Any] = []
        for key, pairs in zip(band_keys, values, strict=True):
            placed = _band_of(key[start:], verification)
            if isinstance(pairs, Exception) and not str(pairs).startswith("WRONGTYPE"):
                raise_first_error([pairs])  # an ACL refusal, say: not a malformed key
            if placed is None or isinstance(pairs, Exception):
                report.found("malformed band table", f"{key.decode(errors='replace')} (delete it by hand)")
                continue
            number, bucket = placed
            for field, value in hash_pairs(pairs):
                fps = _members(value, f) if len(field) == width else None
                # A field in another bucket is never read, a malformed one fails every read; their
                # documents' members were put back in place by `check_sketches`, which runs first.
                if fps is None or int.from_bytes(field, "big") % verification.band_buckets != bucket:
                    what = "malformed band value" if fps is None else "band value in another bucket"
                    report.found(what, f"{key.decode(errors='replace')} {field.hex()}")
                    unreadable.append((b"HDEL", key, field))
                    continue
                found.extend((key, number, field, fp) for fp in fps)
        if repair and unreadable:
            store.execute(unreadable)
        fps = list(dict.fromkeys(fp for _, _, _, fp in found))
        replies = store.execute([(b"HGET", keys.fp_bucket(fp), keys.sketch_field(fp)) for fp in fps])
        sketches = {fp: _sketches(reply) for fp, reply in zip(fps, replies, strict=True)}
        garbage: list[Any] = []
        for key, number, value, fp in found:
            offset = number * width
            if not any(sketch[offset : offset + width] == value for sketch in sketches[fp]):
                report.garbage += 1
                packed = pack_fps([fp], f)
                if store.cluster:  # two slots: the band's own script; verify runs while no worker writes
                    garbage.append(BAND_MEMBER.command([key], [b"-", value, packed]))
                else:
                    garbage.append(BAND_DROP.command([key, keys.fp_bucket(fp)], [fp, offset, value, packed]))
        if repair and garbage:
            store.run_script(BAND_MEMBER if store.cluster else BAND_DROP, garbage)


def _band_of(name: bytes, verification: Verification) -> tuple[int, int] | None:
    """The band and the bucket of a bucket key, from its part after `{base}:b` (None: not one)."""
    number, _, bucket = name.partition(b":")
    try:
        band, value = int(number), int(bucket, 16)
    except ValueError:
        return None
    canonical = number.isdigit() and bucket == b"%x" % value
    placed = 0 <= band < verification.bands and value < verification.band_buckets
    return (band, value) if canonical and placed else None


def _members(value: bytes | None, f: int) -> list[bytes] | None:
    """The stored fingerprints of a band value (none when absent; None when malformed)."""
    if value is None:
        return []
    try:
        return unpack_fps(bytes(value), f)
    except ValueError:
        return None


def _sketches(reply: bytes | None) -> list[bytes]:
    """The sketches of a fingerprint's field (none when absent or malformed: step 2 reports those)."""
    if reply is None:
        return []
    try:
        return list(decode_sketches(reply).values())
    except (ValueError, UnicodeDecodeError):
        return []
