"""Bulk-load input fuzzed: the readers of simhash_redis.jobs.readers never crash on bad bytes.

Random bytes, broken UTF-8, broken JSON, CSV quoting, huge lines and gzip garbage go through
`readers.read` for every format. The only failures allowed are the documented ones: an `InputError` per
bad record (yielded, with source and line), and for CSV/TSV an `InvalidArgument` naming the header
problem (a missing column) that stops the whole file. Every record a reader accepts must also be
accepted by the next stages of a load: its id by the index (1..512 UTF-8 bytes, encodable), its text by
the fingerprinting scheme, its precomputed fingerprint by `parse_fingerprint` or a documented refusal.

The short runs here take about 20 s in all; the long run is marked slow and runs only when selected
(FUZZ_EXAMPLES examples per format, default 6000: about 10 minutes on 2 cores)::

    FUZZ_EXAMPLES=6000 .venv/bin/python -m pytest tests/test_fuzz_loader.py -m slow -p no:cacheprovider
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_redis import Scheme, defaults
from simhash_redis.codec import parse_fingerprint
from simhash_redis.errors import InputError, InvalidArgument
from simhash_redis.jobs.readers import ReadOptions, Record, read

FORMATS = ("jsonl", "csv", "tsv", "lines", "fingerprints")
SHORT = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LONG = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "6000")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SCHEME = Scheme()

# Pieces that make readers work hard: JSON structure, quoting, separators, line ends, broken UTF-8,
# escapes of lone surrogates, a BOM, NULs, long digit runs.
FRAGMENTS = [
    b'{"id": ',
    b'"text": ',
    b'"fingerprint": ',
    b"}",
    b"{",
    b"[",
    b"]",
    b'"',
    b'""',
    b"'",
    b",",
    b"\t",
    b":",
    b"\n",
    b"\r\n",
    b"\r",
    b"\\",
    b'\\"',
    b"\\ud800",
    b"\\udfff",
    b"\\u0000",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xc3",
    b"\xc3\xa9",
    b"\xed\xa0\x80",
    b"\xf0\x9f\x99\x82",
    b"\x00",
    b"0x",
    b"-",
    b"ffffffffffffffff",
    b"18446744073709551616",
    b"9" * 5000,
    b"null",
    b"true",
    b"1.5e308",
    b"NaN",
    b"id",
    b"text",
    b"hello world",
    b" ",
    b"#",
]

chunks = st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=12))
structured = st.lists(chunks, max_size=60).map(b"".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
json_records = st.lists(
    st.dictionaries(
        st.sampled_from(["id", "text", "fingerprint", "x"]) | st.text(max_size=4), json_values, max_size=4
    ).map(lambda obj: json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")),
    max_size=8,
).map(b"\n".join)
payloads = st.one_of(st.binary(max_size=3000), structured, json_records)


@st.composite
def inputs(draw: st.DrawFn) -> bytes:
    """Bad bytes, maybe with a header, a huge line, gzip (whole, truncated or with garbage) around them."""
    data = draw(payloads)
    if draw(st.booleans()):
        data = (
            draw(
                st.sampled_from([b"id,text\n", b"id\ttext\n", b"id,fingerprint\n", b"\xef\xbb\xbfid,text\n"])
            )
            + data
        )
    if draw(st.integers(0, 9)) == 0:
        # A huge line: larger than any buffer, and csv's default field limit.
        data += draw(st.sampled_from([b"a", b'"', b"x y ", b"\xff"])) * draw(
            st.sampled_from([1 << 17, (1 << 20) + 3])
        )
    wrap = draw(st.sampled_from(["plain", "plain", "gzip", "truncated", "garbage", "members"]))
    if wrap == "gzip":
        data = gzip.compress(data)
    elif wrap == "truncated":
        packed = gzip.compress(data)
        data = packed[: draw(st.integers(0, max(0, len(packed) - 1)))]
    elif wrap == "garbage":
        data = b"\x1f\x8b" + draw(st.binary(max_size=200))
    elif wrap == "members":
        data = gzip.compress(data) + draw(st.binary(max_size=50))
    return data


OPTIONS = [
    ReadOptions(),
    ReadOptions(fingerprint_field="fingerprint"),
    ReadOptions(header=False, id_field="1", text_field="2"),
    ReadOptions(id_field="x", text_field="id"),
]


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """One directory for every example (hypothesis runs many examples per test function)."""
    with tempfile.TemporaryDirectory(prefix="simhash-fuzz-") as tmp:
        yield Path(tmp)


def check_record(record: Record, options: ReadOptions) -> None:
    """A record the reader accepted is accepted by the rest of a load."""
    assert isinstance(record.id, str)
    raw = record.id.encode("utf-8")  # the index refuses ids that are not valid Unicode (lone surrogates)
    assert 1 <= len(raw) <= defaults.MAX_ID_BYTES
    assert isinstance(record.doc, str)
    if record.is_fingerprint:
        try:
            fp = parse_fingerprint(record.doc, 64)
        except InvalidArgument:
            return  # reported by the Loader as an InputError for that record
        assert 0 <= fp < 1 << 64
    else:
        assert record.doc.strip(), "an empty text must be an InputError"
        fp = SCHEME.fingerprint(record.doc)
        assert 0 <= fp < 1 << 64


def consume(path: Path, fmt: str, options: ReadOptions) -> int:
    """Read everything; check every record and error. Returns how many items were read."""
    items = 0
    try:
        for item in read(str(path), fmt, options):
            items += 1
            if isinstance(item, InputError):
                assert item.source == str(path) or (fmt == "dir" and item.source.startswith(str(path)))
                assert item.line is None or (isinstance(item.line, int) and item.line >= 1)
                assert item.reason and item.source in str(item)
            else:
                assert isinstance(item, Record), type(item)
                check_record(item, options)
    except InvalidArgument as exc:
        # Documented: a CSV/TSV column the header does not have, or an unreadable header row.
        assert fmt in ("csv", "tsv"), f"{fmt}: {exc!r}"
        assert "column" in str(exc) or "header" in str(exc), exc
    return items


def fuzz_one(workdir: Path, data: bytes, fmt: str, options: ReadOptions) -> None:
    path = workdir / f"input.{fmt}"
    path.write_bytes(data)
    consume(path, fmt, options)


@pytest.mark.parametrize("fmt", FORMATS)
@SHORT
@given(data=inputs(), options=st.sampled_from(OPTIONS))
def test_readers_survive_bad_input(workdir: Path, fmt: str, data: bytes, options: ReadOptions) -> None:
    fuzz_one(workdir, data, fmt, options)


@SHORT
@given(
    files=st.lists(inputs(), min_size=1, max_size=4),
    names=st.lists(st.text(min_size=1, max_size=8), max_size=4),
)
def test_directory_reader_survives_bad_files(workdir: Path, files: list[bytes], names: list[str]) -> None:
    root = workdir / "dir"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for n, data in enumerate(files):
        name = names[n] if n < len(names) else f"f{n}"
        safe = "".join(ch for ch in name if ch.isalnum()) or "f"
        (root / f"{n}-{safe}.txt").write_bytes(data)
    consume(root, "dir", ReadOptions())


def test_known_bad_records_are_input_errors(workdir: Path) -> None:
    """Deterministic examples of each kind of bad record, each reported with its line number."""
    path = workdir / "known.jsonl"
    path.write_bytes(
        b'{"id": "a", "text": "fine"}\n'
        b"\xff\xfe not utf-8\n"
        b'{"id": "b", "text": \n'
        b'["not", "an", "object"]\n'
        b'{"id": "", "text": "empty id"}\n'
        b'{"id": "c", "text": ""}\n'
        b'{"id": "' + b"x" * 600 + b'", "text": "long id"}\n'
        b'{"id": "d"}\n'
        b'{"id": 1' + b"0" * 5000 + b', "text": "huge int id"}\n'
    )
    items = list(read(str(path), "jsonl"))
    assert isinstance(items[0], Record) and items[0].id == "a"
    errors = [item for item in items[1:] if isinstance(item, InputError)]
    assert [e.line for e in errors] == [2, 3, 4, 5, 6, 7, 8, 9]


def test_lone_surrogates_in_json_ids_are_input_errors(workdir: Path) -> None:
    """Found by this file: such an id passed the reader, and the index's InvalidArgument then aborted
    the whole load instead of one InputError for that line."""
    path = workdir / "surrogate.jsonl"
    path.write_bytes(b'{"id": "a\\ud800", "text": "t"}\n')
    items = list(read(str(path), "jsonl"))
    assert len(items) == 1 and isinstance(items[0], InputError), items


def test_lone_surrogates_in_json_texts_are_fingerprinted(workdir: Path) -> None:
    path = workdir / "surrogate-text.jsonl"
    path.write_bytes(b'{"id": "a", "text": "t\\udfff x"}\n')
    (item,) = list(read(str(path), "jsonl"))
    assert isinstance(item, Record)
    assert 0 <= SCHEME.fingerprint(item.doc) < 1 << 64


@given(value=st.integers(0, 2**64 - 1) | st.sampled_from([0, 0x1234, 10**15, 2**64 - 1]))
@SHORT
def test_printed_fingerprints_read_back_unchanged(value: int) -> None:
    """Found by this file: `get` prints zero-padded hex without a prefix, and the 'auto' base read
    digits-only text (0000000000001234) as decimal."""
    from simhash_redis.codec import format_fingerprint

    assert parse_fingerprint(format_fingerprint(value, 64), 64) == value


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_readers_survive_bad_input_long(workdir: Path, fmt: str, pytestconfig: pytest.Config) -> None:
    """The long run: only when selected with ``-m slow`` (never as part of a default run)."""
    expr = pytestconfig.option.markexpr or ""
    if "slow" not in expr or "not slow" in expr:
        pytest.skip("the long fuzz runs only when selected: -m slow")

    @LONG
    @given(data=inputs(), options=st.sampled_from(OPTIONS))
    def run(data: bytes, options: ReadOptions) -> None:
        fuzz_one(workdir, data, fmt, options)

    run()


json_values = st.one_of(
    st.text(max_size=24),
    st.text(alphabet="0123456789abcdefABCDEFx_ -+", max_size=24),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
)
fingerprint_lines = st.lists(
    st.one_of(
        st.fixed_dictionaries({"id": json_values, "fp": json_values}).map(json.dumps),
        st.fixed_dictionaries({"id": json_values}).map(json.dumps),
        st.text(max_size=30),
    ).map(lambda line: line.encode("utf-8", "surrogatepass") + b"\n"),
    max_size=30,
)


@SHORT
@given(
    lines=fingerprint_lines,
    f=st.sampled_from([64, 32, 128]),
    base=st.sampled_from(["auto", "hex", "dec"]),
    first=st.integers(1, 3),
)
def test_fingerprint_lines_short_way_matches_the_records(
    lines: list[bytes], f: int, base: str, first: int
) -> None:
    """A worker reads lines of precomputed fingerprints without a record per line: the same ids,
    fingerprints and errors as the records parsed one by one."""
    from simhash_redis.jobs.fingerprinter import fingerprinted
    from simhash_redis.jobs.jsonlines import JsonLines
    from simhash_redis.jobs.text_rows import by_records

    def plain(ids: list[str], fps: list[int], errors: list[tuple[int, InputError]], *_: Any) -> Any:
        return ids, fps, [(at, str(error), error.line) for at, error in errors]

    chunk = JsonLines("in.jsonl", first, lines, ReadOptions(fingerprint_field="fp"))
    expected = by_records(chunk.records(), SCHEME, None, f, base)
    assert plain(*fingerprinted(chunk, SCHEME, None, f, base)) == plain(*expected)
