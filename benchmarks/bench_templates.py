"""Pages that share a template (navigation, footers left in the text): what a verified lookup reads.

Run from the repository root::

    python -m benchmarks.bench_templates [--pages 3000] [--queries 100]

Each page is a template of 0, 200 or 400 words followed by 150 words of its own; the queries are new
pages of the same site. No two pages are near-duplicates (Jaccard about 0.4-0.6), but their sketches
share bands often: the LSH curve of 8 bands of 4 makes a pair at Jaccard 0.5 a band candidate with
probability 1 - (1 - 0.5^4)^8 = 0.41. Every band candidate costs the lookup its ids and its sketch.
Printed beside the plain index's lookup of the same pages, in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.codec import unpack_fps
from tests.servers import ServerProcess
from tests.test_verified_mode import article


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    with ServerProcess() as server:
        client = server.client()
        for words in (0, 200, 400):
            client.flushall()
            template = article(10**6, words) + " " if words else ""
            pages = [(f"p{i}", template + article(i, 150)) for i in range(args.pages)]
            plain = SimhashIndex(client, "plain")
            verified = VerifiedIndex(SimhashIndex(client, "verified"))
            plain.add_many(pages)
            verified.add_many(pages)
            queries = [template + article(10**5 + i, 150) for i in range(args.queries)]
            candidates = []
            keys, mode = verified.store.keys, verified.verification
            for query in queries:
                places = keys.band_places(verified.hasher.sketch(query), mode)
                found = verified.store.execute([(b"HGET", key, field) for key, field in places])
                candidates.append(len({fp for value in found if value for fp in unpack_fps(value, 64)}))
            timings = {}
            for name, index in (("plain", plain), ("verified", verified)):
                lat = []
                for query in queries:
                    started = time.perf_counter()
                    index.near(query)
                    lat.append((time.perf_counter() - started) * 1e6)
                lat.sort()
                timings[name] = (statistics.median(lat), lat[int(len(lat) * 0.99) - 1])
            print(
                f"template of {words:3} words, {args.pages:,} pages: band candidates per query mean "
                f"{statistics.mean(candidates):,.0f} (max {max(candidates):,}); near() p50 / p99: verified "
                f"{timings['verified'][0]:,.0f} / {timings['verified'][1]:,.0f} us, plain "
                f"{timings['plain'][0]:,.0f} / {timings['plain'][1]:,.0f} us",
                flush=True,
            )
        client.close()


if __name__ == "__main__":
    main()
