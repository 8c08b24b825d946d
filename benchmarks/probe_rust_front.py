"""A design probe (issue #35): near(text) of a plain index over HTTP from a Rust front end, against the
Python service, on the same index and texts, with the service benchmark's own clients.

Build the front end first (its own crate, the compiled core's kernels taken from native/src by path)::

    (cd benchmarks/probes/rust_front && nice cargo build --release)
    python -m benchmarks.probe_rust_front [--n 100000] [--queries 2000] [--rounds 3]

One private server holds N fingerprints and some texts, as `bench_service` loads them. The index's
configuration (table key formats and plans, map buckets, scheme) and the pinned Unicode data (the tables
and the parts of every flagged BMP code point) are written to files the front end reads at start. The
front end answers every text queried and a shortened copy of each, compared with
`SimhashIndex.near(text)` (ids, distances, fingerprints) and the service's JSON; a text it cannot
fingerprint without Python's `unicodedata` is answered 501 and counted.
Then, alternating `--rounds` times, the Python service (`simhash-redis serve`, 2 workers) and the front
end are measured as `bench_service --only latency` measures the service: the minimal keep-alive client
interleaved with the library's call, and wrk -t1 -c1 with the server's CPU a request, over the texts
both serve; and once, wrk with 64 connections (requests a second). Nothing of the library uses the front end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from benchmarks import corpus
from benchmarks.bench_service import INDEX, KeepAlive, _lua_bodies, latency, latency_wrk, service, wrk
from simhash_redis import SimhashIndex
from simhash_redis.fingerprinting import tokens
from simhash_redis.fingerprinting.normalize import PINNED
from simhash_redis.store.reads import reads_bucket_whole
from tests.servers import HOST, free_port

CRATE = Path(__file__).parent / "probes" / "rust_front"
BINARY = CRATE / "target" / "release" / "simhash-redis-rust-front"


def export_config(index: SimhashIndex, redis_url: str, port: int) -> dict[str, object]:
    """What the front end needs of the index, as JSON (it reads nothing but the index's data from Redis)."""
    config, keys = index.config, index.keys
    layout = config.layout
    if config.verification is not None or config.retention is not None:
        raise SystemExit("the probe serves a plain index without a retention window only")
    if not reads_bucket_whole(config.id_buckets, layout.key_bits):
        raise SystemExit("the probe reads the query's own map bucket whole: more map buckets needed")
    scheme = index.scheme
    address = urlparse(redis_url)
    return {
        "name": index.name,
        "f": config.f,
        "k": config.k,
        "id_buckets": config.id_buckets,
        "fp_prefix": keys.fp_form.prefix.decode(),
        "tables": [
            {
                "prefix": keys.table_form(t).prefix.decode(),
                "width": layout.hex_widths[t],
                "plan": [[int(v) for v in step] for step in plan],
            }
            for t, plan in enumerate(layout.plans)
        ],
        "scheme": {
            "features": scheme.features,
            "n": scheme.n,
            "binary": scheme.weighting == "binary",
            "seed": scheme.seed,
            "stopwords": list(scheme.stopwords),
        },
        "chunk_chars": tokens.CHUNK_CHARS,
        "redis": f"{address.hostname}:{address.port}",
        "listen": f"{HOST}:{port}",
    }


def export_unicode() -> bytes:
    """The pinned Unicode tables, then the parts of every flagged BMP code point (what the compiled core
    asks Python for on the way, given once here), in the front end's binary form."""
    uni = PINNED
    raw = uni.bmp16_tables[0]
    out = [raw.astype("<u8").tobytes(), uni.bmp_classes.astype(np.uint8).tobytes()]
    out.append(uni.bmp_spaces.astype(np.uint8).tobytes())
    flagged = np.flatnonzero((raw >> np.uint64(36)) & np.uint64(1)).tolist()
    out.append(struct.pack("<I", len(flagged)))
    for cp in flagged:
        parts = uni.image_parts(cp)
        if parts is None:
            out.append(struct.pack("<IB", cp, 0))
            continue
        cps, classes = [int(v) for v in parts[0].tolist()], [int(v) for v in parts[1].tolist()]
        image = [ord(char) for char in uni.nfkc_image(cp)]
        out.append(struct.pack(f"<IBI{len(cps)}I", cp, 1, len(cps), *cps))
        out.append(bytes(classes) + bytes([parts[2]]))
        out.append(struct.pack(f"<I{len(image)}I", len(image), *image))
    return b"".join(out)


@contextmanager
def front(index: SimhashIndex, redis_url: str) -> Iterator[tuple[int, int]]:
    """The Rust front end on a free port; its port and process id once it listens."""
    if not BINARY.exists():
        raise SystemExit(f"build the front end first: (cd {CRATE} && nice cargo build --release)")
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        config, unicode = Path(folder) / "config.json", Path(folder) / "unicode.bin"
        config.write_text(json.dumps(export_config(index, redis_url, port)))
        unicode.write_bytes(export_unicode())
        proc = subprocess.Popen([str(BINARY), str(config), str(unicode)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # "listening on ..."
            yield port, proc.pid
        finally:
            proc.terminate()
            proc.wait(30)


def check(port: int, service_port: int, index: SimhashIndex, texts: list[str]) -> list[str]:
    """Compare the front end's answers with the library's (and, as JSON, the service's): the texts it
    serves (those it answered 501 are left out)."""
    ours, theirs = KeepAlive(port), KeepAlive(service_port)
    path = f"/v1/indexes/{INDEX}/near"
    served, matches, refused, near_ones = [], 0, 0, 0
    # Each text, and a shortened copy: near-duplicates of stored texts, at distances above 0, most in
    # another map bucket than the query's (the lookup's second round trip).
    for n, text in enumerate([t for whole in texts for t in (whole, whole[: len(whole) * 9 // 10])]):
        request = KeepAlive.request(path, json.dumps({"text": text}).encode())
        try:
            answer = ours.send(request)
        except RuntimeError as err:
            if "501" not in str(err):
                raise
            refused += 1
            continue
        got = [(m["id"], m["distance"], int(m["fingerprint"], 16)) for m in json.loads(answer)["matches"]]
        want = [(m.id, m.distance, m.fingerprint) for m in index.near(text)]
        if got != want:
            raise SystemExit(f"the front end disagrees on {text[:60]!r}: {got} != {want}")
        if json.loads(theirs.send(request)) != json.loads(answer):
            raise SystemExit(f"the front end's JSON differs from the service's on {text[:60]!r}")
        matches += len(got)
        near_ones += sum(1 for m in want if m[1] > 0)
        if n % 2 == 0:
            served.append(text)
    ours.sock.close()
    theirs.sock.close()
    print(
        f"  check: {2 * len(texts) - refused} texts (and shortened copies) answered alike by the front "
        f"end, the library and the service ({matches} matches, {near_ones} at a distance above 0); "
        f"{refused} left to Python's unicodedata (501)",
        flush=True,
    )
    return served


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="fingerprints in the index")
    parser.add_argument("--queries", type=int, default=2_000, help="texts queried one by one")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each server")
    parser.add_argument("--seconds", type=float, default=3, help="seconds of each wrk measurement")
    args = parser.parse_args()
    command = "python -m benchmarks.probe_rust_front"
    print(f"  load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    with corpus.server(cpu=None) as server:
        index = SimhashIndex(server.client(), INDEX, k=3)
        print(f"  loading {args.n:,} fingerprints ...", flush=True)
        index.bulk_add_columns([([corpus.id_of(i) for i in range(args.n)], corpus.fingerprints(args.n))])
        texts = corpus.documents("en", args.queries)
        index.add_many([(f"text-{i}", t) for i, t in enumerate(texts[: args.queries // 2])])
        with service(server.url, 2) as (py_port, py_pid), front(index, server.url) as (rs_port, rs_pid):
            # Both measured on the texts both serve (the front end refuses those needing unicodedata).
            served = check(rs_port, py_port, index, texts)
            results: dict[str, dict[str, list[float]]] = {"python": {}, "rust": {}}
            for round_ in range(args.rounds):
                for name, port, pid in (("python", py_port, py_pid), ("rust", rs_port, rs_pid)):
                    got = results[name]
                    http, health, by_fp = latency(port, index, served, command)
                    lib = float(http.theirs or 0)
                    for key, value in (
                        ("http_p50", http.ours),
                        ("lib_p50", lib),
                        ("diff", http.ours - lib),
                        ("p99", http.extra["p99_us"]),
                        ("healthz_p50", health.ours),
                        ("fp_http_p50", by_fp.ours),
                        ("fp_lib_p50", float(by_fp.theirs or 0)),
                    ):
                        got.setdefault(key, []).append(value)
                    if shutil.which("wrk"):
                        one = latency_wrk(port, pid, index, served, args.seconds, command)
                        got.setdefault("wrk_p50", []).append(one.ours)
                        got.setdefault("wrk_lib_p50", []).append(float(one.theirs or 0))
                        got.setdefault("wrk_diff", []).append(one.ours - float(one.theirs or 0))
                        cpu = one.extra["worker_cpu_us_per_request"]
                        got.setdefault("cpu_us", []).append(statistics.median(cpu))
                    if shutil.which("wrk") and round_ == args.rounds - 1:
                        # Throughput as bench_service measures it (64 connections), once at the end.
                        bodies = [json.dumps({"text": t}) for t in served[:300]]
                        path = f"/v1/indexes/{INDEX}/near"
                        got["wrk_c64_req_s"] = [wrk(port, _lua_bodies(path, bodies), args.seconds)]
                    print(
                        f"  {name}: near(text) HTTP p50 {http.ours:.0f} us, library {lib:.0f} us, "
                        f"+{http.ours - lib:.0f} us",
                        flush=True,
                    )
    print(f"  load average at end: {os.getloadavg()[0]:.2f}", flush=True)
    for name, got in results.items():
        print(f"{name} (median of {args.rounds} rounds; each round's values in brackets):")
        for key, values in got.items():
            shown = ", ".join(f"{v:.0f}" for v in values)
            unit = "/s" if key.endswith("_s") else "us"
            print(f"  {key:13s} {statistics.median(values):7.0f} {unit}  [{shown}]")


if __name__ == "__main__":
    main()
