"""`load` on the bulk path: when it is taken, the same end state as the atomic path, and what stops it.

Real server throughout; `BULK_MIN` is lowered so that small inputs reach the bulk path.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from simhash_redis.cli.progress import Progress

from simhash_redis import SimhashIndex
from simhash_redis.errors import IndexNotFound, SimhashRedisError
from simhash_redis.index import simhash_index
from simhash_redis.jobs import fingerprinter, loader
from simhash_redis.jobs.fingerprinter import Fingerprinter
from simhash_redis.jobs.loader import Bulk, Loader
from simhash_redis.jobs.readers import Record
from tests.bulk_helpers import assert_model, assert_same, content, final_state
from tests.bulk_helpers import load as bulk_pairs
from tests.cli.conftest import Invoke, article, write_jsonl


def _fp_rows(pairs: list[tuple[str, int]]) -> list[dict[str, object]]:
    return [{"id": doc_id, "fp": format(fp, "016x")} for doc_id, fp in pairs]


@pytest.fixture
def low_bulk_min(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(loader, "BULK_MIN", 500)
    return 500


def test_auto_takes_the_bulk_path_for_large_file_loads_with_the_atomic_paths_end_state(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path, low_bulk_min: int
) -> None:
    pairs = bulk_pairs(3 * low_bulk_min)  # shared fingerprints and ids named twice included
    path = write_jsonl(tmp_path / "fps.jsonl", _fp_rows(pairs))
    bulk = invoke(
        "load", str(path), "--fingerprint-field", "fp", "--json", "-q", "--window", "400", index="b"
    )
    atomic = invoke("load", str(path), "--fingerprint-field", "fp", "--json", "-q", "--no-bulk", index="a")
    assert bulk.exit_code == 0, bulk.output
    assert atomic.exit_code == 0, atomic.output
    by_bulk, by_atomic = json.loads(bulk.stdout), json.loads(atomic.stdout)
    assert by_bulk["bulk"] is True and by_atomic["bulk"] is False
    for key in ("read", "added", "replaced", "unchanged", "written"):
        assert by_bulk[key] == by_atomic[key], key
    index_b, index_a = SimhashIndex(redis_client, "b"), SimhashIndex(redis_client, "a")
    assert_model(index_b, final_state(pairs))
    assert_same(content(index_a), content(index_b))
    # Run again: nothing new, and the same index.
    again = invoke("load", str(path), "--fingerprint-field", "fp", "--json", "-q", index="b")
    assert json.loads(again.stdout)["added"] == 0  # ids named twice replace each other again
    assert_same(content(index_a), content(index_b))


def test_small_file_loads_and_stdin_stay_on_the_atomic_path(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path, low_bulk_min: int
) -> None:
    pairs = bulk_pairs(low_bulk_min - 1, twice=0)
    path = write_jsonl(tmp_path / "fps.jsonl", _fp_rows(pairs))
    small = invoke("load", str(path), "--fingerprint-field", "fp", "--json", "-q", index="s")
    assert json.loads(small.stdout)["bulk"] is False
    many = bulk_pairs(2 * low_bulk_min, twice=0, prefix="p")
    piped = "".join(json.dumps(row) + "\n" for row in _fp_rows(many))
    stdin = invoke("load", "-", "--format", "jsonl", "--fingerprint-field", "fp", "--json", "-q", input=piped)
    assert stdin.exit_code == 0, stdin.output
    assert json.loads(stdin.stdout)["bulk"] is False
    forced = invoke(
        "load",
        "-",
        "--format",
        "jsonl",
        "--fingerprint-field",
        "fp",
        "--json",
        "-q",
        "--bulk",
        input=piped,
        index="f",
    )
    assert json.loads(forced.stdout)["bulk"] is True
    assert_model(SimhashIndex(redis_client, "f"), final_state(many))


def test_gzipped_inputs_are_held_until_they_reach_bulk_min(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path, low_bulk_min: int
) -> None:
    # Their lines cannot be counted beforehand: the first BULK_MIN records decide.
    for n, bulk in ((low_bulk_min - 1, False), (2 * low_bulk_min, True)):
        pairs = bulk_pairs(n, twice=0, prefix=f"g{n}")
        path = write_jsonl(tmp_path / f"fps{n}.jsonl.gz", _fp_rows(pairs), gz=True)
        result = invoke("load", str(path), "--fingerprint-field", "fp", "--json", "-q", index=f"g{n}")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["bulk"] is bulk
        assert_model(SimhashIndex(redis_client, f"g{n}"), final_state(pairs))


def test_bulk_with_dedupe_is_a_usage_error(invoke: Invoke, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "text": article(1)}])
    result = invoke("load", str(path), "--dedupe", "--bulk")
    assert result.exit_code == 2
    assert "--bulk" in result.output and "Traceback" not in result.output


def test_window_where_no_bulk_write_is_made_is_a_usage_error(invoke: Invoke, tmp_path: Path) -> None:
    # --window with --no-bulk (or --dedupe, never bulk) was accepted and ignored.
    path = write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "text": article(1)}])
    for option in ("--no-bulk", "--dedupe"):
        result = invoke("load", str(path), option, "--window", "5", index="w")
        assert result.exit_code == 2, result.output
        assert (
            result.stderr
            == f"error: --window sizes the bulk path's windows, which {option} leaves out: its "
            + ("writes are batches of --batch-size documents, each atomic\n")
        )
    assert invoke("stats", index="w").exit_code == 1  # refused before an index was made
    assert invoke("load", str(path), "--window", "5", index="w").exit_code == 0
    assert invoke("load", str(path), "--no-bulk", index="w").exit_code == 0


def test_text_load_on_the_bulk_path_matches_the_atomic_one(
    redis_client: redis.Redis, tmp_path: Path, low_bulk_min: int
) -> None:
    rows = [{"id": f"t{i}", "text": article(i % 700, copy=i // 700)} for i in range(2 * low_bulk_min)]
    path = str(write_jsonl(tmp_path / "t.jsonl", rows))
    indexes = []
    for name, mode in (("tb", Bulk.ON), ("ta", Bulk.OFF)):
        index = SimhashIndex(redis_client, name)
        stats = Loader(index, workers=2, batch_size=100, bulk=mode, window=300).load([path])
        assert stats.bulk is (mode is Bulk.ON)
        assert stats.written == stats.read == len(rows)
        indexes.append(index)
    assert_same(content(indexes[1]), content(indexes[0]))


@pytest.mark.parametrize("mode", [Bulk.ON, Bulk.OFF])
def test_a_load_stops_when_the_index_vanishes(
    redis_client: redis.Redis, mode: Bulk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simhash_index, "META_TRUSTED", 0.0)  # the index reads its meta before each batch
    index = SimhashIndex(redis_client, "gone")
    pairs = bulk_pairs(3000, twice=0)
    records = (Record("in", i + 1, doc_id, fp) for i, (doc_id, fp) in enumerate(pairs))
    deleted = []

    def delete_meta(stats: loader.LoadStats) -> None:
        if not deleted:
            deleted.append(stats.written)
            redis_client.delete(index.keys.meta_key(index.prefix, index.name))

    load = Loader(index, workers=1, batch_size=500, bulk=mode, window=1000, on_progress=delete_meta)
    with pytest.raises(IndexNotFound, match="vanished during the load"):
        load.run(records)
    # The bulk path checks after every window; the atomic one before each batch (here: the meta trusted
    # for no time), so the batch after the first is refused.
    assert load.stats.written == (1000 if mode is Bulk.ON else 500)


def test_in_flight_on_the_bulk_path_is_the_window_being_written(redis_client: redis.Redis) -> None:
    """Batches of 700 and windows of 1000: the documents counted in flight are those of the window whose
    write was under way, never the rest of the batch that filled it."""
    index = SimhashIndex(redis_client, "flight")
    pairs = bulk_pairs(2500, twice=0)
    records = (Record("in", i + 1, doc_id, fp) for i, (doc_id, fp) in enumerate(pairs))
    seen: list[tuple[int, int]] = []

    def watch(stats: loader.LoadStats) -> None:
        seen.append((stats.written, stats.in_flight))

    load = Loader(index, workers=1, batch_size=700, bulk=Bulk.ON, window=1000, on_progress=watch)
    original = load.index.bulk_add_columns
    windows: list[int] = []

    def interrupted(batches: object, **options: object) -> object:
        def stop_in_second_window(done: int, outcomes: list[object]) -> None:
            on_progress(done, outcomes)
            windows.append(len(outcomes))
            if len(windows) == 2:
                raise KeyboardInterrupt

        on_progress = options.pop("on_progress")
        return original(batches, on_progress=stop_in_second_window, **options)  # type: ignore[arg-type]

    load.index.bulk_add_columns = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        load.run(records)
    assert seen == [(1000, 0), (2000, 0)]
    assert load.stats.sent == 2000


@pytest.fixture
def windows_by_time(monkeypatch: pytest.MonkeyPatch) -> int:
    """Bulk windows cut by time at once: every 1,000 documents (what a slow fingerprinting pace gives)."""
    monkeypatch.setattr(loader, "WINDOW_SECONDS", 0.0, raising=False)
    monkeypatch.setattr(loader, "WINDOW_MIN", 1000, raising=False)
    return 1000


def test_a_bulk_window_cut_by_time_moves_the_counts_and_an_interruption_keeps_it(
    redis_client: redis.Redis, windows_by_time: int
) -> None:
    """Windows of a million documents at most, but written once they have filled for WINDOW_SECONDS: the
    windows written before Ctrl-C are stored, each document whole, and the rerun completes the load."""
    index = SimhashIndex(redis_client, "timed")
    pairs = bulk_pairs(5000, twice=0)

    def records() -> Iterator[Record]:
        return (Record("in", i + 1, doc_id, fp) for i, (doc_id, fp) in enumerate(pairs))

    seen: list[int] = []

    def watch(stats: loader.LoadStats) -> None:
        seen.append(stats.written)
        if stats.written == 3000:
            raise KeyboardInterrupt

    load = Loader(index, workers=1, batch_size=700, bulk=Bulk.ON, on_progress=watch)
    with pytest.raises(KeyboardInterrupt):
        load.run(records())
    assert seen == [1000, 2000, 3000] and load.stats.in_flight == 0
    assert index.count()[0] == 3000 and index.verify().ok
    assert index.get_many([doc_id for doc_id, _ in pairs[:3000]]) == [fp for _, fp in pairs[:3000]]
    again = Loader(index, workers=1, batch_size=700, bulk=Bulk.ON).run(records())
    assert (again.unchanged, again.added) == (3000, 2000)
    assert index.verify().ok


def test_bulk_progress_lines_come_during_the_load_and_ctrl_c_keeps_the_windows_written(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, windows_by_time: int
) -> None:
    rows = [{"id": f"p{i}", "text": article(i)} for i in range(4000)]
    path = write_jsonl(tmp_path / "many.jsonl", rows)
    result = invoke("--plain", "load", "--bulk", "--progress-every", "0", str(path), "--json", index="moving")
    assert result.exit_code == 0, result.output
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress:")]
    assert [line.split()[1] for line in progress] == [
        "1,000/4,000",
        "2,000/4,000",
        "3,000/4,000",
        "4,000/4,000",
    ]
    updates: list[int] = []
    original = Progress.update

    def interrupt_after_two_windows(self: Progress, done: int, *, force: bool = False) -> None:
        original(self, done, force=force)
        updates.append(done)
        if len(updates) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(Progress, "update", interrupt_after_two_windows)
    stopped = invoke("--plain", "load", "--bulk", "--progress-every", "0", str(path), index="stopped")
    assert stopped.exit_code == 130, stopped.output
    assert "interrupted: 2,000 documents" in stopped.stderr, stopped.stderr
    monkeypatch.setattr(Progress, "update", original)
    resumed = invoke("load", "--bulk", str(path), "--json", index="stopped")
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    assert (summary["unchanged"], summary["added"]) == (2000, 2000), summary


def test_interrupted_summary_names_what_was_in_flight(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a batch is being written: the acknowledged count, and the batch that may be stored."""
    rows = [{"id": f"i{i}", "text": article(i)} for i in range(300)]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    original = SimhashIndex.add_many
    calls = []

    def interrupt_second_batch(self: SimhashIndex, items: object, **kwargs: object) -> object:
        calls.append(1)
        result = original(self, items, **kwargs)  # type: ignore[call-overload]
        if len(calls) == 2:
            raise KeyboardInterrupt  # the reply came, but the loader never heard it
        return result

    monkeypatch.setattr(SimhashIndex, "add_many", interrupt_second_batch)
    # A plain index: its batches are SimhashIndex.add_many's.
    result = invoke("--plain", "load", str(path), "--batch-size", "100", "--workers", "1", index="int")
    assert result.exit_code == 130
    assert "interrupted: 100 documents" in result.output
    assert "100 more documents (the batch in flight) were not acknowledged" in result.output


def _slow_stdin_load(url: str, index: str, *, new_session: bool) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).parent / "simhash-redis"
    return subprocess.Popen(
        [
            str(exe),
            "--redis-url",
            url,
            "--index",
            index,
            "load",
            "-",
            "--format",
            "jsonl",
            "--batch-size",
            "100",
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=new_session,
    )


@pytest.mark.parametrize("whole_group", [False, True], ids=["docker-stop", "systemd"])
def test_sigterm_stops_a_load_like_ctrl_c(
    redis_url: str, redis_client: redis.Redis, whole_group: bool
) -> None:
    """docker stop signals the loader only; systemd and Kubernetes signal its workers as well."""
    proc = _slow_stdin_load(redis_url, "term", new_session=whole_group)
    assert proc.stdin is not None
    # Ten batches: the loader writes a batch once the workers have the next few.
    rows = "".join(json.dumps({"id": f"s{i}", "text": article(i)}) + "\n" for i in range(1000))
    proc.stdin.write(rows.encode())
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not (
        SimhashIndex.exists(redis_client, "term") and SimhashIndex(redis_client, "term").count()[0] >= 300
    ):
        assert time.monotonic() < deadline, "the load did not start"
        time.sleep(0.05)
    if whole_group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    stderr = err.decode()
    assert proc.returncode == 143, stderr
    assert "terminated: " in stderr and "run the same command again" in stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_leave_sigterm_to_the_loader(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM to the whole group (systemd) once ended the workers too, one of them halfway through
    writing its result to the pool's pipe: the pool's reader then waited for the rest for ever and the
    loader never exited. The workers ignore it, as they ignore Ctrl-C; the loader stops the pool."""
    worker, _ = _busy_pool(redis_client, monkeypatch)
    both = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
    try:
        children = multiprocessing.active_children()
        assert children
        for child in children:
            # Forked workers all start at the first batch; one may still be running its initializer
            # (which sets them) when another has answered: wait for its state, bounded.
            deadline = time.monotonic() + 60
            while (ignored := _ignored_signals(child.pid or 0)) & both != both:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            assert ignored & (1 << (signal.SIGTERM - 1)), f"worker {child.pid} takes SIGTERM"
            assert ignored & (1 << (signal.SIGINT - 1)), f"worker {child.pid} takes SIGINT"
    finally:
        worker.close()


def _ignored_signals(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    [ignored] = [line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")]
    return int(ignored, 16)


def _busy_pool(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> tuple[Fingerprinter, Iterator[object]]:
    """A two-worker fingerprinter busy with batches of a megabyte or so, the first batch taken: the
    pool's feeder thread is still writing one to its pipe when the workers die."""
    # Forked workers are this process's children, which the test can find and kill (the suite's threads
    # would otherwise make the pool use a forkserver).
    monkeypatch.setattr(fingerprinter, "_pool_context", lambda: multiprocessing.get_context("fork"))
    index = SimhashIndex(redis_client, "busy")
    units = [Record("in", i + 1, f"k{i}", article(i) * 4) for i in range(12 * 100)]
    worker = Fingerprinter(index.scheme, index.f, "auto", 2, 100)
    batches = worker.batches(iter(units))
    next(batches)
    return worker, batches


def _kill_workers() -> None:
    for child in multiprocessing.active_children():
        os.kill(child.pid or 0, signal.SIGKILL)


def _assert_winds_down(manager: threading.Thread | None) -> None:
    # On Python 3.10 a broken pool's manager thread joined a feeder thread stuck for ever, and so did
    # the interpreter's exit.
    if manager is not None:
        manager.join(timeout=20)
        assert not manager.is_alive()


def test_a_killed_worker_ends_the_load_with_an_error_not_a_hang(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, batches = _busy_pool(redis_client, monkeypatch)
    _kill_workers()
    with pytest.raises(SimhashRedisError, match="worker process died"):
        for _ in batches:
            pass
    manager = getattr(worker._executor, "_executor_manager_thread", None)
    worker.close()
    _assert_winds_down(manager)


def test_workers_killed_while_the_pool_shuts_down_do_not_hang_the_exit(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd's SIGTERM reaches the workers while the loader is closing their pool."""
    worker, _ = _busy_pool(redis_client, monkeypatch)
    pool = worker._executor
    assert pool is not None
    manager = getattr(pool, "_executor_manager_thread", None)
    shutdown = pool.shutdown

    def shutdown_then_kill(wait: bool = True, *, cancel_futures: bool = False) -> None:
        shutdown(wait, cancel_futures=cancel_futures)
        _kill_workers()

    monkeypatch.setattr(pool, "shutdown", shutdown_then_kill)
    worker.close()
    _assert_winds_down(manager)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_workers_end_when_the_loader_is_killed(redis_url: str, redis_client: redis.Redis) -> None:
    proc = _slow_stdin_load(redis_url, "orphans", new_session=True)
    assert proc.stdin is not None
    rows = "".join(json.dumps({"id": f"o{i}", "text": article(i)}) + "\n" for i in range(1000))
    proc.stdin.write(rows.encode())
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while len(workers := _children(proc.pid)) < 2:
        assert time.monotonic() < deadline, "no worker processes started"
        time.sleep(0.05)
    proc.kill()  # kill -9: no chance to stop the workers itself
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while alive := [pid for pid in workers if Path(f"/proc/{pid}").exists()]:
        assert time.monotonic() < deadline, f"workers outlived the loader: {alive}"
        time.sleep(0.05)


def test_a_run_that_replaces_many_ids_warns(invoke: Invoke, tmp_path: Path) -> None:
    today = write_jsonl(tmp_path / "today.jsonl", [{"id": f"n{i}", "text": article(i)} for i in range(50)])
    tomorrow = write_jsonl(
        tmp_path / "next.jsonl", [{"id": f"n{i}", "text": article(i + 500)} for i in range(50)]
    )
    assert "warning" not in invoke("load", str(today), index="warn").stderr
    second = invoke("load", str(tomorrow), index="warn")
    assert second.exit_code == 0, second.output
    assert "warning: 50 of 50 documents replaced" in second.stderr


def test_a_verified_index_takes_the_bulk_path_with_the_atomic_paths_stored_data(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path, low_bulk_min: int
) -> None:
    """`load` of text into a verified index: AUTO takes the bulk path above BULK_MIN, each document with
    its sketch and band values, and stores what `--no-bulk` stores (replacements and copies included)."""
    from simhash_redis import VerifiedIndex
    from tests.test_verified_bulk import assert_same as assert_same_verified
    from tests.test_verified_bulk import assert_whole, logical

    count = 3 * low_bulk_min
    rows = [{"id": f"d{i}", "text": article(i % 500, copy=i // 500)} for i in range(count)]
    rows += [{"id": f"d{i}", "text": article(10_000 + i)} for i in range(0, count, 11)]  # replacements
    path = write_jsonl(tmp_path / "texts.jsonl", rows)
    options = ("--json", "-q", "--workers", "1")
    bulk = invoke("--verified", "load", str(path), *options, "--window", "400", index="vb")
    atomic = invoke("--verified", "load", str(path), *options, "--no-bulk", index="va")
    assert bulk.exit_code == 0, bulk.output
    assert atomic.exit_code == 0, atomic.output
    by_bulk, by_atomic = json.loads(bulk.stdout), json.loads(atomic.stdout)
    assert by_bulk["bulk"] is True and by_atomic["bulk"] is False
    for key in ("read", "added", "replaced", "unchanged", "written"):
        assert by_bulk[key] == by_atomic[key], key
    index_b = VerifiedIndex(SimhashIndex(redis_client, "vb", create=False))
    index_a = VerifiedIndex(SimhashIndex(redis_client, "va", create=False))
    assert_same_verified(logical(index_a), logical(index_b))
    assert_whole(index_b)
    assert index_b.index.verify().ok
    again = invoke("--verified", "load", str(path), *options, "--bulk", index="vb")
    assert json.loads(again.stdout)["added"] == 0  # ids named twice are replaced twice again
    assert_same_verified(logical(index_a), logical(index_b))


def test_one_worker_killed_ends_the_load_with_an_error_while_its_siblings_ignore_sigterm(
    redis_client: redis.Redis,
) -> None:
    """A broken pool terminates the workers left and waits for them, holding the lock every call of the
    pool takes: workers that ignore SIGTERM must still end (one blocked on the call queue's lock its
    killed sibling held hung the load for ever)."""
    index = SimhashIndex(redis_client, "one-killed")
    units = [Record("in", i + 1, f"k{i}", article(i) * 4) for i in range(12 * 100)]
    worker = Fingerprinter(index.scheme, index.f, "auto", 2, 100)
    batches = worker.batches(iter(units))
    next(batches)
    pool: Any = worker._executor
    workers = list(pool._processes.values())
    os.kill(workers[0].pid, signal.SIGKILL)
    # Once the pool knows, a batch is still to come: the batches the pool held may all have been done by
    # the other worker before it looked (a loaded machine), but the rest are submitted after it.
    deadline = time.monotonic() + 60  # a bound against a hang, not a timing
    while not pool._broken and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        with pytest.raises(SimhashRedisError, match="worker process died"):
            for _ in batches:
                pass
    finally:
        worker.close()
    for process in workers:
        process.join(timeout=60)  # a bound against a hang, not a timing
        assert process.exitcode is not None, f"worker {process.pid} outlived its broken pool"
