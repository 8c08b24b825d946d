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


def test_a_retention_without_plain_is_refused_saying_to_pass_plain(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A new index is verified by default, which cannot have a retention window yet: the refusal says how
    to get one (a usage error, one line, nothing created), for every command that creates an index."""
    rows = write_jsonl(tmp_path / "a.jsonl", [{"id": "a", "text": article(1)}])
    for args in (("add", "a", article(1)), ("load", str(rows)), ("dedupe", str(rows))):
        refused = invoke("--retention", "7d", *args, index="r")
        assert refused.exit_code == 2, refused.output
        [line] = refused.stderr.splitlines()
        assert "cannot have a retention window" in line and "pass --plain" in line, line
        assert not redis_client.exists(b"simhash:r:meta")
    refused = invoke("--verified", "--retention", "7d", "add", "a", article(1), index="r")
    assert refused.exit_code == 2 and "pass --plain" in refused.stderr
    # An existing plain index with a window is opened as it is, --plain or not.
    assert invoke("--plain", "--retention", "7d", "add", "a", article(1), index="r").exit_code == 0
    assert invoke("--retention", "7d", "add", "b", article(2), index="r").exit_code == 0
