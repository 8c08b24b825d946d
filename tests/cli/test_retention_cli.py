"""The command line on an index with a retention window: created with --plain --retention (a verified
index cannot have one yet), adopted after."""

from __future__ import annotations

import json
from pathlib import Path

import redis

from simhash_redis import SimhashIndex
from tests.cli.conftest import Invoke, article, write_jsonl


def test_a_windowed_index_from_the_command_line(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    rows = [{"id": f"s{i}", "text": article(i)} for i in range(300)]
    loaded = invoke(
        "--plain",
        "--retention",
        "7d",
        "load",
        str(write_jsonl(tmp_path / "a.jsonl", rows)),
        "--bulk",
        index="w",
    )
    assert loaded.exit_code == 0, loaded.output
    assert redis_client.hget(b"simhash:w:meta", b"retention") == b"604800;period=100800"
    # Later commands adopt it, and find what the load wrote into the current period.
    found = invoke("near", article(7, copy=1), index="w")
    assert found.exit_code == 0 and found.stdout.split("\t")[0] == "s7", found.output
    stats = invoke("stats", index="w")
    assert "retention      1w (periods of 28h)" in stats.stdout
    assert "period         from " in stats.stdout and "300 documents" in stats.stdout
    data = json.loads(invoke("stats", "--json", index="w").stdout)
    assert [p["documents"] for p in data["periods"]] == [300]
    assert invoke("verify", index="w").exit_code == 0
    assert SimhashIndex(redis_client, "w").count() == (300, 300)


def test_a_retention_that_differs_or_is_malformed_is_refused(invoke: Invoke) -> None:
    assert invoke("--plain", "--retention", "12h", "add", "a", article(1), index="w12").exit_code == 0
    other = invoke("--retention", "1d", "near", article(1), index="w12")
    assert other.exit_code == 5 and "retention" in other.stderr and "Traceback" not in other.output
    bad = invoke("--plain", "--retention", "7x", "add", "a", article(1), index="w7x")
    assert bad.exit_code == 2 and "7d" in bad.stderr and "Traceback" not in bad.output
    # Placed after the command, as the other global options may be.
    after = invoke("add", "b", article(2), "--retention", "12h", index="w12")
    assert after.exit_code == 0, after.output


def test_a_sliding_window_from_the_command_line(invoke: Invoke, redis_client: redis.Redis) -> None:
    made = invoke("add", "a", article(1), "--retention", "1d", "--sliding", "--plain", index="slide")
    assert made.exit_code == 0, made.output
    assert redis_client.hget(b"simhash:slide:meta", b"retention") == b"86400;period=14400;sliding"
    assert "periods of 4h), sliding" in invoke("stats", index="slide").stdout
    alone = invoke("--sliding", "add", "a", article(1), index="slide2")
    assert alone.exit_code == 2 and "--sliding needs --retention" in alone.stderr


def test_a_retention_on_a_new_index_is_verified_by_default(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A retention window takes the default mode like any new index made from texts: verified, or plain
    with --plain; an existing windowed index is opened in its own mode, with or without the option."""
    rows = write_jsonl(tmp_path / "a.jsonl", [{"id": "a", "text": article(1)}])
    for name, args in (
        ("ra", ("add", "a", article(1))),
        ("rl", ("load", str(rows))),
        ("rd", ("dedupe", str(rows))),
    ):
        made = invoke("--retention", "7d", *args, index=name)
        assert made.exit_code == 0, made.output
        meta = redis_client.hgetall(f"simhash:{name}:meta".encode())
        assert b"verified" in meta and meta[b"retention"].startswith(b"604800"), meta
    assert invoke("--plain", "--retention", "7d", "add", "a", article(1), index="rp").exit_code == 0
    assert b"verified" not in redis_client.hgetall(b"simhash:rp:meta")
    assert invoke("--retention", "7d", "add", "b", article(2), index="rp").exit_code == 0


def test_a_verified_windowed_index_from_the_command_line(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    rows = [{"id": f"s{i}", "text": article(i)} for i in range(200)]
    loaded = invoke(
        "--verified", "--retention", "7d", "load", str(write_jsonl(tmp_path / "a.jsonl", rows)), index="vw"
    )
    assert loaded.exit_code == 0, loaded.output
    meta = redis_client.hgetall(b"simhash:vw:meta")
    assert meta[b"retention"] == b"604800;period=100800" and b"verified" in meta
    # Every document's sketch and band values are in the current period, expiring with it.
    band_keys = list(redis_client.scan_iter(b"simhash:vw:w*:b*"))
    assert band_keys and all(redis_client.pttl(key) > 0 for key in band_keys)
    assert not list(redis_client.scan_iter(b"simhash:vw:b*"))
    found = invoke("near", article(7, copy=1), index="vw")
    assert found.exit_code == 0 and found.stdout.split("\t")[0] == "s7", found.output
    stats = invoke("stats", index="vw")
    assert "retention      1w (periods of 28h)" in stats.stdout and "200 documents" in stats.stdout
    copies = [{"id": f"c{i}", "text": article(i, copy=2)} for i in range(20)]
    dry = invoke("dedupe", "--dry-run", str(write_jsonl(tmp_path / "b.jsonl", copies)), index="vw")
    assert dry.exit_code == 0 and len(dry.stdout.splitlines()) == 20, dry.output
    assert SimhashIndex(redis_client, "vw").count() == (200, 200)  # a dry run stores nothing
    deduped = invoke("dedupe", str(tmp_path / "b.jsonl"), index="vw")
    assert deduped.exit_code == 0, deduped.output
    assert sorted(line.split("\t")[:2] for line in deduped.stdout.splitlines()) == sorted(
        [f"c{i}", f"s{i}"] for i in range(20)
    )
    assert invoke("verify", index="vw").exit_code == 0
    assert SimhashIndex(redis_client, "vw").count() == (200, 200)
