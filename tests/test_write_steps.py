"""A write's steps driven from recorded replies, without a server: the fast tier of the write path.

`Writes.steps` yields what to send and what to read and takes the replies; here each read is answered
with a reply written down in the test, as the write script (standalone) or the cluster's single-key
scripts would answer. The real-server tests (test_write_formats.py, test_write_script.py, test_crash.py,
test_lost_replies.py, test_cluster.py, ...) run the same steps through `transport.drive`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from redis.exceptions import ResponseError

from simhash_redis import Layout
from simhash_redis.codec import encode_fp
from simhash_redis.errors import WriteContention
from simhash_redis.results import Outcome
from simhash_redis.store import (
    KeySchema,
    SketchedGuard,
    Store,
    Write,
    Writes,
    windowed_writes,
    write_args,
)
from simhash_redis.store import locks as locks_module
from simhash_redis.store import store as store_module
from simhash_redis.store.locks import TTL_MS
from simhash_redis.store.store import FP_IDS, ID_CAS, LOCK, UNLOCK, WRITE, run_calls
from simhash_redis.store.windows import View, WindowedSets
from simhash_redis.store.writes import Progress
from simhash_redis.transport import READ, SEND, ScriptMissing, Steps

A, B = 0x0123_4567_89AB_CDEF, 0x0F0F_0F0F_0F0F_0F0F
FA, FB = encode_fp(A, 64), encode_fp(B, 64)


class _Sender:
    """Enough of a sender for a Store: standalone or cluster, and what it was asked to broadcast."""

    def __init__(self, cluster: bool) -> None:
        self.cluster = cluster
        self.broadcasts: list[Any] = []

    def broadcast(self, command: Any) -> None:
        self.broadcasts.append(command)


def _writes(cluster: bool = False) -> Writes:
    store = Store(_Sender(cluster), KeySchema("simhash", "w", Layout.pigeonhole(64, 3), 256))  # type: ignore[arg-type]
    return Writes(store, 64, 4)


def _run(steps: Steps[Any], answer: Callable[[list[Any]], list[Any]]) -> tuple[Any, list[list[Any]]]:
    """Drive steps to their end; each read answered by `answer` from the commands sent since the last
    read. Returns the result and the commands of each round trip."""
    sent: list[Any] = []
    trips: list[list[Any]] = []
    reply: Any = None
    while True:
        try:
            kind, arg = steps.send(reply)
        except StopIteration as done:
            return done.value, trips
        if kind == SEND:
            sent.extend(command for batch in arg for command in batch)
            reply = None
            continue
        assert kind == READ
        assert len(sent) >= arg
        asked, sent = sent[:arg], sent[arg:]
        trips.append(asked)
        reply = answer(asked)


def _args(command: Any) -> tuple[bytes, list[Any], list[Any]]:
    """(sha, keys, args) of an EVALSHA command."""
    assert command[0] == b"EVALSHA"
    numkeys = int(command[2])
    return command[1], list(command[3 : 3 + numkeys]), list(command[3 + numkeys :])


def test_a_batch_of_adds_is_one_call_in_the_add_format() -> None:
    writes = _writes()
    ops: list[Write] = [(b"a", FA, None), (b"b", FB, None)]
    progress = Progress(ops)
    outcomes, trips = _run(writes.steps(progress), lambda asked: [[b"a", b"u"]])
    assert outcomes == [Outcome.ADDED, Outcome.UNCHANGED]
    [[call]] = trips
    sha, keys, args = _args(call)
    assert sha == WRITE.sha
    keys_of = writes.keys
    assert keys == [
        keys_of.counts,
        keys_of.id_bucket(b"a"),
        keys_of.fp_bucket(FA),
        *keys_of.tables(A),
        keys_of.id_bucket(b"b"),
        keys_of.fp_bucket(FB),
        *keys_of.tables(B),
        keys_of.reply(progress.token + b":0.0"),  # the call's reply record, last
    ]
    assert args == [4, b"a", b"a", FA, b"b", FB]


def test_a_conflict_is_sent_again_with_the_keys_of_the_fingerprint_it_has() -> None:
    writes = _writes()
    replies = iter([[[b"a", b"c" + FB]], [[b"r"]]])
    outcomes, trips = _run(
        writes.steps(Progress([(b"a", FA, None), (b"b", FA, None)])), lambda _: next(replies)
    )
    assert outcomes == [Outcome.ADDED, Outcome.REPLACED]
    _, keys, args = _args(trips[1][0])
    assert args == [4, b"", b"b", FA, FB, b""]  # the general format: id, new, old, guard
    assert writes.keys.fp_bucket(FB) in keys and set(writes.keys.tables(B)) <= set(keys)


def test_conflicts_without_end_are_write_contention() -> None:
    steps = _writes().steps(Progress([(b"a", FA, None)]))
    reads = []

    def answer(sent: list[Any]) -> list[Any]:
        # The id's value, read again after each of a conflict's pauses; else the write script's conflict.
        if isinstance(sent[0], tuple) and sent[0][0] == b"HGET":
            reads.append(sent[0])
            return [FB]
        return [[b"c" + FB]]

    with pytest.raises(WriteContention):
        _run(steps, answer)
    assert reads


def test_a_guard_goes_with_its_document_and_a_changed_set_is_none() -> None:
    guard = [[FB], [], [], []]
    progress = Progress([(b"a", FA, guard)])
    outcomes, trips = _run(_writes().steps(progress), lambda _: [[b"g"]])
    assert outcomes == [None]
    _, keys, args = _args(trips[0][0])
    # Format 'g' (add-if-new's guarded adds): id, new, the members its guard lists, between spaces.
    assert args == [4, b"g", b"a", FA, b" " + FB + b" "]
    keys_of = _writes().keys
    assert keys == [
        keys_of.counts,
        keys_of.id_bucket(b"a"),
        keys_of.fp_bucket(FA),
        *keys_of.tables(A),
        keys_of.reply(progress.token + b":0.0"),
    ]


def test_a_guarded_add_in_conflict_goes_again_in_the_general_format() -> None:
    """An id found stored with another fingerprint ('c'): its second call names the old fingerprint, and
    carries its guard set by set."""
    guard = [[FB], [], [FB, FA], []]
    replies = iter([[[b"c" + FB]], [[b"r"]]])
    outcomes, trips = _run(_writes().steps(Progress([(b"a", FA, guard)])), lambda _: next(replies))
    assert outcomes == [Outcome.REPLACED]
    _, _, args = _args(trips[1][0])
    assert args == [4, b"", b"a", FA, FB, b"1", 1, 0, 2, 0, FB, FB, FA]


def test_a_large_batch_of_guarded_adds_goes_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Add-if-new's guarded adds are sent as parts like plain adds (each built while the server runs the
    one before); a part's reply lost, the conversation resumes at that part."""
    monkeypatch.setattr(store_module, "PART", 2)
    writes = _writes()
    ops: list[Write] = [(b"id%d" % i, encode_fp(i + 1, 64), [[], [FA], [], []]) for i in range(5)]
    progress = Progress(ops, [i + 1 for i in range(5)])
    steps = writes.steps(progress)
    assert steps.send(None)[0] == SEND
    assert steps.send(None) == (READ, 1)
    kind, batches = steps.send([[b"a", b"g"]])
    assert kind == SEND and _args(batches[0][0])[2][2::3] == [b"id2", b"id3"]
    steps.close()
    outcomes, trips = _run(
        writes.steps(progress), lambda asked: [[b"a"] * ((len(_args(asked[0])[2]) - 2) // 3)]
    )
    assert [_args(trip[0])[2][2::3] for trip in trips] == [[b"id2", b"id3"], [b"id4"]]
    assert outcomes == [Outcome.ADDED, None] + [Outcome.ADDED] * 3


def test_a_sketch_the_script_dropped_is_kept_for_its_band_tables() -> None:
    # Round 0 (the id assumed new): the id had this fingerprint with another sketch, which the new one
    # replaced ('u' keeps the new fingerprint, so its band tables lose the old sketch's bands).
    progress = Progress([(b"a", FA, SketchedGuard(None, b"sketch"))])
    outcomes, trips = _run(_writes().steps(progress), lambda _: [[b"u" + b"old sketch"]])
    assert outcomes == [Outcome.UNCHANGED]
    assert progress.dropped == [(FA, b"old sketch")]
    _, _, args = _args(trips[0][0])
    assert args[-1] == b"sketch" and args[5] == b"k"  # no guard: the sketch alone
    # A conflict round (the id had FB): 'r' left FB, whose band tables lose the sketch it had.
    progress = Progress([(b"a", FA, SketchedGuard(None, b"sketch"))])
    replies = iter([[[b"c" + FB]], [[b"r" + b"old sketch"]]])
    outcomes, trips = _run(_writes().steps(progress), lambda _: next(replies))
    assert outcomes == [Outcome.REPLACED]
    assert progress.dropped == [(FB, b"old sketch")]
    _, _, args = _args(trips[1][0])
    assert args[2:6] == [b"a", FA, FB, b"k"]  # the general format: id, new, old (the current), kind


def test_a_large_batch_of_adds_goes_in_parts_and_resumes_after_the_last_acknowledged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_module, "PART", 2)
    writes = _writes()
    ops: list[Write] = [(b"id%d" % i, encode_fp(i + 1, 64), None) for i in range(5)]
    progress = Progress(ops)
    steps = writes.steps(progress)
    # The first part is sent, and the second is sent only once the first is answered.
    assert steps.send(None)[0] == SEND
    assert steps.send(None) == (READ, 1)
    kind, batches = steps.send([[b"a", b"a"]])
    assert kind == SEND and _args(batches[0][0])[2][2::2] == [b"id2", b"id3"]
    steps.close()  # the connection is lost: the conversation starts again, from the second part
    outcomes, trips = _run(
        writes.steps(progress), lambda asked: [[b"a"] * (len(_args(asked[0])[2]) // 2 - 1)]
    )
    assert [_args(trip[0])[2][2::2] for trip in trips] == [[b"id2", b"id3"], [b"id4"]]
    assert outcomes == [Outcome.ADDED] * 5


def test_a_cluster_writes_tables_then_commits_then_attaches() -> None:
    writes = _writes(cluster=True)
    keys = writes.keys
    replies = iter([[1] * 8 + [None, FB, b"OK", b"OK"], [b"a", b"c" + FB], [1], [b"r"], [1, 1], [1, 1]])
    progress = Progress([(b"a", FA, None), (b"b", FA, None)])
    outcomes, trips = _run(writes.steps(progress), lambda _: next(replies))
    assert outcomes == [Outcome.ADDED, Outcome.REPLACED]
    tables, commit, detach, recommit, attach, unlock = trips
    # Each id's value is read with the tables (what a commit resent after a lost reply is judged against),
    # and each id's lock taken, held to the end of its write.
    assert tables[:10] == [(b"SADD", key, FA) for _ in "ab" for key in keys.tables(A)] + [
        (b"HGET", keys.id_bucket(doc_id), doc_id) for doc_id in (b"a", b"b")
    ]
    assert tables[10:] == [
        (b"SET", keys.id_lock(doc_id), progress.token, b"NX", b"PX", TTL_MS) for doc_id in (b"a", b"b")
    ]
    assert [_args(call) for call in unlock] == [
        (UNLOCK.sha, [keys.id_lock(doc_id)], [progress.token]) for doc_id in (b"a", b"b")
    ]
    assert [_args(call) for call in commit] == [
        (ID_CAS.sha, [keys.id_bucket(b"a")], [b"a", FA, b""]),
        (ID_CAS.sha, [keys.id_bucket(b"b")], [b"b", FA, b""]),
    ]
    # b had B: it leaves B's id list before its commit, and joins A's after.
    assert [_args(call) for call in detach] == [(FP_IDS.sha, [keys.fp_bucket(FB)], [b"-", FB, b"b"])]
    assert [_args(call) for call in recommit] == [(ID_CAS.sha, [keys.id_bucket(b"b")], [b"b", FA, FB])]
    assert [_args(call)[2] for call in attach] == [[b"+", FA, b"a"], [b"+", FA, b"b"]]


def _lost_at(steps: Steps[Any], replies: list[list[Any]]) -> None:
    """Answer a conversation's reads with `replies`, then lose the connection at the next read (the
    commands sent for it were applied, their replies never arrive)."""
    reply: Any = None
    answers = iter(replies)
    while True:
        kind, _ = steps.send(reply)
        if kind == READ:
            reply = next(answers, None)
            if reply is None:
                steps.close()
                return
        else:
            reply = None


def test_a_cluster_commit_sent_again_after_a_lost_reply_reports_its_own_write() -> None:
    """Commits applied whose replies were lost: sent again, an id found with its new fingerprint ('u')
    is judged against its value before the call, read with the tables: added, replaced, or unchanged
    for one that had it already."""
    writes = _writes(cluster=True)
    progress = Progress([(b"new", FA, None), (b"moved", FA, None), (b"kept", FA, None)])
    _lost_at(writes.steps(progress), [[1] * 12 + [None, FB, FA] + [1] * 3])  # the first commits lost
    replies = iter([[b"u", b"c" + FB, b"u"], [1]])  # sent again: 'new' had been added
    _lost_at(writes.steps(progress), list(replies))  # the second round's commit ('moved') lost too
    outcomes, trips = _run(writes.steps(progress), lambda asked: [b"u"] if len(asked) == 1 else [1] * 3)
    assert [_args(call)[2] for call in trips[0]] == [[b"moved", FA, FB]]  # the commit, sent again
    assert outcomes == [Outcome.ADDED, Outcome.REPLACED, Outcome.UNCHANGED]
    # Without a lost reply, 'u' is another writer's doing: the call changed nothing.
    progress = Progress([(b"new", FA, None)])
    replies = iter([[1] * 4 + [None, 1], [b"u"], [1], [1]])
    assert _run(writes.steps(progress), lambda _: next(replies))[0] == [Outcome.UNCHANGED]


def test_a_cluster_write_of_an_id_another_writer_holds_waits_for_its_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """b's lock is another writer's: a is written and released, then b's lock is asked for again with
    b's value, so b leaves its fingerprint and is committed without a conflict first."""
    pauses: list[float] = []
    monkeypatch.setattr(locks_module, "pause", pauses.append)
    writes = _writes(cluster=True)
    keys = writes.keys
    progress = Progress([(b"a", FA, None), (b"b", FA, None)])
    replies = iter([[1] * 8 + [None, None, 1, b"other"], [b"a"], [1], [1], [1, FB], [1], [b"r"], [1], [1]])
    outcomes, trips = _run(writes.steps(progress), lambda _: next(replies))
    assert outcomes == [Outcome.ADDED, Outcome.REPLACED]
    assert len(pauses) == 1
    _, commit, attach, unlock, relock, detach, recommit, reattach, reunlock = trips
    assert [_args(call)[2] for call in commit] == [[b"a", FA, b""]]
    assert [_args(call)[2] for call in attach] == [[b"+", FA, b"a"]]
    assert [_args(call)[1] for call in unlock] == [[keys.id_lock(b"a")]]
    # Asked again with lock.lua, which knows this call's token (a first ask sent again finds its own lock).
    assert _args(relock[0])[:2] == (LOCK.sha, [keys.id_lock(b"b")])
    assert relock[1] == (b"HGET", keys.id_bucket(b"b"), b"b")
    assert [_args(call)[2] for call in detach] == [[b"-", FB, b"b"]]
    assert [_args(call)[2] for call in recommit] == [[b"b", FA, FB]]
    assert [_args(call)[2] for call in reattach] == [[b"+", FA, b"b"]]
    assert [_args(call)[1] for call in reunlock] == [[keys.id_lock(b"b")]]


def _done(command: Any) -> Any:
    return b"a" if command[0] == b"EVALSHA" else 1


class _Forgetful(_Sender):
    """A sender whose conversation's exchange answers NOSCRIPT to a script call until the scripts are
    loaded `forgets` times (each load forgotten again before the next), and 'a' after; what it sent."""

    def __init__(self, forgets: int) -> None:
        super().__init__(cluster=True)
        self.forgets = forgets
        self.resent: list[Any] = []

    def answer(self, command: Any) -> Any:
        if command[0] == b"EVALSHA" and len(self.broadcasts) < self.forgets:
            return ResponseError("NOSCRIPT No matching script.")
        return _done(command)

    def converse(self, talk: Callable[[Any], Any], **_: Any) -> Any:
        sender = self

        class _Exchange:
            def __init__(self) -> None:
                self.queue: list[Any] = []

            def send(self, *batches: Any) -> None:
                self.queue.extend(command for batch in batches for command in batch)

            def read(self, count: int) -> list[Any]:
                asked, self.queue[:] = self.queue[:count], self.queue[count:]
                # Only the first call of each read is refused, as by a node that forgot the scripts.
                return [sender.answer(c) if i == 0 else _done(c) for i, c in enumerate(asked)]

            def read_sets(self, count: int) -> None:
                return None

            def round_trip(self, commands: Any) -> list[Any]:
                sender.resent.append(list(commands))
                return [sender.answer(command) for command in commands]

        return talk(_Exchange())


def test_noscript_loads_the_scripts_and_sends_again_only_the_calls_refused() -> None:
    sender = _Forgetful(forgets=1)
    calls = [WRITE.command([b"k1"], [b"x"]), (b"SADD", b"s", b"m"), WRITE.command([b"k2"], [b"y"])]
    assert run_calls(sender, calls, (WRITE,)) == [b"a", 1, b"a"]  # type: ignore[arg-type]
    assert sender.broadcasts == [[b"SCRIPT", b"LOAD", WRITE.source]]
    assert sender.resent == [[calls[0]]]


def test_a_server_that_keeps_forgetting_the_scripts_is_an_error() -> None:
    sender = _Forgetful(forgets=10)
    with pytest.raises(ScriptMissing):
        run_calls(sender, [WRITE.command([b"k1"], [b"x"])], (WRITE,))  # type: ignore[arg-type]
    assert len(sender.broadcasts) == 2


class _Periods:
    """Enough of an index's periods (`Windows`) for the steps of a write: 1-second periods, 1 minute kept."""

    period_ms, retention_ms = 1000, 60_000

    def __init__(self, keys: KeySchema) -> None:
        self.keys = keys

    def schema(self, window: int) -> KeySchema:
        return self.keys.in_window(window)

    def expires_at(self, window: int) -> int:
        return (window + 1) * self.period_ms + self.retention_ms


def _view(keys: KeySchema, windows: tuple[int, ...], current: int) -> View:
    return View(
        windows,
        current,
        tuple(keys.in_window(w) for w in windows),
        keys.periods_builder(windows),
        keys.periods_map_builder(windows, "id"),
        keys.periods_map_builder(windows, "fp"),
    )


def test_a_period_write_stops_at_a_call_refused_for_another_period(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large batch in parts: the second is refused by the server's clock, the third is not sent."""
    monkeypatch.setattr(store_module, "PART", 2)
    keys = _writes().keys
    periods, view = _Periods(keys), _view(keys, (7, 8), 8)
    sent = [(i, b"id%d" % i, encode_fp(i + 1, 64), b"", 0, None) for i in range(5)]
    acked: list[list[bytes]] = []
    steps = windowed_writes.period_steps(periods, 64, 4, view, sent, acked, b"t")  # type: ignore[arg-type]
    replies = iter([[[b"a", b"a"]], [[b"w9000"]]])
    _, trips = _run(steps, lambda _: next(replies))
    assert len(trips) == 2 and acked == [[b"a", b"a"], [b"w9000"]]
    _, call_keys, args = _args(trips[0][0])
    assert args[:7] == [4, b"w", 1000, 60_000, 2, 2, 7]  # format 'w': 2 periods, the current 2nd of them
    assert call_keys[:2] == [keys.in_window(7).counts, keys.in_window(8).counts]
    # Started again after a lost connection, the round resumes after what was acknowledged: nothing.
    assert _run(windowed_writes.period_steps(periods, 64, 4, view, sent, acked, b"t"), lambda _: [])[1] == []  # type: ignore[arg-type]


def test_a_period_write_refuses_a_guard_of_another_count_of_sets() -> None:
    """A guard's sets are counted against its periods' tables and bands, plain or verified: another count
    would shift every later document's arguments in the call."""
    keys = _writes().keys
    periods, view = _Periods(keys), _view(keys, (7, 8), 8)

    def call(guard: Any) -> list[Any]:
        command = write_args.write_command((periods, view), 64, 4, [(0, b"a", FA, b"", 0, guard)], b"r")  # type: ignore[arg-type]
        return _args(command)[2]

    assert call(WindowedSets([[b"m"]] * 8, (7, 8)))[-18:] == [b"1", 8, *[1] * 8, *[b"m"] * 8]  # 2 x 4 tables
    sketched = SketchedGuard(WindowedSets([[]] * 8, (7, 8)), b"sketch")
    assert call(sketched)[-12:] == [b"s", 0, 8, *[0] * 8, b"sketch"]  # no band tables
    for guard in (WindowedSets([[]] * 7, (7, 8)), SketchedGuard(WindowedSets([[]] * 4, (7, 8)), b"sketch")):
        with pytest.raises(ValueError, match=r"a guard of (7|4) sets, for 2 periods of 4 tables"):
            call(guard)


def test_a_cluster_period_write_commits_into_the_current_period_and_clears_the_old_one() -> None:
    keys = _writes().keys
    periods, view = _Periods(keys), _view(keys, (7, 8), 8)
    old, new = keys.in_window(7), keys.in_window(8)
    outcomes: list[Outcome | None] = [None]
    replies = iter(
        [
            [FB, None],  # 1. where: in period 7, with B
            [1, 1] * 4,  # 2. A into period 8's tables, with their expiry
            [1],  # 3. out of B's list in period 7
            [b"r"],  # 4. the commit
            [1],  # 5. into A's list in period 8
            [FB, FA],  # 6. where again: period 7's entry is left behind
            [1],  # its list entry (gone already)
            [b"d"],  # and its id-map entry
        ]
    )
    ops = [(b"x", FA)]
    steps = windowed_writes.cluster_steps(periods, 64, view, ops, [0], outcomes, {}, False)  # type: ignore[arg-type]
    (retry, moved), trips = _run(steps, lambda _: next(replies))
    assert (retry, moved, outcomes) == ([], None, [Outcome.REPLACED])
    assert trips[0] == [(b"HGET", old.id_bucket(b"x"), b"x"), (b"HGET", new.id_bucket(b"x"), b"x")]
    assert trips[1][:2] == [(b"SADD", new.tables(A)[0], FA), (b"PEXPIREAT", new.tables(A)[0], 69_000)]
    assert _args(trips[2][0]) == (FP_IDS.sha, [old.fp_bucket(FB)], [b"-", FB, b"x"])
    assert _args(trips[3][0]) == (ID_CAS.sha, [new.id_bucket(b"x")], [b"x", FA, b"", 1000, 8, 69_000])
    assert _args(trips[4][0]) == (FP_IDS.sha, [new.fp_bucket(FA)], [b"+", FA, b"x", 69_000])
    assert _args(trips[7][0]) == (ID_CAS.sha, [old.id_bucket(b"x")], [b"x", b"", FB])


def test_adds_with_the_callers_ints_send_what_decoding_sends() -> None:
    # Plain adds carry the ints they were fingerprinted as (encoded once); the script call built from
    # them is the one built from the stored form decoded, in one part or in several.
    ops: list[Write] = [(b"a", FA, None), (b"b", FB, None), (b"c", encode_fp(7, 64), None)]
    writes = _writes()
    for start, count in ((0, 3), (1, 2)):
        with_ints, decoded = Progress(ops, [A, B, 7]), Progress(ops)
        decoded.token = with_ints.token  # one call's reply record
        carried = writes._adds(with_ints, 0, start, count)
        assert carried == writes._adds(decoded, 0, start, count)
        assert _args(carried)[2][2:] == [
            v for doc_id, new, _ in ops[start : start + count] for v in (doc_id, new)
        ]


def test_a_cluster_first_ask_for_a_lock_sent_again_after_a_lost_reply_finds_its_own_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first round trip (tables, value, SET NX of the id's lock) applied, its replies lost: sent again,
    the SET is refused by the call's own lock, which lock.lua then grants to the call's token."""
    monkeypatch.setattr(locks_module, "pause", lambda _: None)
    writes = _writes(cluster=True)
    progress = Progress([(b"a", FA, None)])
    _lost_at(writes.steps(progress), [])
    replies = iter([[1] * 4 + [None, None], [1, None], [b"a"], [1], [1]])
    outcomes, trips = _run(writes.steps(progress), lambda _: next(replies))
    assert outcomes == [Outcome.ADDED]
    assert trips[0][-1][0] == b"SET" and _args(trips[1][0])[0] == LOCK.sha
