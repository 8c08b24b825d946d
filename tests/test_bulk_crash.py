"""bulk_add under kill -9: of the loading process, and of the server (appendonly yes, appendfsync always),
in the middle of each step of a window; of a plain index, and of a verified one (each document with its
sketch and band values: `VerifiedIndex.bulk_add_sketched`).

A loader subprocess runs a load of three windows and is stopped at a chosen point: when it is about to
send the n-th chunk of a step of the second window, two earlier chunks of that step still unanswered.
It either kills itself (SIGKILL), or waits while the test kills the server, then fails. Afterwards
nothing half-written may be visible to near(), and running the same load again must give exactly the
index a clean load gives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from simhash_redis import SimhashIndex, VerifiedIndex
from tests.bulk_helpers import Content, assert_nothing_half_visible, assert_same, content, load
from tests.servers import ServerProcess
from tests.test_verified_bulk import LEFT as VERIFIED_LEFT
from tests.test_verified_bulk import assert_whole, logical
from tests.test_verified_bulk import texts as verified_texts
from tests.test_verified_mode import article

ROOT = Path(__file__).resolve().parents[1]
NAME = "crash"
TOTAL = 3000
WINDOW = 1000
CHUNK_ARGS = 800
# The chunked steps of a window, in the order they are sent.
STEPS = {"read": 1, "tables": 2, "id map": 3, "fingerprint map": 4, "table check": 5}
VERIFIED_STEPS = {
    "read": 1,
    "tables": 2,
    "sketches": 3,
    "bands": 4,
    "id map": 5,
    "fingerprint map": 6,
    "table check": 7,
}
#: The chunked steps of the first verified window, which also reads the stored sketches of the ids it
#: holds already (the load's first 200 documents: step 1b).
FIRST_VERIFIED = len(VERIFIED_STEPS) + 1

LOADER = textwrap.dedent(
    """
    import os, signal, sys
    import redis
    from simhash_redis import SimhashIndex
    from simhash_redis.store import bulk, grouped
    from tests.test_bulk_crash import CHUNK_ARGS, NAME, WINDOW, items, open_index
    url, mode, stop_send, stop_chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    grouped.CHUNK_ARGS, bulk.ATTACH_PAIRS = CHUNK_ARGS, 64
    sends = 0
    send_step = bulk.send_step

    def stopping(store, parts, **options):
        global sends
        sends += 1
        step = sends

        def watched():
            for number, chunk in enumerate(parts):
                if step == stop_send and number == stop_chunk:
                    if mode == "kill":
                        os.kill(os.getpid(), signal.SIGKILL)
                    print("stopped", flush=True)
                    sys.stdin.readline()  # the server is gone now
                yield chunk

        return send_step(store, watched(), **options)

    bulk.send_step = stopping
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    if len(sys.argv) > 5:  # verified
        from tests.test_bulk_crash import open_verified, verified_docs
        index = open_verified(client)
        ids, fps, sketches = verified_docs(index)
        for start in range(0, len(ids), WINDOW):
            part = slice(start, start + WINDOW)
            index.bulk_add_sketched(ids[part], fps[part], sketches[part])
            print("done", min(start + WINDOW, len(ids)), flush=True)
    else:
        index = open_index(client)
        index.bulk_add(items(), window=WINDOW, on_progress=lambda done, _: print("done", done, flush=True))
    print("complete", flush=True)
    """
)


def items() -> list[tuple[str, int]]:
    """The load: three windows, with shared fingerprints, ids named twice and replacements."""
    first = load(TOTAL, seed=21)
    return first + [(doc_id, fp ^ 5) for doc_id, fp in first[:300:3]]


def open_index(client: redis.Redis, name: str = NAME) -> SimhashIndex:
    """The index every run of the load writes to."""
    from simhash_redis.transport import Backoff

    return SimhashIndex(
        client, name, k=3, id_buckets=64, batch_size=50, backoff=Backoff(retries=2, base=0.01, cap=0.05)
    )


def open_verified(client: redis.Redis, name: str = NAME) -> VerifiedIndex:
    """The verified index every run of a verified load writes to (small band tables: shared keys)."""
    return VerifiedIndex(open_index(client, name), band_buckets=32)


def verified_docs(index: VerifiedIndex) -> tuple[list[str], list[int], list[bytes]]:
    """A verified load of three windows: texts with edits and copies, then replacements of some."""
    pairs = verified_texts(TOTAL, seed=21)
    pairs += [(doc_id, article(5000 + i, words=60)) for i, (doc_id, _) in enumerate(pairs[:300:3])]
    texts = [text for _, text in pairs]
    return [i for i, _ in pairs], index.index.fingerprint_many(texts), index.hasher.sketch_many(texts)


def start(url: str, mode: str, send: int, chunk: int, verified: bool = False) -> subprocess.Popen[str]:
    """The loader, stopping at the `chunk`-th chunk of its `send`-th step ("kill" or "pause")."""
    return subprocess.Popen(
        [sys.executable, "-c", LOADER, url, mode, str(send), str(chunk), *(["verified"] if verified else [])],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture(scope="module")
def durable() -> Iterator[ServerProcess]:
    """A private server that fsyncs its append-only file before every reply."""
    with ServerProcess({"appendonly": "yes", "appendfsync": "always"}) as server:
        yield server


@pytest.fixture(scope="module")
def clean(durable: ServerProcess) -> Content:
    """What a clean run of the load leaves."""
    durable.flushall()
    with durable.client() as client:
        index = open_index(client, "crash")
        index.add_many(items()[:200])
        index.bulk_add(items(), window=WINDOW)
        return content(index)


def prepared(server: ServerProcess) -> None:
    """An emptied server holding the load's first 200 pairs (so the load replaces and keeps some)."""
    server.flushall()
    with server.client() as client:
        open_index(client).add_many(items()[:200])


# What verify() must find after a stop before each step's third chunk (proof that the load really was
# cut in the middle of the step), all of it invisible to near().
# What `verify` finds unfinished after a crash in each step; after step 5 nothing is (every step's
# script counts what it adds, so the counts are the data's throughout).
LEFT: dict[str, str | None] = {
    "tables": "orphan table member",
    "id map": "orphan table member",
    "fingerprint map": "id missing from fingerprint map",
    "table check": None,
}


def rerun_and_compare(server: ServerProcess, clean: Content, step: str) -> None:
    """Nothing half-visible, and what is unfinished as `LEFT` says; then the same load again gives the
    clean index."""
    with server.client() as client:
        index = open_index(client)
        left = assert_nothing_half_visible(index)
        assert (LEFT[step] in left) if LEFT[step] else not left, left
        index.bulk_add(items(), window=WINDOW)
        assert_same(clean, content(index))


@pytest.mark.parametrize("step", ["tables", "id map", "fingerprint map", "table check"])
def test_kill9_of_the_loader(durable: ServerProcess, clean: Content, step: str) -> None:
    prepared(durable)
    loader = start(durable.url, "kill", len(STEPS) + STEPS[step], 2)
    out, err = loader.communicate(timeout=120)
    assert loader.returncode == -signal.SIGKILL, err[-2000:]
    assert out.splitlines() == [f"done {WINDOW}"], out  # killed in the second window
    rerun_and_compare(durable, clean, step)


@pytest.mark.parametrize("step", ["tables", "id map", "fingerprint map"])
def test_kill9_of_the_server(durable: ServerProcess, clean: Content, step: str) -> None:
    prepared(durable)
    loader = start(durable.url, "pause", len(STEPS) + STEPS[step], 2)
    assert loader.stdout is not None and loader.stdin is not None
    assert loader.stdout.readline() == f"done {WINDOW}\n"
    assert loader.stdout.readline() == "stopped\n"
    durable.kill9()
    loader.stdin.write("go on\n")
    loader.stdin.flush()
    out, err = loader.communicate(timeout=120)
    assert loader.returncode != 0 and "complete" not in out
    assert "RedisUnavailable" in err or "RedisTimeout" in err, err[-2000:]
    durable.restart()  # the append-only file is read again
    rerun_and_compare(durable, clean, step)


# -- a verified index ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_verified(durable: ServerProcess) -> dict[bytes, object]:
    """What a clean run of the verified load leaves."""
    durable.flushall()
    with durable.client() as client:
        index = open_verified(client)
        ids, fps, sketches = verified_docs(index)
        index.add_sketched(ids[:200], fps[:200], sketches[:200])
        for begin in range(0, len(ids), WINDOW):
            part = slice(begin, begin + WINDOW)
            index.bulk_add_sketched(ids[part], fps[part], sketches[part])
        return logical(index)


def prepared_verified(server: ServerProcess) -> None:
    """An emptied server holding the verified load's first 200 documents."""
    server.flushall()
    with server.client() as client:
        index = open_verified(client)
        ids, fps, sketches = verified_docs(index)
        index.add_sketched(ids[:200], fps[:200], sketches[:200])


#: What `verify` must find after a stop in each step of a verified window (the load was cut there).
VERIFIED_FOUND = {
    "tables": "orphan table member",
    "sketches": "orphan table member",
    "bands": "sketch without a document",
    "id map": "sketch without a document",
    "fingerprint map": "id missing from fingerprint map",
    "table check": None,
}


def rerun_verified(server: ServerProcess, clean: dict[bytes, object], step: str) -> None:
    """Nothing half-visible (no listed id without its sketch and band values); then the same load again
    gives the clean index."""
    with server.client() as client:
        index = open_verified(client)
        report = index.index.verify()
        assert set(report.problems) <= VERIFIED_LEFT, report.as_dict()
        found = VERIFIED_FOUND[step]
        assert (found in report.problems) if found else not report.problems, report.as_dict()
        assert_whole(index)
        ids, fps, sketches = verified_docs(index)
        for begin in range(0, len(ids), WINDOW):
            part = slice(begin, begin + WINDOW)
            index.bulk_add_sketched(ids[part], fps[part], sketches[part])
        got = logical(index)
        assert sorted(got) == sorted(clean)
        assert [key for key in clean if clean[key] != got[key]] == []
        assert index.index.verify().ok


@pytest.mark.parametrize("step", list(VERIFIED_FOUND))
def test_kill9_of_a_verified_loader(
    durable: ServerProcess, clean_verified: dict[bytes, object], step: str
) -> None:
    prepared_verified(durable)
    loader = start(durable.url, "kill", FIRST_VERIFIED + VERIFIED_STEPS[step], 2, verified=True)
    out, err = loader.communicate(timeout=120)
    assert loader.returncode == -signal.SIGKILL, err[-2000:]
    assert out.splitlines() == [f"done {WINDOW}"], out  # killed in the second window
    rerun_verified(durable, clean_verified, step)


@pytest.mark.parametrize("step", ["sketches", "bands", "fingerprint map"])
def test_kill9_of_the_server_during_a_verified_load(
    durable: ServerProcess, clean_verified: dict[bytes, object], step: str
) -> None:
    prepared_verified(durable)
    loader = start(durable.url, "pause", FIRST_VERIFIED + VERIFIED_STEPS[step], 2, verified=True)
    assert loader.stdout is not None and loader.stdin is not None
    assert loader.stdout.readline() == f"done {WINDOW}\n"
    assert loader.stdout.readline() == "stopped\n"
    durable.kill9()
    loader.stdin.write("go on\n")
    loader.stdin.flush()
    out, err = loader.communicate(timeout=120)
    assert loader.returncode != 0 and "complete" not in out
    assert "RedisUnavailable" in err or "RedisTimeout" in err, err[-2000:]
    durable.restart()  # the append-only file is read again
    rerun_verified(durable, clean_verified, step)
