"""The detection mode of an index: the one place that decides whether an index is verified or plain.

A new index made from texts is verified (MinHash-confirmed: it finds what people call near-duplicates,
docs/choosing.md) unless plain is asked for; one made from precomputed fingerprints is plain (a sketch
needs the text); an existing index keeps the mode it was created with, and a caller that asks for the
other one is refused rather than mixing the two. Every entry point (the command line, `open_index`,
`simhash_redis.asyncio.open_index`, the Scrapy pipeline) calls `chosen_mode`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationMismatch, IndexNotFound, InvalidArgument
from ..fingerprinting import Sketcher
from .simhash_index import SimhashIndex
from .verified_index import VerifiedIndex
from .verified_open import verifiable

__all__ = ["LIBRARY", "Asking", "chosen_mode", "open_in_mode"]


@dataclass(frozen=True)
class Asking:
    """How a caller's users ask for each mode, for the messages that tell them to.

    Attributes:
        plain: what asks for a plain index ("verified=False", "--plain").
        verified: what asks for a verified one ("verified=True", "--verified").
    """

    plain: str
    verified: str


#: The library's words.
LIBRARY = Asking(plain="verified=False", verified="verified=True")


def chosen_mode(
    asked: bool | None,
    *,
    name: str,
    stored: bool | None = None,
    from_text: bool = True,
    asking: Asking = LIBRARY,
) -> bool:
    """Whether an index is (to be) verified.

    Args:
        asked: True for verified, False for plain, None for the default.
        name: the index name, for messages.
        stored: the mode of the existing index (True: verified); None: the index is new.
        from_text: whether a new index is made from texts (not precomputed fingerprints).
        asking: how the caller's users ask for each mode.

    Raises:
        ConfigurationMismatch: the existing index has the other mode than the one asked for.
    """
    if stored is not None:
        if asked is not None and asked != stored:
            if stored:
                raise ConfigurationMismatch(
                    f"index {name!r} is verified: it was created verified and stays so; leave out "
                    f"{asking.plain}, or create another index with {asking.plain}"
                )
            raise ConfigurationMismatch(
                f"index {name!r} is not verified: it was created plain and stays so; leave out "
                f"{asking.verified}, or create another index (then load the documents into it)"
            )
        return stored
    return asked if asked is not None else from_text


def open_in_mode(
    client: Any,
    name: str,
    *,
    verified: bool | None = None,
    from_text: bool = True,
    hasher: Sketcher | None = None,
    threshold: float | None = None,
    band_buckets: int | None = None,
    asking: Asking = LIBRARY,
    **options: Any,
) -> SimhashIndex | VerifiedIndex:
    """Open (or create) an index in the mode `chosen_mode` gives: a `VerifiedIndex` or a `SimhashIndex`.

    Args:
        client: a synchronous Redis or RedisCluster client.
        name: the index name.
        verified: True for verified, False for plain, None for the default (as `chosen_mode`).
        from_text: whether a new index is made from texts.
        hasher, threshold, band_buckets: the verified mode's (as `VerifiedIndex`); giving one asks
            for verified.
        asking: how the caller's users ask for each mode.
        **options: the arguments of `SimhashIndex` (k, layout, retention, create, ...).

    Raises:
        InvalidArgument: plain asked for with hasher, threshold or band_buckets.
        ConfigurationMismatch, IndexNotFound, IndexCorrupted, InvalidType, RedisUnavailable: as
            `SimhashIndex`, `VerifiedIndex` and `chosen_mode`.
    """
    given = [arg for arg, value in (("hasher", hasher), ("threshold", threshold)) if value is not None]
    given += ["band_buckets"] if band_buckets is not None else []
    if given and verified is False:
        raise InvalidArgument(
            f"{', '.join(given)} belong to verified mode: leave them out, or leave out {asking.plain}"
        )
    asked = True if given else verified
    options = dict(options)
    create = options.pop("create", True)
    try:
        index = SimhashIndex(client, name, create=False, **options)
    except IndexNotFound:
        if not create:
            raise
        if chosen_mode(asked, name=name, from_text=from_text, asking=asking):
            index = verifiable(client, name, hasher, threshold, options, band_buckets)
        else:
            index = SimhashIndex(client, name, **options)
    # Checked on the index as found: another process may have created it meanwhile, in another mode.
    stored = index.config.verification is not None
    chosen_mode(asked, name=name, stored=stored, asking=asking)
    return VerifiedIndex(index, hasher, threshold, band_buckets) if stored else index
