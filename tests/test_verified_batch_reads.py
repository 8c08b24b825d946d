"""A verified batch's reads done in numpy passes (band places as byte columns, band members, odd sketch
estimates) and the one-sketch values (and one-id lists) read without parsing: each the same, byte and
float for float, as the one-by-one way it stands in for, on both engines."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis import BandedOddSketcher, MinHasher, SimhashIndex, VerifiedIndex
from simhash_redis.codec import (
    decode_ids,
    decode_sketches,
    encode_fp,
    encode_ids,
    encode_sketches,
    unpack_fps_many,
)
from simhash_redis.index.unique import confirmed_many
from simhash_redis.store import Verification
from simhash_redis.store.candidates import Group, Listed, band_hits, hits, verified_matches_of
from simhash_redis.store.keys import KeySchema
from simhash_redis.store.layout import Layout
from simhash_redis.store.reads import _with_sketches
from simhash_redis.transport.wire import pack, pack_columns
from tests.test_verified_mode import article, one_word_edit

_names = itertools.count()
_SKETCHER = BandedOddSketcher()


def _keys() -> KeySchema:
    return KeySchema("simhash", "cols", Layout.pigeonhole(64, 3), 1 << 14)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_pack_columns_packs_as_pack_does(data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 12))
    widths = data.draw(st.lists(st.integers(1, 30), min_size=1, max_size=3))
    rng = random.Random(data.draw(st.integers(0, 1000)))
    columns = []
    for width in widths:
        matrix = np.frombuffer(rng.randbytes(rows * width), dtype=np.uint8).reshape(rows, width)
        lengths = None
        if data.draw(st.booleans()):
            lengths = np.array([rng.randint(0, width) for _ in range(rows)], dtype=np.intp)
        columns.append((matrix, lengths))
    commands = [
        (b"HGET", *(m[r, : (len(m[r]) if n is None else n[r])].tobytes() for m, n in columns))
        for r in range(rows)
    ]
    assert pack_columns(b"HGET", columns) == pack(commands)


@pytest.mark.parametrize(
    "mode",
    [
        Verification.of(),
        Verification.of(MinHasher(num_perm=64, bits=16)),
        Verification.of(MinHasher(num_perm=64, bits=16), bands=(8, 3)),
        Verification.of(MinHasher(num_perm=64, bits=8), bands=(10, 3)),
    ],
    ids=["odd-8x4", "minhash16-8x4", "minhash16-8x3", "minhash8-10x3"],
)
@pytest.mark.parametrize("buckets", [1, 2, 15, 16, 17, 256, 1 << 14, (1 << 14) + 3, 1 << 24])
def test_band_columns_name_the_places_band_places_names(mode: Verification, buckets: int) -> None:
    mode = replace(mode, band_buckets=buckets)
    rng = random.Random(buckets)
    sketches = [rng.randbytes(mode.sketch_bytes) for _ in range(70)]
    sketches += [bytes(mode.sketch_bytes), b"\xff" * mode.sketch_bytes]
    columns = _keys().band_columns(sketches, mode)
    assert columns is not None and columns.per == mode.bands
    one_by_one = [(b"HGET", *place) for sketch in sketches for place in _keys().band_places(sketch, mode)]
    fields = (columns.fields, None)
    assert pack_columns(b"HGET", [(columns.keys, columns.key_lengths), fields]) == pack(one_by_one)


def test_band_columns_leave_what_has_no_such_form_to_band_places() -> None:
    keys, mode = _keys(), Verification.of()
    many = [os.urandom(mode.sketch_bytes) for _ in range(64)]
    assert keys.band_columns(many[:5], mode) is None  # too few to pay numpy's fixed costs
    assert keys.band_columns(many, Verification.of(MinHasher(), 0.8, (0, 0))) is None
    assert keys.band_columns(many, Verification.of(MinHasher(num_perm=64, bits=16), bands=(4, 5))) is None
    assert keys.band_columns(many, Verification.of(MinHasher(num_perm=64, bits=8), bands=(11, 4))) is None
    assert keys.band_columns([*many[:-1], b""], mode) is None
    assert keys.band_columns(many, None) is None


@pytest.mark.usefixtures("either_engine")
@settings(max_examples=80, deadline=None)
@given(data=st.data(), f=st.sampled_from([64, 32]))
def test_band_hits_equal_unpacked_members_filtered(data: st.DataObject, f: int) -> None:
    per = data.draw(st.integers(1, 4))
    queries = data.draw(st.integers(1, 24))  # a few one by one, 16 and more in numpy
    fps = data.draw(st.lists(st.integers(0, (1 << f) - 1), min_size=queries, max_size=queries))
    pool = data.draw(st.lists(st.integers(0, (1 << f) - 1), min_size=1, max_size=6))  # members repeat
    values: list[bytes | None] = []
    for _ in range(queries * per):
        members = data.draw(st.lists(st.sampled_from(pool), max_size=4))
        values.append(b"".join(m.to_bytes(8, "little") for m in members) if members else None)
    got = band_hits(fps, values, per, f)
    if queries < 16 and sum(len(value or b"") for value in values) > 8 * 64:
        assert got is None  # many members of a few queries: the compiled filter's
        return
    assert got == hits(fps, unpack_fps_many(values, f), per, f, f)
    assert got is not None and [list(found) for found in got] == [
        list(found) for found in hits(fps, unpack_fps_many(values, f), per, f, f)
    ]  # members in the order met


@pytest.mark.parametrize("count", [1, 4, 20])  # a single lookup's, a few queries', a batch's
def test_band_hits_leave_the_odd_cases_to_the_one_by_one_way(count: int) -> None:
    fps = list(range(count))
    assert band_hits(fps, [b"\1" * 7] * count, 1, 64) is None  # not whole fingerprints
    assert band_hits(fps, [(1 << 40).to_bytes(8, "little")] * count, 1, 32) is None  # wider than f
    assert band_hits(fps, [b"\1" * 16] * count, 1, 128) is None
    assert band_hits(fps, [None] * count, 1, 64) == [{} for _ in fps]
    many = b"".join(i.to_bytes(8, "little") for i in range(65))
    assert (band_hits(fps, [many] * count, 1, 64) is None) == (count < 16)  # many members of a few
    assert band_hits(fps, [b"\1" * 8] * count, 1, 64) == [
        {b"%d" % 0x0101010101010101: (0x0101010101010101, (0x0101010101010101 ^ fp).bit_count())}
        for fp in fps
    ]


def _texts() -> list[str]:
    # Short and long texts: the long ones are sketched a sampling level up, with levels below and above.
    rng = random.Random(3)
    out = [article(seed, words) for seed, words in enumerate([40, 300, 900, 1500, 2500, 4000] * 4)]
    return out + [one_word_edit(text, rng.randrange(1000)) for text in out]


@pytest.mark.usefixtures("either_engine")
def test_estimate_pairs_equal_estimate_many_of_each_query() -> None:
    texts = _texts()
    queries = _SKETCHER.sketch_many(texts)
    queries[3] = _SKETCHER.stored(queries[3])  # a stored form: compared at its own level only
    stored = [_SKETCHER.stored(q) for q in _SKETCHER.sketch_many(texts)] + [os.urandom(160) for _ in range(9)]
    rng = random.Random(5)
    owners = [q for q in range(len(queries)) for _ in range(6)]
    others = [stored[rng.randrange(len(stored))] if n % 3 else stored[q] for n, q in enumerate(owners)]
    got = _SKETCHER.estimate_pairs(queries, owners, others)
    for q, query in enumerate(queries):
        mine = [i for i, owner in enumerate(owners) if owner == q]
        assert got[mine].tolist() == _SKETCHER.estimate_many(query, [others[i] for i in mine]).tolist()
    assert (got > 0.8).any() and (got == 0).any()


@pytest.mark.usefixtures("either_engine")
@pytest.mark.parametrize("hasher", [_SKETCHER, MinHasher(num_perm=64)], ids=["odd", "minhash"])
def test_confirmed_many_of_a_batch_equal_those_of_each_query(hasher: BandedOddSketcher | MinHasher) -> None:
    texts = _texts()
    sketches = hasher.sketch_many(texts)
    stored = {f"d{i}": hasher.stored(sketch) for i, sketch in enumerate(sketches)}
    stored["short"] = b"\0" * 10  # of another size: never confirmed
    rng = random.Random(7)
    queries = [sketches[rng.randrange(len(sketches))] for _ in range(70)]
    candidates = [
        [Group(0, rng.randrange(4), Listed([doc_id])) for doc_id in rng.sample(sorted(stored), 5)]
        for _ in queries
    ]
    want = [
        verified_matches_of(confirmed_many(hasher, [q], [found], stored, 0.5)[0])
        for q, found in zip(queries, candidates, strict=True)
    ]
    assert list(map(verified_matches_of, confirmed_many(hasher, queries, candidates, stored, 0.5))) == want
    assert any(want)


@pytest.mark.usefixtures("either_engine")
def test_a_batch_finds_what_each_query_finds_alone(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, f"batch{next(_names)}", k=3))
    texts = [article(seed) for seed in range(40)]
    verified.add_many([(f"doc{i}", text) for i, text in enumerate(texts)])
    # Several ids of one fingerprint: of one sketch (read without parsing), and of two (parsed).
    verified.add_many([("copy-a", texts[0]), ("copy-b", texts[0]), ("other", texts[1])])
    fp = encode_fp(verified.index.fingerprint(texts[1]), 64)
    key = verified.store.keys.fp_bucket(fp)
    sketch = _SKETCHER.stored_sketch(texts[1])
    other = _SKETCHER.stored_sketch(one_word_edit(texts[1], 1))
    redis_client.hset(
        key, verified.store.keys.sketch_field(fp), encode_sketches([(b"doc1", sketch), (b"other", other)])
    )
    queries = [one_word_edit(text, seed) for seed, text in enumerate(texts)] + texts + ["unrelated words"] * 3
    batch = verified.near_many(queries)
    assert batch == [verified.near(query) for query in queries]
    assert {m.id for m in batch[40]} == {"doc0", "copy-a", "copy-b"}
    assert {m.id for m in batch[41]} == {"doc1", "other"} and all(batch[:40])


def _sketches_parsed(replies: list[list[bytes | None]]) -> tuple[list[list[str] | None], dict[str, bytes]]:
    """What `_with_sketches` reads, by decode_ids and decode_sketches alone (the definition)."""
    out: list[list[str] | None] = []
    found: dict[str, bytes] = {}
    for ids, stored in replies:
        listed = None if ids is None else decode_ids(ids)
        out.append(listed)
        if listed is not None and stored is not None:
            found.update(item for item in decode_sketches(stored).items() if item[0] in listed)
    return out, found


def _outcome(call: Callable[[], object]) -> object:
    try:
        return call()
    except (ValueError, UnicodeDecodeError) as exc:
        return type(exc)


_IDS = st.lists(st.sampled_from(["a", "doc-1", "é", "x" * 12, ":", "0"]), max_size=3, unique=True)


@settings(max_examples=300, deadline=None)
@given(
    ids=_IDS,
    others=_IDS,
    sketch=st.binary(max_size=200),
    ids_form=st.sampled_from(["as stored", "leading zero", "cut", "not utf-8", "absent"]),
    sketch_form=st.sampled_from(["as stored", "two groups", "leading zero", "extra", "cut", "absent"]),
)
def test_sketch_replies_read_as_parsed(
    ids: list[str], others: list[str], sketch: bytes, ids_form: str, sketch_form: str
) -> None:
    raw_ids: bytes | None = encode_ids(ids)
    if ids_form == "leading zero" and raw_ids:
        raw_ids = b"0" + raw_ids
    elif ids_form == "cut" and raw_ids:
        raw_ids = raw_ids[:-1]
    elif ids_form == "not utf-8":
        raw_ids = b"2:\xff\xfe"
    elif ids_form == "absent":
        raw_ids = None
    pairs = [(one.encode(), sketch) for one in ids]
    stored: bytes | None = encode_sketches(pairs)
    if sketch_form == "two groups":
        stored = encode_sketches(pairs + [(one.encode(), sketch + b"!") for one in others if one not in ids])
    elif sketch_form == "leading zero" and stored:
        stored = b"0" + stored
    elif sketch_form == "extra":
        stored = (stored or b"") + b"1:x"
    elif sketch_form == "cut" and stored:
        stored = stored[:-1]
    elif sketch_form == "absent":
        stored = None
    replies: list[list[bytes | None]] = [[raw_ids, stored], [None, None]]
    got: dict[str, bytes] = {}
    listed = _outcome(lambda: _with_sketches(replies, got))
    want = _outcome(lambda: _sketches_parsed(replies))
    assert (listed, got) == want if not isinstance(want, type) else listed == want
