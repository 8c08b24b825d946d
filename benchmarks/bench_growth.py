"""How near() latency and memory grow with N, against a numpy brute-force scan.

Run from the repository root::

    python -m benchmarks.bench_growth [--max 1000000]     # --max 10000000 adds N=10^7 (minutes)

One private server; the index grows to N = 10^4, 10^5, 10^6 (and 10^7) fingerprints with 16-byte ids.
At each N: near() p50 and p99 over the same query mix as bench_near (half near-duplicates), Redis
memory per document, and the p50 of a numpy scan of all N fingerprints (XOR + popcount).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks import Figure, corpus, percentile
from benchmarks.bench_load import load_index
from benchmarks.bench_memory import used_memory
from benchmarks.bench_near import NumpyScan, latencies
from simhash_redis import SimhashIndex


def run(
    sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000),
    queries: int = 3000,
    command: str = "python -m benchmarks.bench_growth",
) -> tuple[list[Figure], list[dict[str, Any]]]:
    """Grow one index through the sizes; returns the figures and the rows (for the plot)."""
    rows: list[dict[str, Any]] = []
    figures: list[Figure] = []
    everything = corpus.fingerprints(max(sizes))
    with corpus.server() as server:
        client = server.client()
        before = used_memory(client)
        index = SimhashIndex(client, "growth", k=3)
        loaded = 0
        corpus.pin(0)
        for n in sizes:
            print(f"  growing to N={n:,} ...", flush=True)
            load_index(index, everything[loaded:n], start=loaded)
            loaded = n
            stored = everything[:n]
            qs = corpus.queries(stored, queries)
            index.near_many(qs[:500])
            lat = latencies(index.near, qs)
            scan = NumpyScan(stored)
            scan_lat = latencies(scan.near, qs[: min(len(qs), max(50, 2_000_000_000 // (n * 1000)))])
            del scan
            memory = (used_memory(client) - before) / n
            row = {
                "n": n,
                "near_p50_us": percentile(lat, 50),
                "near_p99_us": percentile(lat, 99),
                "scan_p50_us": percentile(scan_lat, 50),
                "bytes_per_doc": memory,
            }
            rows.append(row)
            print(
                f"  N={n:>10,}  near p50 {row['near_p50_us']:8.1f} us  p99 {row['near_p99_us']:8.1f} us  "
                f"scan p50 {row['scan_p50_us']:9.1f} us  memory {memory:6.1f} B/doc",
                flush=True,
            )
            target = "<= 300 us" if n >= 10_000_000 else ""
            figures.append(
                Figure(
                    f"growth: near() p50 at N={n:,}",
                    row["near_p50_us"],
                    "us",
                    "numpy scan p50",
                    row["scan_p50_us"],
                    higher_is_better=False,
                    target=target,
                    met=(row["near_p50_us"] <= 300) if target else None,
                    command=command,
                    extra=row,
                )
            )
    return figures, rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max", type=int, default=1_000_000, help="largest N (10000000 adds 10^7)")
    parser.add_argument("--json", help="also write the rows and figures to this JSON file")
    args = parser.parse_args()
    sizes = tuple(n for n in (10_000, 100_000, 1_000_000, 10_000_000) if n <= args.max)
    command = "python -m benchmarks.bench_growth" + (f" --max {args.max}" if args.max != 1_000_000 else "")
    figures, rows = run(sizes, command=command)
    for figure in figures:
        print(figure.line())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {"command": command, "growth": rows, "figures": [f.to_json() for f in figures]}, out, indent=1
            )


if __name__ == "__main__":
    main()
