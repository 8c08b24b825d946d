"""The Python names and files the Rust crate's comments and stub cite exist: none outlives a rename.

A cited name is a backticked dotted name in `native/src` (``//`` comments), the stub or
`native/README.md`: a full path (``simhash_redis.fingerprinting.normalize.Normalizer``), a module of
the package and a name it defines (``tokens.split_chunks``, ``store.candidates.pure_hits``), or a class
of the package and a name in its module (``Normalizer.image_parts``); and paths of files
(``simhash_redis/store/grouped.py``). Names of the crate itself, of the standard library and of numpy
are left alone; anything else is a name that no longer exists.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "simhash_redis"
NATIVE = ROOT / "native"
#: First parts that are not the package's: the standard library, numpy.
OUTSIDE = {"str", "bytes", "int", "np", "unicodedata", "os", "sys"}
_CITED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?(?:\[\d+\])?`")
_RUST_ITEM = re.compile(r"\b(?:struct|enum|trait|fn|mod|const|static)\s+([A-Za-z_]\w*)")
_SUFFIXES = (".rs", ".py", ".lua", ".md", ".toml")
_PATH = re.compile(r"`([\w.]+(?:/[\w.]+)+\.(?:py|rs|lua|pyi))`")


def _sources() -> list[tuple[Path, str]]:
    """The texts that cite names: the crate's comments, its stub and README."""
    texts = []
    for path in sorted((NATIVE / "src").rglob("*.rs")):
        comments = [line.split("//", 1)[1] for line in path.read_text().splitlines() if "//" in line]
        texts.append((path, "\n".join(comments)))
    for path in (NATIVE / "simhash_redis_native.pyi", NATIVE / "README.md"):
        texts.append((path, path.read_text()))
    return texts


def _modules() -> dict[str, list[Path]]:
    """Each dotted tail of each module's name (``candidates``, ``store.candidates``...) → its files."""
    found: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for start in range(len(parts)):
            found.setdefault(".".join(parts[start:]), []).append(path)
    return found


def _defines(path: Path, name: str) -> bool:
    """Whether a module defines a name (function, class, method, assignment, annotated attribute)."""
    pattern = rf"^\s*(?:(?:async\s+)?def|class)\s+{name}\b|^\s*{name}\s*[:=]|^\s*self\.{name}\s*[:=]"
    return re.search(pattern, path.read_text(), re.MULTILINE) is not None


def _classes() -> dict[str, list[Path]]:
    """Class name → the modules defining it."""
    found: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        for name in re.findall(r"^class\s+(\w+)", path.read_text(), re.MULTILINE):
            found.setdefault(name, []).append(path)
    return found


def _resolves(cited: str, modules: dict[str, list[Path]], classes: dict[str, list[Path]]) -> bool:
    """Whether a cited name is a module of the package, or a name one of its modules or classes defines."""
    parts = cited.removeprefix("simhash_redis.").split(".")
    if cited == "simhash_redis.engine" or ".".join(parts) in modules:
        return True
    for cut in range(len(parts) - 1, 0, -1):
        head, rest = ".".join(parts[:cut]), parts[cut:]
        if len(rest) == 1 and head in modules:
            return any(_defines(path, rest[0]) for path in modules[head])
    if len(parts) == 2 and parts[0] in classes:
        return any(_defines(path, parts[1]) for path in classes[parts[0]])
    return False


def test_every_python_name_cited_by_the_crate_exists() -> None:
    modules, classes = _modules(), _classes()
    rust_items = {
        name for path in (NATIVE / "src").rglob("*.rs") for name in _RUST_ITEM.findall(path.read_text())
    }
    stale = []
    for path, text in _sources():
        for cited in sorted(set(_CITED.findall(text))):
            first = cited.split(".", 1)[0]
            if cited.endswith(_SUFFIXES) or first in OUTSIDE or first in rust_items:
                continue
            if not _resolves(cited, modules, classes):
                stale.append(f"{path.relative_to(ROOT)}: `{cited}`")
        for cited in sorted(set(_PATH.findall(text))):
            if not any((base / cited).exists() for base in (ROOT, PACKAGE, NATIVE, NATIVE / "src")):
                stale.append(f"{path.relative_to(ROOT)}: `{cited}`")
    assert not stale, "names that no longer exist:\n" + "\n".join(stale)


def test_the_check_finds_a_stale_name() -> None:
    modules, classes = _modules(), _classes()
    assert _resolves("tokens.split_chunks", modules, classes)
    assert _resolves("Normalizer.image_parts", modules, classes)
    assert _resolves("simhash_redis.fingerprinting.normalize.Normalizer", modules, classes)
    assert not _resolves("features._image_parts", modules, classes)
    assert not _resolves("fingerprint.MIX_K", modules, classes)
    assert not _resolves("index._hits_scalar", modules, classes)
