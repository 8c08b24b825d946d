"""The read protocol of an index: one lookup, written once as steps without I/O (`Reads.lookup`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ..codec import decode_ids, decode_sketches, encode_fp, unpack_fps_many
from ..fingerprinting import engine_choice
from ..results import Match
from ..transport import RAW, READ, SEND, Command, Steps, drive
from ..transport.wire import CommandPerKey, PackedCommands, pack_columns
from .candidates import Group, band_hits, grouped_all, hits, matches_of, top_band_hits
from .config import IndexConfig
from .keys import BandColumns, KeySchema
from .store import Store, hash_pairs
from .windows import View, WindowedSets, Windows

__all__ = ["Reads", "reads_bucket_whole"]

T = TypeVar("T")

#: Where a lookup reads band values: (hash, field) pairs of each query, or a batch's byte columns.
Bands = list[list[tuple[bytes, bytes]]] | BandColumns

# Queries checked per slice of a batch's replies while the server answers the rest.
_SLICE = 64


def reads_bucket_whole(id_buckets: int, key_bits: Sequence[int]) -> bool:
    """Whether a single plain lookup reads the query's own map bucket whole (HGETALL) rather than HGET its
    fingerprint: not with fewer map buckets than one table's (each larger than the sets read)."""
    return id_buckets >= 1 << min(key_bits)


class Reads:
    """Lookups of fingerprints in an index's tables (and, with `windows`, in each period's)."""

    #: The band candidates a query reads the ids and sketches of at most (None: all of them).
    band_cap: int | None = None

    def __init__(self, store: Store, name: str, config: IndexConfig, windows: Windows | None = None) -> None:
        self.store, self.name, self.windows = store, name, windows
        self.f, self.tables = config.f, len(config.layout.tables)
        # Not with sketches in the map (they would come with every hit's ids).
        self.whole_buckets = config.verification is None and reads_bucket_whole(
            config.id_buckets, config.layout.key_bits
        )
        self._table_keys: Callable[[int], list[bytes]] = store.keys.table_builder()
        fp_bucket = store.keys.fp_bucket
        self._fp_keys: Callable[[bytes], list[bytes]] = lambda raw: [fp_bucket(raw)]
        # The first write of a single lookup reading its bucket whole, in RESP with its keys left as %s
        # (each table's keys are of one width): packing it costs one format, not a join per command.
        widths = [len(key) for key in self._table_keys(0)]
        parts = [b"*2\r\n$8\r\nSMEMBERS\r\n$%d\r\n" % width + b"%s\r\n" for width in widths]
        self._whole_first = b"".join(parts) + b"*2\r\n$7\r\nHGETALL\r\n$%d\r\n%s\r\n"

    def near(
        self, fps: list[int], k: int, sketches: dict[str, bytes] | None = None, bands: Bands | None = None
    ) -> list[list[Match]]:
        """The stored documents within distance k of each fingerprint, in one conversation.

        Args:
            sketches: filled with the stored sketch of each match that has one (verified mode).
            bands: each fingerprint's band places (`KeySchema.band_places`, or a batch's `band_columns`),
                whose every member is a match too, at whatever distance.

        Raises:
            IndexCorrupted: the index holds an entry this library did not write.
        """
        return self._talk(lambda view: self.lookup(fps, k, view, None, sketches, bands)) if fps else []

    def near_groups(
        self,
        fps: list[int],
        k: int,
        sketches: dict[str, bytes] | None = None,
        bands: Bands | None = None,
        members: list[list[list[bytes]]] | None = None,
        tables: list[list[bytes]] | None = None,
    ) -> list[list[Group]]:
        """`near`, each fingerprint's matches as groups (`candidates.Group`), one per stored fingerprint.

        Args:
            members: filled with the members read from each fingerprint's table sets.
            tables: each fingerprint's table keys, where the caller has built them (not with periods).
        """
        if not fps:
            return []
        return grouped_all(
            *self._talk(lambda view: self._lookup(fps, k, view, members, sketches, bands, tables))
        )

    def near_and_members(
        self,
        fps: list[int],
        k: int,
        sketches: dict[str, bytes] | None = None,
        bands: list[list[tuple[bytes, bytes]]] | None = None,
        tables: list[list[bytes]] | None = None,
    ) -> tuple[list[list[list[bytes]]], list[list[Group]]]:
        """`near_groups`, and the members read from each fingerprint's sets (add-if-new's guard)."""
        members: list[list[list[bytes]]] = []
        return members, self.near_groups(fps, k, sketches, bands, members, tables)

    def _talk(self, steps: Callable[[View | None], Steps[T]]) -> T:
        view = None if self.windows is None else self.windows.view()
        return self.store.sender.converse(lambda exchange: drive(steps(view), exchange))

    def stored(self, raw_ids: list[bytes]) -> list[bytes | None]:
        """The stored fingerprint of each encoded id (None where absent), in one round trip."""
        if self.windows is None:
            return self.store.execute([(b"HGET", self.store.keys.id_bucket(raw), raw) for raw in raw_ids])
        # The newest period that has the id: the write script moves a rewritten id there.
        return [value or None for _, value in self.windows.held(raw_ids)]

    def _bounded(
        self,
        fps: list[int],
        found: list[dict[bytes, tuple[int, int]]],
        values: list[Any],
        per: int,
        periods: int,
    ) -> dict[int, dict[bytes, tuple[int, int]]]:
        """The band candidates kept of each query with more than `band_cap`, by position."""
        cap = self.band_cap
        # Members counted with repeats: at most cap of them cannot be more than cap candidates (the
        # common case, decided without numpy's fixed costs).
        if cap is None or sum(len(value) for value in values if value) <= 8 * cap:
            return {}
        sizes = np.fromiter(
            (len(value) if value else 0 for value in values), dtype=np.int64, count=len(values)
        )
        heavy = {}
        for q in np.flatnonzero(sizes.reshape(len(fps), per).sum(axis=1) > 8 * cap).tolist():
            mine = values[q * per : (q + 1) * per]
            kept = top_band_hits(found[q], fps[q], mine, cap, self.f, per // periods)
            if kept is not None:
                heavy[q] = kept
        return heavy

    def lookup(
        self,
        fps: list[int],
        k: int,
        view: View | None = None,
        members: list[list[list[bytes]]] | None = None,
        sketches: dict[str, bytes] | None = None,
        bands: Bands | None = None,
        built: list[list[bytes]] | None = None,
    ) -> Steps[list[list[Match]]]:
        """The lookup of a batch as steps (`transport.Steps`): `near`'s matches, without I/O.

        Args:
            fps: the fingerprints (at least one).
            view: the periods read, in an index with a retention window (as more tables).
            members, sketches, bands: as `near_groups`; built: its tables.

        Raises:
            ValueError: a stored entry this library did not write, or band tables of unequal counts.
        """
        per_query, ids_of, _ = yield from self._lookup(fps, k, view, members, sketches, bands, built)
        return [matches_of(hit, ids_of) for hit in per_query]

    def _lookup(
        self,
        fps: list[int],
        k: int,
        view: View | None,
        members: list[list[list[bytes]]] | None,
        sketches: dict[str, bytes] | None,
        bands: Bands | None,
        built: list[list[bytes]] | None,
    ) -> Steps[tuple[list[dict[bytes, tuple[int, int]]], dict[bytes, list[str]], dict[bytes, bytes]]]:
        """`lookup`'s candidates, the ids of each and their one sketch: where its commands are decided
        (docs/architecture.md, "The path of a `near`")."""
        # A conversation run again after a lost connection starts afresh.
        if members is not None:
            members.clear()
        if sketches is not None:
            sketches.clear()
        keys = self.store.keys
        windows: tuple[int, ...] = ()
        fp_keys: Callable[[bytes], list[bytes]]
        if view is None:
            table_keys, fp_keys = self._table_keys, self._fp_keys
        else:
            windows, table_keys, fp_keys = view.windows, view.table_keys, view.fp_keys
        per_map = len(windows) or 1
        tables = self.tables * per_map
        single = len(fps) == 1
        whole = single and sketches is None and self.whole_buckets and not self.store.sketched
        exact = encode_fp(fps[0], self.f) if single and not whole else None
        field = keys.sketch_field
        first: list[Sequence[Command]]
        if whole and view is None:
            own = keys.fp_bucket_of(fps[0])
            first = [PackedCommands(self._whole_first % (*table_keys(fps[0]), len(own), own), tables + 1)]
        elif whole:  # each period's own bucket
            own_keys = fp_keys(encode_fp(fps[0], self.f))
            first = [CommandPerKey(b"SMEMBERS", table_keys(fps[0])), CommandPerKey(b"HGETALL", own_keys)]
        else:
            set_keys: list[bytes] = []
            extend = set_keys.extend
            if built is not None and view is None:
                for keys_of_one in built:
                    extend(keys_of_one)
            else:
                for fp in fps:
                    extend(table_keys(fp))
            first = [CommandPerKey(b"SMEMBERS", set_keys)]
            if exact is not None and sketches is not None:
                first.append([(b"HMGET", key, exact, field(exact)) for key in fp_keys(exact)])
            elif exact is not None:
                first.append(CommandPerKey(b"HGET", fp_keys(exact), exact))
        per_bands = 0
        if view is not None and bands:
            # A query's band places period by period, as its table sets are read.
            if isinstance(bands, BandColumns):
                raise ValueError("an index with a retention window reads band places, not columns")
            in_periods, placed = keys.periods_key_builder(windows), []
            for query in bands:
                spread = [(in_periods(key), value) for key, value in query]
                placed.append([(each[n], value) for n in range(per_map) for each, value in spread])
            bands = placed
        if isinstance(bands, BandColumns):
            per_bands = bands.per
            if len(bands.keys) != len(fps) * per_bands:
                raise ValueError("every query needs as many band tables")
            columns = [(bands.keys, bands.key_lengths), (bands.fields, None)]
            first.append(PackedCommands(pack_columns(b"HGET", columns), len(bands.keys)))
        elif bands:
            per_bands = len(bands[0])
            if any(len(query) != per_bands for query in bands):
                raise ValueError("every query needs as many band tables")  # replies are read in strides
            if per_bands:
                hget = b"*3\r\n$4\r\nHGET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                packed = [
                    hget % (len(band), band, len(value), value) for query in bands for band, value in query
                ]
                # Packed here: the generic packer's cost per command was a third of a batch's time.
                first.append(PackedCommands(b"".join(packed), len(packed)))
        yield SEND, first
        raw = RAW if engine_choice.native is not None else READ
        sets_read = raw if members is None else READ
        step = _SLICE if len(fps) > 2 * _SLICE else len(fps)
        per_query: list[dict[bytes, tuple[int, int]]] = []
        asked: dict[bytes, None] = {}
        ids_of: dict[bytes, list[str]] = {}
        # The one sketch of every id of a fingerprint, where its reply had it so (verified mode).
        sketch_of: dict[bytes, bytes] = {}
        for start in range(0, len(fps), step):
            chunk = fps[start : start + step]
            replies = yield sets_read, len(chunk) * tables
            if members is not None:
                sets = [replies[q * tables : (q + 1) * tables] for q in range(len(chunk))]
                members.extend(sets if view is None else [WindowedSets(one, windows) for one in sets])
            found = hits(chunk, replies, tables, k, self.f)
            per_query.extend(found)
            # A single query's bucket (or exact copy's ids) is read before any id is asked for, so that
            # none is asked for twice.
            if whole:
                buckets = yield (raw if per_map == 1 else READ), per_map
                if found[0] and per_map == 1:
                    ids_of.update(_bucket_ids(found[0], fps[0], keys, buckets))
                elif found[0]:
                    by_period = [_bucket_ids(found[0], fps[0], keys, [one]) for one in buckets]
                    for stored in by_period[0]:
                        ids_of[stored] = _merged([period[stored] for period in by_period])
            elif exact is not None:
                exact_replies = yield READ, per_map
                if sketches is not None:
                    shared: list[bytes | None] = []
                    ids_of[exact] = _merged(_with_sketches(exact_replies, sketches, shared))
                    _share(sketch_of, exact, shared)
                else:
                    ids_of[exact] = _merged(
                        [None if one is None else decode_ids(one) for one in exact_replies]
                    )
            if per_bands and start + step >= len(fps):
                # Every band member is a candidate, at whatever distance: the filter with k = f.
                values = yield READ, len(fps) * per_bands
                heavy = self._bounded(fps, per_query, values, per_bands, per_map if view is not None else 1)
                light = (
                    [None if n // per_bands in heavy else v for n, v in enumerate(values)]
                    if heavy
                    else values
                )
                extras = band_hits(fps, light, per_bands, self.f) if members is None else None
                if extras is None:
                    # The guard's members need every value; a lookup's, the light queries' only.
                    banded = unpack_fps_many(values if members is not None else light, self.f)
                    if members is not None:
                        for q, query_sets in enumerate(members):
                            query_sets.extend(banded[q * per_bands : (q + 1) * per_bands])
                    if heavy:
                        banded = [[] if n // per_bands in heavy else s for n, s in enumerate(banded)]
                    extras = hits(fps, banded, per_bands, self.f, self.f)
                for q, (mine, extra) in enumerate(zip(per_query, extras, strict=True)):
                    if q in heavy:
                        mine.update(heavy[q])
                        continue
                    for stored, hit in extra.items():
                        mine.setdefault(stored, hit)
                found = per_query
            if not any(found):
                continue
            wanted = [one for hit in found for one in hit if one not in ids_of and one not in asked]
            if wanted:
                wanted = list(dict.fromkeys(wanted))
                asked.update(dict.fromkeys(wanted))
                if sketches is not None:
                    hmget = b"*4\r\n$5\r\nHMGET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                    packed = [
                        hmget % (len(key), key, len(one), one, len(sketch), sketch)
                        for one in wanted
                        for sketch in (field(one),)
                        for key in fp_keys(one)
                    ]
                    yield SEND, [PackedCommands(b"".join(packed), len(packed))]
                elif per_map == 1:
                    yield SEND, [[(b"HGET", key, one) for one in wanted for key in fp_keys(one)]]
                else:  # the periods' maps of one fingerprint: one field, packed with one join
                    yield SEND, [CommandPerKey(b"HGET", fp_keys(one), one) for one in wanted]
        if asked:
            id_replies = yield READ, len(asked) * per_map
            shared = []
            if sketches is not None:  # one HMGET a fingerprint (and period): its ids and their sketches
                lists = _with_sketches(id_replies, sketches, shared)
            else:
                lists = [None if reply is None else decode_ids(reply) for reply in id_replies]
            for n, one in enumerate(asked):  # each period's map of one fingerprint, merged
                parts = lists[n * per_map : (n + 1) * per_map]
                if any(part is not None for part in parts):
                    ids_of[one] = _merged(parts)
                    if shared:
                        _share(sketch_of, one, shared[n * per_map : (n + 1) * per_map])
        return per_query, ids_of, sketch_of


def _bucket_ids(
    found: dict[bytes, tuple[int, int]], fp: int, keys: KeySchema, reply: Any
) -> dict[bytes, list[str]]:
    own, bucket = keys.fp_bucket_of(fp), keys.fp_bucket
    mine = [stored for stored in found if bucket(stored) == own]
    if not mine:
        return {}
    native = engine_choice.native
    if type(reply) is bytes and native is not None:
        values = native.hash_values(reply, mine)
    else:
        listed = reply[0] if isinstance(reply[0], dict) else dict(hash_pairs(reply[0]))
        values = [listed.get(field) for field in mine]
    pairs = zip(mine, values, strict=True)
    return {field: [] if value is None else decode_ids(value) for field, value in pairs}


def _with_sketches(
    replies: list[list[bytes | None]], sketches: dict[str, bytes], shared: list[bytes | None] | None = None
) -> list[list[str] | None]:
    """The ids of each reply of HMGETs of ids and sketches (None where absent); their sketches put in
    `sketches`, and in `shared` each reply's one sketch of all its ids (None where not one)."""
    out: list[list[str] | None] = []
    one_sketch: bytes | None
    for ids, stored in replies:
        one_sketch = None
        if ids is None:
            out.append(None)
        else:
            listed = _one_id(ids) or decode_ids(ids)
            out.append(listed)
            # The common value, one sketch for exactly the ids listed, read without parsing it.
            start, end = _first_netstring(stored) if stored is not None else (0, 0)
            if stored is not None and end > 0 and stored[end:] == b"%d:%s" % (len(ids), ids):
                one_sketch = stored[start:end]
                sketches.update(dict.fromkeys(listed, one_sketch))
            elif stored is not None:
                known = set(listed)
                sketches.update(item for item in decode_sketches(stored).items() if item[0] in known)
        if shared is not None:
            shared.append(one_sketch)
    return out


def _one_id(ids: bytes) -> list[str] | None:
    start, end = _first_netstring(ids)
    return [ids[start:].decode()] if end == len(ids) else None


def _first_netstring(data: bytes) -> tuple[int, int]:
    colon = data.find(b":")
    digits = data[:colon]
    if colon > 0 and digits.isdigit() and (colon == 1 or digits[:1] != b"0"):
        return colon + 1, colon + 1 + int(digits)
    return 0, -1


def _merged(replies: list[list[str] | None]) -> list[str]:
    if len(replies) == 1:
        return replies[0] if replies[0] is not None else []
    return list(dict.fromkeys(doc_id for reply in replies if reply is not None for doc_id in reply))


def _share(sketch_of: dict[bytes, bytes], stored: bytes, shared: list[bytes | None]) -> None:
    present = [one for one in shared if one is not None]
    if present and len(present) == len(shared) and all(one == present[0] for one in present):
        sketch_of[stored] = present[0]
