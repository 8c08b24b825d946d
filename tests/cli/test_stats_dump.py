"""simhash_redis.jobs.stats and simhash_redis.jobs.dump against the real server."""

from __future__ import annotations

import gzip
import io
import json
import random
from typing import Any

import msgpack
import pytest
import redis
import xxhash

from simhash_redis import ConfigurationMismatch, IndexCorrupted, InputError, SimhashIndex, VerifiedIndex
from simhash_redis.errors import InvalidArgument
from simhash_redis.jobs.dump import export_index, import_index
from simhash_redis.jobs.stats import collect


def _fill(index: SimhashIndex, n: int = 500) -> None:
    index.add_many([(f"d{i}", (i * 0x9E3779B97F4A7C15) % (1 << index.f)) for i in range(n)])


def test_stats(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "st")
    _fill(index)
    index.add_many([(f"same{i}", 12345) for i in range(5)])
    s = collect(index, sample=50, top=3)
    assert (s.documents, s.fingerprints) == (505, 501)
    assert len(s.tables) == 4 and all(t.keys > 0 for t in s.tables)
    assert sum(s.bucket_sizes.values()) == sum(t.keys for t in s.tables)
    assert len(s.largest) == 3 and s.largest[0].size >= s.largest[-1].size
    assert s.memory.bytes > 0 and not s.memory.exact and s.memory.sampled_keys <= 4 * 50
    assert s.config["k"] == "3"
    json.dumps(s.as_dict())
    exact = collect(index, sample=100_000)
    assert exact.memory.exact


def _dump(index: SimhashIndex) -> bytes:
    out = io.BytesIO()
    export_index(index, out)
    return out.getvalue()


def _records(data: bytes) -> tuple[dict[str, object], list[tuple[str, int]], dict[str, object]]:
    items = list(msgpack.Unpacker(io.BytesIO(data), raw=False))
    return items[0], sorted((i, fp) for i, fp in items[1:-1]), items[-1]


@pytest.mark.parametrize("f", [32, 64, 128])
def test_export_import_round_trip(redis_client: redis.Redis, f: int) -> None:
    source = SimhashIndex(redis_client, "src", f=f, k=2)
    _fill(source)
    data = _dump(source)
    header, records, end = _records(data)
    assert header["name"] == "src" and end == {"type": "end", "records": 500, "xxh3_64": _sum(data)}
    result = import_index(redis_client, io.BytesIO(data), name="dst")
    assert (result.records, result.added) == (500, 500)
    # Again into the now full index: refused unless merging (or resuming), which stores nothing twice.
    with pytest.raises(InvalidArgument, match="merge=True"):
        import_index(redis_client, io.BytesIO(data), name="dst")
    again = import_index(redis_client, io.BytesIO(data), name="dst", merge=True)
    assert (again.added, again.unchanged) == (0, 500)
    copy = SimhashIndex(redis_client, "dst")
    assert copy.config == source.config
    assert _records(_dump(copy))[1] == records
    assert copy.get_many([i for i, _ in records[:20]]) == source.get_many([i for i, _ in records[:20]])


def test_import_refuses_mismatched_index(redis_client: redis.Redis) -> None:
    data = _dump(_fill_and_return(SimhashIndex(redis_client, "src", k=3)))
    SimhashIndex(redis_client, "dst", k=2)
    with pytest.raises(ConfigurationMismatch):
        import_index(redis_client, io.BytesIO(data), name="dst")


def _fill_and_return(index: SimhashIndex) -> SimhashIndex:
    _fill(index, 50)
    return index


def test_import_bad_streams(redis_client: redis.Redis) -> None:
    data = _dump(_fill_and_return(SimhashIndex(redis_client, "src")))
    with pytest.raises(InputError, match=r"truncated dump: no end record \(nothing imported\)"):
        import_index(redis_client, io.BytesIO(data[:-20]), name="t1")
    assert not SimhashIndex.exists(redis_client, "t1")  # read whole before anything is written
    with pytest.raises(InputError, match="not a simhash-redis dump"):
        import_index(redis_client, io.BytesIO(b"hello"), name="t2")
    with pytest.raises(InputError, match="empty"):
        import_index(redis_client, io.BytesIO(b""), name="t2")
    with pytest.raises(InputError, match="record 1"):
        import_index(redis_client, io.BytesIO(_stream(_records(data)[0], [["a", "not-an-int"]])), name="t3")


def _sum(data: bytes) -> int:
    """The checksum of a dump: xxh3-64 of every byte before its end record."""
    unpacker = msgpack.Unpacker(io.BytesIO(data), raw=False)
    start = 0
    for _ in unpacker:
        start, end = unpacker.tell(), start
    return xxhash.xxh3_64_intdigest(data[:end])


def test_a_dump_with_any_byte_altered_is_refused_with_nothing_written(redis_client: redis.Redis) -> None:
    # A byte flipped anywhere (the header, a record, its sketch, the end record) is found before a write;
    # without a checksum 7 of 8 dumps with 5 flipped bits each were imported, altered, with exit 0.
    data = _dump(_verified(redis_client, "ver").index)
    rng = random.Random(5)
    for trial in range(40):
        altered = bytearray(data)
        at = rng.randrange(len(data)) if trial else len(data) - 1  # the first: the checksum's last byte
        altered[at] ^= 1 << rng.randrange(8)
        with pytest.raises(InputError):  # mostly the checksum; a header's type or version, say
            import_index(redis_client, io.BytesIO(bytes(altered)), name=f"alt{trial}")
        assert not SimhashIndex.exists(redis_client, f"alt{trial}"), at
    assert import_index(redis_client, io.BytesIO(data), name="intact").added == 20


def test_a_dump_with_a_map_keyed_by_a_list_is_refused_with_nothing_written(redis_client: redis.Redis) -> None:
    # What a flipped bit can make of a record: msgpack raises TypeError (an unhashable key), which
    # escaped the import as a traceback.
    data = _dump(_fill_and_return(SimhashIndex(redis_client, "src")))
    header, *_ = msgpack.Unpacker(io.BytesIO(data), raw=False)
    odd = msgpack.packb(header) + bytes([0x81, 0x91, 0x01, 0x02]) + data[len(msgpack.packb(header)) :]
    with pytest.raises(InputError, match="corrupt dump"):
        import_index(redis_client, io.BytesIO(odd), name="odd")
    assert not SimhashIndex.exists(redis_client, "odd")


def test_a_dump_of_another_version_or_gzipped_is_refused_saying_why(redis_client: redis.Redis) -> None:
    data = _dump(_fill_and_return(SimhashIndex(redis_client, "src")))
    header, *rest = msgpack.Unpacker(io.BytesIO(data), raw=False)
    old = b"".join(msgpack.packb(item) for item in [{**header, "version": 1}, *rest])
    with pytest.raises(InputError, match=r"dump version 1 is not supported: this simhash-redis reads vers"):
        import_index(redis_client, io.BytesIO(old), name="old")
    with pytest.raises(InputError, match=r"x\.dump\.gz: a gzip-compressed dump: gunzip it first"):
        import_index(redis_client, io.BytesIO(gzip.compress(data)), name="gz", source_name="x.dump.gz")
    assert not SimhashIndex.exists(redis_client, "old") and not SimhashIndex.exists(redis_client, "gz")


def test_a_dump_of_another_format_is_refused_in_a_dumps_words(redis_client: redis.Redis) -> None:
    data = _dump(_fill_and_return(SimhashIndex(redis_client, "newer")))
    header, *rest = _records(data)
    header["meta"]["format"] = "9"
    stream = _stream(header, rest[:-1])
    with pytest.raises(IndexCorrupted, match=r"the dump states format '9' .* writes format 1: import it"):
        import_index(redis_client, io.BytesIO(stream), name="t9")
    assert not SimhashIndex.exists(redis_client, "t9")


def _stream(header: dict[str, object], records: list[object]) -> bytes:
    """A dump of these records, with its end record and checksum."""
    body = b"".join(msgpack.packb(item) for item in [header, *records])
    return body + msgpack.packb(
        {"type": "end", "records": len(records), "xxh3_64": xxhash.xxh3_64_intdigest(body)}
    )


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (["", 7], "id"),
        (["x" * 513, 7], "id"),
        (["neg", -1], "out of the range"),
        (["big", 1 << 32], "out of the range of 32 bits"),
    ],
    ids=["empty-id", "long-id", "negative-fp", "wide-fp"],
)
def test_a_bad_record_is_an_input_error_naming_it_after_the_records_before_it(
    redis_client: redis.Redis, bad: list[object], reason: str
) -> None:
    header = _records(_dump(_fill_and_return(SimhashIndex(redis_client, "src", f=32))))[0]
    good = [[f"d{i}", i + 1] for i in range(1500)]
    stream = _stream(header, [*good, bad, *good[:10]])
    with pytest.raises(InputError, match=f"record 1501: .*{reason}") as caught:
        import_index(redis_client, io.BytesIO(stream), name="dst", source_name="x.dump")
    assert caught.value.source == "x.dump"
    # Every record before the fault is imported, those of the batch it was in too (1,000 a batch).
    assert SimhashIndex(redis_client, "dst").count()[0] == 1500


def test_an_import_whose_first_record_is_bad_leaves_no_index(redis_client: redis.Redis) -> None:
    header = _records(_dump(_fill_and_return(SimhashIndex(redis_client, "src"))))[0]
    with pytest.raises(InputError, match="record 1: "):
        import_index(redis_client, io.BytesIO(_stream(header, [["", 1]])), name="dst")
    assert not SimhashIndex.exists(redis_client, "dst")
    SimhashIndex(redis_client, "kept").add("a", 1)  # an index it did not create stays
    with pytest.raises(InputError, match="record 1: "):
        import_index(redis_client, io.BytesIO(_stream(header, [["", 1]])), name="kept", merge=True)
    assert SimhashIndex(redis_client, "kept").count()[0] == 1


def test_a_dump_naming_an_invalid_index_says_the_name_is_the_dumps(redis_client: redis.Redis) -> None:
    header = _records(_dump(_fill_and_return(SimhashIndex(redis_client, "src"))))[0]
    header["name"] = ""
    with pytest.raises(InvalidArgument, match=r"x\.dump: the index name the dump states .* another name"):
        import_index(redis_client, io.BytesIO(_stream(header, [])), source_name="x.dump")
    assert import_index(redis_client, io.BytesIO(_stream(header, [["a", 1]])), name="named").added == 1


def _verified(redis_client: redis.Redis, name: str) -> VerifiedIndex:
    index = VerifiedIndex.on_client(redis_client, name)
    index.add_many([(f"d{i}", f"document number {i} about things {i * 7}") for i in range(20)])
    return index


def test_a_verified_dumps_record_without_a_sketch_is_refused(redis_client: redis.Redis) -> None:
    items = list(msgpack.Unpacker(io.BytesIO(_dump(_verified(redis_client, "ver").index)), raw=False))
    header, records = items[0], items[1:-1]
    records[5][2] = None
    with pytest.raises(InputError, match=r"record 6 \('d\d+'\) has no sketch"):
        import_index(redis_client, io.BytesIO(_stream(header, records)), name="dst")
    records[5][2] = b"short"
    with pytest.raises(InputError, match="record 6: a sketch of this index is"):
        import_index(redis_client, io.BytesIO(_stream(header, records)), name="dst2")
    assert SimhashIndex(redis_client, "dst").count()[0] == 5  # the records before it


def test_export_reads_again_an_id_rewritten_between_its_reads(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _verified(redis_client, "ver").index
    stale = str(index.get("d3")).encode()
    index_store = index.store
    read = index_store.hashes

    def rewritten(keys: list[bytes], **kwargs: object) -> list[object]:
        # As if d3 were rewritten after its id map was read: the fingerprint read is one it had before.
        buckets = read(keys)
        return [[(i, b"12345" if i == b"d3" else fp) for i, fp in bucket] for bucket in buckets]

    monkeypatch.setattr(index_store, "hashes", rewritten)
    skipped: list[str] = []
    out = io.BytesIO()
    assert export_index(index, out, on_skipped=skipped.append) == 20 and not skipped
    records = {r[0]: r for r in list(msgpack.Unpacker(io.BytesIO(out.getvalue()), raw=False))[1:-1]}
    assert records["d3"][1] == int(stale) and isinstance(records["d3"][2], bytes)


def test_export_leaves_out_an_id_rewritten_then_removed_between_its_reads(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _verified(redis_client, "ver").index
    store = index.store
    read, execute = store.hashes, store.execute
    rereads: list[int] = []

    def stale(keys: list[bytes], **kwargs: object) -> list[object]:
        return [[(i, b"12345" if i == b"d3" else fp) for i, fp in bucket] for bucket in read(keys)]

    def rewritten_then_removed(commands: list[Any], **kwargs: Any) -> list[Any]:
        if commands and commands[0][0] == b"HGET" and commands[0][2] == b"d3":
            rereads.append(1)  # first: a fingerprint whose sketch is not there yet; then: removed
            return [b"67890" if len(rereads) == 1 else None]
        return execute(commands, **kwargs)

    monkeypatch.setattr(store, "hashes", stale)
    monkeypatch.setattr(store, "execute", rewritten_then_removed)
    skipped: list[str] = []
    out = io.BytesIO()
    assert export_index(index, out, on_skipped=skipped.append) == 19 and not skipped
    records = {r[0] for r in list(msgpack.Unpacker(io.BytesIO(out.getvalue()), raw=False))[1:-1]}
    assert "d3" not in records and len(rereads) == 2


def test_export_leaves_out_a_document_without_a_sketch_and_says_so(redis_client: redis.Redis) -> None:
    index = _verified(redis_client, "ver").index
    fp = redis_client.hget(index.keys.id_bucket(b"d3"), b"d3")
    assert isinstance(fp, bytes)
    redis_client.hdel(index.keys.fp_bucket(fp), index.keys.sketch_field(fp))
    skipped: list[str] = []
    out = io.BytesIO()
    assert export_index(index, out, on_skipped=skipped.append) < 20 and "d3" in skipped
    result = import_index(redis_client, io.BytesIO(out.getvalue()), name="dst")
    assert result.added == 20 - len(skipped)


@pytest.mark.parametrize(("field", "value"), [("k", "abc"), ("f", "65")])
def test_a_dump_with_an_unreadable_configuration_is_bad_input(
    redis_client: redis.Redis, field: str, value: str
) -> None:
    header = _records(_dump(_fill_and_return(SimhashIndex(redis_client, "src"))))[0]
    header["meta"][field] = value  # type: ignore[index]
    with pytest.raises(InputError, match=r"^x\.dump: malformed dump header: its configuration cannot"):
        import_index(redis_client, io.BytesIO(_stream(header, [])), name="dst", source_name="x.dump")
    assert not SimhashIndex.exists(redis_client, "dst")
