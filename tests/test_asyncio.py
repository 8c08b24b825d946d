"""AsyncSimhashIndex: the synchronous index's guarantees, awaited, under hundreds of concurrent tasks.

The index contract itself runs on it in test_index_contract.py (the `asyncio` and `asyncio_cluster`
parameters); here are what asyncio adds: races of many tasks, cancellation, a small connection pool,
lost replies, and the API's own surface.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster

from simhash_redis import (
    ConfigurationMismatch,
    IndexCorrupted,
    IndexNotFound,
    InvalidArgument,
    InvalidType,
    Match,
    Outcome,
    RedisUnavailable,
    SimhashIndex,
    SimhashRedisError,
)
from simhash_redis.asyncio import AsyncSimhashIndex
from simhash_redis.transport import Backoff, greenlet_bridge
from tests.faultproxy import FaultProxy
from tests.servers import ClusterProcess, ServerProcess

A = 0x0123456789ABCDEF


def groups_of_near_duplicates(groups: int, size: int, seed: int = 7) -> list[tuple[str, int, int]]:
    """(id, fingerprint, group): `size` one-bit variants of each of `groups` random bases, shuffled.

    Any two variants of a group are within distance 2 of each other; bases are about 32 bits apart.
    """
    rng = random.Random(seed)
    bases = [rng.getrandbits(64) for _ in range(groups)]
    docs = [
        (f"g{g}-v{v}", base ^ (1 << rng.randrange(64)), g)
        for g, base in enumerate(bases)
        for v in range(size)
    ]
    rng.shuffle(docs)
    return docs


async def race(indexes: list[AsyncSimhashIndex], docs: list[tuple[str, int, int]], naive: bool) -> list[int]:
    """Every document added by a task of its own, all started at once; the groups of those stored.

    A task that fails stops the others (awaited) before its exception is raised here.
    """
    start = asyncio.Event()

    async def one(i: int, doc_id: str, fp: int, group: int) -> int | None:
        index = indexes[i % len(indexes)]
        await start.wait()
        if naive:  # check, then insert: what add_if_new exists to prevent
            if await index.near(fp):
                return None
            await index.add(doc_id, fp)
            return group
        return group if await index.add_if_new(doc_id, fp) is None else None

    tasks = [asyncio.create_task(one(i, *doc)) for i, doc in enumerate(docs)]
    await asyncio.sleep(0)
    start.set()
    try:
        done = await asyncio.gather(*tasks)
    except BaseException:
        # One task failed: stop the others before the caller closes the index, else they go on with
        # connections of a closed client and leave them to the garbage collector.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [group for group in done if group is not None]


def opened(url: str, name: str, **options: Any) -> Callable[[], Awaitable[AsyncSimhashIndex]]:
    return lambda: AsyncSimhashIndex.from_url(url, name, **options)


@pytest.mark.parametrize("where", ["server", "cluster"])
def test_hundreds_of_tasks_racing_add_if_new_store_one_per_group(
    where: str, request: pytest.FixtureRequest
) -> None:
    target: ServerProcess | ClusterProcess = request.getfixturevalue(
        "redis_cluster" if where == "cluster" else "redis_server"
    )
    target.flushall()
    docs = groups_of_near_duplicates(groups=40, size=10)

    async def main() -> tuple[list[int], tuple[int, int], Any]:
        # Two indexes on two clients (two pools), 400 tasks between them.
        first = await AsyncSimhashIndex.from_url(target.url, "race", k=3, id_buckets=1024)
        second = await AsyncSimhashIndex.from_url(target.url, "race", k=3, id_buckets=1024)
        try:
            stored = await race([first, second], docs, naive=False)
            return stored, await first.count(), await second.verify()
        finally:
            await first.aclose()
            await second.aclose()

    stored, counts, report = asyncio.run(main())
    assert sorted(stored) == list(range(40))
    assert counts == (40, 40)
    assert report.ok


def test_the_race_catches_check_then_insert(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    docs = groups_of_near_duplicates(groups=40, size=10)

    async def main() -> list[int]:
        async with await AsyncSimhashIndex.from_url(redis_server.url, "naive", k=3) as index:
            return await race([index], docs, naive=True)

    assert len(asyncio.run(main())) > 40  # near-then-add stores several of a group


def test_more_tasks_than_the_pool_has_connections_wait_their_turn(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    docs = groups_of_near_duplicates(groups=30, size=10, seed=3)

    async def main() -> list[int]:
        client = redis.asyncio.Redis.from_url(redis_server.url, max_connections=4)
        try:
            return await race([AsyncSimhashIndex(client, "small-pool", k=3)], docs, naive=False)
        finally:
            await client.aclose()

    assert sorted(asyncio.run(main())) == list(range(30))


def test_tasks_beyond_a_cluster_nodes_connections_wait_their_turn(redis_cluster: ClusterProcess) -> None:
    """redis.asyncio's cluster nodes refuse a connection past their limit instead of waiting for one;
    the index queues its calls instead (without retries here, a refusal would fail the call)."""
    redis_cluster.flushall()
    docs = groups_of_near_duplicates(groups=10, size=10, seed=4)

    async def main() -> list[int]:
        client = redis.asyncio.cluster.RedisCluster.from_url(redis_cluster.url, max_connections=2)
        try:
            index = AsyncSimhashIndex(client, "small-pool", k=3, id_buckets=1024, backoff=Backoff(retries=0))
            return await race([index], docs, naive=False)
        finally:
            await client.aclose()

    assert sorted(asyncio.run(main())) == list(range(10))


def test_a_cancelled_call_leaves_no_half_read_connection_and_nothing_half_written(
    redis_server: ServerProcess,
) -> None:
    redis_server.flushall()
    rng = random.Random(5)
    fps = [rng.getrandbits(64) for _ in range(20_000)]

    async def main() -> tuple[int, int, list[Match], bool]:
        client = redis.asyncio.Redis.from_url(redis_server.url, max_connections=1, socket_timeout=5)
        index = AsyncSimhashIndex(client, "cancel", k=3)
        try:
            await index.add_many([(f"d{i}", fp) for i, fp in enumerate(fps)])
            cancelled = 0
            for delay in (0.0005, 0.001, 0.002, 0.005, 0.01):
                # A long read and a long write, cut off by a timeout at some point of their conversation.
                writes = [(f"e{i}", fp ^ 1) for i, fp in enumerate(fps)]
                for call in (index.near_many(fps), index.add_many(writes)):
                    try:
                        await asyncio.wait_for(call, delay)
                    except asyncio.TimeoutError:
                        cancelled += 1
            # The pool's one connection is usable: its replies are the ones asked for now.
            near = await index.near(fps[123])
            report = await index.verify()
            docs, _ = await index.count()
            return cancelled, docs, near, report.ok
        finally:
            await client.aclose()

    cancelled, docs, near, ok = asyncio.run(main())
    assert cancelled > 0
    assert Match("d123", fps[123], 0) in near
    assert ok  # every written document complete, counts from the data
    assert 20_000 <= docs <= 40_000


def test_lost_replies_are_resent_without_changing_the_result(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    rng = random.Random(9)
    items = [(f"d{i}", rng.getrandbits(64)) for i in range(3_000)]
    with FaultProxy(redis_server.port, drop_rate=0.1, seed=4) as proxy:

        async def main() -> None:
            patient = Backoff(retries=80, base=0.001, cap=0.02)  # faults every few milliseconds
            async with await AsyncSimhashIndex.from_url(
                proxy.url, "lossy", k=3, batch_size=100, backoff=patient
            ) as index:
                await index.add_many(items)
                await index.add_many(items)  # a rerun: unchanged

        asyncio.run(main())
        assert proxy.dropped_after_write > 0
    index = SimhashIndex(redis_server.client(), "lossy")
    assert index.get_many([doc_id for doc_id, _ in items]) == [fp for _, fp in items]
    assert index.count() == (3_000, len({fp for _, fp in items}))
    assert index.verify().ok


def test_a_windowed_index_works_through_asyncio(redis_server: ServerProcess) -> None:
    redis_server.flushall()

    async def main() -> tuple[Outcome, list[Match], Match | None, int | None]:
        async with await AsyncSimhashIndex.from_url(redis_server.url, "win", k=3, retention="1h") as index:
            added = await index.add("a", A)
            return added, await index.near(A ^ 1), await index.add_if_new("b", A ^ 3), await index.get("a")

    assert asyncio.run(main()) == (Outcome.ADDED, [Match("a", A, 1)], Match("a", A, 2), A)


def test_opening_refuses_what_simhash_index_refuses(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    SimhashIndex(redis_server.client(), "conf", k=3)

    async def main() -> None:
        with pytest.raises(ConfigurationMismatch):
            await AsyncSimhashIndex.from_url(redis_server.url, "conf", k=4)
        with pytest.raises(IndexNotFound):
            await AsyncSimhashIndex.from_url(redis_server.url, "absent", create=False)
        index = AsyncSimhashIndex(redis.asyncio.Redis.from_url(redis_server.url), "conf", k=5)
        with pytest.raises(ConfigurationMismatch):  # refused at first use when not opened first
            await index.near(A)
        await index.client.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["plain", "verified"])
def test_a_call_with_wrong_arguments_writes_nothing(redis_server: ServerProcess, kind: str) -> None:
    from simhash_redis.asyncio import AsyncVerifiedIndex

    redis_server.flushall()

    async def main() -> None:
        client = redis.asyncio.Redis.from_url(redis_server.url)
        index = AsyncSimhashIndex(client, "arity") if kind == "plain" else AsyncVerifiedIndex(client, "arity")
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: index.add("only-id"),  # type: ignore[call-arg]
            lambda: index.near(),  # type: ignore[call-arg]
            lambda: index.add_if_new("id", "text", "no such"),  # type: ignore[call-arg]
            lambda: index.remove(),  # type: ignore[call-arg]
        ]
        for call in calls:
            with pytest.raises(TypeError, match=type(index).__name__):
                await call()
        await client.aclose()

    asyncio.run(main())
    assert redis_server.client().keys("*") == []  # the refused calls opened (created) nothing


def test_urls_and_clients_of_the_wrong_kind_are_refused_clearly() -> None:
    with pytest.raises(InvalidType, match=r"redis\.asyncio\.Redis.*got redis\.client\.Redis"):
        AsyncSimhashIndex(redis.Redis(), "x")
    with pytest.raises(InvalidType, match=r"use simhash_redis\.asyncio\.AsyncSimhashIndex"):
        SimhashIndex(redis.asyncio.Redis(), "x")  # type: ignore[arg-type]

    async def main() -> None:
        with pytest.raises(InvalidArgument, match="not a valid Redis URL"):
            await AsyncSimhashIndex.from_url("redis://:secret@host:notaport/0", "x")
        with pytest.raises(RedisUnavailable) as caught:
            await AsyncSimhashIndex.from_url("redis://:hunter2@127.0.0.1:1/0", "x")
        assert "hunter2" not in str(caught.value)

    asyncio.run(main())


def test_configuration_reads_need_an_open_index(redis_server: ServerProcess) -> None:
    redis_server.flushall()

    async def main() -> None:
        index = AsyncSimhashIndex(redis.asyncio.Redis.from_url(redis_server.url), "lazy", k=2)
        with pytest.raises(SimhashRedisError, match="not open yet"):
            _ = index.k
        assert "not open" in repr(index)
        async with index:
            assert (index.k, index.f, index.cluster) == (2, 64, False)
            assert index.fingerprint(A) == A
        await index.client.aclose()  # a client passed in stays open after the block

    asyncio.run(main())


def test_the_cluster_client_is_initialised_by_the_index(redis_cluster: ClusterProcess) -> None:
    redis_cluster.flushall()

    async def main() -> tuple[bool, list[Match]]:
        client = redis.asyncio.cluster.RedisCluster.from_url(redis_cluster.url)  # never initialised by us
        index = AsyncSimhashIndex(client, "lazy-cluster", k=3, id_buckets=1024)
        try:
            await index.add("a", A)
            return index.cluster, await index.near(A)
        finally:
            await client.aclose()

    assert asyncio.run(main()) == (True, [Match("a", A, 0)])


def test_count_and_verify_on_a_cluster_with_the_default_buckets(redis_cluster: ClusterProcess) -> None:
    # They pack a call per slot of 2 x 131,072 bucket keys in numpy: numpy's temporary elision (arrays of
    # 256 KiB or more) ran backtrace() inside the call's greenlet and the process died of a SIGSEGV.
    redis_cluster.flushall()

    async def main() -> tuple[tuple[int, int], bool]:
        async with await AsyncSimhashIndex.from_url(redis_cluster.url, "default-buckets", k=3) as index:
            await index.add("a", A)
            return await index.count(), (await index.verify()).ok

    assert asyncio.run(main()) == ((1, 1), True)


# Each numpy pass over one batch, run in a call of the bridge after a wait (its stack then copied back
# below other frames): 40,000 fingerprints, a batch_size a caller may choose, make arrays over 256 KiB.
_BATCH_PASSES = """
import asyncio, random, sys
from simhash_redis.store.bulk import _key_values
from simhash_redis.store.candidates import band_hits
from simhash_redis.store.layout import Layout
from simhash_redis.transport import greenlet_bridge

rng = random.Random(1)
fps = [rng.getrandbits(64) for _ in range(40_000)]
members = [rng.getrandbits(63).to_bytes(8, "little") for _ in range(4 * len(fps))]
passes = {
    "key_values": lambda: _key_values(fps, Layout.pigeonhole(64, 3)),
    "band_hits": lambda: band_hits(fps, members, 4, 64),
}


def call():
    greenlet_bridge.wait(asyncio.sleep(0))
    return passes[sys.argv[1]]()


async def main():
    await asyncio.gather(*(greenlet_bridge.run(call) for _ in range(2)))


asyncio.run(main())
"""


@pytest.mark.parametrize("numpy_pass", ["key_values", "band_hits"])
def test_a_batchs_numpy_passes_run_in_a_call_without_crashing(numpy_pass: str) -> None:
    # numpy's temporary elision ran backtrace() on the call's greenlet stack: the process died of a
    # SIGSEGV (bulk loads and near_many with a batch_size of 32,768 or more).
    done = subprocess.run([sys.executable, "-c", _BATCH_PASSES, numpy_pass], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_every_awaited_method_takes_simhash_index_arguments() -> None:
    awaited = [
        name
        for name, member in inspect.getmembers(AsyncSimhashIndex, inspect.iscoroutinefunction)
        if not name.startswith("_") and name not in ("open", "aclose")
    ]
    assert {"add", "add_many", "add_if_new", "near", "near_many", "get", "remove", "drop", "verify"} <= set(
        awaited
    )
    for name in awaited:
        ours = inspect.signature(getattr(AsyncSimhashIndex, name)).parameters.values()
        theirs = inspect.signature(getattr(SimhashIndex, name)).parameters.values()
        shape = [(p.name, p.kind, p.default) for p in theirs]
        assert [(p.name, p.kind, p.default) for p in ours] == shape, name
        if name not in ("exists", "restore"):  # their client is redis.asyncio's: annotated Any
            assert [p.annotation for p in ours] == [p.annotation for p in theirs], name


def test_waiting_outside_the_bridge_is_refused_and_leaves_no_unawaited_coroutine() -> None:
    async def never() -> None:
        raise AssertionError("not run")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be a RuntimeWarning
        with pytest.raises(RuntimeError, match=r"outside simhash_redis\.asyncio"):
            greenlet_bridge.wait(never())


def test_a_pause_inside_a_call_lets_other_tasks_run() -> None:
    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        started = time.monotonic()
        await greenlet_bridge.run(greenlet_bridge.pause, 0.2)
        assert time.monotonic() - started >= 0.19
        task.cancel()
        return ticks

    assert asyncio.run(main()) >= 3  # a loop blocked by the pause would tick once at most


def test_a_pass_on_the_loops_stack_runs_in_place_outside_a_call_and_raises_where_called() -> None:
    @greenlet_bridge.on_loop_stack
    def where(fail: bool = False) -> bool:
        if fail:
            raise ValueError("failed")
        return greenlet_bridge.bridged()

    def inside() -> tuple[bool, bool, bool]:
        raised = False
        try:
            where(fail=True)
        except ValueError:
            raised = True  # raised in the call, which goes on
        return greenlet_bridge.bridged(), where(), raised

    assert where() is False  # the synchronous API: called here
    assert asyncio.run(greenlet_bridge.run(inside)) == (True, False, True)


def test_an_error_reply_is_the_same_typed_error(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    sync = SimhashIndex(redis_server.client(), "typed", k=3)
    sync.add("a", A)
    table_key = sync.keys.tables(A)[0]
    redis_server.client().delete(table_key)
    redis_server.client().set(table_key, b"not a set")  # another program wrote there

    async def main() -> None:
        async with await AsyncSimhashIndex.from_url(redis_server.url, "typed") as index:
            with pytest.raises(IndexCorrupted, match="wrong type"):
                await index.near(A)
            assert await index.get("a") == A  # the connection still answers in order

    asyncio.run(main())


def test_exists_and_restore_are_awaited_too(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    SimhashIndex(redis_server.client(), "lost", k=4).add("a", A)
    redis_server.client().delete(b"simhash:lost:meta")

    async def main() -> tuple[bool, bool, int, list[Match]]:
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            before = await AsyncSimhashIndex.exists(client, "lost")
            index = await AsyncSimhashIndex.restore(client, "lost", k=4)
            return before, await AsyncSimhashIndex.exists(client, "lost"), index.k, await index.near(A)
        finally:
            await client.aclose()

    assert asyncio.run(main()) == (False, True, 4, [Match("a", A, 0)])


def test_cancelled_calls_on_a_cluster_leak_no_connection_and_no_lock(redis_cluster: ClusterProcess) -> None:
    redis_cluster.flushall()
    rng = random.Random(6)
    fps = [rng.getrandbits(64) for _ in range(20_000)]

    async def main() -> tuple[int, list[Match], list[bytes]]:
        # Three connections per node: a connection leaked by a cancelled call would soon exhaust them.
        client = redis.asyncio.cluster.RedisCluster.from_url(redis_cluster.url, max_connections=3)
        index = AsyncSimhashIndex(client, "cancel", k=3, id_buckets=1024)
        try:
            await index.add_many([(f"d{i}", fp) for i, fp in enumerate(fps[:2_000])])
            cancelled = 0
            for round_ in range(30):
                delay = (1, 2, 5, 10, 20)[round_ % 5] / 1000
                uniques = [(f"u{round_}-{i}", fp ^ 0xF0F0) for i, fp in enumerate(fps[:300])]
                for call in (index.near_many(fps), index.add_many(uniques, unique=True)):
                    try:
                        await asyncio.wait_for(call, delay)
                    except asyncio.TimeoutError:
                        cancelled += 1
            near = await index.near(fps[7])
            locks = []
            for node in client.get_primaries():
                locks.extend(await node.execute_command("KEYS", "*:lock:*"))
            return cancelled, near, locks
        finally:
            await client.aclose()

    cancelled, near, locks = asyncio.run(main())
    assert cancelled >= 30
    assert Match("d7", fps[7], 0) in near
    assert locks == []


def test_indexes_sharing_a_small_pool_take_turns(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    rng = random.Random(8)
    fps = [rng.getrandbits(64) for _ in range(400)]

    async def main() -> list[list[list[Match]]]:
        client = redis.asyncio.Redis.from_url(redis_server.url, max_connections=4)
        first, second = AsyncSimhashIndex(client, "shared", k=3), AsyncSimhashIndex(client, "shared", k=3)
        try:
            await first.add_many([(f"d{i}", fp) for i, fp in enumerate(fps)])
            calls = [(first if i % 2 else second).near_many(fps[i : i + 10]) for i in range(400)]
            return await asyncio.gather(*calls)
        finally:
            await client.aclose()

    results = asyncio.run(main())
    assert all(found[0][0].fingerprint == fps[i] for i, found in enumerate(results))


def test_an_unreachable_cluster_is_a_typed_error() -> None:
    async def main() -> None:
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=1)  # nothing listens there
        with pytest.raises(RedisUnavailable, match="cannot reach the Redis Cluster"):
            await AsyncSimhashIndex(client, "x", backoff=Backoff(retries=1, base=0.001)).open()

    asyncio.run(main())


def test_an_asyncio_client_outside_the_asyncio_index_is_refused_clearly() -> None:
    for client in (redis.asyncio.Redis(), redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=1)):
        with pytest.raises(InvalidType, match="AsyncSimhashIndex"):
            SimhashIndex.exists(client, "x")  # type: ignore[arg-type]


def test_the_callers_context_variables_are_seen_inside_a_call() -> None:
    import contextvars

    request = contextvars.ContextVar("request", default="none")

    def inner() -> str:
        greenlet_bridge.pause(0)
        return request.get()

    async def one(name: str) -> str:
        request.set(name)
        return await greenlet_bridge.run(inner)

    async def main() -> list[str]:
        return await asyncio.gather(*(one(f"r{i}") for i in range(20)))

    assert asyncio.run(main()) == [f"r{i}" for i in range(20)]


def test_a_client_used_again_under_another_event_loop(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    client = redis.asyncio.Redis.from_url(redis_server.url, max_connections=2)

    async def main() -> int:
        index = AsyncSimhashIndex(client, "loops", k=3)
        await index.add("a", A)
        found = await asyncio.gather(*(index.near(A) for _ in range(20)))  # more calls than connections
        await client.connection_pool.disconnect()  # its connections belong to this loop
        return len(found)

    assert asyncio.run(main()) == 20
    assert asyncio.run(main()) == 20


def test_a_subclass_of_the_asyncio_client_is_taken(redis_server: ServerProcess) -> None:
    redis_server.flushall()

    class Tagged(redis.asyncio.Redis):
        """An application's own client class."""

    async def main() -> list[Match]:
        client = Tagged.from_url(redis_server.url)
        try:
            index = AsyncSimhashIndex(client, "sub", k=3)
            await index.add("a", A)
            return await index.near(A)
        finally:
            await client.aclose()

    assert asyncio.run(main()) == [Match("a", A, 0)]


@pytest.mark.parametrize("retention", [None, "1h"])
def test_tasks_writing_one_id_at_once_all_get_their_turn(
    redis_server: ServerProcess, retention: str | None
) -> None:
    """Three tasks writing one id (add, remove, add_if_new) in turn on one event loop: each write that met
    another's was sent again at once and, the loop running the tasks in lockstep, met the next one every
    time, until WriteContention; every write now gets through."""
    redis_server.flushall()

    async def main() -> tuple[tuple[int, int], Any]:
        index = await AsyncSimhashIndex.from_url(redis_server.url, "one-id", k=3, retention=retention)
        rng = random.Random(5)
        fps = [rng.getrandbits(64) for _ in range(120)]

        async def adds() -> None:
            for fp in fps[:60]:
                await index.add("x", fp)

        async def removes() -> None:
            for _ in range(60):
                await index.remove("x")

        async def unique() -> None:
            for fp in fps[60:]:
                await index.add_if_new("x", fp)

        try:
            await asyncio.gather(adds(), removes(), unique())
            return await index.count(), await index.verify()
        finally:
            await index.aclose()

    counts, report = asyncio.run(main())
    assert counts in ((0, 0), (1, 1))
    assert report.ok


@pytest.mark.parametrize("mode", ["plain", "verified"])
def test_closing_while_calls_run_lets_them_finish_then_refuses_calls(
    redis_server: ServerProcess, mode: str
) -> None:
    """aclose() while tasks' calls run (a crawler shutting down): it used to close the client under them,
    and they reconnected and completed on connections nobody closed (a ResourceWarning each, at exit), as
    did any call after it. aclose waits for the calls running, then closes; a later call is an error."""
    from simhash_redis.asyncio import open_index

    redis_server.flushall()
    texts = [" ".join(f"w{i}x{j}" for j in range(40)) for i in range(40)]

    async def main() -> None:
        index = await open_index("closing", redis_server.url, verified=mode == "verified")
        calls = [asyncio.create_task(index.add_if_new(f"d{i}", text)) for i, text in enumerate(texts)]
        await asyncio.sleep(0)  # every call started
        await index.aclose()
        assert all(call.done() for call in calls) and [call.result() for call in calls] == [None] * 40
        pool = index.client.connection_pool
        assert not pool._in_use_connections and not any(c.is_connected for c in pool._available_connections)
        with pytest.raises(SimhashRedisError, match="'closing' is closed"):
            await index.near(texts[0])
        await index.aclose()  # twice: nothing more to do

    asyncio.run(main())
    client = redis.Redis.from_url(redis_server.url)
    assert SimhashIndex(client, "closing", create=False).count()[0] == 40
    client.close()


def twelve_writers_of_one_id(url: str, **options: Any) -> tuple[tuple[int, int], Any]:
    """Four tasks each of add, remove and add_if_new on one id, 60 calls each; the index's count and
    verify report after (also run on a cluster by tests/test_cluster_same_id.py)."""

    async def main() -> tuple[tuple[int, int], Any]:
        index = await AsyncSimhashIndex.from_url(url, "twelve", k=3, **options)

        async def adds(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(60):
                await index.add("x", rng.getrandbits(64))

        async def removes() -> None:
            for _ in range(60):
                await index.remove("x")

        async def unique(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(60):
                await index.add_if_new("x", rng.getrandbits(64))

        try:
            await asyncio.gather(
                *(adds(i) for i in range(4)),
                *(removes() for _ in range(4)),
                *(unique(10 + i) for i in range(4)),
            )
            return await index.count(), await index.verify()
        finally:
            await index.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("retention", [None, "1h"])
def test_twelve_tasks_writing_one_id_all_complete(redis_server: ServerProcess, retention: str | None) -> None:
    """Twelve tasks on one id (4 each of add, remove and add_if_new, 60 calls each): a write resent after a
    conflict's pause carried the value the conflict answered, as old as the pause, so the tasks that never
    paused had written the id meanwhile and it lost again, round after round, until WriteContention (every
    run). A resend after a pause now reads the id's value first; every call completes."""
    redis_server.flushall()
    counts, report = twelve_writers_of_one_id(redis_server.url, retention=retention)
    assert counts in ((0, 0), (1, 1))
    assert report.ok, report.examples
