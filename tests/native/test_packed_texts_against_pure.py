"""The compiled core's fingerprinting of texts laid end to end (a table's run, as a forked worker reads it
from shared memory) against the pure reader and engine.

A run of table rows gives the same ids, fingerprints and errors (row numbers and messages) read where the
texts lie by the compiled core as cut into one bytes per text and read by the pure engine, for any
texts (blank ones of every kind of white space among them, which the core leaves to the pure reader) and
ids (null, empty, too long).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis.errors import InvalidArgument
from simhash_redis.fingerprinting import Scheme, engine_choice
from simhash_redis.jobs.arrow import ArrowRows
from simhash_redis.jobs.fingerprinter import Fingerprinted
from simhash_redis.jobs.records import ReadOptions
from simhash_redis.jobs.shared_ring import SharedRing
from simhash_redis.jobs.text_rows import SharedTexts
from tests.native.conftest import pure_engine
from tests.native.test_text_lines_against_pure import SCHEMES, spaces, words

pa = pytest.importorskip("pyarrow")

texts = st.one_of(
    st.lists(st.one_of(words, spaces), max_size=12).map("".join),
    st.lists(spaces, max_size=4).map("".join),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12),
)
ids = st.one_of(
    st.text(alphabet="abcXYZ09-_:/.", min_size=1, max_size=12),
    st.sampled_from(["", None, "é" * 300, " x"]),
)


def plain(done: Fingerprinted | tuple[object, ...]) -> object:
    got = Fingerprinted(*done)  # type: ignore[arg-type]
    errors = [(at, (e.source, e.line, e.reason, e.fatal)) for at, e in got.errors]
    return got.ids, got.fps, errors


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(ids, texts), min_size=1, max_size=12),
    scheme=st.sampled_from(SCHEMES),
    first=st.integers(min_value=1, max_value=10**6),
    kind=st.sampled_from(["string", "large_string"]),
    skip=st.integers(min_value=0, max_value=3),
    namespace=st.sampled_from(["", "ns"]),
)
def test_the_same_ids_fingerprints_and_errors(
    rows: list[tuple[str | None, str]], scheme: Scheme, first: int, kind: str, skip: int, namespace: str
) -> None:
    batch = pa.record_batch(
        {"id": pa.array([i for i, _ in rows], "string"), "text": pa.array([t for _, t in rows], kind)}
    ).slice(min(skip, len(rows) - 1))  # offsets that do not start at 0
    options = ReadOptions(namespace=namespace)
    ring = SharedRing(1 << 16)
    try:
        ring.place(memoryview(b"before"))  # the run not at the ring's start
        sent = ArrowRows("t.parquet", first, batch, options, "id", "text").for_worker(ring)
        if not isinstance(sent, SharedTexts):  # every text empty: nothing to share
            assert all(not t for t in batch.column(1).to_pylist())
            return
        native = sent.fingerprinted(ring.memory, scheme, None)
        with pure_engine():
            pure = sent.fingerprinted(ring.memory, scheme, None)
        assert plain(native) == plain(pure)
    finally:
        ring.close()


def test_blank_texts_and_invalid_utf8_are_left_to_the_pure_reader() -> None:
    data = "ab \u3000\x1cc\u00e9".encode() + b"\xff"
    offsets = memoryview(bytearray(9 * 8)).cast("q")
    for at, value in enumerate([0, 2, 2, 3, 6, 7, 8, 10, 11]):
        offsets[at] = value
    fps, others = engine_choice.native.fingerprint_packed_texts(data, offsets.tobytes(), True, Scheme())  # type: ignore[union-attr]
    assert fps == Scheme().fingerprint_many(["ab", "c", "\u00e9"]) and others == [1, 2, 3, 4, 7]


def test_offsets_that_are_not_the_texts_are_refused() -> None:
    core = engine_choice.native
    assert core is not None
    narrow = memoryview(bytearray(8)).cast("i")
    narrow[1] = 5
    with pytest.raises(InvalidArgument, match="offsets are not those of the texts"):
        core.fingerprint_packed_texts(b"abc", narrow.tobytes(), False, Scheme())
    with pytest.raises(InvalidArgument, match="offsets are not those of the texts"):
        core.fingerprint_packed_texts(b"abc", b"\x00\x00\x00", False, Scheme())


@pytest.mark.parametrize("bad", [b"ab\xffcd", "\u3000".encode() + b"\xff x"])
def test_a_text_that_is_not_utf8_is_reported_with_its_row_by_both(bad: bytes) -> None:
    import struct

    texts = [b"hello world", bad, b"fine text"]
    offsets = [0]
    for text in texts:
        offsets.append(offsets[-1] + len(text))
    column = pa.Array.from_buffers(
        pa.string(),
        3,
        [None, pa.py_buffer(struct.pack(f"{len(offsets)}i", *offsets)), pa.py_buffer(b"".join(texts))],
    )
    batch = pa.record_batch({"id": pa.array(["a", "b", "c"]), "text": column})
    ring = SharedRing(1 << 16)
    try:
        sent = ArrowRows("t.arrow", 5, batch, ReadOptions(), "id", "text").for_worker(ring)
        assert isinstance(sent, SharedTexts)
        native = plain(sent.fingerprinted(ring.memory, Scheme(), None))
        with pure_engine():
            pure = plain(sent.fingerprinted(ring.memory, Scheme(), None))
        assert native == pure
        ids, _, errors = native  # type: ignore[misc]
        assert ids == ["a", "c"] and [(e[1], e[2].split(" (")[0]) for _, e in errors] == [
            (6, "not valid UTF-8")
        ]
    finally:
        ring.close()
