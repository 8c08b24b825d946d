"""The documentation the command and the library's messages point to can be read without a checkout.

A wheel ships no docs/ folder: every page named in `--help` or in a message is an address built by
`simhash_redis.links.doc_url` on the repository URL of pyproject.toml's [project.urls], and names a page
that exists in docs/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis.links import REPOSITORY, doc_url

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(re.escape(REPOSITORY) + r"/blob/main/(docs/[\w./-]+?\.md)")


def _command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and command group of the app, as the words that name it."""
    paths = []
    for name, command in group.commands.items():
        paths.append((*prefix, name))
        if hasattr(command, "commands"):  # a command group (`server`)
            paths += _command_paths(command, (*prefix, name))
    return paths


def _help_texts() -> list[str]:
    """`--help` of the app, then of each of its commands."""
    runner = CliRunner()
    texts = []
    for path in [(), *_command_paths(typer.main.get_command(app))]:
        done = runner.invoke(app, [*path, "--help"], terminal_width=80)  # wrapped as on a terminal
        assert done.exit_code == 0, (path, done.output)
        texts.append(done.output)
    return texts


def test_the_base_is_the_repository_of_pyproject() -> None:
    tomllib = pytest.importorskip("tomllib")  # 3.11+: pyproject.toml is the same on every Python
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["urls"]["Repository"] == REPOSITORY
    assert doc_url("cli.md") == f"{REPOSITORY}/blob/main/docs/cli.md"


def test_help_links_to_pages_that_exist() -> None:
    texts = _help_texts()
    assert len(texts) > 20  # the app and every command
    docs = "Docs (this command; --verified, --plain and --k; --retention; --id-buckets and --band-buckets):"
    assert f"\n  {docs}\n    {doc_url('cli.md')}\n" in texts[0]
    linked = {page for text in texts for page in _LINK.findall(text)}
    assert {
        "docs/cli.md",
        "docs/choosing.md",
        "docs/quality.md",
        "docs/retention.md",
        "docs/operations.md",
    } <= linked
    for page in linked:
        assert (ROOT / page).is_file(), page
    for text in texts:
        rest = _LINK.sub("", text)
        # no link broken across lines by the help's wrapping, no page named by a path only a checkout has
        assert "https://" not in rest and "docs/" not in rest, text
        for page in re.findall(r"\b([\w-]+\.md)\b", rest):  # "quality.md, under Docs below"
            assert f"docs/{page}" in linked, f"{page} is named but not linked"


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings, with their line numbers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_messages_name_pages_by_their_address() -> None:
    """Every page a message or a help text names is a `doc_url(...)` call on a page that exists."""
    sources = sorted([*(ROOT / "simhash_redis").rglob("*.py"), *(ROOT / "cli").rglob("*.py")])
    for path in sources:
        where = path.relative_to(ROOT)
        for line, text in _strings(path):
            assert not re.search(r"docs/[\w-]+\.md", text), f"{where}:{line}: use doc_url(): {text!r}"
        for page in re.findall(r"doc_url\(['\"]([^'\"]+)['\"]\)", path.read_text(encoding="utf-8")):
            assert (ROOT / "docs" / page).is_file(), f"{where}: doc_url({page!r}): no such page"


def test_troubleshooting_names_every_error() -> None:
    """docs/troubleshooting.md says what each exception of the library means and what to do."""
    import simhash_redis.errors

    page = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    missing = [name for name in simhash_redis.errors.__all__ if f"`{name}`" not in page]
    assert not missing, f"docs/troubleshooting.md does not name {missing}"
    assert "(troubleshooting.md)" in (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
