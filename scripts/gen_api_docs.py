"""Fill the signature blocks of docs/api.md from the code, so the API reference cannot drift.

docs/api.md is written by hand except for the blocks between ``<!-- signature: NAME -->`` and
``<!-- /signature -->``, which this script regenerates by introspecting ``simhash_redis.NAME``::

    python scripts/gen_api_docs.py           # rewrite docs/api.md
    python scripts/gen_api_docs.py --check   # exit 1 if docs/api.md is stale (used by the tests)
"""

from __future__ import annotations

import argparse
import enum
import inspect
import re
import sys
import typing
from functools import cached_property
from pathlib import Path
from typing import Any, ForwardRef

_ROOT = Path(__file__).resolve().parent.parent
_API_MD = _ROOT / "docs" / "api.md"
_WIDTH = 100
_BLOCK = re.compile(r"(<!-- signature: (?P<name>[\w.]+) -->\n)(?P<body>.*?)(<!-- /signature -->)", re.DOTALL)


def _annotation(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, ForwardRef):
        return value.__forward_arg__
    return inspect.formatannotation(value)


def _signature(obj: Any, *, indent: str = "", head: str = "") -> str:
    """A signature written as in source: string annotations unquoted, defaults as their repr."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    parts: list[str] = []
    star_done = False
    for p in params:
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            star_done = True
        prefix = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        text = prefix + p.name
        ann = _annotation(p.annotation)
        if ann:
            text += f": {ann}"
        if p.default is not p.empty:
            text += f" = {p.default!r}" if ann else f"={p.default!r}"
        parts.append(text)
        following = params[params.index(p) + 1] if p is not params[-1] else None
        if p.kind is p.POSITIONAL_ONLY and (following is None or following.kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    ret = _annotation(sig.return_annotation)
    tail = f" -> {ret}" if ret and ret != "None" else ""
    one_line = f"({', '.join(parts)}){tail}"
    if len(indent + head + one_line) <= _WIDTH:
        return one_line
    inner = "".join(f"{indent}    {part},\n" for part in parts)
    return f"(\n{inner}{indent}){tail}"


def _def(function: Any) -> str:
    """The keyword a method's signature starts with: `async def` for a coroutine function."""
    return "async def" if inspect.iscoroutinefunction(function) else "def"


def _bind_type_variables(body: str, cls: type, name: str) -> str:
    """A generic base's members as the class has them: `-> H` is the class, `Sync` its type argument."""
    body = body.replace("cls: type[H], ", "cls, ").replace("self: H", "self").replace("-> H", f"-> {name}")
    for base in getattr(cls, "__orig_bases__", ()):
        for parameter, argument in zip(
            getattr(typing.get_origin(base), "__parameters__", ()), typing.get_args(base), strict=False
        ):
            body = re.sub(rf"\b{parameter.__name__}\b", argument.__name__, body)
    return body


def _members(cls: type) -> list[str]:
    """Public methods, class methods and properties defined on cls (and its project base classes)."""
    lines: list[str] = []
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("simhash_redis"):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(raw, (property, cached_property)):
                getter = raw.fget if isinstance(raw, property) else raw.func
                ret = _annotation(inspect.signature(getter).return_annotation) if getter else ""
                lines.append(f"    {name}: {ret}  # property" if ret else f"    {name}  # property")
            elif isinstance(raw, classmethod):
                head = f"    {_def(raw.__func__)} {name}"
                lines.append(f"    @classmethod\n{head}{_signature(raw.__func__, indent='    ', head=head)}")
            elif isinstance(raw, staticmethod):
                head = f"    def {name}"
                lines.append(f"    @staticmethod\n{head}{_signature(raw.__func__, indent='    ', head=head)}")
            elif inspect.isfunction(raw):
                head = f"    {_def(raw)} {name}"
                lines.append(f"{head}{_signature(raw, indent='    ', head=head)}")
    return lines


def render(name: str) -> str:
    """The signature block of one public name of simhash_redis.

    Args:
        name: a name in simhash_redis.__all__, or "asyncio.X" for one in simhash_redis.asyncio.__all__.

    Returns:
        A fenced Python code block.
    """
    import importlib

    module, _, name = name.rpartition(".")  # "asyncio.AsyncSimhashIndex": a public subpackage's name
    obj = getattr(importlib.import_module(f"simhash_redis.{module}" if module else "simhash_redis"), name)
    if name == "__version__":
        body = f"__version__: str  # {obj!r} in this release"
    elif inspect.isfunction(obj):
        body = f"{_def(obj)} {name}{_signature(obj, head=f'{_def(obj)} {name}')}"
    elif isinstance(obj, type) and issubclass(obj, enum.Enum):
        bases = ", ".join(b.__name__ for b in obj.__bases__)
        body = f"class {name}({bases}):\n" + "\n".join(f"    {m.name} = {m.value!r}" for m in obj)
    elif isinstance(obj, type) and issubclass(obj, BaseException):
        bases = ", ".join(b.__name__ for b in obj.__bases__)
        body = f"class {name}({bases})"
    elif isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
        fields = getattr(obj, "__annotations__", {})
        body = f"class {name}(NamedTuple):\n"
        body += "\n".join(f"    {field}: {_annotation(kind)}" for field, kind in fields.items())
    elif isinstance(obj, type):
        body = f"class {name}{_signature(obj, head=f'class {name}')}:"
        members = _members(obj)
        body += "\n" + "\n".join(members) if members else "\n    ..."
        body = _bind_type_variables(body, obj, name)
    else:
        body = f"{name} = {_annotation(obj)}"
    return f"```python\n{body}\n```\n"


def regenerate(text: str) -> str:
    """docs/api.md with every signature block rendered afresh.

    Args:
        text: the current file contents.

    Returns:
        The new contents.
    """
    return _BLOCK.sub(lambda m: m.group(1) + render(m.group("name")) + m.group(4), text)


def documented(text: str) -> list[str]:
    """The names that have a signature block in docs/api.md.

    Args:
        text: the file contents.

    Returns:
        The names, in file order.
    """
    return [m.group("name") for m in _BLOCK.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    """Rewrite docs/api.md, or with --check report whether it is up to date.

    Args:
        argv: command-line arguments (default sys.argv[1:]).

    Returns:
        The exit status: 1 when --check finds the file stale or a public name undocumented.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if docs/api.md is stale")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(_ROOT))
    import simhash_redis

    text = _API_MD.read_text(encoding="utf-8")
    import simhash_redis.asyncio

    public = [*simhash_redis.__all__, *(f"asyncio.{name}" for name in simhash_redis.asyncio.__all__)]
    missing = sorted(set(public) - set(documented(text)))
    new = regenerate(text)
    if args.check:
        if missing:
            print(f"docs/api.md has no signature block for: {', '.join(missing)}", file=sys.stderr)
        if new != text:
            print("docs/api.md is stale: run python scripts/gen_api_docs.py", file=sys.stderr)
        return 1 if missing or new != text else 0
    _API_MD.write_text(new, encoding="utf-8")
    if missing:
        print(f"add a section with a signature block for: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
