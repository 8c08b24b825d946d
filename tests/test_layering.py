"""The package's floors: every import goes down (or sideways), no import loop, no reach into privates."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Lowest first. A module may import from its own floor and the ones below it.
FLOORS = [
    "base",
    "fingerprinting",
    "transport",
    "store",
    "index",
    "jobs",
    "tools",
    "asyncio",
    "contrib",
    "service",
    "cli",
]
BASE = {"errors", "defaults", "checks", "codec", "results", "links", "data", "compiled"}
# The modules that reach under redis-py's public API (see their docstrings), and the console script's
# exit, which runs the atexit handlers itself (atexit._run_exitfuncs) before os._exit.
PRIVATE_ALLOWED = {
    "simhash_redis/transport/wire.py",
    "simhash_redis/transport/standalone.py",
    "simhash_redis/transport/aio.py",
    "cli/quick_exit.py",
}
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


def _imports() -> dict[str, set[str]]:
    """Each module's imports of modules of the package, at every level.

    Function-local imports count, and so do those under ``if TYPE_CHECKING:``: an import for annotations
    only still ties the two modules together for a reader, and for mypy.
    """
    files = _files()
    known = {_module(p) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        module = _module(path)
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
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
        graph[module] = (deps & known) - {module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each group of modules that import each other (strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for dep in sorted(graph[module]):
            if dep not in index:
                connect(dep)
                low[module] = min(low[module], low[dep])
            elif dep in stack:
                low[module] = min(low[module], index[dep])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return [_circle_in(graph, group) for group in groups]


def _circle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A walk through every module of ``group`` that comes back to its start (a module may recur)."""
    start = min(group)
    walk = [start]
    for goal in [*sorted(group - {start}), start]:
        if goal == start or goal not in walk:
            walk.extend(_shortest_path(graph, group, walk[-1], goal)[1:])
    return walk


def _shortest_path(graph: dict[str, set[str]], group: set[str], source: str, goal: str) -> list[str]:
    """The shortest chain of imports from ``source`` to ``goal`` inside ``group`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [source]
    while goal not in came_from:
        reached = []
        for here in frontier:
            for dep in sorted(graph[here] & group):
                if dep not in came_from:
                    came_from[dep] = here
                    reached.append(dep)
        frontier = reached
    path = [goal]
    while len(path) == 1 or path[-1] != source:
        path.append(came_from[path[-1]])
    return path[::-1]


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


def test_no_import_circle_among_modules() -> None:
    # A circle hidden in a function or behind TYPE_CHECKING is still modules that cannot be understood,
    # tested or moved one without the others: _imports() counts those imports too.
    circles = [" -> ".join(circle) for circle in _circles(_imports())]
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_circles_are_found_and_reported_whole() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"b"}, "e": {"a"}}
    assert _circles(graph) == [["a", "b", "c", "d", "b", "c", "a"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_floors_and_packages() -> None:
    # The same graph seen from above: each package (and base module) as one node.
    def node(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for module, deps in _imports().items():
        graph.setdefault(node(module), set()).update(node(dep) for dep in deps)
    graph = {name: deps - {name} for name, deps in graph.items()}
    circles = [" -> ".join(circle) for circle in _circles(graph)]
    assert not circles, "import circles:\n" + "\n".join(circles)


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
