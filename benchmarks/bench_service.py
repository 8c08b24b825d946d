"""The index service over HTTP beside the library called in-process, on the same index, in the same run.

Run from the repository root (needs the server extra, and wrk for the throughput figures)::

    python -m benchmarks.bench_service [--n 100000] [--queries 2000] [--seconds 5] [--workers 2]
        [--only latency|throughput|batches]

One private server on loopback holds N fingerprints and some texts; `simhash-redis serve` runs on it
with W worker processes. Latency: a near() of a text over HTTP (one keep-alive connection, a minimal
client: a prepared request on a raw socket, the reply read by Content-Length; its few microseconds of
Python are in the figure) interleaved with `SimhashIndex.near()` of the same text in this process; and
the same from wrk on one connection (``wrk -t1 -c1 --latency``, a client in C), alternating with the
library's calls in a loop, 3 rounds (with the CPU a request of the service's workers, and a call of the
library's). Throughput: wrk (``apt-get install wrk``) with 64 keep-alive connections
posting near and add_if_new of one document each, against the library's calls in a loop on one thread.
Batches: add_if_new/batch and near/batch as JSON arrays, and a JSON Lines stream, in documents a second
(for add_if_new also the CPU a document of the service's workers and of the server: steadier than a rate
when other jobs share the machine).
Everything (server, service, load generator) shares this machine's cores: the figures are of the whole.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks import Figure, corpus, percentile, rate, server_cpu
from simhash_redis import SimhashIndex
from simhash_redis.codec import format_fingerprint
from tests.servers import HOST, free_port

INDEX = "bench"
WRK_CONNECTIONS = 64


class KeepAlive:
    """A minimal HTTP/1.1 client on one keep-alive connection (requests built ahead, replies read by
    Content-Length): what a compiled client in another language costs, not what httpx does."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    @staticmethod
    def request(path: str, body: bytes) -> bytes:
        head = f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body

    def send(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            rest += self.sock.recv(65536)
        self.buffer = rest[length:]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"{head.splitlines()[0]!r}: {rest[:length]!r}")
        return rest[:length]


def process_cpu(pid: int) -> float:
    """The CPU seconds (user + sys) a process and its children (the service's workers) used so far, from
    /proc (0 where there is none)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    total = 0.0
    for one in [pid, *map(int, children)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@contextmanager
def service(url: str, workers: int) -> Iterator[tuple[int, int]]:
    """`simhash-redis serve` on a free port; its port and process id once it answers."""
    port = free_port()
    args = [sys.executable, "-m", "simhash_redis.cli", "--redis-url", url, "serve", "--port", str(port)]
    args += ["--workers", str(workers), "--no-access-log"]
    proc = subprocess.Popen(args)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://{HOST}:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def latency(port: int, index: SimhashIndex, texts: list[str], command: str) -> list[Figure]:
    """near(text) over HTTP and in-process, interleaved."""
    client = KeepAlive(port)
    path = f"/v1/indexes/{INDEX}/near"
    bodies = [KeepAlive.request(path, json.dumps({"text": t}).encode()) for t in texts]
    fps = [index.fingerprint(t) for t in texts]
    by_fp = [
        KeepAlive.request(path, json.dumps({"fingerprint": format_fingerprint(fp, 64)}).encode())
        for fp in fps
    ]
    for body, text in zip(bodies[:200], texts[:200], strict=True):  # warm both, and check they agree
        answer = json.loads(client.send(body))
        assert [m["id"] for m in answer["matches"]] == [m.id for m in index.near(text)]
    clock = time.perf_counter_ns
    http_text, lib_text, http_fp, lib_fp, floor = [], [], [], [], []
    health = f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    for body, fp_body, text, fp in zip(bodies, by_fp, texts, fps, strict=True):
        t = clock()
        client.send(health)  # the HTTP round trip alone: no Redis, no JSON
        floor.append((clock() - t) / 1000)
        t0 = clock()
        client.send(body)
        t1 = clock()
        index.near(text)
        t2 = clock()
        client.send(fp_body)
        t3 = clock()
        index.near(fp)
        t4 = clock()
        http_text.append((t1 - t0) / 1000)
        lib_text.append((t2 - t1) / 1000)
        http_fp.append((t3 - t2) / 1000)
        lib_fp.append((t4 - t3) / 1000)
    client.sock.close()  # the worker's only connection from now on is wrk's (it answers a lone one at once)
    lib50 = percentile(lib_text, 50)
    ours50 = percentile(http_text, 50)
    return [
        Figure(
            "near(text) over HTTP p50, keep-alive",
            ours50,
            "us",
            "SimhashIndex.near(text) p50 in-process",
            lib50,
            higher_is_better=False,
            target="<= library p50 + 150 us",
            met=ours50 <= lib50 + 150,
            command=command,
            extra={"p99_us": percentile(http_text, 99), "library_p99_us": percentile(lib_text, 99)},
        ),
        Figure(
            "GET /healthz p50 (the HTTP round trip alone)",
            percentile(floor, 50),
            "us",
            "one Redis round trip: near(fp) p50 in-process",
            percentile(lib_fp, 50),
            higher_is_better=False,
            command=command,
        ),
        Figure(
            "near(fingerprint) over HTTP p50, keep-alive",
            percentile(http_fp, 50),
            "us",
            "SimhashIndex.near(fp) p50 in-process",
            percentile(lib_fp, 50),
            higher_is_better=False,
            command=command,
        ),
    ]


def _wrk(port: int, script: str, seconds: float, connections: int, *extra: str) -> str:
    """wrk's report of one run with one thread."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write(script)
    try:
        out = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                *extra,
                "-s",
                lua.name,
                f"http://{HOST}:{port}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.unlink(lua.name)
    if out.returncode:
        raise RuntimeError(f"wrk failed: {out.stderr or out.stdout}")
    if "Non-2xx" in out.stdout:
        raise RuntimeError(f"wrk saw errors:\n{out.stdout}")
    return out.stdout


def wrk(port: int, script: str, seconds: float) -> float:
    """Requests a second that wrk reached with one thread and WRK_CONNECTIONS connections."""
    out = _wrk(port, script, seconds, WRK_CONNECTIONS)
    return float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))  # type: ignore[union-attr]


def wrk_p50(port: int, script: str, seconds: float) -> tuple[float, int]:
    """The p50 in microseconds of wrk's requests on one keep-alive connection (wrk -t1 -c1 --latency),
    and how many requests it made."""
    out = _wrk(port, script, seconds, 1, "--latency")
    found = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    count = re.search(r"(\d+) requests in", out)
    if found is None or count is None:
        raise RuntimeError(f"no latency distribution in wrk's report:\n{out}")
    return float(found.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[found.group(2)], int(count.group(1))


def _lua_bodies(path: str, bodies: list[str]) -> str:
    quoted = ",\n".join(json.dumps(b) for b in bodies)
    return f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local bodies = {{{quoted}}}
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, "{path}", nil, bodies[(i % #bodies) + 1])
end
"""


def latency_wrk(
    port: int, pid: int, index: SimhashIndex, texts: list[str], seconds: float, command: str
) -> Figure:
    """near(text) p50 from wrk on one keep-alive connection (a client in C: no Python in the client's
    figure), against the library's near(text) p50 over the same texts, alternating, 3 rounds (medians);
    also the service's CPU a request (its workers', from /proc: steadier than a latency when other jobs
    share the machine) against the library's CPU a call."""
    path = f"/v1/indexes/{INDEX}/near"
    script = _lua_bodies(path, [json.dumps({"text": t}) for t in texts[:300]])
    ours, theirs, cpu, lib_cpu = [], [], [], []
    for _ in range(3):
        used = process_cpu(pid)
        p50, count = wrk_p50(port, script, max(1.0, seconds / 3))
        ours.append(p50)
        cpu.append((process_cpu(pid) - used) * 1e6 / max(count, 1))
        spent: list[float] = []
        started = time.process_time()
        for text in texts[:300] * 2:
            start = time.perf_counter_ns()
            index.near(text)
            spent.append((time.perf_counter_ns() - start) / 1000)
        lib_cpu.append((time.process_time() - started) * 1e6 / 600)
        theirs.append(percentile(spent, 50))
    http50, lib50 = statistics.median(ours), statistics.median(theirs)
    print(
        f"  near(text) from wrk -t1 -c1, CPU a request: service workers {statistics.median(cpu):.0f} us, "
        f"library in-process {statistics.median(lib_cpu):.0f} us",
        flush=True,
    )
    return Figure(
        "near(text) over HTTP p50, wrk -t1 -c1",
        http50,
        "us",
        "SimhashIndex.near(text) p50 in a loop",
        lib50,
        higher_is_better=False,
        target="<= library p50 + 150 us",
        met=http50 <= lib50 + 150,
        command=command,
        extra={
            "rounds_us": ours,
            "library_rounds_us": theirs,
            "worker_cpu_us_per_request": cpu,
            "library_cpu_us_per_call": lib_cpu,
        },
    )


ADD_IF_NEW_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local i = 0
local id = tostring(math.random(1, 1000000000))
request = function()
  i = i + 1
  -- a new id and a random fingerprint (random in every table's block: a counter in some bits would
  -- put every document in one bucket of a table, and make every write contend for it)
  local fp = string.format("0x%04x%04x%04x%04x", math.random(0, 0xffff), math.random(0, 0xffff),
    math.random(0, 0xffff), math.random(0, 0xffff))
  return wrk.format(nil, "/v1/indexes/INDEX/add_if_new", nil,
    '{"id": "wrk-' .. id .. '-' .. i .. '", "fingerprint": "' .. fp .. '"}')
end
"""


def throughput(
    port: int, index: SimhashIndex, texts: list[str], seconds: float, command: str
) -> list[Figure]:
    """Single-document requests a second (wrk) against the library's calls in a loop."""
    fps = [format_fingerprint(index.fingerprint(t), 64) for t in texts]
    path = f"/v1/indexes/{INDEX}/near"
    near_fp = wrk(port, _lua_bodies(path, [json.dumps({"fingerprint": fp}) for fp in fps]), seconds)
    near_text = wrk(port, _lua_bodies(path, [json.dumps({"text": t}) for t in texts[:300]]), seconds)
    adds = wrk(port, ADD_IF_NEW_LUA.replace("INDEX", INDEX), seconds)
    start = time.perf_counter()
    ints = [int(fp, 16) for fp in fps]
    for fp in ints:
        index.near(fp)
    lib_fp = rate(len(ints), time.perf_counter() - start)
    start = time.perf_counter()
    for t in texts[:300]:
        index.near(t)
    lib_text = rate(300, time.perf_counter() - start)
    fresh = corpus.fingerprints(2000, seed=corpus.SEED + 97)
    start = time.perf_counter()
    for i, fp in enumerate(fresh):
        index.add_if_new(f"lib-single-{i}", fp)
    lib_add = rate(len(fresh), time.perf_counter() - start)
    target = ">= 5,000 requests/s on 2 cores"
    return [
        Figure(
            "near(fingerprint) requests/s over HTTP (wrk)",
            near_fp,
            "req/s",
            "library near(fp) one thread",
            lib_fp,
            target=target,
            met=near_fp >= 5000,
            command=command,
        ),
        Figure(
            "near(text 3.5 KB) requests/s over HTTP (wrk)",
            near_text,
            "req/s",
            "library near(text) one thread",
            lib_text,
            command=command,
        ),
        Figure(
            "add_if_new(fingerprint) requests/s over HTTP (wrk)",
            adds,
            "req/s",
            "library add_if_new(fp) one thread",
            lib_add,
            target=target,
            met=adds >= 5000,
            command=command,
        ),
    ]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def batches(port: int, pid: int, index: SimhashIndex, texts: list[str], command: str) -> list[Figure]:
    """Batch endpoints in documents a second, against the library's batch calls on the same documents
    (new ids and fingerprints for each, so both store what they are given); for add_if_new, also the
    CPU a document of the service's workers and of the server (steadier than rates on a shared machine)."""
    size, rounds = 1000, 10
    base = f"http://{HOST}:{port}/v1/indexes/{INDEX}"
    fps = corpus.fingerprints(size * rounds * 4, seed=corpus.SEED + 99)
    ours: list[list[int]] = [fps[i * size : (i + 1) * size] for i in range(rounds)]
    lib_fps = [fps[(rounds + i) * size : (rounds + i + 1) * size] for i in range(rounds)]
    stream_fps = fps[2 * rounds * size :]
    arrays = [
        json.dumps([{"id": f"arr-{r}-{i}", "fingerprint": hex(fp)} for i, fp in enumerate(part)]).encode()
        for r, part in enumerate(ours)
    ]
    lines = "".join(
        json.dumps({"id": f"jl-{i}", "fingerprint": hex(fp)}) + "\n" for i, fp in enumerate(stream_fps)
    )
    near_fps = json.dumps([{"fingerprint": hex(fp)} for fp in lib_fps[0]]).encode()
    near_texts = json.dumps([{"text": t} for t in texts[:size]]).encode()
    lib_pairs = [[(f"lib-{r}-{i}", fp) for i, fp in enumerate(part)] for r, part in enumerate(lib_fps)]
    with httpx.Client(timeout=300) as http:

        def post(op: str, body: bytes, kind: str = "application/json") -> None:
            http.post(f"{base}/{op}/batch", content=body, headers={"content-type": kind}).raise_for_status()

        post("near", near_texts)  # warm: the worker's text engine and connections
        cpu: dict[str, dict[str, float]] = {}

        def costed(name: str, count: int, call: Callable[[], object]) -> float:
            """Documents a second of a call, its CPU a document noted in `cpu`."""
            worker, server = process_cpu(pid), server_cpu(index.client)
            seconds = _timed(call)
            cpu[name] = {
                "worker_cpu_us_per_doc": (process_cpu(pid) - worker) * 1e6 / count,
                "server_cpu_us_per_doc": (server_cpu(index.client) - server) * 1e6 / count,
            }
            return count / seconds

        array = costed("array", size * rounds, lambda: [post("add_if_new", body) for body in arrays])
        lib = size * rounds / _timed(lambda: [index.add_many(pairs, unique=True) for pairs in lib_pairs])
        stream = costed(
            "lines", len(stream_fps), lambda: post("add_if_new", lines.encode(), "application/x-ndjson")
        )
        for name, used in cpu.items():
            per_doc = ", ".join(f"{key.split('_cpu')[0]} {value:.1f} us" for key, value in used.items())
            print(f"  add_if_new/batch ({name}) CPU a document: {per_doc}", flush=True)
        near_fp = size / _timed(lambda: post("near", near_fps))
        lib_near_fp = size / _timed(lambda: index.near_many(lib_fps[0]))
        near_text = size / _timed(lambda: post("near", near_texts))
        lib_near_text = size / _timed(lambda: index.near_many(texts[:size]))
    target = ">= 20,000 documents/s"

    def figure(
        name: str, value: float, alternative: str, theirs: float, extra: dict[str, float] | None = None
    ) -> Figure:
        return Figure(
            name,
            value,
            "docs/s",
            alternative,
            theirs,
            target=target,
            met=value >= 20000,
            command=command,
            extra=extra or {},
        )

    return [
        figure(
            "add_if_new/batch, JSON arrays of 1,000 fps", array, "library add_many(unique)", lib, cpu["array"]
        ),
        figure(
            f"add_if_new/batch, JSON Lines of {len(stream_fps):,} fps",
            stream,
            "library add_many(unique)",
            lib,
            cpu["lines"],
        ),
        figure("near/batch of 1,000 fingerprints", near_fp, "library near_many(fps)", lib_near_fp),
        figure("near/batch of 1,000 texts (3.5 KB)", near_text, "library near_many(texts)", lib_near_text),
    ]


SECTIONS = ("latency", "throughput", "batches")


def run(
    n: int, count: int, seconds: float, workers: int, command: str, only: tuple[str, ...] = SECTIONS
) -> list[Figure]:
    """Load the index on a private server, start the service on it, and measure both (the sections in
    `only`: latency, throughput, batches)."""
    with corpus.server(cpu=None) as server:
        index = SimhashIndex(server.client(), INDEX, k=3)
        print(f"  loading {n:,} fingerprints ...", flush=True)
        index.bulk_add_columns([([corpus.id_of(i) for i in range(n)], corpus.fingerprints(n))])
        texts = corpus.documents("en", count)
        index.add_many([(f"text-{i}", t) for i, t in enumerate(texts[: count // 2])])
        figures = []
        with service(server.url, workers) as (port, pid):
            if "latency" in only:
                figures += latency(port, index, texts, command)
            if not shutil.which("wrk"):
                print("  wrk is not installed (apt-get install wrk): no wrk figures", flush=True)
            elif "latency" in only:
                figures.append(latency_wrk(port, pid, index, texts, seconds, command))
            if shutil.which("wrk") and "throughput" in only:
                figures += throughput(port, index, texts, seconds, command)
            if "batches" in only:
                figures += batches(port, pid, index, texts, command)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="fingerprints in the index")
    parser.add_argument("--queries", type=int, default=2_000, help="texts queried one by one")
    parser.add_argument("--seconds", type=float, default=5, help="seconds of each wrk run")
    parser.add_argument("--workers", type=int, default=2, help="service worker processes")
    parser.add_argument(
        "--only",
        choices=SECTIONS,
        action="append",
        help="run only this section (repeat for several; default: all)",
    )
    args = parser.parse_args()
    only = tuple(args.only or SECTIONS)
    command = "python -m benchmarks.bench_service" + "".join(f" --only {s}" for s in args.only or ())
    for figure in run(args.n, args.queries, args.seconds, args.workers, command, only):
        print(figure.line(), flush=True)


if __name__ == "__main__":
    main()
