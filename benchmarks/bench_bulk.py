"""The grouped bulk path (`SimhashIndex.bulk_add`) against the other ways of loading, in one run.

Run from the repository root::

    python -m benchmarks.bench_bulk [--n 1000000] [--window 1000000] [--repeat 1]

Every variant writes the same n (16-byte id, precomputed 64-bit fingerprint) documents into an emptied
private server (pinned to CPU 1; this client to CPU 0), k = 3, 4 tables, and reports documents per
wall-clock second, the server's CPU per document and this process's CPU per document (measured by
`bench_write_cost.measure`, whose code the variants other than bulk_add are):

* ``bulk_add``: `SimhashIndex.bulk_add` of the (id, fingerprint) pairs, end to end (checks, grouping,
  the five steps, their counts included), windows of `--window`;
* ``redis_py``: the naive redis-py pipeline of the 4 SADDs per fingerprint, batches of 1,000 (the old
  anchor: no id map, no fingerprint map);
* ``add_many``: `SimhashIndex.add_many` of all the pairs (the atomic path: one script per 250);
* ``cli_load``: ``simhash-redis load`` of the same pairs from a JSON Lines file (``{"id": ..., "fp":
  "<16 hex digits>"}``), wall clock of the whole command, process start included, on every core (the
  bulk path, `--window`);
* ``raw_grouped``: the plain writes of the same data grouped by key over all n documents, one variadic
  HSET or SADD per key, no atomicity, no reads, no counts: the server's ceiling for this data model.

It prints the ratios of bulk_add to each. The targets (issue "Bulk import at the server's limit"):
>= 4x redis_py and >= 0.7x raw_grouped (>= 150k fps/s on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from benchmarks import corpus, server_cpu
from benchmarks.bench_write_cost import measure
from simhash_redis import SimhashIndex

VARIANTS = ("bulk_add", "cli_load", "redis_py", "add_many", "raw_grouped")
# bench_write_cost's name of each variant.
_THEIRS = {"redis_py": "redis_py", "add_many": "add_many_all", "raw_grouped": "raw_grouped"}


def measure_bulk(client: redis.Redis, fps: list[int], window: int) -> dict[str, Any]:
    """bulk_add of n (id, fingerprint) pairs on an emptied server; its figures, as `measure` gives them."""
    client.flushall()
    client.config_resetstat()
    n = len(fps)
    index = SimhashIndex(client, "cost", k=3)
    items = [(corpus.id_of(i), fp) for i, fp in enumerate(fps)]
    server0 = server_cpu(client)
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    index.bulk_add(items, window=window)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    server = server_cpu(client) - server0
    docs = index.count()[0]
    assert docs == n, (docs, n)
    return {
        "variant": "bulk_add",
        "fps_s": n / wall,
        "server_us": server / n * 1e6,
        "script_us": None,
        "client_us": cpu / n * 1e6,
        "keys": client.dbsize(),
        "docs": docs,
    }


def measure_cli(client: redis.Redis, url: str, fps: list[int], window: int) -> dict[str, Any]:
    """`simhash-redis load` of the pairs from a JSON Lines file, end to end, on an emptied server."""
    exe = shutil.which("simhash-redis", path=str(Path(sys.executable).parent)) or "simhash-redis"
    client.flushall()
    client.config_resetstat()
    n = len(fps)
    with tempfile.TemporaryDirectory(prefix="simhash-bench-") as tmp:
        path = Path(tmp) / "fps.jsonl"
        with path.open("w") as out:
            rows = ({"id": corpus.id_of(i), "fp": format(fp, "016x")} for i, fp in enumerate(fps))
            out.writelines(json.dumps(row) + "\n" for row in rows)
        command = [exe, "--redis-url", url, "--index", "cost", "load", str(path), "--fingerprint-field", "fp"]
        command += ["--window", str(window), "--json", "-q"]
        every_cpu = os.cpu_count() or 1
        server0 = server_cpu(client)
        wall0 = time.perf_counter()
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=True,
            preexec_fn=lambda: os.sched_setaffinity(0, range(every_cpu)),  # this process is pinned
        )
        wall = time.perf_counter() - wall0
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["bulk"] and summary["written"] == n, summary
    docs = SimhashIndex(client, "cost").count()[0]
    assert docs == n, (docs, n)
    return {
        "variant": "cli_load",
        "fps_s": n / wall,
        "server_us": (server_cpu(client) - server0) / n * 1e6,
        "script_us": None,
        "client_us": float("nan"),  # several processes: see the wall clock
        "keys": client.dbsize(),
        "docs": docs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="documents per variant")
    parser.add_argument("--window", type=int, default=1_000_000, help="bulk_add's window")
    parser.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variants, in order")
    parser.add_argument("--repeat", type=int, default=1, help="run the variants this many times (best kept)")
    args = parser.parse_args()
    fps = corpus.fingerprints(args.n)
    names = args.only.split(",")
    best: dict[str, dict[str, Any]] = {}
    with corpus.server() as server:
        client = server.client()
        corpus.pin(0)
        print(f"n={args.n:,} window={args.window:,}")
        print(f"{'variant':<12}{'fps/s':>10}{'server us/doc':>15}{'client us/doc':>15}  keys")
        for _ in range(args.repeat):
            for name in names:
                if name == "bulk_add":
                    r = measure_bulk(client, fps, args.window)
                elif name == "cli_load":
                    r = measure_cli(client, server.url, fps, args.window)
                else:
                    r = measure(_THEIRS[name], client, fps, 1000)
                print(
                    f"{name:<12}{r['fps_s']:>10,.0f}{r['server_us']:>15.2f}{r['client_us']:>15.2f}"
                    f"  {r['keys']:,}",
                    flush=True,
                )
                if name not in best or r["fps_s"] > best[name]["fps_s"]:
                    best[name] = r
    targets = {"redis_py": 4.0, "raw_grouped": 0.7}
    for ours_name in ("bulk_add", "cli_load"):
        if ours_name not in best:
            continue
        ours = best[ours_name]["fps_s"]
        print(f"{ours_name}: {ours:,.0f} fps/s (best of {args.repeat})")
        for name, r in best.items():
            if name in ("bulk_add", "cli_load"):
                continue
            ratio = ours / r["fps_s"]
            target = targets.get(name)
            verdict = ""
            if target is not None:
                verdict = f"  target >= {target}x: {'met' if ratio >= target else 'NOT met'}"
            print(f"  {ours_name} / {name:<12} {ratio:5.2f}x  ({r['fps_s']:,.0f} fps/s){verdict}")


if __name__ == "__main__":
    main()
