"""A 100k-document load, and a load killed with SIGKILL midway and resumed, equal to a clean load."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import redis
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import Scheme, SimhashIndex
from tests.cli.conftest import article

SCRIPT = Path(sys.executable).with_name("simhash-redis")


def _write_articles(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"story-{i}", "text": article(i)}) + "\n")
    return path


def test_load_100k(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    """A plain index, whose loads of this size take the bulk path."""
    path = _write_articles(tmp_path / "100k.jsonl", 100_000)
    result = CliRunner().invoke(
        app, ["--redis-url", redis_url, "--index", "big", "--plain", "load", "--json", str(path)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    print(f"100k load: {summary['docs_per_s']:,.0f} docs/s in {summary['elapsed']} s")  # shown with -s
    assert (summary["added"], summary["errors"], summary["written"]) == (100_000, 0, 100_000)
    index = SimhashIndex(redis_client, "big")
    assert index.count()[0] == 100_000
    sample = list(range(0, 100_000, 997))
    assert index.get_many([f"story-{i}" for i in sample]) == Scheme().fingerprint_many(
        [article(i) for i in sample]
    )


def _dump(url: str, index: str) -> tuple[int, list[tuple[Any, ...]]]:
    """The documents of an export, and its records: (id, fingerprint), and a verified index's sketch."""
    result = CliRunner().invoke(app, ["--redis-url", url, "--index", index, "export", "-q"])
    assert result.exit_code == 0, result.output
    records = list(msgpack.Unpacker(io.BytesIO(result.stdout_bytes), raw=False))
    return int(records[0]["documents"]), sorted(tuple(record) for record in records[1:-1])


def test_kill_9_midway_then_resume_equals_clean_load(redis_url: str, tmp_path: Path) -> None:
    """On the default, a verified index: the documents left after the kill (8,000) take about as long to
    load as a plain index's 16,000 of 20,000 did, so the kill still comes midway."""
    n = 10_000
    path = _write_articles(tmp_path / "k.jsonl", n)
    with path.open("a", encoding="utf-8") as fh:
        fh.write("a bad line\n")  # reported on every run, never stored
    env = {**os.environ, "SIMHASH_REDIS_URL": redis_url}
    args = [
        str(SCRIPT),
        "--index",
        "killed",
        "load",
        "--batch-size",
        "500",
        "--progress-every",
        "0",
        str(path),
    ]
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    acknowledged = 0
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.match(r"progress: ([\d,]+)", line)
        if found:
            acknowledged = int(found.group(1).replace(",", ""))
            if acknowledged >= 2000:
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "the load ended before it could be killed"
    partial, _ = _dump(redis_url, "killed")
    assert acknowledged <= partial < n
    resumed = subprocess.run(
        [*args, "--json"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["added"] == n - partial and summary["unchanged"] == partial and summary["errors"] == 1
    clean = CliRunner().invoke(app, ["--redis-url", redis_url, "--index", "clean", "load", "-q", str(path)])
    assert clean.exit_code == 0
    assert _dump(redis_url, "killed") == _dump(redis_url, "clean")
