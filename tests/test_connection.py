"""URLs: passwords never shown, whatever characters they hold; the options of their query."""

from __future__ import annotations

import asyncio

import pytest

from simhash_redis import InvalidArgument, Match, Outcome, VerifiedIndex
from simhash_redis.asyncio import AsyncSimhashIndex
from simhash_redis.transport.connection import client_from_url, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://u:s3cr/et@127.0.0.1:6379/0", "redis://u:***@127.0.0.1:6379/0"),
        (
            "rediss://user:p@ss#w?rd@h/0?ssl_cert_reqs=required",
            "rediss://user:***@h/0?ssl_cert_reqs=required",
        ),
        ("redis://:pw@h:1/0", "redis://***@h:1/0"),
        ("redis://h:1/0", "redis://h:1/0"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock"),
        ("redis://h:1/0?password=s3cret", "redis://h:1/0?password=***"),
        (
            "rediss://h/0?ssl_cert_reqs=none&username=u&password=p%40ss&db=1",
            "rediss://h/0?ssl_cert_reqs=none&username=u&password=***&db=1",
        ),
        ("redis://u:pw@h/0?PASSWORD=x", "redis://u:***@h/0?PASSWORD=***"),
        ("unix:///run/redis.sock?password=q&db=0", "unix:///run/redis.sock?password=***&db=0"),
        # The passphrase of the client's TLS key, which redis-py reads too.
        (
            "rediss://u:p@h/0?ssl_keyfile=/k.pem&ssl_password=s3cret&db=1",
            "rediss://u:***@h/0?ssl_keyfile=/k.pem&ssl_password=***&db=1",
        ),
        # Malformed (no "scheme://"): all before the last '@' but a user name is still hidden.
        ("user:wrongPW123@127.0.0.1:16392/0", "user:***@127.0.0.1:16392/0"),
        (":pw@h:1/0", "***@h:1/0"),
        ("redis:/:pw@host", "redis:***@host"),
        ("redis:pw@host", "redis:***@host"),
        ("h:1/0?password=s3cret", "h:1/0?password=***"),
        ("h:1/0", "h:1/0"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_malformed_url_never_quotes_its_password() -> None:
    with pytest.raises(InvalidArgument) as caught:
        client_from_url("redis://u:s3cr/et@127.0.0.1:6379/0")
    assert "s3cr" not in str(caught.value)
    # The likely cause is named without quoting the URL: a reserved character left unencoded.
    assert "percent-encode / ? # @ : %" in str(caught.value)


@pytest.mark.parametrize("path", ["news", "0/1", "db0"])
def test_a_path_that_is_not_a_database_number_is_refused(path: str) -> None:
    # redis-py took redis://host/news for database 0 (and /0/1 for database 1), without a word.
    with pytest.raises(InvalidArgument, match="names a database by number"):
        client_from_url(f"redis://127.0.0.1:1/{path}")


@pytest.mark.parametrize(
    "query",
    ["decode_responses=yes", "decode_responses=no&protocol=3", "encoding=utf-16&encoding_errors=replace"],
)
def test_a_urls_reply_and_encoding_options_change_nothing_written_or_answered(
    redis_url: str, query: str
) -> None:
    # The library reads replies undecoded and encodes what it sends itself, so a URL it shares with an
    # application's own client (decode_responses=... there) works as it is: nothing to refuse. (redis-py
    # reads "no" as a true string: that URL's client decodes too.)
    docs = [("é-中", "the first text of the pair, with a few more words"), ("b", "something else entirely")]
    client = client_from_url(f"{redis_url}/0?{query}")
    try:
        assert client.connection_pool.connection_kwargs.get("decode_responses") or "encoding" in query
        written = VerifiedIndex.on_client(client, "opts", k=3)
        assert written.add_many(docs) == [Outcome.ADDED, Outcome.ADDED]
        answered = [written.near(text) for _, text in docs], written.get("é-中"), written.count()
    finally:
        client.close()
    plain = client_from_url(f"{redis_url}/0")
    try:
        read = VerifiedIndex.on_client(plain, "opts")
        assert ([read.near(text) for _, text in docs], read.get("é-中"), read.count()) == answered
        assert [m.id for m in answered[0][0]] == ["é-中"] and answered[2] == (2, 2)
        assert read.verify().ok
    finally:
        plain.close()

    async def from_the_url() -> list[Match]:
        async with await AsyncSimhashIndex.from_url(f"{redis_url}/0?{query}", "opts") as index:
            return await index.near(index.fingerprint(docs[1][1]))

    assert [m.id for m in asyncio.run(from_the_url())] == ["b"]
