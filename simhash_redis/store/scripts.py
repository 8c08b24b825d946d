"""The Lua scripts the index runs server-side, loaded once per connection pool and called by SHA."""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from typing import Any

import redis.exceptions as rex

from ..transport import Command, Sender, raise_first_error

__all__ = ["Script"]


class Script:
    """A Lua script from the package's lua/ folder, called with EVALSHA.

    A line ``--! include NAME`` is replaced by lua/NAME.lua: helpers several scripts share (Redis runs
    each script alone, so the server gets the script with its helpers in it).

    Args:
        name: the file name without '.lua'.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = _included(_read(name))
        self.sha = hashlib.sha1(self.source).hexdigest().encode()

    def command(self, keys: list[bytes], args: list[bytes | int]) -> Command:
        """The EVALSHA command for one call.

        Args:
            keys: the keys the script touches.
            args: its other arguments.
        """
        return [b"EVALSHA", self.sha, len(keys), *keys, *args]

    def run(self, transport: Sender, calls: list[Command], *, durable: bool = False) -> list[Any]:
        """Run script calls in one round trip, loading the script first where the server lacks it.

        Args:
            transport: where to send the calls.
            calls: commands built by `command`.
            durable: on a cluster, wait for a replica to have the writes (see ClusterTransport).

        Raises:
            SimhashRedisError: an error reply other than a missing script.
        """
        replies = transport.execute(calls, raise_on_error=False, durable=durable)
        if any(isinstance(r, rex.NoScriptError) for r in replies):
            # A restarted or failed-over server forgets loaded scripts; the calls are idempotent,
            # so the missing ones are simply sent again once the script is loaded.
            transport.broadcast([b"SCRIPT", b"LOAD", self.source])
            missing = [i for i, r in enumerate(replies) if isinstance(r, rex.NoScriptError)]
            again = transport.execute([calls[i] for i in missing], raise_on_error=False, durable=durable)
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        raise_first_error(replies)
        return replies


_INCLUDE = re.compile(rb"^--! include (\w+)$", re.MULTILINE)


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath(f"lua/{name}.lua").read_bytes()


def _included(source: bytes) -> bytes:
    """The source with each ``--! include NAME`` line replaced by lua/NAME.lua."""
    return _INCLUDE.sub(lambda match: _read(match.group(1).decode()).rstrip(b"\n"), source)
