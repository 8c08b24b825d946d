"""Making redis-py clients from URLs, and keeping credentials out of every message."""

from __future__ import annotations

import re
from typing import Any, Literal, overload
from urllib.parse import unquote, urlsplit

import redis
import redis.exceptions as rex
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from .. import defaults
from ..errors import InvalidArgument, InvalidType, RedisUnavailable
from .greenlet_bridge import wait
from .standalone import refused, translate_error

__all__ = ["client_from_url", "redact_url"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# A password query parameter (redis-py reads it, as it reads the userinfo's; ssl_password unlocks the TLS
# key): its value, up to the next parameter or fragment; case-insensitively, since a parser may be lenient.
_QUERY_PASSWORD = re.compile(r"([?&;][^=&;#]*password=)[^&;#]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """The URL with its password replaced by '***', fit for logs and error messages: the userinfo (all before
    the last '@', so a password holding '/', '?', '#' or '@' too) and a ``password=`` or ``ssl_password=``
    query parameter; a malformed URL's too (no scheme, or "redis:/"), all before its last '@' but a user
    name."""
    scheme = _SCHEME.match(url)
    prefix = scheme.group() if scheme else ""
    rest = url[len(prefix) :]
    at = rest.rfind("@")
    if at >= 0:
        user, sep, _ = rest[:at].partition(":")
        shown = f"{user}:***" if sep and user else "***"
        rest = f"{shown}@{rest[at + 1 :]}"
    return prefix + _QUERY_PASSWORD.sub(r"\1***", rest)


@overload
def client_from_url(
    url: str, *, cluster: bool | None = None, asyncio: Literal[False] = False, **options: object
) -> redis.Redis | RedisCluster: ...


@overload
def client_from_url(
    url: str, *, cluster: bool | None = None, asyncio: Literal[True], **options: object
) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster: ...


def client_from_url(
    url: str, *, cluster: bool | None = None, asyncio: bool = False, **options: object
) -> Any:
    """A redis-py client for a redis://, rediss:// or unix:// URL (any node of a cluster), with the library's
    timeouts; credentials and TLS settings come from the URL, **options override the defaults.

    Args:
        cluster: whether the server is a Redis Cluster; None asks it (INFO cluster), taking a server that
            cannot be asked as standalone (errors then surface at first use).
        asyncio: make a redis.asyncio client (only inside the asyncio API's calls, which await INFO).

    Raises:
        InvalidType: url is not a str.
        InvalidArgument: the URL is malformed, or an option of its query has a value redis-py refuses (the
            message shows it without its password).
        RedisUnavailable: the URL names a cluster whose nodes cannot be reached.
    """
    if not isinstance(url, str):
        raise InvalidType(f"url must be a str, got {type(url).__name__}")
    standalone, cluster_kind, retry = _asyncio_kinds() if asyncio else _SYNC
    settings: dict[str, object] = {
        "socket_timeout": defaults.SOCKET_TIMEOUT,
        "socket_connect_timeout": defaults.CONNECT_TIMEOUT,
        # The index retries whole batches itself (see `Backoff`); redis-py's own retries would
        # multiply with those and make a wrong password take seconds to report.
        "retry": retry(NoBackoff(), 0),
    }
    settings.update(options)
    try:
        # redis-py takes a path that is not a number (redis://host/news) for database 0, silently.
        database = unquote(urlsplit(url).path).strip("/") if url.startswith(("redis:", "rediss:")) else ""
        if database and not database.isdigit():
            raise ValueError(f"its path names a database by number (redis://host:port/0), not {database!r}")
        client = standalone.from_url(url, **settings)
        _check_options(client, asyncio, url)
        if cluster is None and not url.startswith("unix:"):
            try:
                cluster = _is_cluster(client, asyncio)
            except BaseException:  # cancelled, say: the client made here is closed here
                _close(client, asyncio)
                raise
        if not cluster:
            return client
        _close(client, asyncio)
        settings.pop("retry")
        return cluster_kind.from_url(url, **settings)
    except rex.RedisClusterException as exc:  # e.g. the nodes announce addresses this host cannot reach
        if refused(exc):  # they answered, refusing the credentials
            raise translate_error(exc) from None
        raise RedisUnavailable(f"cannot reach the Redis Cluster at {redact_url(url)}: {exc}") from None
    except (ValueError, TypeError) as exc:
        if isinstance(exc, InvalidArgument):
            raise
        # redis-py's reason may quote pieces of the password; it is only shown for URLs without one.
        shown = redact_url(url)
        reason = f": {exc}" if shown == url else ""
        if not reason:
            reason = (
                ": check its host, port, database number and query, and percent-encode / ? # @ : % in the "
                "user and password"
                if _SCHEME.match(url)
                else ": it must begin with redis://, rediss:// or unix://"
            )
        raise InvalidArgument(f"url {shown!r} is not a valid Redis URL{reason}") from None


def _check_options(client: Any, asyncio: bool, url: str) -> None:
    # Make, not open, a connection as the client's pool will: redis-py checks some of a URL's options
    # (ssl_cert_reqs, protocol) only then, failing the first command as if the server were at fault.
    pool = client.connection_pool
    try:
        pool.connection_class(**pool.connection_kwargs)
    except rex.RedisError as exc:  # its reason is about an option's value, never the password
        _close(client, asyncio)
        raise InvalidArgument(f"url {redact_url(url)!r} is not a valid Redis URL: {exc}") from None


class _UrlCluster(RedisCluster):
    # `close` closes its nodes' connections too: ``from_url`` gives each node a pool its client does not
    # own, whose sockets close would leave to the garbage collector.
    def close(self) -> None:
        try:
            super().close()
        finally:
            self.disconnect_connection_pools()  # type: ignore[no-untyped-call]


#: The classes of a standalone client, a cluster client and redis-py's retries.
_SYNC: tuple[Any, Any, Any] = (redis.Redis, _UrlCluster, Retry)


def _asyncio_kinds() -> tuple[Any, Any, Any]:
    import redis.asyncio  # only for the asyncio API's users
    import redis.asyncio.cluster
    import redis.asyncio.retry

    return redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster, redis.asyncio.retry.Retry


def _is_cluster(client: Any, asyncio: bool) -> bool:
    try:
        info = wait(client.info("cluster")) if asyncio else client.info("cluster")
    except (rex.RedisError, OSError):
        return False
    return bool(info.get("cluster_enabled"))


def _close(client: Any, asyncio: bool) -> None:
    if asyncio:
        wait(client.aclose())
    else:
        client.close()
