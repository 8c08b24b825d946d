"""Bad input at the API: every public method refuses malformed arguments with a typed error.

Every refusal is under the one root SimhashRedisError, is also a ValueError (InvalidArgument, for a value
out of range) or a TypeError (InvalidType, for a wrong type), and its message names the argument. A
refused batch writes nothing. Runs against the suite's real server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.errors import InvalidArgument, InvalidFingerprint, InvalidType, SimhashRedisError

A = 0x0123456789ABCDEF
Case = tuple[str, Callable[[SimhashIndex, redis.Redis], Any], type[SimhashRedisError], str]

CASES: list[Case] = [
    # constructor and from_url
    ("client", lambda i, c: SimhashIndex("redis://127.0.0.1", "n"), InvalidType, "client"),
    ("name-type", lambda i, c: SimhashIndex(c, 5), InvalidType, "name"),  # type: ignore[arg-type]
    ("name-empty", lambda i, c: SimhashIndex(c, ""), InvalidArgument, "name"),
    ("name-colon", lambda i, c: SimhashIndex(c, "a:b"), InvalidArgument, "name"),
    ("name-glob", lambda i, c: SimhashIndex(c, "a*"), InvalidArgument, "name"),
    ("name-bracket", lambda i, c: SimhashIndex(c, "a[b]"), InvalidArgument, "name"),
    ("name-long", lambda i, c: SimhashIndex(c, "a" * 101), InvalidArgument, "name"),
    ("prefix", lambda i, c: SimhashIndex(c, "n", prefix="p:q"), InvalidArgument, "prefix"),
    ("prefix-type", lambda i, c: SimhashIndex(c, "n", prefix=1), InvalidType, "prefix"),  # type: ignore[arg-type]
    ("k-type", lambda i, c: SimhashIndex(c, "n", k="3"), InvalidType, "k"),  # type: ignore[arg-type]
    ("k-bool", lambda i, c: SimhashIndex(c, "n", k=True), InvalidType, "k"),
    ("k-negative", lambda i, c: SimhashIndex(c, "n", k=-1), InvalidArgument, "k"),
    ("k-too-big", lambda i, c: SimhashIndex(c, "n", k=64), InvalidArgument, "k"),
    ("f", lambda i, c: SimhashIndex(c, "n", f=48), InvalidArgument, "f"),
    ("f-type", lambda i, c: SimhashIndex(c, "n", f="64"), InvalidType, "f"),  # type: ignore[arg-type]
    ("batch_size-0", lambda i, c: SimhashIndex(c, "n", batch_size=0), InvalidArgument, "batch_size"),
    ("batch_size-float", lambda i, c: SimhashIndex(c, "n", batch_size=1.5), InvalidArgument, "batch_size"),  # type: ignore[arg-type]
    ("id_buckets", lambda i, c: SimhashIndex(c, "n", id_buckets=0), InvalidArgument, "id_buckets"),
    ("layout", lambda i, c: SimhashIndex(c, "n", layout="x"), InvalidType, "layout"),  # type: ignore[arg-type]
    ("scheme", lambda i, c: SimhashIndex(c, "n", scheme="x"), InvalidType, "scheme"),  # type: ignore[arg-type]
    ("url-type", lambda i, c: SimhashIndex.from_url(5, "n"), InvalidType, "url"),  # type: ignore[arg-type]
    ("url-scheme", lambda i, c: SimhashIndex.from_url("http://127.0.0.1", "n"), InvalidArgument, "url"),
    ("url-port", lambda i, c: SimhashIndex.from_url("redis://127.0.0.1:port/0", "n"), InvalidArgument, "url"),
    # fingerprints
    ("fingerprint-big", lambda i, c: i.fingerprint(2**64), InvalidFingerprint, "fingerprint"),
    ("fingerprint-negative", lambda i, c: i.fingerprint(-1), InvalidFingerprint, "fingerprint"),
    ("fingerprint-bool", lambda i, c: i.fingerprint(True), InvalidType, "fingerprint"),
    ("fingerprint-float", lambda i, c: i.fingerprint(1.5), InvalidType, "doc"),  # type: ignore[arg-type]
    ("fingerprint-none", lambda i, c: i.fingerprint(None), InvalidType, "doc"),  # type: ignore[arg-type]
    ("tokens", lambda i, c: i.fingerprint(["a", 5]), InvalidType, "token"),  # type: ignore[list-item]
    ("weight-type", lambda i, c: i.fingerprint({"a": "x"}), InvalidType, "weight"),  # type: ignore[dict-item]
    ("weight-nan", lambda i, c: i.fingerprint({"a": float("nan")}), InvalidArgument, "weight"),
    ("weight-inf", lambda i, c: i.fingerprint([("a", float("inf"))]), InvalidArgument, "weight"),
    ("fingerprint_many", lambda i, c: i.fingerprint_many([A, -1]), InvalidFingerprint, "fingerprint"),
    # reads
    ("near-k", lambda i, c: i.near(A, k=4), InvalidArgument, "k"),
    ("near-k-negative", lambda i, c: i.near(A, k=-1), InvalidArgument, "k"),
    ("near-k-type", lambda i, c: i.near(A, k="1"), InvalidType, "k"),  # type: ignore[arg-type]
    ("near-fingerprint", lambda i, c: i.near(2**64), InvalidFingerprint, "fingerprint"),
    ("near-doc", lambda i, c: i.near(None), InvalidType, "doc"),  # type: ignore[arg-type]
    ("near_many", lambda i, c: i.near_many([A, -1]), InvalidFingerprint, "fingerprint"),
    ("near_many-k", lambda i, c: i.near_many([A], k=99), InvalidArgument, "k"),
    ("get-type", lambda i, c: i.get(5), InvalidType, "id"),  # type: ignore[arg-type]
    ("get-empty", lambda i, c: i.get(""), InvalidArgument, "id"),
    ("get-long", lambda i, c: i.get("é" * 257), InvalidArgument, "id"),  # 514 UTF-8 bytes
    ("get-surrogate", lambda i, c: i.get("\ud800"), InvalidArgument, "id"),
    ("get_many", lambda i, c: i.get_many(["a", 5]), InvalidType, "id"),  # type: ignore[list-item]
    # writes
    ("add-id-empty", lambda i, c: i.add("", A), InvalidArgument, "id"),
    ("add-id-type", lambda i, c: i.add(b"x", A), InvalidType, "id"),  # type: ignore[arg-type]
    ("add-fingerprint", lambda i, c: i.add("x", 2**64), InvalidFingerprint, "fingerprint"),
    ("add-bool", lambda i, c: i.add("x", False), InvalidType, "fingerprint"),
    ("add-doc", lambda i, c: i.add("x", None), InvalidType, "doc"),  # type: ignore[arg-type]
    ("add_many-item", lambda i, c: i.add_many([("a", A), "b"]), InvalidType, "items"),  # type: ignore[list-item]
    ("add_many-triple", lambda i, c: i.add_many([("a", A, 1)]), InvalidType, "items"),  # type: ignore[list-item]
    ("add_many-unique", lambda i, c: i.add_many([("", A)], unique=True), InvalidArgument, "id"),
    ("add_if_new-id", lambda i, c: i.add_if_new("", A), InvalidArgument, "id"),
    ("add_if_new-fingerprint", lambda i, c: i.add_if_new("x", -5), InvalidFingerprint, "fingerprint"),
    ("remove-empty", lambda i, c: i.remove(""), InvalidArgument, "id"),
    ("remove-type", lambda i, c: i.remove(5), InvalidType, "id"),  # type: ignore[arg-type]
    ("remove_many", lambda i, c: i.remove_many(["a", "x" * 513]), InvalidArgument, "id"),
]


@pytest.mark.parametrize(("case", "call", "error", "argument"), CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_refused_with_a_typed_error_naming_it(
    redis_client: redis.Redis,
    case: str,
    call: Callable[[SimhashIndex, redis.Redis], Any],
    error: type[SimhashRedisError],
    argument: str,
) -> None:
    index = SimhashIndex(redis_client, "bad", k=3)
    with pytest.raises(error) as info:
        call(index, redis_client)
    exc = info.value
    assert isinstance(exc, SimhashRedisError)
    natural = TypeError if isinstance(exc, InvalidType) else ValueError
    assert isinstance(exc, natural), f"{case}: {type(exc).__mro__}"
    assert argument in str(exc), f"{case}: the message does not name {argument!r}: {exc}"
    assert index.count() == (0, 0)  # nothing was written


def test_bad_document_anywhere_in_a_batch_writes_nothing_of_it(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "bad", k=3)
    good = [(f"g{i}", A ^ (1 << i)) for i in range(20)]
    for bad in [("", A), ("x", 2**64), ("x", None), ("\ud800", A), "not a pair"]:
        with pytest.raises(SimhashRedisError):
            index.add_many([*good, bad])  # type: ignore[list-item]
        with pytest.raises(SimhashRedisError):
            index.add_many([*good, bad], unique=True)  # type: ignore[list-item]
    assert index.count() == (0, 0)
    assert index.get_many([doc_id for doc_id, _ in good]) == [None] * len(good)


@pytest.mark.parametrize("verified", [False, True])
def test_an_empty_text_is_refused_naming_it_and_nothing_of_the_call_is_stored(
    redis_client: redis.Redis, verified: bool
) -> None:
    # As the CLI and the service refuse it: stored, its fingerprint 0 made every later empty page (a
    # crawler's failed fetch) a near-duplicate of the first.
    index = (
        VerifiedIndex.on_client(redis_client, "blank") if verified else SimhashIndex(redis_client, "blank")
    )
    good = [(f"g{i}", f"a story about the city council number {i}") for i in range(5)]
    for blank in ("", "  \n\t", b"", b" "):
        for method, args in (("add", ("e", blank)), ("add_if_new", ("e", blank)), ("near", (blank,))):
            with pytest.raises(
                InvalidArgument, match=r"^the text is empty or only white space: it has no word"
            ):
                getattr(index, method)(*args)
        with pytest.raises(InvalidArgument, match=r"^the text \(document 5 of the call\) is empty"):
            index.add_many([*good, ("e", blank)])
        with pytest.raises(InvalidArgument, match=r"\(document 5 of the call\)"):
            index.near_many([text for _, text in good] + [blank])
    assert index.count() == (0, 0)
    index.add("p", "!!!")  # no word either, but not blank: fingerprint 0, as docs/fingerprints.md says
    assert index.get("p") == 0


def test_a_malformed_url_never_shows_its_password(redis_client: redis.Redis) -> None:
    for url in ("http://user:hunter2-secret@127.0.0.1", "redis://user:hunter2-secret@127.0.0.1:port/0"):
        with pytest.raises(InvalidArgument) as info:
            SimhashIndex.from_url(url, "n")
        assert "hunter2-secret" not in str(info.value) and "hunter2-secret" not in repr(info.value)
        assert "url" in str(info.value)


def test_values_at_the_edges_are_accepted(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "edge", k=3)
    longest = "é" * 256  # exactly 512 UTF-8 bytes
    index.add_many([("0", 0), (longest, 2**64 - 1), ("🙂", 1)])
    assert index.get_many(["0", longest, "🙂"]) == [0, 2**64 - 1, 1]
    assert [m.id for m in index.near(0, k=0)] == ["0"]
    assert [m.id for m in index.near(2**64 - 1, k=0)] == [longest]
    assert index.near(A, k=0) == []
    assert 5 not in index  # not an id: False, not an error
    assert index.verify().ok


# -- batches of the wrong shape (found by this file: a bare TypeError, or a str silently split up) --------


@pytest.mark.parametrize("method", ["add_many", "remove_many", "fingerprint_many", "near_many", "get_many"])
def test_a_non_iterable_batch_is_an_invalid_type(redis_client: redis.Redis, method: str) -> None:
    """Not a bare builtin TypeError ("'int' object is not iterable") outside the error root."""
    index = SimhashIndex(redis_client, "bad", k=3)
    with pytest.raises(InvalidType):
        getattr(index, method)(5)


@pytest.mark.parametrize("method", ["get_many", "near_many", "remove_many"])
def test_a_str_where_a_list_is_expected_is_refused(redis_client: redis.Redis, method: str) -> None:
    """A str is a Sequence: get_many("abc") must not look up the ids "a", "b" and "c"."""
    index = SimhashIndex(redis_client, "bad", k=3)
    with pytest.raises(InvalidType):
        getattr(index, method)("abc")


def test_backoff_of_the_wrong_type_is_refused(redis_client: redis.Redis) -> None:
    """Refused when the index is opened, not with an AttributeError on the first retry."""
    with pytest.raises(InvalidType, match="backoff"):
        SimhashIndex(redis_client, "bad", backoff="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["-", ".", "..", "..."])
def test_names_that_read_as_paths_or_stdin_are_refused(redis_client: redis.Redis, name: str) -> None:
    with pytest.raises(InvalidArgument, match="only dots"):
        SimhashIndex(redis_client, name)
    with pytest.raises(InvalidArgument, match="only dots"):
        SimhashIndex(redis_client, "ok", prefix=name)


def test_weights_past_float_range_saturate_without_a_warning() -> None:
    import warnings

    from simhash_redis import fingerprint

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fingerprint({"a": 1e308, "b": 1e308, "c": 1.0}) == fingerprint(
            {"a": 1e308, "b": 1e308, "c": 2.0}
        )
