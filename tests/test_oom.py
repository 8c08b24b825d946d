"""Out of memory: a server with a small maxmemory under noeviction refuses writes.

The library must raise the typed RedisOutOfMemory, leave no document half-applied (each batch is one
script, and a script is refused before its first write or runs to the end), keep serving reads, and let
the same load resume once memory is available. The CLI's `load` must exit non-zero and say how to resume.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from simhash_redis import SimhashIndex
from simhash_redis.errors import RedisOutOfMemory, RedisUnavailable
from simhash_redis.transport import Backoff
from tests.servers import ServerProcess

MAXMEMORY = "3mb"
BATCH = 200
#: Far more documents than fit in MAXMEMORY (each costs a few hundred bytes in 6 keys or entries).
TOTAL = 40_000


def documents(total: int = TOTAL, seed: int = 3) -> list[tuple[str, int]]:
    """Ids with random fingerprints, every 5th sharing the one before (fingerprint-map lists)."""
    rng = random.Random(seed)
    fps = [rng.getrandbits(64) for _ in range(total)]
    for i in range(5, total, 5):
        fps[i] = fps[i - 1]
    return [(f"doc-{i}", fp) for i, fp in enumerate(fps)]


@pytest.fixture
def small() -> Iterator[ServerProcess]:
    """A private server with a few MB of maxmemory and the noeviction policy."""
    with ServerProcess({"maxmemory": MAXMEMORY, "maxmemory-policy": "noeviction"}) as server:
        yield server


def fill_until_oom(index: SimhashIndex, docs: list[tuple[str, int]]) -> tuple[int, RedisOutOfMemory]:
    """Add batches until the server refuses one: the index of the refused batch's first doc, and the
    error. Any other error fails the test (an untyped OOM was once a bug: redis-py strips the reply's
    ``OOM`` code and raises OutOfMemoryError, which the translation did not recognise)."""
    for first in range(0, len(docs), BATCH):
        try:
            index.add_many(docs[first : first + BATCH])
        except RedisOutOfMemory as exc:
            return first, exc
    raise AssertionError(f"{len(docs)} documents fit in maxmemory {MAXMEMORY}: raise TOTAL")


def assert_consistent(index: SimhashIndex, docs: list[tuple[str, int]], stored_upto: int) -> None:
    """Exactly docs[:stored_upto] are stored, each with its fingerprint; verify() finds nothing."""
    got = index.get_many([doc_id for doc_id, _ in docs])
    expected = [fp if i < stored_upto else None for i, (_, fp) in enumerate(docs)]
    wrong = [docs[i][0] for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
    assert not wrong, wrong[:10]
    report = index.verify()
    assert report.ok, report.as_dict()
    assert index.count() == (stored_upto, len({fp for _, fp in docs[:stored_upto]}))


def test_out_of_memory_is_typed_atomic_and_resumable(small: ServerProcess) -> None:
    docs = documents()
    with small.client() as client:
        index = SimhashIndex(client, "oom", k=3, id_buckets=64, backoff=Backoff(retries=1, base=0.01))
        refused, _ = fill_until_oom(index, docs)
        assert refused > 0
        # Nothing of the refused batch, everything before it.
        assert_consistent(index, docs, refused)
        # Unique adds are refused the same way; reads still work. (The refused document's own writes
        # were undone, which may bring memory just under the limit: lower it so the server stays full.)
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", max(1_000_000, used - 500_000))
        new_fp = random.Random(8).getrandbits(64)
        with pytest.raises(RedisOutOfMemory):
            index.add_if_new("late", new_fp)
        assert index.get("late") is None
        assert [m.id for m in index.near(docs[0][1], k=0)] == [docs[0][0]]
        assert_consistent(index, docs, refused)
        # Resume: with room again, running the same load from the start completes it.
        client.config_set("maxmemory", "0")
        index.add_many(docs[: refused + 10 * BATCH])
        assert_consistent(index, docs, refused + 10 * BATCH)


def cli_load(url: str, path: Path) -> tuple[int, str]:
    """`simhash-redis --redis-url URL --index oom load PATH` in-process: (exit code, stderr)."""
    from simhash_redis.cli.app import app

    result = CliRunner().invoke(
        app, ["--redis-url", url, "--index", "oom", "load", str(path), "-j", "1", "--batch-size", str(BATCH)]
    )
    return result.exit_code, result.stderr


def test_cli_load_exits_nonzero_and_says_how_to_resume(small: ServerProcess, tmp_path: Path) -> None:
    docs = documents(25_000, seed=4)
    path = tmp_path / "docs.fp"
    path.write_text("".join(f"{doc_id}\t0x{fp:016x}\n" for doc_id, fp in docs))
    code, stderr = cli_load(small.url, path)
    assert code == 4, stderr  # ExitCode.UNAVAILABLE
    assert "out of memory" in stderr, stderr
    assert "run the same command again" in stderr, stderr
    with small.client() as client:
        index = SimhashIndex(client, "oom")
        stored = index.count()[0]
        assert 0 < stored < len(docs)
        assert index.verify().ok
        client.config_set("maxmemory", "0")
        code, stderr = cli_load(small.url, path)
        assert code == 0, stderr
        assert_consistent(index, docs, len(docs))


def test_removals_still_work_when_full(small: ServerProcess) -> None:
    """Removing an id whose fingerprint no other id has starts with deletions, which noeviction allows.

    (An id leaving a fingerprint that other ids share first rewrites that fingerprint's id list, an
    HSET, which the server refuses while over maxmemory: such a removal fails with RedisOutOfMemory,
    atomically, like an add.)
    """
    docs = documents()
    with small.client() as client:
        index = SimhashIndex(client, "oom", k=3, id_buckets=64, backoff=Backoff(retries=1, base=0.01))
        refused, _ = fill_until_oom(index, docs)
        alone = [i for i in range(refused - 2 * BATCH, refused) if i % 5 in (1, 2, 3)]
        assert all(index.remove_many([docs[i][0] for i in alone]))
        got = index.get_many([doc_id for doc_id, _ in docs[:refused]])
        assert [i for i, fp in enumerate(got) if fp is None] == alone
        assert index.verify().ok
        kept = [fp for i, (_, fp) in enumerate(docs[:refused]) if i not in set(alone)]
        assert index.count() == (len(kept), len(set(kept)))


def test_out_of_memory_raises_the_typed_error(small: ServerProcess) -> None:
    with small.client() as client:
        index = SimhashIndex(client, "oom", k=3, id_buckets=64, backoff=Backoff(retries=1, base=0.01))
        _, exc = fill_until_oom(index, documents())
    assert isinstance(exc, RedisOutOfMemory), repr(exc)
    assert isinstance(exc, RedisUnavailable)
    message = str(exc)
    assert "out of memory" in message and "run the same operation again" in message, message


def test_cli_load_reports_out_of_memory_with_exit_code_4(small: ServerProcess, tmp_path: Path) -> None:
    path = tmp_path / "docs.fp"
    path.write_text("".join(f"{doc_id}\t0x{fp:016x}\n" for doc_id, fp in documents(25_000, seed=5)))
    code, stderr = cli_load(small.url, path)
    assert code == 4, stderr  # ExitCode.UNAVAILABLE
    assert "out of memory" in stderr, stderr


def test_oom_reply_maps_to_the_typed_error() -> None:
    """The translation itself, for the two forms of the reply (plain and from inside a script)."""
    from simhash_redis.transport import translate_error

    plain = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
    scripted = redis.exceptions.ResponseError(
        "OOM command not allowed when used memory > 'maxmemory'. script: abc, on @user_script:12."
    )
    for exc in (plain, scripted):
        assert isinstance(translate_error(exc), RedisOutOfMemory), exc
