"""`serve`: the HTTP/JSON index service (simhash_redis.service), for workers in any language."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from simhash_redis.links import doc_url

from .common import ExitCode, fail, settings

__all__ = ["register", "serve"]

_TOKEN_ENV = "SIMHASH_REDIS_TOKEN"
#: uvicorn's exit status when it cannot start (its config.STARTUP_FAILURE: only the service imports
#: uvicorn).
_STARTUP_FAILURE = 3


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8080,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Worker processes.")] = 1,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help=f"A file holding the bearer token every /v1 call must carry (or set {_TOKEN_ENV}). "
            "Default: no token.",
            show_default=False,
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="PEM certificate, to serve HTTPS.", show_default=False)
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", help="PEM private key of --tls-cert.", show_default=False)
    ] = None,
    max_body: Annotated[
        int,
        typer.Option("--max-body", min=1, help="Largest request body in bytes (JSON Lines: largest line)."),
    ] = 16 * 1024 * 1024,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Seconds a single-document request may wait behind others for its answer (then 504), "
            "each part of a request body may take to come (then 408), and a stalled Redis may hold a call "
            "(socket timeouts of at most this, and no retry after it: then 504 redis_timeout).",
        ),
    ] = 30.0,
    grace: Annotated[
        float, typer.Option("--grace", min=0, help="Seconds a stop waits for requests in flight.")
    ] = 30.0,
    no_create: Annotated[
        bool, typer.Option("--no-create", help="Refuse writes to an unknown index instead of creating it.")
    ] = False,
    no_access_log: Annotated[
        bool, typer.Option("--no-access-log", help="No JSON access log line per request on stderr.")
    ] = False,
) -> None:
    """Serve the indexes over HTTP/JSON: near, add, add_if_new, remove, get, fingerprint, stats.

    Any index on the server can be used by name; a write to a missing index creates it with the
    global options (--k, --retention, ...): verified for texts unless --plain, plain for precomputed
    fingerprints unless --verified. An existing index keeps its mode (refused if --plain or --verified
    asks for the other). Stop with SIGTERM or Ctrl-C: requests in flight finish first. Needs the
    server extra: `pip install '.[server]'` in a checkout.

    \b
    Examples:
      simhash-redis serve --port 8080 --workers 2
      curl -s localhost:8080/v1/indexes/news/add_if_new -d '{"id": "a", "text": "some text"}'

    \f
    Args:
        ctx: the command's context (global settings).
        host, port, workers, token_file, tls_cert, tls_key, max_body, timeout, grace, no_create,
            no_access_log: as the options say.

    Raises:
        typer.Exit: the server extra is missing, or the token file cannot be read (usage); uvicorn
            cannot start (a port in use, say: error).
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    try:
        from simhash_redis.service import ServiceConfig
        from simhash_redis.service.runner import Listen
        from simhash_redis.service.runner import serve as run
    except ImportError as exc:
        raise fail(
            f"serve needs the server extra ({exc.name} is missing): `pip install '.[server]'` in a checkout "
            "of simhash-redis",
            ExitCode.USAGE,
        ) from None
    token = os.environ.get(_TOKEN_ENV) or None
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise fail(
                f"cannot read --token-file {token_file}: {exc.strerror or exc}", ExitCode.USAGE
            ) from None
        if not token:
            raise fail(f"--token-file {token_file} is empty", ExitCode.USAGE)
    state = settings(ctx)
    config = ServiceConfig(
        redis_url=state.url(),
        index=state.index_name,
        k=state.k,
        f=state.f,
        layout=state.layout,
        scheme=state.scheme,
        verified=False if state.plain else (True if state.verified else None),
        threshold=state.threshold,
        band_buckets=state.band_buckets,
        retention=state.retention,
        sliding=state.sliding,
        id_buckets=state.id_buckets,
        create=not no_create,
        token=token,
        max_body=max_body,
        timeout=timeout,
        access_log=not no_access_log,
    )
    listen = Listen(
        host=host,
        port=port,
        workers=workers,
        tls_cert=None if tls_cert is None else str(tls_cert),
        tls_key=None if tls_key is None else str(tls_key),
        grace=grace,
    )
    try:
        run(config.check(), listen)
    except SystemExit as exc:
        if exc.code != _STARTUP_FAILURE:
            raise
        # uvicorn logged why (a port in use, a certificate it cannot read); its own status, 3, is ours
        # for bad input.
        raise fail(f"cannot serve on {host}:{port}: the line above says why", ExitCode.ERROR) from None


def register(app: typer.Typer) -> None:
    """Add `serve` to the app, with the address of its page.

    Args:
        app: the command's app.
    """
    app.command("serve", epilog=f"\b\nDocs:\n  {doc_url('service.md')}")(serve)
