"""`simhash-redis load` on the bulk path under faults: kill -9 of the loader, and a server out of memory;
of precomputed fingerprints into a plain index, and of texts into a verified one (each document with its
sketch and band values).

Each ends the same way: running the same command again gives, key for key, the index a clean load of the
same file gives (the library-level tests, tests/test_bulk_crash.py and tests/test_bulk.py, stop the load
at every step of a window; these check the CLI's own path end to end).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from simhash_redis import SimhashIndex, VerifiedIndex
from tests.bulk_helpers import assert_nothing_half_visible, assert_same, content
from tests.bulk_helpers import load as bulk_pairs
from tests.servers import ServerProcess
from tests.test_verified_bulk import LEFT, assert_whole, logical
from tests.test_verified_bulk import texts as verified_texts

# Ten windows: a load long enough to be killed, or to run out of memory, after its first windows and
# well before its last; a larger one proves nothing more (verify() and the key-for-key comparisons
# take seconds per 10,000 documents).
TOTAL = 10_000
WINDOW = 1_000
#: A verified load's documents (texts, fingerprinted and sketched by the loader).
TEXTS = 12_000


def _exe() -> str:
    return str(Path(sys.executable).parent / "simhash-redis")


def _file(tmp_path: Path, verified: bool = False) -> Path:
    path = tmp_path / "docs.jsonl"
    if verified:
        rows = [{"id": doc_id, "text": text} for doc_id, text in verified_texts(TEXTS, seed=31)]
    else:
        rows = [{"id": doc_id, "fp": format(fp, "016x")} for doc_id, fp in bulk_pairs(TOTAL, seed=31)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _load(url: str, index: str, path: Path, verified: bool, **popen: object) -> subprocess.Popen[str]:
    command = [_exe(), "--redis-url", url, "--index", index]
    command += (
        ["--verified", "load", str(path)] if verified else ["load", str(path), "--fingerprint-field", "fp"]
    )
    command += ["--bulk", "--window", str(WINDOW), "--workers", "1", "--json", "-q"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)  # type: ignore[call-overload]


def _content(client: redis.Redis, index: str, verified: bool) -> Any:
    if verified:
        return logical(VerifiedIndex(SimhashIndex(client, index, create=False)))
    return content(SimhashIndex(client, index, create=False))


def _nothing_half_visible(client: redis.Redis, index: str, verified: bool) -> None:
    if not verified:
        assert_nothing_half_visible(SimhashIndex(client, index, create=False))
        return
    opened = VerifiedIndex(SimhashIndex(client, index, create=False))
    report = opened.index.verify()
    assert set(report.problems) <= LEFT, report.as_dict()
    assert_whole(opened)


def _finish(url: str, index: str, path: Path, verified: bool) -> dict[str, object]:
    proc = _load(url, index, path, verified)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    summary: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return summary


# The verified load's case: its steps' faults are tested at the library's level (tests/test_bulk_crash.py,
# tests/test_verified_bulk.py) in CI; the whole command under faults takes half a minute, run with -m slow.
@pytest.mark.parametrize("verified", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_kill_9_mid_load_then_the_same_command_converges_to_a_clean_load(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path, verified: bool
) -> None:
    path = _file(tmp_path, verified)
    _finish(redis_url, "clean", path, verified)
    clean = _content(redis_client, "clean", verified)
    for attempt in range(2):
        redis_client.delete(*(redis_client.keys("simhash:killed:*") or [b"none"]))
        proc = _load(redis_url, "killed", path, verified)
        deadline = time.monotonic() + 120
        # Kill once the first windows are in: some of the load is written, most is not.
        while not redis_client.keys("simhash:killed:t0:*")[:1]:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.05 * attempt)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        _nothing_half_visible(redis_client, "killed", verified)
        summary = _finish(redis_url, "killed", path, verified)
        assert summary["bulk"] is True
        assert_same(clean, _content(redis_client, "killed", verified))


# The verified load's case: its steps' faults are tested at the library's level (tests/test_bulk_crash.py,
# tests/test_verified_bulk.py) in CI; the whole command under faults takes half a minute, run with -m slow.
@pytest.mark.parametrize("verified", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_out_of_memory_mid_load_is_reported_and_the_same_command_resumes(
    tmp_path: Path, verified: bool
) -> None:
    path = _file(tmp_path, verified)
    with ServerProcess({"maxmemory-policy": "noeviction"}) as server:
        client = server.client()
        empty = int(client.info("memory")["used_memory"])
        _finish(server.url, "clean", path, verified)
        clean = _content(client, "clean", verified)
        used = int(client.info("memory")["used_memory"])
        # Room for a part of a second copy only (a verified one's first window and more).
        client.config_set("maxmemory", used + ((used - empty) // 2 if verified else 2_000_000))
        proc = _load(server.url, "oom", path, verified)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 4, err
        assert "out of memory" in err and "run the same command again" in err
        assert "Traceback" not in err
        _nothing_half_visible(client, "oom", verified)
        client.config_set("maxmemory", 0)
        summary = _finish(server.url, "oom", path, verified)
        assert summary["bulk"] is True
        assert_same(clean, _content(client, "oom", verified))
