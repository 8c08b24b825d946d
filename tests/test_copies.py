"""A page stored under many ids (a site's login page, a 404): one group a lookup, not a match per id.

add_if_new reports what `results.duplicate_of` picks among every match, without building them; near()
gives every match, in the order sorting them all gave; verified mode estimates each distinct stored
sketch once.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis import BandedOddSketcher, Match, SimhashIndex, VerifiedIndex, VerifiedMatch
from simhash_redis.asyncio import AsyncVerifiedIndex
from simhash_redis.codec import decode_ids, encode_ids, netstring
from simhash_redis.index.unique import confirmed_many
from simhash_redis.results import duplicate_of
from simhash_redis.store import candidates, reads
from simhash_redis.store.candidates import (
    Group,
    Listed,
    grouped_all,
    matches_of,
    matches_of_groups,
    reported,
    verified_matches_of,
)
from simhash_redis.store.store import BULK_COMMIT, BULK_SKETCH, _included
from tests.servers import ServerProcess
from tests.test_verified_mode import article

_SKETCHER = BandedOddSketcher()
_TEXTS = [article(seed) for seed in range(4)]
# Query sketches, and stored ones: two near each other, two far, and one of another size.
_QUERIES = _SKETCHER.sketch_many(_TEXTS)
_STORED = [
    _SKETCHER.stored(one) for one in _SKETCHER.sketch_many([_TEXTS[0], _TEXTS[0] + " more", *_TEXTS[1:]])
]
_STORED.append(b"\0" * 10)

_IDS = st.sampled_from(["a", "b", "p1", "p10", "p2", "é", "z", ""])


def _matches_by_sorting(found: dict[bytes, tuple[int, int]], ids_of: dict[bytes, list[str]]) -> list[Match]:
    """The matches as the lookup built them before groups (the definition): one per id, sorted."""
    matches = [Match(doc_id, fp, d) for raw, (fp, d) in found.items() for doc_id in ids_of.get(raw, ())]
    matches.sort(key=lambda match: (match.distance, match.id))
    return matches


def _confirmed_by_id(
    queries: Sequence[bytes], candidates_of: list[list[Match]], stored: dict[str, bytes], threshold: float
) -> list[list[tuple[Match, float]]]:
    """Verified mode's confirmation before groups (the definition): each candidate id estimated."""
    out = []
    for query, matches in zip(queries, candidates_of, strict=True):
        kept = [m for m in matches if len(stored.get(m.id, b"")) == _SKETCHER.sketch_bytes]
        values = _SKETCHER.estimate_many(query, [stored[m.id] for m in kept]).tolist() if kept else []
        pairs = [(m, float(e)) for m, e in zip(kept, values, strict=True) if e >= threshold]
        pairs.sort(key=lambda pair: (-pair[1], pair[0].distance, pair[0].id))
        out.append(pairs)
    return out


_FOUND = st.dictionaries(
    st.integers(0, 40).map(lambda n: b"%d" % n),
    st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 3)),
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(found=_FOUND, lists=st.lists(st.lists(_IDS, max_size=5), min_size=41, max_size=41), doc_id=_IDS)
def test_groups_give_the_matches_and_the_duplicate_sorting_every_match_gave(
    found: dict[bytes, tuple[int, int]], lists: list[list[str]], doc_id: str
) -> None:
    # An id may be listed twice, and under two fingerprints (as a cluster's interrupted write leaves it).
    ids_of = {b"%d" % n: ids for n, ids in enumerate(lists) if n % 7}  # some fingerprints without an entry
    want = _matches_by_sorting(found, ids_of)
    assert matches_of(found, ids_of) == want
    groups = grouped_all([found], ids_of, {})[0]
    assert matches_of_groups(groups) == want  # the way of many matches
    assert reported(doc_id, groups) == duplicate_of(doc_id, want)


@settings(max_examples=300, deadline=None)
@given(
    found=st.lists(_FOUND, min_size=1, max_size=3),
    sizes=st.lists(st.integers(0, 6), min_size=41, max_size=41),
    sketch_of=st.lists(st.integers(0, len(_STORED) - 1), min_size=41 * 6, max_size=41 * 6),
    uniform=st.booleans(),
    query=st.lists(st.integers(0, len(_QUERIES) - 1), min_size=3, max_size=3),
    threshold=st.sampled_from([0.0, 0.5, 0.8]),
    doc_id=st.integers(0, 60),
)
def test_verified_groups_confirm_as_each_id_estimated_did(
    found: list[dict[bytes, tuple[int, int]]],
    sizes: list[int],
    sketch_of: list[int],
    uniform: bool,
    query: list[int],
    threshold: float,
    doc_id: int,
) -> None:
    # Ids listed once each (a consistent index): each with its stored sketch, often one for a list.
    ids_of: dict[bytes, list[str]] = {}
    stored: dict[str, bytes] = {}
    for n, size in enumerate(sizes):
        ids_of[b"%d" % n] = ids = [f"d{n}-{i}" for i in range(size)]
        for i, one in enumerate(ids):
            stored[one] = _STORED[sketch_of[n * 6 + (0 if uniform else i)]]
    queries = [_QUERIES[q] for q in query[: len(found)]]
    sketch_of = {}  # the lookup's note of one sketch for all a fingerprint's ids (not always made)
    for raw, ids in ids_of.items():
        shared = {stored[one] for one in ids}
        if uniform and len(shared) == 1:
            sketch_of[raw] = shared.pop()
    want = _confirmed_by_id(queries, [_matches_by_sorting(one, ids_of) for one in found], stored, threshold)
    got = confirmed_many(_SKETCHER, queries, grouped_all(found, ids_of, sketch_of), stored, threshold)
    for pairs, groups in zip(want, got, strict=True):
        assert verified_matches_of(groups) == [VerifiedMatch(*m, e) for m, e in pairs]
        mine = f"d{doc_id % 41}-{doc_id % 3}"
        first = duplicate_of(mine, [m for m, _ in pairs])
        expected = None if first is None else VerifiedMatch(*first, dict(pairs)[first])
        assert reported(mine, groups) == expected


class _Counts:
    """How many matches were built one by one, and how many stored sketches were estimated."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hasher: BandedOddSketcher | None = None) -> None:
        self.expanded = self.estimated = 0
        expand = candidates._expanded

        def counted_expand(groups: list[Group], kind: type[Any]) -> list[Any]:
            self.expanded += sum(len(group.listed) for group in groups)
            return expand(groups, kind)

        monkeypatch.setattr(candidates, "_expanded", counted_expand)
        plain = reads.matches_of

        def counted_plain(found: dict[bytes, tuple[int, int]], ids_of: dict[bytes, list[str]]) -> list[Match]:
            matches = plain(found, ids_of)
            self.expanded += len(matches)
            return matches

        monkeypatch.setattr(reads, "matches_of", counted_plain)
        if hasher is None:
            return
        many, pairs = hasher.estimate_many, hasher.estimate_pairs
        inner = [False]  # estimate_many may call estimate_pairs: counted once

        def counted_many(query: bytes, others: Sequence[bytes]) -> npt.NDArray[np.float64]:
            self.estimated += len(others)
            inner[0] = True
            try:
                return many(query, others)
            finally:
                inner[0] = False

        def counted_pairs(
            queries: Sequence[bytes], owners: Sequence[int], others: Sequence[bytes]
        ) -> npt.NDArray[np.float64]:
            self.estimated += 0 if inner[0] else len(others)
            return pairs(queries, owners, others)

        monkeypatch.setattr(hasher, "estimate_many", counted_many)
        monkeypatch.setattr(hasher, "estimate_pairs", counted_pairs)


_COPIES = 300


def _ids() -> list[str]:
    rng = random.Random(3)
    ids = [f"page-{n}" for n in range(_COPIES)]
    rng.shuffle(ids)
    return ids


def test_add_if_new_of_a_page_stored_under_many_ids_builds_no_match_per_id(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    page, ids = article(1), _ids()
    plain = SimhashIndex(redis_client, "copies-plain", k=3)
    verified = VerifiedIndex(SimhashIndex(redis_client, "copies-verified", k=3))
    plain.add_many([(doc_id, page) for doc_id in ids])
    verified.add_many([(doc_id, page) for doc_id in ids])
    counts = _Counts(monkeypatch, verified.hasher)  # type: ignore[arg-type]
    least = min(ids)
    assert plain.add_if_new("new", page) == Match(least, plain.fingerprint(page), 0)
    assert plain.add_if_new("page-7", page) == Match("page-7", plain.fingerprint(page), 0)  # its own entry
    found = plain.add_many([(f"new-{n}", page) for n in range(100)], unique=True)
    assert {m.id for m in found if isinstance(m, Match)} == {least}
    duplicate = verified.add_if_new("new", page)
    assert duplicate is not None and duplicate.id == least and duplicate.jaccard == 1.0
    assert counts.estimated == 1  # one stored sketch for the 300 ids
    own = verified.add_if_new("page-7", page)
    assert own is not None and own.id == "page-7"
    many = verified.add_if_new_many([(f"new-{n}", page) for n in range(100)])  # one numpy pass
    assert {m.id for m in many if m is not None} == {least} and counts.estimated == 102
    assert counts.expanded == 0
    assert [m.id for m in plain.near(page)] == sorted(ids) and counts.expanded == _COPIES
    # near() gives every match, still one estimate per distinct sketch.
    assert [m.id for m in verified.near(page)] == sorted(ids)
    assert counts.expanded == 2 * _COPIES and counts.estimated == 103


def test_awaited_add_if_new_of_a_page_stored_under_many_ids(
    redis_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_server.flushall()
    page, ids = article(2), _ids()

    async def main() -> None:
        async with await AsyncVerifiedIndex.from_url(redis_server.url, "copies-awaited") as index:
            await index.add_many([(doc_id, page) for doc_id in ids])
            counts = _Counts(monkeypatch, index.index.hasher)  # type: ignore[arg-type]
            duplicate = await index.add_if_new("new", page)
            assert duplicate is not None and duplicate.id == min(ids)
            assert counts.expanded == 0 and counts.estimated == 1

    asyncio.run(main())


def test_an_id_listed_with_several_sketches_is_judged_by_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fingerprint's ids of two texts (a sketch scheme's collision): each part confirmed on its own."""
    counts = _Counts(monkeypatch, _SKETCHER)
    ids = [f"p{n}" for n in range(50)]
    stored = {doc_id: _STORED[0] if n % 2 else _STORED[2] for n, doc_id in enumerate(ids)}
    groups = [Group(7, 1, Listed(ids))]
    confirmed = confirmed_many(_SKETCHER, [_QUERIES[0]], [groups], stored, 0.8)[0]
    assert counts.estimated == 2
    assert [group.listed.ids for group in confirmed] == [ids[1::2]]
    assert reported("p0", confirmed) == VerifiedMatch("p1", 7, 1, 1.0)
    estimate: Callable[..., Any] = _SKETCHER.estimate
    assert estimate(_QUERIES[0], _STORED[2]) < 0.8


_SKETCHES = [b"", b"s1", b"s2:x", b"s3"]
# `sketches_with` of netstrings.lua alone: how each entry, in turn, moves an id among a field's groups.
_SKETCHES_WITH = _included(b"""--! include netstrings
local rest, had, kept = sketches_with(ARGV[1], ARGV[2], ARGV[3])
return {rest, had or false, kept and 1 or 0}
""")
_STARTS = st.lists(
    st.tuples(st.sampled_from(_SKETCHES[1:]), st.lists(_IDS, max_size=3, unique=True)), max_size=3
)
_ENTRIES = st.lists(st.tuples(st.integers(0, 1), _IDS, st.sampled_from(_SKETCHES)), min_size=1, max_size=12)


def _one_by_one(
    client: redis.Redis, key: bytes, entries: list[tuple[bytes, bytes, bytes]], commit: bool
) -> tuple[list[bytes], list[bytes]]:
    """What bulk_sketch.lua (commit: bulk_commit.lua's sketches) did before it joined a call's ids once:
    each (field, id, stored form) through `sketches_with`, in turn; its dropped and set lists."""
    dropped: list[bytes] = []
    set_ids: list[bytes] = []
    for field, doc_id, value in entries:
        cur = client.hget(key, field)
        if not commit and cur is None and value:
            client.hset(key, field, value)
            continue
        if commit and (cur or b"") == value:
            continue
        sketch = decode_ids(value)[0].encode() if value else b""  # the first netstring of the stored form
        rest, had, kept = client.eval(_SKETCHES_WITH, 0, cur or b"", doc_id, sketch)
        if had != sketch and (had or sketch):
            if had and not kept:
                dropped += [field[2:], had]
            if rest:
                client.hset(key, field, rest)
            else:
                client.hdel(key, field)
            set_ids.append(doc_id)
    return dropped, set_ids


@settings(max_examples=150, deadline=None)
@given(start=_STARTS, entries=_ENTRIES)
def test_a_bulk_call_of_many_sketches_writes_what_each_in_turn_wrote(
    redis_server: ServerProcess, start: list[tuple[bytes, list[str]]], entries: list[tuple[int, str, bytes]]
) -> None:
    """bulk_sketch.lua joins a call's new ids to their groups once per field."""
    client = redis_server.client()
    fields = [b"s:1", b"s:2"]
    # One id per entry of a call, as a bulk window names each id once.
    entries = list({doc_id: (f, doc_id, sketch) for f, doc_id, sketch in entries}.values())
    initial = b"".join(netstring(sketch) + netstring(encode_ids(ids)) for sketch, ids in start)
    given_ = [
        (
            fields[f],
            doc_id.encode(),
            netstring(sketch) + netstring(netstring(doc_id.encode())) if sketch else b"",
        )
        for f, doc_id, sketch in entries
    ]
    try:
        got = []
        for key in (b"copies-a", b"copies-b"):
            client.delete(key)
            if initial:
                client.hset(key, fields[0], initial)
        args = [one for entry in given_ for one in entry]
        dropped = client.eval(BULK_SKETCH.source, 1, b"copies-a", len(given_), *args)
        got = [client.hgetall(b"copies-a"), dropped]
        want_dropped, _ = _one_by_one(client, b"copies-b", given_, commit=False)
        assert got == [client.hgetall(b"copies-b"), want_dropped]
    finally:
        client.close()


@settings(max_examples=150, deadline=None)
@given(start=_STARTS, listed=st.lists(_IDS, max_size=4, unique=True), entries=_ENTRIES)
def test_a_bulk_commit_of_many_ids_writes_what_each_in_turn_wrote(
    redis_server: ServerProcess,
    start: list[tuple[bytes, list[str]]],
    listed: list[str],
    entries: list[tuple[int, str, bytes]],
) -> None:
    """bulk_commit.lua reads each field once, appends a call's ids once, and finds an id in its sketch's
    one group without splicing."""
    client = redis_server.client()
    fps = [b"1", b"2"]
    entries = list({doc_id: (f, doc_id, sketch) for f, doc_id, sketch in entries}.values())
    initial = b"".join(netstring(sketch) + netstring(encode_ids(ids)) for sketch, ids in start)
    try:
        for key in (b"copies-a", b"copies-b"):
            client.delete(key)
            client.hset(key, fps[0], encode_ids(listed) or b"1:x")
            if initial:
                client.hset(key, b"s:" + fps[0], initial)
        args: list[bytes | int] = [len(entries)]
        created = 0
        for f, doc_id, sketch in entries:
            item = netstring(doc_id.encode())
            args += [fps[f], b"s:" + fps[f], item, netstring(sketch) + netstring(item) if sketch else b""]
            # The id into its fingerprint's list, as before.
            ids = client.hget(b"copies-b", fps[f])
            if ids is None:
                client.hset(b"copies-b", fps[f], item)
                created += 1
            elif doc_id not in decode_ids(ids):
                client.hset(b"copies-b", fps[f], ids + item)
        sketches = [
            (b"s:" + fps[f], d.encode(), bytes(args[4 + 4 * n])) for n, (f, d, _) in enumerate(entries)
        ]
        dropped, set_ids = _one_by_one(client, b"copies-b", sketches, commit=True)
        reply = client.eval(BULK_COMMIT.source, 1, b"copies-a", *args)
        assert client.hgetall(b"copies-a") == client.hgetall(b"copies-b")
        assert reply == [created, dropped, set_ids]
    finally:
        client.close()


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(_IDS, max_size=40),
    written=st.dictionaries(_IDS, st.integers(0, 2)),
    fp=st.integers(0, 2),
    doc_id=_IDS,
)
def test_a_listed_group_answers_as_its_matches_did(
    ids: list[str], written: dict[str, int], fp: int, doc_id: str
) -> None:
    """add_if_new's questions of a group (an id written this round with another fingerprint, its own
    entry) as it asked them of each match."""
    listed = Listed(ids)
    matches = [Match(one, fp, 0) for one in ids]
    assert listed.conflicts(written, fp) == any(
        written.get(m.id, m.fingerprint) != m.fingerprint for m in matches
    )
    assert listed.has(doc_id) == any(m.id == doc_id for m in matches)
    assert not ids or listed.least() == min(ids)
