"""The compiled core's packing of the bulk path against the pure packer: the same bytes, chunk for chunk.

Hypothesis builds windows (ids of any bytes, fingerprints of any width up to 64, key values, fingerprints
shared by several ids) and compares what `store.grouped` sends for each step, with the compiled core
and without it, on a standalone server's packed form.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis.errors import InvalidArgument, InvalidType
from simhash_redis.fingerprinting import engine_choice
from simhash_redis.store import grouped
from simhash_redis.store.grouped import Column, attach_calls, commands, group, script_runs
from simhash_redis.store.keys import KeyForm, KeySchema
from simhash_redis.store.layout import Layout
from simhash_redis.transport.wire import arrays
from tests.native.conftest import pure_engine

SHA = b"0123456789abcdef0123456789abcdef01234567"


def sent(parts: Iterator[Any]) -> list[tuple[bytes, int]]:
    """Each chunk's RESP bytes and command count."""
    return [(part.packed(), len(part)) for part in parts]


windows = st.integers(min_value=0, max_value=60).flatmap(
    lambda n: st.tuples(
        st.lists(st.binary(min_size=1, max_size=12), min_size=n, max_size=n),
        st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=n, max_size=n),
        st.lists(st.integers(min_value=0, max_value=7), min_size=n, max_size=n),
        st.sampled_from([64, 32, 8]),
    )
)


@settings(max_examples=300, deadline=None)
@given(window=windows, width=st.sampled_from([0, 1, 4]), chunk_args=st.integers(min_value=0, max_value=40))
def test_grouped_commands(
    window: tuple[list[bytes], list[int], list[int], int], width: int, chunk_args: int
) -> None:
    ids, fps, values, f = window
    fps = [fp >> (64 - f) for fp in fps]
    arr = np.array(fps, dtype=np.uint64)
    rows = np.array([i for i in range(len(ids)) if i % 5 != 3], dtype=np.intp)
    groups = group(np.array(values, dtype=np.uint16), rows, KeyForm(b"s:n:t0:", width))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grouped, "CHUNK_ARGS", chunk_args)
        stored, named = Column.of_fingerprints(arr, f), Column(ids)
        for head, columns in (((b"SADD",), [stored]), ((b"HMGET",), [named]), ((b"HSET",), [named, stored])):
            native = sent(commands(head, groups, columns, packed=True))
            pure_columns = [Column(list(column.raw)) for column in columns]
            with pure_engine():
                assert sent(commands(head, groups, pure_columns, packed=True)) == native


@settings(max_examples=300, deadline=None)
@given(
    window=windows,
    pairs=st.integers(min_value=1, max_value=9),
    chunk_args=st.integers(0, 60),
    counts=st.sampled_from([None, b"s:n:counts"]),
)
def test_script_runs(
    window: tuple[list[bytes], list[int], list[int], int], pairs: int, chunk_args: int, counts: bytes | None
) -> None:
    ids, fps, values, f = window
    arr = np.array([fp >> (64 - f) for fp in fps], dtype=np.uint64)
    rows = np.array([i for i in range(len(ids)) if i % 5 != 3], dtype=np.intp)
    groups = group(np.array(values, dtype=np.uint64), rows, KeyForm(b"s:n:id:", 0))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grouped, "CHUNK_ARGS", chunk_args)
        columns = [Column(ids), Column.of_fingerprints(arr, f)]
        native = sent(script_runs(SHA, counts, groups, columns, pairs, packed=True))
        pure_columns = [Column(list(column.raw)) for column in columns]
        with pure_engine():
            assert sent(script_runs(SHA, counts, groups, pure_columns, pairs, packed=True)) == native
            # The argument tuples a cluster's transport takes: the same commands.
            plain = script_runs(SHA, counts, groups, pure_columns, pairs, packed=False)
            unpacked = [tuple(command) for chunk in plain for command in chunk]
        assert [c for part in native for c in arrays(part[0])] == [
            tuple(b"%d" % a if isinstance(a, int) else a for a in c) for c in unpacked
        ]


@settings(max_examples=300, deadline=None)
@given(
    window=windows,
    pairs=st.integers(min_value=1, max_value=9),
    chunk_args=st.integers(0, 60),
    counts=st.sampled_from([None, b"s:n:counts"]),
)
def test_attach_calls(
    window: tuple[list[bytes], list[int], list[int], int], pairs: int, chunk_args: int, counts: bytes | None
) -> None:
    ids, fps, values, f = window
    arr = np.array([fp >> (64 - f) for fp in fps], dtype=np.uint64)
    rows = np.arange(len(ids), dtype=np.intp)
    joined = {p: b"%d:%b" % (len(ids[p]), ids[p]) * 2 for p in range(0, len(ids), 4)}
    groups = group(np.array(values, dtype=np.uint64), rows, KeyForm(b"s:n:fp:", 0))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grouped, "CHUNK_ARGS", chunk_args)
        stored = Column.of_fingerprints(arr, f)
        native = sent(attach_calls(SHA, counts, groups, stored, Column(ids), joined, pairs, packed=True))
        raw = Column(list(stored.raw))
        with pure_engine():
            pure = sent(attach_calls(SHA, counts, groups, raw, Column(ids), joined, pairs, packed=True))
        assert pure == native


@settings(max_examples=200, deadline=None)
@given(
    fps=st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=50), f=st.sampled_from([64, 63, 16])
)
def test_columns_and_buckets(fps: list[int], f: int) -> None:
    arr = np.array([fp >> (64 - f) for fp in fps], dtype=np.uint64)
    keys = KeySchema("s", "n", Layout.pigeonhole(64, 3), 1 << 17)
    native = Column.of_fingerprints(arr, f)
    with pure_engine():
        pure = Column.of_fingerprints(arr, f)
        pure_buckets = pure.buckets(keys).tolist()
    assert native.raw == pure.raw
    assert native.buckets(keys).tolist() == pure_buckets
    assert Column(list(pure.raw)).buckets(keys).tolist() == pure_buckets


def test_bad_arguments_are_typed_errors() -> None:
    core = engine_choice.native
    assert core is not None
    heads, bounds, rows = np.zeros(1, np.uint64), np.array([0, 2], np.int64), np.array([0, 5], np.int64)
    numbers = (heads.tobytes(), bounds.tobytes(), rows.tobytes())
    column = core.pack_column([b"a", b"b"])
    with pytest.raises(InvalidArgument, match="row 5"):
        core.GroupedCommands(b"", 1, (b"k", 0), numbers, [column], 10)
    with pytest.raises(InvalidArgument, match="bounds"):
        core.GroupedCommands(b"", 1, (b"k", 0), (heads.tobytes(), b"\0" * 8, rows.tobytes()), [column], 10)
    with pytest.raises(InvalidArgument, match="ends"):
        core.GroupedCommands(b"", 1, (b"k", 0), numbers, [(b"ab", np.array([3], np.uint64).tobytes())], 10)
    with pytest.raises(InvalidArgument, match="hex_width"):
        core.GroupedCommands(b"", 1, (b"k", 70_000), numbers, [column], 10)
    with pytest.raises(InvalidArgument, match="before the key"):
        core.GroupedCommands(b"", 2**40, (b"k", 0), numbers, [column], 10)
    with pytest.raises(InvalidArgument, match="8-byte"):
        core.column_buckets((b"123", True), 7)
    with pytest.raises(InvalidType, match="bytes"):
        core.pack_column(["a"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="at least 1"):
        core.column_buckets(column, 0)
