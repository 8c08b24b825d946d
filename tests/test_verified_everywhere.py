"""A verified index where the other tests of verified mode do not go: export and import across a cluster
and a standalone server, verify and repair on a cluster, asyncio on pages of one template (with a retention
window: test_retention_verified.py)."""

from __future__ import annotations

import asyncio
import io

import redis
from redis.cluster import RedisCluster

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.asyncio import AsyncVerifiedIndex
from simhash_redis.codec import encode_fp, encode_sketches
from simhash_redis.jobs.dump import export_index, import_index
from tests.servers import ServerProcess
from tests.test_verified_one_writer import one_word_edit, page, templated


def _copy(source: VerifiedIndex, client: redis.Redis | RedisCluster, name: str) -> VerifiedIndex:
    dump = io.BytesIO()
    export_index(source.index, dump)
    dump.seek(0)
    imported = import_index(client, dump, name=name)
    assert imported.added == len(source.index)
    return VerifiedIndex(SimhashIndex(client, name))


def test_export_and_import_between_a_cluster_and_a_server(
    redis_client: redis.Redis, redis_cluster_client: RedisCluster
) -> None:
    on_cluster = VerifiedIndex(SimhashIndex(redis_cluster_client, "vx", id_buckets=1024))
    docs = [(f"p{i}", page(i)) for i in range(30)]
    on_cluster.add_many(docs)
    on_server = _copy(on_cluster, redis_client, "vx")
    back = _copy(on_server, redis_cluster_client, "vx2")
    for copy in (on_server, back):
        assert copy.verification == on_cluster.verification
        assert all(copy.sketch_of(doc_id) == on_cluster.sketch_of(doc_id) is not None for doc_id, _ in docs)
        assert [m.id for m in copy.near(one_word_edit(page(7), 1))] == ["p7"]
        assert copy.index.verify().ok


def test_verify_and_repair_on_a_cluster(redis_cluster_client: RedisCluster) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_cluster_client, "vr", id_buckets=1024))
    verified.add_many([(f"p{i}", page(i)) for i in range(10)])
    assert verified.index.verify().ok
    # A sketch whose document is gone, and a document whose sketch is gone.
    keys, client = verified.index.keys, redis_cluster_client
    for doc_id, extra in (("p2", b"ghost"), ("p1", None)):
        fp = encode_fp(verified.index.get(doc_id) or 0, 64)
        sketch = verified.sketch_of(doc_id)
        assert sketch is not None
        pairs = [(doc_id.encode(), sketch)] if extra is not None else []
        if extra is not None:
            pairs.append((extra, sketch))
        client.hset(keys.fp_bucket(fp), keys.sketch_field(fp), encode_sketches(pairs))
    report = verified.index.verify(repair=True)
    assert report.problems == {"sketch without a document": 1, "documents without a sketch": 1}
    assert verified.sketch_of("ghost") is None and verified.sketch_of("p2") is not None
    assert not verified.index.verify().problems.get("sketch without a document")


def test_asyncio_pages_of_one_template(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    docs = templated(300, 30)

    async def main() -> None:
        async with await AsyncVerifiedIndex.from_url(redis_server.url, "man") as index:
            found = await index.add_if_new_many(docs)
            for (doc_id, _), match in zip(docs, found, strict=True):
                if doc_id.startswith("e"):
                    assert match is not None and match.id == "p" + doc_id[1:]

    asyncio.run(main())
