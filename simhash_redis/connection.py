"""Making redis-py clients from URLs, and keeping credentials out of every message."""

from __future__ import annotations

import re

import redis
import redis.exceptions as rex
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from . import defaults
from .errors import InvalidArgument, InvalidType

__all__ = ["client_from_url", "redact_url"]

_CREDENTIALS = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#]*)@")


def redact_url(url: str) -> str:
    """The URL with its password replaced by '***', fit for logs and error messages.

    Args:
        url: a Redis URL such as redis://user:secret@host:6379/0.
    """

    def hide(match: re.Match[str]) -> str:
        user, sep, _ = match.group("userinfo").partition(":")
        return (
            f"{match.group('scheme')}{user}{':***' if sep else ''}@"
            if user
            else f"{match.group('scheme')}***@"
        )

    return _CREDENTIALS.sub(hide, url, count=1)


def client_from_url(
    url: str, *, cluster: bool | None = None, **options: object
) -> redis.Redis | RedisCluster:
    """A redis-py client for a redis://, rediss:// or unix:// URL, with the library's timeouts.

    Args:
        url: the server's URL (any node of a cluster); credentials and TLS settings come from it.
        cluster: whether the server is a Redis Cluster; None asks it (INFO cluster) and takes a server
            that cannot be asked (unreachable, or an ACL user without INFO) as standalone, so that
            errors surface at first use as with any redis-py client.
        **options: extra redis-py options, overriding the defaults.

    Raises:
        InvalidType: url is not a str.
        InvalidArgument: the URL is malformed (the message shows it without its password).
    """
    if not isinstance(url, str):
        raise InvalidType(f"url must be a str, got {type(url).__name__}")
    settings: dict[str, object] = {
        "socket_timeout": defaults.SOCKET_TIMEOUT,
        "socket_connect_timeout": defaults.CONNECT_TIMEOUT,
        # The index retries whole batches itself (see retry.Backoff); redis-py's own retries would
        # multiply with those and make a wrong password take seconds to report.
        "retry": Retry(NoBackoff(), 0),
    }
    settings.update(options)
    try:
        client = redis.Redis.from_url(url, **settings)
        if cluster is None and not url.startswith("unix:"):
            cluster = _is_cluster(client)
        if not cluster:
            return client
        client.close()
        settings.pop("retry")
        return RedisCluster.from_url(url, **settings)
    except (ValueError, TypeError) as exc:
        reason = str(exc).replace(url, redact_url(url))
        raise InvalidArgument(f"url {redact_url(url)!r} is not a valid Redis URL: {reason}") from None


def _is_cluster(client: redis.Redis) -> bool:
    try:
        info = client.info("cluster")
    except (rex.RedisError, OSError):
        return False
    return bool(info.get("cluster_enabled"))
