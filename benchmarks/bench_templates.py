"""Pages that share a template (navigation, footers left in the text): what a verified lookup reads.

Run from the repository root::

    python -m benchmarks.bench_templates [--pages 3000] [--queries 100] [--caps none,1024,256,64]

Each page is a template of 0, 200 or 400 words followed by 150 words of its own; the queries are new
pages of the same site, then edits of stored pages (whose page must be found): one word anywhere, and 16
or 20 of the page's own 150 words (Jaccard about 0.86 and 0.83 to the page). No two pages
are near-duplicates (Jaccard about 0.4-0.6), but their sketches share bands often: the LSH curve of 8
bands of 4 makes a pair at Jaccard 0.5 a band candidate with probability 1 - (1 - 0.5^4)^8 = 0.41.
Every band candidate a lookup verifies costs it its ids and its sketch: `max_candidates` bounds them
(each cap in `--caps` is a `VerifiedIndex` of the same stored index, "none" the unbounded lookup).
Printed beside the plain index's lookup of the same pages, in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.codec import unpack_fps
from tests.servers import ServerProcess
from tests.test_verified_mode import _VOCAB, article, one_word_edit

# Words of a page's own text replaced in its edits (0: one word anywhere, `one_word_edit`).
_EDITS = (0, 16, 20)


def _edited(text: str, template_words: int, words: int, seed: int) -> str:
    """A stored page with `words` of its own words (after the template's) replaced, or one word anywhere."""
    if not words:
        return one_word_edit(text, seed)
    split = text.split()
    rng = random.Random(seed)
    for pos in rng.sample(range(template_words, len(split)), words):
        split[pos] = rng.choice(_VOCAB)
    return " ".join(split)


def _timed(near: Callable[[str], list[object]], queries: list[str]) -> tuple[float, float]:
    """p50 and p99 of near() over the queries, in microseconds."""
    lat = []
    for query in queries:
        started = time.perf_counter()
        near(query)
        lat.append((time.perf_counter() - started) * 1e6)
    lat.sort()
    return statistics.median(lat), lat[max(0, int(len(lat) * 0.99) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--templates", default="0,200,400", help="template words, comma-separated")
    parser.add_argument("--caps", default="none,1024,256,64", help="max_candidates of each verified lookup")
    args = parser.parse_args()
    caps = [None if cap == "none" else int(cap) for cap in args.caps.split(",")]
    with ServerProcess() as server:
        client = server.client()
        for words in map(int, args.templates.split(",")):
            client.flushall()
            template = article(10**6, words) + " " if words else ""
            pages = [(f"p{i}", template + article(i, 150)) for i in range(args.pages)]
            plain = SimhashIndex(client, "plain")
            stored = VerifiedIndex(SimhashIndex(client, "verified"))
            plain.add_many(pages)
            stored.add_many(pages)
            queries = [template + article(10**5 + i, 150) for i in range(args.queries)]
            step = max(1, args.pages // args.queries)
            edits = {
                n: [(f"p{i}", _edited(pages[i][1], words, n, i)) for i in range(0, args.pages, step)]
                for n in _EDITS
            }
            candidates = []
            keys, mode = stored.store.keys, stored.verification
            for query in queries:
                places = keys.band_places(stored.hasher.sketch(query), mode)
                found = stored.store.execute([(b"HGET", key, field) for key, field in places])
                candidates.append(len({fp for value in found if value for fp in unpack_fps(value, 64)}))
            print(
                f"template of {words:3} words, {args.pages:,} pages: band candidates per query mean "
                f"{statistics.mean(candidates):,.0f} (max {max(candidates):,})",
                flush=True,
            )
            p50, p99 = _timed(plain.near, queries)
            print(f"  plain near() p50 / p99: {p50:,.0f} / {p99:,.0f} us", flush=True)
            for cap in caps:
                verified = VerifiedIndex(SimhashIndex(client, "verified"), max_candidates=cap)
                p50, p99 = _timed(verified.near, queries)
                shares = []
                for n, edited in edits.items():
                    matched = verified.near_many([text for _, text in edited])
                    found = sum(
                        owner in {m.id for m in ms} for (owner, _), ms in zip(edited, matched, strict=True)
                    )
                    shares.append(f"{n or 1}: {found / len(edited):.3f}")
                print(
                    f"  verified, max_candidates {cap}: near() p50 / p99 {p50:,.0f} / {p99:,.0f} us; "
                    f"stored pages found from edits of (words: share of {len(edits[0])}) {', '.join(shares)}",
                    flush=True,
                )
        client.close()


if __name__ == "__main__":
    main()
