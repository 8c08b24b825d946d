"""The index contract, run on a real server and on fakeredis (the `any_client` fixture)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import redis

from simhash_redis import (
    ConfigurationMismatch,
    InvalidArgument,
    InvalidFingerprint,
    InvalidType,
    Layout,
    Match,
    Outcome,
    Scheme,
    SimhashIndex,
    distance,
)
from simhash_redis.asyncio import AsyncSimhashIndex
from tests.asyncio_facade import Blocking

A = 0x0123456789ABCDEF


def flip(fp: int, *bits: int) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


_CLIENTS = {
    "real": "redis_client",
    "fake": "fake_client",
    "cluster": "redis_cluster_client",
    "windowed": "redis_client",
    "windowed_cluster": "redis_cluster_client",
    "asyncio": "redis_client",
    "asyncio_cluster": "redis_cluster_client",
}


@pytest.fixture(params=sorted(_CLIENTS))
def index(request: pytest.FixtureRequest) -> Iterator[SimhashIndex]:
    """The contract on a real server, on fakeredis, on a local Redis Cluster, with a retention window
    (a day: nothing expires during a test, but every call goes through the periods' keys), and through
    `AsyncSimhashIndex` on a server and a cluster (driven from these synchronous tests by `Blocking`)."""
    client = request.getfixturevalue(_CLIENTS[request.param])
    retention = "1d" if request.param.startswith("windowed") else None
    # Few id buckets keep count(), which sums bucket sizes on a cluster, quick.
    buckets = 1024 if "cluster" in request.param else None
    if not request.param.startswith("asyncio"):
        yield SimhashIndex(client, name="contract", k=3, id_buckets=buckets, retention=retention)
        return
    url = request.getfixturevalue("redis_cluster" if "cluster" in request.param else "redis_server").url
    facade = Blocking(lambda: AsyncSimhashIndex.from_url(url, "contract", k=3, id_buckets=buckets))
    yield facade  # type: ignore[misc]
    facade.close()


def test_add_near_get_remove(index: SimhashIndex) -> None:
    assert index.add("a", A) is Outcome.ADDED
    assert index.add("b", flip(A, 0, 17, 40)) is Outcome.ADDED  # distance 3: exactly k
    assert index.add("c", flip(A, 0, 17, 40, 63)) is Outcome.ADDED  # distance 4: outside
    assert index.near(A) == [Match("a", A, 0), Match("b", flip(A, 0, 17, 40), 3)]
    assert index.near(A, k=2) == [Match("a", A, 0)]
    assert index.get("b") == flip(A, 0, 17, 40)
    assert index.get("zzz") is None
    assert len(index) == 3
    assert index.remove("a") is True
    assert index.remove("a") is False
    assert [m.id for m in index.near(A)] == ["b"]
    assert len(index) == 2


def test_identical_fingerprints_under_different_ids(index: SimhashIndex) -> None:
    outcomes = index.add_many([("x2", A), ("x1", A), ("x3", A)])
    assert outcomes == [Outcome.ADDED] * 3
    assert index.near(A) == [Match("x1", A, 0), Match("x2", A, 0), Match("x3", A, 0)]
    assert index.count() == (3, 1)
    index.remove("x1")
    assert [m.id for m in index.near(A)] == ["x2", "x3"]
    index.remove_many(["x2", "x3"])
    assert index.near(A) == []
    assert index.count() == (0, 0)


def test_all_zero_and_all_one_fingerprints(index: SimhashIndex) -> None:
    index.add("zero", 0)
    index.add("ones", 2**64 - 1)
    index.add("three", 0b111)
    assert index.near(0) == [Match("zero", 0, 0), Match("three", 7, 3)]
    assert index.near(2**64 - 1) == [Match("ones", 2**64 - 1, 0)]
    with pytest.raises(InvalidArgument, match="empty or only white space"):
        index.near("")  # its fingerprint, 0, would find every other empty text: refused, as by the CLI


def test_replace_and_unchanged(index: SimhashIndex) -> None:
    far = A ^ (2**64 - 1)
    assert index.add("a", A) is Outcome.ADDED
    assert index.add("a", A) is Outcome.UNCHANGED
    assert index.add("a", far) is Outcome.REPLACED
    assert index.near(A) == []
    assert index.near(far) == [Match("a", far, 0)]
    assert index.count() == (1, 1)


def test_replace_keeps_fingerprint_shared_with_another_id(index: SimhashIndex) -> None:
    index.add_many([("a", A), ("b", A)])
    index.add("a", 5)
    assert index.near(A) == [Match("b", A, 0)]
    assert index.count() == (2, 2)


def test_same_id_twice_in_one_batch_last_wins(index: SimhashIndex) -> None:
    assert index.add_many([("a", A), ("a", 5)]) == [Outcome.ADDED, Outcome.REPLACED]
    assert index.get("a") == 5
    assert index.count() == (1, 1)


def test_text_documents(index: SimhashIndex) -> None:
    text = "the quick brown fox jumps over the lazy dog near the river bank today"
    index.add("t", text)
    assert index.near(text)[0] == Match("t", index.fingerprint(text), 0)
    assert index.get("t") == index.scheme.fingerprint(text)


def test_near_many_matches_near(index: SimhashIndex) -> None:
    index.add_many([(f"d{i}", flip(A, i)) for i in range(10)])
    queries = [A, flip(A, 1, 2), 12345, "some text"]
    assert index.near_many(queries) == [index.near(q) for q in queries]
    assert index.near_many([]) == []


def test_k_bounds(index: SimhashIndex) -> None:
    with pytest.raises(InvalidArgument, match=r"k must be in 0\.\.3"):
        index.near(A, k=4)
    with pytest.raises(InvalidArgument):
        index.near(A, k=-1)
    with pytest.raises(InvalidType):
        index.near(A, k=1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 2**64, True])
def test_bad_fingerprints(index: SimhashIndex, bad: int) -> None:
    with pytest.raises((InvalidFingerprint, InvalidType)):
        index.add("a", bad)
    with pytest.raises((InvalidFingerprint, InvalidType)):
        index.near(bad)


@pytest.mark.parametrize("bad_id", ["", "x" * 513, 5, None, "\ud800"])
def test_bad_ids(index: SimhashIndex, bad_id: object) -> None:
    with pytest.raises((InvalidArgument, InvalidType), match="id"):
        index.add(bad_id, A)  # type: ignore[arg-type]


def test_bad_batch_writes_nothing(index: SimhashIndex) -> None:
    with pytest.raises(InvalidFingerprint):
        index.add_many([("ok", A), ("bad", 2**64)])
    assert len(index) == 0
    assert index.get("ok") is None


def test_reopen_adopts_stored_configuration(any_client: redis.Redis) -> None:
    layout = Layout.permuted(64, 2, blocks=4)
    SimhashIndex(any_client, "cfg", layout=layout, scheme=Scheme(n=2)).add("a", A)
    again = SimhashIndex(any_client, "cfg")
    assert again.layout == layout and again.k == 2 and again.scheme == Scheme(n=2)
    assert again.near(A) == [Match("a", A, 0)]


@pytest.mark.parametrize(
    "kwargs",
    [dict(k=2), dict(f=32), dict(layout=Layout.permuted(64, 3, blocks=6)), dict(scheme=Scheme(n=4))],
)
def test_mismatched_configuration_refused(any_client: redis.Redis, kwargs: dict[str, object]) -> None:
    SimhashIndex(any_client, "cfg", k=3)
    with pytest.raises(ConfigurationMismatch, match="cfg"):
        SimhashIndex(any_client, "cfg", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("f", [32, 128])
def test_other_widths(any_client: redis.Redis, f: int) -> None:
    index = SimhashIndex(any_client, f"w{f}", f=f, k=3)
    top = 1 << (f - 1)
    index.add_many([("a", top | 1), ("b", top | 0b1111), ("c", (1 << f) - 2)])
    assert index.near(top | 1) == [Match("a", top | 1, 0), Match("b", top | 0b1111, 3)]
    with pytest.raises(InvalidFingerprint):
        index.add("x", 1 << f)


def test_names_isolate_indexes(any_client: redis.Redis) -> None:
    one = SimhashIndex(any_client, "one")
    other = SimhashIndex(any_client, "one-more")
    one.add("a", A)
    other.add("a", A)
    assert one.drop() > 0
    assert other.near(A) == [Match("a", A, 0)]
    assert [k for k in any_client.scan_iter("simhash:one:*")] == []


def test_bad_names(any_client: redis.Redis) -> None:
    for bad in ["", "a:b", "a*", "x" * 101]:
        with pytest.raises(InvalidArgument, match="name"):
            SimhashIndex(any_client, bad)
    with pytest.raises(InvalidType):
        SimhashIndex("redis://x", "n")  # type: ignore[arg-type]


def test_tables_are_intsets_and_keys_readable(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "enc", k=3)
    index.add_many([(f"d{i}", flip(A, i, 63)) for i in range(5)])
    key = index.keys.tables(A)[1]
    assert key.startswith(b"simhash:enc:t1:")
    assert redis_client.object("encoding", key) == b"intset"
    assert redis_client.hget(b"simhash:enc:meta", "k") == b"3"


def test_distance_to_brute_force_tie_order(index: SimhashIndex) -> None:
    fps = [flip(A, *bits) for bits in itertools.combinations(range(6), 2)]
    index.add_many([(f"p{i:02d}", fp) for i, fp in enumerate(fps)])
    got = index.near(flip(A, 0))
    want = sorted(
        (Match(f"p{i:02d}", fp, distance(fp, flip(A, 0))) for i, fp in enumerate(fps)),
        key=lambda m: (m.distance, m.id),
    )
    assert got == [m for m in want if m.distance <= 3]


def test_remove_many_names_an_id_twice(index: SimhashIndex) -> None:
    index.add("a", A)
    assert index.remove_many(["a", "a", "zz"]) == [True, False, False]
    assert "a" not in index
    assert "" not in index


def test_a_client_of_another_kind_is_refused_with_what_to_use() -> None:
    with pytest.raises(InvalidType, match=r"got builtins\.str"):
        SimhashIndex("redis://localhost", "x")  # type: ignore[arg-type]
    import redis.asyncio  # not imported by `import redis` in every supported redis-py

    asyncio_client = redis.asyncio.Redis()  # never connects: refused before any command
    with pytest.raises(InvalidType, match=r"asyncio client .*use simhash_redis\.asyncio\.AsyncSimhashIndex"):
        SimhashIndex(asyncio_client, "x")  # type: ignore[arg-type]
