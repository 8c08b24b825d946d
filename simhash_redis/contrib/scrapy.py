"""A Scrapy item pipeline that drops near-duplicate items, one index shared by every spider (settings:
docs/crawlers.md). A bad setting stops the crawl at its start, never NotConfigured (which would keep every
copy)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.misc import load_object

from .. import defaults
from ..errors import ConfigurationMismatch, InvalidArgument, InvalidType, RedisUnavailable, WriteContention
from ..fingerprinting.normalize import normalize
from ..fingerprinting.tokens import has_token
from ..index import SimhashIndex, VerifiedIndex
from ..index.mode import Asking
from ..results import VerifiedMatch
from ..store import Retention
from ..tools.connect import open_index
from ..transport.greenlet_bridge import greenlet_installed

if TYPE_CHECKING:
    from ..asyncio import AsyncSimhashIndex, AsyncVerifiedIndex

__all__ = ["NearDuplicatePipeline"]

logger = logging.getLogger(__name__)

#: The settings' words for each mode, in the messages that tell the user to ask for one.
SETTINGS_ASKING = Asking(
    plain="SIMHASH_REDIS_VERIFIED = False",
    verified="SIMHASH_REDIS_VERIFIED = True",
    threshold="SIMHASH_REDIS_THRESHOLD",
)

#: Stats keys, under the crawl's stats.
STORED, DROPPED, NO_TEXT = "simhash_redis/stored", "simhash_redis/dropped", "simhash_redis/no_text"
#: Items whose check failed (Redis unreachable, say), and those of them passed on unchecked.
ERRORS, UNCHECKED = "simhash_redis/errors", "simhash_redis/unchecked"

#: What SIMHASH_REDIS_ON_ERROR may say to do with an item whose check failed.
ON_ERROR = ("drop", "keep", "stop")
#: The reason a crawl closed by SIMHASH_REDIS_ON_ERROR = "stop" finishes with (its finish_reason stat).
STOP_REASON = "simhash_redis_error"

#: The setting of each argument a ConfigurationMismatch's remedy "without-ARG" may name.
_SETTINGS = {
    "k": "SIMHASH_REDIS_K",
    "retention": "SIMHASH_REDIS_RETENTION",
    "threshold": "SIMHASH_REDIS_THRESHOLD",
}


def _text_getter(setting: object, field: str) -> Callable[[Any], object]:
    """An item's text: by a callable (or its dotted path) if given, else the item's field."""
    if setting is None:
        return lambda item: ItemAdapter(item).get(field)
    try:
        getter: object = load_object(setting) if isinstance(setting, str) else setting
    except (ImportError, NameError, ValueError) as exc:
        raise InvalidArgument(f"SIMHASH_REDIS_TEXT names no callable: {exc}") from None
    if not callable(getter):
        raise InvalidArgument(f"SIMHASH_REDIS_TEXT must be a callable or its dotted path, got {setting!r}")
    return getter


def _typed(settings: Any, name: str, kind: str) -> Any:
    """A setting read with its type's getter, None if not set (0 is a value), InvalidArgument if malformed."""
    if settings.get(name) is None:
        return None
    try:
        return getattr(settings, f"get{kind}")(name)
    except ValueError:
        raise InvalidArgument(f"{name} must be a {kind}, got {settings.get(name)!r}") from None


def _on_asyncio() -> bool:
    """Whether the crawl runs on an asyncio loop, and the asyncio API (greenlet) can run."""
    try:
        from scrapy.utils.asyncio import is_asyncio_available  # Scrapy 2.14+
    except ImportError:
        from scrapy.utils.reactor import is_asyncio_reactor_installed as is_asyncio_available
    return is_asyncio_available() and greenlet_installed()


def _hook_result(coroutine: Coroutine[Any, Any, None]) -> Awaitable[None]:
    """A coroutine as open_spider / close_spider return it (a Deferred for Scrapy 2.11-2.13)."""
    if hasattr(ItemPipelineManager, "open_spider_async"):
        return coroutine
    from scrapy.utils.defer import deferred_from_coro

    deferred: Awaitable[None] = deferred_from_coro(coroutine)
    return deferred


def _retention(retention: object, sliding: bool) -> Retention | None:
    """SIMHASH_REDIS_RETENTION, made sliding by SIMHASH_REDIS_SLIDING (a malformed one named)."""
    if retention is None:
        if sliding:
            raise InvalidArgument("SIMHASH_REDIS_SLIDING needs SIMHASH_REDIS_RETENTION")
        return None
    if isinstance(retention, Retention):
        return dataclasses.replace(retention, sliding=True) if sliding else retention
    try:
        return Retention.of(retention, sliding=sliding)
    except (InvalidArgument, InvalidType) as exc:
        raise InvalidArgument(f"SIMHASH_REDIS_RETENTION: {exc}") from None


class NearDuplicatePipeline:
    """Drops an item whose text is a near-duplicate of one stored (`add_if_new`: of the spiders that meet
    copies of one page, exactly one keeps its item); stores the others.

    Args:
        url: the Redis server's URL (credentials never appear in messages or logs).
        index: the index name, shared by every spider that should see the same pages.
        text: a function of an item giving its text (from_crawler makes it from SIMHASH_REDIS_TEXT or
            SIMHASH_REDIS_TEXT_FIELD).
        id_field: the item field naming a document (without it: a hash of the text; too long: of the id).
        k: the largest distance of a near-duplicate, used when the index is created (an existing
            index's other k is refused).
        retention: forget a page this long after it was stored ("30d", seconds, a timedelta, or a
            `Retention`), like k.
        verified: True for a verified index, False for a plain one; None (the default): verified for a
            new index, the stored mode for an existing one.
        threshold: the verified mode's Jaccard threshold, used when the index is created (default 0.8).
        text_field: the item field `text` reads, if it reads one: items without it are warned of once.
        on_error: what to do with an item whose check fails: "drop" it (the error is raised), "keep" it
            (passed on unchecked), or "stop" the crawl (the item dropped; needs `crawler`).
        crawler: the crawl, which "stop" closes.

    Raises:
        InvalidArgument: plain asked for with a threshold; an empty URL; on_error none of the three.
    """

    def __init__(
        self,
        url: str,
        index: str,
        text: Callable[[Any], object],
        *,
        id_field: str = "url",
        k: int | None = None,
        prefix: str = defaults.PREFIX,
        retention: object = None,
        verified: bool | None = None,
        threshold: float | None = None,
        text_field: str | None = None,
        on_error: str = "drop",
        crawler: Crawler | None = None,
    ) -> None:
        if not isinstance(url, str) or not url:
            # An empty URL would open the embedded server (open_index's default) on the crawl's machine.
            raise InvalidArgument(f"SIMHASH_REDIS_URL must be a Redis URL, got {url!r}")
        # As asked, for open_in_mode: a refusal names the settings that asked for verified mode.
        self._asked = verified
        if threshold is not None:
            if verified is False:
                raise InvalidArgument(
                    "SIMHASH_REDIS_THRESHOLD needs a verified index, not SIMHASH_REDIS_VERIFIED = False"
                )
            verified = True
        self.url, self.index_name, self.text, self.id_field = url, index, text, id_field
        self.k, self.prefix, self.retention = k, prefix, retention
        self.verified, self.threshold = verified, threshold
        if on_error not in ON_ERROR:
            raise InvalidArgument(
                f"SIMHASH_REDIS_ON_ERROR must be one of {', '.join(ON_ERROR)}, got {on_error!r}"
            )
        self.text_field, self.on_error, self.crawler = text_field, on_error, crawler
        #: The settings already warned of this crawl (a warning per crawl, not per item).
        self._warned: set[str] = set()
        #: Whether the last check failed (on_error "keep" warns once per outage), and the crawl is closing.
        self._failing = self._stopping = False
        #: The engine's closing of the crawl, once "stop" asked for it (kept: nothing else refers to it).
        self._closing: object = None
        self.index: SimhashIndex | VerifiedIndex | None = None
        #: The index where the crawl runs on asyncio (then `index` stays None).
        self.async_index: AsyncSimhashIndex | AsyncVerifiedIndex | None = None
        self.stats: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDuplicatePipeline:
        """The pipeline as the crawl's settings describe it; InvalidArgument for a setting it cannot use."""
        settings = crawler.settings
        threshold = _typed(settings, "SIMHASH_REDIS_THRESHOLD", "float")  # given: verified
        if threshold is not None and not 0 <= threshold <= 1:
            raise InvalidArgument(f"SIMHASH_REDIS_THRESHOLD must be a number in [0, 1], got {threshold!r}")
        text, text_field = (
            settings.get("SIMHASH_REDIS_TEXT"),
            settings.get("SIMHASH_REDIS_TEXT_FIELD", "text"),
        )
        pipeline = cls(
            settings.get("SIMHASH_REDIS_URL", "redis://localhost:6379/0"),
            settings.get("SIMHASH_REDIS_INDEX", "scrapy"),
            _text_getter(text, text_field),
            id_field=settings.get("SIMHASH_REDIS_ID_FIELD", "url"),
            k=_typed(settings, "SIMHASH_REDIS_K", "int"),
            prefix=settings.get("SIMHASH_REDIS_PREFIX", defaults.PREFIX),
            retention=_retention(
                settings.get("SIMHASH_REDIS_RETENTION"),
                bool(_typed(settings, "SIMHASH_REDIS_SLIDING", "bool")),
            ),
            verified=_typed(settings, "SIMHASH_REDIS_VERIFIED", "bool"),
            threshold=threshold,
            text_field=text_field if text is None else None,
            on_error=settings.get("SIMHASH_REDIS_ON_ERROR", "drop"),
            crawler=crawler,
        )
        pipeline.stats = crawler.stats
        return pipeline

    def open_spider(self, spider: object = None) -> Awaitable[None] | None:
        """Open (or create) the index; on asyncio, return the awaitable that does (writes never block).

        Raises:
            ConfigurationMismatch: the index exists with another k, retention, threshold or mode.
        """
        if _on_asyncio():
            return _hook_result(self._open_async())
        try:
            self.index = open_index(self.index_name, self.url, **self._options())
        except ConfigurationMismatch as exc:
            raise self._in_settings_words(exc) from None
        self._opened("blocking", isinstance(self.index, VerifiedIndex))
        return None

    async def _open_async(self) -> None:
        from ..asyncio import AsyncVerifiedIndex
        from ..asyncio import open_index as open_async_index

        try:
            self.async_index = await open_async_index(self.index_name, self.url, **self._options())
        except ConfigurationMismatch as exc:
            raise self._in_settings_words(exc) from None
        self._opened("asyncio", isinstance(self.async_index, AsyncVerifiedIndex))

    def _in_settings_words(self, exc: ConfigurationMismatch) -> ConfigurationMismatch:
        """The refusal of a setting the stored index disagrees with, naming the setting."""
        argument = (exc.remedy or "").removeprefix("without-")
        setting = _SETTINGS.get(argument) if (exc.remedy or "").startswith("without-") else None
        if setting is None:
            return exc
        if argument == "retention" and getattr(self.retention, "sliding", False):
            setting += " and SIMHASH_REDIS_SLIDING"
        return ConfigurationMismatch(
            f"the index disagrees with {setting}: {exc.problem}",
            hint=f"leave out {setting} to use the index's own, or set SIMHASH_REDIS_INDEX to another index",
            remedy=exc.remedy,
        )

    def _opened(self, client: str, verified: bool) -> None:
        mode = " verified" if verified else ""
        logger.info("near-duplicate index %r opened (%s client)%s", self.index_name, client, mode)

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "prefix": self.prefix,
            "retention": self.retention,
            "verified": self._asked,
            "threshold": self.threshold,
            "asking": SETTINGS_ASKING,
        }
        if self.k is not None:
            options["k"] = self.k
        return options

    def close_spider(self, spider: object = None) -> Awaitable[None] | None:
        """Close the connections (an awaitable that does, for the asyncio client)."""
        if self.index is not None:
            plain = self.index.index if isinstance(self.index, VerifiedIndex) else self.index
            plain.client.close()
            self.index = None
        if self.async_index is not None:
            index, self.async_index = self.async_index, None
            return _hook_result(index.aclose())
        return None

    async def process_item(self, item: Any, spider: object = None) -> Any:
        """Store the item's fingerprint and pass it on, or drop it (DropItem) as a near-duplicate."""
        text = self.text(item)
        if self.text_field is not None and text is None:
            self._warn_missing("SIMHASH_REDIS_TEXT_FIELD", self.text_field, item, "pass on unchecked")
        if isinstance(text, bytes):  # a response's body, say: deduplicated as text, not passed through
            text = text.decode("utf-8", "replace")
        if isinstance(text, (list, tuple)) and all(isinstance(part, str) for part in text):
            text = "\n".join(text)  # an ItemLoader's field, `.getall()`: the page's paragraphs
        # Without a word (a failed extraction: punctuation, emoji), its fingerprint is every such page's.
        if not isinstance(text, str) or not has_token(normalize(text)):
            self._inc(NO_TEXT)
            return item
        id_value = ItemAdapter(item).get(self.id_field)
        if id_value is None:
            self._warn_missing(
                "SIMHASH_REDIS_ID_FIELD", self.id_field, item, "are named by a hash of their text"
            )
        doc_id = self._doc_id(id_value, text)
        try:
            if self.async_index is not None:
                match = await self.async_index.add_if_new(doc_id, text)
            else:
                assert self.index is not None, "open_spider was not called"
                match = self.index.add_if_new(doc_id, text)
        except (RedisUnavailable, WriteContention) as exc:
            return self._failed(item, doc_id, exc)
        if self._failing:
            self._failing = False
            logger.info("Redis answers again: items are checked for near-duplicates again")
        if match is None:
            self._inc(STORED)
            return item
        self._inc(DROPPED)
        how = f"distance {match.distance}"
        if isinstance(match, VerifiedMatch):
            how += f", Jaccard {match.jaccard:.2f}"
        if match.id == doc_id:
            raise DropItem(f"{doc_id} is already stored ({how})")
        raise DropItem(f"near-duplicate of {match.id} ({how})")

    def _failed(self, item: Any, doc_id: str, exc: Exception) -> Any:
        self._inc(ERRORS)
        if self.on_error == "keep":
            self._inc(UNCHECKED)
            if not self._failing:
                logger.warning(
                    "%s not checked for near-duplicates: %s; items pass on unchecked until Redis answers "
                    "(SIMHASH_REDIS_ON_ERROR = keep, counted in %s)",
                    doc_id,
                    exc,
                    UNCHECKED,
                )
            self._failing = True
            return item
        if self.on_error == "stop" and self.crawler is not None:
            if not self._stopping:
                self._stopping = True
                logger.error("closing the crawl (SIMHASH_REDIS_ON_ERROR = stop): %s", exc)
                self._close_crawl()
            raise DropItem(
                f"{doc_id} not checked for near-duplicates ({exc}): the crawl is closing"
            ) from None
        raise exc

    def _close_crawl(self) -> None:
        """Ask the engine to close the crawl, not waiting for it (it waits for this item)."""
        from scrapy.utils.defer import deferred_from_coro

        assert self.crawler is not None and self.crawler.engine is not None
        engine = self.crawler.engine
        if hasattr(engine, "close_spider_async"):  # Scrapy 2.14+
            self._closing = deferred_from_coro(engine.close_spider_async(reason=STOP_REASON))
        else:
            self._closing = engine.close_spider(self.crawler.spider, STOP_REASON)  # type: ignore[arg-type]

    def _warn_missing(self, setting: str, field: str, item: Any, then: str) -> None:
        """Warn, once a crawl, of items without the field a setting names (a typo, say)."""
        fields = list(ItemAdapter(item).field_names())
        if setting in self._warned or field in fields:
            return
        self._warned.add(setting)
        logger.warning(
            "%s = %r: an item has no field %r (its fields: %s); such items %s",
            setting,
            field,
            field,
            ", ".join(map(repr, fields)) or "none",
            then,
        )

    @staticmethod
    def _doc_id(value: object, text: str) -> str:
        if isinstance(value, (list, tuple)) and len(value) == 1:  # an ItemLoader's field
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool):  # a database's key, say
            value = str(value)
        if isinstance(value, str) and value:
            try:
                if len(value.encode()) <= defaults.MAX_ID_BYTES:
                    return value
            except UnicodeEncodeError:  # a lone surrogate
                pass
            text = value
        return "sha1:" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(key)
