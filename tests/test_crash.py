"""Crash: kill -9 of the server in the middle of a bulk load, restart, load again.

The server runs with ``appendonly yes`` and ``appendfsync always``, so a write is on disk before the
client hears about it. A loader subprocess prints the last id of each batch the server acknowledged;
after a SIGKILL and a restart every acknowledged document must be there, no batch may be half there
(one batch is one script, atomic), verify() must find nothing, the counts must match the data, and
running the same load again must complete it without doubling anything. The CLI's `verify` and
`verify --repair` are exercised on the recovered index and on one damaged by hand.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import typer
from typer.testing import CliRunner

from simhash_redis import SimhashIndex
from tests.servers import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
NAME = "crash"
TOTAL = 6000
BATCH = 50

LOADER = textwrap.dedent(
    """
    import sys
    import redis
    from simhash_redis import SimhashIndex
    from simhash_redis.transport import Backoff
    from tests.test_crash import BATCH, NAME, documents
    url, start = sys.argv[1], int(sys.argv[2])
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    index = SimhashIndex(client, NAME, k=3, id_buckets=256, batch_size=BATCH,
                         backoff=Backoff(retries=2, base=0.01, cap=0.05))
    docs = documents()
    for first in range(start, len(docs), BATCH):
        batch = docs[first:first + BATCH]
        index.add_many(batch)
        print(batch[-1][0], flush=True)  # acknowledged: the whole batch is stored (and fsynced)
    print("complete", flush=True)
    """
)


def documents(total: int = TOTAL) -> list[tuple[str, int]]:
    """The load: ids d0..d{total-1}; every 10th id shares the fingerprint of the one before it."""
    rng = random.Random(99)
    fps = [rng.getrandbits(64) for _ in range(total)]
    for i in range(10, total, 10):
        fps[i] = fps[i - 1]
    return [(f"d{i}", fp) for i, fp in enumerate(fps)]


def start_loader(url: str, start: int = 0) -> subprocess.Popen[str]:
    """The loader subprocess, loading documents()[start:]."""
    return subprocess.Popen(
        [sys.executable, "-c", LOADER, url, str(start)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def acknowledged_after_kill(server: ServerProcess, loader: subprocess.Popen[str], batches: int) -> int:
    """Wait for `batches` acknowledgements, SIGKILL the server, and return how many documents the loader
    saw acknowledged in all (it fails once the server is gone)."""
    assert loader.stdout is not None
    acked = 0
    deadline = time.monotonic() + 60
    while acked < batches * BATCH:
        line = loader.stdout.readline()
        assert line, f"the loader ended early: {loader.stderr.read() if loader.stderr else ''}"
        assert line.strip() != "complete", "the load finished before the crash; raise TOTAL"
        acked = int(line.strip()[1:]) + 1
        assert time.monotonic() < deadline, "the loader is too slow"
    server.kill9()
    out, err = loader.communicate(timeout=60)
    for line in out.splitlines():  # acknowledgements that were in the pipe when the server died
        assert line != "complete", "the load finished before the crash; raise TOTAL"
        acked = int(line[1:]) + 1
    assert loader.returncode != 0, "the loader did not notice the crash"
    assert "RedisUnavailable" in err or "RedisTimeout" in err, err[-2000:]
    return acked


def check_recovered(client: redis.Redis, acked: int) -> int:
    """Every acknowledged document is stored, every batch is all there or not at all, nothing is
    half-written or counted twice. Returns how many documents are stored."""
    docs = documents()
    index = SimhashIndex(client, NAME)
    stored = index.get_many([doc_id for doc_id, _ in docs])
    for (doc_id, fp), got in zip(docs, stored, strict=True):
        assert got is None or got == fp, doc_id
    present = [got is not None for got in stored]
    assert all(present[:acked]), f"acknowledged documents lost: {present[:acked].count(False)}"
    for first in range(0, TOTAL, BATCH):
        batch = present[first : first + BATCH]
        assert all(batch) or not any(batch), f"batch at {first} is partly stored"
    report = index.verify()
    assert report.ok, report.as_dict()
    n = sum(present)
    assert index.count() == (n, len({fp for (_, fp), p in zip(docs, present, strict=True) if p}))
    return n


@pytest.fixture
def durable() -> Iterator[ServerProcess]:
    """A private server that fsyncs its append-only file before every reply."""
    with ServerProcess({"appendonly": "yes", "appendfsync": "always"}) as server:
        yield server


def test_kill9_mid_load_loses_no_acknowledged_document(durable: ServerProcess) -> None:
    for crash, batches in enumerate((4, 20)):
        # The second load starts from zero again: a resumed load need not know where the last one got to.
        loader = start_loader(durable.url)
        acked = acknowledged_after_kill(durable, loader, batches)
        durable.restart()
        with durable.client() as client:
            stored = check_recovered(client, acked)
        assert stored >= acked, (crash, stored, acked)
    loader = start_loader(durable.url)
    out, err = loader.communicate(timeout=120)
    assert loader.returncode == 0 and out.splitlines()[-1] == "complete", err[-2000:]
    with durable.client() as client:
        assert check_recovered(client, TOTAL) == TOTAL
        assert run_cli(durable.url, "verify").exit_code == 0


# -- the CLI's verify ------------------------------------------------------------------------------------


def cli_app() -> typer.Typer:
    """The real CLI if it has `verify` registered, else the real CLI's root with cli/verify.py added."""
    from simhash_redis.cli import app as app_module
    from simhash_redis.cli import verify as verify_module

    names = {c.name for c in app_module.app.registered_commands}
    if "verify" in names:
        return app_module.app
    app = typer.Typer(cls=app_module._Group, name="simhash-redis", rich_markup_mode=None)
    app.callback()(app_module._root)
    verify_module.register(app)
    return app


def run_cli(url: str, *args: str) -> typer.testing.Result:
    """Run `simhash-redis --redis-url URL --index crash ARGS` in-process."""
    return CliRunner().invoke(cli_app(), ["--redis-url", url, "--index", NAME, *args])


def test_cli_verify_and_repair(durable: ServerProcess) -> None:
    with durable.client() as client:
        index = SimhashIndex(client, NAME, k=3, id_buckets=16)
        index.add_many(documents(300))
        ok = run_cli(durable.url, "verify", "--json")
        assert ok.exit_code == 0, ok.output
        report = json.loads(ok.stdout)
        assert {k: report[k] for k in ("ok", "docs", "fingerprints", "problems", "repaired")} == {
            "ok": True,
            "docs": 300,
            "fingerprints": 271,
            "problems": {},
            "repaired": False,
        }
        # Damage from outside: a table member removed by hand, and a count changed.
        fp_raw = client.hget(index.keys.id_bucket(b"d7"), b"d7")
        assert fp_raw is not None
        client.srem(index.keys.tables(index.get("d7") or 0)[0], fp_raw)
        client.hincrby(index.keys.counts, "docs", 5)
        bad = run_cli(durable.url, "verify")
        assert bad.exit_code == 1
        assert "fingerprint missing from table: 1" in bad.stdout
        assert "counts differ from data: 1" in bad.stdout
        assert "verify --repair" in bad.output
        fixed = run_cli(durable.url, "verify", "--repair", "--json")
        assert fixed.exit_code == 0, fixed.output
        assert json.loads(fixed.stdout)["ok_after_repair"] is True
        assert run_cli(durable.url, "verify").exit_code == 0
        assert [m.id for m in index.near(index.get("d7") or 0, k=0)] == ["d7"]
        assert index.count() == (300, 271)


def test_cli_verify_of_a_missing_index(durable: ServerProcess) -> None:
    result = run_cli(durable.url, "verify")
    assert result.exit_code == 1
    assert "no index named 'crash'" in result.output
