"""Where a reader finds the documentation: addresses built on the project's repository URL.

A wheel ships no docs/ folder, so help and messages name a page by its address, built from pyproject.toml's
[project.urls] Repository (tests/test_doc_links.py keeps the two equal).
"""

from __future__ import annotations

__all__ = ["REPOSITORY", "doc_url"]

#: The project's repository, as pyproject.toml's [project.urls] names it.
REPOSITORY = "https://github.com/simhash-redis/simhash-redis"


def doc_url(page: str) -> str:
    """The address of a documentation page (its file name in docs/, e.g. "cli.md")."""
    return f"{REPOSITORY}/blob/main/docs/{page}"
