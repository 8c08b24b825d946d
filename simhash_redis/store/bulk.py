"""The grouped bulk path: a window of documents written with one variadic command per key and step.

Per-command overhead (about 1.5 us of server time) dominates a bulk load, so grouping pays only when
many entries share a key: with 2^16 keys per table and 2^17 map buckets, a window of a million documents
puts 8-15 entries on each key, a window of ten thousand about one. The steps of a window, each finished
(every reply read and checked) before the next starts:

1. read the id map: one HMGET per id bucket with all the window's ids in it;
2. ids stored with another fingerprint (replacements), and every pair of an id named twice in the window,
   go through the atomic path (`Writes.apply`, a batch at a time: the last pair wins);
3. tables: one SADD per table key with all the window's members for it, table 0's keys first;
4. id map: one HSET per id bucket: the commit point of `get`;
5. fingerprint map: lua/bulk_fp.lua appends each id to its fingerprint's netstring list unless it is
   there, atomically per bucket (on a standalone server one call covers a run of buckets, on a cluster
   one bucket): the commit point of `near` and `add_if_new` (readers skip a table member without ids),
   so no reader ever sees a document half-written; then one SMISMEMBER per table-0 key puts back into
   its tables any fingerprint an atomic writer removed meanwhile (`_check_tables`);
6. counts: set from the data by `recount` at the end of a load, never incremented.

Every step is idempotent, so a chunk resent after a lost reply changes nothing more, and a load cut
short anywhere (a crash, RedisOutOfMemory) is completed by running it again. On a standalone server
each step's commands are packed once and streamed on one connection, two writes in flight, so the
client builds the next while the server runs the previous; on a cluster each chunk of commands goes to
every node at once (`ClusterTransport` groups them per node), writes followed by WAIT for a replica.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..codec import decode_fp
from ..results import Outcome
from .chunks import BULK, Piece, send_step
from .keys import KeySchema
from .layout import Layout
from .scripts import Script
from .store import Store
from .writes import Write, Writes

__all__ = ["BulkWrites"]

#: Fingerprints per call of lua/bulk_fp.lua on a standalone server.
ATTACH_PAIRS = 512


class BulkWrites:
    """Writes windows of documents with one variadic command per key and step (see the module docstring).

    Args:
        store: the index's keys and sender.
        layout: the index's table layout.
        writes: the index's atomic write path, for replacements and ids named twice in a window.
        batch_size: documents per call of the atomic path.
    """

    _ATTACH = Script("bulk_fp")
    _RECOUNT = Script("recount")

    def __init__(self, store: Store, layout: Layout, writes: Writes, batch_size: int = 1000) -> None:
        self.store, self.keys, self.layout, self.writes = store, store.keys, layout, writes
        self.f = layout.f
        self.batch_size = batch_size
        self._packed = not store.cluster
        self._formats = [self.keys.table_format(t) for t in range(len(layout.tables))]

    # -- a window --------------------------------------------------------------------------------------

    def write(self, ids: list[bytes], fps: Sequence[int] | npt.NDArray[Any]) -> list[Outcome]:
        """Write one window of documents, in the steps of the module docstring.

        Args:
            ids: the encoded ids (`encode_id`).
            fps: their fingerprints, checked: ints in [0, 2**f), or a uint64 array for f <= 64.

        Returns:
            Each pair's outcome: ADDED (a new id), UNCHANGED (the id had this fingerprint already; its
            entries are written again all the same, which completes an interrupted load), or the atomic
            path's outcome (REPLACED, ...) for replacements and ids named twice.

        Raises:
            RedisUnavailable: (RedisOutOfMemory among others) the window is partly written, never
                half-visible to near(); writing it again completes it.
            WriteContention: the atomic path's documents kept changing under concurrent writers.
        """
        n = len(ids)
        if not n:
            return []
        window = _Window(ids, fps, self.layout, self.keys, self._packed)
        stored = window.stored
        twice = _named_twice(ids)
        if twice:
            single = np.array([i for i, doc_id in enumerate(ids) if doc_id not in twice], dtype=np.intp)
        else:
            single = np.arange(n, dtype=np.intp)
        current = self._read(window, single)  # step 1
        outcomes: list[Outcome | None] = [Outcome.ADDED] * n
        replaced: list[int] = []
        chosen = single
        if current is not None:  # some ids are stored already
            grouped = np.zeros(n, dtype=bool)
            for pos, cur in zip(single.tolist(), current, strict=True):
                if cur is None or cur == stored[pos]:
                    outcomes[pos] = Outcome.ADDED if cur is None else Outcome.UNCHANGED
                    grouped[pos] = True
                else:
                    replaced.append(pos)
            chosen = np.flatnonzero(grouped)
        if twice:  # every pair of an id named twice goes the atomic way, in the window's order
            replaced = sorted(replaced + [i for i, doc_id in enumerate(ids) if doc_id in twice])
        atomic = replaced
        for start in range(0, len(atomic), self.batch_size):  # step 2
            part = atomic[start : start + self.batch_size]
            ops: list[Write] = [(ids[p], stored[p], None) for p in part]
            for pos, outcome in zip(part, self.writes.apply(ops), strict=True):
                outcomes[pos] = outcome
        if len(chosen):
            first = self._tables(window, chosen)  # step 3
            self._id_map(window, chosen)  # step 4
            self._fp_map(window, chosen)  # step 5
            self._check_tables(window, first)
        return outcomes  # type: ignore[return-value]

    def recount(self) -> tuple[int, int] | None:
        """Set the counts hash to the data's sizes, atomically (a standalone server; None on a cluster,
        whose counts are summed from the data on demand).

        Returns:
            (documents, fingerprints) as stored.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        if self.store.cluster:
            return None
        keys, buckets = self.keys, self.keys.id_buckets
        names = [keys.counts]
        names += [keys.id_bucket_key(b) for b in range(buckets)]
        names += [keys.fp_bucket_key(b) for b in range(buckets)]
        docs, fps = self.store.run_script(self._RECOUNT, [self._RECOUNT.command(names, [buckets])])[0]
        return int(docs), int(fps)

    # -- the steps -------------------------------------------------------------------------------------

    def _read(self, window: _Window, single: npt.NDArray[Any]) -> list[bytes | None] | None:
        """Step 1: the stored fingerprint of each id at `single`, one HMGET per id bucket; None when none
        of them is stored (a new window)."""
        groups = _group(window.id_buckets, single)
        units = window.id_units()[groups.rows].tolist()
        replies = self._send(self._commands((b"HMGET",), groups, units, 1), keep=True, durable=False)
        flat = list(itertools.chain.from_iterable(replies))
        if flat.count(None) == len(flat):
            return None
        current = np.empty(len(window.ids), dtype=object)
        current[groups.rows] = np.fromiter(flat, dtype=object, count=len(flat))
        return current[single].tolist()  # type: ignore[no-any-return]

    def _tables(self, window: _Window, chosen: npt.NDArray[Any]) -> tuple[_Groups, list[Any]]:
        """Step 3: one SADD per table key, table by table, table 0's keys first (see `_check_tables`).
        Returns table 0's groups and members, for that check."""
        groups = [
            _group(column, chosen, fmt) for column, fmt in zip(window.values, self._formats, strict=True)
        ]
        first = window.fp_units[groups[0].rows].tolist()

        def commands() -> Iterator[Piece]:
            for t, table in enumerate(groups):
                members = first if t == 0 else window.fp_units[table.rows].tolist()
                yield from self._commands((b"SADD",), table, members, 1)

        self._send(commands(), keep=False, durable=True)
        return groups[0], first

    def _id_map(self, window: _Window, chosen: npt.NDArray[Any]) -> None:
        """Step 4: one HSET id -> fingerprint per id bucket."""
        groups = _group(window.id_buckets, chosen)
        units = window.pair_units()[groups.rows].ravel().tolist()
        self._send(self._commands((b"HSET",), groups, units, 2), keep=False, durable=True)

    def _fp_map(self, window: _Window, chosen: npt.NDArray[Any]) -> None:
        """Step 5: each id into its fingerprint's id list, by lua/bulk_fp.lua: one call per bucket on a
        cluster, per run of buckets of about ATTACH_PAIRS fingerprints on a standalone server (a call costs
        the server about as much as a few dozen entries)."""
        rows = window.attachments(chosen)
        groups = _group(window.fp_buckets, rows, fp_map=True)
        fields = window.fp_units[groups.rows].tolist()
        units = window.set_units()[groups.rows].ravel().tolist()
        script = self._ATTACH
        self.store.sender.broadcast([b"SCRIPT", b"LOAD", script.source])
        self._send(self._attach_calls(groups, fields, units), keep=False, durable=True, script=script)

    def _attach_calls(self, groups: _Groups, fields: list[Any], units: list[Any]) -> Iterator[Piece]:
        """The lua/bulk_fp.lua calls of step 5 (packed or plain, as in `_commands`)."""
        sha, key_of, bounds = self._ATTACH.sha, self.keys.fp_bucket_key, groups.bounds
        if not self._packed:
            for j, value in enumerate(groups.heads):
                start, end = bounds[j], bounds[j + 1]
                call = (
                    b"EVALSHA",
                    sha,
                    b"1",
                    key_of(value),
                    end - start,
                    *fields[start:end],
                    *units[2 * start : 2 * end],
                )
                yield len(call), 1, [call]
            return
        keys: list[bytes] = []
        argv: list[bytes] = []
        pairs = 0
        for j, value in enumerate(groups.heads):
            start, end = bounds[j], bounds[j + 1]
            key, size = key_of(value), b"%d" % (end - start)
            keys.append(BULK % (len(key), key))
            argv.append(BULK % (len(size), size))
            argv.extend(fields[start:end])
            argv.extend(units[start:end])
            pairs += end - start
            if pairs >= ATTACH_PAIRS or j == len(groups.heads) - 1:
                count, numkeys = 3 + 2 * len(keys) + 3 * pairs, b"%d" % len(keys)
                head = b"*%d\r\n$7\r\nEVALSHA\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
                    count,
                    len(sha),
                    sha,
                    len(numkeys),
                    numkeys,
                )
                yield count, 1, [head, *keys, *argv]
                keys, argv, pairs = [], [], 0

    def _check_tables(self, window: _Window, first: tuple[_Groups, list[Any]]) -> None:
        """After step 5: put back into its tables each fingerprint that is missing from table 0.

        An atomic writer removes a fingerprint from its tables when its last id leaves it: if that
        happened between steps 3 and 5, the fingerprint's entry in the fingerprint map is back (step 5)
        but not its tables. Table 0's members were sent before the others' (and a resent chunk is
        followed by every later one again), so a fingerprint still in table 0 is in every table; and
        once its entry lists the window's id, no writer removes it any more.
        """
        groups, members = first
        replies = self._send(self._commands((b"SMISMEMBER",), groups, members, 1), keep=True, durable=False)
        present = np.fromiter(itertools.chain.from_iterable(replies), dtype=np.int8, count=len(groups.rows))
        missing = {window.stored[p] for p in groups.rows[present == 0].tolist()}
        if missing:
            tables = self.keys.table_builder()
            self.store.execute(
                [(b"SADD", key, raw) for raw in sorted(missing) for key in tables(decode_fp(raw, self.f))],
                durable=True,
            )

    def _commands(
        self, head: tuple[bytes, ...], groups: _Groups, units: list[Any], per: int
    ) -> Iterator[Piece]:
        """For each group, the command `head`, the group's key, then the `per` arguments of each of its
        units: packed (each unit is the RESP form of its arguments), or plain (`units` is the flat list of
        the arguments)."""
        key_of = self._key_builder(groups)
        bounds = groups.bounds
        if not self._packed:
            for j, value in enumerate(groups.heads):
                start, end = bounds[j] * per, bounds[j + 1] * per
                yield len(head) + 1 + end - start, 1, [(*head, key_of(value), *units[start:end])]
            return
        prefix = b"".join([BULK % (len(arg), arg) for arg in head])
        fixed = len(head) + 1
        for j, value in enumerate(groups.heads):
            start, end = bounds[j], bounds[j + 1]
            key = key_of(value)
            count = fixed + (end - start) * per
            piece = units[start:end]
            piece.insert(0, b"*%d\r\n%b$%d\r\n%b\r\n" % (count, prefix, len(key), key))
            yield count, 1, piece

    def _key_builder(self, groups: _Groups) -> Any:
        if groups.fmt is not None:
            return groups.fmt.__mod__
        return self.keys.fp_bucket_key if groups.fp_map else self.keys.id_bucket_key

    # -- sending ---------------------------------------------------------------------------------------

    def _send(
        self, pieces: Iterator[Piece], *, keep: bool, durable: bool, script: Script | None = None
    ) -> list[Any]:
        """Send a step's commands (see `chunks.send_step`); the replies if `keep`."""
        return send_step(self.store, pieces, keep=keep, durable=durable, script=script)


class _Window:
    """One window's documents, in the window's order: stored fingerprints, table key values, buckets, and
    the units its commands carry, as object arrays that each step gathers into its own group order (packed:
    the RESP form of the unit's arguments; plain: the arguments). A unit is built when a step needs it
    and dropped after, to keep a window of a million documents in a few hundred MB."""

    def __init__(
        self,
        ids: list[bytes],
        fps: Sequence[int] | npt.NDArray[Any],
        layout: Layout,
        keys: KeySchema,
        packed: bool,
    ) -> None:
        self.ids, self.packed = ids, packed
        self.values, self.stored = _encode(fps, layout)
        self.fps = np.asarray(fps, dtype=np.uint64) if layout.f <= 64 else None
        self.id_buckets = keys.bucket_numbers(ids)
        self.fp_buckets = keys.bucket_numbers(self.stored)
        # SADD, SMISMEMBER, bulk_fp.lua's fields: the fingerprint.
        self.fp_units = _objects([BULK % (len(raw), raw) for raw in self.stored] if packed else self.stored)
        self._id_units: npt.NDArray[Any] | None = None
        self._lists: dict[
            int, bytes
        ] = {}  # the id lists of fingerprints that several ids of the window share

    def id_units(self) -> npt.NDArray[Any]:
        """HMGET's units: the id (kept for `pair_units`)."""
        if self._id_units is None:
            ids = self.ids
            self._id_units = _objects([BULK % (len(i), i) for i in ids] if self.packed else ids)
        return self._id_units

    def pair_units(self) -> npt.NDArray[Any]:
        """HSET's units: the id and its fingerprint (a row of two arguments, plain)."""
        ids, self._id_units = self.id_units(), None
        if self.packed:
            return _objects([i + s for i, s in zip(ids.tolist(), self.fp_units.tolist(), strict=True)])
        pairs = np.empty((len(ids), 2), dtype=object)
        pairs[:, 0], pairs[:, 1] = ids, self.fp_units
        return pairs

    def set_units(self) -> npt.NDArray[Any]:
        """bulk_fp.lua's units: a fingerprint and the list of the window's ids that have it (after
        `attachments`)."""
        lists = [b"%d:%b" % (len(doc_id), doc_id) for doc_id in self.ids]  # as _netstring
        for position, joined in self._lists.items():
            lists[position] = joined
        if self.packed:
            return _objects(
                [
                    b"%b$%d\r\n%b\r\n" % (s, len(one), one)
                    for s, one in zip(self.fp_units.tolist(), lists, strict=True)
                ]
            )
        units = np.empty((len(lists), 2), dtype=object)
        units[:, 0], units[:, 1] = self.fp_units, lists
        return units

    def attachments(self, chosen: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The first of the positions `chosen` of each fingerprint; where several share one, `set_units`
        gives it the list of all of their ids, in the window's order."""
        if self.fps is not None:
            ordered = np.sort(self.fps[chosen])
            if not len(ordered) or not (ordered[1:] == ordered[:-1]).any():
                return chosen
        elif len({self.stored[p] for p in chosen.tolist()}) == len(chosen):
            return chosen
        first: dict[bytes, int] = {}
        lists: dict[int, list[bytes]] = {}
        keep = []
        for p in chosen.tolist():
            q = first.setdefault(self.stored[p], p)
            if q == p:
                keep.append(p)
            else:
                lists.setdefault(q, [_netstring(self.ids[q])]).append(_netstring(self.ids[p]))
        self._lists = {q: b"".join(parts) for q, parts in lists.items()}
        return np.array(keep, dtype=np.intp)


def _objects(items: list[Any]) -> npt.NDArray[Any]:
    """A list as a numpy array of objects (gathered by index arrays in one call)."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _encode(
    fps: Sequence[int] | npt.NDArray[Any], layout: Layout
) -> tuple[list[npt.NDArray[Any]], list[bytes]]:
    """Each table's key value per document (narrow uint arrays), and each fingerprint's stored form."""
    if layout.f > 64:
        ints = [int(fp) for fp in fps]
        stored = [b"%d" % fp for fp in ints]
        columns = np.array([layout.keys_of(fp) for fp in ints], dtype=np.uint64).reshape(len(ints), -1)
        values = [columns[:, t] for t in range(len(layout.tables))]
    else:
        arr = np.asarray(fps, dtype=np.uint64)
        signed = arr.view(np.int64) if layout.f == 64 else arr
        stored = [b"%d" % fp for fp in signed.tolist()]
        values = []
        for table in layout.tables:
            position = sum(layout.blocks[b] for b in table)
            value = np.zeros(len(arr), dtype=np.uint64)
            for b in table:
                position -= layout.blocks[b]
                block = (arr >> np.uint64(layout.offsets[b])) & np.uint64((1 << layout.blocks[b]) - 1)
                value |= block << np.uint64(position)
            values.append(value)
    # Narrow keys sort faster (a radix sort for 16 bits).
    narrow = [np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64 for bits in layout.key_bits]
    return [v.astype(dtype) for v, dtype in zip(values, narrow, strict=True)], stored


class _Groups(NamedTuple):
    """Window positions grouped by key: the positions in group order, where each group starts (and the
    last ends), each group's value, and how a value becomes a key (a table format, or a map bucket)."""

    rows: npt.NDArray[Any]
    bounds: list[int]
    heads: list[int]
    fmt: bytes | None = None
    fp_map: bool = False


def _group(
    column: npt.NDArray[Any], rows: npt.NDArray[Any], fmt: bytes | None = None, fp_map: bool = False
) -> _Groups:
    """The window positions `rows` grouped by their value in `column`, each group in the window's order
    (a stable sort)."""
    values = column[rows]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    bounds = [0, *starts.tolist(), len(ordered)]
    heads = ordered[bounds[:-1]].tolist() if len(ordered) else []
    return _Groups(rows[order], bounds, heads, fmt, fp_map)


def _netstring(doc_id: bytes) -> bytes:
    """An id as an item of a fingerprint's id list."""
    return b"%d:%b" % (len(doc_id), doc_id)


def _named_twice(ids: list[bytes]) -> set[bytes]:
    """The ids named more than once."""
    if len(set(ids)) == len(ids):
        return set()
    return {doc_id for doc_id, times in Counter(ids).items() if times > 1}
