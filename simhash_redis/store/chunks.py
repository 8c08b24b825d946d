"""How a step of a bulk load reaches the server: its commands in chunks, two in flight (`Stream`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from ..transport import READ, SEND, Command, Steps
from ..transport.wire import PackedCommands
from .store import Store

__all__ = ["BULK", "CHUNK_ARGS", "Piece", "chunks", "send_step"]

#: Arguments per write of a step: round trips do not count, and the client builds the next meanwhile.
CHUNK_ARGS = 16_384
IN_FLIGHT = 2
#: The RESP form of one argument.
BULK = b"$%d\r\n%b\r\n"
#: A piece of a step: (arguments, commands, their packed bytes, or on a cluster the commands).
Piece = tuple[int, int, Any]


def send_step(store: Store, parts: Iterator[Sequence[Command]], *, keep: bool, durable: bool) -> list[Any]:
    """Send a step's chunks of commands in order; their replies if `keep` (none sent after an error reply)."""
    stream = Stream(parts, keep, 1 if store.cluster else IN_FLIGHT)
    store.run(stream.steps, durable=durable)
    return stream.replies


class Stream:
    """A step's chunks as steps without I/O, some in flight, resumed at the first unacknowledged one.

    A cluster's go one at a time, so that nothing of a step is sent after an error reply.
    """

    def __init__(self, chunks: Iterator[Sequence[Command]], keep: bool, in_flight: int) -> None:
        self.chunks, self.keep, self.in_flight = chunks, keep, in_flight
        self.built: list[Sequence[Command] | None] = []
        self.acked = 0
        self.replies: list[Any] = []

    def chunk(self, i: int) -> Sequence[Command] | None:
        """Chunk i (built on first use, forgotten once acknowledged); None past the last."""
        while len(self.built) <= i:
            following = next(self.chunks, None)
            if following is None:
                return None
            self.built.append(following)
        return self.built[i]

    def steps(self) -> Steps[None]:
        """The chunks from the first unacknowledged one, their replies read."""
        flight: deque[Sequence[Command]] = deque()
        while True:
            while len(flight) < self.in_flight:
                following = self.chunk(self.acked + len(flight))
                if following is None:
                    break
                yield SEND, [following]
                flight.append(following)
            if not flight:
                return
            replies = yield READ, len(flight.popleft())
            if self.keep:
                self.replies.extend(replies)
            self.built[self.acked] = None
            self.acked += 1


def chunks(pieces: Iterator[Piece], packed: bool) -> Iterator[Sequence[Command]]:
    """Pieces gathered into chunks of about CHUNK_ARGS arguments."""
    parts: list[Any] = []
    args = commands = 0
    for count, number, piece in pieces:
        parts.extend(piece)
        args += count
        commands += number
        if args >= CHUNK_ARGS:
            yield PackedCommands(b"".join(parts), commands) if packed else parts
            parts, args, commands = [], 0, 0
    if parts:
        yield PackedCommands(b"".join(parts), commands) if packed else parts
