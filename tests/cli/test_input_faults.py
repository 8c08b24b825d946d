"""Damaged input files: a stray CSV quote, multi-line records, a FIFO in a directory, truncated gzip."""

from __future__ import annotations

import gzip
import json
import os
import threading
import zlib
from pathlib import Path

import pytest

from simhash_redis.errors import InputError
from simhash_redis.jobs.readers import ReadOptions, read_all
from tests.cli.conftest import Invoke, article


def _csv(rows: list[str]) -> str:
    return "id,text\n" + "".join(row + "\n" for row in rows)


def test_a_stray_quote_is_an_error_at_its_line_and_the_rows_after_it_are_read(tmp_path: Path) -> None:
    rows = [f"r{i},{article(i)}" for i in range(1000)]
    rows[9] = 'r9,"an unterminated quoted field'
    path = tmp_path / "stray.csv"
    path.write_text(_csv(rows))
    items = list(read_all([str(path)]))
    errors = [item for item in items if isinstance(item, InputError)]
    records = [item for item in items if not isinstance(item, InputError)]
    assert [(e.line, "never closed" in e.reason) for e in errors] == [(11, True)]  # line 11: header + 10
    assert len(records) == 999
    assert records[9].id == "r10" and records[9].line == 12
    assert max(len(r.doc) for r in records) < 1000


def test_a_runaway_quoted_field_closed_by_a_later_quote_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simhash_redis.jobs import readers

    monkeypatch.setattr(readers._Rows, "MAX_FIELD_LINES", 50)
    rows = [f"r{i},{article(i)}" for i in range(300)]
    rows[5] = 'r5,"stray'
    rows[200] = 'r200,"quoted, with a comma"'
    path = tmp_path / "runaway.csv"
    path.write_text(_csv(rows))
    items = list(read_all([str(path)]))
    errors = [item for item in items if isinstance(item, InputError)]
    assert errors and errors[0].line == 7 and "never closed" in errors[0].reason
    ids = {item.id for item in items if not isinstance(item, InputError)}
    assert {"r6", "r100", "r199", "r201", "r299"} <= ids


def test_a_multi_line_record_is_reported_at_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "multi.csv"
    path.write_text('id,text\nok,fine\n"","first line\nsecond line\nthird line"\nlast,row\n')
    items = list(read_all([str(path)]))
    errors = [item for item in items if isinstance(item, InputError)]
    assert [e.line for e in errors] == [3]
    good = [item for item in items if not isinstance(item, InputError)]
    assert [(r.id, r.line) for r in good] == [("ok", 2), ("last", 6)]
    path.write_text('id,text\n"a","para one\n\npara two"\nb,x\n')
    assert [(r.id, r.line, r.doc.count(chr(10))) for r in read_all([str(path)])] == [("a", 2, 2), ("b", 5, 0)]  # type: ignore[union-attr]


def test_a_fifo_in_a_directory_is_skipped_not_waited_on(tmp_path: Path, invoke: Invoke) -> None:
    folder = tmp_path / "posts"
    folder.mkdir()
    (folder / "a.txt").write_text(article(1))
    os.mkfifo(folder / "pipe")
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(list(read_all([str(folder)]))), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "reading the directory waited on the FIFO"
    items = result[0]
    assert isinstance(items, list)
    errors = [item for item in items if isinstance(item, InputError)]
    assert len(items) == 2 and len(errors) == 1 and "not a regular file" in errors[0].reason


def test_a_truncated_gzip_fails_the_run_with_its_line(tmp_path: Path, invoke: Invoke) -> None:
    data = "".join(json.dumps({"id": f"g{i}", "text": article(i)}) + "\n" for i in range(3000)).encode()
    packed = gzip.compress(data)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(packed[: len(packed) // 2])
    result = invoke("load", str(path), "--json", index="cut")
    assert result.exit_code == 3, result.output
    assert "truncated or corrupt gzip data" in result.output and "after line" in result.output
    assert "Traceback" not in result.output
    items = list(read_all([str(path)], None, ReadOptions()))
    fault = [item for item in items if isinstance(item, InputError)]
    assert len(fault) == 1 and fault[0].line is not None and fault[0].line > 1


def _damaged(packed: bytes) -> bytes:
    """The gzip data with a deflate block overwritten past its middle, which zlib refuses (no CRC error)."""
    for at in range(len(packed) // 2, len(packed) - 100, 97):
        damaged = packed[:at] + b"\xff" * 64 + packed[at + 64 :]
        try:
            gzip.decompress(damaged)
        except zlib.error:
            return damaged
        except (EOFError, OSError):
            continue
    raise AssertionError("no damage that zlib refuses")


def test_a_damaged_gzip_is_a_bad_input_not_a_traceback(tmp_path: Path, invoke: Invoke) -> None:
    # zlib.error (a damaged block, or a damaged header read by the JSON array peek) and EOFError at the
    # peek escaped the readers: a traceback, or click's "Aborted!", with exit code 1.
    lines = [json.dumps({"id": f"g{i}", "text": article(i)}) for i in range(3000)]
    packed = gzip.compress("".join(line + "\n" for line in lines).encode())
    (tmp_path / "dir").mkdir()
    inputs = {
        "block.jsonl.gz": _damaged(packed),
        "block.txt.gz": _damaged(gzip.compress("\n".join(article(i) for i in range(3000)).encode())),
        "flags.jsonl.gz": packed[:3] + b"\xff" + packed[4:],  # zlib.error at the peek
        "extra.jsonl.gz": packed[:3] + b"\x04" + packed[4:12],  # EOFError at the peek
        "dir/a.txt.gz": _damaged(packed),
    }
    for name, data in inputs.items():
        (tmp_path / name).write_bytes(data)
    for name in ("block.jsonl.gz", "block.txt.gz", "flags.jsonl.gz", "extra.jsonl.gz"):
        result = invoke("load", str(tmp_path / name), index="damaged")
        assert result.exit_code == 3, (name, result.output)
        assert "truncated or corrupt gzip data" in result.output and "Traceback" not in result.output
    (tmp_path / "dir" / "b.txt").write_text(article(1))
    result = invoke("load", str(tmp_path / "dir"), "--json", index="damaged-dir")
    assert result.exit_code == 0 and "a.txt.gz: cannot read" in result.stderr, result.output
    assert json.loads(result.stdout)["written"] == 1


def test_a_list_of_text_files_can_be_one_document_each(tmp_path: Path, invoke: Invoke) -> None:
    posts = []
    for i in range(4):
        post = tmp_path / f"post{i}.txt"
        post.write_text("\n".join(article(i * 10 + j) for j in range(5)) + "\n")
        posts.append(str(post))
    by_line = invoke("load", *posts, "--json", index="posts-lines")
    assert json.loads(by_line.stdout)["written"] == 20
    assert "warning: 4 text files give 20 documents" in by_line.stderr and "--format files" in by_line.stderr
    by_file = invoke("load", "--format", "files", *posts, "--json", index="posts")
    assert by_file.exit_code == 0, by_file.output
    assert json.loads(by_file.stdout)["written"] == 4 and "warning" not in by_file.stderr
    got = invoke("get", posts[0], index="posts")
    assert got.exit_code == 0 and got.stdout.strip(), got.output
