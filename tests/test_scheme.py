# ruff: noqa: RUF001  (full-width and look-alike characters are what these tests are about)
"""Tests of simhash_redis.fingerprinting.scheme: validation, the meta string and its round trip."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_redis.errors import ConfigurationMismatch, IndexCorrupted, InvalidArgument, InvalidType
from simhash_redis.fingerprinting import Document, fingerprint, fingerprint_many
from simhash_redis.fingerprinting.scheme import DEFAULT_SCHEME, Scheme, stopwords_digest

DEFAULT_META = (
    "simhash-redis/2;features=shingles;n=3;f=64;weighting=tf;hash=xxh3;seed=0;"
    "norm=nfkc-casefold;unicode=15.1;stopwords=none"
)
# The default scheme's meta in version 1, which no release wrote: refused like any unknown version.
VERSION_1_META = (
    "simhash-redis/1;features=shingles;n=3;f=64;weighting=tf;hash=xxh3;seed=0;"
    "norm=nfkc-casefold;stopwords=none"
)


def test_defaults() -> None:
    scheme = Scheme()
    assert (scheme.features, scheme.n, scheme.f, scheme.weighting, scheme.seed) == (
        "shingles",
        3,
        64,
        "tf",
        0,
    )
    assert scheme.stopwords == ()
    assert scheme == DEFAULT_SCHEME
    assert scheme.to_meta() == DEFAULT_META


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_SCHEME.f = 32  # type: ignore[misc]


def test_stopwords_are_normalised_sorted_and_digested() -> None:
    scheme = Scheme(stopwords=["The", "a", "ＴＨＥ", "und"])  # type: ignore[arg-type]
    assert scheme.stopwords == ("a", "the", "und")
    assert scheme == Scheme(stopwords=("und", "the", "a"))
    digest = stopwords_digest(scheme.stopwords)
    assert len(digest) == 16
    assert scheme.to_meta().endswith(f";stopwords={digest}")
    assert digest == "ce82ba4de2f8d181"  # pinned: the digest is part of the stored meta


@given(
    st.sampled_from(["shingles", "words", "chars"]),
    st.integers(1, 16),
    st.sampled_from([32, 64, 128]),
    st.sampled_from(["tf", "binary"]),
    st.integers(0, (1 << 64) - 1),
)
def test_meta_round_trip(features_kind: str, n: int, f: int, weighting: str, seed: int) -> None:
    scheme = Scheme(features=features_kind, n=n, f=f, weighting=weighting, seed=seed)
    meta = scheme.to_meta()
    assert Scheme.from_meta(meta) == scheme
    assert Scheme.from_meta(meta.encode()) == scheme


def test_from_meta_with_stopwords() -> None:
    scheme = Scheme(stopwords=("a", "the"))
    meta = scheme.to_meta()
    assert Scheme.from_meta(meta, stopwords=["THE", "a"]) == scheme
    with pytest.raises(ConfigurationMismatch, match="pass the same list"):
        Scheme.from_meta(meta)
    with pytest.raises(ConfigurationMismatch, match="not the scheme's"):
        Scheme.from_meta(meta, stopwords=["a"])
    with pytest.raises(ConfigurationMismatch, match="not the scheme's"):
        Scheme.from_meta(DEFAULT_META, stopwords=["a"])
    assert Scheme.from_meta(DEFAULT_META, stopwords=[]) == DEFAULT_SCHEME


def test_other_versions_and_their_fields_are_refused() -> None:
    only_2 = r"^scheme version 1 is not supported \(this library computes version 2\)$"
    with pytest.raises(IndexCorrupted, match=only_2):
        Scheme.from_meta(VERSION_1_META)
    with pytest.raises(IndexCorrupted, match=r"scheme version 3 is not supported .*: upgrade simhash-redis$"):
        Scheme.from_meta(DEFAULT_META.replace("/2;", "/3;"))
    with pytest.raises(IndexCorrupted, match="unexpected fields"):
        Scheme.from_meta(DEFAULT_META.replace("unicode=15.1;", ""))
    with pytest.raises(IndexCorrupted, match="Unicode version"):
        Scheme.from_meta(DEFAULT_META.replace("unicode=15.1", "unicode=16.0"))


@pytest.mark.parametrize(
    "meta",
    [
        "",
        "garbage",
        "simhash-redis/1",
        "simhash-redis/x;features=shingles",
        DEFAULT_META.replace("simhash-redis/2", "simhash-redis/3"),
        VERSION_1_META.replace("simhash-redis/1", "simhash-redis/2"),
        DEFAULT_META.replace("simhash-redis/2", "other/2"),
        DEFAULT_META.replace("hash=xxh3", "hash=md5"),
        DEFAULT_META.replace("norm=nfkc-casefold", "norm=nfc"),
        DEFAULT_META.replace("n=3", "n=03"),
        DEFAULT_META.replace("n=3", "n=-3"),
        DEFAULT_META.replace("n=3", "n=99"),
        DEFAULT_META.replace("f=64", "f=63"),
        DEFAULT_META.replace("features=shingles", "features=lines"),
        DEFAULT_META.replace("weighting=tf", "weighting=idf"),
        DEFAULT_META.replace(";seed=0", ""),
        DEFAULT_META + ";extra=1",
        DEFAULT_META.replace("n=3;f=64", "f=64;n=3"),
        DEFAULT_META.replace("seed=0", "seed=١"),
        DEFAULT_META.replace("seed=0", "seed"),
    ],
)
def test_from_meta_rejects_garbage(meta: str) -> None:
    with pytest.raises(IndexCorrupted):
        Scheme.from_meta(meta)


def test_from_meta_rejects_bad_bytes_and_types() -> None:
    with pytest.raises(IndexCorrupted):
        Scheme.from_meta(b"\xff\xfe")
    with pytest.raises(InvalidType, match="meta must be a str"):
        Scheme.from_meta(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"features": "lines"}, InvalidArgument, "features"),
        ({"features": 1}, InvalidType, "features"),
        ({"n": 0}, InvalidArgument, "n"),
        ({"n": 17}, InvalidArgument, "n"),
        ({"n": True}, InvalidType, "n"),
        ({"n": 3.0}, InvalidType, "n"),
        ({"f": 48}, InvalidArgument, "f"),
        ({"f": 256}, InvalidArgument, "f"),
        ({"f": "64"}, InvalidType, "f"),
        ({"weighting": "idf"}, InvalidArgument, "weighting"),
        ({"seed": -1}, InvalidArgument, "seed"),
        ({"seed": 1 << 64}, InvalidArgument, "seed"),
        ({"seed": False}, InvalidType, "seed"),
        ({"stopwords": "the"}, InvalidType, "stopwords"),
        ({"stopwords": ["ok", 3]}, InvalidType, "stopwords"),
        ({"stopwords": [""]}, InvalidArgument, "stopwords"),
        ({"stopwords": ["the"], "features": "chars"}, InvalidArgument, "stopwords"),
    ],
)
def test_validation(kwargs: dict[str, object], error: type[Exception], name: str) -> None:
    with pytest.raises(error, match=f"^{name} "):
        Scheme(**kwargs)  # type: ignore[arg-type]


def test_methods_delegate() -> None:
    scheme = Scheme(f=128, seed=3)
    docs: list[Document] = ["one two three four", "中文文本", ["a", "b"], {"x": 1.0}]
    assert scheme.fingerprint(docs[0]) == fingerprint(docs[0], scheme)
    assert scheme.fingerprint_many(docs) == fingerprint_many(docs, scheme)


def test_schemes_differ_in_meta_when_bits_may_differ() -> None:
    metas = {
        Scheme().to_meta(),
        Scheme(n=2).to_meta(),
        Scheme(f=128).to_meta(),
        Scheme(seed=1).to_meta(),
        Scheme(weighting="binary").to_meta(),
        Scheme(features="words").to_meta(),
        Scheme(stopwords=("a",)).to_meta(),
    }
    assert len(metas) == 7


def test_words_has_no_n() -> None:
    """An unused n must not make two otherwise equal schemes (and their indexes) incompatible."""
    assert Scheme(features="words", n=3) == Scheme(features="words", n=1)
    assert Scheme(features="words", n=5).to_meta() == Scheme(features="words").to_meta()
