"""The examples of docs/crawlers.md, run as written against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

DOC = Path(__file__).resolve().parents[1] / "docs" / "crawlers.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def _defined(block: int, name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> object:
    """What a Python block of the page defines under `name`, run against the suite's server (the one
    $SIMHASH_REDIS_URL names, as on every worker of the page)."""
    monkeypatch.setenv("SIMHASH_REDIS_URL", redis_url)
    namespace: dict[str, object] = {}
    exec(_blocks()[block], namespace)
    return namespace[name]


def test_the_scrapy_settings_are_the_ones_the_pipeline_reads() -> None:
    pytest.importorskip("scrapy")
    from simhash_redis.contrib import scrapy as pipeline_module

    settings = _blocks()[0]
    named = set(re.findall(r"SIMHASH_REDIS_[A-Z_]+", settings))
    source = Path(pipeline_module.__file__).read_text()
    assert named and named <= set(re.findall(r"SIMHASH_REDIS_[A-Z_]+", source))
    assert '"simhash_redis.contrib.scrapy.NearDuplicatePipeline"' in settings


def test_the_worker_loop_runs_as_written(
    redis_url: str,
    redis_client: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle = _defined(1, "handle", redis_url, monkeypatch)
    story = "the council approved the new budget on tuesday after a long debate about school funding"
    assert handle("s1", story) is True  # type: ignore[operator]
    assert handle("s2", story.upper() + "!") is False  # type: ignore[operator]
    assert handle("s1", story) is False  # type: ignore[operator]  # a retry: already stored
    assert "s2: copy of s1 (distance 0)" in capsys.readouterr().out


def test_the_worker_loop_with_a_retention_window_runs_as_written(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = _defined(2, "fresh", redis_url, monkeypatch)
    story = "the storm closed the coastal road on monday and the ferry to the island was cancelled"
    assert fresh("w1", story) is True  # type: ignore[operator]
    assert fresh("w2", story.title()) is False  # type: ignore[operator]
    assert redis_client.hget(b"simhash:wire:meta", b"retention") == b"604800;period=100800"
    assert all(redis_client.pttl(key) > 0 for key in redis_client.scan_iter(b"simhash:wire:w*"))


def test_the_asyncio_crawler_runs_as_written(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    crawl = _defined(3, "crawl", redis_url, monkeypatch)
    story = "the museum reopened on saturday after two years of repairs to its roof and its old galleries"
    pages = {f"https://example.test/copy-{i}": story.upper() if i % 2 else story for i in range(50)}
    pages["https://example.test/other"] = "a completely different page about the weather in the mountains"
    kept = asyncio.run(crawl(pages))  # type: ignore[operator]
    assert len(kept) == 2 and "https://example.test/other" in kept
    assert redis_client.hlen(b"simhash:pages:meta") > 0
