"""The Makefile's editable install prints no setuptools notice, and still shows real errors.

setuptools reports an editable install of this project (cli/ installs as simhash_redis.cli) with
"Editable installation. Please be careful with folders ...", which pip (25.1+) prints as a
BuildBackendWarning on the first `make demo`. The Makefile's install line filters out that notice only;
the test runs pip as that line does (its environment and flags), on a copy of the project, offline.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _makefile_install_line() -> tuple[dict[str, str], list[str]]:
    """The environment and pip flags of the Makefile's editable install (`make -n`: printed, not run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", "-B", "VENV=.venv-never-made", ".venv-never-made/bin/.installed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(line for line in done.stdout.splitlines() if "pip install" in line and " -e " in line)
    words = shlex.split(line)
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    flags = [word for word in words[words.index("install") + 1 :] if word.startswith("--")]
    return env, flags


def _project_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, copy / name)
    for folder in ("simhash_redis", "cli"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _pip_install_editable(project: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("setuptools")
    make_env, flags = _makefile_install_line()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env.update(make_env)
    offline = ["--no-deps", "--no-build-isolation", "--no-index", "--prefix", str(tmp_path / "prefix")]
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", *flags, *offline, "-e", str(project)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_editable_install_prints_no_setuptools_notice(tmp_path: Path) -> None:
    done = _pip_install_editable(_project_copy(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Editable installation" not in done.stdout + done.stderr
    assert "BuildBackendWarning" not in done.stdout + done.stderr


def test_the_editable_install_still_shows_errors(tmp_path: Path) -> None:
    project = _project_copy(tmp_path)
    pyproject = project / "pyproject.toml"
    missing = '"simhash_redis.transport",\n    "simhash_redis.not_there",'
    pyproject.write_text(pyproject.read_text().replace('"simhash_redis.transport",', missing))
    done = _pip_install_editable(project, tmp_path)  # setuptools fails: a package without a folder
    assert done.returncode != 0
    assert "not_there" in done.stdout + done.stderr
