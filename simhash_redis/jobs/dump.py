"""Export and import a whole index as a msgpack stream (format: docs/cli.md, "export and import"): export
SCANs (bounded memory, no point-in-time snapshot); import checks the stream's checksum before it writes;
importing a stream again is safe."""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import msgpack
import redis
import xxhash
from redis.cluster import RedisCluster

from ..codec import decode_fp, decode_sketches, dump_fp, undump_fp
from ..errors import IndexCorrupted, InputError, InvalidArgument, SimhashRedisError
from ..index import Outcome, SimhashIndex, VerifiedIndex
from ..store import IndexConfig, KeySchema, Store, encode_id, validate_name
from ..store.config import FORMAT_VERSION
from .records import GZIP_ERRORS, GZIP_MAGIC

__all__ = ["DUMP_TYPE", "DUMP_VERSION", "ImportResult", "export_index", "import_index"]

#: The header's "type" field.
DUMP_TYPE = "simhash-redis-dump"
#: The stream format version this module writes and reads (2: the end record holds a checksum).
DUMP_VERSION = 2
_END_TYPE = "end"
_MAX_RECORD = 16 * 1024 * 1024
#: Bytes read at a time by the checking pass; a stream that cannot be read twice is spooled to a temporary
#: file (in memory up to _SPOOL_MEMORY).
_CHUNK = 1 << 20
_SPOOL_MEMORY = 64 << 20


def export_index(
    index: SimhashIndex | VerifiedIndex,
    out: IO[bytes],
    *,
    on_progress: Callable[[int], None] | None = None,
    on_skipped: Callable[[str], None] | None = None,
) -> int:
    """Write an index's configuration and every (id, fingerprint[, sketch]) to a binary stream; the
    number of records written.

    Args:
        on_progress: called with the number of records written so far, after each SCAN batch.
        on_skipped: called with the id of each document of a verified index left out for having no
            sketch (an import would refuse it; `SimhashIndex.verify` finds them).

    Raises:
        IndexCorrupted: the index holds a malformed id-map entry, or a verified one malformed sketches.
        RedisUnavailable: the server cannot be reached (the stream lacks its end record then).
    """
    index = index.index if isinstance(index, VerifiedIndex) else index
    packer = msgpack.Packer(use_bin_type=True)
    digest = xxhash.xxh3_64()

    def write(data: bytes) -> None:
        digest.update(data)
        out.write(data)

    docs, fps = index.count()
    meta = _portable(index.config.to_meta())
    header = {"type": DUMP_TYPE, "version": DUMP_VERSION, "name": index.name, "meta": meta}
    write(packer.pack({**header, "documents": docs, "fingerprints": fps}))
    written = 0
    verified = index.config.verification is not None
    for schema, keys in _id_map_keys(index):
        chunk = bytearray()
        buckets = index.store.hashes(keys)
        pairs = [(raw_id, raw_fp) for bucket in buckets for raw_id, raw_fp in bucket]
        sketches: dict[bytes, bytes] = {}
        if verified:
            sketches = _sketches(index, schema, buckets)
            missing = [raw_id for raw_id, _ in pairs if raw_id not in sketches]
            if missing:
                pairs, sketches = _reread(index, schema, pairs, sketches, missing, on_skipped)
        for raw_id, raw_fp in pairs:
            try:
                record = [raw_id.decode(), dump_fp(decode_fp(raw_fp, index.f), index.f)]
            except (ValueError, UnicodeDecodeError):  # another program's entry: verify reports it too
                raise IndexCorrupted(
                    f"index {index.name!r} holds a malformed id-map entry {raw_id!r} -> {raw_fp!r}: "
                    "verify(repair=True) (simhash-redis verify --repair) removes it"
                ) from None
            if verified:
                record.append(sketches[raw_id])
            chunk += packer.pack(record)
            written += 1
        write(bytes(chunk))
        if on_progress is not None:
            on_progress(written)
    out.write(packer.pack({"type": _END_TYPE, "records": written, "xxh3_64": digest.intdigest()}))
    out.flush()
    return written


@dataclass
class ImportResult:
    """What an import did: the index imported into, records read, and their write outcomes."""

    name: str
    records: int = 0
    added: int = 0
    replaced: int = 0
    unchanged: int = 0


def _id_map_keys(index: SimhashIndex) -> Iterator[tuple[KeySchema, list[bytes]]]:
    """The id-map buckets (of every live period) a SCAN page at a time, with their period's key names."""
    if index.windows is None:
        yield from ((index.keys, page) for page in index.store.scan("id"))
        return
    view = index.windows.view()
    for schema in view.schemas:
        yield from ((schema, page) for page in Store(index.store.sender, schema).scan("id"))
    # A document rewritten during the export moves into the current period: periods begun since are read.
    after = index.windows.view()
    for window, schema in zip(after.windows, after.schemas, strict=True):
        if window > view.windows[-1]:
            yield from ((schema, page) for page in Store(index.store.sender, schema).scan("id"))


def _sketches(
    index: SimhashIndex, keys: KeySchema, buckets: list[list[tuple[bytes, bytes]]]
) -> dict[bytes, bytes]:
    """The sketches of the ids in these id-map buckets (of the period `keys` names), in one round trip."""
    fps = list(dict.fromkeys(raw_fp for bucket in buckets for _, raw_fp in bucket))
    replies = index.store.execute([(b"HGET", keys.fp_bucket(fp), keys.sketch_field(fp)) for fp in fps])
    fp_of = {raw_id: raw_fp for bucket in buckets for raw_id, raw_fp in bucket}
    found: dict[bytes, bytes] = {}
    for fp, reply in zip(fps, replies, strict=True):
        if reply is None:
            continue
        try:
            stored = decode_sketches(bytes(reply))
        except (ValueError, UnicodeDecodeError):
            reason = f"index {index.name!r} holds malformed sketches for {fp!r}; run verify(repair=True)"
            raise IndexCorrupted(reason) from None
        for doc_id, sketch in stored.items():
            raw_id = doc_id.encode()
            # Only under the fingerprint the id has (a cluster's interrupted write can leave one elsewhere).
            if fp_of.get(raw_id) == fp:
                found[raw_id] = sketch
    return found


def _reread(
    index: SimhashIndex,
    keys: KeySchema,
    pairs: list[tuple[bytes, bytes]],
    sketches: dict[bytes, bytes],
    missing: list[bytes],
    on_skipped: Callable[[str], None] | None,
) -> tuple[list[tuple[bytes, bytes]], dict[bytes, bytes]]:
    """The pairs and sketches with the ids whose sketch was missing read again: an id rewritten between
    the id-map read and the sketch read has its sketch under its new fingerprint; one removed meanwhile
    is left out, and one still without a sketch (a damaged index) is left out and told to on_skipped."""
    current: dict[bytes, bytes] = {}
    pending = missing
    for _ in range(3):  # a document rewritten again between the reads: read it once more
        replies = index.store.execute([(b"HGET", keys.id_bucket(raw_id), raw_id) for raw_id in pending])
        for raw_id, fp in zip(pending, replies, strict=True):
            if fp is None:
                current.pop(raw_id, None)  # removed meanwhile (perhaps after a rewrite read before)
            else:
                current[raw_id] = bytes(fp)
        live = [(raw_id, current[raw_id]) for raw_id in pending if raw_id in current]
        sketches.update(_sketches(index, keys, [live]))
        pending = [raw_id for raw_id, _ in live if raw_id not in sketches]
        if not pending:
            break
    for raw_id in pending:
        del current[raw_id]
        if on_skipped is not None:
            on_skipped(raw_id.decode())
    wanted = set(missing)
    kept = [
        (raw_id, current[raw_id] if raw_id in wanted else fp)
        for raw_id, fp in pairs
        if raw_id not in wanted or raw_id in current
    ]
    return kept, sketches


def _portable(meta: dict[str, str]) -> dict[str, str]:
    """The configuration as a dump states it, with the dump's own format number: 1 plain, 2 with a
    retention window, 3 verified."""
    return {**meta, "format": "2" if "retention" in meta else "3" if "verified" in meta else "1"}


def _config(meta: dict[str, str], source: str) -> IndexConfig:
    """The configuration a dump's header states, read as this version's (IndexCorrupted: another format;
    InputError: a field missing or unreadable)."""
    stated, ours = meta.get("format"), _portable(meta)["format"]
    if stated != ours:
        raise IndexCorrupted(
            f"the dump states format {stated!r} for its configuration, where this simhash-redis writes "
            f"format {ours}: import it with the simhash-redis that exported it, or upgrade simhash-redis"
        )
    try:
        return IndexConfig.from_meta({**meta, "format": str(FORMAT_VERSION)})
    except IndexCorrupted as exc:  # its words are an index's meta hash's: the dump's header is at fault
        cause = exc if exc.__context__ is None else exc.__context__
        reason = f"malformed dump header: its configuration cannot be read ({cause})"
        raise InputError(source, None, reason) from None


def _header(header: object, source: str) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("type") != DUMP_TYPE:
        raise InputError(source, None, "not a simhash-redis dump (no header record)")
    if header.get("version") != DUMP_VERSION:
        reason = f"dump version {header.get('version')!r} is not supported: this simhash-redis reads version "
        raise InputError(source, None, f"{reason}{DUMP_VERSION} only (export the index again with it)")
    if not isinstance(header.get("meta"), dict) or not isinstance(header.get("name"), str):
        raise InputError(source, None, "malformed dump header")
    return header


def _checked(source: IO[bytes], source_name: str, spool: IO[bytes]) -> tuple[IO[bytes], dict[str, Any]]:
    """Read a whole dump and check every byte before its end record against the checksum that record
    holds; the stream to import from (`spool`, for a pipe), at the dump's start, and the header (InputError:
    gzip data, empty, not a dump, of another version, malformed, truncated, or its checksum differs)."""
    again = isinstance(source, (io.BufferedReader, io.BytesIO)) and source.seekable()
    start = source.tell() if again else 0
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=_MAX_RECORD)
    digest = xxhash.xxh3_64()
    pending = bytearray()  # the bytes read from offset `hashed` on: the last object's, and any after it
    hashed = objects = 0
    header: dict[str, Any] | None = None
    last: object = None
    try:
        while chunk := source.read(_CHUNK):
            if header is None and not pending and chunk.startswith(GZIP_MAGIC):
                raise InputError(source_name, None, "a gzip-compressed dump: gunzip it first")
            if not again:
                spool.write(chunk)
            unpacker.feed(chunk)
            pending += chunk
            begin = unpacker.tell()
            for last in unpacker:
                objects += 1
                if header is None:
                    header = _header(last, source_name)
                # Each object read but the last is no end record: only the end record is out of the sum.
                digest.update(pending[: begin - hashed])
                del pending[: begin - hashed]
                hashed, begin = begin, unpacker.tell()
    # TypeError: a map whose key is a list or a map (msgpack's error for an unhashable key).
    except (ValueError, TypeError, msgpack.UnpackException, *GZIP_ERRORS) as exc:
        if isinstance(exc, SimhashRedisError):
            raise
        raise InputError(source_name, None, f"corrupt dump: nothing imported ({exc})") from None
    if header is None and not pending:
        raise InputError(source_name, None, "empty input: not a simhash-redis dump")
    end = last if isinstance(last, dict) and last.get("type") == _END_TYPE and objects > 1 else None
    if header is None or end is None or unpacker.tell() != hashed + len(pending):
        raise InputError(source_name, None, "truncated dump: no end record (nothing imported)")
    # The end record is out of the sum: its count is checked here, before anything is written.
    if end.get("xxh3_64") != digest.intdigest() or end.get("records") != objects - 2:
        reason = "the dump's checksum does not match its content: damaged or altered (nothing imported)"
        raise InputError(source_name, None, reason)
    stream = source if again else spool
    stream.seek(start)
    return stream, header


def import_index(
    client: redis.Redis | RedisCluster,
    source: IO[bytes],
    *,
    name: str | None = None,
    source_name: str = "<stdin>",
    batch_size: int = 1000,
    on_progress: Callable[[int], None] | None = None,
    merge: bool = False,
    accept: Callable[[IndexConfig], None] | None = None,
) -> ImportResult:
    """Recreate an index from a binary stream written by `export_index`.

    Args:
        name: the index name to import into (default: the name in the dump).
        on_progress: called with the number of records imported so far, after each batch.
        merge: import into an index that already holds documents (else refused): to merge two
            indexes, or to resume an interrupted import of the same dump.
        accept: called with the dump's configuration before anything is written; what it raises
            refuses the dump (a caller's stated configuration that differs, say).

    Raises:
        InvalidArgument: the index already holds documents and merge is false, it is verified (or has a
            retention window) and the dump's is not, or the dump's name is not a valid index name and no
            name is given (nothing is written).
        InputError: the stream is not a dump (gzip data among them), is of another dump version,
            malformed, truncated, or altered (its checksum differs): nothing is written. A bad record in a
            dump whose checksum matches (an empty or too long id, a fingerprint out of range, a missing
            sketch), or an unreadable configuration: the records before it are imported (importing the
            complete stream again finishes the job). An index the import created and left empty is dropped.
        ConfigurationMismatch: the destination index exists with another configuration.
        IndexCorrupted: the dump's configuration cannot be read by this version.
        RedisUnavailable: the server cannot be reached.
    """
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY) as spool:
        stream, header = _checked(source, source_name, spool)
        unpacker = msgpack.Unpacker(stream, raw=False, strict_map_key=False, max_buffer_size=_MAX_RECORD)
        next(unpacker)  # the header, checked already
        config = _config({str(k): str(v) for k, v in header["meta"].items()}, source_name)
        if accept is not None:
            accept(config)
        if name is None:
            try:
                validate_name(header["name"], "the index name the dump states")
            except InvalidArgument as exc:
                raise InvalidArgument(
                    f"{source_name}: {exc}", hint="import it under another name", remedy="another-name"
                ) from None
        target = header["name"] if name is None else name
        existed = SimhashIndex.exists(client, target)
        index = SimhashIndex(
            client,
            target,
            layout=config.layout,
            scheme=config.scheme,
            id_buckets=config.id_buckets,
            batch_size=batch_size,
            verification=config.verification,
            retention=config.retention,
        )
        result = ImportResult(index.name)
        try:
            _check_target(index, config, existed, merge)
            _import_records(index, unpacker, source_name, batch_size, result, on_progress)
        except BaseException:
            # An index the import created is dropped if it is left empty (counted from the data: another
            # writer may have stored documents meanwhile), so that `list_indexes` shows none; the import's
            # own error is the one to report.
            with contextlib.suppress(SimhashRedisError):
                if not existed and result.records == 0 and index.count()[0] == 0:
                    index.drop()
            raise
        return result


def _check_target(index: SimhashIndex, config: IndexConfig, existed: bool, merge: bool) -> None:
    """Refuse an index the dump cannot go into: with a retention window or verified where the dump's is
    not, or holding documents without merge."""
    if index.config.retention is not None and config.retention is None:
        reason = "has a retention window, and this dump is of an index without one: its documents would be "
        reason += "forgotten after the retention"
    elif index.config.verification is not None and config.verification is None:
        reason = "is verified, and this dump is of a plain index: its documents have no sketches to import "
        reason += "with them"
    else:
        reason = ""
    if reason:
        raise InvalidArgument(
            f"index {index.name!r} {reason}", hint="import it under another name", remedy="another-name"
        )
    held = index.count()[0] if existed and not merge else 0
    if held:
        raise InvalidArgument(
            f"index {index.name!r} already holds {held:,} documents, and importing would merge the dump "
            "into them",
            hint="pass merge=True to do that, or to resume an interrupted import of this dump; or import "
            "under another name",
            remedy="merge",
        )


def _import_records(
    index: SimhashIndex,
    unpacker: msgpack.Unpacker,
    source_name: str,
    batch_size: int,
    result: ImportResult,
    on_progress: Callable[[int], None] | None,
) -> None:
    """Write the dump's records a batch at a time, then check its end record."""
    verified = None if index.config.verification is None else VerifiedIndex(index)
    batch: list[tuple[str, int, bytes | None]] = []
    end: dict[str, Any] | None = None

    def flush() -> None:
        if not batch:
            return
        ids, fps, sketches = (list(column) for column in zip(*batch, strict=True))
        outcomes: list[Any]
        if verified is not None:
            outcomes = verified.add_sketched(ids, fps, sketches)
        else:
            outcomes = index.add_many(list(zip(ids, fps, strict=True)))
        added, replaced = outcomes.count(Outcome.ADDED), outcomes.count(Outcome.REPLACED)
        result.added, result.replaced = result.added + added, result.replaced + replaced
        result.unchanged += len(outcomes) - added - replaced
        result.records += len(batch)
        batch.clear()
        if on_progress is not None:
            on_progress(result.records)

    try:
        for record in unpacker:
            if isinstance(record, dict) and record.get("type") == _END_TYPE:
                end = record
                break
            number = result.records + len(batch) + 1
            try:
                batch.append(_record(record, number, index.f, verified, source_name))
            except InputError:
                flush()  # the records before the fault
                raise
            if len(batch) >= batch_size:
                flush()
        flush()
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        if isinstance(exc, SimhashRedisError):
            raise
        flush()
        raise InputError(source_name, None, f"corrupt dump after {result.records} records ({exc})") from None
    if end is None:
        reason = f"truncated dump: no end record after {result.records} records (those are imported)"
        raise InputError(source_name, None, reason)
    if end.get("records") != result.records:
        reason = f"the dump says {end.get('records')} records but holds {result.records}"
        raise InputError(source_name, None, reason)


def _record(
    record: object, number: int, f: int, verified: VerifiedIndex | None, source: str
) -> tuple[str, int, bytes | None]:
    """A dump record checked as the index would (so that a bad one is an InputError naming it, before
    the batch it is in is written): (id, fingerprint, sketch or None)."""
    size = 2 if verified is None else 3
    if not (isinstance(record, list) and len(record) == size and isinstance(record[0], str)):
        raise InputError(source, None, f"record {number} is malformed: {record!r}"[:200])
    try:
        encode_id(record[0])
        fp = undump_fp(record[1], f)
        if not 0 <= fp < 1 << f:
            raise ValueError(f"the fingerprint {fp} is out of the range of {f} bits")
    except ValueError as exc:  # InvalidArgument among them
        raise InputError(source, None, f"record {number}: {exc}"[:200]) from None
    if verified is None:
        return record[0], fp, None
    sketch = record[2]
    sizes = {verified.hasher.query_bytes, verified.hasher.sketch_bytes}
    if sketch is None:
        # A verified index's documents each have a sketch: one stored without is never found by near.
        raise InputError(source, None, f"record {number} ({record[0]!r:.60}) has no sketch"[:200])
    if not isinstance(sketch, bytes) or len(sketch) not in sizes:
        reason = f"record {number}: a sketch of this index is {min(sizes)} bytes, got {sketch!r:.40}"
        raise InputError(source, None, reason)
    return record[0], fp, sketch
