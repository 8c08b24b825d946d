"""HTTP servers for the service, measured bare: a trivial POST answered with a small JSON body, one
keep-alive connection, each server in turn.

Run from the repository root (needs the server extra; granian, FastAPI and wrk are measured where
installed: none is a dependency of the project)::

    python -m benchmarks.bench_http_servers [--rounds 5] [--requests 3000] [--seconds 3]
        [--servers uvicorn,uvicorn-explicit,uvicorn-service,starlette,fastapi,granian-asgi,granian-rsgi,uwsgi]
        [--granian-args "--runtime-mode st"] [--uwsgi PATH]

Each server runs one worker process serving a minimal app (no Redis): uvicorn with its defaults and
with ``loop="uvloop", http="httptools"`` said, under a raw ASGI app; uvicorn with the service's own
protocol (``service/runner.py``) under the raw ASGI app, a Starlette route (msgspec) and a FastAPI
route (pydantic); granian's ASGI and its RSGI interface (uvloop); uWSGI's HTTP/1.1 socket under a WSGI app
(a server in C calling the app on its own thread: the sync design). All are started at once and measured
round by round in a rotating order: a minimal client (bench_service's: a prepared request on a raw
socket) times each request, then ``wrk -t1 -c1 --latency`` (a client in C) posts for some seconds; the
server's CPU a request comes from /proc. Client and server share this machine's cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx

from benchmarks import percentile
from benchmarks.bench_service import KeepAlive, process_cpu
from tests.servers import HOST, free_port

ANSWER = b'{"matches":[],"took_us":1}'
REQUEST_BODY = b'{"text": "a short text to look up"}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]


async def asgi(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """The ASGI app: reads the request's body, answers ANSWER (and the lifespan's events)."""
    if scope["type"] == "lifespan":
        while True:
            event = await receive()
            kind = event["type"].rsplit(".", 1)[-1]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})


async def rsgi(scope: Any, protocol: Any) -> None:
    """The RSGI app (granian's own interface): the same answer."""
    await protocol()
    protocol.response_bytes(200, [("content-type", "application/json")], ANSWER)


def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """The WSGI app (uWSGI): reads the request's body, answers ANSWER."""
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    start_response("200 OK", [(k.decode(), v.decode()) for k, v in _HEADERS])
    return [ANSWER]


def starlette() -> Any:
    """The same answer from a Starlette route, the body decoded and the answer encoded by msgspec."""
    import msgspec
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def near(request: Request) -> Response:
        msgspec.json.decode(await request.body())
        return Response(msgspec.json.encode({"matches": [], "took_us": 1}), media_type="application/json")

    return Starlette(routes=[Route("/v1/indexes/{index}/near", near, methods=["POST"])])


def fastapi() -> Any:
    """The same answer from a FastAPI route, the body a pydantic model (FastAPI is no dependency of
    the project: installed by hand to measure)."""
    from fastapi import FastAPI
    from pydantic import BaseModel

    class Query(BaseModel):
        text: str

    app = FastAPI(openapi_url=None)

    async def near(index: str, query: Any) -> dict[str, Any]:
        return {"matches": [], "took_us": 1}

    near.__annotations__["query"] = Query  # a local class: its name would not resolve from a string
    app.post("/v1/indexes/{index}/near")(near)
    return app


_UVICORN = (
    "import uvicorn; uvicorn.run('benchmarks.bench_http_servers:{app}', port={port}, access_log=False, "
    "log_level='warning', server_header=False{extra})"
)
_SERVICE_PROTOCOL = ", http='simhash_redis.service.runner:Protocol'"


def _uvicorn(app: str = "asgi", extra: str = "") -> list[str]:
    return [sys.executable, "-c", _UVICORN.replace("{app}", app).replace("{extra}", extra)]


_GRANIAN = [sys.executable, "-m", "granian", "--log-level", "warning", "--no-ws", "--http", "1"]

#: Each server's command line, by name ({port} filled in).
SERVERS: dict[str, list[str]] = {
    "uvicorn": _uvicorn(),
    "uvicorn-explicit": _uvicorn(extra=", loop='uvloop', http='httptools'"),
    "uvicorn-service": _uvicorn(extra=_SERVICE_PROTOCOL),
    "starlette": _uvicorn("starlette", ", factory=True" + _SERVICE_PROTOCOL),
    "fastapi": _uvicorn("fastapi", ", factory=True" + _SERVICE_PROTOCOL),
    "granian-asgi": [
        *_GRANIAN,
        "--interface",
        "asgi",
        "--loop",
        "uvloop",
        "--port",
        "{port}",
        "benchmarks.bench_http_servers:asgi",
    ],
    "granian-rsgi": [
        *_GRANIAN,
        "--interface",
        "rsgi",
        "--loop",
        "uvloop",
        "--port",
        "{port}",
        "benchmarks.bench_http_servers:rsgi",
    ],
    # No master process: the one process started is the worker whose CPU is read.
    "uwsgi": [
        "uwsgi",
        "--http11-socket",
        f"{HOST}:{{port}}",
        "--home",
        sys.prefix,
        "--module",
        "benchmarks.bench_http_servers:wsgi",
        "--processes",
        "1",
        "--disable-logging",
    ],
}


#: The package each server needs beyond the server extra (uWSGI: its program, found by --uwsgi).
NEEDS = {"fastapi": "fastapi", "granian-asgi": "granian", "granian-rsgi": "granian"}


@contextmanager
def started(name: str) -> Iterator[tuple[int, int]]:
    """A server by name on a free port: its port and process id once it answers."""
    port = free_port()
    proc = subprocess.Popen([part.replace("{port}", str(port)) for part in SERVERS[name]])
    try:
        for _ in range(400):
            try:
                httpx.post(f"http://{HOST}:{port}/", content=REQUEST_BODY)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode})") from None
                time.sleep(0.05)
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def timed_requests(port: int, count: int) -> list[float]:
    """Microseconds of each of `count` POSTs on one keep-alive connection (after 200 unmeasured)."""
    client = KeepAlive(port)
    request = KeepAlive.request("/v1/indexes/bench/near", REQUEST_BODY)
    for _ in range(200):
        client.send(request)
    clock = time.perf_counter_ns
    spent = []
    for _ in range(count):
        t = clock()
        client.send(request)
        spent.append((clock() - t) / 1000)
    client.sock.close()
    return spent


_WRK_LUA = f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{REQUEST_BODY.decode()}'
"""


def wrk_percentiles(port: int, seconds: float) -> tuple[float, float, int]:
    """wrk -t1 -c1 --latency: p50 and p99 in microseconds, and how many requests it made."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write(_WRK_LUA)
    try:
        out = subprocess.run(
            [
                *("wrk", "-t1", "-c1", f"-d{max(1, round(seconds))}s", "--latency", "-s", lua.name),
                f"http://{HOST}:{port}/v1/indexes/bench/near",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        os.unlink(lua.name)
    units = {"us": 1.0, "ms": 1e3, "s": 1e6}
    # the latency distribution's lines
    found = {p: re.search(rf"\b{p}%\s+([\d.]+)(us|ms|s)\b", out) for p in ("50", "99")}
    count = re.search(r"(\d+) requests in", out)
    if None in found.values() or count is None or "Non-2xx" in out:
        raise RuntimeError(f"unexpected wrk report:\n{out}")
    p50, p99 = (float(m.group(1)) * units[m.group(2)] for m in found.values() if m is not None)
    return p50, p99, int(count.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=3000, help="timed requests a server a round")
    parser.add_argument("--seconds", type=float, default=3, help="seconds of wrk a server a round")
    parser.add_argument(
        "--servers", default=",".join(SERVERS), help="comma-separated, of: " + ", ".join(SERVERS)
    )
    parser.add_argument(
        "--granian-args", default="", help='more options for granian, e.g. "--runtime-mode st"'
    )
    parser.add_argument("--uwsgi", default=shutil.which("uwsgi"), help="uWSGI's program (pip install uwsgi)")
    args = parser.parse_args()
    SERVERS["uwsgi"][0] = args.uwsgi or "uwsgi"
    for name in ("granian-asgi", "granian-rsgi"):  # before the app, the command's last argument
        SERVERS[name][-1:-1] = args.granian_args.split()
    names = [n for n in args.servers.split(",") if n]
    missing = [n for n in names if n in NEEDS and importlib.util.find_spec(NEEDS[n]) is None]
    missing += ["uwsgi"] if "uwsgi" in names and args.uwsgi is None else []
    if missing:
        print(f"  not installed, not measured: {', '.join(missing)}", flush=True)
        names = [n for n in names if n not in missing]
    has_wrk = shutil.which("wrk") is not None
    figures: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    with ExitStack() as stack:
        ports = {n: stack.enter_context(started(n)) for n in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                port, pid = ports[name]
                used = process_cpu(pid)
                spent = timed_requests(port, args.requests)
                cpu = (process_cpu(pid) - used) * 1e6 / (args.requests + 200)
                row = figures[name]
                row.setdefault("p50", []).append(percentile(spent, 50))
                row.setdefault("p99", []).append(percentile(spent, 99))
                row.setdefault("cpu", []).append(cpu)
                if has_wrk:
                    used = process_cpu(pid)
                    p50, p99, count = wrk_percentiles(port, args.seconds)
                    row.setdefault("wrk_p50", []).append(p50)
                    row.setdefault("wrk_p99", []).append(p99)
                    row.setdefault("wrk_cpu", []).append((process_cpu(pid) - used) * 1e6 / max(count, 1))
            print(
                f"  round {r + 1} of {args.rounds} done (load average {os.getloadavg()[0]:.2f})", flush=True
            )
    columns = ["p50", "p99", "cpu"] + (["wrk_p50", "wrk_p99", "wrk_cpu"] if has_wrk else [])
    print(f"{'server':18}" + "".join(f"{c:>10}" for c in columns) + "   (us; medians of the rounds)")
    for name in names:
        row = figures[name]
        print(f"{name:18}" + "".join(f"{statistics.median(row[c]):10.1f}" for c in columns))
    for name in names:
        print(
            f"  {name} by round: "
            + "; ".join(f"{c} " + " ".join(f"{v:.0f}" for v in figures[name][c]) for c in columns)
        )


if __name__ == "__main__":
    main()
