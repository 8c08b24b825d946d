"""The index service: an HTTP/JSON API over the library, so a worker in any language can use an index.

``simhash-redis serve`` runs it (docs/service.md). It needs the ``server`` extra
(``pip install '.[server]'`` in a checkout): Starlette and msgspec on uvicorn, prometheus_client. Every
import of those packages lives in this package, so the rest of the library never needs them.

The service keeps no state of its own: every worker process opens the indexes it is asked for on the
configured Redis, and any number of them (and of replicas) serve the same indexes, with the library's
guarantees (of several racing ``add_if_new`` calls for near-duplicates, exactly one stores its document).
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
