"""JSON Lines read as runs of raw lines: the same lines, numbers and faults as reading line by line.

`jsonl_chunks` reads blocks and cuts them into runs of `size` lines without a step per line; whatever
the block sizes, the runs hold exactly the lines `for line in stream` gives, `size` to a run (the last
one fewer), each numbered from 1 on, and a run pickles as one block of bytes.
"""

from __future__ import annotations

import gzip
import io
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis.errors import InputError
from simhash_redis.jobs import jsonlines
from simhash_redis.jobs.jsonlines import JsonLines, jsonl_chunks
from simhash_redis.jobs.records import ReadOptions

OPTIONS = ReadOptions()
lines = st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    parts=lines,
    end=st.sampled_from([b"", b"\n", b"\r\n"]),
    size=st.integers(min_value=1, max_value=7),
    read_bytes=st.sampled_from([(1, 4), (8, 64), (1 << 16, 1 << 24)]),
)
def test_runs_hold_the_lines_a_stream_gives(
    parts: list[bytes], end: bytes, size: int, read_bytes: tuple[int, int]
) -> None:
    data = b"\n".join(parts) + (end if parts else b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonlines, "_READ_BYTES", read_bytes)
        runs = list(jsonl_chunks(io.BufferedReader(io.BytesIO(data)), "in", OPTIONS, size))  # type: ignore[arg-type]
    assert all(isinstance(run, JsonLines) for run in runs)
    expected = [line.removesuffix(b"\n") for line in io.BytesIO(data)]
    assert [raw for run in runs for raw in run.raws] == expected  # type: ignore[union-attr]
    assert [run.count for run in runs] == [len(run.raws) for run in runs]  # type: ignore[union-attr]
    assert all(run.count == size for run in runs[:-1])  # type: ignore[union-attr]
    assert [run.first for run in runs] == [1 + size * i for i in range(len(runs))]  # type: ignore[union-attr]
    for run in runs:
        copy = pickle.loads(pickle.dumps(run))
        assert (copy.first, copy.raws, copy.count) == (run.first, run.raws, run.count)  # type: ignore[union-attr]


def test_truncated_gzip_gives_every_whole_line_then_the_fault() -> None:
    body = b"".join(b'{"id": "d%d", "text": "line %d"}\n' % (i, i) for i in range(2000))
    packed = gzip.compress(body)
    cut = gzip.GzipFile(fileobj=io.BytesIO(packed[: len(packed) * 2 // 3]))
    items = list(jsonl_chunks(cut, "in.gz", OPTIONS, 300))  # type: ignore[arg-type]
    fault = items.pop()
    assert isinstance(fault, InputError) and fault.fatal
    read = [raw + b"\n" for run in items for raw in run.raws]  # type: ignore[union-attr]
    assert read and body.startswith(b"".join(read)) and fault.line == len(read) + 1  # "after line N"
