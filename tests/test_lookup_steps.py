"""The lookup's steps driven from recorded replies, without a server: the fast tier of the read path.

`Reads.lookup` yields what to send and what to read and takes the replies; here they are answered from
a recorded copy of a server's data (sets and hashes), in RESP form where the lookup reads raw and the
exchange can, parsed otherwise. The real-server tests (test_near_conversation.py, test_index_property.py,
test_fp_map_bits.py) run the same steps through `transport.drive`.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import Layout
from simhash_redis.codec import decode_ids, encode_fp, encode_ids
from simhash_redis.fingerprinting import engine_choice
from simhash_redis.store import Reads, Store
from simhash_redis.store.config import IndexConfig
from simhash_redis.store.keys import KeySchema
from simhash_redis.store.windows import View
from simhash_redis.transport import RAW, SEND, Steps
from tests.test_index_property import brute_force, clustered

BASE = 0xF0F0_F0F0_1234_5678


class Recorded:
    """A server's data, recorded: answers a lookup's commands and keeps the writes it sent.

    Args:
        raw: answer reads of table sets and hashes in their RESP form (as a plain socket does with the
            compiled core), else parsed (as a cluster, or the pure engine, gets them).
    """

    def __init__(self, raw: bool) -> None:
        self.raw = raw
        self.sets: dict[bytes, set[bytes]] = {}
        self.hashes: dict[bytes, dict[bytes, bytes]] = {}
        self.writes: list[list[tuple[bytes, ...]]] = []

    def store(self, keys: KeySchema, stored: dict[str, int], f: int, merge: bool = False) -> None:
        """Record documents as the write script stores them: the tables, then the fingerprint map (merge:
        beside the ids already recorded with a fingerprint)."""
        by_fp: dict[int, list[str]] = {}
        for doc_id, fp in stored.items():
            by_fp.setdefault(fp, []).append(doc_id)
        for fp, ids in by_fp.items():
            raw = encode_fp(fp, f)
            for key in keys.tables(fp):
                self.sets.setdefault(key, set()).add(raw)
            bucket = self.hashes.setdefault(keys.fp_bucket(raw), {})
            before = decode_ids(bucket[raw]) if merge and raw in bucket else []
            bucket[raw] = encode_ids(before + ids)

    def answer(self, command: tuple[bytes, ...]) -> Any:
        name, key, *args = command
        if name == b"SMEMBERS":
            return sorted(self.sets.get(key, ()))
        fields = self.hashes.get(key, {})
        if name == b"HGETALL":
            return [part for pair in fields.items() for part in pair]
        if name == b"HGET":
            return fields.get(args[0])
        assert name == b"HMGET"
        return [fields.get(field) for field in args]

    def run(self, steps: Steps[Any]) -> Any:
        """Run a conversation's steps to its end, answering every read from the recorded data."""
        queue: list[tuple[bytes, ...]] = []
        reply: Any = None
        while True:
            try:
                kind, arg = steps.send(reply)
            except StopIteration as done:
                return done.value
            if kind == SEND:
                sent = [tuple(command) for batch in arg for command in batch]
                self.writes.append(sent)
                queue.extend(sent)
                reply = None
                continue
            assert arg <= len(queue), "more replies read than commands sent"
            reply = [self.answer(command) for command in queue[:arg]]
            del queue[:arg]
            if kind == RAW and self.raw:
                reply = b"".join(_resp(one) for one in reply)


def _resp(reply: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(reply) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in reply)


def _reads(layout: Layout) -> Reads:
    config = IndexConfig.build(layout=layout)
    keys = KeySchema.of("simhash", "steps", config)
    return Reads(Store(None, keys), "steps", config)  # type: ignore[arg-type]  # never sends


@pytest.fixture(params=["native raw", "native parsed", "python"])
def answers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """Replies as each engine and exchange get them."""
    if request.param == "python":
        monkeypatch.setattr(engine_choice, "native", None)
    elif engine_choice.native is None:
        pytest.skip("the compiled core is not built")
    return Recorded(raw=request.param == "native raw")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_recorded_lookups_equal_brute_force(
    answers: Recorded, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    from simhash_redis.store import reads as reads_module

    monkeypatch.setattr(reads_module, "_SLICE", data.draw(st.sampled_from([1, 2, 64])))
    layout = data.draw(st.sampled_from([Layout.pigeonhole(64, 3), Layout.permuted(64, 3, blocks=5)]))
    reads = _reads(layout)
    # Not whole: a single lookup asks for its own fingerprint's ids.
    reads.whole_buckets = data.draw(st.booleans())
    stored = {f"id{i}": fp for i, fp in enumerate(data.draw(clustered(64, 5)))}
    stored.update({f"twin{i}": fp for i, fp in enumerate(list(stored.values())[:2])})
    answers.sets, answers.hashes = {}, {}
    answers.store(reads.store.keys, stored, 64)
    probes = data.draw(clustered(64, 5)) + list(stored.values())[:3]
    k = data.draw(st.integers(0, 3))
    expected = [brute_force(stored, q, k) for q in probes]
    assert answers.run(reads.lookup(probes, k)) == expected
    assert [answers.run(reads.lookup([q], k))[0] for q in probes] == expected
    members: list[list[list[bytes]]] = []
    assert answers.run(reads.lookup(probes, k, members=members)) == expected
    assert [[set(one) for one in query] for query in members] == [
        [answers.sets.get(key, set()) for key in reads.store.keys.tables(q)] for q in probes
    ]


def test_a_single_lookup_reads_its_bucket_whole_in_its_first_write(answers: Recorded) -> None:
    reads = _reads(Layout.pigeonhole(64, 3))
    keys = reads.store.keys
    far = BASE ^ (0b111 << 60)  # agrees with BASE in its low bits: the same bucket
    answers.store(keys, {"a": BASE, "b": BASE, "near": BASE ^ (1 << 40), "far": far}, 64)
    found = answers.run(reads.lookup([BASE ^ (1 << 40) ^ (1 << 50)], 3))
    assert [(m.id, m.distance) for m in found[0]] == [("near", 1), ("a", 2), ("b", 2)]
    tables = [(b"SMEMBERS", key) for key in keys.tables(BASE ^ (1 << 40) ^ (1 << 50))]
    # Every hit's ids came with its bucket: one write, no second round trip.
    assert answers.writes == [[*tables, (b"HGETALL", keys.fp_bucket_of(BASE ^ (1 << 40) ^ (1 << 50)))]]
    answers.writes.clear()
    assert answers.run(reads.lookup([12345], 3)) == [[]]
    assert len(answers.writes) == 1


def test_a_batch_asks_for_ids_slice_by_slice(answers: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    from simhash_redis.store import reads as reads_module

    monkeypatch.setattr(reads_module, "_SLICE", 1)
    reads = _reads(Layout.pigeonhole(64, 3))
    keys = reads.store.keys
    queries = [BASE, BASE ^ 1, 7, BASE ^ 2]
    answers.store(keys, {"a": BASE, "z": 7}, 64)
    found = answers.run(reads.lookup(queries, 3))
    assert [[m.id for m in one] for one in found] == [["a"], ["a"], ["z"], ["a"]]
    stored_a, stored_z = encode_fp(BASE, 64), encode_fp(7, 64)
    # The table sets in one write, then each slice's new hits' ids as soon as it is checked; the
    # fourth query's hit was asked for already.
    assert answers.writes[1:] == [
        [(b"HGET", keys.fp_bucket(stored_a), stored_a)],
        [(b"HGET", keys.fp_bucket(stored_z), stored_z)],
    ]


def test_a_lookup_run_again_starts_afresh(answers: Recorded) -> None:
    # A lost reply makes the transport run the conversation again: what the first run filled is reset.
    reads = _reads(Layout.pigeonhole(64, 3))
    answers.store(reads.store.keys, {"a": BASE}, 64)
    members: list[list[list[bytes]]] = []
    first = reads.lookup([BASE, BASE ^ 1], 3, members=members)
    next(first)
    first.send(None)  # the table sets asked for; the connection is lost before the reply
    members.append([[b"stale"]])
    assert answers.run(reads.lookup([BASE, BASE ^ 1], 3, members=members))[0][0].id == "a"
    assert len(members) == 2 and [b"stale"] not in members[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_recorded_lookups_over_periods_equal_brute_force(answers: Recorded, data: st.DataObject) -> None:
    # Each period's map placed as a plain index's; a single lookup reads each period's own bucket whole.
    reads = _reads(Layout.pigeonhole(64, 3))
    reads.whole_buckets = data.draw(st.booleans())
    keys = reads.store.keys
    windows = (7, 8, 9)
    view = View(
        windows,
        9,
        tuple(keys.in_window(w) for w in windows),
        keys.periods_builder(windows),
        keys.periods_map_builder(windows, "id"),
        keys.periods_map_builder(windows, "fp"),
    )
    stored = {f"id{i}": fp for i, fp in enumerate(data.draw(clustered(64, 5)))}
    stored.update({f"twin{i}": fp for i, fp in enumerate(list(stored.values())[:3])})
    answers.sets, answers.hashes = {}, {}
    for doc_id, fp in stored.items():  # a document lives in one period, its copies in any
        answers.store(keys.in_window(data.draw(st.sampled_from(windows))), {doc_id: fp}, 64, merge=True)
    probes = data.draw(clustered(64, 5)) + list(stored.values())[:3]
    k = data.draw(st.integers(0, 3))
    expected = [brute_force(stored, q, k) for q in probes]
    assert answers.run(reads.lookup(probes, k, view)) == expected
    assert [answers.run(reads.lookup([q], k, view))[0] for q in probes] == expected
