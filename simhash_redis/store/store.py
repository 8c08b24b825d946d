"""The index's Redis half: its sender, its key schema, and the Lua scripts of lua/ (and NOSCRIPT)."""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from typing import Any, Literal, TypeVar

import numpy as np

from ..transport import (
    READ,
    SEND,
    Command,
    Exchange,
    ScriptMissing,
    Sender,
    Steps,
    drive,
    off_greenlet,
    raise_first_error,
    translate_error,
)
from ..transport.cluster import bucket_slots
from ..transport.wire import SlotCommands
from .keys import KeySchema

__all__ = [
    "BAND_DROP",
    "BAND_MEMBER",
    "BULK_BAND",
    "BULK_COMMIT",
    "BULK_FP",
    "BULK_IDS",
    "BULK_SKETCH",
    "CREATE_META",
    "FP_IDS",
    "ID_CAS",
    "LOCK",
    "MAP_SIZES",
    "PART",
    "PIN_META",
    "SCRIPTS",
    "UNLOCK",
    "VERIFY_FIX",
    "WRITE",
    "KeyKind",
    "Script",
    "Store",
    "drop_keys",
    "hash_pairs",
    "in_parts",
    "map_sizes",
    "parts_of",
    "round_trip",
    "run_calls",
    "with_scripts",
]

T = TypeVar("T")

#: The kinds of key an index has, as `Store.scan` finds them.
KeyKind = Literal["all", "id", "fp", "band", "windows"]

_SCAN_COUNT = 1000
#: Documents per script call of a large batch of adds sent as parts.
PART = 250

# Loads of the scripts for the calls of one read that met NOSCRIPT (a failover may come between a load
# and the call).
_LOADS = 2


#: Every script, as made (lua/netstrings.lua and lua/bands.lua are only included in others).
SCRIPTS: list[Script] = []


class Script:
    """A Lua script of lua/, called with EVALSHA; a line ``--! include NAME`` is replaced by lua/NAME.lua."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = _included(_read(name))
        self.sha = hashlib.sha1(self.source).hexdigest().encode()
        SCRIPTS.append(self)

    def command(self, keys: list[bytes], args: list[bytes | int]) -> Command:
        return [b"EVALSHA", self.sha, len(keys), *keys, *args]


_INCLUDE = re.compile(rb"^--! include (\w+)$", re.MULTILINE)


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath(f"lua/{name}.lua").read_bytes()


def _included(source: bytes) -> bytes:
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
MAP_SIZES = Script("map_sizes")
CREATE_META = Script("create_meta")
PIN_META = Script("pin_meta")
LOCK = Script("lock")
UNLOCK = Script("unlock")
VERIFY_FIX = Script("verify_fix")


def with_scripts(
    sender: Sender,
    talk: Callable[[Exchange], T],
    scripts: Sequence[Script] = SCRIPTS,
    *,
    durable: bool = False,
) -> T:
    """Run a conversation that calls scripts: the one place NOSCRIPT is handled (the scripts loaded, only
    the refused calls sent again).

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

    Loaded on the conversation's own exchange (a shared pool may have no other connection to spare).
    """

    __slots__ = ("_ahead", "_exchange", "_read", "_scripts", "_sender", "_sent")

    def __init__(self, exchange: Exchange, sender: Sender, scripts: Sequence[Script]) -> None:
        self._exchange, self._sender, self._scripts = exchange, sender, scripts
        # The batches whose replies are not all read, how many of the first one's are, and the replies
        # read ahead of the conversation (those due when a call was sent again).
        self._sent: deque[Sequence[Command]] = deque()
        self._read = 0
        self._ahead: list[Any] = []

    def send(self, *batches: Sequence[Command]) -> None:
        self._sent.extend(batch for batch in batches if len(batch))
        self._exchange.send(*batches)

    def read(self, count: int) -> list[Any]:
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
        if self._ahead:
            return None  # read with `read`
        raw = self._exchange.read_sets(count)
        if raw is not None:
            self._taken(count)
        return raw

    def _again(self, calls: list[Command]) -> list[Any]:
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


class Store:
    """One index's keys on one server or cluster (every call raises RedisUnavailable if unreachable)."""

    def __init__(self, sender: Sender, keys: KeySchema) -> None:
        self.sender = sender
        self.keys = keys
        #: The fingerprint map also holds sketches (a verified mode pinned on an index opened plain).
        self.sketched = False

    @property
    def cluster(self) -> bool:
        """Whether the keys live on a Redis Cluster."""
        return self.sender.cluster

    def execute(
        self, commands: Sequence[Command], *, raise_on_error: bool = True, durable: bool = False
    ) -> list[Any]:
        return self.sender.execute(commands, raise_on_error=raise_on_error, durable=durable)

    def run(self, steps: Callable[[], Steps[T]], *, durable: bool = False) -> T:
        """Run steps (`transport.Steps`, made again for each new start) that may call the index's scripts.

        Raises:
            SimhashRedisError: an error reply.
        """
        return with_scripts(self.sender, lambda exchange: drive(steps(), exchange), durable=durable)

    def run_script(self, script: Script, calls: list[Command], *, durable: bool = False) -> list[Any]:
        return run_calls(self.sender, calls, (script,), durable=durable)

    def scan(self, kind: KeyKind = "all") -> Iterator[list[bytes]]:
        """The index's keys of one kind (`KeySchema.pattern_of`), in batches, each once."""
        return self._scan(self.keys.pattern_of(kind), True)

    def scan_table(self, table: int) -> Iterator[list[bytes]]:
        """The bucket keys of one table, in batches; a key may come twice (too many to remember)."""
        return self._scan(f"{self.keys.base}:t{table}:*", False)

    def hashes(self, keys: list[bytes], *, raise_on_error: bool = True) -> list[Any]:
        """The (field, value) pairs of each hash, in one round trip (error replies in place if asked)."""
        replies = self.execute([(b"HGETALL", key) for key in keys], raise_on_error=raise_on_error)
        return [reply if isinstance(reply, Exception) else hash_pairs(reply) for reply in replies]

    def counts(self, *, sketched: bool = False) -> tuple[int, int]:
        """The number of documents and of distinct fingerprints stored (`sketched`: a verified index)."""
        if not self.cluster:
            docs, fps = self.execute([(b"HMGET", self.keys.counts, b"docs", b"fingerprints")])[0]
            return int(docs or 0), int(fps or 0)
        return map_sizes(self.sender, [self.keys], sketched)[0]

    def set_counts(self, docs: int, fingerprints: int) -> None:
        self.execute([(b"HSET", self.keys.counts, b"docs", docs, b"fingerprints", fingerprints)])

    def recount(
        self, id_keys: list[bytes], fp_keys: list[bytes], *, sketched: bool, repair: bool
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        """On a standalone server: the (documents, fingerprints) these map buckets hold and what the counts
        hash says, in one atomic step that blocks the server; with `repair`, the hash set to the former."""
        args: list[bytes | int] = [len(id_keys), b"1" if sketched else b"0", b"1" if repair else b"0"]
        call = MAP_SIZES.command([*id_keys, *fp_keys, self.keys.counts], args)
        docs, fps, said_docs, said_fps = self.run_script(MAP_SIZES, [call])[0]
        return (docs, fps), (said_docs, said_fps)

    def used_memory(self) -> int | None:
        """The server's used_memory, or None on a cluster (whose nodes each have their own)."""
        if self.cluster:
            return None
        info = self.execute([(b"INFO", b"memory")])[0]
        for line in bytes(info).splitlines():
            if line.startswith(b"used_memory:"):
                return int(line.partition(b":")[2])
        return None

    def drop(self) -> int:
        return drop_keys(self.sender, self.keys.prefix, self.keys.name)

    def _scan(self, pattern: str, once: bool) -> Iterator[list[bytes]]:
        seen: set[bytes] = set()
        for batch in self.sender.scan(pattern, _SCAN_COUNT):
            if once:
                batch = [key for key in batch if key not in seen]
                seen.update(batch)
            if batch:
                yield batch


def drop_keys(sender: Sender, prefix: str, name: str) -> int:
    """Delete every key under an index's name, the meta last; the number deleted (rerun to finish)."""
    meta, deleted = KeySchema.meta_key(prefix, name), 0
    # SCAN's keys are not remembered: a key unlinked twice costs nothing. One key per command: no
    # command spans hash slots.
    for keys in sender.scan(f"{prefix}:{name}:*", 10 * _SCAN_COUNT):
        deleted += sum(sender.execute([(b"UNLINK", key) for key in keys if key != meta]))
    return deleted + int(sender.execute([(b"UNLINK", meta)])[0])


def map_sizes(sender: Sender, schemas: Sequence[KeySchema], sketched: bool) -> list[tuple[int, int]]:
    """The (documents, fingerprints) in the maps of each key schema on a cluster, in one round trip
    (`sketched`: the fingerprint maps also hold sketches, not counted)."""
    # Packed off the asyncio API's greenlet: numpy would crash the process there (`off_greenlet`).
    calls = [off_greenlet(map_size_calls, schema, sketched) for schema in schemas]
    every = SlotCommands([p for c in calls for p in c.packs], [slot for c in calls for slot in c.slots])
    sizes = run_calls(sender, every, (MAP_SIZES,))
    found, low = [], 0
    for c in calls:
        share, low = sizes[low : low + len(c)], low + len(c)
        found.append((sum(docs for docs, _ in share), sum(fps for _, fps in share)))
    return found


def map_size_calls(keys: KeySchema, sketched: bool) -> SlotCommands:
    """`MAP_SIZES` calls for every bucket of an index's maps, one per hash slot, packed in numpy passes."""
    count, prefixes = keys.id_buckets, (keys.id_form.prefix, keys.fp_form.prefix)
    # Buckets sorted by slot, id-map buckets before fingerprint-map ones within a slot.
    slots = np.concatenate([bucket_slots(prefix, count) for prefix in prefixes])
    order = np.argsort(slots, kind="stable")  # a radix sort of uint16
    numbers, forms = order % count, order // count
    # Each key as a bulk string: "$<length>\r\n" + prefix (a head per form and digit count) + digits.
    places = len(str(max(count - 1, 0)))
    digits = np.ones(len(order), dtype=np.int64)
    for place in range(1, places):
        digits += numbers >= 10**place
    heads = [
        b"$%d\r\n%s" % (len(prefixes[f]) + d, prefixes[f]) for f in range(2) for d in range(1, places + 1)
    ]
    width = max(map(len, heads))
    table = np.frombuffer(b"".join(head.ljust(width, b"\0") for head in heads), dtype=np.uint8)
    which = forms * places + digits - 1
    spans = np.array(list(map(len, heads)), dtype=np.int64)[which]
    column = np.arange(places)
    powers = 10 ** np.arange(places, dtype=np.int64)
    text = (numbers[:, None] // powers[(digits[:, None] - 1 - column).clip(0)] % 10 + ord("0")).astype(
        np.uint8
    )
    crlf = np.frombuffer(_CRLF, dtype=np.uint8)
    whole = np.concatenate(
        [table.reshape(len(heads), width)[which], text, np.broadcast_to(crlf, (len(order), 2))], 1
    )
    mask = np.concatenate(
        [np.arange(width) < spans[:, None], column < digits[:, None], np.ones((len(order), 2), dtype=bool)], 1
    )
    packed = whole[mask].tobytes()
    ends = np.cumsum(spans + digits + 2).tolist()
    starts = np.concatenate([[0], np.flatnonzero(np.diff(slots[order])) + 1])
    ids = np.add.reduceat((forms == 0).astype(np.int64), starts).tolist()
    bounds = [*starts.tolist(), len(order)]
    call = b"*%%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$%%d\r\n%%d\r\n" % MAP_SIZES.sha
    flag = b"$1\r\n%d\r\n" % sketched
    # Few distinct key counts a slot: each call's head and tail made once.
    openings = {n: call % (n + 5, len(str(n)), n) for n in set(np.diff(bounds).tolist())}
    tails = {n: b"$%d\r\n%d\r\n" % (len(str(n)), n) + flag for n in set(ids)}
    ends.insert(0, 0)
    packs = [
        b"".join([openings[high - low], packed[ends[low] : ends[high]], tails[ids_j]])
        for low, high, ids_j in zip(bounds, bounds[1:], ids, strict=False)
    ]
    return SlotCommands(packs, slots[order][starts].tolist())


_CRLF = b"\r\n"


def hash_pairs(reply: Any) -> list[tuple[bytes, bytes]]:
    """The (field, value) pairs of an HGETALL reply, a map under RESP3 and a flat list under RESP2."""
    if isinstance(reply, dict):
        return list(reply.items())
    return [(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]


def round_trip(commands: list[Command]) -> Steps[list[Any]]:
    if not commands:
        return []
    yield SEND, [commands]
    replies: list[Any] = yield READ, len(commands)
    return replies


def in_parts(
    count: int,
    call: Callable[[int], Command],
    acked: list[Any],
    refused: Callable[[Any], bool] = lambda _: False,
) -> Steps[None]:
    """A round's `count` script calls, one in flight, from the first not in `acked`, each built while the
    server runs the one before; a reply `refused` stops the round."""
    if len(acked) == count or (acked and refused(acked[-1])):
        return
    yield SEND, [[call(len(acked))]]
    while True:
        following = len(acked) + 1
        prepared = call(following) if following < count else None
        acked.append((yield READ, 1)[0])
        if prepared is None or refused(acked[-1]):
            return
        yield SEND, [[prepared]]


def parts_of(docs: Sequence[T], plain: bool) -> list[Sequence[T]]:
    """A round's documents as its script calls': parts of `PART` for 2 x `PART` plain adds."""
    part = PART  # read at each call: tests make it small
    if plain and len(docs) >= 2 * part:
        return [docs[i : i + part] for i in range(0, len(docs), part)]
    return [docs]
