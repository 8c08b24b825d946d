"""Parquet and Arrow IPC (Feather) input for load, dedupe and near --file, against the suite's real server."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simhash_redis import Scheme, SimhashRedisError
from simhash_redis.codec import format_fingerprint
from simhash_redis.jobs import arrow
from simhash_redis.jobs.readers import ReadOptions, detect_format, estimate_total, read
from simhash_redis.jobs.shared_ring import SharedRing
from simhash_redis.jobs.text_rows import PackedTexts, SharedTexts, TextRows
from tests.cli.conftest import Invoke, article

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _table(n: int, start: int = 0, copies: int = 0) -> object:
    ids = [f"a{i}" for i in range(start, start + n)]
    texts = [article(i) for i in range(start, start + n)]
    for c in range(1, copies + 1):
        ids += [f"a{i}-copy{c}" for i in range(start, start + n)]
        texts += [article(i, c) for i in range(start, start + n)]
    return pa.table({"id": ids, "text": texts, "lang": ["en"] * len(ids), "n": list(range(len(ids)))})


def _parquet(path: Path, n: int, start: int = 0, copies: int = 0, row_group: int = 50) -> Path:
    pq.write_table(_table(n, start, copies), path, row_group_size=row_group)
    return path


def test_load_parquet_feather_and_a_stream(invoke: Invoke, tmp_path: Path) -> None:
    parquet = _parquet(tmp_path / "news.parquet", 120, row_group=25)
    result = invoke("--plain", "load", "--json", str(parquet))  # plain: a later load takes --bulk
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 120
    assert invoke("get", "a7").stdout.strip() == format_fingerprint(Scheme().fingerprint(article(7)), 64)
    # A Feather v2 file is an Arrow IPC file (pyarrow 24+ deprecates write_feather for this writer).
    with pa.ipc.new_file(tmp_path / "more.feather", _table(30, start=200).schema) as writer:
        writer.write_table(_table(30, start=200), max_chunksize=7)
    assert (
        json.loads(invoke("load", "--json", "--bulk", str(tmp_path / "more.feather")).stdout)["added"] == 30
    )
    # An Arrow IPC stream, by --format, from a file and from standard input.
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _table(5, start=300).schema) as writer:
        writer.write_table(_table(5, start=300))
    (tmp_path / "stream.bin").write_bytes(sink.getvalue().to_pybytes())
    by_format = invoke("load", "--json", "--format", "arrow", str(tmp_path / "stream.bin"))
    assert json.loads(by_format.stdout)["added"] == 5, by_format.output
    piped = invoke("load", "--json", "--format", "arrow", "-", input=sink.getvalue().to_pybytes())
    assert json.loads(piped.stdout)["unchanged"] == 5, piped.output


def test_a_directory_of_parquet_files_is_a_dataset(invoke: Invoke, tmp_path: Path) -> None:
    data = tmp_path / "crawl"
    (data / "part=1").mkdir(parents=True)
    _parquet(data / "part-0.parquet", 40)
    _parquet(data / "part=1" / "part-1.parquet", 40, start=40)
    (data / "_SUCCESS").write_bytes(b"")
    assert detect_format(str(data)) == "parquet"
    assert estimate_total([str(data)]) == 80
    result = invoke("load", "--json", str(data))
    assert result.exit_code == 0 and json.loads(result.stdout)["added"] == 80, result.output
    assert invoke("get", "a79").exit_code == 0
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_text("a text file", encoding="utf-8")
    assert detect_format(str(tmp_path / "texts")) == "dir"  # text files stay documents


def test_bad_rows_are_named_by_file_and_row(invoke: Invoke, tmp_path: Path) -> None:
    table = pa.table(
        {
            "url": ["u1", None, "u3", "u4", "u5"],
            "body": [article(1), article(2), "   ", None, article(5)],
        }
    )
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path, row_group_size=2)
    result = invoke("load", "--json", "--id-field", "url", "--text-field", "body", str(path))
    assert result.exit_code == 0, result.output
    assert f"{path}:2: the id is null" in result.stderr
    assert f"{path}:3: empty text" in result.stderr
    assert f"{path}:4: the text is null" in result.stderr
    assert json.loads(result.stdout)["added"] == 2


def test_columns_by_name_or_number_and_their_errors(invoke: Invoke, tmp_path: Path) -> None:
    path = _parquet(tmp_path / "news.parquet", 10)
    by_number = invoke("load", "--json", "--id-field", "1", "--text-field", "2", str(path))
    assert json.loads(by_number.stdout)["added"] == 10, by_number.output
    missing = invoke("load", "--text-field", "content", str(path))
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    assert "no column 'content' (columns: id, text, lang, n); choose one with --text-field" in missing.stderr
    wrong = invoke("load", "--text-field", "n", str(path))
    assert wrong.exit_code == 2 and "column 'n' is of type int64, which cannot hold a text" in wrong.stderr


def test_fingerprint_columns(invoke: Invoke, tmp_path: Path) -> None:
    table = pa.table(
        {
            "id": ["f1", "f2", "f3"],
            "fp": pa.array([255, 2**64 - 1, 16], type=pa.uint64()),
            "hex": ["0xff", "zz", "0x10"],
        }
    )
    pq.write_table(table, tmp_path / "fps.parquet")
    ints = invoke("load", "--json", "--fingerprint-field", "fp", str(tmp_path / "fps.parquet"))
    assert json.loads(ints.stdout)["added"] == 3, ints.output
    assert invoke("get", "f2").stdout.strip() == "0x" + "f" * 16
    hexes = invoke("--index", "other", "load", "--fingerprint-field", "hex", str(tmp_path / "fps.parquet"))
    assert hexes.exit_code == 0 and f"{tmp_path / 'fps.parquet'}:2:" in hexes.stderr


def test_not_a_parquet_file_fails_after_the_rest_is_loaded(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "junk.parquet").write_bytes(b"this is not parquet at all")
    good = _parquet(tmp_path / "good.parquet", 10)
    result = invoke("load", str(tmp_path / "junk.parquet"), str(good))
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert f"{tmp_path / 'junk.parquet'}: not a Parquet file, or a corrupt one" in result.stderr
    assert invoke("get", "a9").exit_code == 0
    piped = invoke("load", "--format", "parquet", "-", input=b"PAR1")
    assert piped.exit_code == 2 and "Parquet cannot be read from standard input" in piped.stderr


def test_dedupe_and_near_read_parquet(invoke: Invoke, tmp_path: Path) -> None:
    assert invoke("load", str(_parquet(tmp_path / "old.parquet", 10))).exit_code == 0
    today = _parquet(tmp_path / "today.parquet", 20, copies=1)
    pairs = invoke("dedupe", "--json", "-q", str(today))
    found = [json.loads(line) for line in pairs.stdout.splitlines()]
    assert pairs.exit_code == 0 and len(found) == 20, pairs.output
    assert {"id": "a3-copy1", "duplicate_of": "a3"}.items() <= found[3].items()
    queries = pa.table({"qid": ["q1", "q2"], "content": [article(4, 1), "words unlike any stored story"]})
    pq.write_table(queries, tmp_path / "queries.parquet")
    near = invoke(
        "near", "--file", str(tmp_path / "queries.parquet"), "--id-field", "qid", "--text-field", "content"
    )
    assert near.exit_code == 0, near.output
    assert near.stdout.splitlines()[0].startswith("q1\ta4\t0\t")
    as_json = invoke(
        "near",
        "--json",
        "--file",
        str(tmp_path / "queries.parquet"),
        "--id-field",
        "qid",
        "--text-field",
        "content",
    )
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [row["query"] for row in rows] == ["q1", "q2"] and rows[1]["matches"] == []
    # --format makes any bulk input a table of queries; a text file without it is still one query.
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "j1", "text": article(5)}) + "\n", encoding="utf-8")
    assert invoke("near", "--format", "jsonl", "--file", str(tmp_path / "q.jsonl")).stdout.startswith(
        "j1\ta5\t"
    )


def test_reads_a_few_columns_a_batch_at_a_time(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "big.parquet", 3 * arrow.BATCH_ROWS // 40 + 10, copies=39, row_group=1000)
    sizes = [
        (batch.num_rows, batch.schema.names)
        for batch in arrow.record_batches(str(path), "parquet", ["id", "text"])
    ]
    assert max(rows for rows, _ in sizes) <= arrow.BATCH_ROWS and len(sizes) > 3
    assert all(names == ["id", "text"] for _, names in sizes)
    records = list(read(str(path), None, ReadOptions()))
    assert len(records) == sum(rows for rows, _ in sizes) and records[-1].line == len(records)


def test_missing_pyarrow_names_the_extra(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _parquet(tmp_path / "news.parquet", 3)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(SimhashRedisError, match=r"`pip install pyarrow` \(the parquet extra\)"):
        list(read(str(path)))
    result = invoke("load", str(path))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "needs pyarrow: `pip install pyarrow` (the parquet extra)" in result.stderr


_PEAK = """
import sys
from simhash_redis.jobs import arrow
arrow.pyarrow()

def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))

before = status("VmRSS:")
rows = sum(batch.num_rows for batch in arrow.record_batches(sys.argv[1], "parquet", ["id", "text"]))
print(rows, (status("VmHWM:") - before) // 1024)
"""


def test_a_file_corrupt_after_good_rows_fails_after_them(invoke: Invoke, tmp_path: Path) -> None:
    # The batches after the first are decoded on a read-ahead thread: its error must come through,
    # after the rows before it, named by the row it stopped at.
    path = _parquet(tmp_path / "torn.parquet", 400, row_group=100)
    column = pq.ParquetFile(path).metadata.row_group(3).column(1)
    data = bytearray(path.read_bytes())
    middle = column.data_page_offset + 100
    data[middle : middle + 200] = b"\xff" * 200
    path.write_bytes(bytes(data))
    result = invoke("load", "--batch-size", "50", str(path))
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert f"{path}:301: cannot be read as a Parquet file after row 300" in result.stderr
    assert invoke("get", "a299").exit_code == 0  # the last row before the damage is stored
    assert invoke("get", "a300").exit_code != 0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS from /proc")
def test_one_large_row_group_is_streamed_not_read_whole(tmp_path: Path) -> None:
    # pyarrow writes a table of up to a million rows as one row group: it must not be read whole.
    rows, text = 60_000, article(1) * 12  # 60,000 texts of 3.5 KB: a 210 MB row group
    table = pa.table({"id": [str(i) for i in range(rows)], "text": [f"{i} {text}" for i in range(rows)]})
    pq.write_table(table, tmp_path / "one-group.parquet", compression="none")
    del table
    assert pq.ParquetFile(tmp_path / "one-group.parquet").metadata.num_row_groups == 1
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(tmp_path / "one-group.parquet")],
        capture_output=True,
        text=True,
        check=True,
    )
    count, grown_mb = map(int, done.stdout.split())
    # About 100 MB whatever the size (pyarrow's pages and batches, its allocator's cache), not 210 MB and more
    assert count == rows and grown_mb < 150, grown_mb


@pytest.mark.parametrize("kind", ["string", "large_string"])
def test_rows_fingerprinted_from_bytes_as_from_records(kind: str) -> None:
    from simhash_redis.jobs.fingerprinter import fingerprinted

    texts = [
        article(1),
        "\u3000 \u00a0",
        None,
        "  ",
        article(2),
        "\x1c",
        "\u3000x",
        "\u4f60\u597d",
        article(3),
    ]
    ids = ["a", "b", "c", None, "x" * 2000, "f", "g", "h", "i"]
    batch = pa.record_batch({"id": ids, "text": pa.array(texts, type=getattr(pa, kind)())})
    rows = arrow.ArrowRows("t.parquet", 11, batch, ReadOptions(), "id", "text")
    done = fingerprinted(rows, Scheme(), None, 64, "auto")
    assert done.ids == ["a", "g", "h", "i"] and done.fps == Scheme().fingerprint_many([texts[0], *texts[6:9]])
    assert str(done[2][0][1]) == "t.parquet:12: empty text"
    # What a worker process gets: the texts as lists (no pyarrow there), read as the batch is.
    sent = pickle.loads(pickle.dumps(rows.for_worker(), protocol=4))
    assert isinstance(sent, TextRows)
    again = fingerprinted(sent, Scheme(), None, 64, "auto")
    assert again[:2] == done[:2]
    assert [(at, str(e)) for at, e in again[2]] == [(at, str(e)) for at, e in done[2]]
    assert [str(r) for r in sent.records()] == [str(r) for r in rows.records()]


def test_a_binary_id_not_utf8_is_named_as_the_records_path_names_it() -> None:
    from simhash_redis.jobs.fingerprinter import fingerprinted

    ids = pa.array([b"a", b"\xffb", b"c"], type=pa.binary())
    batch = pa.record_batch({"id": ids, "text": [article(1), article(2), article(3)]})
    rows = arrow.ArrowRows("t.parquet", 1, batch, ReadOptions(), "id", "text")
    done = fingerprinted(rows, Scheme(), None, 64, "auto")
    assert done.ids == ["a", "c"]
    # It said "the id must be a string or an integer, got InputError"
    assert [(at, str(e)) for at, e in done.errors] == [(1, "t.parquet:2: not valid UTF-8 (byte 0)")]


@pytest.mark.parametrize("kind", ["string", "large_string"])
def test_texts_go_to_workers_packed_in_pieces(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pieces of a few texts each, a text larger than a piece alone in its own, empty texts, and a batch
    # that is a slice of another (its offsets do not start at 0): each text arrives as it was.
    monkeypatch.setattr(arrow, "_PIECE_BYTES", 100)
    texts = [article(i)[: i % 50] for i in range(60)] + ["\u4f60\u597d" * 200, "", "", article(7)]
    whole = pa.record_batch({"id": [f"i{i}" for i in range(len(texts))], "text": pa.array(texts, kind)})
    for batch in (whole, whole.slice(13, 40), whole.slice(55)):
        rows = arrow.ArrowRows("t.parquet", 3, batch, ReadOptions(), "id", "text")
        sent = rows.for_worker()
        assert isinstance(sent, PackedTexts)
        assert b"".join(sent.pieces) == "".join(batch.column(1).to_pylist()).encode()
        got = pickle.loads(pickle.dumps(sent, protocol=4))
        assert isinstance(got, TextRows) and got.first == 3
        assert got.raws == [t.encode() for t in batch.column(1).to_pylist()]
        assert got.ids == batch.column(0).to_pylist()
        assert pickle.loads(pickle.dumps(rows, protocol=4)).rows() == got
    # Fewer objects to pickle than texts: pieces of several texts, but for the largest.
    packed = arrow.ArrowRows("t", 1, whole, ReadOptions(), "id", "text").for_worker()
    assert isinstance(packed, PackedTexts) and packed.step > 1
    assert len(packed.pieces) == -(-whole.num_rows // packed.step)
    # A null among the texts: one bytes per text (or None), read as before.
    nulls = pa.record_batch({"id": ["a", "b"], "text": pa.array(["x", None], kind)})
    sent = arrow.ArrowRows("t.parquet", 1, nulls, ReadOptions(), "id", "text").for_worker()
    assert isinstance(sent, TextRows) and sent.raws == [b"x", None]


@pytest.mark.parametrize("kind", ["string", "large_string"])
def test_texts_go_to_forked_workers_through_a_shared_ring(kind: str) -> None:
    from simhash_redis.jobs.fingerprinter import fingerprinted

    # Each text read back from the ring as it was, for a batch that is a slice of another (its offsets do
    # not start at 0) too; a run the ring has no room for goes packed through the pipe instead.
    texts = [article(i)[: i % 50] for i in range(60)] + ["\u4f60\u597d" * 200, "", "", article(7)]
    whole = pa.record_batch({"id": [f"i{i}" for i in range(len(texts))], "text": pa.array(texts, kind)})
    ring = SharedRing(1 << 16)
    try:
        placed = []
        for batch in (whole, whole.slice(13, 40), whole.slice(55)):
            sent = arrow.ArrowRows("t.parquet", 3, batch, ReadOptions(), "id", "text").for_worker(ring)
            assert isinstance(sent, SharedTexts)
            got = sent.fingerprinted(ring.memory, Scheme(), None)
            rows = arrow.ArrowRows("t.parquet", 3, batch, ReadOptions(), "id", "text")
            expected = fingerprinted(rows, Scheme(), None, 64, "auto")
            pairs = [(i, t) for i, t in zip(*batch.to_pydict().values(), strict=True) if t]
            assert (
                got[:2]
                == expected[:2]
                == ([i for i, _ in pairs], Scheme().fingerprint_many([t for _, t in pairs]))
            )
            assert [(at, str(e)) for at, e in got.errors] == [(at, str(e)) for at, e in expected.errors]
            placed.append(sent.start)
        tiny = SharedRing(100)
        sent = arrow.ArrowRows("t", 1, whole, ReadOptions(), "id", "text").for_worker(tiny)
        assert isinstance(sent, PackedTexts) and tiny.used == 0
        tiny.close()
        for start in placed:
            ring.take_back(start)
        assert ring.used == 0
    finally:
        ring.close()


@pytest.mark.parametrize("ring_bytes", [None, 1000])
def test_worker_processes_read_rows_as_the_loader_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ring_bytes: int | None
) -> None:

    from simhash_redis.jobs import fingerprinter as module
    from simhash_redis.jobs.fingerprinter import Fingerprinter

    # Packed by the loading thread, not by the pool's feeder thread as it pickles the call (which costs
    # the loading process more: see Fingerprinter._submit); through shared memory to forked workers,
    # packed through the pipe for a run the ring has no room for (a ring of `ring_bytes`).
    sent: list[type] = []
    started: set[str] = set()
    run = Fingerprinter._run

    def recorded(self: Fingerprinter, function: Callable[..., object], *args: object) -> object:
        sent.append(type(args[1]))  # _in_worker's arguments: the work, then the unit it is given
        # Forked only where no other thread runs (an earlier test's pool may still be winding down).
        started.add(self._executor._mp_context.get_start_method())  # type: ignore[union-attr]
        return run(self, function, *args)

    monkeypatch.setattr(Fingerprinter, "_run", recorded)
    if ring_bytes is not None:
        monkeypatch.setattr(module, "_RING_MOST", ring_bytes)

    texts = [article(i) for i in range(3000)]
    texts[150] = " \u3000 "
    path = tmp_path / "one-group.parquet"
    pq.write_table(pa.table({"id": [f"a{i}" for i in range(3000)], "text": texts}), path)
    results = []
    for workers in (1, 2):
        fingerprinter = Fingerprinter(Scheme(), 64, "auto", workers, 1000)
        try:
            done = list(fingerprinter.batches(arrow.arrow_chunks(str(path), "parquet", ReadOptions(), 1000)))
            assert fingerprinter._ring is None or fingerprinter._ring.used == 0  # every span taken back
        finally:
            fingerprinter.close()
        results.append([(b.ids, b.fps, [(at, str(e)) for at, e in b.errors]) for b in done])
    assert results[0] == results[1]
    forked = started == {"fork"}
    assert sent == [SharedTexts if forked and ring_bytes is None else PackedTexts] * 3
    assert results[1][0][2] == [(150, f"{path}:151: empty text")] and len(results[1][0][0]) == 999


def test_fingerprint_columns_go_to_workers_as_arrow() -> None:
    batch = pa.record_batch({"id": ["a", "b"], "fp": pa.array([1, 2], type=pa.uint64())})
    options = ReadOptions(fingerprint_field="fp")
    rows = arrow.ArrowRows("t.parquet", 1, batch, options, "id", "fp")
    sent = pickle.loads(pickle.dumps(rows, protocol=4))
    assert isinstance(sent, arrow.ArrowRows) and sent.records() == rows.records()


def test_near_file_of_a_verified_index(invoke: Invoke, tmp_path: Path) -> None:
    loaded = invoke("--verified", "--index", "v", "load", str(_parquet(tmp_path / "news.parquet", 5)))
    assert loaded.exit_code == 0, loaded.output
    pq.write_table(pa.table({"id": ["q"], "text": [article(2, 1)]}), tmp_path / "q.parquet")
    near = invoke("--index", "v", "near", "--file", str(tmp_path / "q.parquet"))
    assert near.exit_code == 0, near.output
    query, match, distance, _, jaccard = near.stdout.splitlines()[0].split("\t")
    assert (query, match, distance) == ("q", "a2", "0") and float(jaccard) >= 0.8
    fps = tmp_path / "fps.parquet"
    pq.write_table(pa.table({"id": ["f"], "fp": pa.array([1], pa.uint64())}), fps)
    refused = invoke("--index", "v", "near", "--file", str(fps), "--fingerprint-field", "fp")
    assert refused.exit_code == 3 and "not a fingerprint" in refused.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ids_start_with_the_input_name_when_asked(invoke: Invoke, tmp_path: Path, workers: str) -> None:
    # --id-prefix-input names each id by its input, Parquet and Arrow as JSON Lines (they were ignored).
    parquet = _parquet(tmp_path / "news.parquet", 30)
    result = invoke("load", "--json", "--id-prefix-input", "-j", workers, str(parquet), index=f"p{workers}")
    assert json.loads(result.stdout)["added"] == 30, result.output
    assert invoke("get", f"{parquet}:a7", index=f"p{workers}").exit_code == 0
    assert invoke("get", "a7", index=f"p{workers}").exit_code != 0


@pytest.mark.parametrize("done", [True, False])
def test_the_oldest_batch_is_given_once_done_before_the_pool_is_full(
    monkeypatch: pytest.MonkeyPatch, done: bool
) -> None:
    # When reading is slower than fingerprinting (a Parquet file decoded on a thread), the caller writes
    # what is done once each worker has another batch, instead of waiting for the pool to fill; else
    # the pool fills first, as it always did.
    from simhash_redis.jobs import fingerprinter as module
    from simhash_redis.jobs.records import Record

    monkeypatch.setattr(module._Due, "ready", lambda self: done)
    read: list[int] = []

    def units() -> Iterator[Record]:
        for i in range(8):
            read.append(i)
            yield Record("in", i + 1, f"k{i}", article(i))

    fingerprinter = module.Fingerprinter(Scheme(), 64, "auto", 2, 1)  # a batch a record
    try:
        batches = fingerprinter.batches(units())
        first = next(batches)
        assert len(read) == (2 + 1 if done else 2 * 2 + 1)
        rest = list(batches)
    finally:
        fingerprinter.close()
    assert [b.ids for b in (first, *rest)] == [[f"k{i}"] for i in range(8)]


def test_an_arrow_file_on_standard_input_is_refused_with_its_reason(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "kept.arrow"
    with pa.ipc.new_file(path, _table(5).schema) as writer:
        writer.write_table(_table(5))
    piped = invoke("load", "--format", "arrow", "-", input=path.read_bytes())
    assert piped.exit_code == 2, piped.output
    assert "standard input holds an Arrow IPC file" in piped.stderr and "give its path" in piped.stderr
    assert "metadata bytes" not in piped.stderr and "Traceback" not in piped.output
    assert invoke("load", str(path)).exit_code == 0  # by its path it loads


def test_dictionary_encoded_columns_are_read_as_their_values(invoke: Invoke, tmp_path: Path) -> None:
    # pandas' categorical columns: written as dictionaries, of strings (ids, texts) or integers.
    plain = _table(20)
    table = pa.table(
        {
            "id": plain.column("id").combine_chunks().dictionary_encode(),
            "text": plain.column("text").combine_chunks().dictionary_encode(),
            "fp": pa.array([i + 1 for i in range(20)]).dictionary_encode(),
        }
    )
    pq.write_table(table, tmp_path / "cat.parquet")
    assert pa.types.is_dictionary(pq.read_schema(tmp_path / "cat.parquet").field("text").type)
    with pa.ipc.new_file(tmp_path / "cat.arrow", table.schema) as writer:
        writer.write_table(table)
    for name, index in (("cat.parquet", "p"), ("cat.arrow", "a")):
        loaded = invoke("--plain", "load", "--json", str(tmp_path / name), index=index)
        assert loaded.exit_code == 0, loaded.output
        assert json.loads(loaded.stdout)["added"] == 20
        expected = format_fingerprint(Scheme().fingerprint(article(7)), 64)
        assert invoke("get", "a7", index=index).stdout.strip() == expected
    fps = invoke("load", "--json", "--fingerprint-field", "fp", str(tmp_path / "cat.parquet"), index="fp")
    assert fps.exit_code == 0 and json.loads(fps.stdout)["added"] == 20, fps.output
    assert invoke("get", "a3", index="fp").stdout.strip() == format_fingerprint(4, 64)


def test_a_text_not_utf8_is_its_rows_error_when_read_as_records(tmp_path: Path) -> None:
    # A string column's value that is not UTF-8 (Arrow does not check): read() and the pure engine gave
    # a UnicodeDecodeError traceback; the compiled core's path already named the row.
    import struct

    texts = [b"good text", b"\xff bad", b"more"]
    ends = [0, *(sum(len(t) for t in texts[: at + 1]) for at in range(3))]
    column = pa.Array.from_buffers(
        pa.string(), 3, [None, pa.py_buffer(struct.pack("4i", *ends)), pa.py_buffer(b"".join(texts))]
    )
    path = tmp_path / "bad.arrow"
    with pa.ipc.new_file(path, pa.schema([("id", pa.string()), ("text", pa.string())])) as writer:
        writer.write_batch(pa.record_batch({"id": ["a", "b", "c"], "text": column}))
    got = [str(item) if isinstance(item, Exception) else item.id for item in read(str(path))]
    assert got == ["a", f"{path}:2: not valid UTF-8 (byte 0)", "c"]
