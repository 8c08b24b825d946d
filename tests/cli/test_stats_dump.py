"""simhash_redis.jobs.stats and simhash_redis.jobs.dump against the real server."""

from __future__ import annotations

import io
import json

import msgpack
import pytest
import redis

from simhash_redis import ConfigurationMismatch, IndexCorrupted, InputError, SimhashIndex
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
    assert header["name"] == "src" and end == {"type": "end", "records": 500}
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
    with pytest.raises(InputError, match="truncated"):
        import_index(redis_client, io.BytesIO(data[:-20]), name="t1")
    assert SimhashIndex(redis_client, "t1").count()[0] > 0
    with pytest.raises(InputError, match="not a simhash-redis dump"):
        import_index(redis_client, io.BytesIO(b"hello"), name="t2")
    with pytest.raises(InputError, match="empty"):
        import_index(redis_client, io.BytesIO(b""), name="t2")
    bad = msgpack.packb(_records(data)[0]) + msgpack.packb(["a", "not-an-int"])
    with pytest.raises(InputError, match="record 1"):
        import_index(redis_client, io.BytesIO(bad), name="t3")


def test_a_dump_of_another_format_is_refused_in_a_dumps_words(redis_client: redis.Redis) -> None:
    data = _dump(_fill_and_return(SimhashIndex(redis_client, "newer")))
    header, *rest = _records(data)
    header["meta"]["format"] = "9"
    stream = b"".join(msgpack.packb(record) for record in [header, *rest])
    with pytest.raises(IndexCorrupted, match=r"the dump states format '9' .* writes format 1: import it"):
        import_index(redis_client, io.BytesIO(stream), name="t9")
    assert not SimhashIndex.exists(redis_client, "t9")
