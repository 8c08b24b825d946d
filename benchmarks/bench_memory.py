"""Redis memory per document: the tables, the id map and the fingerprint map, with 16-byte ids.

Run from the repository root::

    python -m benchmarks.bench_memory [--n 1000000]      # --n 10000000 takes a few minutes

Loads N documents (precomputed fingerprints, ids ``doc:000000000042``) with the default configuration
into a private empty server, then reports the growth of ``used_memory`` per document and, from
``MEMORY USAGE`` of every key of the index, how it splits between the table sets, the id map and
the fingerprint map, with the encodings Redis chose (intset / listpack / hashtable).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from typing import Any

import redis

from benchmarks import Figure, corpus
from benchmarks.bench_load import load_index
from simhash_redis import SimhashIndex

_KINDS = (("tables", ":t"), ("id map", ":id:"), ("fingerprint map", ":fp:"))


def used_memory(client: redis.Redis) -> int:
    """The server's used_memory in bytes."""
    return int(client.info("memory")["used_memory"])


def breakdown(client: redis.Redis, index: SimhashIndex) -> dict[str, Any]:
    """Bytes and encodings of every key of the index, by kind (tables, id map, fingerprint map)."""
    sizes: dict[str, int] = defaultdict(int)
    keys_of: dict[str, int] = defaultdict(int)
    encodings: dict[str, Counter[str]] = defaultdict(Counter)
    base = index.keys.base.encode()
    batch: list[bytes] = []

    def flush() -> None:
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
            pipe.object("ENCODING", key)
        replies = pipe.execute()
        for i, key in enumerate(batch):
            rest = key[len(base) :].decode()
            kind = next((name for name, mark in _KINDS if rest.startswith(mark)), "other")
            sizes[kind] += int(replies[2 * i] or 0)
            keys_of[kind] += 1
            encoding = replies[2 * i + 1]
            encodings[kind][encoding.decode() if isinstance(encoding, bytes) else str(encoding)] += 1
        batch.clear()

    for key in client.scan_iter(match=index.keys.pattern, count=5000):
        batch.append(key)
        if len(batch) >= 5000:
            flush()
    if batch:
        flush()
    return {
        "bytes": dict(sizes),
        "keys": dict(keys_of),
        "encodings": {k: dict(v) for k, v in encodings.items()},
    }


def measure(client: redis.Redis, index: SimhashIndex, n: int, before: int) -> dict[str, Any]:
    """Memory figures of a loaded index."""
    after = used_memory(client)
    parts = breakdown(client, index)
    docs = index.count()[0]
    return {
        "n": n,
        "docs": docs,
        "used_memory_delta": after - before,
        "bytes_per_doc": (after - before) / docs,
        "per_doc_by_kind": {kind: size / docs for kind, size in parts["bytes"].items()},
        **parts,
    }


def run(n: int = 1_000_000, command: str = "python -m benchmarks.bench_memory") -> list[Figure]:
    """Load n documents into an empty server and report bytes per document."""
    with corpus.server() as server:
        client = server.client()
        before = used_memory(client)
        index = SimhashIndex(client, "bench", k=3)
        print(f"  loading {n:,} documents ...", flush=True)
        load_index(index, corpus.fingerprints(n))
        result = measure(client, index, n, before)
    per_doc = result["bytes_per_doc"]
    kinds = result["per_doc_by_kind"]
    target = n >= 10_000_000
    return [
        Figure(
            f"Redis memory per document, N={n:,} (16-byte ids)",
            per_doc,
            "B/doc",
            target="<= 100 B/doc at 10M" if target else "(target is at 10M)",
            met=(per_doc <= 100) if target else None,
            higher_is_better=False,
            command=command,
            extra=result,
        ),
        *[
            Figure(f"  of which {kind}", value, "B/doc", higher_is_better=False, command=command)
            for kind, value in sorted(kinds.items())
        ],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="documents")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    command = "python -m benchmarks.bench_memory" + (f" --n {args.n}" if args.n != 1_000_000 else "")
    figures = run(args.n, command)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"command": command, "figures": [f.to_json() for f in figures]}, out, indent=1)
    for figure in figures:
        print(figure.line())
        if figure.extra:
            print("   keys:", figure.extra["keys"], "encodings:", figure.extra["encodings"])


if __name__ == "__main__":
    main()
