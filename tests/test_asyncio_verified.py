"""AsyncVerifiedIndex: the verified mode awaited, racing tasks deciding by the Jaccard threshold."""

from __future__ import annotations

import asyncio
import inspect
import random
import subprocess
import sys

import pytest

from simhash_redis import ConfigurationMismatch, Outcome, VerifiedIndex, VerifiedMatch
from simhash_redis.asyncio import AsyncVerifiedIndex
from tests.servers import ClusterProcess, ServerProcess
from tests.test_verified_mode import K8, _race_groups, article, one_word_edit


@pytest.mark.parametrize("where", ["server", "cluster"])
def test_tasks_racing_one_word_edits_store_one_per_story(where: str, request: pytest.FixtureRequest) -> None:
    target: ServerProcess | ClusterProcess = request.getfixturevalue(
        "redis_cluster" if where == "cluster" else "redis_server"
    )
    target.flushall()

    async def main() -> tuple[list[int], tuple[int, int], bool, int]:
        async with await AsyncVerifiedIndex.from_url(target.url, "race", **K8) as index:
            # Per story, one-word edits within k/2 of the story's fingerprint: every two are candidates
            # of each other (and near-duplicates by Jaccard), so exactly one per story must be stored.
            groups = _race_groups(index.index, groups=12, racers=8)
            docs = [(f"s{s}-e{e}", text, s) for s, texts in enumerate(groups) for e, text in enumerate(texts)]
            random.Random(1).shuffle(docs)
            start = asyncio.Event()

            async def one(doc_id: str, text: str, story: int) -> int | None:
                await start.wait()
                return story if await index.add_if_new(doc_id, text) is None else None

            tasks = [asyncio.create_task(one(*doc)) for doc in docs]
            await asyncio.sleep(0)
            start.set()
            stored = [story for story in await asyncio.gather(*tasks) if story is not None]
            sketches = sum([await index.sketch_of(doc_id) is not None for doc_id, _, _ in docs])
            return stored, await index.count(), (await index.verify()).ok, sketches

    stored, counts, ok, sketches = asyncio.run(main())
    assert sorted(stored) == list(range(12))
    assert counts[0] == 12 and ok
    assert sketches == 12  # no refused document left a sketch behind


def test_the_verified_calls_awaited(redis_server: ServerProcess) -> None:
    redis_server.flushall()
    story = article(3)

    async def main() -> None:
        opened = AsyncVerifiedIndex.from_url(redis_server.url, "calls", threshold=0.7, **K8)
        async with await opened as index:
            assert index.threshold == 0.7 and index.k == 8
            assert await index.add("a", story) is Outcome.ADDED
            assert await index.add_many([("b", article(4))]) == [Outcome.ADDED]
            found = await index.near(one_word_edit(story, 1))
            assert [m.id for m in found] == ["a"] and isinstance(found[0], VerifiedMatch)
            both = await index.near_many([story, article(4)])
            assert [[m.id for m in one] for one in both] == [["a"], ["b"]]
            duplicate = await index.add_if_new("c", one_word_edit(story, 2))
            assert duplicate is not None and duplicate.id == "a" and duplicate.jaccard >= 0.7
            assert await index.add_if_new_many([("d", article(5))]) == [None]
            assert await index.get("d") is not None
            assert await index.remove("a") is True and await index.sketch_of("a") is None
            assert await index.remove_many(["b", "zz"]) == [True, False]
            assert (await index.verify()).ok
            assert await index.drop() > 0
        with pytest.raises(ConfigurationMismatch):  # another threshold than the pinned one
            async with await AsyncVerifiedIndex.from_url(redis_server.url, "other", threshold=0.7, **K8):
                pass
            await AsyncVerifiedIndex.from_url(redis_server.url, "other", threshold=0.9)

    asyncio.run(main())


def test_every_awaited_method_takes_verified_index_arguments() -> None:
    for name, member in inspect.getmembers(AsyncVerifiedIndex, inspect.iscoroutinefunction):
        if name.startswith("_") or name in ("open", "aclose", "from_url"):
            continue
        theirs = getattr(VerifiedIndex, name, None) or getattr(VerifiedIndex, "index", None)
        if not callable(theirs):  # get, count, verify, drop: the wrapped SimhashIndex's, as above
            continue
        ours = inspect.signature(member).parameters.values()
        assert [(p.name, p.kind, p.default) for p in ours] == [
            (p.name, p.kind, p.default) for p in inspect.signature(theirs).parameters.values()
        ], name


def test_sync_and_async_open_through_one_function(
    redis_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`VerifiedIndex.from_url` and `AsyncVerifiedIndex` open through `VerifiedIndex.on_client`, with the
    same arguments: the same index, mode and errors."""
    redis_server.flushall()
    seen: list[tuple[str, dict[str, object]]] = []
    real = VerifiedIndex.on_client.__func__  # type: ignore[attr-defined]

    def spy(cls: type[VerifiedIndex], client: object, name: str, **kwargs: object) -> VerifiedIndex:
        seen.append((name, {k: v for k, v in kwargs.items() if k != "max_candidates"}))
        return real(cls, client, name, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(VerifiedIndex, "on_client", classmethod(spy))
    sync = VerifiedIndex.from_url(redis_server.url, "once", threshold=0.7, band_buckets=64, **K8)
    assert sync.threshold == 0.7 and sync.verification.band_buckets == 64

    async def main() -> None:
        async with await AsyncVerifiedIndex.from_url(redis_server.url, "once", threshold=0.7, **K8) as index:
            assert index.threshold == 0.7 and index.index.verification.band_buckets == 64
        with pytest.raises(ConfigurationMismatch, match="band_buckets=64, not 32"):
            await AsyncVerifiedIndex.from_url(redis_server.url, "once", band_buckets=32)

    asyncio.run(main())
    assert [name for name, _ in seen] == ["once"] * 3
    assert seen[0][1] == {"hasher": None, "threshold": 0.7, "band_buckets": 64, **K8}
    assert seen[1][1] == {"threshold": 0.7, **K8}


def test_the_asyncio_class_answers_every_read_of_the_synchronous_one(redis_server: ServerProcess) -> None:
    """`get_many` of the verified index `open_index` gives by default was missing from the asyncio class
    (AttributeError), though `VerifiedIndex` and `AsyncSimhashIndex` have it. Left out: the sketched
    forms (a caller's own sketches) and `on_client`, a constructor."""
    sketched = {"add_sketched", "bulk_add_sketched", "near_sketched", "on_client", "max_candidates"}
    public = {name for name in dir(VerifiedIndex) if not name.startswith("_")}
    assert public - sketched <= set(dir(AsyncVerifiedIndex))
    redis_server.flushall()

    async def main() -> None:
        async with await AsyncVerifiedIndex.from_url(redis_server.url, "reads") as index:
            await index.add("a", article(1))
            assert await index.get_many(["a", "b"]) == [await index.get("a"), None]

    asyncio.run(main())


_PAIRS = """
import asyncio, sys
from simhash_redis.asyncio import AsyncVerifiedIndex


async def main(url):
    text = "a page of a site about one topic, with a few words more"
    async with await AsyncVerifiedIndex.from_url(url, "pairs", batch_size=11_000) as index:
        await index.add("a", text)
        assert all(await index.near_many([text] * 11_000))


asyncio.run(main(sys.argv[1]))
"""


def test_near_many_of_a_large_batch_confirms_its_pairs_without_crashing(redis_server: ServerProcess) -> None:
    # The pairs' estimates, in numpy passes over 3 x 11,000 query levels (over numpy's 256 KiB elision
    # limit), ran backtrace() inside the call's greenlet: the process died of a SIGSEGV.
    redis_server.flushall()
    done = subprocess.run([sys.executable, "-c", _PAIRS, redis_server.url], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
