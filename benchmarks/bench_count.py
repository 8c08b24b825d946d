"""count() on a local 3-primary Redis Cluster (131,072 id-map buckets), plain and with a retention window.

A cluster keeps no counts hash (its writes are single-slot steps): count() sums what the data holds.
Both indexes hold the same documents; the windowed one has a retention of 7 days in periods of a day, so
count() reads every live period's maps.

    python -m benchmarks.bench_count [--n 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from simhash_redis import Retention, SimhashIndex
from tests.servers import ClusterProcess


def timed_count(index: SimhashIndex, repeat: int) -> tuple[tuple[int, int], list[float]]:
    """count()'s answer and its wall times in seconds, `repeat` calls."""
    times: list[float] = []
    answer = (0, 0)
    for _ in range(repeat):
        start = time.perf_counter()
        answer = index.count()
        times.append(time.perf_counter() - start)
    return answer, times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20_000, help="documents in each index")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    fps = [rng.getrandbits(64) for _ in range(args.n)]
    # Every tenth document shares the fingerprint of the one before: fingerprints < documents.
    docs = [(f"doc-{i}", fps[i - 1] if i % 10 == 9 else fp) for i, fp in enumerate(fps)]
    expected_fps = len({fp for _, fp in docs})
    with ClusterProcess() as cluster:
        print(f"cluster 3+3, {args.n:,} documents ({expected_fps:,} fingerprints), {args.repeat} calls each")
        for name, options in (
            ("plain", {}),
            ("retention 7d/1d", {"retention": Retention(7 * 86_400, 86_400)}),
        ):
            index = SimhashIndex(cluster.client(), f"count-{name.split()[0]}", k=3, **options)
            for first in range(0, len(docs), 1000):
                index.add_many(docs[first : first + 1000])
            answer, times = timed_count(index, args.repeat)
            assert answer == (args.n, expected_fps), answer
            print(
                f"{name:<18} count() = {answer}: median {statistics.median(times) * 1000:,.1f} ms, "
                f"min {min(times) * 1000:,.1f} ms"
            )


if __name__ == "__main__":
    main()
