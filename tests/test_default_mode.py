"""The mode of a new index: verified when made from texts, plain when asked for or made from
fingerprints; an existing index keeps its own (`simhash_redis.index.mode`, and every entry point that
calls it: `open_index`, `simhash_redis.asyncio.open_index`; the command line and the Scrapy pipeline have
their own tests in tests/cli/test_default_mode_cli.py and tests/test_scrapy_pipeline.py)."""

from __future__ import annotations

import asyncio

import pytest
import redis

import simhash_redis.asyncio
from simhash_redis import (
    ConfigurationMismatch,
    InvalidArgument,
    InvalidType,
    SimhashIndex,
    VerifiedIndex,
    open_index,
)
from simhash_redis.index.mode import add_if_new_many, chosen_mode

TEXT = " ".join(f"word{i}" for i in range(60))


def test_the_choice_for_a_new_index() -> None:
    assert chosen_mode(None, name="x") is True
    assert chosen_mode(None, name="x", from_text=False) is False
    assert chosen_mode(False, name="x") is False
    assert chosen_mode(True, name="x") is True


def test_an_existing_index_keeps_its_mode_and_a_mismatch_is_refused() -> None:
    for stored in (True, False):
        assert chosen_mode(None, name="x", stored=stored) is stored
        assert chosen_mode(stored, name="x", stored=stored) is stored
        with pytest.raises(ConfigurationMismatch, match="'x' is" + ("" if stored else " not") + " verified"):
            chosen_mode(not stored, name="x", stored=stored)


def test_open_index_creates_a_verified_index_by_default(redis_url: str, redis_client: redis.Redis) -> None:
    index = open_index("news", redis_url)
    assert isinstance(index, VerifiedIndex) and index.index.config.verification is not None
    assert index.add("a", TEXT).value == "added"
    assert [m.id for m in index.near(TEXT)] == ["a"]
    # Opened again, with the default or asking for verified, it is the same verified index.
    assert isinstance(open_index("news", redis_url), VerifiedIndex)
    assert isinstance(open_index("news", redis_url, verified=True), VerifiedIndex)
    with pytest.raises(ConfigurationMismatch, match="verified=False"):
        open_index("news", redis_url, verified=False)


def test_open_index_creates_a_plain_index_when_asked(redis_url: str, redis_client: redis.Redis) -> None:
    index = open_index("plain", redis_url, verified=False)
    assert type(index) is SimhashIndex and index.config.verification is None
    index.add("a", TEXT)
    # An existing plain index stays plain: opened by default, it is plain; asked verified, refused.
    assert type(open_index("plain", redis_url)) is SimhashIndex
    with pytest.raises(ConfigurationMismatch, match="not verified"):
        open_index("plain", redis_url, verified=True)
    with pytest.raises(InvalidArgument, match="threshold belong to verified mode"):
        open_index("other", redis_url, verified=False, threshold=0.9)


def test_open_index_with_a_retention_window_takes_the_default_mode(redis_url: str) -> None:
    verified = open_index("wire", redis_url, retention="7d")
    assert isinstance(verified, VerifiedIndex) and verified.index.config.retention is not None
    index = open_index("plain-wire", redis_url, retention="7d", verified=False)
    assert type(index) is SimhashIndex and index.config.retention is not None
    # Existing, each keeps its mode: the default opens it as it is.
    assert type(open_index("plain-wire", redis_url, retention="7d")) is SimhashIndex
    assert isinstance(open_index("wire", redis_url, retention="7d"), VerifiedIndex)


def test_the_asyncio_open_index_chooses_alike(redis_url: str, redis_client: redis.Redis) -> None:
    pytest.importorskip("greenlet")
    from simhash_redis.asyncio import AsyncSimhashIndex, AsyncVerifiedIndex
    from simhash_redis.asyncio import open_index as open_async

    async def scenario() -> None:
        async with await open_async("anews", redis_url) as verified:
            assert isinstance(verified, AsyncVerifiedIndex)
            await verified.add("a", TEXT)
            assert [m.id for m in await verified.near(TEXT)] == ["a"]
        async with await open_async("aplain", redis_url, verified=False) as plain:
            assert isinstance(plain, AsyncSimhashIndex) and plain.config.verification is None
            await plain.add("a", TEXT)
        async with await open_async("aplain", redis_url) as again:
            assert isinstance(again, AsyncSimhashIndex)
        with pytest.raises(ConfigurationMismatch):
            await open_async("anews", redis_url, verified=False)
        async with await open_async("awire", redis_url, retention="7d") as windowed:
            assert isinstance(windowed, AsyncVerifiedIndex)

    asyncio.run(scenario())
    assert SimhashIndex(redis_client, "anews", create=False).config.verification is not None


def _plain_creator_wins_the_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a plain creator win every creation race: the index is created plain just before a verified
    create (between the creator's look, which found nothing, and its create)."""
    from simhash_redis.index import verified_index

    real = verified_index.SimhashIndex

    def racing(client: redis.Redis, name: str, **options: object) -> SimhashIndex:
        if options.get("verification") is not None and options.get("create", True):
            real(client, name)  # another process, creating it plain
        return real(client, name, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(verified_index, "SimhashIndex", racing)


def test_a_default_creator_that_loses_the_race_adopts_the_winners_mode(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plain_creator_wins_the_race(monkeypatch)
    index = open_index("race", redis_url)
    assert type(index) is SimhashIndex and index.config.verification is None
    # Asked for verified, the loser is refused with the mode's own message, naming what asked.
    redis_client.flushall()
    with pytest.raises(ConfigurationMismatch, match=r"'race' is not verified.*leave out verified=True,"):
        open_index("race", redis_url, verified=True)
    redis_client.flushall()
    with pytest.raises(ConfigurationMismatch, match=r"'race' is not verified.*leave out threshold,"):
        open_index("race", redis_url, threshold=0.9)


def test_the_refusal_names_what_asked_for_verified_mode(redis_url: str) -> None:
    open_index("flat", redis_url, verified=False)
    for given, named in (
        ({"threshold": 0.9}, "threshold"),
        ({"band_buckets": 64}, "band_buckets"),
        ({"verified": True, "threshold": 0.9}, "verified=True and threshold"),
    ):
        with pytest.raises(ConfigurationMismatch, match=f"leave out {named}, or create another index"):
            open_index("flat", redis_url, **given)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="threshold and band_buckets belong to verified mode"):
        open_index("other", redis_url, verified=False, threshold=0.9, band_buckets=64)


@pytest.mark.parametrize("verified", [True, False])
def test_add_if_new_many_gives_one_shape_in_either_mode(verified: bool, redis_url: str) -> None:
    """None for each document stored, else the stored near-duplicate (the id's own entry when it is stored
    already): what the service, the datasets filter and the datatrove step read, in either mode."""
    index = open_index("either", redis_url, verified=verified)
    other = " ".join(f"other{i}" for i in range(60))
    found = add_if_new_many(index, [("a", TEXT), ("b", TEXT), ("c", other)])
    assert [None if m is None else m.id for m in found] == [None, "a", None]
    again = add_if_new_many(index, [("a", TEXT)])
    assert [None if m is None else m.id for m in again] == ["a"]
    plain = index.index if isinstance(index, VerifiedIndex) else index
    assert plain.get("b") is None and plain.get("c") is not None
    # The method too, on the index either open_index gives (a plain one had none: AttributeError).
    assert [None if m is None else m.id for m in index.add_if_new_many([("d", TEXT), ("e", "x y z")])] == [
        "a",
        None,
    ]

    async def awaited() -> list[str | None]:
        async with await simhash_redis.asyncio.open_index("either", redis_url) as handle:
            return [None if m is None else m.id for m in await handle.add_if_new_many([("f", TEXT)])]

    assert asyncio.run(awaited()) == ["a"]


def test_the_index_open_index_gives_by_default_answers_get_count_k_verify_and_drop(redis_url: str) -> None:
    """A script moved to the default (verified) index, or from its asyncio form, met AttributeError for
    get, count, k, verify and drop, which the plain index and `AsyncVerifiedIndex` answer."""
    index = open_index("reads", redis_url, k=4)
    assert isinstance(index, VerifiedIndex)
    index.add("a", TEXT)
    fp = index.index.fingerprint(TEXT)
    assert (index.get("a"), index.get("b"), index.get_many(["b", "a"])) == (fp, None, [None, fp])
    assert (index.count(), index.k, index.f) == ((1, 1), 4, 64)
    assert index.verify().ok and index.drop() > 0
    assert not SimhashIndex.exists(index.index.client, "reads")


def test_a_verified_that_is_not_a_bool_is_refused_before_anything_is_made(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """verified="false" (a setting read as text) created a verified index, then was refused with a message
    about verified=False, leaving the index behind."""
    from simhash_redis.asyncio import open_index as open_async

    for wrong in ("false", "yes", 1):
        with pytest.raises(InvalidType, match="verified must be True, False or None"):
            open_index("typo", redis_url, verified=wrong)  # type: ignore[call-overload]
        with pytest.raises(InvalidType, match="verified must be True, False or None"):
            asyncio.run(open_async("typo", redis_url, verified=wrong))  # type: ignore[arg-type]
    assert not redis_client.keys(b"simhash:typo:*")
