"""The Makefile's editable install prints no setuptools notice, and still shows real errors.

setuptools reports an editable install of this project (cli/ installs as simhash_redis.cli) with
"Editable installation. Please be careful with folders ...", which pip (25.1+) prints as a
BuildBackendWarning on the first `make demo`. The Makefile's install line filters out that notice only;
the test runs pip as that line does (its environment and flags), on a copy of the project, offline.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _scratch_python(tmp_path: Path) -> Path:
    """A virtual environment that sees this one's pip and setuptools through a .pth file, so that pip
    installs into it offline and never touches the environment running the tests (an install with
    --prefix would uninstall the project from it)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = [path for path in sys.path if path.endswith("site-packages")]
    Path(purelib, "outer_packages.pth").write_text("\n".join(outer) + "\n", encoding="utf-8")
    return python


def _pip_install_editable(project: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("setuptools")
    make_env, flags = _makefile_install_line()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(make_env)
    offline = ["--no-deps", "--no-build-isolation", "--no-index"]
    return subprocess.run(
        [str(_scratch_python(tmp_path)), "-m", "pip", "install", *flags, *offline, "-e", str(project)],
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


# Every install line of the README, the docs and the code's messages works from a checkout as written:
# it names the checkout (`.`, `./native`) with extras that pyproject.toml defines, or a published
# requirement the project depends on, never simhash-redis or simhash-redis-native by name (neither is
# published yet).

#: Published packages the docs install for benchmarks and evaluation only, never dependencies.
TOOLS = {"simhash", "matplotlib", "jieba"}
UNPUBLISHED = {"simhash-redis", "simhash-redis-native"}

_DOCS = [ROOT / "README.md", ROOT / "native" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SOURCES = sorted([*(ROOT / "simhash_redis").rglob("*.py"), *(ROOT / "cli").rglob("*.py")])
_SPAN = re.compile(r"`+(pip install [^`]+)`+")
_FENCED = re.compile(r"^```(?:sh|bash|console|shell)?\n(.*?)^```", re.S | re.M)


def _project() -> dict[str, Any]:
    """pyproject.toml's [project] table (read on 3.11+: the file is the same on every Python)."""
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _extras_and_requirements() -> tuple[set[str], set[str]]:
    project = _project()
    extras = project["optional-dependencies"]
    requirements = [*project["dependencies"], *(r for group in extras.values() for r in group)]
    names = {_normal(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in requirements}
    return set(extras), names - {_normal(project["name"])}


def _install_lines() -> list[tuple[str, str]]:
    """(where, the arguments of `pip install`) of every install line of the docs and the code."""
    found = []
    for path in _DOCS:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT).as_posix()
        found += [(where, m.group(1)) for m in _SPAN.finditer(text)]
        for block in _FENCED.finditer(text):
            for line in block.group(1).splitlines():
                command = line.split("#", 1)[0].strip()
                if command.startswith("pip install "):
                    found.append((where, command))
    for path in _SOURCES:
        text = path.read_text(encoding="utf-8")
        spans = [m.group(1) for m in _SPAN.finditer(text)]
        where = path.relative_to(ROOT).as_posix()
        assert text.count("pip install") == len(spans), f"{where}: a pip install line outside `backticks`"
        found += [(where, span) for span in spans]
    return found


def _check(where: str, words: list[str], extras: set[str], requirements: set[str]) -> None:
    for word in words:
        if word.startswith("-"):
            continue
        path, _, rest = word.partition("[")
        wanted = set(filter(None, rest.rstrip("]").split(","))) if rest else set()
        if path.startswith("."):
            assert (ROOT / path).is_dir(), f"{where}: {word}: no folder {path} in the checkout"
            known = extras if (ROOT / path).resolve() == ROOT else set()
            assert wanted <= known, f"{where}: {word}: no such extra {sorted(wanted - known)}"
            continue
        name = _normal(re.split(r"[<>=!~]", path, maxsplit=1)[0])
        assert name not in UNPUBLISHED, f"{where}: {word}: not published; install from the checkout"
        assert name in requirements | TOOLS, f"{where}: {word}: neither a dependency nor a listed tool"


def test_every_install_line_works_from_a_checkout() -> None:
    extras, requirements = _extras_and_requirements()
    lines = _install_lines()
    assert len(lines) >= 10  # the README's, the docs' and the messages' install lines were all found
    for where, line in lines:
        _check(where, shlex.split(line)[2:], extras, requirements)


def test_the_unpublished_packages_are_named_only_as_published_later() -> None:
    for path in [*_DOCS, *_SOURCES]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "simhash-redis[" in line or "simhash-redis-native>" in line:
                assert "published" in line, f"{path.relative_to(ROOT)}:{number}: {line.strip()}"


def test_no_extra_names_a_package_built_from_the_checkout() -> None:
    """pip looks an extra's requirements up on the index: one naming the compiled core, which is built from
    ./native and not published, made `pip install '.[fast]'` fail with "No matching distribution"."""
    project = _project()
    for extra, group in project["optional-dependencies"].items():
        for requirement in group:
            name = _normal(re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0])
            assert name not in UNPUBLISHED - {_normal(project["name"])}, f"extra {extra}: {requirement}"
