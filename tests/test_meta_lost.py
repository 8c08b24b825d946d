"""A lost meta key: the index is refused rather than re-created with defaults, and can be restored.

Before, `DEL simhash:<name>:meta` made the next worker's open create a new meta with k = 3 over data
stored with k = 5: stored documents became unfindable, exact copies were admitted, and
`verify --repair` rebuilt towards the wrong layout. Real servers (standalone and a cluster).
"""

from __future__ import annotations

import random

import pytest
import redis
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import ConfigurationMismatch, IndexCorrupted, SimhashIndex, drop_index
from tests.servers import ClusterProcess


def _docs(count: int = 300) -> list[tuple[str, int]]:
    rng = random.Random(17)
    return [(f"d{i}", rng.getrandbits(64)) for i in range(count)]


@pytest.mark.parametrize("path", ["add_many", "bulk_add"])
def test_an_index_without_meta_is_refused_then_restored(redis_client: redis.Redis, path: str) -> None:
    index = SimhashIndex(redis_client, "lost", k=5)
    docs = _docs()
    getattr(index, path)(docs)
    redis_client.delete(index.keys.meta)
    if path == "bulk_add":  # an interrupted bulk load has not written its counts yet: the data is found
        redis_client.delete(index.keys.counts)
    for kwargs in ({}, {"k": 3}, {"k": 5}):
        with pytest.raises(IndexCorrupted, match="no meta key"):
            SimhashIndex(redis_client, "lost", **kwargs)
    assert not redis_client.exists(index.keys.meta)
    with pytest.raises(ConfigurationMismatch, match="does not fit"):
        SimhashIndex.restore(redis_client, "lost", k=3)
    # Under 1024 buckets an id lands in the bucket of the same number as under 131,072 one time in 128:
    # then its fingerprint's bucket is the misfit the sample finds first.
    with pytest.raises(ConfigurationMismatch, match=r"id bucket|fingerprint-map entry"):
        SimhashIndex.restore(redis_client, "lost", k=5, id_buckets=1024)
    assert not redis_client.exists(index.keys.meta)
    restored = SimhashIndex.restore(redis_client, "lost", k=5)
    assert restored.k == 5
    assert restored.get_many([doc_id for doc_id, _ in docs]) == [fp for _, fp in docs]
    assert all(restored.near_many([fp for _, fp in docs[:20]], k=0))
    assert restored.add_if_new("copy", docs[0][1]) is not None  # an exact copy is not admitted


def test_a_new_index_beside_other_data_is_created(redis_client: redis.Redis) -> None:
    redis_client.set("simhash:other:counts", "x")
    redis_client.set("simhash:news2", "a key that merely starts with the name")
    index = SimhashIndex(redis_client, "news", k=4)
    assert index.k == 4


def test_a_writers_lock_or_reply_record_alone_is_no_data(redis_client: redis.Redis) -> None:
    # What a writer leaves for a while (a cluster's bucket lock, a write call's reply record, each with
    # its expiry) is not the index's data: an index dropped meanwhile is created anew, not refused.
    redis_client.set("simhash:left:lock:t0:0123", "token", px=30_000)
    redis_client.hset("simhash:left:reply:0123456789abcdef:0.0", "r", "1:a")
    assert SimhashIndex(redis_client, "left", k=4).k == 4


def test_an_index_another_worker_creates_meanwhile_is_opened(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This worker reads no meta; before it looks for data, another creates the index and writes to it.
    # The data it then finds is that index's, not a lost meta's: it opens the index (seen in CI with
    # workers starting at once behind a proxy that drops replies).
    from simhash_redis.store import meta

    original = meta.find_data

    def raced(*args: object) -> bytes | None:
        monkeypatch.setattr(meta, "find_data", original)  # the other worker runs the real one
        SimhashIndex(redis_client, "raced", k=3).add("d1", 0xF00D)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(meta, "find_data", raced)
    index = SimhashIndex(redis_client, "raced", k=3)
    assert index.get("d1") == 0xF00D


def test_the_cli_says_how_to_restore_and_drop_works_without_meta(
    redis_url: str, redis_client: redis.Redis
) -> None:
    index = SimhashIndex(redis_client, "cli-lost", k=5)
    index.add_many(_docs(50))
    redis_client.delete(index.keys.meta)
    run = CliRunner()
    added = run.invoke(app, ["--redis-url", redis_url, "--index", "cli-lost", "add", "x", "some text"])
    assert added.exit_code != 0 and "restore-meta" in added.output and "Traceback" not in added.output
    usage = run.invoke(app, ["--redis-url", redis_url, "--index", "cli-lost", "restore-meta"])
    assert usage.exit_code == 2, usage.output
    wrong = run.invoke(app, ["--redis-url", redis_url, "--index", "cli-lost", "--k", "3", "restore-meta"])
    assert wrong.exit_code == 5, wrong.output
    restored = run.invoke(app, ["--redis-url", redis_url, "--index", "cli-lost", "--k", "5", "restore-meta"])
    assert restored.exit_code == 0, restored.output
    assert SimhashIndex(redis_client, "cli-lost").count()[0] == 50
    # A meta that is not a hash at all: drop still deletes the index.
    redis_client.delete(index.keys.meta)
    redis_client.set(index.keys.meta, "not a hash")
    with pytest.raises(IndexCorrupted):
        SimhashIndex(redis_client, "cli-lost")
    dropped = run.invoke(app, ["--redis-url", redis_url, "--index", "cli-lost", "drop", "--yes"])
    assert dropped.exit_code == 0, dropped.output
    assert redis_client.keys("simhash:cli-lost:*") == []


def test_drop_index_deletes_every_key_whatever_the_meta(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "gone", k=3)
    index.add_many(_docs(20))
    redis_client.delete(index.keys.meta)
    assert drop_index(redis_client, "gone") > 0
    assert redis_client.keys("simhash:gone:*") == []


def test_on_a_cluster_too(redis_cluster: ClusterProcess) -> None:
    client = redis_cluster.client()
    index = SimhashIndex(client, "lost-c", k=5)
    docs = _docs(100)
    index.add_many(docs)
    client.delete(index.keys.meta)
    with pytest.raises(IndexCorrupted, match="no meta key"):
        SimhashIndex(client, "lost-c")
    restored = SimhashIndex.restore(client, "lost-c", k=5)
    assert restored.get_many([doc_id for doc_id, _ in docs]) == [fp for _, fp in docs]
    restored.drop()
