"""Every error simhash-redis raises, under one root (the tree: docs/api.md); messages never contain a Redis
URL's password (`redact_url` anything that came from a URL)."""

from __future__ import annotations

import re

__all__ = [
    "ConfigurationMismatch",
    "IndexCorrupted",
    "IndexNotFound",
    "InputError",
    "InvalidArgument",
    "InvalidFingerprint",
    "InvalidType",
    "RedisAuthError",
    "RedisOutOfMemory",
    "RedisPermissionError",
    "RedisTimeout",
    "RedisUnavailable",
    "SimhashRedisError",
    "TooManyErrors",
    "WriteContention",
]


class SimhashRedisError(Exception):
    """The root of every exception simhash-redis raises.

    A message with advice is "problem: hint", kept apart in `problem`, `hint` and `remedy` (None without
    a hint), so that a caller which speaks other words (the command line) can give its own advice.

    Args:
        hint: what to do, in the library's words.
        remedy: the advice's name: "merge" (pass merge=True), "another-name", "restore-meta" (restore
            the lost meta, or drop the index), "state-config", "state-retention", "state-verified",
            "no-retention" (state the configuration, retention or verified mode the index was created
            with, or no retention), "without-ARG" (leave out the argument ARG).
    """

    def __init__(self, *args: object, hint: str | None = None, remedy: str | None = None) -> None:
        problem = str(args[0]) if args else ""
        super().__init__(*((f"{problem}: {hint}", *args[1:]) if hint is not None else args))
        self.problem = problem
        self.hint = hint
        self.remedy = remedy


class InvalidArgument(SimhashRedisError, ValueError):
    """An argument's value is out of range or malformed; the message names the argument."""


class InvalidFingerprint(InvalidArgument):
    """A fingerprint is negative or has bits above the index's f."""


class InvalidType(SimhashRedisError, TypeError):
    """An argument has the wrong type; the message names the argument and the types accepted."""


class ConfigurationMismatch(SimhashRedisError):
    """The index stored in Redis was created with another configuration (f, k, layout, scheme, ...)."""


class IndexNotFound(SimhashRedisError):
    """No index of that name exists, and the call was one that only reads an index."""


class IndexCorrupted(SimhashRedisError):
    """The index's stored data cannot be read by this version (unknown format version, malformed meta)."""


class WriteContention(SimhashRedisError):
    """Documents kept meeting concurrent writes to their ids or tables; nothing of them was written: rerun."""


class InputError(SimhashRedisError, ValueError):
    """A record of bulk input is malformed.

    Attributes:
        source: the file name (or ``<stdin>``) the record came from.
        line: the 1-based line number of the record, or None where lines do not apply.
        fatal: the input cannot be read past this point (corrupt compressed data): a load fails there.
    """

    def __init__(self, source: str, line: int | None, reason: str, fatal: bool = False) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        self.fatal = fatal
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, int | None, str, bool]]:
        # Sent back from a loader's worker process: BaseException's pickling would pass the message alone.
        return type(self), (self.source, self.line, self.reason, self.fatal)


class TooManyErrors(SimhashRedisError):
    """A bulk load met more bad records than its max_errors allowed; what came before them is stored."""


class RedisUnavailable(SimhashRedisError, ConnectionError):
    """The Redis server could not be reached, or closed the connection, after the configured retries (or
    refuses writes for now: a read-only replica, a failed save); every write is idempotent: repeat it."""


class RedisAuthError(RedisUnavailable):
    """The server refused the credentials, or the ACL user lacks a command or key the index needs."""


class RedisPermissionError(RedisAuthError):
    """The ACL user may not run a command (or reach a key) the index needs.

    Attributes:
        command: the refused command as the server named it, or None (Redis 7.0 does not name a command
            refused inside a script).
    """

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command

    def __reduce__(self) -> tuple[type[RedisPermissionError], tuple[str, str | None]]:
        return (type(self), (str(self), self.command))


class RedisTimeout(RedisUnavailable, TimeoutError):
    """The server did not answer within the socket timeout (for example while paused by CLIENT PAUSE)."""


class RedisOutOfMemory(RedisUnavailable):
    """The server reached ``maxmemory`` under ``noeviction`` and refused a write (no document half-written
    on a standalone server)."""


#: The openings of the transport's connection messages that a caller saying so itself leaves out.
_LEAD = re.compile(
    r"\A(?:cannot reach (?:Redis|the Redis Cluster)(?: at \S+)?|Redis refused the credentials): "
)


def detail(exc: BaseException) -> str:
    """An error's message without its opening ("cannot reach Redis: ", ...), for a caller that says it."""
    return _LEAD.sub("", str(exc))
