"""What a user meets on the command line: one-line errors in the command's own words, the mode an index
was created in, prompts, and tab-separated output a script can split. Against the suite's real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from simhash_redis import InvalidArgument, Retention, SimhashIndex
from tests.cli.conftest import Invoke, article

SCRIPT = Path(sys.executable).with_name("simhash-redis")


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


# -- the engine ---------------------------------------------------------------------------------------


def test_an_unknown_engine_is_one_line_naming_the_valid_values(redis_url: str) -> None:
    env = {**os.environ, "SIMHASH_REDIS_ENGINE": "bogus", "SIMHASH_REDIS_URL": redis_url}
    for args in (["fingerprint", "some text"], ["--index", "eng", "add", "a", "some text"]):
        result = _run(args, env)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith("error: ") and "SIMHASH_REDIS_ENGINE" in result.stderr
        assert "'native'" in result.stderr and "'python'" in result.stderr and "'bogus'" in result.stderr
    assert _run(["--help"], env).returncode == 0  # help needs no engine


def test_the_library_imports_and_names_a_wrong_engine_when_one_is_needed() -> None:
    code = (
        "import simhash_redis\n"
        "try:\n"
        "    simhash_redis.Scheme().fingerprint('some text')\n"
        "except simhash_redis.InvalidArgument as exc:\n"
        "    print('refused:', exc)\n"
    )
    env = {**os.environ, "SIMHASH_REDIS_ENGINE": "bogus"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: ") and "SIMHASH_REDIS_ENGINE" in result.stdout


# -- the mode of an index -----------------------------------------------------------------------------


def test_stats_and_indexes_show_a_verified_index(invoke: Invoke) -> None:
    assert invoke("--verified", "add", "a", article(1), index="ver").exit_code == 0
    assert invoke("add", "a", article(1), index="pla").exit_code == 0
    stats = invoke("stats", index="ver")
    assert stats.exit_code == 0, stats.output
    assert "verified       Jaccard threshold 0.8 (MinHash sketches of 1,024 values" in stats.stdout
    assert "verified       no" in invoke("stats", index="pla").stdout
    listed = invoke("indexes")
    assert listed.stdout.splitlines() == ["pla\t1 documents\tk=3 f=64", "ver\t1 documents\tk=3 f=64 verified"]
    rows = {row["name"]: row for row in map(json.loads, invoke("indexes", "--json").stdout.splitlines())}
    assert rows["ver"]["verified"] is True and rows["pla"]["verified"] is False


# -- retention units ----------------------------------------------------------------------------------


def test_a_retention_without_a_unit_is_refused_with_one_that_has_it(
    invoke: Invoke, redis_client: redis.Redis
) -> None:
    bare = invoke("--retention", "7", "add", "a", article(1), index="bare")
    assert bare.exit_code == 2 and "Traceback" not in bare.output, bare.output
    assert bare.stderr.startswith("error: --retention '7' needs a unit") and "7d" in bare.stderr
    assert not redis_client.exists("simhash:bare:meta")
    assert invoke("--retention", "7d", "add", "a", article(1), index="bare").exit_code == 0
    assert redis_client.hget("simhash:bare:meta", "retention") == b"604800;period=100800"


@pytest.mark.parametrize("given", ["7", " 90 ", "0"])
def test_the_library_refuses_a_string_without_a_unit(given: str) -> None:
    with pytest.raises(InvalidArgument, match="needs a unit"):
        Retention.of(given)


def test_the_library_reads_a_number_as_seconds(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "secs", retention=90)
    assert index.config.retention == Retention.of("90s")
