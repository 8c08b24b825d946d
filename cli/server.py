"""`server start|stop|status|url|cli`: the embedded default server."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from simhash_redis.tools.server import EmbeddedServer, find_client_binary, find_server_binary

from .common import echo_json, fail, registrar
from .options import JsonOut

__all__ = ["register", "server_app"]

server_app = typer.Typer(
    help="Manage the embedded server used when neither --redis-url nor SIMHASH_REDIS_URL is given.",
    no_args_is_help=True,
)


@server_app.command("start")
def start(
    port: Annotated[
        int | None, typer.Option("--port", min=1, max=65535, help="Port (default 6390, or a free one).")
    ] = None,
) -> None:
    """Start the embedded server (or find it running) and print its URL.

    \b
    Example:
      simhash-redis server start

    \f
    Args:
        port: the port of a newly started server.

    Raises:
        typer.Exit: it runs already, on another port than --port.
        RedisUnavailable: the server cannot be started.
    """
    url = EmbeddedServer().start(port)
    if port is not None and not url.endswith(f":{port}"):
        raise fail(
            f"the embedded server runs already, at {url}: stop it first (simhash-redis server stop) to "
            f"start it on port {port}"
        )
    typer.echo(url)


@server_app.command("stop")
def stop() -> None:
    """Stop the embedded server (its data stays on disk for the next start)."""
    typer.echo("stopped" if EmbeddedServer().stop() else "not running")


@server_app.command("status")
def status(json_out: JsonOut = False) -> None:
    """Print whether the embedded server runs, its pid, URL, version and data directory.

    \f
    Args:
        json_out: print JSON.
    """
    s = EmbeddedServer().status()
    if json_out:
        echo_json(
            {
                "running": s.running,
                "pid": s.pid,
                "port": s.port,
                "url": s.url,
                "version": s.version,
                "data_dir": str(s.data_dir),
            }
        )
        return
    if s.running:
        typer.echo(f"running: pid {s.pid}, {s.url}, version {s.version}, data in {s.data_dir}")
    else:
        typer.echo(f"not running (data in {s.data_dir})")


@server_app.command("url")
def url() -> None:
    """Print the embedded server's URL; exit code 1 when it is not running.

    \b
    Example:
      export SIMHASH_REDIS_URL=$(simhash-redis server url)

    \f
    Raises:
        typer.Exit: 1, the server is not running.
    """
    found = EmbeddedServer().status().url
    if found is None:
        raise fail("the embedded server is not running: simhash-redis server start")
    typer.echo(found)


@server_app.command("cli", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def cli(ctx: typer.Context) -> None:
    """Open the bundled valkey-cli (or redis-cli) on the embedded server; arguments go to it.

    The docs' redis-cli recipes work as written this way, with no client installed.

    \b
    Examples:
      simhash-redis server cli
      simhash-redis server cli --scan --pattern 'simhash:news:t0:*'
      simhash-redis server cli HGETALL simhash:news:meta

    \f
    Args:
        ctx: the command's context; its extra arguments are the client's.

    Raises:
        typer.Exit: 1, the server is not running or no client is installed.
    """
    server = EmbeddedServer()
    found = server.status()
    if not found.running or found.port is None:
        raise fail("the embedded server is not running: simhash-redis server start")
    client = find_client_binary(find_server_binary())
    if client is None:
        raise fail("no valkey-cli or redis-cli found beside the server or on PATH")
    os.execv(client, [client, "-h", "127.0.0.1", "-p", str(found.port), *ctx.args])


#: Adds this module's commands to the app.
register = registrar({"server": server_app})
