"""Separate OS processes share one index through the server."""

from __future__ import annotations

import subprocess
import sys
import textwrap

WORKER = textwrap.dedent(
    """
    import sys, time
    from simhash_redis import SimhashIndex
    url, me, other = sys.argv[1:4]
    index = SimhashIndex.from_url(url, name="shared", k=3)
    docs = [(f"{me}-{i}", f"document number {i} written by worker {me} about topic {i * 7}")
            for i in range(200)]
    index.add_many(docs)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        theirs = index.get_many([f"{other}-{i}" for i in range(200)])
        if all(fp is not None for fp in theirs):
            break
        time.sleep(0.05)
    else:
        sys.exit("never saw the other worker's documents")
    text = f"document number 5 written by worker {other} about topic 35"
    ids = [m.id for m in index.near(text)]
    assert f"{other}-5" in ids, ids
    print("ok", len(index))
    """
)


def test_two_processes_see_each_other(redis_url: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, redis_url, me, other], stdout=subprocess.PIPE, text=True
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert all(out.strip() == "ok 400" for out in outputs), outputs
