"""Conversations with Redis (`Steps`, without I/O, run by `drive` on any `Exchange`), the standalone server's
`Transport`, and what every sender shares: the retry loop (`Backoff`) and the translation of errors."""

from __future__ import annotations

import contextlib
import os
import random
import re
import select
import time
import weakref
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import redis
import redis.exceptions as rex

from .. import defaults
from ..errors import (
    IndexCorrupted,
    InvalidArgument,
    RedisAuthError,
    RedisOutOfMemory,
    RedisPermissionError,
    RedisTimeout,
    RedisUnavailable,
    SimhashRedisError,
)
from ..links import doc_url
from . import wire
from .greenlet_bridge import pause
from .wire import Command

__all__ = [
    "RAW",
    "READ",
    "SEND",
    "Backoff",
    "Exchange",
    "ScriptMissing",
    "Step",
    "Steps",
    "Transport",
    "drive",
    "lost_connection",
    "malformed",
    "raise_first_error",
    "refused",
    "retried",
    "translate_error",
]

T = TypeVar("T")

#: A step's kinds: send batches of commands; read a count of replies (parsed); read a count of
#: replies of table sets or hashes, in their RESP form (bytes) where the exchange can, else parsed.
SEND, READ, RAW = "send", "read", "raw"
#: A step: (SEND, batches) or (READ or RAW, count).
Step = tuple[str, Any]
#: A conversation without I/O: it yields steps, is sent the replies of each read (None after a send),
#: and returns its result.
Steps = Generator[Step, Any, T]


class Exchange(Protocol):
    """Commands sent and replies read in one conversation, in order, error replies in place: as
    `wire.Exchange`."""

    def send(self, *batches: Sequence[Command]) -> None: ...
    def read(self, count: int) -> list[Any]: ...
    def read_sets(self, count: int) -> bytes | None: ...
    def round_trip(self, commands: Sequence[Command]) -> list[Any]: ...


def drive(steps: Steps[T], exchange: Exchange) -> T:
    """Run a conversation's steps on an exchange; its result. Raises the SimhashRedisError of an error
    reply among replies read parsed, and IndexCorrupted for a value the steps could not parse."""
    reply: Any = None
    send, read, read_sets = exchange.send, exchange.read, exchange.read_sets
    while True:
        try:
            kind, arg = steps.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except (ValueError, UnicodeDecodeError) as exc:
            if isinstance(exc, SimhashRedisError):  # InvalidArgument
                raise
            raise malformed(exc) from None
        if kind is SEND:
            send(*arg)
            reply = None
            continue
        reply = read_sets(arg) if kind is RAW else None
        if reply is None:
            reply = read(arg)
            raise_first_error(reply)


def malformed(exc: Exception) -> IndexCorrupted:
    """The error of a stored value the library did not write (another program's, say) that a call met."""
    return IndexCorrupted(
        f"the index holds a malformed entry ({exc}); run verify(repair=True) (simhash-redis verify --repair) "
        "to find it"
    )


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter and a cap (every command sent is a read or an idempotent write).

    Args:
        retries: attempts after the first one; 0 disables retrying.
        base: the first delay's upper bound in seconds.
        cap: no delay is longer than this, in seconds.
        lasting: once the retries are spent, keep retrying (delays of up to `cap`) until this many seconds
            after the first failure; a callable is asked at the first failure.
        deadline: no retry starts, nor is waited for, this many seconds after the call began (None: no
            deadline); an attempt under way is bounded by the socket timeout, not by this.
    """

    retries: int = defaults.RETRIES
    base: float = defaults.BACKOFF_BASE
    cap: float = defaults.BACKOFF_CAP
    lasting: float | Callable[[], float] = 0.0
    deadline: float | None = None

    def delays(self) -> Iterator[float]:
        """The delay before each retry, in seconds."""
        for attempt in range(self.retries):
            # The exponent stops growing long before a float would overflow; the cap rules by then.
            yield random.uniform(0, min(self.cap, self.base * 2.0 ** min(attempt, 64)))

    def call_with_retry(
        self,
        do: Callable[[], T],
        retryable: Callable[[Exception], bool],
        before_retry: Callable[[Exception], None] | None = None,
    ) -> T:
        """Call `do` (safe to repeat) until it returns, with a delay before each retry of a retryable error
        (never a `refused` one); before_retry is called after the delay (to refresh a slot map).

        Raises:
            Exception: the last attempt's error once the retries are spent, or a non-retryable one at once.
        """
        delays: Iterator[float] | None = None  # made at the first failure: most calls never need one
        until = 0.0
        deadline = self.deadline
        if deadline is not None:
            deadline += time.monotonic()
        while True:
            try:
                return do()
            except Exception as exc:
                if refused(exc) or not retryable(exc):
                    raise
                if delays is None:
                    delays = self.delays()
                    lasting = self.lasting() if callable(self.lasting) else self.lasting
                    until = time.monotonic() + lasting
                delay = next(delays, None)
                if delay is None:
                    left = until - time.monotonic()
                    if left <= 0:
                        raise
                    delay = min(random.uniform(0, self.cap), left)  # the last one ends with `lasting`
                if deadline is not None and time.monotonic() + delay >= deadline:
                    raise
                pause(delay)  # awaited when an asyncio index runs this
                if before_retry is not None:
                    before_retry(exc)


def retried(
    backoff: Backoff,
    do: Callable[[], T],
    retryable: Callable[[Exception], bool] | None = None,
    before_retry: Callable[[Exception], None] | None = None,
) -> T:
    """`backoff.call_with_retry` (retrying a `lost_connection` unless told otherwise), the redis-py error it
    ends with translated: the one retry loop and error translation of every sender."""
    try:
        return backoff.call_with_retry(do, retryable or lost_connection, before_retry)
    except SimhashRedisError:
        raise
    except (rex.RedisError, rex.RedisClusterException, OSError) as exc:
        raise translate_error(exc) from None


def refused(exc: BaseException) -> bool:
    """Whether an error is the server refusing the credentials (WRONGPASS, NOAUTH) or a command (NOPERM),
    also wrapped by a cluster client: no retry changes its answer (redis-py's AuthenticationError is a
    ConnectionError)."""
    return _refusal(exc) is not None


def _refusal(exc: BaseException) -> BaseException | None:
    if isinstance(exc, rex.RedisClusterException) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc if isinstance(exc, (rex.AuthenticationError, rex.NoPermissionError, RedisAuthError)) else None


class ScriptMissing(SimhashRedisError):
    """NOSCRIPT: the server lost a loaded Lua script (a restart, a failover); load it and send again."""


# How servers word an ACL refusal: NOPERM (Redis 6.2+, Valkey), "ACL failure" (some in-script errors),
# and Redis 7.0's in-script form, which names no command.
_REFUSED = ("NOPERM", "ACL failure", "can't run this command or subcommand", "has no permissions to run")
# How servers word a command sent before any AUTH (NOAUTH; redis-py's HELLO handshake gets the last).
_NONE_GIVEN = ("NOAUTH", "Authentication required", "client already authenticated")
# Writes refused while the server is in a passing state (READONLY: a replica, say after a failover).
_NOT_NOW = ("READONLY", "MISCONF", "NOREPLICAS", "BUSY ")
_COMMAND = re.compile(r"permissions to run the '([^']+)' command", re.IGNORECASE)


def raise_first_error(replies: list[Any]) -> None:
    """Raise the library exception for the first error reply among replies, if any."""
    for reply in replies:
        if isinstance(reply, rex.ResponseError):
            raise translate_error(reply) from None


def translate_error(exc: Exception) -> SimhashRedisError:
    """The library exception for a redis-py exception (messages carry no credentials)."""
    refusal = _refusal(exc)
    if refusal is not None and refusal is not exc and isinstance(refusal, Exception):
        return translate_error(refusal)  # a cluster client's wrapping: the server's own words are enough
    message = str(exc) or type(exc).__name__  # an asyncio timeout, say, carries no text
    if isinstance(exc, rex.NoScriptError) or message.startswith("NOSCRIPT"):
        return ScriptMissing(f"Redis lacks a script of the index: {message}")
    if isinstance(exc, rex.AuthenticationError) or message.startswith(("NOAUTH", "WRONGPASS")):
        if any(sign in message for sign in _NONE_GIVEN):
            message += " (the server asks for a password: give one, redis://user:password@host:port)"
        return RedisAuthError(f"Redis refused the credentials: {message}")
    if isinstance(exc, rex.NoPermissionError) or any(sign in message for sign in _REFUSED):
        named = _COMMAND.search(message)
        command = named.group(1).lower() if named else None
        what = f"the {command!r} command" if command else "a command of the index's scripts"
        return RedisPermissionError(
            f"the Redis user may not run {what} ({doc_url('security.md')} lists the minimal ACL): {message}",
            command,
        )
    if isinstance(exc, rex.MovedError) or message.startswith("MOVED "):  # redis-py < 5.1 does not parse it
        slot, _, node = message.removeprefix("MOVED ").partition(" ")
        return SimhashRedisError(
            f"the server is a Redis Cluster node (slot {slot} is served by {node}): pass a "
            "redis.cluster.RedisCluster client, or let the ACL user run INFO so that from_url can tell"
        )
    if "WRONGTYPE" in message:
        return IndexCorrupted(
            "a key in the index's key space holds the wrong type of value (another program wrote there?); "
            f"no document was half-written: run verify to find it, delete it, then run the same operation "
            f"again: {message}"
        )
    if isinstance(exc, (rex.ClusterDownError, rex.TryAgainError)) or message.startswith(
        ("CLUSTERDOWN", "TRYAGAIN")
    ):
        return RedisUnavailable(
            f"the Redis Cluster cannot serve the request now (a failover or a reshard?): {message}"
        )
    if isinstance(exc, rex.ReadOnlyError) or message.startswith(_NOT_NOW):
        return RedisUnavailable(
            "Redis refuses writes for now (a read only replica: point the URL at the primary; a failed save; "
            f"too few replicas; a script still running): {message}"
        )
    if "DB index is out of range" in message:
        return InvalidArgument(
            "the URL names a database number this server does not have (the path of redis://host:port/N; "
            f"0 is the default): {message}"
        )
    if isinstance(exc, rex.InvalidResponse) or message.startswith("Protocol error"):
        return RedisUnavailable(
            "the server at that address does not speak the Redis protocol (an HTTP server? a TLS port "
            f"given a redis:// URL?): {message}"
        )
    if isinstance(exc, rex.TimeoutError):
        return RedisTimeout(f"Redis did not answer in time: {message}")
    if message.startswith("OOM") or "OOM command not allowed" in message or "> 'maxmemory'" in message:
        return RedisOutOfMemory(
            "Redis is out of memory (maxmemory with noeviction): no document was half-written, but the "
            "batch may be partly stored. Free memory or raise maxmemory, then run the same operation "
            "again: it completes what is missing."
        )
    # By name or by text, whichever the redis-py version gives (a cluster's carries no text).
    if type(exc).__name__ == "MaxConnectionsError" or message == "Too many connections":
        return RedisUnavailable(
            "the client's connection pool has no connection left (more threads use the client at once than "
            "its max_connections): raise max_connections, or give the client a redis.BlockingConnectionPool, "
            f"whose callers wait for a connection: {message}"
        )
    if isinstance(exc, (rex.ConnectionError, OSError)):
        return RedisUnavailable(f"cannot reach Redis: {message}")
    return SimhashRedisError(f"Redis error: {message}")


class Transport:
    """One round trip per batch of commands over a pooled connection of a redis-py client (redis-py's
    Pipeline costs tens of microseconds of client CPU per call)."""

    cluster = False

    def __init__(self, client: redis.Redis, backoff: Backoff | None = None) -> None:
        self.client = client
        self.pool = client.connection_pool
        self.backoff = backoff or Backoff()

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send the commands in one round trip (per node) and return their raw replies in order, error replies
        in place unless `raise_on_error` (`durable`: on a cluster, each node's share that writes waits for a
        replica).

        Raises:
            RedisUnavailable: (or a subclass) the server could not be reached after the retries.
            SimhashRedisError: an error reply, when raise_on_error is set.
        """
        if not commands:
            return []
        replies = self.converse(lambda exchange: exchange.round_trip(commands))
        if raise_on_error:
            raise_first_error(replies)
        return replies

    def converse(self, talk: Callable[[Exchange], T], *, durable: bool = False) -> T:
        """Run a conversation on one connection, again from the start on a new one after a lost connection
        (`talk` must allow that); its result. Unread replies are never seen by anyone else; `durable` is for
        a cluster's sends. Raises as `execute`, and whatever else `talk` raises at once."""
        return retried(self.backoff, lambda: self._on_connection(talk))

    def broadcast(self, command: Command) -> None:
        """Send a keyless command (SCRIPT LOAD) to every server holding keys (raises as `execute`)."""
        self.execute([command])

    def scan(self, pattern: str, count: int) -> Iterator[list[bytes]]:
        """The keys matching a pattern, a SCAN page of COUNT `count` at a time from every server holding
        keys (a key may come twice; raises as `execute`)."""
        cursor: bytes | int = b"0"
        while True:
            cursor, keys = self.execute([(b"SCAN", cursor, b"MATCH", pattern, b"COUNT", count)])[0]
            if keys:
                yield list(keys)
            if cursor in (b"0", 0):
                return

    def _on_connection(self, talk: Callable[[Exchange], T]) -> T:
        held = self.__dict__.get("_held_connection")
        if held is None or held.pool is not self.pool:
            held = self.__dict__["_held_connection"] = HeldConnection(self.pool)
        connection = held.take()
        exchange = wire.Exchange(connection)
        try:
            return talk(exchange)
        finally:
            # `unread` counts a batch before it is sent and drops only after its replies are read, so
            # zero means nothing is left on the wire, even when `talk` raised; bytes read past the last
            # reply would be something no command asked for. A connection not clean is never handed on.
            clean = exchange.unread == 0 and not exchange.tail
            if not clean:
                connection.disconnect()
            held.give(connection, clean)


def lost_connection(exc: Exception) -> bool:
    """Whether an error is a connection refused, lost or timed out: worth a retry."""
    # An error reply a conversation translated (NOPERM, OOM, ...) is no lost connection, although
    # RedisUnavailable and its kin are OSErrors (refused credentials are never retried: `refused`).
    if isinstance(exc, SimhashRedisError):
        return False
    return isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError))


class HeldConnection:
    """Keeps one connection of a pool checked out between round trips (a pool's checkout costs more than a
    small round trip): only a fast-path one of a plain `redis.ConnectionPool`, while a quarter of its limit
    at most is in use; let go when garbage-collected, forgotten by a forked child."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self._held: list[Any] = []
        self._poller: tuple[Any, Any] | None = None
        self._enabled = type(pool) is redis.ConnectionPool
        _HELD_CONNECTIONS.add(self)
        weakref.finalize(self, _release_all, pool, self._held, os.getpid())

    def take(self) -> Any:
        if self._held:
            try:
                connection = self._held.pop()
            except IndexError:  # another thread took it
                pass
            else:
                try:
                    if self._idle(connection):
                        return connection
                except (rex.ConnectionError, OSError, ValueError):
                    pass
                connection.disconnect()
                self.pool.release(connection)
        return wire.checkout(self.pool)

    def give(self, connection: Any, clean: bool) -> None:
        """Take back a connection; `clean`: every reply was read, nothing raised."""
        if clean and self._enabled and not self._held and wire.fast(connection) and self._roomy():
            self._held.append(connection)
        else:
            self.pool.release(connection)

    def forget(self) -> None:
        self._held.clear()
        self._poller = None

    def _idle(self, connection: Any) -> bool:
        # What redis-py's can_read(0) checks, without allocating a poller on every call.
        parser = connection._parser
        sock, reader = getattr(parser, "_sock", None), getattr(parser, "_reader", None)
        if sock is None or reader is None:
            return False
        if getattr(parser, "_next_response", wire.NOT_ENOUGH_DATA) is not wire.NOT_ENOUGH_DATA:
            return False  # redis-py < 5.1 keeps a reply its can_read() took from the reader
        buffered = getattr(reader, "has_data", None)  # hiredis >= 2.1
        if not _HAS_POLL or buffered is None:
            return not parser.can_read(0)
        if buffered():
            return False
        pending = getattr(sock, "pending", None)  # TLS: decrypted bytes above the socket
        if pending is not None and pending():
            return False
        cached = self._poller
        if cached is None or cached[0] is not sock:
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            cached = self._poller = (sock, poller)
        return not cached[1].poll(0)

    def _roomy(self) -> bool:
        # Hold a connection only while the pool has plenty left for everyone else.
        limit = self.pool.max_connections
        in_use = getattr(self.pool, "_in_use_connections", None)
        return in_use is not None and (limit is None or len(in_use) <= limit // 4)


_HAS_POLL = hasattr(select, "poll")
_HELD_CONNECTIONS: weakref.WeakSet[HeldConnection] = weakref.WeakSet()


def _forget_all() -> None:
    for held in list(_HELD_CONNECTIONS):
        held.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all)


def _release_all(pool: Any, held: list[Any], pid: int) -> None:
    if os.getpid() != pid:
        return
    while held:
        with contextlib.suppress(Exception):  # the pool may be half torn down at interpreter exit
            pool.release(held.pop())
