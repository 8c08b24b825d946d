"""The Scrapy pipeline in a real `scrapy crawl` of a site this test serves on a loopback port.

The site has five pages: two copies of one story (one with other case, spacing and punctuation), a story
and a republished copy with one word changed, and a distinct story. The crawl keeps one page of each
group and drops the other, naming the kept one; a second crawl of the same site drops every page as
already stored; the crawl log's stats count both. The crawls run on Scrapy's default reactor (asyncio,
where the pipeline uses the asyncio index) and on a plain one (the blocking index), and neither logs a
warning: Scrapy's deprecations of hook signatures are warnings, and would one day be errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import json
import random
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

from simhash_redis import SimhashIndex, VerifiedIndex, distance, fingerprint
from simhash_redis.errors import ConfigurationMismatch, InvalidArgument

if TYPE_CHECKING:
    from simhash_redis.contrib.scrapy import NearDuplicatePipeline

scrapy = pytest.importorskip("scrapy")
SCRAPY = tuple(int(part) for part in scrapy.__version__.split(".")[:2])

_VOCABULARY = """
    council approved budget tuesday debate school funding storm heavy rain strong winds coast roads region
    football club signed young striker division undisclosed fee week scientists reported species frog
    mountain forests survey spring central bank interest rates inflation mayor minister police hospital
    market election voters river bridge airport company shares profit workers strike union museum
    festival harbour ferry railway station tunnel farmers harvest prices drought
"""
WORDS = _VOCABULARY.split()

SPIDER = textwrap.dedent(
    """
    import scrapy

    class Pages(scrapy.Spider):
        name = "pages"

        def __init__(self, start, **kwargs):
            super().__init__(**kwargs)
            self.start_urls = [start]

        def parse(self, response):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.page)

        def page(self, response):
            yield {"url": response.url, "text": " ".join(response.css("p::text").getall())}
    """
)


def _story(seed: int, words: int = 320) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(words)]


def _one_word_edit(story: list[str]) -> list[str]:
    """The story with one word changed, at the first position where the default index finds the copy."""
    original = fingerprint(" ".join(story))
    for position in range(len(story)):
        edited = [*story[:position], "yesterday", *story[position + 1 :]]
        if 0 < distance(original, fingerprint(" ".join(edited))) <= 3:
            return edited
    raise AssertionError("no one-word edit within k = 3")


def _pages() -> dict[str, str]:
    a, c, e = _story(1), _story(2), _story(3)
    copy_of_a = "  ".join(word.upper() if i % 7 == 0 else word for i, word in enumerate(a)) + "!"
    texts = {
        "a": " ".join(a),
        "b": copy_of_a,
        "c": " ".join(c),
        "d": " ".join(_one_word_edit(c)),
        "e": " ".join(e),
    }
    return _site_of(texts)


class _Site(http.server.BaseHTTPRequestHandler):
    def __init__(self, pages: dict[str, str], before: Callable[[str], None] | None, *args: object) -> None:
        self.pages, self.before = pages, before
        super().__init__(*args)  # type: ignore[arg-type]

    def do_GET(self) -> None:
        if self.before is not None:
            self.before(self.path)
        body = self.pages.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write((body or "").encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


def _far_edit(story: list[str]) -> list[str]:
    """The story with one word changed, at the first position that moves its fingerprint past k = 3 (a
    copy the plain default index misses)."""
    original = fingerprint(" ".join(story))
    for position in range(len(story)):
        edited = [*story[:position], "yesterday", *story[position + 1 :]]
        if distance(original, fingerprint(" ".join(edited))) > 3:
            return edited
    raise AssertionError("no one-word edit moves the fingerprint past k = 3")


def _site_of(texts: dict[str, str]) -> dict[str, str]:
    pages = {f"/{name}.html": f"<html><body><p>{text}</p></body></html>" for name, text in texts.items()}
    links = "".join(f'<a href="{path}">{path}</a>' for path in pages)
    pages["/"] = f"<html><body>{links}</body></html>"
    return pages


def _edited_site() -> dict[str, str]:
    """Twenty stories of 400 words, and ten one-word edits of the first ten (e0 of s0, ...)."""
    stories = [_story(100 + i, 400) for i in range(20)]
    texts = {f"s{i}": " ".join(story) for i, story in enumerate(stories)}
    texts.update({f"e{i}": " ".join(_far_edit(stories[i])) for i in range(10)})
    return _site_of(texts)


@contextlib.contextmanager
def _serve(pages: dict[str, str], before: Callable[[str], None] | None = None) -> Iterator[str]:
    """The site on a loopback port; `before(path)` is called before each request is answered."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Site, pages, before))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def site() -> Iterator[str]:
    with _serve(_pages()) as url:
        yield url


def _crawl(
    tmp_path: Path, site: str, redis_url: str, run: int, **extra: str
) -> tuple[list[dict[str, str]], str]:
    done, out = _run_crawl(tmp_path, site, redis_url, run, **extra)
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stderr.splitlines() if "Warning" in line]
    assert not warned, "\n".join(warned)
    items = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return items, done.stderr


def _run_crawl(
    tmp_path: Path, site: str, redis_url: str, run: int, **extra: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A crawl of the site by `scrapy runspider`, the pipeline enabled: the finished process, the items'
    file."""
    spider = tmp_path / "pages.py"
    spider.write_text(SPIDER)
    out = tmp_path / f"items{run}.jsonl"
    pipelines = json.dumps({"simhash_redis.contrib.scrapy.NearDuplicatePipeline": 300})
    settings = {
        "ITEM_PIPELINES": pipelines,
        "SIMHASH_REDIS_URL": redis_url,
        "SIMHASH_REDIS_INDEX": "crawl",
        "LOG_LEVEL": "INFO",
        "ROBOTSTXT_OBEY": "False",
        "TELNETCONSOLE_ENABLED": "False",
        **extra,
    }
    if SCRAPY < (2, 12):  # 2.11 warns without it, 2.13 and later warn with it
        settings["REQUEST_FINGERPRINTER_IMPLEMENTATION"] = "2.7"
    command = [
        sys.executable,
        "-m",
        "scrapy",
        "runspider",
        str(spider),
        "-a",
        f"start={site}/",
        "-o",
        str(out),
    ]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    return done, out


#: Scrapy's asyncio reactor (its default since 2.13), and a reactor without asyncio.
REACTORS = {
    "asyncio": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    "blocking": "twisted.internet.selectreactor.SelectReactor",
}


@pytest.mark.parametrize("client", ["asyncio", "blocking"])
def test_a_crawl_keeps_one_page_of_each_group_and_drops_the_copies(
    tmp_path: Path, site: str, redis_url: str, redis_client: redis.Redis, client: str
) -> None:
    items, log = _crawl(tmp_path, site, redis_url, 1, TWISTED_REACTOR=REACTORS[client])
    assert f"near-duplicate index 'crawl' opened ({client} client)" in log, log[-3000:]
    kept = {item["url"].rsplit("/", 1)[1] for item in items}
    assert len(kept) == 3 and "e.html" in kept, kept
    assert len(kept & {"a.html", "b.html"}) == 1 and len(kept & {"c.html", "d.html"}) == 1, kept
    for dropped in {"a.html", "b.html", "c.html", "d.html"} - kept:
        other = {"a.html": "b.html", "b.html": "a.html", "c.html": "d.html", "d.html": "c.html"}[dropped]
        assert f"near-duplicate of {site}/{other}" in log, log[-3000:]
    assert "'simhash_redis/stored': 3" in log and "'simhash_redis/dropped': 2" in log
    index = SimhashIndex(redis_client, "crawl", create=False)
    assert index.count() == (3, 3)

    again, log = _crawl(tmp_path, site, redis_url, 2, TWISTED_REACTOR=REACTORS[client])
    assert again == []
    assert "'simhash_redis/dropped': 5" in log and "is already stored" in log
    assert redis_url not in log  # URLs carry passwords


@pytest.mark.parametrize("client", ["asyncio", "blocking"])
def test_verified_mode_drops_one_word_edits_the_plain_index_misses(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, client: str
) -> None:
    """Thirty pages of 400 words, ten of them one-word edits of others that move the fingerprint past
    k = 3: a plain index (SIMHASH_REDIS_VERIFIED = False) keeps all thirty; the default, a verified index,
    keeps twenty and drops the ten."""
    reactor = REACTORS[client]
    with _serve(_edited_site()) as url:
        verified, log = _crawl(tmp_path, url, redis_url, 1, TWISTED_REACTOR=reactor)
        if client == "blocking":
            plain, plain_log = _crawl(
                tmp_path,
                url,
                redis_url,
                2,
                TWISTED_REACTOR=reactor,
                SIMHASH_REDIS_INDEX="plain",
                SIMHASH_REDIS_VERIFIED="False",
            )
            assert len(plain) == 30 and "'simhash_redis/stored': 30" in plain_log
            assert SimhashIndex(redis_client, "plain", create=False).config.verification is None
    assert f"near-duplicate index 'crawl' opened ({client} client) verified" in log, log[-3000:]
    kept = {item["url"].rsplit("/", 1)[1].removesuffix(".html") for item in verified}
    assert len(kept) == 20 and all(len(kept & {f"s{i}", f"e{i}"}) == 1 for i in range(10)), kept
    for name in {f"{kind}{i}" for kind in "se" for i in range(10)} - kept:
        other = ("e" if name[0] == "s" else "s") + name[1:]
        assert f"near-duplicate of {url}/{other}.html (distance " in log and ", Jaccard 0.9" in log, name
    assert "'simhash_redis/stored': 20" in log and "'simhash_redis/dropped': 10" in log
    index = VerifiedIndex(SimhashIndex(redis_client, "crawl", create=False))
    assert len(index.index) == 20 and index.threshold == 0.8
    # A later crawl without the setting writes the index verified all the same: its mode is pinned.
    with _serve(_edited_site()) as url:
        again, log = _crawl(tmp_path, url, redis_url, 3, TWISTED_REACTOR=reactor)
    assert again == [] and "'simhash_redis/dropped': 30" in log and "verified" in log


def test_verified_mode_with_a_retention_window(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    """SIMHASH_REDIS_VERIFIED with SIMHASH_REDIS_RETENTION: a verified index whose pages expire."""
    with _serve(_edited_site()) as url:
        items, log = _crawl(
            tmp_path,
            url,
            redis_url,
            1,
            TWISTED_REACTOR=REACTORS["blocking"],
            SIMHASH_REDIS_VERIFIED="True",
            SIMHASH_REDIS_RETENTION="7d",
        )
    assert len(items) == 20 and "'simhash_redis/dropped': 10" in log, log[-3000:]
    meta = redis_client.hgetall(b"simhash:crawl:meta")
    assert meta[b"retention"] == b"604800;period=100800" and b"verified" in meta
    assert all(redis_client.pttl(key) > 0 for key in redis_client.scan_iter(b"simhash:crawl:w*"))


def test_pages_without_text_pass_through(tmp_path: Path) -> None:
    from scrapy.settings import Settings

    from simhash_redis.contrib.scrapy import NearDuplicatePipeline

    # A crawler's settings and stats, which is all from_crawler reads (Scrapy 2.13's get_crawler wants a
    # reactor installed first).
    crawler = types.SimpleNamespace(settings=Settings({"SIMHASH_REDIS_TEXT": "builtins.str"}), stats=None)
    pipeline = NearDuplicatePipeline.from_crawler(crawler)  # type: ignore[arg-type]
    assert pipeline.text(42) == "42"  # a dotted path names the callable that gives the text


def _from_settings(**given: object) -> NearDuplicatePipeline:
    """The pipeline from a crawler's settings and stats, which is all from_crawler reads."""
    from scrapy.settings import Settings

    from simhash_redis.contrib.scrapy import NearDuplicatePipeline

    crawler = types.SimpleNamespace(settings=Settings(given), stats=None)
    return NearDuplicatePipeline.from_crawler(crawler)  # type: ignore[arg-type]


def test_settings_the_pipeline_cannot_use_are_errors_naming_them() -> None:
    """Never NotConfigured, which Scrapy takes as "run the crawl without this pipeline": the crawl would
    keep every copy. A malformed number is named too, not a bare ValueError of Scrapy's getters."""
    from scrapy.exceptions import NotConfigured

    for mode in ({"SIMHASH_REDIS_VERIFIED": True}, {"SIMHASH_REDIS_THRESHOLD": 0.9}):
        both = _from_settings(**mode, SIMHASH_REDIS_RETENTION="7d")  # a verified index with a window
        assert both.verified and both.retention is not None
    with pytest.raises(InvalidArgument, match="SIMHASH_REDIS_THRESHOLD needs a verified index"):
        _from_settings(SIMHASH_REDIS_VERIFIED=False, SIMHASH_REDIS_THRESHOLD=0.9)
    refused = {
        "SIMHASH_REDIS_THRESHOLD": ("high", "1.5"),
        "SIMHASH_REDIS_K": ("three",),
        "SIMHASH_REDIS_VERIFIED": ("maybe",),
        "SIMHASH_REDIS_SLIDING": ("often", True),  # True: sliding without a retention
        "SIMHASH_REDIS_RETENTION": ("7x", "604800", "-1d"),  # found when the spider opened, unnamed
        "SIMHASH_REDIS_TEXT": ("builtins.no_such_name", "builtins.__name__"),
        "SIMHASH_REDIS_URL": ("",),  # not the embedded server started on the crawl's machine
        "SIMHASH_REDIS_ON_ERROR": ("ignore", "Keep"),
    }
    for name, values in refused.items():
        for value in values:
            with pytest.raises(InvalidArgument, match=name) as caught:
                _from_settings(**{name: value})
            assert not isinstance(caught.value, NotConfigured) and "\n" not in str(caught.value)
    threshold = _from_settings(SIMHASH_REDIS_THRESHOLD="0.9")
    assert threshold.verified and threshold.threshold == 0.9
    # Unset, the mode is the library's default (verified for a new index, an existing one's own).
    assert _from_settings().verified is None
    assert _from_settings(SIMHASH_REDIS_VERIFIED="False").verified is False


def test_zero_is_a_setting_and_bytes_are_a_text(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """K = 0 (exact copies only) and THRESHOLD = 0 are values, not "unset"; a text given as bytes (a
    response's body) is deduplicated, not passed through as no text; an int id is its decimal form."""
    from scrapy.exceptions import DropItem

    from simhash_redis.contrib import scrapy as pipeline_module

    monkeypatch.setattr(pipeline_module, "_on_asyncio", lambda: False)  # no reactor in this process
    exact = _from_settings(SIMHASH_REDIS_K="0", SIMHASH_REDIS_VERIFIED="False")
    assert exact.k == 0
    with pytest.raises(InvalidArgument, match="SIMHASH_REDIS_THRESHOLD needs a verified index"):
        _from_settings(SIMHASH_REDIS_VERIFIED=False, SIMHASH_REDIS_THRESHOLD=0)
    SimhashIndex(redis_client, "k5", k=5)
    with pytest.raises(ConfigurationMismatch):
        _from_settings(SIMHASH_REDIS_URL=redis_url, SIMHASH_REDIS_INDEX="k5", SIMHASH_REDIS_K=0).open_spider()
    pipeline = _from_settings(SIMHASH_REDIS_URL=redis_url, SIMHASH_REDIS_INDEX="bytes")
    pipeline.open_spider()
    try:
        text = "storm closes coastal roads as heavy rain hits the region on monday and schools stay shut"
        first = {"url": 123, "text": text}
        assert asyncio.run(pipeline.process_item(first)) is first
        with pytest.raises(DropItem, match="near-duplicate of 123"):
            asyncio.run(pipeline.process_item({"url": "b", "text": text.encode()}))
    finally:
        pipeline.close_spider()


def test_the_setting_chooses_the_mode_of_a_new_index(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocking client's opening (the crawls above run both clients): verified by default, plain when
    the setting says so; a retention window on a new index needs the setting, and its refusal says so."""
    from simhash_redis.contrib import scrapy as pipeline_module

    monkeypatch.setattr(pipeline_module, "_on_asyncio", lambda: False)  # no reactor in this process

    def opened(**given: object) -> Any:
        pipeline = _from_settings(SIMHASH_REDIS_URL=redis_url, **given)
        pipeline.open_spider()
        index = pipeline.index
        pipeline.close_spider()
        return index

    assert isinstance(opened(SIMHASH_REDIS_INDEX="new"), VerifiedIndex)
    assert type(opened(SIMHASH_REDIS_INDEX="flat", SIMHASH_REDIS_VERIFIED="False")) is SimhashIndex
    assert type(opened(SIMHASH_REDIS_INDEX="flat")) is SimhashIndex  # existing: its own mode
    with pytest.raises(ConfigurationMismatch, match="leave out SIMHASH_REDIS_VERIFIED = False"):
        opened(SIMHASH_REDIS_INDEX="new", SIMHASH_REDIS_VERIFIED="False")
    with pytest.raises(ConfigurationMismatch, match="leave out SIMHASH_REDIS_THRESHOLD, or create"):
        opened(SIMHASH_REDIS_INDEX="flat", SIMHASH_REDIS_THRESHOLD="0.9")
    verified_windowed = opened(SIMHASH_REDIS_INDEX="wire", SIMHASH_REDIS_RETENTION="7d")
    assert isinstance(verified_windowed, VerifiedIndex)
    assert verified_windowed.index.config.retention is not None
    windowed = opened(
        SIMHASH_REDIS_INDEX="plain-wire", SIMHASH_REDIS_RETENTION="7d", SIMHASH_REDIS_VERIFIED="False"
    )
    assert type(windowed) is SimhashIndex and windowed.config.retention is not None


def test_a_contradictory_configuration_stops_the_crawl(tmp_path: Path, site: str, redis_url: str) -> None:
    """A setting the pipeline cannot use stops the crawl at its start (it used to disable the pipeline
    with a warning: the crawl ran on and kept every copy), its error naming the setting, nothing crawled."""
    done, out = _run_crawl(tmp_path, site, redis_url, 1, SIMHASH_REDIS_SLIDING="True")
    assert done.returncode != 0
    assert "SIMHASH_REDIS_SLIDING" in done.stderr
    assert not out.exists() or not out.read_text().strip()


def test_a_text_without_a_word_passes_through_as_no_text(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed extraction (punctuation, an emoji, a zero-width space) has nothing to hash: stored, it was
    the "near-duplicate" of every later page without a word, each dropped naming an unrelated page."""
    from collections import Counter

    from simhash_redis.contrib import scrapy as pipeline_module

    monkeypatch.setattr(pipeline_module, "_on_asyncio", lambda: False)  # no reactor in this process
    pipeline = _from_settings(SIMHASH_REDIS_URL=redis_url, SIMHASH_REDIS_INDEX="wordless")
    counted: Counter[str] = Counter()
    pipeline.stats = types.SimpleNamespace(inc_value=lambda key: counted.update([key]))
    pipeline.open_spider()
    try:
        for n, text in enumerate(["— | —", "🙂", "\u200b", " ... ", "*** ***"]):
            item = {"url": f"https://example.com/{n}", "text": text}
            assert asyncio.run(pipeline.process_item(item)) is item
    finally:
        pipeline.close_spider()
    assert counted == Counter({"simhash_redis/no_text": 5})
    assert SimhashIndex(redis_client, "wordless", create=False).count() == (0, 0)


def test_an_item_loaders_lists_are_a_text_and_an_id(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ItemLoader without TakeFirst, or `response.css(...).getall()`, gives each field as a list: the
    text's paragraphs were taken for no text, so every copy passed through (counted as no_text). They are
    the page's text, joined by newlines; a one-item list of an id is that id."""
    from collections import Counter

    from scrapy.exceptions import DropItem

    from simhash_redis.contrib import scrapy as pipeline_module

    monkeypatch.setattr(pipeline_module, "_on_asyncio", lambda: False)  # no reactor in this process
    pipeline = _from_settings(SIMHASH_REDIS_URL=redis_url, SIMHASH_REDIS_INDEX="loader")
    counted: Counter[str] = Counter()
    pipeline.stats = types.SimpleNamespace(inc_value=lambda key: counted.update([key]))
    paragraphs = [" ".join(_story(5, 60)), " ".join(_story(6, 60))]
    pipeline.open_spider()
    try:
        first = {"url": ["https://example.com/a"], "text": paragraphs}
        assert asyncio.run(pipeline.process_item(first)) is first
        with pytest.raises(DropItem, match=r"near-duplicate of https://example\.com/a "):
            asyncio.run(
                pipeline.process_item({"url": ["https://example.com/b"], "text": "\n".join(paragraphs)})
            )
    finally:
        pipeline.close_spider()
    assert counted == Counter({"simhash_redis/stored": 1, "simhash_redis/dropped": 1})
    assert SimhashIndex(redis_client, "loader", create=False).get("https://example.com/a") is not None


def test_an_item_without_the_field_a_setting_names_is_warned_of_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A typo in SIMHASH_REDIS_TEXT_FIELD passed every item on unchecked, seen only in the no_text count, and
    one in SIMHASH_REDIS_ID_FIELD named every page by a hash of its text: one warning a crawl names the
    setting and the item's fields; a declared field an item leaves unset (a page without text) is none."""
    from scrapy import Field, Item

    from simhash_redis.contrib import scrapy as pipeline_module

    class Page(Item):  # type: ignore[misc]
        url = Field()
        text = Field()

    monkeypatch.setattr(pipeline_module, "_on_asyncio", lambda: False)  # no reactor in this process
    pages = [{"url": f"https://example.com/{n}", "text": " ".join(_story(20 + n, 60))} for n in range(3)]

    def warnings_of(**given: object) -> list[str]:
        caplog.clear()
        index = "fields-" + "-".join(sorted(given))  # its own index: the pages are new to it
        pipeline = _from_settings(SIMHASH_REDIS_URL=redis_url, SIMHASH_REDIS_INDEX=index, **given)
        pipeline.open_spider()
        try:
            for page in [*pages, Page(url="https://example.com/empty")]:
                asyncio.run(pipeline.process_item(dict(page) if isinstance(page, dict) else page))
        finally:
            pipeline.close_spider()
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]

    with caplog.at_level("WARNING", logger=pipeline_module.__name__):
        assert warnings_of(SIMHASH_REDIS_TEXT_FIELD="body") == [
            "SIMHASH_REDIS_TEXT_FIELD = 'body': an item has no field 'body' (its fields: 'url', 'text'); "
            "such items pass on unchecked"
        ]
        assert warnings_of(SIMHASH_REDIS_ID_FIELD="link") == [
            "SIMHASH_REDIS_ID_FIELD = 'link': an item has no field 'link' (its fields: 'url', 'text'); "
            "such items are named by a hash of their text"
        ]
        assert warnings_of() == []  # the Item without text: its declared field, unset


@pytest.mark.parametrize("client", ["asyncio", "blocking"])
def test_a_configuration_mismatch_names_the_setting(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    """The refusal of an index created otherwise said "k=5, not k=4: open it without k", the library's
    argument; it names the setting, on either client."""
    from simhash_redis.contrib import scrapy as pipeline_module

    monkeypatch.setattr(pipeline_module, "_on_asyncio", lambda: client == "asyncio")
    SimhashIndex(redis_client, "k5", k=5)
    VerifiedIndex.on_client(redis_client, "verified", k=3)
    refused = [
        ("k5", {"SIMHASH_REDIS_K": "4"}, "SIMHASH_REDIS_K"),
        ("k5", {"SIMHASH_REDIS_RETENTION": "7d"}, "SIMHASH_REDIS_RETENTION"),
        ("verified", {"SIMHASH_REDIS_THRESHOLD": "0.9"}, "SIMHASH_REDIS_THRESHOLD"),
    ]
    for name, given, setting in refused:
        pipeline = _from_settings(SIMHASH_REDIS_URL=redis_url, SIMHASH_REDIS_INDEX=name, **given)
        with pytest.raises(ConfigurationMismatch) as caught:
            opening = pipeline.open_spider()
            if opening is not None:
                asyncio.run(opening)  # type: ignore[arg-type]
        message = str(caught.value)
        assert message.startswith(f"the index disagrees with {setting}: index {name!r} "), message
        assert message.endswith(
            f": leave out {setting} to use the index's own, or set SIMHASH_REDIS_INDEX to another index"
        )


@pytest.mark.parametrize(
    ("on_error", "client"),
    [("drop", "asyncio"), ("keep", "asyncio"), ("stop", "asyncio"), ("stop", "blocking")],
)
def test_redis_stopped_mid_crawl_drops_keeps_or_stops_as_the_setting_says(
    tmp_path: Path, on_error: str, client: str
) -> None:
    """SIMHASH_REDIS_ON_ERROR: an item that cannot be checked (Redis stopped) is dropped (the default, as
    Scrapy drops an item whose pipeline raises), passed on unchecked and counted, or dropped as the crawl
    closes with a reason. The last page is answered only once the two others are stored and Redis is
    stopped (the site waits on the index, not on a clock)."""
    from tests.servers import ServerProcess

    texts = {f"p{n}": " ".join(_story(30 + n)) for n in range(3)}
    with ServerProcess() as server:

        def before(path: str) -> None:
            if path != "/p2.html":
                return
            index = SimhashIndex(server.client(), "crawl", create=False)
            stored = threading.Event()
            for _ in range(3000):  # 60 s at most: a crawl that never stores them fails below
                if index.count()[0] == 2:
                    break
                stored.wait(0.02)
            server.stop()

        with _serve(_site_of(texts), before) as site:
            done, out = _run_crawl(
                tmp_path,
                site,
                server.url,
                1,
                TWISTED_REACTOR=REACTORS[client],
                SIMHASH_REDIS_ON_ERROR=on_error,
            )
    log = done.stderr
    assert done.returncode == 0, log[-3000:]
    assert not [line for line in log.splitlines() if "Warning" in line], log[-3000:]  # deprecations
    kept = sorted(json.loads(line)["url"].rsplit("/", 1)[1] for line in out.read_text().splitlines())
    assert "'simhash_redis/stored': 2" in log and "'simhash_redis/errors': 1" in log, log[-3000:]
    if on_error == "keep":
        assert kept == ["p0.html", "p1.html", "p2.html"]
        assert "'simhash_redis/unchecked': 1" in log and "(SIMHASH_REDIS_ON_ERROR = keep" in log
        assert "'finish_reason': 'finished'" in log
    else:
        assert kept == ["p0.html", "p1.html"]
        assert "simhash_redis/unchecked" not in log
        reason = "simhash_redis_error" if on_error == "stop" else "finished"
        assert f"'finish_reason': '{reason}'" in log, log[-3000:]
        assert ("closing the crawl (SIMHASH_REDIS_ON_ERROR = stop)" in log) == (on_error == "stop")
