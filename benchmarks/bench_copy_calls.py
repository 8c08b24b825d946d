"""One page stored under N ids (a site's login or 404 page): each call's time, plain and verified.

`bench_copies` times batches of adds and removals as the id list grows; this times the calls a crawler
makes once the copies are stored (near, add_if_new, verify), each once, on a local server.

    python -m benchmarks.bench_copy_calls [--n 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import redis

from simhash_redis import SimhashIndex, VerifiedIndex
from tests.servers import ServerProcess

TEXT = "the same boilerplate page of a site " * 40


def timed(call: Callable[[], object]) -> tuple[object, float]:
    """The call's answer and its wall time in seconds."""
    start = time.perf_counter()
    answer = call()
    return answer, time.perf_counter() - start


def one_mode(client: redis.Redis, mode: str, n: int) -> str:
    """The figures of one index (plain or verified) holding `n` copies, as a line."""
    base = SimhashIndex(client, f"copies-{mode}", k=3)
    index = VerifiedIndex(base) if mode == "verified" else base
    ids = [f"p{i}" for i in range(n)]
    _, add_many = timed(lambda: index.add_many([(doc_id, TEXT) for doc_id in ids]))
    found, near = timed(lambda: index.near(TEXT))
    report, verify = timed(base.verify)
    _, add_if_new = timed(lambda: index.add_if_new("new", TEXT))
    _, remove_many = timed(lambda: index.remove_many(ids))
    assert isinstance(found, list) and len(found) == n
    return (
        f"{mode:8s} N={n:,}: add_many {add_many:.2f} s, near {near * 1e3:.1f} ms, "
        f"add_if_new {add_if_new * 1e3:.1f} ms, verify {verify:.2f} s "
        f"(ok: {getattr(report, 'ok', None)}), remove_many {remove_many:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="copies of the page (default 20,000)")
    n = parser.parse_args().n
    with ServerProcess() as server:
        client = redis.Redis(port=server.port)
        for mode in ("plain", "verified"):
            print(one_mode(client, mode, n), flush=True)


if __name__ == "__main__":
    main()
