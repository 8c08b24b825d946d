"""Verified mode beside the plain index of the same layout: near() latency and memory per document.

Run from the repository root::

    python -m benchmarks.bench_verified [--queries 400] [--rounds 3] [--k 3]

Both indexes (by default as a new index gets them: k = 3, pigeonhole; the verified one with its default
mode, 1,024-permutation sketches and 8 band tables; `--k 8` compares indexes of
`Layout.permuted(64, 8, blocks=10)`) hold the evaluation corpus (benchmarks/data/eval_corpus.jsonl.gz)
in one private server. Queries are one-word edits of stored documents (a near fingerprint: the ids and
sketches need a second round trip) and exact copies (found in the first). Each query is timed on both
indexes in turn, so the machine's drift hits both alike; the figures printed are the medians over rounds
of each round's p50 and p99, then the server's time per call of each command the timed lookups sent
(`INFO commandstats`).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from simhash_redis import Layout, SimhashIndex, VerifiedIndex
from simhash_redis.tools.evaluation import load_corpus
from tests.servers import ServerProcess

_CORPUS = Path(__file__).resolve().parent / "data" / "eval_corpus.jsonl.gz"


def _edit(text: str, rng: random.Random) -> str:
    words = text.split()
    if len(words) < 2:
        return text + " edited"
    words[rng.randrange(len(words))] = "edited"
    return " ".join(words)


def article_queries(docs: list[Any], count: int) -> tuple[list[str], list[str]]:
    """`count` English articles of the corpus (100 words or more, where a one-word edit is a
    near-duplicate as users mean it) and a one-word edit of each, the same every run."""
    rng = random.Random(5)
    articles = [d.text for d in docs if d.lang == "en" and len(d.text.split()) >= 100]
    sample = rng.sample(articles, min(count, len(articles)))
    return sample, [_edit(text, rng) for text in sample]


def _used_memory(client: Any) -> int:
    client.execute_command("MEMORY PURGE")
    return int(client.info("memory")["used_memory"])


def _timed(calls: dict[str, Callable[[str], object]], queries: list[str]) -> dict[str, list[float]]:
    """Each call on each query, the calls of one query one after another (in microseconds)."""
    out: dict[str, list[float]] = {name: [] for name in calls}
    for query in queries:
        for name, call in calls.items():
            t0 = time.perf_counter()
            call(query)
            out[name].append((time.perf_counter() - t0) * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=_CORPUS)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--k", type=int, default=3, help="3: the default layout; 8: permuted-10")
    args = parser.parse_args()
    docs = load_corpus(args.corpus)
    items = [(d.id, d.text) for d in docs]
    k = args.k
    layout = Layout.pigeonhole(64, 3) if k == 3 else Layout.permuted(64, k, blocks=k + 2)
    sample, edits = article_queries(docs, args.queries)
    with ServerProcess() as server:
        client = server.client()
        base = _used_memory(client)
        plain = SimhashIndex(client, "plain", k=args.k, layout=layout)
        plain.add_many(items)
        after_plain = _used_memory(client)
        verified = VerifiedIndex(SimhashIndex(client, "verified", k=args.k, layout=layout))
        verified.add_many(items)
        after_verified = _used_memory(client)
        calls: dict[str, Callable[[str], object]] = {"plain": plain.near, "verified": verified.near}
        _timed(calls, sample[:50])  # warm-up: connections, scripts, the engine's first calls
        client.config_resetstat()
        rounds: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for kind, queries in (("one-word edit", edits), ("exact copy", sample)):
                for name, times in _timed(calls, queries).items():
                    rounds.setdefault(f"{name} near(), {kind}", []).append(
                        (float(np.percentile(times, 50)), float(np.percentile(times, 99)))
                    )
        stats = client.info("commandstats")
        found = sum(bool(verified.near(q)) for q in edits)
        client.close()
    n = len(docs)
    print(f"{n:,} documents (evaluation corpus), k = {k}, {layout.describe()}, {len(edits)} queries a kind")
    print(f"verified mode: {verified.verification.to_meta()}")
    print(f"one-word edits found by verified near(): {found}/{len(edits)}")
    plain_bytes, verified_bytes = (after_plain - base) / n, (after_verified - after_plain) / n
    print(f"memory: plain {plain_bytes:,.0f} bytes/doc, verified {verified_bytes:,.0f} bytes/doc")
    print(f"  the sketch's share: {verified_bytes - plain_bytes:,.0f} bytes/doc")
    width = max(map(len, rounds))
    print(f"{'':<{width}}  p50 us   p99 us   (median of {args.rounds} rounds)")
    for name, figures in rounds.items():
        p50 = statistics.median(f[0] for f in figures)
        p99 = statistics.median(f[1] for f in figures)
        print(f"{name:<{width}}  {p50:7.1f}  {p99:7.1f}")
    print("server time per call of the commands of the timed lookups (both indexes):")
    for name in ("smembers", "hget", "hmget", "hgetall"):
        if f"cmdstat_{name}" in stats:
            one = stats[f"cmdstat_{name}"]
            print(f"  {name.upper():<8} {one['calls']:>7,} calls  {one['usec_per_call']:6.2f} us a call")
    for kind in ("one-word edit", "exact copy"):
        ratio = statistics.median(
            v[0] / p[0]
            for v, p in zip(rounds[f"verified near(), {kind}"], rounds[f"plain near(), {kind}"], strict=True)
        )
        print(f"verified / plain p50, {kind}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
