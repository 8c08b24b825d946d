"""The grouped bulk path: a window of documents written with one variadic command per key and step.

The steps, their order and why a reader never sees a half-written document: docs/guarantees.md ("Bulk
loads"). Every step is idempotent, so a load cut short anywhere is completed by running it again.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..codec import decode_fp, encode_sketches, netstring, pack_fps
from ..results import Outcome
from ..transport import Command
from ..transport.greenlet_bridge import on_loop_stack
from .grouped import Column, Groups, attach_calls, commands, group, script_runs, send_step
from .keys import KeySchema
from .layout import Layout
from .store import BULK_BAND, BULK_COMMIT, BULK_FP, BULK_IDS, BULK_SKETCH, Store
from .write_args import SketchedGuard, Write, sketch_in
from .writes import Writes

__all__ = ["BulkWrites"]

#: Fingerprints per call of lua/bulk_fp.lua, and ids per call of lua/bulk_ids.lua, on a standalone server.
ATTACH_PAIRS = 512


class BulkWrites:
    def __init__(self, store: Store, layout: Layout, writes: Writes, batch_size: int = 1000) -> None:
        self.store, self.keys, self.layout, self.writes = store, store.keys, layout, writes
        self.f = layout.f
        self.batch_size = batch_size
        self.verification = writes.verification
        self._packed = not store.cluster
        # Entries per script call: a cluster's calls name one key each.
        self._per_call = ATTACH_PAIRS if self._packed else 1
        self._counts = None if store.cluster else self.keys.counts

    def write(
        self,
        ids: list[bytes],
        fps: Sequence[int] | npt.NDArray[Any],
        sketches: Sequence[bytes] | None = None,
    ) -> list[Outcome]:
        """Write one window of documents (`sketches`: verified mode's, stored form, b"": none); each outcome
        (UNCHANGED: written again all the same, which completes an interrupted load).

        Raises:
            RedisUnavailable: (RedisOutOfMemory among others) the window is partly written, never
                half-visible; writing it again completes it.
            WriteContention: the atomic path's documents kept changing under concurrent writers.
        """
        n = len(ids)
        if (sketches is None) != (self.verification is None):
            raise ValueError("a verified index's bulk writes take sketches, and only they do")
        if sketches is not None and len(sketches) != n:
            raise ValueError(f"{n} ids and {len(sketches)} sketches")
        if not n:
            return []
        window = _Window(ids, fps, self.layout, self.keys)
        twice = set() if len(set(ids)) == n else {i for i, times in Counter(ids).items() if times > 1}
        single = np.arange(n, dtype=np.intp)
        if twice:
            single = np.array([i for i, doc_id in enumerate(ids) if doc_id not in twice], dtype=np.intp)
        current = self._read(window, single)  # step 1
        outcomes: list[Outcome | None] = [Outcome.ADDED] * n
        replaced: list[int] = []
        old_sketches: list[tuple[bytes, bytes]] = []
        chosen = single
        if current is not None:  # some ids are stored already
            grouped, stored = np.zeros(n, dtype=bool), window.stored.raw
            for pos, cur in zip(single.tolist(), current, strict=True):
                if cur is None or cur == stored[pos]:
                    outcomes[pos] = Outcome.ADDED if cur is None else Outcome.UNCHANGED
                    grouped[pos] = True
                else:
                    replaced.append(pos)
            if sketches is not None:  # stored ids given another sketch go the atomic way (step 1b)
                moved, old_sketches = self._new_sketches(
                    window, [p for p in single.tolist() if outcomes[p] is Outcome.UNCHANGED], sketches
                )
                grouped[moved] = False
                replaced += moved
            chosen = np.flatnonzero(grouped)
        if twice:  # every pair of an id named twice goes the atomic way, in the window's order
            replaced = sorted(replaced + [i for i, doc_id in enumerate(ids) if doc_id in twice])
        for start in range(0, len(replaced), self.batch_size):  # step 2
            part = replaced[start : start + self.batch_size]
            ops: list[Write] = [
                (ids[p], window.stored.raw[p], None if sketches is None else SketchedGuard(None, sketches[p]))
                for p in part
            ]
            for pos, outcome in zip(part, self.writes.apply(ops), strict=True):
                outcomes[pos] = outcome
        self._drop(old_sketches)  # the write script reports them only on the call that replaced them
        if len(chosen):
            first = self._tables(window, chosen)  # step 3
            if sketches is not None:
                self._sketches(window, chosen, sketches)  # step 3a
                self._bands(window, chosen, sketches)  # step 3b
            self._id_map(window, chosen)  # step 4
            if sketches is None:
                self._fp_map(window, chosen)  # step 5
            else:
                self._commit(window, chosen, sketches)  # step 5, with the sketches
            self._check_tables(window, first)
        return outcomes  # type: ignore[return-value]

    def _read(self, window: _Window, single: npt.NDArray[Any]) -> list[bytes | None] | None:
        """Step 1: the stored fingerprint of each id at `single`; None when none is."""
        groups = group(window.id_buckets, single, self.keys.id_form)
        # One EXISTS first, on a standalone server: a new index's load reads no id.
        if self._packed:
            keys = [groups.form.key(value) for value in groups.heads.tolist()]
            if not (keys and int(self.store.execute([(b"EXISTS", *keys)])[0])):
                return None
        flat = self._hmget(groups, window.ids)
        if flat.count(None) == len(flat):
            return None
        current = np.empty(len(window.ids.raw), dtype=object)
        current[groups.rows] = np.fromiter(flat, dtype=object, count=len(flat))
        return current[single].tolist()  # type: ignore[no-any-return]

    def _hmget(self, groups: Groups, column: Column) -> list[Any]:
        asked = commands((b"HMGET",), groups, [column], self._packed)
        return list(itertools.chain.from_iterable(send_step(self.store, asked, keep=True, durable=False)))

    def _drop(self, dropped: list[tuple[bytes, bytes]]) -> None:
        if dropped:
            self.writes.drop_bands([(self.keys, fp, sketch) for fp, sketch in dropped])

    def _tables(self, window: _Window, chosen: npt.NDArray[Any]) -> Groups:
        """Step 3: one SADD per table key, table 0's first (`_check_tables`, which gets its groups)."""
        forms = [self.keys.table_form(t) for t in range(len(self.layout.tables))]
        groups = [group(column, chosen, form) for column, form in zip(window.values, forms, strict=True)]

        def steps() -> Iterator[Sequence[Command]]:
            for table in groups:
                yield from commands((b"SADD",), table, [window.stored], self._packed)

        send_step(self.store, steps(), keep=False, durable=True)
        return groups[0]

    def _sketches(self, window: _Window, chosen: npt.NDArray[Any], sketches: Sequence[bytes]) -> None:
        """Step 3a: each id's sketch beside its fingerprint's ids; those it replaced leave their bands."""
        groups = group(window.fp_buckets, chosen, self.keys.fp_form)
        field, stored, ids = self.keys.sketch_field, window.stored.raw, window.ids.raw
        values = _sketch_values(ids, sketches)
        columns = [Column([field(raw) for raw in stored]), window.ids, Column(values)]
        calls = script_runs(BULK_SKETCH.sha, None, groups, columns, self._per_call, self._packed)
        replies = send_step(self.store, calls, keep=True, durable=True)
        self._drop(
            [(bytes(reply[i]), bytes(reply[i + 1])) for reply in replies for i in range(0, len(reply), 2)]
        )

    def _new_sketches(
        self, window: _Window, unchanged: list[int], sketches: Sequence[bytes]
    ) -> tuple[list[int], list[tuple[bytes, bytes]]]:
        """Step 1b: the positions among `unchanged` whose stored sketch is another, and each such
        (fingerprint, stored sketch), whose bands are dropped after the atomic path writes the new one."""
        if not unchanged:
            return [], []
        rows = np.array(unchanged, dtype=np.intp)
        groups = group(window.fp_buckets, rows, self.keys.fp_form)
        flat = self._hmget(groups, Column([self.keys.sketch_field(raw) for raw in window.stored.raw]))
        ids = window.ids.raw
        moved, old = [], []
        stored = window.stored.raw
        for pos, value in zip(groups.rows.tolist(), flat, strict=True):
            had = sketch_in(value, ids[pos])  # malformed: the atomic path writes it anew
            if (had or b"") != sketches[pos]:
                moved.append(pos)
                if had:
                    old.append((stored[pos], had))
        return sorted(moved), old

    def _bands(self, window: _Window, chosen: npt.NDArray[Any], sketches: Sequence[bytes]) -> None:
        """Step 3b: each sketched document's fingerprint into its sketch's band values."""
        mode = self.verification
        if mode is None or not mode.bands:
            return
        sketched = np.fromiter(map(len, sketches), dtype=np.int64, count=len(sketches)) > 0
        rows = chosen[sketched[chosen]]
        if not len(rows):
            return
        numbers, fields, values = self.keys.band_numbers(sketches, mode)
        packed = window.packed(self.f)

        def steps() -> Iterator[Sequence[Command]]:
            for band in range(len(fields)):
                if values is not None and window.fps is not None:
                    firsts, lists = _shared_numbers(values[:, band], rows, window.fps)
                else:
                    firsts, lists = _shared_values(fields[band], rows, packed.raw)
                groups = group(numbers[:, band], firsts, self.keys.band_form(band))
                columns = [Column(fields[band]), packed, Column(lists)]
                yield from script_runs(BULK_BAND.sha, None, groups, columns, self._per_call, self._packed)

        send_step(self.store, steps(), keep=False, durable=True)

    def _id_map(self, window: _Window, chosen: npt.NDArray[Any]) -> None:
        """Step 4: the id map."""
        groups = group(window.id_buckets, chosen, self.keys.id_form)
        pairs = [window.ids, window.stored]
        if self.store.cluster:
            send_step(self.store, commands((b"HSET",), groups, pairs, self._packed), keep=False, durable=True)
            return
        calls = script_runs(BULK_IDS.sha, self.keys.counts, groups, pairs, ATTACH_PAIRS, self._packed)
        send_step(self.store, calls, keep=False, durable=True)

    def _fp_map(self, window: _Window, chosen: npt.NDArray[Any]) -> None:
        """Step 5: each id into its fingerprint's id list, the commit point of `near` (lua/bulk_fp.lua)."""
        rows, joined = window.attachments(chosen)
        groups = group(window.fp_buckets, rows, self.keys.fp_form)
        columns = window.stored, window.ids, joined
        calls = attach_calls(BULK_FP.sha, self._counts, groups, *columns, self._per_call, self._packed)
        send_step(self.store, calls, keep=False, durable=True)

    def _commit(self, window: _Window, chosen: npt.NDArray[Any], sketches: Sequence[bytes]) -> None:
        """Step 5 of a verified window: each id into its fingerprint's id list with its sketch (one a
        concurrent writer deleted since step 3a set again, and its band values put back)."""
        groups = group(window.fp_buckets, chosen, self.keys.fp_form)
        stored, ids = window.stored.raw, window.ids.raw
        values = _sketch_values(ids, sketches)
        fields = Column([self.keys.sketch_field(raw) for raw in stored])
        columns = [window.stored, fields, Column([netstring(doc_id) for doc_id in ids]), Column(values)]
        calls = script_runs(BULK_COMMIT.sha, self._counts, groups, columns, self._per_call, self._packed)
        replies = send_step(self.store, calls, keep=True, durable=True)
        dropped: list[tuple[bytes, bytes]] = []
        again: set[bytes] = set()
        for _, gone, set_ids in replies:
            dropped += [(bytes(gone[i]), bytes(gone[i + 1])) for i in range(0, len(gone), 2)]
            again.update(bytes(doc_id) for doc_id in set_ids)
        if again:
            rows = np.array([p for p in chosen.tolist() if ids[p] in again], dtype=np.intp)
            self._bands(window, rows, sketches)
        self._drop(dropped)

    def _check_tables(self, window: _Window, first: Groups) -> None:
        """After step 5: put back into its tables each fingerprint an atomic writer removed from table 0
        (sent first) between steps 3 and 5; once step 5 lists the window's id, none removes it."""
        asked = commands((b"SMISMEMBER",), first, [window.stored], self._packed)
        replies = send_step(self.store, asked, keep=True, durable=False)
        present = np.fromiter(itertools.chain.from_iterable(replies), dtype=np.int8, count=len(first.rows))
        absent = first.rows[present == 0].tolist()
        if absent:
            stored = window.stored.raw
            missing = {stored[p] for p in absent}
            tables = self.keys.table_builder()
            self.store.execute(
                [(b"SADD", key, raw) for raw in sorted(missing) for key in tables(decode_fp(raw, self.f))],
                durable=True,
            )


class _Window:
    def __init__(
        self, ids: list[bytes], fps: Sequence[int] | npt.NDArray[Any], layout: Layout, keys: KeySchema
    ) -> None:
        self.values = _key_values(fps, layout)
        self.ids, self.stored = Column(ids), Column.of_fingerprints(fps, layout.f)
        self.fps = np.asarray(fps, dtype=np.uint64) if layout.f <= 64 else None
        self.id_buckets = self.ids.buckets(keys)
        self.fp_buckets = keys.fp_bucket_numbers(self.fps if self.fps is not None else fps)

    def packed(self, f: int) -> Column:
        if self.fps is not None:
            data = self.fps.astype("<u8").tobytes()
            return Column([data[i : i + 8] for i in range(0, len(data), 8)])
        return Column([pack_fps([raw], f) for raw in self.stored.raw])

    def attachments(self, chosen: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], dict[int, bytes]]:
        if self.fps is not None:
            ordered = np.sort(self.fps[chosen])
            if not len(ordered) or not (ordered[1:] == ordered[:-1]).any():
                return chosen, {}
        elif len({self.stored.raw[p] for p in chosen.tolist()}) == len(chosen):
            return chosen, {}
        first: dict[bytes, int] = {}
        lists: dict[int, list[bytes]] = {}
        keep = []
        stored, ids = self.stored.raw, self.ids.raw
        for p in chosen.tolist():
            q = first.setdefault(stored[p], p)
            if q == p:
                keep.append(p)
            else:
                lists.setdefault(q, [netstring(ids[q])]).append(netstring(ids[p]))
        return np.array(keep, dtype=np.intp), {q: b"".join(parts) for q, parts in lists.items()}


def _shared_values(
    values: list[bytes], rows: npt.NDArray[Any], packed: list[bytes]
) -> tuple[npt.NDArray[np.intp], list[bytes]]:
    """The first position of each band value in `rows`, and per position b"" or, where several share the
    value, their packed fingerprints, each once."""
    picked = [values[p] for p in rows.tolist()]
    lists = [b""] * len(values)
    if len(set(picked)) == len(picked):
        return rows, lists
    first: dict[bytes, int] = {}
    shared: dict[int, dict[bytes, None]] = {}
    keep = []
    for p, value in zip(rows.tolist(), picked, strict=True):
        q = first.setdefault(value, p)
        if q == p:
            keep.append(p)
        else:
            shared.setdefault(q, {packed[q]: None})[packed[p]] = None
    for q, fps in shared.items():
        lists[q] = b"".join(fps)
    return np.array(keep, dtype=np.intp), lists


@on_loop_stack
def _shared_numbers(
    values: npt.NDArray[np.uint64], rows: npt.NDArray[Any], fps: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.intp], list[bytes]]:
    """`_shared_values` in numpy passes (int band values, fingerprints of 64 bits at most)."""
    lists = [b""] * len(values)
    ours, theirs = values[rows], fps[rows]
    by_value = np.lexsort((rows, ours))
    ordered = ours[by_value]
    if not len(rows) or (ordered[1:] != ordered[:-1]).all():
        return rows, lists
    # Each (value, fingerprint) once, at its first position (exact copies share both), by value, then
    # position: each value's fingerprints are then one run of the packed column.
    pairs = np.lexsort((rows, theirs, ours))
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = (ours[pairs][1:] != ours[pairs][:-1]) | (theirs[pairs][1:] != theirs[pairs][:-1])
    kept = pairs[first]
    kept = kept[np.lexsort((rows[kept], ours[kept]))]
    held = ours[kept]
    starts = np.flatnonzero(np.concatenate(([True], held[1:] != held[:-1])))
    ends = np.append(starts[1:], len(kept))
    packed = theirs[kept].astype("<u8").tobytes()
    firsts = rows[kept[starts]]
    for at, start, end in zip(firsts.tolist(), starts.tolist(), ends.tolist(), strict=True):
        if end - start > 1:
            lists[at] = packed[8 * start : 8 * end]
    return np.asarray(firsts, dtype=np.intp), lists


@on_loop_stack
def _key_values(fps: Sequence[int] | npt.NDArray[Any], layout: Layout) -> list[npt.NDArray[Any]]:
    if layout.f > 64:
        ints = [int(fp) for fp in fps]
        columns = np.array([layout.keys_of(fp) for fp in ints], dtype=np.uint64).reshape(len(ints), -1)
        values = [columns[:, t] for t in range(len(layout.tables))]
    else:
        arr = np.asarray(fps, dtype=np.uint64)
        values = []
        for plan in layout.plans:
            value = np.zeros(len(arr), dtype=np.uint64)
            for shift, mask, position in plan:
                value |= ((arr >> np.uint64(shift)) & np.uint64(mask)) << np.uint64(position)
            values.append(value)
    # Narrow keys sort faster (a radix sort for 16 bits).
    narrow = [np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64 for bits in layout.key_bits]
    return [v.astype(dtype) for v, dtype in zip(values, narrow, strict=True)]


def _sketch_values(ids: list[bytes], sketches: Sequence[bytes]) -> list[bytes]:
    return [encode_sketches([(i, s)]) if s else b"" for i, s in zip(ids, sketches, strict=True)]
