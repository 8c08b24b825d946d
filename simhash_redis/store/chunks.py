"""How a step of a bulk load reaches the server: its commands in chunks, two in flight.

On a standalone server the commands are packed once (`Packed`) and streamed on one connection: the client
builds the next chunk while the server runs the previous one. After a lost connection the conversation
resumes at the first unacknowledged chunk (resending is idempotent: every step of a bulk load is). On a
cluster each chunk goes to every node at once (`ClusterTransport` groups the commands per node), writes
followed by WAIT for a replica.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any, overload

from ..transport import Command, Exchange, raise_first_error, wire
from ..transport.packing import arrays
from .scripts import Script, with_scripts
from .store import Store

__all__ = ["BULK", "CHUNK_ARGS", "Packed", "Piece", "chunks", "send_step"]

#: Arguments per write of a step (a few hundred kB): large enough that round trips do not count, small
#: enough that the client builds the next write while the server runs this one.
CHUNK_ARGS = 16_384
#: Chunks sent and not yet answered.
IN_FLIGHT = 2
#: The RESP form of one argument.
BULK = b"$%d\r\n%b\r\n"
#: A piece of a step: (arguments, commands, the byte strings whose concatenation is the commands packed)
#: on a standalone server, (arguments, commands, the list of the commands) on a cluster.
Piece = tuple[int, int, Any]


def send_step(
    store: Store,
    parts: Iterator[Sequence[Command]],
    *,
    keep: bool,
    durable: bool,
    script: Script | None = None,
) -> list[Any]:
    """Send a step's chunks of commands (`chunks`), in order; their replies if `keep`.

    Args:
        store: where they go.
        parts: the step's chunks, packed on a standalone server.
        keep: return the replies (else only check them).
        durable: on a cluster, wait for a replica to have the writes.
        script: the Lua script the commands call, if they do (loaded where the server lacks it).

    Raises:
        SimhashRedisError: the first error reply (RedisOutOfMemory, ...); nothing more of the step is
            sent after it.
        RedisUnavailable: the server cannot be reached.
    """
    if not store.cluster:
        stream = Stream(parts, keep)
        if script is None:
            return stream.run(store)
        return with_scripts(store.sender, lambda: stream.run(store), (script,))
    out: list[Any] = []
    for chunk in parts:
        if script is not None:
            replies = store.run_script(script, list(chunk), durable=durable)
        else:
            replies = store.execute(chunk, durable=durable)
        if keep:
            out.extend(replies)
    return out


class Stream:
    """A step's chunks on one connection, two in flight: the server runs one while the client builds the
    next. After a lost connection the conversation resumes at the first unacknowledged chunk (resending is
    idempotent), and so does it after the script its chunks call is loaded (`with_scripts`)."""

    def __init__(self, chunks: Iterator[Sequence[Command]], keep: bool) -> None:
        self.chunks, self.keep = chunks, keep
        self.built: list[Sequence[Command] | None] = []
        self.acked = 0
        self.replies: list[Any] = []

    def run(self, store: Store) -> list[Any]:
        """Send every chunk and read its replies (kept if asked); raise the first error reply."""
        store.converse(self.talk)
        return self.replies

    def chunk(self, i: int) -> Sequence[Command] | None:
        """Chunk number i (built on first use, forgotten once acknowledged); None past the last."""
        while len(self.built) <= i:
            following = next(self.chunks, None)
            if following is None:
                return None
            self.built.append(following)
        return self.built[i]

    def talk(self, exchange: Exchange) -> None:
        """The conversation, from the first unacknowledged chunk."""
        flight: deque[Sequence[Command]] = deque()
        while True:
            while len(flight) < IN_FLIGHT:
                following = self.chunk(self.acked + len(flight))
                if following is None:
                    break
                exchange.send(following)
                flight.append(following)
            if not flight:
                return
            replies = exchange.read(len(flight.popleft()))
            raise_first_error(replies)
            if self.keep:
                self.replies.extend(replies)
            self.built[self.acked] = None
            self.acked += 1


class Packed(wire.Same):
    """Commands packed once into their RESP form, which `wire.pack` sends as is. Iterating parses them back
    (only a connection that packs commands itself, with a custom encoder, does that)."""

    __slots__ = ("_count", "_resp")

    def __init__(self, resp: bytes, count: int) -> None:
        super().__init__(b"", [])
        self._resp, self._count = resp, count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> tuple[bytes, bytes]: ...

    @overload
    def __getitem__(self, i: slice) -> wire.Same: ...

    def __getitem__(self, i: int | slice) -> Any:
        return list(arrays(self._resp))[i]

    def __iter__(self) -> Iterator[Any]:
        return arrays(self._resp)

    def packed(self) -> bytes:
        """The RESP form of the commands."""
        return self._resp


def chunks(pieces: Iterator[Piece], packed: bool) -> Iterator[Sequence[Command]]:
    """Pieces gathered into chunks of about CHUNK_ARGS arguments."""
    parts: list[Any] = []
    args = commands = 0
    for count, number, piece in pieces:
        parts.extend(piece)
        args += count
        commands += number
        if args >= CHUNK_ARGS:
            yield Packed(b"".join(parts), commands) if packed else parts
            parts, args, commands = [], 0, 0
    if parts:
        yield Packed(b"".join(parts), commands) if packed else parts
