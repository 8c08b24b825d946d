"""One text under thousands of ids (a crawl's boilerplate pages): the cost of each batch of adds as the
fingerprint's id list grows, then of each batch of removals as it shrinks, on a plain and a verified index.

Run from the repository root::

    python -m benchmarks.bench_copies [--batches 6] [--batch 1000]

Every id of one fingerprint is listed in one hash field (and, in verified mode, in its sketch's group),
so each add or removal rewrites a value that grows with the copies: the time of a batch should grow
with the list, not with its square. A batch whose script outlives the server's script time limit (5 s)
makes other clients' commands fail with BUSY.
"""

from __future__ import annotations

import argparse
import random
import time

from simhash_redis import SimhashIndex, VerifiedIndex
from tests.servers import ServerProcess
from tests.test_verified_mode import article


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    text = article(1)
    with ServerProcess() as server:
        client = server.client()
        verified = VerifiedIndex(SimhashIndex(client, "verified"))
        indexes = {"plain": SimhashIndex(client, "plain"), "verified": verified}
        print(f"batches of {args.batch} copies of one 300-word text, seconds per batch: adds, then removals")
        for name, index in indexes.items():
            adds, removals = [], []
            for n in range(args.batches):
                started = time.perf_counter()
                index.add_many([(f"{n}-{i}", text) for i in range(args.batch)])
                adds.append(time.perf_counter() - started)
            # In no particular order: ids removed in the order they were added are found at once.
            stored = [f"{n}-{i}" for n in range(args.batches) for i in range(args.batch)]
            random.Random(0).shuffle(stored)
            for n in range(args.batches):
                started = time.perf_counter()
                index.remove_many(stored[n * args.batch : (n + 1) * args.batch])
                removals.append(time.perf_counter() - started)
            print(f"{name:>8} adds:     " + "  ".join(f"{t:.2f}" for t in adds))
            print(f"{name:>8} removals: " + "  ".join(f"{t:.2f}" for t in removals))
        client.close()


if __name__ == "__main__":
    main()
