"""Speed of the native core against the pure engine and the `simhash` package, in one run, on one core.

Run from the repository root, with the compiled core installed (``make native``)::

    pip install simhash==2.1.2      # the comparison only
    python -m benchmarks.bench_native [--docs 400] [--size 3500] [--rounds 5]

Documents are the benchmarks' own (`benchmarks.corpus`): real English and Chinese text of ``--size``
UTF-8 bytes. Single calls: the median (p50) of per-call times, over passes of each contender in turn
(so that load on a shared machine hits them alike). Batches: the best of ``--rounds`` runs of
`fingerprint_many` over all documents. The candidate filter: `_hits` of the read path (pure) against
the native kernel on batches of 64 queries of ~60 candidates in 4 tables each, as an index with k = 3
and a 4-table layout reads them. Sketches (``--sketches`` runs only them): today's 1,024-permutation
MinHash sketch of a verified index against the proposed 128-byte odd sketch (docs/redis-keys.md,
"Verified storage, proposed"), alone and beside the 32-permutation MinHash its band tables would need,
each in both engines. The process is pinned to one CPU, so figures are per core.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from benchmarks import corpus
from simhash_redis.codec import encode_fp
from simhash_redis.fingerprinting import DEFAULT_SCHEME, MinHasher, documents, engine_choice
from simhash_redis.fingerprinting.odd_sketch import OddSketcher
from simhash_redis.store import candidates

if engine_choice.native is None:
    raise SystemExit("the compiled core is not in use: make native (and leave SIMHASH_REDIS_ENGINE unset)")
native = engine_choice.native


def fingerprint(doc: str) -> int:
    """The pure engine's fingerprint."""
    return documents.fingerprint(doc, DEFAULT_SCHEME)


def fingerprint_many(docs: Sequence[str]) -> list[int]:
    """The pure engine's fingerprints."""
    return documents.fingerprint_many(docs, DEFAULT_SCHEME)


def pure_hits(*args: object) -> object:
    """The read path's candidate filter with the compiled core set aside."""
    engine_choice.native = None
    try:
        return candidates.hits(*args)  # type: ignore[arg-type]
    finally:
        engine_choice.native = native


class adapter:
    """The native engine's entry points."""

    @staticmethod
    def fingerprint(doc: str) -> int:
        return native.fingerprint(doc, DEFAULT_SCHEME)  # type: ignore[no-any-return]

    @staticmethod
    def fingerprint_many(docs: Sequence[str]) -> list[int]:
        return native.fingerprint_many(docs, DEFAULT_SCHEME)  # type: ignore[no-any-return]

    @staticmethod
    def hits(*args: object) -> object:
        return native.hits(*args)


def p50_single(
    runs: dict[str, Callable[[str], object]], docs: Sequence[str], limits: dict[str, int], rounds: int
) -> dict[str, float]:
    """Median seconds per call of each contender, each call timed on its own.

    Each round gives every contender one pass over its documents in turn, so that a change of load
    on a shared machine hits them alike (a pass of its own keeps one contender's memory traffic from
    evicting another's caches between two calls).

    Args:
        runs: contender name → function of one document.
        docs: the documents.
        limits: contender name → how many documents it is given (slow ones get fewer).
        rounds: passes per contender.

    Returns:
        Contender name → median seconds per call.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    clock = time.perf_counter
    for _ in range(rounds):
        for name, run in runs.items():
            spent = times[name]
            for doc in docs[: limits.get(name, len(docs))]:
                start = clock()
                run(doc)
                spent.append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def best_batch(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best wall time of each contender's batch over interleaved rounds.

    Args:
        runs: contender name → the batch work.
        rounds: timing rounds.

    Returns:
        Contender name → best seconds.
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def bench_fingerprints(label: str, docs: list[str], rounds: int, theirs: int) -> None:
    """Print single-call p50 and batch rates of simhash, pure and native for one corpus.

    Args:
        label: the corpus name.
        docs: its documents.
        rounds: batch timing rounds.
        theirs: documents given to the slow contenders (simhash, pure single calls).
    """
    try:
        from simhash import Simhash  # type: ignore[import-untyped]
    except ImportError:
        Simhash = None
    assert adapter.fingerprint_many(docs) == fingerprint_many(docs), "native and pure disagree"
    fingerprint_many(docs[:50])  # lookup tables and caches of both engines, outside the timing
    singles: dict[str, Callable[[str], object]] = {"pure": fingerprint, "native": adapter.fingerprint}
    batches: dict[str, Callable[[], object]] = {
        "pure": lambda: fingerprint_many(docs),
        "native": lambda: adapter.fingerprint_many(docs),
    }
    if Simhash is not None:
        singles["simhash"] = lambda doc: Simhash(doc).value
        subset = docs[:theirs]
        batches["simhash"] = lambda: [Simhash(doc).value for doc in subset]
    p50 = p50_single(singles, docs, {"pure": theirs, "simhash": theirs}, max(1, rounds // 2))
    best = best_batch(batches, rounds)
    rate = {name: (theirs if name == "simhash" else len(docs)) / seconds for name, seconds in best.items()}
    print(f"\n{label}: {len(docs)} documents")
    print(f"  {'':8} {'single p50':>12} {'batch':>14}")
    for name in singles:
        print(f"  {name:8} {p50[name] * 1e6:9.1f} us {rate[name]:10,.0f} docs/s")
    native_p50, native_rate = p50["native"], rate["native"]
    single, batch = p50["pure"] / native_p50, native_rate / rate["pure"]
    print(f"  native vs pure:    single {single:6.1f}x   batch {batch:6.1f}x")
    if Simhash is not None:
        print(
            f"  native vs simhash: single {p50['simhash'] / native_p50:6.1f}x   "
            f"batch {native_rate / rate['simhash']:6.1f}x (per core)"
        )
    else:
        print("  simhash: not installed (pip install simhash==2.1.2)")


def pure_engine(run: Callable[[], object]) -> Callable[[], object]:
    """`run` with the compiled core set aside (every dispatch point reads `engine_choice.native` per call)."""

    def pure() -> object:
        engine_choice.native = None
        try:
            return run()
        finally:
            engine_choice.native = native

    return pure


def bench_sketches(label: str, docs: list[str], rounds: int, theirs: int) -> None:
    """Print single-call p50 and batch rates of MinHash 1,024 and the odd sketch, pure and native.

    Args:
        label: the corpus name.
        docs: its documents.
        rounds: batch timing rounds.
        theirs: documents given to pure single calls.
    """
    today, bands, odd = MinHasher(num_perm=1024), MinHasher(num_perm=32), OddSketcher()
    kinds: dict[str, Callable[[Sequence[str]], object]] = {
        "minhash 1024 x 8 (today)": today.sketch_many,
        "odd 1008 bits": odd.sketch_many,
        "odd + minhash 32 (bands)": lambda d: (odd.sketch_many(d), bands.sketch_many(d)),
    }
    for kind in kinds.values():
        assert kind(docs) == pure_engine(lambda kind=kind: kind(docs))(), "native and pure disagree"
    batches: dict[str, Callable[[], object]] = {}
    singles: dict[str, Callable[[str], object]] = {}
    for name, kind in kinds.items():
        batches[f"{name}|native"] = lambda kind=kind: kind(docs)
        batches[f"{name}|pure"] = pure_engine(lambda kind=kind: kind(docs))
        singles[f"{name}|native"] = lambda doc, kind=kind: kind([doc])
        singles[f"{name}|pure"] = lambda doc, kind=kind: pure_engine(lambda: kind([doc]))()
    limits = {name: theirs for name in singles if name.endswith("pure")}
    p50 = p50_single(singles, docs, limits, max(1, rounds // 2))
    best = best_batch(batches, rounds)
    print(f"\nsketches, {label}: {len(docs)} documents")
    print(f"  {'':26} {'engine':6} {'single p50':>12} {'batch':>14}")
    for name in batches:
        kind, engine = name.split("|")
        print(f"  {kind:26} {engine:6} {p50[name] * 1e6:9.1f} us {len(docs) / best[name]:10,.0f} docs/s")
    for engine in ("native", "pure"):
        base = best[f"minhash 1024 x 8 (today)|{engine}"]
        ratios = ", ".join(f"{kind} {base / best[f'{kind}|{engine}']:.1f}x" for kind in list(kinds)[1:])
        print(f"  {engine}: faster than today's sketch by batch: {ratios}")


def hit_batch(rng: random.Random, queries: int, f: int, k: int) -> tuple[list[int], list[list[bytes]]]:
    """Queries and the SMEMBERS replies an index would return: 4 tables of ~15 members each per query.

    Args:
        rng: the random source.
        queries: how many queries.
        f: fingerprint width.
        k: the index's k (a few members of each query are within it).

    Returns:
        The query fingerprints and the replies, 4 per query.
    """
    fps = [rng.getrandbits(f) for _ in range(queries)]
    replies = []
    for fp in fps:
        near = [fp ^ (1 << rng.randrange(f)) for _ in range(rng.randint(0, 2))]
        for _ in range(4):
            members = [rng.getrandbits(f) for _ in range(rng.randint(12, 18))] + near
            rng.shuffle(members)
            replies.append([encode_fp(value, f) for value in members])
    return fps, replies


def bench_hits(rounds: int) -> None:
    """Print the candidate filter's time per batch of 64 queries, pure `_hits` against native.

    Args:
        rounds: timing rounds.
    """
    rng = random.Random(20240601)
    print("\ncandidate filter: 64 queries x 4 tables x ~15 members (+ near ones), k = 3")
    for f in (64, 128):
        batches = [hit_batch(rng, 64, f, 3) for _ in range(20)]
        for fps, replies in batches:
            assert adapter.hits(fps, replies, 4, 3, f) == pure_hits(fps, replies, 4, 3, f)
        best = best_batch(
            {
                "pure": lambda: [pure_hits(fps, replies, 4, 3, f) for fps, replies in batches],  # noqa: B023
                "native": lambda: [adapter.hits(fps, replies, 4, 3, f) for fps, replies in batches],  # noqa: B023
            },
            rounds,
        )
        per = {name: seconds / len(batches) for name, seconds in best.items()}
        one = {name: seconds / (64 * len(batches)) for name, seconds in best.items()}
        print(
            f"  f={f:<3} pure {per['pure'] * 1e6:8.1f} us/batch ({one['pure'] * 1e6:5.2f} us/query)   "
            f"native {per['native'] * 1e6:7.1f} us/batch ({one['native'] * 1e6:5.2f} us/query)   "
            f"{per['pure'] / per['native']:5.1f}x"
        )
    fps, replies = hit_batch(rng, 1, 64, 3)
    single = best_batch(
        {
            "pure": lambda: pure_hits(fps, replies, 4, 3, 64),
            "native": lambda: adapter.hits(fps, replies, 4, 3, 64),
        },
        max(rounds, 200),
    )
    print(
        f"  one query (f=64): pure {single['pure'] * 1e6:.1f} us   native {single['native'] * 1e6:.1f} us   "
        f"{single['pure'] / single['native']:.1f}x"
    )


def main() -> None:
    """Parse arguments, pin to one CPU and run every benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=400, help="documents per corpus")
    parser.add_argument("--size", type=int, default=3500, help="UTF-8 bytes per document")
    parser.add_argument("--rounds", type=int, default=5, help="batch timing rounds; the best counts")
    parser.add_argument("--theirs", type=int, default=100, help="documents for simhash and pure single calls")
    parser.add_argument("--sketches", action="store_true", help="only the sketches")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"python {sys.version.split()[0]}, one CPU, documents of {args.size} UTF-8 bytes")
    for label, lang in (("english", "en"), ("chinese", "zh")):
        docs = corpus.documents(lang, args.docs, args.size)
        if not args.sketches:
            bench_fingerprints(label, docs, args.rounds, min(args.theirs, len(docs)))
        bench_sketches(label, docs, args.rounds, min(args.theirs, len(docs)))
    if not args.sketches:
        bench_hits(args.rounds)


if __name__ == "__main__":
    main()
