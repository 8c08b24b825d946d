"""What the floors above send through: commands, a conversation's exchange, and the Sender protocol.

A conversation can be written without I/O, as `Steps`: a generator that yields what to send and what to
read, and takes the replies; `drive` runs it on any exchange, and a test can feed it recorded replies.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from .translate import raise_first_error
from .wire import Command

__all__ = ["RAW", "READ", "SEND", "Command", "Exchange", "Sender", "Step", "Steps", "drive", "scan_pages"]

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
    """Commands sent and replies read in one conversation, replies in the order commands were sent."""

    def send(self, *batches: Sequence[Command]) -> None:
        """Send batches of commands (error replies will come back in place, untranslated)."""

    def read(self, count: int) -> list[Any]:
        """The next `count` replies."""

    def read_sets(self, count: int) -> bytes | None:
        """The next `count` replies in their RESP form, if this exchange can; None: read them with `read`."""

    def round_trip(self, commands: Sequence[Command]) -> list[Any]:
        """Send the commands and read all their replies."""


class Sender(Protocol):
    """Sends commands to the server (or the cluster's nodes) holding an index's keys: `Transport` or
    `ClusterTransport`."""

    cluster: bool

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        """Send the commands in one round trip (per node) and return their raw replies in order."""

    def converse(self, talk: Callable[[Exchange], T], *, durable: bool = False) -> T:
        """Run a conversation, again from the start after a lost connection; `talk` must allow that.
        Durable: on a cluster, each round trip's writes wait for a replica (as `execute`'s)."""

    def broadcast(self, command: Command) -> None:
        """Send a keyless command to every server that runs the index's keys."""

    def scan(self, pattern: str, count: int) -> Iterator[list[bytes]]:
        """The keys matching a pattern, in batches, from every server holding keys."""


def drive(steps: Steps[T], exchange: Exchange) -> T:
    """Run a conversation's steps on an exchange; its result.

    Raises:
        SimhashRedisError: an error reply among replies read parsed, at once.
    """
    reply: Any = None
    send, read, read_sets = exchange.send, exchange.read, exchange.read_sets
    while True:
        try:
            kind, arg = steps.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if kind is SEND:
            send(*arg)
            reply = None
            continue
        reply = read_sets(arg) if kind is RAW else None
        if reply is None:
            reply = read(arg)
            raise_first_error(reply)


def scan_pages(round_trip: Callable[[Command], Any], pattern: str, count: int) -> Iterator[list[bytes]]:
    """The keys matching a pattern on the server `round_trip` sends to, a SCAN page at a time (a key
    may come twice)."""
    cursor: bytes | int = b"0"
    while True:
        cursor, keys = round_trip((b"SCAN", cursor, b"MATCH", pattern, b"COUNT", count))
        if keys:
            yield list(keys)
        if cursor in (b"0", 0):
            return
