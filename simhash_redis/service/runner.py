"""Running the service: uvicorn with its worker processes, TLS, and a graceful stop on SIGTERM."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass

import uvicorn

from ..errors import InvalidArgument
from .config import ServiceConfig
from .protocol import PROTOCOL

__all__ = ["Listen", "serve"]

_APP = "simhash_redis.service.app:create_app"


@dataclass(frozen=True)
class Listen:
    """Where and how the service listens.

    Attributes:
        host: the address to bind (127.0.0.1: this machine only; 0.0.0.0: every interface).
        workers: worker processes (each an event loop serving requests concurrently).
        tls_cert, tls_key: a PEM certificate and key to serve HTTPS; None: plain HTTP.
        grace: seconds a stop (SIGTERM, Ctrl-C) waits for requests in flight before cutting them
            (rounded up to a whole second; 0: cut at once).
        keep_alive: seconds an idle keep-alive connection stays open.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    tls_cert: str | None = None
    tls_key: str | None = None
    grace: float = 30.0
    keep_alive: float = 5.0


def serve(config: ServiceConfig, listen: Listen) -> None:
    """Serve until SIGTERM or SIGINT, then stop taking connections and let requests in flight finish
    (InvalidArgument for a malformed configuration)."""
    config.check()
    if listen.workers < 1:
        raise InvalidArgument(f"workers must be >= 1, got {listen.workers}")
    if (listen.tls_cert is None) != (listen.tls_key is None):
        raise InvalidArgument("TLS needs both a certificate and its key (--tls-cert and --tls-key)")
    os.environ.update(config.to_env())  # workers start afresh and import the app by name
    metrics_dir = None
    if listen.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Each worker writes its metrics there, and /metrics (in any worker) adds them up.
        metrics_dir = tempfile.mkdtemp(prefix="simhash-redis-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        uvicorn.run(
            _APP,
            factory=True,
            http=PROTOCOL,  # uvicorn's httptools protocol, with a lone request's shortcuts
            host=listen.host,
            port=listen.port,
            workers=listen.workers,
            ssl_certfile=listen.tls_cert,
            ssl_keyfile=listen.tls_key,
            # uvicorn's wait takes whole seconds, and None (not 0) is its "for ever".
            timeout_graceful_shutdown=math.ceil(listen.grace),
            timeout_keep_alive=int(listen.keep_alive),
            access_log=False,  # the service writes its own, as JSON lines
            log_level="warning",
            server_header=False,
        )
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
