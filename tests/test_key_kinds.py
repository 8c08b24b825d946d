"""KeySchema.kind_of: the one reader of the index's key names (stats, verify), beside their builders."""

from __future__ import annotations

from simhash_redis import Layout
from simhash_redis.store import KeySchema


def test_every_key_the_schema_builds_is_read_back_as_its_kind() -> None:
    keys = KeySchema("simhash", "news", Layout.pigeonhole(64, 3), 1 << 17)
    fp = 0x0123_4567_89AB_CDEF
    for number, key in enumerate(keys.tables(fp)):
        assert keys.kind_of(key) == ("table", number)
        assert keys.stored_type(key) == b"set"
    assert keys.kind_of(keys.id_bucket(b"doc-1")) == ("id", 0)
    assert keys.kind_of(keys.fp_bucket(b"12345")) == ("fp", 0)
    assert keys.kind_of(keys.band_form(7).key(3)) == ("band", 7)
    assert keys.kind_of(keys.meta) == ("meta", 0)
    assert keys.kind_of(keys.counts) == ("counts", 0)
    assert keys.kind_of(keys.lock(keys.tables(fp)[0])) == ("lock", 0)
    assert keys.stored_type(keys.lock(keys.tables(fp)[0])) == b"string"


def test_a_periods_key_is_its_kind_only_when_periods_are_asked_for() -> None:
    keys = KeySchema("simhash", "news", Layout.pigeonhole(64, 3), 64)
    in_period = keys.in_window(29_000_123)
    table_key = in_period.tables(5)[2]
    assert keys.kind_of(table_key) is None and keys.stored_type(table_key) is None
    assert keys.kind_of(table_key, periods=True) == ("table", 2)
    assert keys.kind_of(in_period.fp_bucket(b"5"), periods=True) == ("fp", 0)


def test_keys_of_another_index_or_shape_are_none_of_ours() -> None:
    keys = KeySchema("simhash", "news", Layout.pigeonhole(64, 3), 64)
    other = KeySchema("simhash", "newsroom", Layout.pigeonhole(64, 3), 64)
    for key in (*other.tables(5), other.meta, b"simhash:news:tx:1", b"simhash:news:id", b"simhash:news:"):
        assert keys.kind_of(key) is None, key
