"""`simhash-redis load` on the bulk path under faults: kill -9 of the loader, and a server out of memory.

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

import redis

from simhash_redis import SimhashIndex
from tests.bulk_helpers import assert_nothing_half_visible, assert_same, content
from tests.bulk_helpers import load as bulk_pairs
from tests.servers import ServerProcess

TOTAL = 30_000
WINDOW = 3_000


def _exe() -> str:
    return str(Path(sys.executable).parent / "simhash-redis")


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "fps.jsonl"
    rows = ({"id": doc_id, "fp": format(fp, "016x")} for doc_id, fp in bulk_pairs(TOTAL, seed=31))
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _load(url: str, index: str, path: Path, **popen: object) -> subprocess.Popen[str]:
    command = [_exe(), "--redis-url", url, "--index", index, "load", str(path), "--fingerprint-field", "fp"]
    command += ["--bulk", "--window", str(WINDOW), "--workers", "1", "--json", "-q"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)  # type: ignore[call-overload]


def _finish(url: str, index: str, path: Path) -> dict[str, object]:
    proc = _load(url, index, path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    summary: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return summary


def test_kill_9_mid_load_then_the_same_command_converges_to_a_clean_load(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = _file(tmp_path)
    _finish(redis_url, "clean", path)
    clean = content(SimhashIndex(redis_client, "clean"))
    for attempt in range(2):
        redis_client.delete(*(redis_client.keys("simhash:killed:*") or [b"none"]))
        proc = _load(redis_url, "killed", path)
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
        index = SimhashIndex(redis_client, "killed", create=False)
        assert_nothing_half_visible(index)
        summary = _finish(redis_url, "killed", path)
        assert summary["bulk"] is True
        assert_same(clean, content(index))


def test_out_of_memory_mid_load_is_reported_and_the_same_command_resumes(tmp_path: Path) -> None:
    path = _file(tmp_path)
    with ServerProcess({"maxmemory-policy": "noeviction"}) as server:
        client = server.client()
        _finish(server.url, "clean", path)
        clean = content(SimhashIndex(client, "clean"))
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used + 2_000_000)  # room for a part of a second copy only
        proc = _load(server.url, "oom", path)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 4, err
        assert "out of memory" in err and "run the same command again" in err
        assert "Traceback" not in err
        index = SimhashIndex(client, "oom", create=False)
        assert_nothing_half_visible(index)
        client.config_set("maxmemory", 0)
        summary = _finish(server.url, "oom", path)
        assert summary["bulk"] is True
        assert_same(clean, content(index))
