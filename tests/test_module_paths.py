"""Every module, file and name of the project that the docs, comments and docstrings name exists.

Read: README.md and docs/*.md (docs/benchmarks.md down to its dated history, whose records name the code
of their day), the comments and docstrings of simhash_redis/ and cli/, and the comments of native/ (its
Rust sources, its stub and its README) with those of the compiled core's Python adapter. Checked without
importing anything (optional extras need not be installed):

- paths: ``simhash_redis/store/reads.py``, ``store/reads.py`` (a subpackage's), ``native/src/lib.rs``,
  ``docs/cli.md``, ``store/lua/`` (a folder); in a page, a path may also be relative to the page;
- dotted names from the package: ``simhash_redis.store.reads.Reads.lookup`` (modules, then a name a
  module defines or imports, then a name its class defines);
- in comments and docstrings, names relative to a module in backquotes: ``candidates.hits`` (a module
  of the package, then a name it defines) and, outside native/, ``Reads.lookup`` (a class of the
  package, then a name in it);
- everywhere, no ``features.tokenize`` where no module is called ``features`` any more but one defines
  ``tokenize`` (in a page, ``index.k`` is an object of the example's, so only this is checked there).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "simhash_redis"
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
_TOPS = ["simhash_redis", "native", "cli", "tests", "benchmarks", "scripts", "docs", *SUBPACKAGES]
#: A path: a top folder, then a file with an extension or folders ending in a slash.
_PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(_TOPS) + r")/(?:[\w.*/-]*\.[a-z]{1,5}\b|(?:[\w*-]+/)+))")
_DOTTED = re.compile(r"(?<![\w.])(simhash_redis(?:\.\w+)+)")
_QUOTED = re.compile(r"`([A-Za-z_]\w*(?:\.\w+)+)(?:\(\))?`")
#: Where docs/benchmarks.md's dated records begin.
_HISTORY = "## History"
#: The ends of file names, which `name.py` is rather than a module's name.
_EXTENSIONS = frozenset({"py", "pyi", "rs", "lua", "md", "toml", "txt", "json", "rdb", "sh"})
#: Made by a build, absent from a checkout.
_BUILT = ("native/target/",)

Texts = list[tuple[int, str]]


def _python_texts(path: Path) -> Texts:
    """The comments and docstrings of a module, with their line numbers."""
    source = path.read_text(encoding="utf-8")
    texts = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                texts.append((first.lineno, str(first.value.value)))
    return texts


def _comments(path: Path) -> Texts:
    """The comments of a Rust source (from ``//`` to the end of the line)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(number, line[line.index("//") :]) for number, line in enumerate(lines, 1) if "//" in line]


def _page(path: Path) -> Texts:
    """The lines of a page; of docs/benchmarks.md, those above its dated history."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.name == "benchmarks.md":
        lines = lines[: lines.index(_HISTORY)]
    return list(enumerate(lines, 1))


@functools.cache
def _module_file(module: str) -> Path | None:
    """The file of a module of the project (``simhash_redis.cli`` lives in cli/), or None."""
    parts = module.split(".")
    if parts[:2] == ["simhash_redis", "cli"]:
        parts = ["cli", *parts[2:]]
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _binding(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The statement of a body (or of its ifs and trys) that binds a name, or None."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
        ):
            return node
        if isinstance(node, (ast.If, ast.Try)):
            inner = [*node.body, *node.orelse]
            if isinstance(node, ast.Try):
                inner += [stmt for handler in node.handlers for stmt in handler.body]
            found = _binding(inner, name)
            if found is not None:
                return found
    return None


def _in_class(node: ast.ClassDef, name: str) -> bool:
    """Whether a class defines a name: in its body, or as an attribute of self in a method."""
    return _binding(node.body, name) is not None or any(
        isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
        and n.attr == name
        for n in ast.walk(node)
    )


def _names_exist(module: str, names: list[str]) -> bool:
    """Whether ``module.names[0].names[1]...`` exists: submodules, then a name, then a class's name."""
    if not names:
        return True
    path = _module_file(module)
    if path is None:
        return False
    name, rest = names[0], names[1:]
    if _module_file(f"{module}.{name}") is not None:
        return _names_exist(f"{module}.{name}", rest)
    node = _binding(_tree(path).body, name)
    if isinstance(node, ast.ImportFrom):
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = package[: len(package) - node.level + 1] if node.level else []
        source = ".".join([*base, *([node.module] if node.module else [])])
        original = next(alias.name for alias in node.names if (alias.asname or alias.name) == name)
        if not source.startswith("simhash_redis"):
            return True  # another library's name
        return _names_exist(source, [original, *rest])
    if node is None:
        return False
    if isinstance(node, ast.ClassDef) and rest:
        return _in_class(node, rest[0])
    # A function has no names of its own to speak of; an assigned value is not followed.
    return not (rest and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _dotted_exists(dotted: str) -> bool:
    """Whether a name from the package root exists: its longest module prefix, then names in it."""
    parts = dotted.split(".")
    cut = len(parts)
    while cut > 1 and _module_file(".".join(parts[:cut])) is None:
        cut -= 1
    return _names_exist(".".join(parts[:cut]), parts[cut:])


def _path_exists(text: str, where: Path) -> bool:
    if text.startswith(_BUILT) or (where.parent / text).exists():
        return True
    if text.split("/")[0] in SUBPACKAGES:
        text = f"simhash_redis/{text}"
    return any(ROOT.glob(text)) if "*" in text else (ROOT / text).exists()


@functools.cache
def _modules_named() -> dict[str, list[str]]:
    """Each module's last name -> the modules of the package (the CLI's included) that have it."""
    named: dict[str, list[str]] = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "cli").rglob("*.py")]):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[0] == "cli":
            parts.insert(0, "simhash_redis")
        if parts[-1] == "__init__":
            parts.pop()
        named.setdefault(parts[-1], []).append(".".join(parts))
    return named


@functools.cache
def _classes() -> dict[str, list[ast.ClassDef]]:
    """Each class name of the package -> its definitions."""
    found: dict[str, list[ast.ClassDef]] = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "cli").rglob("*.py")]):
        for node in _tree(path).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


def _relative_exists(ref: str, where: Path) -> bool | None:
    """Whether a backquoted ``module.name`` or ``Class.name`` exists; None when it names neither.

    A module name may stand for an object of its class (``scheme.fingerprint_many``): a name defined by
    a class of that module counts too.
    """
    first, *rest = ref.split(".")
    if first == "simhash_redis" or rest[-1] in _EXTENSIONS:
        return None  # a name from the package root, checked as such; or a file (`codec.py`)
    modules = _modules_named().get(first)
    if modules:
        return any(
            _names_exist(module, rest)
            or any(
                isinstance(node, ast.ClassDef) and _in_class(node, rest[0])
                for node in _tree(_module_file(module) or where).body
            )
            for module in modules
        )
    if first in _classes() and where.suffix == ".py":
        return any(_in_class(node, rest[0]) for node in _classes()[first])
    return None


@functools.cache
def _top_names() -> frozenset[str]:
    """The names defined (not imported) at the top of the package's modules."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in _tree(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return frozenset(name for name in names if not name.startswith("__"))


def _retired(ref: str) -> bool:
    """Whether a backquoted ``word.NAME`` names a module that is gone: no module, class or standard
    library module is called ``word``, yet a module of the package defines NAME (``features.tokenize``,
    once ``tokens.tokenize``)."""
    first, *rest = ref.split(".")
    return (
        len(rest) == 1
        and first.islower()
        and first not in ("self", "cls", "simhash_redis")
        and first not in sys.stdlib_module_names
        and first not in _modules_named()
        and rest[0] in _top_names()
    )


def _stale(path: Path, texts: Texts) -> Iterator[str]:
    """The names of missing modules, files and names in texts, each with its place."""
    at = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for line, text in texts:
        for found in _PATH.findall(text):
            if not _path_exists(found, path):
                yield f"{at}:{line}: {found}"
        for found in _DOTTED.findall(text):
            if not _dotted_exists(found):
                yield f"{at}:{line}: {found}"
        for found in _QUOTED.findall(text):
            # In a page, `index.k` is an object of the example's, not the module.
            if _retired(found) or (path.suffix != ".md" and _relative_exists(found, path) is False):
                yield f"{at}:{line}: `{found}`"


def test_the_pages_name_what_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    stale = [entry for page in pages for entry in _stale(page, _page(page))]
    assert not stale, "names of nothing:\n" + "\n".join(stale)


def test_comments_and_docstrings_name_what_exists() -> None:
    files = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "cli").rglob("*.py")])
    stale = [entry for path in files for entry in _stale(path, _python_texts(path))]
    assert not stale, "names of nothing:\n" + "\n".join(stale)


def test_the_architecture_names_every_module() -> None:
    # docs/architecture.md's map of the package, drawn floor by floor: each floor's part of it names
    # every module of that floor (its subfolders' too).
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = page.split("## The package, floor by floor", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    parts: dict[str, str] = {}
    floor = ""
    for line in block.splitlines():
        head = re.match(r" ((?:simhash_redis/)?[\w/]*)\s", line)
        if head and head.group(1).endswith("/"):
            floor = head.group(1)
        parts[floor] = parts.get(floor, "") + line + "\n"
    missing = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "cli").rglob("*.py")]):
        relative = path.relative_to(ROOT)
        if path.stem in ("__init__", "__main__"):
            continue
        floor = "/".join(relative.parts[:2]) + "/" if relative.parts[0] == "simhash_redis" else "cli/"
        if len(relative.parts) == 2 and relative.parts[0] == "simhash_redis":
            floor = "simhash_redis/"
        if not re.search(rf"\b{path.stem}\b", parts.get(floor, "")):
            missing.append(str(relative))
    assert not missing, "docs/architecture.md's map of the package omits:\n" + "\n".join(missing)


def test_the_native_crate_names_what_exists() -> None:
    native = ROOT / "native"
    stale = [
        entry for path in sorted((native / "src").rglob("*.rs")) for entry in _stale(path, _comments(path))
    ]
    for stub in sorted(native.glob("*.pyi")):
        stale += _stale(stub, _python_texts(stub))
    stale += _stale(native / "README.md", _page(native / "README.md"))
    assert not stale, "names of nothing:\n" + "\n".join(stale)


def test_the_checks_find_what_is_missing(tmp_path: Path) -> None:
    # The checker itself: each kind of name, existing and not.
    assert _dotted_exists("simhash_redis.store.reads.Reads.lookup")
    assert _dotted_exists("simhash_redis.fingerprinting.engine_choice.native")
    assert _dotted_exists("simhash_redis.SimhashIndex.near")
    assert _dotted_exists("simhash_redis.cli.app")
    assert not _dotted_exists("simhash_redis.fingerprint.fingerprint")  # a function has no names
    assert not _dotted_exists("simhash_redis.store.reads.Reads.no_such_method")
    assert not _dotted_exists("simhash_redis.bitsums")
    assert _relative_exists("candidates.hits", ROOT / "simhash_redis/store/reads.py")
    assert _relative_exists("Reads.lookup", ROOT / "simhash_redis/store/reads.py")
    assert _relative_exists("scheme.fingerprint_many", ROOT / "simhash_redis/jobs/fingerprinter.py")
    assert _relative_exists("candidates.no_such_name", ROOT / "simhash_redis/store/reads.py") is False
    assert _relative_exists("np.uint64", ROOT / "simhash_redis/store/reads.py") is None
    assert _retired("features.tokenize") and not _retired("tokens.tokenize") and not _retired("json.loads")
    page = tmp_path / "page.md"
    page.write_text(
        "see `store/reads.py`, simhash_redis/store/nothing.py and docs/nowhere.md, at 10 docs/s\n"
    )
    assert [entry.split(": ", 1)[1] for entry in _stale(page, _page(page))] == [
        "simhash_redis/store/nothing.py",
        "docs/nowhere.md",
    ]
