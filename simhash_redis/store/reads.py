"""The read protocol of an index: table sets read, candidates filtered, ids of the hits fetched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..codec import decode_ids, decode_sketches, encode_fp
from ..errors import IndexCorrupted
from ..results import Match
from ..transport import Command, Exchange, raise_first_error, wire
from .candidates import hits, hits_in_sets, matches_of
from .chunks import Packed
from .config import FP_MAP_BITS, IndexConfig
from .keys import KeySchema
from .replies import hash_pairs
from .store import Store
from .windows import View, WindowedSets, Windows

__all__ = ["Reads"]

# Queries checked per slice of a batch's replies while the server answers the rest (see Reads._talk).
_SLICE = 64


class Reads:
    """Lookups of fingerprints in an index's tables.

    Args:
        store: the index's keys and sender.
        name: the index name, for messages.
        config: the index's configuration.
        windows: the periods of an index with a retention window (each one's tables are read).
    """

    def __init__(self, store: Store, name: str, config: IndexConfig, windows: Windows | None = None) -> None:
        self.store, self.name, self.windows = store, name, windows
        self.f, self.tables = config.f, len(config.layout.tables)
        # A single lookup reads its whole fingerprint-map bucket where the map is placed by bits, unless
        # the map also holds sketches (verified mode: they would come with every hit's ids), or its
        # buckets are fewer than one table's (then each would be larger than the table sets read).
        self.whole_buckets = (
            config.fp_map == FP_MAP_BITS
            and config.verification is None
            and windows is None
            and config.id_buckets >= 2 ** min(config.layout.key_bits)
        )
        self._table_keys: Callable[[int], list[bytes]] = store.keys.table_builder()
        # One lookup's commands in their RESP form, the keys left as %s: SMEMBERS of each table key (each
        # table's keys are of one width), then HGETALL of the fingerprint-map bucket (%d: its length).
        widths = [len(key) for key in self._table_keys(0)]
        parts = [b"*2\r\n$8\r\nSMEMBERS\r\n$%d\r\n" % width + b"%s\r\n" for width in widths]
        self._template = b"".join(parts) + b"*2\r\n$7\r\nHGETALL\r\n$%d\r\n%s\r\n"

    def near(
        self,
        fps: list[int],
        k: int,
        sketches: dict[str, bytes] | None = None,
        bands: list[list[bytes]] | None = None,
    ) -> list[list[Match]]:
        """The stored documents within distance k of each fingerprint, in one conversation.

        Args:
            fps: the fingerprints.
            k: the largest distance.
            sketches: filled with the MinHash sketch of each match that has one (verified mode), asked
                for with its ids: no round trip of its own.
            bands: for each fingerprint, band tables (verified mode) whose every member is a match too,
                at whatever distance: read with the tables.

        Raises:
            IndexCorrupted: the index holds an entry this library did not write.
            RedisUnavailable: the server cannot be reached.
        """
        if self._in_one_pass(fps, sketches, bands):
            fp = fps[0]
            return self._conversation(lambda exchange: [self._one(exchange, fp, k)])
        view = None if self.windows is None else self.windows.view()

        def talk(exchange: Exchange) -> list[list[Match]]:
            if sketches is not None:
                sketches.clear()  # a conversation run again after a lost connection starts afresh
            return self._talk(exchange, fps, k, view=view, sketches=sketches, bands=bands)

        return self._conversation(talk)

    def _in_one_pass(
        self, fps: list[int], sketches: dict[str, bytes] | None, bands: list[list[bytes]] | None
    ) -> bool:
        """Whether a lookup is `_one`'s: a single query reading its bucket whole, on one server (a
        cluster's exchange would parse the packed commands back to route them)."""
        store = self.store
        whole = self.whole_buckets and not store.sketched and not store.cluster
        return len(fps) == 1 and whole and sketches is None and not bands

    def _one(
        self, exchange: Exchange, fp: int, k: int, members: list[list[list[bytes]]] | None = None
    ) -> list[Match]:
        """near() of one fingerprint in an index reading its buckets whole (`whole_buckets`), or
        add_if_new's read of it: `_talk`'s single query, its commands packed from one template.

        Its replies are read raw in one pass where the exchange can (`Exchange.read_sets`). With
        `members` (add_if_new's guard), the table sets' replies are parsed and appended to it, and the
        bucket's is read on its own, raw where it can be.

        Raises:
            SimhashRedisError: an error reply.
            ValueError: a stored entry this library did not write.
        """
        keys, tables = self.store.keys, self.tables
        own = keys.fp_bucket_of(fp)
        exchange.send(Packed(self._template % (*self._table_keys(fp), len(own), own), tables + 1))
        resp = exchange.read_sets(tables + 1) if members is None else None
        if resp is not None:
            sets, bucket = wire.split_replies(resp, tables)
            found = hits_in_sets([fp], sets, tables, k, self.f)[0]
            if not found:
                return []
            ids_of = _bucket_ids([raw for raw in found if keys.fp_bucket(raw) == own], bucket)
        else:
            replies = exchange.read(tables)
            raise_first_error(replies)
            if members is not None:
                members.append(replies)
            found = hits([fp], replies, tables, k, self.f)[0]
            ids_of = _in_bucket(exchange, found, fp, keys)
        others = [raw for raw in found if raw not in ids_of]
        if others:
            exchange.send([(b"HGET", keys.fp_bucket(raw), raw) for raw in others])
            replies = exchange.read(len(others))
            raise_first_error(replies)
            listed_ids = zip(others, replies, strict=True)
            ids_of.update((raw, decode_ids(reply)) for raw, reply in listed_ids if reply is not None)
        return matches_of(found, ids_of)

    def near_and_members(
        self,
        fps: list[int],
        k: int,
        sketches: dict[str, bytes] | None = None,
        bands: list[list[bytes]] | None = None,
    ) -> tuple[list[list[list[bytes]]], list[list[Match]]]:
        """near() that also returns the members read from each fingerprint's table sets (add-if-new's
        guard), in the same conversation: a stored copy is found in one round trip.

        Args:
            fps: the fingerprints.
            k: the largest distance.
            sketches, bands: as `near` (the band tables' members follow the table sets').

        Returns:
            For each fingerprint, the members of each of its table sets (in an index with a retention
            window, `WindowedSets`: those of every live period), and its matches.

        Raises:
            IndexCorrupted: the index holds an entry this library did not write.
            RedisUnavailable: the server cannot be reached.
        """
        if not fps:
            return [], []
        members: list[list[list[bytes]]] = []
        view = None if self.windows is None else self.windows.view()
        one_pass = self._in_one_pass(fps, sketches, bands)

        def talk(exchange: Exchange) -> list[list[Match]]:
            members.clear()  # a conversation run again after a lost connection starts afresh
            if one_pass:
                return [self._one(exchange, fps[0], k, members)]
            if sketches is not None:
                sketches.clear()
            return self._talk(exchange, fps, k, members, view, sketches, bands)

        return members, self._conversation(talk)

    def stored(self, raw_ids: list[bytes]) -> list[bytes | None]:
        """The stored fingerprint of each id (None where absent), in one round trip.

        Args:
            raw_ids: the encoded ids.

        Raises:
            RedisUnavailable: the server cannot be reached.
        """
        if self.windows is None:
            return self.store.execute([(b"HGET", self.store.keys.id_bucket(raw), raw) for raw in raw_ids])
        view = self.windows.view()
        replies = self.store.execute([(b"HGET", key, raw) for raw in raw_ids for key in view.id_keys(raw)])
        per = len(view.windows)
        # The newest period that has the id: the write script moves a rewritten id there.
        return [
            next((r for r in reversed(replies[n * per : (n + 1) * per]) if r is not None), None)
            for n in range(len(raw_ids))
        ]

    def _conversation(self, talk: Callable[[Exchange], list[list[Match]]]) -> list[list[Match]]:
        """Run a read conversation, stored data this code did not write reported as IndexCorrupted."""
        try:
            return self.store.converse(talk)
        except (ValueError, UnicodeDecodeError) as exc:
            raise IndexCorrupted(
                f"index {self.name!r} holds a malformed entry ({exc}); run verify(repair=True) "
                "(simhash-redis verify --repair)"
            ) from None

    def _talk(
        self,
        exchange: Exchange,
        fps: list[int],
        k: int,
        members: list[list[list[bytes]]] | None = None,
        view: View | None = None,
        sketches: dict[str, bytes] | None = None,
        bands: list[list[bytes]] | None = None,
    ) -> list[list[Match]]:
        """near() for a batch on one connection, overlapping the client's work with the server's.

        Every SMEMBERS goes out in one write; the replies are checked a slice of queries at a time
        while the server still answers the rest, and the HGETs for the ids of each slice's matches
        go out as soon as it is checked, so only the last slice's ids cost a round trip of their own.
        A single query also asks, in the first write, for the ids of its own exact fingerprint:
        exact copies are the commonest near-duplicates, and then need no second round trip.
        When `members` is given, each query's table-set replies are appended to it; otherwise they are
        read raw where the exchange can (`Exchange.read_sets`), for the compiled filter.

        In an index with a retention window, the table sets of every period of the `view` are read as
        if they were more tables, and a matching fingerprint's ids are asked of each period's map.
        With `sketches` (verified mode, no window), each matching fingerprint's sketches are asked for
        with its ids (HMGET of both fields), and put there by id. With `bands`, each query's band tables
        go out in the first write too, read after the table sets: their members are matches at any
        distance, whose ids (and sketches) are asked for like the others'.
        """
        windows: tuple[int, ...] = ()
        fp_keys: Callable[[bytes], list[bytes]]
        if view is None:
            table_keys, fp_keys = self.store.keys.table_builder(), _as_list(self.store.keys.fp_bucket)
        else:
            windows, table_keys, fp_keys = view.windows, view.table_keys, view.fp_keys
        per_map = len(windows) or 1
        tables = self.tables * per_map
        keys: list[bytes] = []
        extend = keys.extend
        for fp in fps:
            extend(table_keys(fp))
        exact = encode_fp(fps[0], self.f) if len(fps) == 1 else None
        field = self.store.keys.sketch_field
        first: list[Sequence[Command]] = [wire.Same(b"SMEMBERS", keys)]
        # A fingerprint map placed by bits (format 4) has, in the query's bucket, every stored
        # fingerprint that agrees with it in those bits: read whole, it gives the ids of exact copies
        # and of most near hits, which then need no second round trip.
        whole = exact is not None and sketches is None and self.whole_buckets and not self.store.sketched
        if whole:
            first.append(wire.Same(b"HGETALL", [self.store.keys.fp_bucket_of(fps[0])]))
        elif exact is not None and sketches is not None:
            first.append([(b"HMGET", fp_keys(exact)[0], exact, field(exact))])
        elif exact is not None:
            first.append(wire.Same(b"HGET", fp_keys(exact), exact))
        per_bands = len(bands[0]) if bands else 0
        if bands and any(len(query) != per_bands for query in bands):
            raise ValueError("every query needs as many band tables")  # their replies are read in strides
        if per_bands and bands is not None:
            first.append(wire.Same(b"SMEMBERS", [key for query in bands for key in query]))
        exchange.send(*first)
        step = _SLICE if len(fps) > 2 * _SLICE else len(fps)
        per_query: list[dict[bytes, tuple[int, int]]] = []
        asked: dict[bytes, None] = {}
        ids_of: dict[bytes, list[str]] = {}
        for start in range(0, len(fps), step):
            chunk = fps[start : start + step]
            # Straight from the wire into the compiled filter when only the hits are wanted.
            resp = exchange.read_sets(len(chunk) * tables) if members is None else None
            if resp is not None:
                found = hits_in_sets(chunk, resp, tables, k, self.f)
            else:
                replies = exchange.read(len(chunk) * tables)
                raise_first_error(replies)
                if members is not None and view is None:
                    members.extend(replies[q * tables : (q + 1) * tables] for q in range(len(chunk)))
                elif members is not None:
                    members.extend(
                        WindowedSets(replies[q * tables : (q + 1) * tables], windows)
                        for q in range(len(chunk))
                    )
                found = hits(chunk, replies, tables, k, self.f)
            per_query.extend(found)
            if exact is not None:
                # A single query, so a single slice: its exact-copy HGET (or its whole bucket) was sent
                # right after its SMEMBERS, and is read before any id is asked for, so that none is
                # asked for twice.
                if whole:
                    ids_of.update(_in_bucket(exchange, found[0], fps[0], self.store.keys))
                else:
                    exact_replies = exchange.read(per_map)
                    raise_first_error(exact_replies)
                    if sketches is not None:
                        exact_replies = _with_sketches(exact_replies, sketches)
                    ids_of[exact] = _ids_in(exact_replies)
            if per_bands and start + step >= len(fps):
                # The band tables' replies came after every table set's (and the exact copy's).
                found = self._banded(exchange, fps, per_query, per_bands, members)
            wanted = list(
                dict.fromkeys(raw for one in found for raw in one if raw not in asked and raw not in ids_of)
            )
            if wanted:
                asked.update(dict.fromkeys(wanted))
                if sketches is not None:
                    exchange.send([(b"HMGET", fp_keys(raw)[0], raw, field(raw)) for raw in wanted])
                elif per_map == 1:
                    exchange.send([(b"HGET", key, raw) for raw in wanted for key in fp_keys(raw)])
                else:  # the periods' maps of one fingerprint: one field, packed with one join
                    exchange.send(*[wire.Same(b"HGET", fp_keys(raw), raw) for raw in wanted])
        if asked:
            id_replies = exchange.read(len(asked) * per_map)
            raise_first_error(id_replies)
            if sketches is not None:
                id_replies = _with_sketches(id_replies, sketches)
            if per_map == 1:
                for raw, reply in zip(asked, id_replies, strict=True):
                    if reply is not None:
                        ids_of[raw] = decode_ids(reply)
            else:
                for n, raw in enumerate(asked):
                    ids_of[raw] = _ids_in(id_replies[n * per_map : (n + 1) * per_map])
        return [matches_of(found, ids_of) for found in per_query]

    def _banded(
        self,
        exchange: Exchange,
        fps: list[int],
        per_query: list[dict[bytes, tuple[int, int]]],
        per_bands: int,
        members: list[list[list[bytes]]] | None,
    ) -> list[dict[bytes, tuple[int, int]]]:
        """Read every query's band tables, add their members to its matches, and return them all.

        Raises:
            SimhashRedisError: an error reply.
            ValueError: a member is not a decimal integer.
        """
        replies = exchange.read(len(fps) * per_bands)
        raise_first_error(replies)
        if members is not None:
            for q, sets in enumerate(members):
                sets.extend(replies[q * per_bands : (q + 1) * per_bands])
        # Every member of a band table is a candidate, at whatever distance: the filter with k = f.
        for mine, banded in zip(per_query, hits(fps, replies, per_bands, self.f, self.f), strict=True):
            for raw, hit in banded.items():
                mine.setdefault(raw, hit)
        return per_query


def _in_bucket(
    exchange: Exchange, found: dict[bytes, tuple[int, int]], fp: int, keys: KeySchema
) -> dict[bytes, list[str]]:
    """Read the HGETALL reply of the fingerprint-map bucket of `fp` (an index placing it by bits); the
    ids of each match in that bucket, none for one absent from it (removed since its table sets were
    read).

    The reply is read raw where it can be, and parsed only when a match is in the bucket: a miss then
    costs little more than with the HGET of its exact copy alone.

    Raises:
        SimhashRedisError: an error reply.
        ValueError: an id list is malformed.
    """
    own = keys.fp_bucket_of(fp)
    mine = [raw for raw in found if keys.fp_bucket(raw) == own]
    resp = exchange.read_sets(1)
    if resp is not None:
        return _bucket_ids(mine, resp)
    replies = exchange.read(1)
    raise_first_error(replies)
    return _bucket_ids(mine, None, replies[0])


def _bucket_ids(mine: list[bytes], raw: bytes | None, reply: Any = None) -> dict[bytes, list[str]]:
    """The ids of the matches `mine` from their fingerprint-map bucket's HGETALL reply, in its RESP form
    (`raw`, as `Exchange.read_sets` reads it) or parsed (`reply`); none for a match absent from it.

    Raises:
        ValueError: an id list, or the raw reply, is malformed.
    """
    if not mine:
        return {}
    if raw is not None:
        values = wire.hash_values(raw, mine)
    else:
        listed = reply if isinstance(reply, dict) else dict(hash_pairs(reply))
        values = [listed.get(field) for field in mine]
    pairs = zip(mine, values, strict=True)
    return {field: [] if value is None else decode_ids(value) for field, value in pairs}


def _as_list(key_of: Callable[[bytes], bytes]) -> Callable[[bytes], list[bytes]]:
    """A one-map index's key function in the form of the periods' (a list of one key)."""
    return lambda raw: [key_of(raw)]


def _with_sketches(replies: list[list[bytes | None]], sketches: dict[str, bytes]) -> list[bytes | None]:
    """The ids' replies of HMGETs of ids and sketches; the sketches put in `sketches` by id.

    Only the sketches of the ids listed with the fingerprint count: an id has one fingerprint, so one
    sketch, even if a cluster's interrupted write left a stale one under another.
    """
    for ids, stored in replies:
        if ids is not None and stored is not None:
            listed = set(decode_ids(ids))
            sketches.update(item for item in decode_sketches(stored).items() if item[0] in listed)
    return [ids for ids, _ in replies]


def _ids_in(replies: list[bytes | None]) -> list[str]:
    """The ids a fingerprint has in the maps of one or more periods (each id once)."""
    if len(replies) == 1:
        return decode_ids(replies[0]) if replies[0] is not None else []
    return list(
        dict.fromkeys(doc_id for reply in replies if reply is not None for doc_id in decode_ids(reply))
    )
