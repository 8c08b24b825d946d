"""The loader library: readers per format, bad records, fingerprints as text, and Loader."""

from __future__ import annotations

import gzip
import io
import os
import sys
from pathlib import Path

import pytest
import redis
import xxhash

from simhash_redis import InputError, InvalidArgument, Scheme, SimhashIndex
from simhash_redis.codec import format_fingerprint, parse_fingerprint
from simhash_redis.errors import TooManyErrors
from simhash_redis.jobs.loader import Loader
from simhash_redis.jobs.readers import (
    ReadOptions,
    Record,
    detect_format,
    estimate_total,
    holds_at_least,
    read,
    read_all,
)
from tests.cli.conftest import article, write_jsonl


def _split(items: list[Record | InputError]) -> tuple[list[Record], list[InputError]]:
    return [i for i in items if isinstance(i, Record)], [i for i in items if isinstance(i, InputError)]


def test_detect_format() -> None:
    assert detect_format("a.jsonl") == "jsonl"
    assert detect_format("a.NDJSON.gz") == "jsonl"
    assert detect_format("a.csv") == "csv"
    assert detect_format("a.tsv.gz") == "tsv"
    assert detect_format("a.txt") == "lines"
    assert detect_format("a.fp") == "fingerprints"
    assert detect_format("-") == "jsonl"
    with pytest.raises(InvalidArgument, match="--format"):
        detect_format("a.docx")


def test_jsonl_good_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"id": "a", "text": "hello world"}\n'
        "\n"
        "not json\n"
        '{"id": 7, "text": "int ids are fine"}\n'
        '{"id": "b"}\n'
        '{"id": "c", "text": ""}\n'
        '["a list"]\n'
        '{"id": true, "text": "x"}\n',
        encoding="utf-8",
    )
    records, errors = _split(list(read(str(path))))
    assert [(r.id, r.line) for r in records] == [("a", 1), ("7", 4)]
    assert [(e.source, e.line) for e in errors] == [(str(path), n) for n in (3, 5, 6, 7, 8)]
    assert "no 'text' field" in errors[1].reason
    assert str(errors[0]).startswith(f"{path}:3: not valid JSON")


def test_jsonl_custom_fields_gzip_and_bad_utf8(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(
        gzip.compress(b'{"url": "u1", "body": "text one"}\n\xff\xfe\n{"url": "u2", "body": "two"}\n')
    )
    records, errors = _split(list(read(str(path), options=ReadOptions(id_field="url", text_field="body"))))
    assert [r.id for r in records] == ["u1", "u2"]
    assert errors[0].line == 2 and "UTF-8" in errors[0].reason


def test_csv_by_name_and_number(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text('id,title,text\n1,T,"a, quoted\nmulti-line text"\n2,T\n3,T,plain\n', encoding="utf-8")
    records, errors = _split(list(read(str(path))))
    assert [(r.id, r.doc) for r in records] == [("1", "a, quoted\nmulti-line text"), ("3", "plain")]
    assert errors[0].line == 4 and "columns" in errors[0].reason
    by_number = list(read(str(path), options=ReadOptions(id_field="1", text_field="3")))
    assert [r.id for r in by_number if isinstance(r, Record)] == ["1", "3"]
    with pytest.raises(InvalidArgument, match="no column 'body'"):
        list(read(str(path), options=ReadOptions(text_field="body")))


def test_tsv_without_header(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv"
    path.write_text("x\tfirst text\ny\tsecond text\n", encoding="utf-8")
    records = list(read(str(path), options=ReadOptions(id_field="1", text_field="2", header=False)))
    assert [(r.id, r.doc) for r in records if isinstance(r, Record)] == [
        ("x", "first text"),
        ("y", "second text"),
    ]
    with pytest.raises(InvalidArgument, match="no header"):
        list(read(str(path), options=ReadOptions(header=False)))


def _named(text: str) -> str:
    return xxhash.xxh3_64_hexdigest(text.encode())


def test_lines_ids(tmp_path: Path) -> None:
    """Default ids name the text, so the next run's line 1 is not taken for this run's line 1."""
    path = tmp_path / "news.txt"
    path.write_text("first\n\nthird\n", encoding="utf-8")
    ids = [r.id for r in read(str(path)) if isinstance(r, Record)]
    assert ids == [f"{path}:{_named('first')}", f"{path}:{_named('third')}"]
    custom = read(str(path), options=ReadOptions(id_prefix="n-"))
    assert [r.id for r in custom if isinstance(r, Record)] == ["n-1", "n-3"]


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = io.TextIOWrapper(io.BytesIO(gzip.compress(b"one\ntwo\n")))
    monkeypatch.setattr(sys, "stdin", fake)
    records = list(read("-", "lines"))
    assert [(r.source, r.id) for r in records if isinstance(r, Record)] == [
        ("<stdin>", f"stdin:{_named('one')}"),
        ("<stdin>", f"stdin:{_named('two')}"),
    ]


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("alpha text", encoding="utf-8")
    (tmp_path / "sub" / "b.txt.gz").write_bytes(gzip.compress(b"beta text"))
    (tmp_path / ".hidden").write_text("skip", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    items = list(read(str(tmp_path)))
    records, errors = _split(items)
    assert [(r.id, r.doc) for r in records] == [("a.txt", "alpha text"), ("sub/b.txt.gz", "beta text")]
    assert len(errors) == 1 and errors[0].reason == "empty file"


def test_fingerprint_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.fp"
    path.write_text("# comment\na\t0x10\nb,255\nc ff\nd -1\nonly-id\n", encoding="utf-8")
    records, errors = _split(list(read(str(path))))
    assert [(r.id, r.doc, r.is_fingerprint) for r in records] == [
        ("a", "0x10", True),
        ("b", "255", True),
        ("c", "ff", True),
        ("d", "-1", True),
    ]
    assert errors[0].line == 6


def test_parse_and_format_fingerprint() -> None:
    assert parse_fingerprint("0x10", 64) == 16
    assert parse_fingerprint("10", 64) == 10
    assert parse_fingerprint("10", 64, "hex") == 16
    assert parse_fingerprint("ff", 64) == 255
    assert parse_fingerprint("-1", 64) == 2**64 - 1
    assert parse_fingerprint(str(2**64 - 1), 64) == 2**64 - 1
    for bad in ("xyz", "0x", "", "-0x1", str(2**64), "1" * 40):
        with pytest.raises(InvalidArgument):
            parse_fingerprint(bad, 64)
    assert format_fingerprint(255, 64) == "0x00000000000000ff"
    assert format_fingerprint(1, 32) == "0x00000001"


def test_read_all_checks_every_path_first(tmp_path: Path) -> None:
    good = write_jsonl(tmp_path / "a.jsonl", [{"id": "a", "text": "x y z"}])
    with pytest.raises(FileNotFoundError):
        next(read_all([str(good), str(tmp_path / "missing.jsonl")]))


def test_holds_at_least_samples_a_large_file_far_from_the_count_and_counts_one_near_it(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"".join(b'{"id": "%07d", "text": "%s"}\n' % (i, b"x" * 70) for i in range(30_000)))
    assert big.stat().st_size > 2 << 20  # more than the MiB sampled
    assert 29_000 <= estimate_total([str(big)], sample=1 << 20) <= 31_000  # type: ignore[operator]
    assert holds_at_least([str(big)], None, None, 10_000) is True  # from the sample
    assert holds_at_least([str(big)], None, None, 100_000) is False
    assert holds_at_least([str(big)], None, None, 30_000) is True  # counted
    assert holds_at_least([str(big)], None, None, 30_001) is False


def test_estimate_total(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": str(i), "text": "t"} for i in range(10)])
    b = tmp_path / "b.csv"
    b.write_text("id,text\n1,x\n2,y", encoding="utf-8")
    assert estimate_total([str(a), str(b)]) == 12
    assert estimate_total(["-"]) is None
    gz = write_jsonl(tmp_path / "c.jsonl.gz", [{"id": "1", "text": "t"}], gz=True)
    assert estimate_total([str(gz)]) is None
    # A pipe is neither opened nor read: its lines are the load's.
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    assert estimate_total([str(fifo)]) is None
    # A directory's documents: hidden files and folders left out, as when it is read.
    folder = tmp_path / "d"
    (folder / ".git" / "objects").mkdir(parents=True)
    for name in ("a.txt", ".hidden", ".git/objects/x", ".git/config"):
        (folder / name).write_text("t", encoding="utf-8")
    assert estimate_total([str(folder)]) == 1
    # Enough to decide: counting stops once there are that many.
    assert holds_at_least([str(a), str(b)], None, None, 12) is True
    assert holds_at_least([str(a), str(b)], None, None, 13) is False
    assert holds_at_least(["-"], None, None, 1) is None
    assert estimate_total([str(a), str(b)], stop_at=12) == 12
    assert 5 <= estimate_total([str(a), str(b)], stop_at=5) <= 10  # type: ignore[operator]


@pytest.mark.parametrize("workers", [1, 2])
def test_loader_counts_and_is_idempotent(redis_client: redis.Redis, workers: int) -> None:
    index = SimhashIndex(redis_client, "ld")
    records: list[Record | InputError] = [Record("s", i, f"d{i}", article(i)) for i in range(300)]
    records.insert(5, InputError("s", 99, "bad"))
    errors: list[InputError] = []
    stats = Loader(index, workers=workers, batch_size=64, on_error=errors.append).run(records)
    assert (stats.added, stats.unchanged, stats.errors, stats.written) == (300, 0, 1, 300)
    assert errors[0].line == 99
    again = Loader(index, workers=workers, batch_size=64).run(records)
    assert (again.added, again.unchanged) == (0, 300)
    assert index.get("d7") == Scheme().fingerprint(article(7))
    assert index.count()[0] == 300


def test_loader_max_errors(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "ld")
    records: list[Record | InputError] = [Record("s", i, f"d{i}", article(i)) for i in range(10)]
    records += [InputError("s", 100 + i, "bad") for i in range(5)]
    with pytest.raises(TooManyErrors, match="max-errors 2"):
        Loader(index, workers=1, max_errors=2).run(records)
    assert index.count()[0] == 10  # the good records before the errors are stored


def test_loader_fingerprint_records(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "ld")
    errors: list[InputError] = []
    records: list[Record | InputError] = [
        Record("f", 1, "a", "0xff", True),
        Record("f", 2, "b", "-1", True),
        Record("f", 3, "c", "not-a-fp", True),
    ]
    stats = Loader(index, workers=1, on_error=errors.append).run(records)
    assert stats.added == 2 and errors[0].line == 3
    assert index.get_many(["a", "b"]) == [255, 2**64 - 1]


def test_the_jobs_take_the_index_open_index_gives(redis_client: redis.Redis) -> None:
    # open_index gives a VerifiedIndex by default: Loader, export_index and collect raised AttributeError.
    from simhash_redis import VerifiedIndex
    from simhash_redis.jobs.dump import export_index
    from simhash_redis.jobs.stats import collect

    index = VerifiedIndex(SimhashIndex(redis_client, "jobs"))
    records = [Record("t", i, f"d{i}", article(i)) for i in range(20)]
    assert Loader(index, workers=1).run(records).added == 20
    assert export_index(index, io.BytesIO()) == 20 and collect(index).documents == 20
    assert index.get("d3") == index.index.get("d3") is not None
