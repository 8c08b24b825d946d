"""An index's meta hash: read, created where the index holds no data, else restored from a stated
configuration checked against a sample of the data (a new meta over data of another would lose it).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from ..codec import decode_fp, decode_ids, format_fingerprint, unpack_fps
from ..errors import ConfigurationMismatch, IndexCorrupted, InvalidArgument
from ..transport import Sender, raise_first_error
from .keys import KeySchema
from .store import CREATE_META, PIN_META, hash_pairs, run_calls
from .verification import Verification
from .write_args import sketch_in

__all__ = ["find_data", "open_meta", "pin_meta", "read_meta", "restore_meta"]

_SCAN_COUNT = 10_000
#: Id-map entries a restore checks against the stated configuration.
_SAMPLE = 200
#: How far a period's expiry may be from the one a stated retention gives (TTL and clock in one trip).
_EXPIRY_SLACK_MS = 250
_STATE_IT = "state the configuration the index was created with (an export's header record names it)"


def open_meta(
    sender: Sender,
    prefix: str,
    name: str,
    fields: dict[str, str] | None,
    refusal: Exception | None = None,
) -> tuple[dict[str, str] | None, bool]:
    """Read an index's meta hash, creating it from `fields` (None: only read) unless it exists or
    `refusal` is given (then raised); and whether this call created it, as far as it can tell.

    Raises:
        IndexCorrupted: the meta is missing but the index's data is there, also when only reading.
    """
    meta_key = KeySchema.meta_key(prefix, name)
    stored = read_meta(sender, meta_key)
    if stored:
        return stored, False
    found = find_data(sender, prefix, name)
    if found is not None:
        # Another worker may have created the index and written to it since: read the meta again.
        stored = read_meta(sender, meta_key)
        if stored:
            return stored, False
        raise IndexCorrupted(
            f"index {name!r} has data ({found.decode(errors='replace')}) but no meta key: it was deleted, or "
            "the index was flushed half-way, and creating it anew could mix configurations",
            hint="restore the meta with the configuration the index was created with (SimhashIndex.restore; "
            "an export's header record names it), or drop the index (drop_index)",
            remedy="restore-meta",
        )
    if fields is None:
        return None, False
    if refusal is not None:
        raise refusal
    return _create(sender, meta_key, fields), True


def pin_meta(sender: Sender, meta_key: bytes, field: str, value: str) -> str | None:
    """Set a field of an existing meta hash unless set; the stored value (None: no meta)."""
    call = PIN_META.command([meta_key], [field.encode(), value.encode()])
    reply = run_calls(sender, [call], (PIN_META,))[0]
    return None if reply is None else bytes(reply).decode()


def find_data(sender: Sender, prefix: str, name: str) -> bytes | None:
    """A key of the index's data, if any exists (without a counts hash: a SCAN of the whole key space)."""
    counts, writers = KeySchema.before_meta(prefix, name)
    if sender.execute([(b"EXISTS", counts)])[0]:
        return counts
    meta = KeySchema.meta_key(prefix, name)
    for keys in sender.scan(f"{prefix}:{name}:*", _SCAN_COUNT):
        for key in keys:
            if key != meta and not key.startswith(writers):
                return bytes(key)
    return None


def restore_meta(sender: Sender, keys: KeySchema, f: int, fields: dict[str, str]) -> dict[str, str]:
    """Write a missing meta hash for data stored under the stated configuration (a sample of id-map
    entries must fit it); the stored fields.

    Raises:
        ConfigurationMismatch: the data does not fit the stated configuration (an example is named).
        IndexCorrupted: there is no data to check the configuration against.
    """
    stored = read_meta(sender, keys.meta)
    if stored:
        return stored
    windowed = any(sender.scan(keys.pattern_of("windows"), _SCAN_COUNT))
    if windowed != ("retention" in fields):
        held, hint, remedy = (
            (
                "keeps its documents in periods, so it was created with",
                "state it too (retention=...)",
                "state",
            )
            if windowed
            else ("holds no periods, so it was created without", "do not state one (retention=None)", "no")
        )
        raise ConfigurationMismatch(
            f"the index {held} a retention window", hint=hint, remedy=f"{remedy}-retention"
        )
    if windowed:
        keys, found = _window_with_data(sender, keys)
        problem = found and _misfit_period(sender, keys, found, fields["retention"])
        if problem:
            raise ConfigurationMismatch(
                f"the stated retention does not fit the stored data: {problem}",
                hint=_STATE_IT,
                remedy="state-config",
            )
    sample = _sample(sender, keys)
    if not sample:
        raise IndexCorrupted(
            "no documents to check the stated configuration against: create the index instead"
        )
    # A sampled document's fingerprint with sketches kept beside its ids: verified mode.
    sketch_of = [(b"HEXISTS", keys.fp_bucket(fp), keys.sketch_field(fp)) for _, fp in sample]
    if "verified" not in fields and any(sender.execute(sketch_of)):
        raise ConfigurationMismatch(
            "the index holds sketches, so it was created in verified mode",
            hint="state it too (verification=..., with the threshold it was created with)",
            remedy="state-verified",
        )
    problems: Iterable[str | None] = (_misfit(sender, keys, f, doc_id, fp) for doc_id, fp in sample)
    if "verified" in fields:
        mode = Verification.from_meta(fields["verified"])
        problems = itertools.chain(problems, [_misfit_sketches(sender, keys, sample, mode, f)])
    problem = next((p for p in problems if p), None)
    if problem:
        raise ConfigurationMismatch(
            f"the stated configuration does not fit the stored data: {problem}",
            hint=_STATE_IT,
            remedy="state-config",
        )
    return _create(sender, keys.meta, fields)


def read_meta(sender: Sender, meta_key: bytes) -> dict[str, str] | None:
    """An index's meta hash; None if there is none.

    Raises:
        IndexCorrupted: the key holds another type of value.
    """
    reply = sender.execute([(b"HGETALL", meta_key)], raise_on_error=False)[0]
    if isinstance(reply, Exception) and str(reply).startswith("WRONGTYPE"):
        # No index can be opened, so verify cannot list it: the message names it.
        name = meta_key.decode(errors="replace")
        raise IndexCorrupted(
            f"the index's meta key {name} holds another type of value than a hash (another program wrote "
            f"there?): delete it by hand (redis-cli DEL {name}), then restore it with the configuration "
            "the index was created with (SimhashIndex.restore, or simhash-redis restore-meta)"
        )
    raise_first_error([reply])
    return {field.decode(): value.decode() for field, value in hash_pairs(reply)} or None


def _create(sender: Sender, meta_key: bytes, fields: dict[str, str]) -> dict[str, str]:
    args: list[bytes | int] = [item.encode() for pair in fields.items() for item in pair]
    call = CREATE_META.command([meta_key], args)
    reply = run_calls(sender, [call], (CREATE_META,))[0]
    return {field.decode(): value.decode() for field, value in hash_pairs(reply)}


def _window_with_data(sender: Sender, keys: KeySchema) -> tuple[KeySchema, bytes | None]:
    head = len(keys.base) + 2  # the key names go on with ":w" and the period's number
    for page in sender.scan(f"{keys.base}:w*:id:*", _SCAN_COUNT):
        for key in page:
            number = key[head:].partition(b":")[0]
            if number.isdigit():
                return keys.in_window(int(number)), bytes(key)
    return keys, None


def _misfit_period(sender: Sender, keys: KeySchema, key: bytes, retention: str) -> str | None:
    seconds, _, rest = retention.partition(";period=")
    length = int(rest.partition(";")[0]) * 1000
    clock, ttl = sender.execute([(b"TIME",), (b"PTTL", key)])
    if int(ttl) < 0:
        return f"the period's key {key.decode(errors='replace')} has no expiry"
    expires = int(clock[0]) * 1000 + int(clock[1]) // 1000 + int(ttl)
    stated = ((keys.window or 0) + 1) * length + int(seconds) * 1000
    if abs(expires - stated) > _EXPIRY_SLACK_MS:
        return (
            f"period {keys.window} expires at {expires} ms, and that retention would have it expire at "
            f"{stated} ms: state the retention and period the index was created with"
        )
    return None


def _sample(sender: Sender, keys: KeySchema) -> list[tuple[bytes, bytes]]:
    sample: list[tuple[bytes, bytes]] = []
    for bucket_keys in sender.scan(keys.pattern_of("id"), _SCAN_COUNT):
        for reply in sender.execute([(b"HGETALL", key) for key in bucket_keys[:_SAMPLE]]):
            sample.extend(hash_pairs(reply))
        if len(sample) >= _SAMPLE:
            break
    return sample[:_SAMPLE]


def _misfit_sketches(
    sender: Sender, keys: KeySchema, sample: list[tuple[bytes, bytes]], mode: Verification, f: int
) -> str | None:
    replies = sender.execute([(b"HGET", keys.fp_bucket(fp), keys.sketch_field(fp)) for _, fp in sample])
    # A malformed sketch is verify's to report.
    found = [(fp, sketch_in(reply, doc_id)) for (doc_id, fp), reply in zip(sample, replies, strict=True)]
    sketches = [(fp, sketch) for fp, sketch in found if sketch is not None]
    for _, sketch in sketches:
        if len(sketch) != mode.sketch_bytes:
            return f"a sketch of {len(sketch)} bytes, not the {mode.sketch_bytes} of {mode.to_meta()!r}"
    banded = any(sender.scan(keys.pattern_of("band"), _SCAN_COUNT))
    if banded != bool(mode.bands):
        return (
            "the index has LSH band tables, and the stated mode none"
            if banded
            else ("the stated mode has LSH band tables, and the index none")
        )
    if mode.bands and sketches:
        fp, sketch = sketches[0]
        key, field = keys.band_places(sketch, mode)[0]
        value = sender.execute([(b"HGET", key, field)])[0]
        try:
            listed = value is not None and fp in unpack_fps(bytes(value), f)
        except ValueError:
            listed = False
        if not listed:
            return f"fingerprint {_shown_fp(fp, f)} is not in band table {key.decode()} of the stated mode"
    return None


def _misfit(sender: Sender, keys: KeySchema, f: int, doc_id: bytes, fp: bytes) -> str | None:
    shown = repr(doc_id.decode(errors="replace"))
    try:
        tables = keys.tables(decode_fp(fp, f))
    except (ValueError, InvalidArgument):
        return f"id {shown} holds {fp.decode(errors='replace')!r}, not a {f}-bit fingerprint"
    replies = sender.execute(
        [(b"HEXISTS", keys.id_bucket(doc_id), doc_id), (b"HGET", keys.fp_bucket(fp), fp)]
        + [(b"SISMEMBER", table, fp) for table in tables]
    )
    if not replies[0]:
        return f"id {shown} is not in the id bucket these id_buckets give"
    if replies[1] is None or doc_id.decode(errors="replace") not in decode_ids(bytes(replies[1])):
        return f"fingerprint {_shown_fp(fp, f)} of id {shown} has no fingerprint-map entry naming it here"
    missing = [table.decode() for table, member in zip(tables, replies[2:], strict=True) if not member]
    if missing:
        return f"fingerprint {_shown_fp(fp, f)} of id {shown} is not in table key {missing[0]} of this layout"
    return None


def _shown_fp(stored: bytes, f: int) -> str:
    try:
        return format_fingerprint(decode_fp(stored, f), f)
    except ValueError:
        return repr(stored.decode(errors="replace"))
