"""The index service (``simhash-redis serve``, docs/service.md): an HTTP/JSON API over the library.

It needs the ``server`` extra; every import of its packages lives in this package.
"""

from __future__ import annotations

from importlib import import_module

from .config import ServiceConfig

__all__ = ["ServiceConfig", "create_app", "serve"]


def __getattr__(name: str) -> object:
    # The app and the runner import the server packages: only when asked for.
    if name in ("create_app", "serve"):
        return getattr(import_module(".app" if name == "create_app" else ".runner", __name__), name)
    raise AttributeError(name)
