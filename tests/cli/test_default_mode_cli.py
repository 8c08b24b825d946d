"""The mode of an index the command line creates: verified from texts (load, add, dedupe) unless --plain,
plain from precomputed fingerprints; an existing index keeps its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from simhash_redis import SimhashIndex
from tests.cli.conftest import Invoke, article, write_jsonl


def _verified(client: redis.Redis, name: str) -> bool:
    assert client.exists(f"simhash:{name}:meta".encode()), name
    return client.hexists(f"simhash:{name}:meta".encode(), b"verified")


def test_load_add_and_dedupe_create_a_verified_index_from_texts(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    rows = write_jsonl(tmp_path / "a.jsonl", [{"id": f"s{i}", "text": article(i)} for i in range(5)])
    for name, args in (
        ("l", ("load", str(rows))),
        ("a", ("add", "x", article(1))),
        ("d", ("dedupe", str(rows))),
    ):
        made = invoke(*args, index=name)
        assert made.exit_code == 0, made.output
        assert _verified(redis_client, name), name
    # near on the default index prints the estimated Jaccard, a verified index's fourth column.
    [line] = invoke("near", article(1), index="a").stdout.splitlines()
    assert line.split("\t")[0] == "x" and float(line.split("\t")[3]) == 1


def test_plain_is_asked_for_with_plain(invoke: Invoke, redis_client: redis.Redis, tmp_path: Path) -> None:
    rows = write_jsonl(tmp_path / "a.jsonl", [{"id": f"s{i}", "text": article(i)} for i in range(5)])
    for name, args in (
        ("l", ("load", str(rows))),
        ("a", ("add", "x", article(1))),
        ("d", ("dedupe", str(rows))),
    ):
        made = invoke("--plain", *args, index=name)
        assert made.exit_code == 0, made.output
        assert not _verified(redis_client, name), name
    # Given after the command, as the other global options may be.
    assert invoke("add", "x", article(1), "--plain", index="after").exit_code == 0
    assert not _verified(redis_client, "after")


def test_precomputed_fingerprints_make_a_plain_index(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    by_field = write_jsonl(tmp_path / "fp.jsonl", [{"id": "a", "fp": "0x10"}])
    assert invoke("load", "--fingerprint-field", "fp", str(by_field), index="f1").exit_code == 0
    (tmp_path / "c.fp").write_text("b\t0xff\n", encoding="utf-8")
    assert invoke("load", str(tmp_path / "c.fp"), index="f2").exit_code == 0
    assert not _verified(redis_client, "f1") and not _verified(redis_client, "f2")
    # Asked for verified, fingerprints are refused: a sketch needs the text.
    refused = invoke("--verified", "load", "--fingerprint-field", "fp", str(by_field), index="f3")
    assert refused.exit_code != 0 and "text" in refused.stderr and "Traceback" not in refused.output


def test_an_existing_index_keeps_its_mode(invoke: Invoke, redis_client: redis.Redis) -> None:
    assert invoke("--plain", "add", "a", article(1), index="p").exit_code == 0
    assert invoke("add", "b", article(2), index="p").exit_code == 0  # the default: the stored mode
    assert not _verified(redis_client, "p")
    assert invoke("add", "a", article(1), index="v").exit_code == 0
    assert invoke("add", "b", article(2), index="v").exit_code == 0
    for name, asked, stored in (("p", "--verified", "is not verified"), ("v", "--plain", "is verified")):
        refused = invoke(asked, "add", "c", article(3), index=name)
        assert refused.exit_code == 5, refused.output
        [line] = refused.stderr.splitlines()
        assert stored in line and asked in line and "Traceback" not in refused.output


def test_the_refusal_names_the_option_that_asked_for_verified_mode(invoke: Invoke) -> None:
    assert invoke("--plain", "add", "a", article(1), index="p").exit_code == 0
    for options, named in (
        (("--threshold", "0.9"), "--threshold"),
        (("--band-buckets", "64"), "--band-buckets"),
        (("--verified", "--threshold", "0.9"), "--verified and --threshold"),
    ):
        refused = invoke(*options, "add", "b", article(2), index="p")
        assert refused.exit_code == 5, refused.output
        [line] = refused.stderr.splitlines()
        assert f"leave out {named}, or create another index" in line, line


def test_a_creator_that_loses_the_race_to_a_plain_one_adopts_it_unless_it_asked(
    invoke: Invoke, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simhash_redis.cli import common

    real = common.SimhashIndex

    def racing(client: redis.Redis, name: str, **options: object) -> SimhashIndex:
        # Another process creates the index plain between this one's look (nothing) and its create.
        if options.get("verification") is not None and options.get("create", True):
            real(client, name)
        return real(client, name, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(common, "SimhashIndex", racing)
    made = invoke("add", "a", article(1), index="r")
    assert made.exit_code == 0, made.output
    assert not _verified(redis_client, "r") and real(redis_client, "r", create=False).get("a") is not None
    for options, named in ((("--verified",), "--verified"), (("--threshold", "0.9"), "--threshold")):
        redis_client.flushall()
        refused = invoke(*options, "add", "a", article(1), index="r")
        assert refused.exit_code == 5, refused.output
        [line] = refused.stderr.splitlines()
        assert "'r' is not verified" in line and f"leave out {named}," in line, line


def test_verified_and_plain_together_are_a_usage_error(invoke: Invoke, redis_client: redis.Redis) -> None:
    for args in (
        ("--verified", "--plain", "add", "a", "text"),
        ("--plain", "add", "a", "text", "--verified"),
        ("--plain", "--threshold", "0.9", "add", "a", "text"),
    ):
        refused = invoke(*args, index="both")
        assert refused.exit_code == 2, args
        [line] = refused.stderr.splitlines()
        assert line.startswith("error: --plain cannot go with --") and "Traceback" not in refused.output
    assert not redis_client.exists(b"simhash:both:meta")


def test_the_help_says_what_each_mode_costs_and_finds(invoke: Invoke) -> None:
    text = " ".join(invoke("--help").stdout.split())
    assert "--plain" in text and "--verified" in text
    assert "F1 0.983" in text and "0.764" in text and "0.754" in text and "482 bytes" in text
    assert "447 at 10^7" in text and "about 130 bytes" in text
