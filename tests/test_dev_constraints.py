"""The development environment's pins (dev-constraints.txt) against the ranges users get (pyproject.toml).

The pins make `make test` reproducible; these checks keep them honest: every package pyproject.toml names
pinned, one exact version of each on every supported Python, inside what the project accepts, numpy's
range tested at both ends (the oldest numpy on the oldest Python), and every install of the Makefile
going through them.
"""

from __future__ import annotations

import re
from importlib.metadata import metadata, requires
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "dev-constraints.txt"


def _constraints() -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines())
    return [Requirement(line) for line in lines if line]


def _supported_pythons() -> list[str]:
    classifiers = metadata("simhash-redis").get_all("Classifier") or []
    pattern = re.compile(r"Programming Language :: Python :: (3\.\d+)")
    found = [m.group(1) for c in classifiers if (m := pattern.fullmatch(c))]
    assert found, "pyproject.toml names no supported Python"
    return sorted(found, key=Version)


def _pins_for(python: str) -> dict[str, Version]:
    """The exact version of each package the constraints give `python`, checking there is one only."""
    pins: dict[str, Version] = {}
    for req in _constraints():
        if req.marker is not None and not req.marker.evaluate({"python_version": python}):
            continue
        name = canonicalize_name(req.name)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{req}: a pin is one exact version"
        assert name not in pins, f"{name} is pinned twice for Python {python}"
        pins[name] = Version(spec.version)
    return pins


def test_every_supported_python_gets_the_same_packages_pinned() -> None:
    names = {canonicalize_name(req.name) for req in _constraints()}
    for python in _supported_pythons():
        assert set(_pins_for(python)) == names, python


def test_every_package_the_project_names_is_pinned() -> None:
    named = {canonicalize_name(Requirement(text).name) for text in requires("simhash-redis") or []}
    built_here = {"simhash-redis", "simhash-redis-native"}
    pinned = {canonicalize_name(req.name) for req in _constraints()}
    assert named - built_here - pinned == set()


def test_pins_sit_inside_the_ranges_the_project_declares() -> None:
    declared = [Requirement(text) for text in requires("simhash-redis") or []]
    for python in _supported_pythons():
        pins = _pins_for(python)
        for req in declared:
            pinned = pins.get(canonicalize_name(req.name))
            if pinned is not None:
                assert req.specifier.contains(pinned, prereleases=True), f"{req.name}=={pinned} vs {req}"


def test_numpy_is_pinned_at_both_ends_of_its_range() -> None:
    (numpy,) = [Requirement(t) for t in requires("simhash-redis") or [] if Requirement(t).name == "numpy"]
    floor = min(Version(spec.version) for spec in numpy.specifier if spec.operator == ">=")
    pythons = _supported_pythons()
    oldest, newest = _pins_for(pythons[0])["numpy"], _pins_for(pythons[-1])["numpy"]
    # the oldest Python: a release of the lowest minor version accepted, so mypy and the tests see it
    assert oldest.release[:2] == floor.release[:2], oldest
    # the newest Python: the newest numpy pinned anywhere
    assert newest == max(_pins_for(python)["numpy"] for python in pythons)


def test_the_makefile_installs_through_the_constraints() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert f"CONSTRAINTS := {CONSTRAINTS.name}" in makefile
    installs = [line for line in makefile.splitlines() if "pip install" in line and "'.[" in line]
    assert installs
    for line in installs:
        assert "-c $(CONSTRAINTS)" in line, line
    # scripts/matrix.sh makes its environments with the Makefile, not with installs of its own
    matrix = (ROOT / "scripts" / "matrix.sh").read_text(encoding="utf-8")
    assert "make --no-print-directory native" in matrix and "make --no-print-directory lint" in matrix
    assert "-e '.[" not in matrix
