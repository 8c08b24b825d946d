"""A design probe: why a verified `near(text)` takes two round trips where the plain index takes one.

Run from the repository root::

    python -m benchmarks.probe_verified_round_trips [--queries 300]

The evaluation corpus (benchmarks/data/eval_corpus.jsonl.gz) in a plain and a verified index on one
private server; queries are exact copies and one-word edits of its English articles, as in
`bench_verified`. For each kind it prints the round trips each lookup took (counted on the wire), and
classifies the candidates of the verified lookups that the first reply cannot resolve (a fingerprint
other than the query's, whose ids and sketch live in another fingerprint-map entry): confirmed or
rejected by their sketch, within k or found by bands alone, how many of the 8 bands they share, and
whether they share the query's own map bucket (the bucket a lookup could read whole with its table
sets). The last lines say how many lookups one round trip could serve if that bucket were read whole.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_verified import article_queries
from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.tools.evaluation import load_corpus
from simhash_redis.transport import wire
from tests.servers import ServerProcess

_CORPUS = Path(__file__).resolve().parent / "data" / "eval_corpus.jsonl.gz"


def _round_trips(near: Callable[[str], object], queries: list[str]) -> Counter[int]:
    """How many lookups took how many round trips (a write to the socket begins each)."""
    counts: Counter[int] = Counter()
    for query in queries:
        before = wire.round_trips()
        near(query)
        counts[wire.round_trips() - before] += 1
    return counts


def _second_trip(verified: VerifiedIndex, queries: list[str]) -> tuple[Counter[tuple[Any, ...]], int]:
    """The candidates that need a second round trip, classified; and how many lookups would need none
    if the query's own fingerprint-map bucket were read whole."""
    keys, mode, hasher = verified.store.keys, verified.verification, verified.hasher
    kinds: Counter[tuple[Any, ...]] = Counter()
    one_trip = 0
    for query in queries:
        fp, sketch = verified.index.fingerprint(query), hasher.sketch(query)
        places = keys.band_places(sketch, mode)
        candidates = verified._reads.near([fp], verified.index.k, {}, [places])[0]
        confirmed = {match.id for match in verified.near(query)}
        own = keys.fp_bucket_of(fp)
        elsewhere = False
        for match in candidates:
            if match.fingerprint == fp:
                continue
            stored = verified.sketch_of(match.id)
            shared = -1
            if stored is not None:
                theirs = keys.band_places(stored, mode)
                shared = sum(a == b for a, b in zip(places, theirs, strict=True))
            same_bucket = keys.fp_bucket_of(match.fingerprint) == own
            elsewhere |= not same_bucket
            kinds[
                (
                    "confirmed" if match.id in confirmed else "rejected",
                    "within k" if match.distance <= verified.index.k else "bands only",
                    shared,
                    "query's bucket" if same_bucket else "other bucket",
                )
            ] += 1
        one_trip += not elsewhere
    return kinds, one_trip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    docs = load_corpus(_CORPUS)
    items = [(d.id, d.text) for d in docs]
    copies, edits = article_queries(docs, args.queries)
    with ServerProcess() as server:
        client = server.client()
        plain = SimhashIndex(client, "plain", k=3)
        plain.add_many(items)
        verified = VerifiedIndex(SimhashIndex(client, "verified", k=3))
        verified.add_many(items)
        for kind, queries in (("exact copies", copies), ("one-word edits", edits)):
            print(f"{kind} ({len(queries)} queries of {len(docs):,} stored documents)")
            for name, near in (("plain", plain.near), ("verified", verified.near)):
                trips = _round_trips(near, queries)
                print(f"  {name} near(): lookups by round trips {dict(sorted(trips.items()))}")
            kinds, one_trip = _second_trip(verified, queries)
            print("  verified candidates in other map entries (sketch, found by, bands shared, bucket)")
            for key, count in sorted(kinds.items(), key=lambda item: (-item[1], item[0])):
                print(f"    {' / '.join(map(str, key))}: {count}")
            print(f"  lookups one round trip could serve with the query's bucket read whole: {one_trip}")
        client.close()


if __name__ == "__main__":
    main()
