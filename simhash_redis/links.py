"""Where a reader finds the documentation (a wheel ships no docs/ folder): addresses on the repository URL."""

from __future__ import annotations

__all__ = ["REPOSITORY", "doc_url"]

#: The project's repository, as pyproject.toml's [project.urls] names it.
REPOSITORY = "https://github.com/simhash-redis/simhash-redis"


def doc_url(page: str) -> str:
    """The address of a documentation page (its file name in docs/, e.g. "cli.md")."""
    return f"{REPOSITORY}/blob/main/docs/{page}"
