"""The package's floors: every import goes down (or sideways), no import loop, no reach into privates."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Lowest first. A module may import from its own floor and the ones below it.
FLOORS = [
    "base", "fingerprinting", "transport", "store", "index", "asyncio", "jobs", "tools", "contrib", "service",
    "cli",
]
BASE = {"errors", "defaults", "checks", "codec", "results", "links", "data", "compiled"}
# The two modules that reach under redis-py's public API (see their docstrings), and the console
# script's exit, which runs the atexit handlers itself (atexit._run_exitfuncs) before os._exit.
PRIVATE_ALLOWED = {"simhash_redis/transport/wire.py", "simhash_redis/transport/aio.py", "cli/quick_exit.py"}
#: Underscored names that are public API: namedtuple methods, and os._exit.
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make", "_exit"}


def _files() -> list[Path]:
    return sorted([*(ROOT / "simhash_redis").rglob("*.py"), *(ROOT / "cli").rglob("*.py")])


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "cli":
        parts = ["simhash_redis", "cli", *parts[1:]]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _floor(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return len(FLOORS)  # the package's public face sits above everything
    return 0 if parts[1] in BASE else FLOORS.index(parts[1])


def _runtime_nodes(tree: ast.Module) -> list[ast.AST]:
    """Every node of a module but those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def _imports() -> dict[str, set[str]]:
    """Each module's run-time imports of modules of the package (function-local ones included)."""
    files = _files()
    known = {_module(p) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        module = _module(path)
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        deps = set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                if target.split(".")[0] != "simhash_redis":
                    continue
                for alias in node.names:
                    deps.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.split(".")[0] == "simhash_redis")
        graph[module] = deps & known
    return graph


def test_every_module_sits_on_a_floor() -> None:
    for module in _imports():
        parts = module.split(".")
        assert len(parts) == 1 or parts[1] in BASE or parts[1] in FLOORS, f"{module} is on no floor"


def test_imports_never_go_up_a_floor() -> None:
    # The CLI may use the package's public face, which sits above every floor of the library.
    upward = [
        f"{module} -> {dep}"
        for module, deps in _imports().items()
        for dep in deps
        if _floor(dep) > _floor(module)
        and not (module.startswith("simhash_redis.cli.") and dep == "simhash_redis")
    ]
    assert upward == []


def test_no_import_loop() -> None:
    graph = _imports()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        seen[module] = 1
        for dep in sorted(graph[module]):
            if dep == module:
                continue
            if seen.get(dep) == 1:
                pytest.fail("import loop: " + " -> ".join([*path[path.index(dep) :], dep]))
            if dep not in seen:
                visit(dep, [*path, dep])
        seen[module] = 2

    for module in sorted(graph):
        if module not in seen:
            visit(module, [module])


def test_no_module_reads_another_objects_private_attributes() -> None:
    found = []
    for path in _files():
        if str(path.relative_to(ROOT)) in PRIVATE_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in PUBLIC_UNDERSCORED
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert found == []


def test_no_module_is_over_500_lines() -> None:
    long = [f"{p.relative_to(ROOT)}: {n}" for p in _files() if (n := len(p.read_text().splitlines())) > 500]
    assert long == []


def test_the_transport_floor_imports_nothing_of_the_fingerprinting_floor() -> None:
    # Replies are the transport's business: it finds their ends with the compiled core's scanner,
    # imported as the extension it is, never through the fingerprint engines.
    found = [
        f"{module} -> {dep}"
        for module, deps in _imports().items()
        if module.startswith("simhash_redis.transport")
        for dep in deps
        if dep.startswith("simhash_redis.fingerprinting")
    ]
    assert found == []
