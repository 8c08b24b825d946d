"""Verified mode pinned in an index's meta, and add_if_new deciding by the Jaccard threshold, race-free."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from simhash_redis import (
    ConfigurationMismatch,
    IndexCorrupted,
    IndexNotFound,
    InvalidType,
    Layout,
    MinHasher,
    Outcome,
    SimhashIndex,
    VerifiedIndex,
    open_index,
)
from simhash_redis.codec import encode_fp
from simhash_redis.store import Verification
from simhash_redis.store import reads as reads_module
from simhash_redis.store import writes as writes_module
from tests.servers import ClusterProcess
from tests.test_add_if_new import COUNT_RETRIES

_VOCAB = [f"word{i}" for i in range(3000)]
_CLIENTS = {"real": "redis_client", "fake": "fake_client", "cluster": "redis_cluster_client"}
K8 = {"k": 8, "layout": Layout.permuted(64, 8, blocks=10), "id_buckets": 64}


def article(seed: int, words: int = 300) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_VOCAB) for _ in range(words))


def one_word_edit(text: str, seed: int) -> str:
    words = text.split()
    rng = random.Random(seed)
    words[rng.randrange(len(words))] = rng.choice(_VOCAB)
    return " ".join(words)


@pytest.fixture(params=sorted(_CLIENTS))
def client(request: pytest.FixtureRequest) -> redis.Redis:
    """A real server (guarded script), fakeredis, and a local Redis Cluster (bucket locks)."""
    found: redis.Redis = request.getfixturevalue(_CLIENTS[request.param])
    return found


def test_the_mode_is_pinned_in_the_meta_and_adopted(redis_client: redis.Redis) -> None:
    created = VerifiedIndex(SimhashIndex(redis_client, "pin", **K8), MinHasher(num_perm=64), threshold=0.9)
    assert (
        redis_client.hget(created.index.keys.meta, "verified")
        == b"minhash;perm=64;bits=8;n=3;seed=0;threshold=0.9;bands=8x4;band_buckets=16384"
    )
    # Another worker names nothing and gets the same mode.
    adopted = VerifiedIndex(SimhashIndex(redis_client, "pin"))
    assert adopted.threshold == 0.9 and adopted.hasher.describe() == created.hasher.describe()
    assert adopted.index.config.verification == Verification(0.9, num_perm=64, bands=8, rows=4)
    # Naming another mode is refused, not silently mixed.
    with pytest.raises(ConfigurationMismatch, match=r"threshold=0\.9"):
        VerifiedIndex(SimhashIndex(redis_client, "pin"), threshold=0.8)
    with pytest.raises(ConfigurationMismatch, match="perm=64"):
        VerifiedIndex(SimhashIndex(redis_client, "pin"), MinHasher())
    with pytest.raises(ConfigurationMismatch):
        SimhashIndex(redis_client, "pin", verification=Verification(0.8))


def test_from_url_creates_a_verified_index(redis_url: str, redis_client: redis.Redis) -> None:
    index = VerifiedIndex.from_url(redis_url, "made", threshold=0.85, **K8)
    assert index.threshold == 0.85 and index.index.k == 8
    again = VerifiedIndex.from_url(redis_url, "made")
    assert again.verification == index.verification
    assert SimhashIndex(redis_client, "made").config.verification == index.verification


def test_get_and_a_text_given_as_a_batch_as_on_a_plain_index(redis_url: str) -> None:
    # open_index's default (a VerifiedIndex) had no get: AttributeError, while AsyncVerifiedIndex had it.
    index = open_index("got", redis_url)
    assert isinstance(index, VerifiedIndex)
    index.add("a", "The council approved the new budget on Tuesday after a long debate")
    assert index.get("a") == index.index.get("a") is not None and index.get("b") is None
    # A text given for a batch was read as one query per character (five of "hello"): refused, as the
    # plain index refuses it.
    with pytest.raises(InvalidType, match="queries must be a list"):
        index.near_many("hello")


def test_a_plain_handle_of_a_verified_index_reads_and_never_writes(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "ro", **K8))
    text = article(1)
    verified.add("a", text)
    plain = SimhashIndex(redis_client, "ro")
    assert [m.id for m in plain.near(text)] == ["a"] and plain.get("a") is not None
    before = sorted(redis_client.keys("*"))
    for write in (
        lambda: plain.add("b", article(2)),
        lambda: plain.add_many([("b", article(2))]),
        lambda: plain.add_if_new("b", article(2)),
        lambda: plain.bulk_add([("b", article(2))]),
        lambda: plain.bulk_add_columns([(["b"], [article(2)])]),
        lambda: plain.remove("a"),
    ):
        with pytest.raises(ConfigurationMismatch, match="is verified"):
            write()
    assert sorted(redis_client.keys("*")) == before and len(plain) == 1


def test_a_verified_index_made_before_pinning_is_pinned_by_its_first_opening(
    redis_client: redis.Redis,
) -> None:
    index = SimhashIndex(redis_client, "old", **K8)
    assert index.config.verification is None
    verified = VerifiedIndex(index)
    assert verified.verification == Verification.of()
    assert SimhashIndex(redis_client, "old").config.verification == Verification.of()


def test_an_existing_plain_index_is_converted_only_when_asked(redis_client: redis.Redis) -> None:
    """An index that exists without a pinned mode was made plain: VerifiedIndex refuses it as open_index
    does (from_url and on_client included), and convert=True makes it verified while it is empty."""
    SimhashIndex(redis_client, "made-plain", **K8)
    url = "redis://{host}:{port}/0".format(**redis_client.connection_pool.connection_kwargs)
    for opening in (
        lambda: VerifiedIndex(SimhashIndex(redis_client, "made-plain")),
        lambda: VerifiedIndex.on_client(redis_client, "made-plain"),
        lambda: VerifiedIndex.from_url(url, "made-plain"),
        lambda: open_index("made-plain", url=url, verified=True),
    ):
        with pytest.raises(ConfigurationMismatch, match="is not verified"):
            opening()
    assert SimhashIndex(redis_client, "made-plain").config.verification is None
    verified = VerifiedIndex(SimhashIndex(redis_client, "made-plain"), convert=True)
    assert verified.verification == Verification.of()
    assert open_index("made-plain", url=url, verified=True).verification == Verification.of()
    plain = SimhashIndex(redis_client, "loaded-plain", **K8)
    plain.add("a", article(1))
    with pytest.raises(ConfigurationMismatch, match="without sketches"):  # its documents have none
        VerifiedIndex(SimhashIndex(redis_client, "loaded-plain"), convert=True)


def test_add_if_new_decides_by_the_jaccard_threshold(client: redis.Redis) -> None:
    index = VerifiedIndex(SimhashIndex(client, "vnew", **K8))
    text = article(3)
    assert index.add_if_new("a", text) is None
    edit = one_word_edit(text, 4)
    found = index.add_if_new("b", edit)
    assert found is not None and found.id == "a" and found.jaccard >= 0.8
    assert index.index.get("b") is None and index.sketch_of("b") is None
    # Its own entry when the id is already stored with a near-duplicate text.
    own = index.add_if_new("a", edit)
    assert own is not None and own.id == "a"
    # A different text is stored with its sketch; within the batch, the second copy finds the first.
    results = index.add_if_new_many([("c", article(5)), ("d", one_word_edit(article(5), 6))])
    assert results[0] is None and results[1] is not None and results[1].id == "c"
    assert index.sketch_of("c") is not None and index.sketch_of("d") is None
    assert len(index.index) == 2


def test_a_hamming_candidate_below_the_threshold_is_not_a_duplicate(client: redis.Redis) -> None:
    strict = VerifiedIndex(SimhashIndex(client, "strict", **K8), threshold=1.0)
    text = article(7)
    strict.add_if_new("a", text)
    edit = one_word_edit(text, 8)
    assert [m.id for m in strict.index.near(edit)] == ["a"]  # a Hamming candidate ...
    assert strict.add_if_new("b", edit) is None  # ... that the sketches reject
    assert strict.index.get("b") is not None and strict.sketch_of("b") == strict.hasher.stored_sketch(edit)


def test_a_replacement_keeps_the_old_sketch_until_its_text_is_written(client: redis.Redis) -> None:
    index = VerifiedIndex(SimhashIndex(client, "repl", **K8))
    first, other = article(9), article(10)
    index.add("x", first)
    index.add("y", other)
    # "x" with a copy of y's text: not stored, and x keeps its own sketch.
    found = index.add_if_new("x", one_word_edit(other, 11))
    assert found is not None and found.id == "y"
    assert index.sketch_of("x") == index.hasher.stored_sketch(first)
    # "x" with a new text: replaced, text and sketch together.
    new = article(12)
    assert index.add_if_new("x", new) is None
    assert index.sketch_of("x") == index.hasher.stored_sketch(new) and index.index.get(
        "x"
    ) == index.index.fingerprint(new)


RACER = COUNT_RETRIES + textwrap.dedent(
    """
    import json, sys, time
    from simhash_redis import Layout, SimhashIndex, VerifiedIndex
    from simhash_redis.transport.connection import client_from_url
    url, me, path, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    groups = json.load(open(path))
    client = client_from_url(url)
    index = VerifiedIndex(SimhashIndex(client, "vrace", batch_size=3))
    stored = 0
    for start in range(0, len(groups), 3):
        client.incr(f"arrive:{start}")
        while int(client.get(f"arrive:{start}")) < len(groups[0]):
            time.sleep(0.0005)  # the racers share two cores with the rest of the suite
        docs = [(f"g{g}-p{me}", groups[g][me]) for g in range(start, min(start + 3, len(groups)))]
        if mode == "naive":  # the check-then-insert this test exists to reject
            for i, text in docs:
                if not index.near(text):
                    index.add(i, text)
                    stored += 1
        elif me % 2:
            stored += sum(index.add_if_new(i, text) is None for i, text in docs)
        else:
            stored += sum(r is None for r in index.add_if_new_many(docs))
    print(json.dumps([stored, retried]))
    """
)


def _race_groups(index: VerifiedIndex, groups: int, racers: int) -> list[list[str]]:
    """Per group, texts that are near-duplicates of each other by both Hamming distance and Jaccard."""
    out = []
    for g in range(groups):
        base = article(1000 + g)
        centre = index.index.fingerprint(base)
        texts, seed = [], 0
        while len(texts) < racers:
            seed += 1
            text = one_word_edit(base, g * 1000 + seed)
            # Within k/2 of the base: every two of them within k (triangle inequality).
            if (index.index.fingerprint(text) ^ centre).bit_count() <= index.index.k // 2:
                texts.append(text)
        out.append(texts)
    return out


def race(
    url: str,
    client: redis.Redis | RedisCluster,
    tmp_path: Path,
    groups: int,
    mode: str = "atomic",
    racers: int = 6,
) -> int:
    index = VerifiedIndex(SimhashIndex(client, "vrace", **K8))
    texts = _race_groups(index, groups, racers)
    path = tmp_path / "groups.json"
    path.write_text(json.dumps(texts))
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, url, str(p), str(path), mode], stdout=subprocess.PIPE)
        for p in range(racers)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    ids = [f"g{g}-p{p}" for g in range(groups) for p in range(racers)]
    stored = [i for i, fp in zip(ids, index.index.get_many(ids), strict=True) if fp is not None]
    per_group: dict[str, int] = {}
    for doc_id in stored:
        per_group[doc_id.split("-")[0]] = per_group.get(doc_id.split("-")[0], 0) + 1
    counts = [json.loads(out) for out in outs]
    assert sum(stored for stored, _ in counts) == groups
    assert sorted(per_group.values()) == [1] * groups
    # Every stored document has its sketch, and no refused one left a sketch behind.
    assert [i for i in ids if index.sketch_of(i) is not None] == stored
    # The read-check-write rounds the racers repeated, each after meeting another's write or lock.
    return sum(retried for _, retried in counts)


def test_racing_workers_store_one_document_per_group(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    race(redis_url, redis_client, tmp_path, groups=45)


def test_racing_workers_on_a_cluster_store_one_document_per_group(
    redis_cluster: ClusterProcess, tmp_path: Path
) -> None:
    redis_cluster.flushall()
    client = redis_cluster.client()
    # Twelve groups, each raced for by all six: the racers meet each other's locks more than a dozen
    # times a group (more groups would only repeat that). Asserted: that they met at all.
    assert race(redis_cluster.url, client, tmp_path, groups=12) > 0
    client.close()


def test_the_race_catches_check_then_insert(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError):
        race(redis_url, redis_client, tmp_path, groups=45, mode="naive")


def test_pinning_never_recreates_a_dropped_index(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "gone", **K8)
    index.drop()
    with pytest.raises(IndexNotFound):
        VerifiedIndex(index)
    assert redis_client.exists(index.keys.meta) == 0


def test_a_refused_write_leaves_the_ids_sketch_as_it_was(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = VerifiedIndex(SimhashIndex(redis_client, "refused", **K8))
    first, second = article(20), article(21)
    index.add("y", first)
    read = reads_module.Reads.near_and_members
    applied = writes_module.Writes.apply
    seen: list[tuple[object, bytes | None]] = []

    def racing(self: reads_module.Reads, fps: list[int], *rest: Any) -> object:
        got = read(self, fps, *rest)
        if not seen:  # another worker writes into one of the document's table sets meanwhile
            redis_client.sadd(index.index.keys.tables(fps[0])[0], b"12345")
        return got

    def watched(self: writes_module.Writes, ops: list[writes_module.Write], *rest: Any) -> object:
        out = applied(self, ops, *rest)
        seen.append((out, index.sketch_of("y")))
        return out

    monkeypatch.setattr(reads_module.Reads, "near_and_members", racing)
    monkeypatch.setattr(writes_module.Writes, "apply", watched)
    assert index.add_if_new("y", second) is None
    # The first write was refused by the guard, and the id kept its sketch (no worker could see the
    # second text's sketch beside the first text's fingerprint); the second round stored both.
    assert seen[0] == ([None], index.hasher.stored_sketch(first))
    assert seen[1] == ([Outcome.REPLACED], index.hasher.stored_sketch(second))
    assert index.sketch_of("y") == index.hasher.stored_sketch(second)


def test_add_writes_a_document_and_its_sketch_in_one_step(redis_client: redis.Redis) -> None:
    index = VerifiedIndex(SimhashIndex(redis_client, "onestep", **K8))
    first, second = article(30), article(31)
    assert index.add("y", first) is Outcome.ADDED
    # The fingerprint map's bucket of the second text's fingerprint is broken (another program's key):
    # the write fails, and the id keeps its fingerprint and its sketch together.
    fp = index.index.fingerprint(second)
    redis_client.set(index.index.keys.fp_bucket(encode_fp(fp, 64)), b"not a hash")
    with pytest.raises(IndexCorrupted):
        index.add("y", second)
    assert index.index.get("y") == index.index.fingerprint(first)
    assert index.sketch_of("y") == index.hasher.stored_sketch(first)
    redis_client.delete(index.index.keys.fp_bucket(encode_fp(fp, 64)))
    assert index.add("y", second) is Outcome.REPLACED
    assert index.sketch_of("y") == index.hasher.stored_sketch(second)
