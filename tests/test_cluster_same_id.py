"""Writers of one id on Redis Cluster, caught between their steps: the index stays what verify calls
consistent, and near() never gives an id under a fingerprint it no longer has.

A cluster's write of a document is ordered single-key steps (docs/cluster.md). Here writer A is held,
by an event, right before its last step (its id joins the fingerprint's list, after its commit), while
writer B runs a whole call on the same id; then A goes on. Deterministic: A's hold and B's progress are
events, never timed sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simhash_redis import Match, Retention, SimhashIndex
from simhash_redis.store import locks as locks_module
from simhash_redis.store.store import FP_IDS
from simhash_redis.transport import SEND, Steps
from tests.servers import ClusterProcess
from tests.test_asyncio import twelve_writers_of_one_id

pytestmark = pytest.mark.cluster

F, G = 0x0123_4567_89AB_CDEF, 0x7EDC_BA98_7654_3210
BUCKETS = 1024


def _attaching(batches: Any) -> bool:
    """Whether a send holds a call joining an id to a fingerprint's list (fp_ids.lua '+')."""
    return any(
        command[0] == b"EVALSHA" and command[1] == FP_IDS.sha and command[4] == b"+"
        for batch in batches
        for command in batch
    )


class _Held:
    """Holds an index's writes right before their first attach until released."""

    def __init__(self, index: SimhashIndex) -> None:
        self.at_attach, self.go = threading.Event(), threading.Event()
        run = index.store.run

        def held_run(steps: Callable[[], Steps[Any]], **kwargs: Any) -> Any:
            return run(lambda: self._holding(steps()), **kwargs)

        index.store.run = held_run  # type: ignore[method-assign]

    def _holding(self, steps: Steps[Any]) -> Steps[Any]:
        reply: Any = None
        while True:
            try:
                kind, arg = steps.send(reply)
            except StopIteration as done:
                return done.value
            if kind == SEND and _attaching(arg) and not self.go.is_set():
                self.at_attach.set()
                assert self.go.wait(60), "never released"
            reply = yield kind, arg


def _open(cluster: ClusterProcess, retention: str | None) -> SimhashIndex:
    return SimhashIndex(
        cluster.client(),
        "same-id",
        k=3,
        id_buckets=BUCKETS,
        retention=None if retention is None else Retention(3600, 600),
    )


@pytest.fixture
def cluster(redis_cluster: ClusterProcess) -> Iterator[ClusterProcess]:
    redis_cluster.wait_ok()
    redis_cluster.flushall()
    yield redis_cluster


def _race(
    cluster: ClusterProcess,
    retention: str | None,
    first: Callable[[SimhashIndex], object],
    second: Callable[[SimhashIndex], object],
    monkeypatch: pytest.MonkeyPatch,
    setup: Callable[[SimhashIndex], object] = lambda _: None,
) -> SimhashIndex:
    """Run `first` held before its attach, `second` whole (or until it waits for `first`), then the rest."""
    a, b = _open(cluster, retention), _open(cluster, retention)
    setup(a)
    held = _Held(a)
    second_moved = threading.Event()
    real_pause = locks_module.pause
    errors: list[BaseException] = []

    def running(call: Callable[[], object], done: threading.Event | None = None) -> threading.Thread:
        def target() -> None:
            try:
                call()
            except BaseException as exc:  # reported by the test's thread
                errors.append(exc)
            finally:
                if done is not None:
                    done.set()

        return threading.Thread(target=target, daemon=True)

    one, two = running(lambda: first(a)), running(lambda: second(b), second_moved)

    def pause(seconds: float) -> None:
        # The second writer waiting (for the first's write to end) is as far as it can go.
        if threading.current_thread() is two:
            second_moved.set()
        real_pause(seconds)

    monkeypatch.setattr(locks_module, "pause", pause)
    one.start()
    assert held.at_attach.wait(60) or errors, errors
    two.start()
    assert second_moved.wait(60), "the second writer neither ended nor waited"
    held.go.set()
    one.join(60)
    two.join(60)
    assert not one.is_alive() and not two.is_alive()
    assert not errors, errors
    return a


def _listed(index: SimhashIndex, fp: int) -> list[str]:
    """The ids near(fp) gives at distance 0."""
    return [m.id for m in index.near(fp, k=0)]


@pytest.mark.parametrize("retention", [None, "1h"])
def test_a_removal_between_an_add_and_its_attach_leaves_no_entry(
    cluster: ClusterProcess, retention: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _race(cluster, retention, lambda a: a.add("x", F), lambda b: b.remove("x"), monkeypatch)
    report = index.verify()
    assert report.ok, report.examples
    # Whichever went first, x is either stored with F (and listed) or gone (and not listed).
    assert (index.get("x"), _listed(index, F)) in ((F, ["x"]), (None, []))


@pytest.mark.parametrize("retention", [None, "1h"])
def test_a_replacement_between_an_add_and_its_attach_leaves_one_entry(
    cluster: ClusterProcess, retention: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _race(cluster, retention, lambda a: a.add("x", F), lambda b: b.add("x", G), monkeypatch)
    report = index.verify()
    assert report.ok, report.examples
    stored = index.get("x")
    assert stored in (F, G)
    assert _listed(index, stored) == ["x"]
    assert _listed(index, F ^ G ^ stored) == []


def test_a_removal_between_an_add_if_new_and_its_attach_leaves_no_entry(
    cluster: ClusterProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _race(cluster, None, lambda a: a.add_if_new("x", F), lambda b: b.remove("x"), monkeypatch)
    report = index.verify()
    assert report.ok, report.examples
    assert (index.get("x"), _listed(index, F)) in ((F, ["x"]), (None, []))


def test_an_add_between_a_replacement_and_its_attach_leaves_one_entry(
    cluster: ClusterProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x had G: A moves it to F, B (held behind A or not) adds it with G again."""
    index = _race(
        cluster,
        None,
        lambda a: a.add("x", F),
        lambda b: b.add("x", G),
        monkeypatch,
        setup=lambda a: a.add("x", G),
    )
    report = index.verify()
    assert report.ok, report.examples
    stored = index.get("x")
    assert _listed(index, stored) == ["x"] and _listed(index, F ^ G ^ stored) == []
    assert index.near(F, k=0) == ([Match("x", F, 0)] if stored == F else [])


def test_twelve_tasks_writing_one_id_leave_it_consistent(cluster: ClusterProcess) -> None:
    """Twelve asyncio tasks on one id (4 each of add, remove and add_if_new, 60 calls each), as
    tests/test_asyncio.py runs them on one server: before the id locks, the id was left listed under
    fingerprints it no longer had."""
    url = f"redis://127.0.0.1:{cluster.startup_nodes[0].port}/0"
    counts, report = twelve_writers_of_one_id(url, id_buckets=BUCKETS)
    assert report.ok, report.examples
    assert counts in ((0, 0), (1, 1))
