"""The index service (``simhash-redis serve``, docs/service.md): an HTTP/JSON API over the library.

It needs the ``server`` extra; every import of its packages lives in this package.
"""

from __future__ import annotations

from .config import ServiceConfig

__all__ = ["ServiceConfig", "create_app", "serve"]


def __getattr__(name: str) -> object:
    # The app and the runner import the server packages: only when asked for.
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "serve":
        from .runner import serve

        return serve
    raise AttributeError(name)
