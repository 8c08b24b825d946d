"""The installed console script, and a non-editable `pip install .` into a fresh virtual environment."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import simhash_redis

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("simhash-redis")


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, **kwargs)  # type: ignore[call-overload, no-any-return]


def test_console_script(redis_url: str, tmp_path: Path) -> None:
    assert SCRIPT.exists(), f"{SCRIPT} is missing: install the project first (pip install -e .)"
    helped = _run([str(SCRIPT), "--help"])
    assert helped.returncode == 0 and "Exit codes" in helped.stdout
    env = {**os.environ, "SIMHASH_REDIS_URL": redis_url}
    added = _run(
        [str(SCRIPT), "--index", "ep", "add", "doc-1", "a document added through the console script"], env=env
    )
    assert added.returncode == 0, added.stderr
    near = _run(
        [str(SCRIPT), "--index", "ep", "near", "--json", "a document added through the console script"],
        env=env,
    )
    assert json.loads(near.stdout)[0]["id"] == "doc-1"
    down = _run([str(SCRIPT), "--redis-url", "redis://:pw@127.0.0.1:1", "get", "x"])
    assert down.returncode == 4 and "Traceback" not in down.stderr and ":pw@" not in down.stderr


_SCRIPT_WITH = """
import atexit, sys, threading
from simhash_redis.cli import app
class Tail:
    def __del__(self):
        print("torn down", flush=True)
tail = Tail()  # freed by the interpreter's teardown only
atexit.register(lambda: print("atexit ran", flush=True))
if sys.argv[1] == "thread":
    # The thread lives until the quick exit has looked at it, however slowly the command ran.
    left, quick = threading.Event(), app.leave
    def leave(code):
        quick(code)
        app.leave = quick  # else the CLI module keeps this script's objects alive late into the teardown
        left.set()
    app.leave = leave
    threading.Thread(target=lambda: (left.wait(30), print("thread finished", flush=True))).start()
sys.argv[1:] = sys.argv[2:]
app.run()
"""


def test_the_quick_exit_keeps_what_pythons_exit_does() -> None:
    # The teardown is skipped, the atexit handlers run, the output is whole, the status is click's.
    done = _run([sys.executable, "-c", _SCRIPT_WITH, "alone", "--version"])
    version = f"simhash-redis {simhash_redis.__version__}"
    assert (done.returncode, done.stdout.splitlines()) == (0, [version, "atexit ran"])
    usage = _run([sys.executable, "-c", _SCRIPT_WITH, "alone", "near", "--k", "x", "text"])
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    # Another thread still running: Python's own exit, which waits for it, then tears down.
    waited = _run([sys.executable, "-c", _SCRIPT_WITH, "thread", "--version"])
    assert waited.returncode == 0
    assert waited.stdout.splitlines()[1:] == ["thread finished", "atexit ran", "torn down"]
    module = _run([sys.executable, "-m", "simhash_redis.cli", "--version"])
    assert (module.returncode, module.stdout) == (0, version + "\n")


def _can_build_offline() -> bool:
    """Whether this environment can build a wheel without downloading a build backend."""
    try:
        import setuptools
    except ImportError:
        return False
    major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def test_pip_install_into_fresh_venv(redis_url: str, tmp_path: Path) -> None:
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("simhash_redis", "cli"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    purelib = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    )
    # The dependencies (redis, typer, ...) come from this test environment, after the fresh site-packages,
    # so no network is needed for them; its editable install is not picked up (its .pth is not read).
    mine = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "deps-from-test-env.pth").write_text("\n".join(sorted(mine)) + "\n", encoding="utf-8")
    install = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--no-deps",
        "--quiet",
        str(source),
    ]
    if _can_build_offline():
        install.insert(-1, "--no-build-isolation")
    done = _run(install, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (purelib / "cli").exists(), "a generic top-level `cli` package was installed"
    assert (purelib / "simhash_redis" / "cli" / "app.py").exists()
    script = venv / "bin" / "simhash-redis"
    helped = _run([str(script), "--help"], cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    where = _run([str(python), "-c", "import simhash_redis.cli.app as m; print(m.__file__)"], cwd=tmp_path)
    assert where.stdout.startswith(str(purelib)), where.stdout + where.stderr
    env = {**os.environ, "SIMHASH_REDIS_URL": redis_url}
    added = _run([str(script), "add", "x", "installed from a wheel, not editable"], cwd=tmp_path, env=env)
    assert added.returncode == 0 and added.stdout.strip() == "added", added.stderr
