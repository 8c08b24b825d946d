"""verify() finds every kind of inconsistency and repair() restores an index equal to a clean one."""

from __future__ import annotations

import pytest
import redis

from simhash_redis import IndexCorrupted, Match, SimhashIndex
from simhash_redis.codec import encode_fp, encode_ids

A = 0x0123456789ABCDEF


def snapshot(index: SimhashIndex) -> dict[bytes, object]:
    client = index.client
    out: dict[bytes, object] = {}
    for key in client.scan_iter(match=f"{index.keys.base}:*"):
        kind = client.type(key)
        out[key] = client.hgetall(key) if kind == b"hash" else client.smembers(key)
    return out


def test_clean_index_verifies(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "v")
    index.add_many([("a", A), ("b", A), ("c", 5), ("d", 2**64 - 1)])
    report = index.verify()
    assert report.ok, report.examples
    assert (report.docs, report.fingerprints) == (4, 3)


def test_every_inconsistency_is_found_and_repaired(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "v")
    index.add_many([("a", A), ("b", A), ("c", 5), ("e", 77)])
    clean = snapshot(index)
    keys = index.keys
    fp_a, fp_c, fp_e = encode_fp(A, 64), encode_fp(5, 64), encode_fp(77, 64)
    # a half-written document: id recorded, fingerprint map and one table missing
    any_client.hdel(keys.fp_bucket(fp_c), fp_c)
    any_client.srem(keys.tables(5)[2], fp_c)
    # a stale id in a fingerprint map entry, and an orphan table member of an uncommitted write
    any_client.hset(keys.fp_bucket(fp_a), fp_a, encode_ids(["a", "b", "ghost"]))
    orphan = encode_fp(999, 64)
    any_client.sadd(keys.tables(999)[0], orphan)
    # a member in the wrong bucket, and counts that drifted
    any_client.sadd(keys.table(1, 0x1234), fp_e)
    any_client.hincrby(keys.counts, "docs", 5)

    report = index.verify()
    assert not report.ok
    assert set(report.problems) == {
        "id missing from fingerprint map",
        "fingerprint missing from table",
        "stale id in fingerprint map",
        "orphan table member",
        "misplaced table member",
        "counts differ from data",
    }
    assert index.verify(repair=True).repaired
    assert index.verify().ok
    assert snapshot(index) == clean
    assert index.near(5, k=0) == [Match("c", 5, 0)]


def test_repair_restores_every_missing_id_of_one_fingerprint(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "v")
    index.add_many([("a", 5), ("b", 5), ("c", 5)])
    stored = encode_fp(5, 64)
    any_client.hdel(index.keys.fp_bucket(stored), stored)
    assert index.verify().problems["id missing from fingerprint map"] == 3
    index.verify(repair=True)
    assert index.verify().ok
    assert [m.id for m in index.near(5)] == ["a", "b", "c"]


def test_malformed_entries_are_reported_not_raised(any_client: redis.Redis) -> None:
    index = SimhashIndex(any_client, "v")
    index.add_many([("a", 5), ("b", 7)])
    stored = encode_fp(5, 64)
    any_client.hset(index.keys.fp_bucket(stored), stored, b"zz:garbage")
    any_client.sadd(index.keys.tables(7)[0], b"not-a-number")
    report = index.verify()
    assert report.problems["malformed fingerprint-map entry"] >= 1
    assert report.problems["malformed table member"] == 1
    index.verify(repair=True)
    assert index.verify().ok
    assert [m.id for m in index.near(5, k=0)] == ["a"]


@pytest.mark.parametrize("neighbours", [0, 100])  # the one-by-one and the vectorised candidate paths
def test_near_on_malformed_data_is_a_typed_error(any_client: redis.Redis, neighbours: int) -> None:
    index = SimhashIndex(any_client, "v")
    index.add_many([(f"n{i}", (5 << 16) | i) for i in range(neighbours)] + [("a", 5)])
    any_client.sadd(index.keys.tables(5)[0], b"not-a-number")
    with pytest.raises(IndexCorrupted, match="verify"):
        index.near(5)
    index.verify(repair=True)
    assert index.near(5, k=0)[0].id == "a"


def test_the_cli_says_to_delete_a_key_of_the_wrong_type_instead_of_repairing_in_a_loop(
    redis_url: str, redis_client: redis.Redis
) -> None:
    from simhash_redis.cli.app import app
    from typer.testing import CliRunner

    index = SimhashIndex(redis_client, "wrongtype", k=3)
    index.add_many([("a", 1), ("b", 2)])
    key = index.keys.tables(2)[1]
    redis_client.delete(key)
    redis_client.set(key, "another program's string")
    run = CliRunner()
    for args in (["verify"], ["verify", "--repair"]):
        result = run.invoke(app, ["--redis-url", redis_url, "--index", "wrongtype", *args])
        assert result.exit_code == 1, result.output
        assert "key of the wrong type: 1" in result.output
        assert "delete the keys of the wrong type" in result.output and "Traceback" not in result.output
        assert "run again" not in result.output
    redis_client.delete(key)
    result = run.invoke(app, ["--redis-url", redis_url, "--index", "wrongtype", "verify", "--repair"])
    assert result.exit_code == 0, result.output
    assert index.verify().ok
