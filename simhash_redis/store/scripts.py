"""The Lua scripts the index runs server-side: one `Script` per file of lua/, called by SHA, and the one
place where a server that lacks them (NOSCRIPT) gets them (`with_scripts`, `run_calls`)."""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

from ..transport import Command, Exchange, ScriptMissing, Sender, raise_first_error, translate_error

__all__ = [
    "BAND_DROP",
    "BAND_MEMBER",
    "BULK_BAND",
    "BULK_COMMIT",
    "BULK_FP",
    "BULK_IDS",
    "BULK_SKETCH",
    "COUNT_FPS",
    "CREATE_META",
    "FP_IDS",
    "ID_CAS",
    "LOCK",
    "PIN_META",
    "SCRIPTS",
    "UNLOCK",
    "WRITE",
    "Script",
    "run_calls",
    "with_scripts",
]

T = TypeVar("T")

# Loads of the scripts for the calls of one read that met NOSCRIPT (a failover may come between a load
# and the call); refused after the last, it is an error.
_LOADS = 2


#: Every script, as made (lua/netstrings.lua and lua/bands.lua are only included in others).
SCRIPTS: list[Script] = []


class Script:
    """A Lua script from the package's lua/ folder, called with EVALSHA.

    A line ``--! include NAME`` is replaced by lua/NAME.lua (Redis runs each script alone).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = _included(_read(name))
        self.sha = hashlib.sha1(self.source).hexdigest().encode()
        SCRIPTS.append(self)

    def command(self, keys: list[bytes], args: list[bytes | int]) -> Command:
        """The EVALSHA command for one call."""
        return [b"EVALSHA", self.sha, len(keys), *keys, *args]


_INCLUDE = re.compile(rb"^--! include (\w+)$", re.MULTILINE)


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath(f"lua/{name}.lua").read_bytes()


def _included(source: bytes) -> bytes:
    """The source with each ``--! include NAME`` line replaced by lua/NAME.lua."""
    return _INCLUDE.sub(lambda match: _read(match.group(1).decode()).rstrip(b"\n"), source)


# What each script does: the header of its lua/ file.
WRITE = Script("write")
BAND_MEMBER = Script("band_member")
BAND_DROP = Script("band_drop")
ID_CAS = Script("id_cas")
FP_IDS = Script("fp_ids")
BULK_FP = Script("bulk_fp")
BULK_IDS = Script("bulk_ids")
BULK_SKETCH = Script("bulk_sketch")
BULK_BAND = Script("bulk_band")
BULK_COMMIT = Script("bulk_commit")
COUNT_FPS = Script("count_fps")
CREATE_META = Script("create_meta")
PIN_META = Script("pin_meta")
LOCK = Script("lock")
UNLOCK = Script("unlock")


def with_scripts(
    sender: Sender,
    talk: Callable[[Exchange], T],
    scripts: Sequence[Script] = SCRIPTS,
    *,
    durable: bool = False,
) -> T:
    """Run a conversation that calls scripts: the one place NOSCRIPT is handled.

    Where a server lacks them, they are loaded and only the refused calls sent again (each idempotent),
    their replies put in place, so each outcome is the one of the write that was made.

    Raises:
        ScriptMissing: the server kept forgetting the scripts.
    """
    return sender.converse(lambda exchange: talk(_Loading(exchange, sender, scripts)), durable=durable)


def run_calls(
    sender: Sender, calls: Sequence[Command], scripts: Sequence[Script], *, durable: bool = False
) -> list[Any]:
    """Send script calls in one round trip (per node), loading the scripts where a server lacks them.

    Raises:
        SimhashRedisError: the first error reply.
    """
    if not calls:
        return []
    replies = with_scripts(sender, lambda exchange: exchange.round_trip(calls), scripts, durable=durable)
    raise_first_error(replies)
    return replies


class _Loading:
    """An exchange whose calls refused with NOSCRIPT are sent again once the scripts are loaded.

    Loaded on the conversation's own exchange (a shared pool may have no other connection to spare),
    after the replies still due are read ahead; on a cluster into every primary.
    """

    __slots__ = ("_ahead", "_exchange", "_read", "_scripts", "_sender", "_sent")

    def __init__(self, exchange: Exchange, sender: Sender, scripts: Sequence[Script]) -> None:
        self._exchange, self._sender, self._scripts = exchange, sender, scripts
        #: The batches whose replies are not all read, and how many of the first one's are.
        self._sent: deque[Sequence[Command]] = deque()
        self._read = 0
        #: Replies read ahead of the conversation (those due when a call was sent again).
        self._ahead: list[Any] = []

    def send(self, *batches: Sequence[Command]) -> None:
        self._sent.extend(batch for batch in batches if len(batch))
        self._exchange.send(*batches)

    def read(self, count: int) -> list[Any]:
        """The next `count` replies, error replies in place (a refused call's: its reply once sent again)."""
        replies, self._ahead = self._ahead[:count], self._ahead[count:]
        if count > len(replies):
            replies += self._exchange.read(count - len(replies))
        commands = self._taken(count)
        refused = [i for i, reply in enumerate(replies) if _missing(reply)]
        for _ in range(_LOADS):
            if not refused:
                break
            for i, reply in zip(refused, self._again([commands(i) for i in refused]), strict=True):
                replies[i] = reply
            refused = [i for i in refused if _missing(replies[i])]
        return replies

    def read_sets(self, count: int) -> bytes | None:
        """`Exchange.read_sets`: arrays of bulk strings, never a refusal."""
        if self._ahead:
            return None  # read with `read`
        raw = self._exchange.read_sets(count)
        if raw is not None:
            self._taken(count)
        return raw

    def _again(self, calls: list[Command]) -> list[Any]:
        """Load the scripts, then send calls again; their replies."""
        due = sum(len(batch) for batch in self._sent) - self._read - len(self._ahead)
        if due:
            self._ahead += self._exchange.read(due)
        loads: list[Command] = [[b"SCRIPT", b"LOAD", script.source] for script in self._scripts]
        if self._sender.cluster:
            for load in loads:
                self._sender.broadcast(load)
            loads = []
        replies = self._exchange.round_trip([*loads, *calls])
        raise_first_error(replies[: len(loads)])
        return replies[len(loads) :]

    def round_trip(self, commands: Sequence[Command]) -> list[Any]:
        self.send(commands)
        return self.read(len(commands))

    def _taken(self, count: int) -> Callable[[int], Command]:
        """Forget the next `count` commands sent; a lookup of one of them by its place among those."""
        spans: list[tuple[Sequence[Command], int, int]] = []  # (batch, first, how many) of the count
        left = count
        while left:
            batch = self._sent[0]
            n = min(left, len(batch) - self._read)
            spans.append((batch, self._read, n))
            left -= n
            self._read += n
            if self._read == len(batch):
                self._sent.popleft()
                self._read = 0

        def command(i: int) -> Command:
            for batch, first, n in spans:
                if i < n:
                    return batch[first + i]
                i -= n
            raise IndexError(i)

        return command


def _missing(reply: Any) -> bool:
    return isinstance(reply, Exception) and isinstance(translate_error(reply), ScriptMissing)
