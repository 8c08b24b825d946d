"""URLs: passwords never shown, whatever characters they hold."""

from __future__ import annotations

import pytest

from simhash_redis import InvalidArgument
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
