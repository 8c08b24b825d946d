"""The command line on an index with a retention window: created with --retention, adopted after."""

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
        "--retention", "7d", "load", str(write_jsonl(tmp_path / "a.jsonl", rows)), "--bulk", index="w"
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
    assert invoke("--retention", "12h", "add", "a", article(1), index="w12").exit_code == 0
    other = invoke("--retention", "1d", "near", article(1), index="w12")
    assert other.exit_code == 5 and "retention" in other.stderr and "Traceback" not in other.output
    bad = invoke("--retention", "7x", "add", "a", article(1), index="w7x")
    assert bad.exit_code == 2 and "7d" in bad.stderr and "Traceback" not in bad.output
    # Placed after the command, as the other global options may be.
    after = invoke("add", "b", article(2), "--retention", "12h", index="w12")
    assert after.exit_code == 0, after.output


def test_a_sliding_window_from_the_command_line(invoke: Invoke, redis_client: redis.Redis) -> None:
    made = invoke("--retention", "1d", "--sliding", "add", "a", article(1), index="slide")
    assert made.exit_code == 0, made.output
    assert redis_client.hget(b"simhash:slide:meta", b"retention") == b"86400;period=14400;sliding"
    assert "periods of 4h), sliding" in invoke("stats", index="slide").stdout
    alone = invoke("--sliding", "add", "a", article(1), index="slide2")
    assert alone.exit_code == 2 and "--sliding needs --retention" in alone.stderr
