"""dedupe --output: the rows kept, dropped or all, written back to Parquet or Arrow with every column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simhash_redis.jobs import arrow
from tests.cli.conftest import Invoke, article

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _crawl(path: Path, n: int, start: int = 0, copies: int = 0, row_group: int = 16) -> Path:
    ids = [f"a{i}" for i in range(start, start + n)]
    texts = [article(i) for i in range(start, start + n)]
    for c in range(1, copies + 1):
        ids += [f"a{i}-copy{c}" for i in range(start, start + n)]
        texts += [article(i, c) for i in range(start, start + n)]
    table = pa.table(
        {
            "id": ids,
            "text": texts,
            "url": [f"https://example.org/{doc_id}" for doc_id in ids],
            "meta": [{"lang": "en", "n": i} for i in range(len(ids))],
        }
    )
    pq.write_table(table.replace_schema_metadata({"origin": "crawl"}), path, row_group_size=row_group)
    return path


def test_kept_dropped_and_all_rows(invoke: Invoke, tmp_path: Path) -> None:
    # A plain index: its rows have no jaccard column.
    assert invoke("--plain", "load", str(_crawl(tmp_path / "old.parquet", 10))).exit_code == 0
    new = _crawl(tmp_path / "new.parquet", 20, copies=1)  # a0..a19, then a copy of each
    kept = invoke("dedupe", "-q", str(new), "--output", str(tmp_path / "kept.parquet"))
    assert kept.exit_code == 0 and kept.stdout == "", kept.output
    table = pq.read_table(tmp_path / "kept.parquet")
    assert table.column("id").to_pylist() == [f"a{i}" for i in range(20)]  # stored before, or new
    source = pq.read_table(new)
    assert table.schema.equals(source.schema) and table.schema.metadata == {b"origin": b"crawl"}
    assert table.to_pylist() == source.slice(0, 20).to_pylist()  # every column intact
    dropped = invoke("dedupe", str(new), "--output", str(tmp_path / "dropped.parquet"), "--rows", "dropped")
    assert "wrote 20 rows (dropped)" in dropped.stderr, dropped.output
    assert pq.read_table(tmp_path / "dropped.parquet").column("id").to_pylist() == [
        f"a{i}-copy1" for i in range(20)
    ]
    every = invoke("dedupe", "-q", str(new), "--output", str(tmp_path / "all.arrow"), "--rows", "all")
    assert every.exit_code == 0, every.output
    rows = pa.ipc.open_file(str(tmp_path / "all.arrow")).read_all().to_pylist()
    assert len(rows) == 40 and "jaccard" not in rows[0]
    assert {k: rows[0][k] for k in ("id", "status", "duplicate_of", "distance")} == {
        "id": "a0",
        "status": "kept",
        "duplicate_of": None,
        "distance": None,
    }
    assert {k: rows[23][k] for k in ("id", "status", "duplicate_of", "distance")} == {
        "id": "a3-copy1",
        "status": "dropped",
        "duplicate_of": "a3",
        "distance": 0,
    }
    assert rows[23]["url"] == "https://example.org/a3-copy1" and rows[23]["meta"] == {"lang": "en", "n": 23}


@pytest.mark.parametrize("mode", ["--plain", "--verified"])
def test_each_row_of_an_id_met_again_gets_its_own_verdict(invoke: Invoke, tmp_path: Path, mode: str) -> None:
    # Verdicts were kept by id: both rows of an id seen twice were `kept`, though the second, a copy of
    # the first, was not stored (add_if_new one at a time answers Match(a, distance 0) for it).
    rows = [("a", 1, 0), ("b", 2, 0), ("a", 1, 0), ("c", 3, 0), ("c", 4, 0), ("d", 4, 0), ("a", 1, 0)]
    path = tmp_path / "in.parquet"
    table = {"id": [r[0] for r in rows], "text": [article(n, copy) for _, n, copy in rows]}
    pq.write_table(pa.table(table), path, row_group_size=3)
    out = tmp_path / "all.parquet"
    result = invoke(mode, "dedupe", "-q", str(path), "--output", str(out), "--rows", "all", index="twice")
    assert result.exit_code == 0, result.output
    verdicts = pq.read_table(out).select(["id", "status", "duplicate_of", "distance"]).to_pylist()
    assert [tuple(v.values()) for v in verdicts] == [
        ("a", "kept", None, None),
        ("b", "kept", None, None),
        ("a", "dropped", "a", 0),  # a copy of the first row of a
        ("c", "kept", None, None),
        ("c", "kept", None, None),  # another text: stored in the place of the first c
        ("d", "dropped", "c", 0),
        ("a", "dropped", "a", 0),
    ]
    kept = tmp_path / "kept.parquet"
    assert invoke("dedupe", "-q", str(path), "--output", str(kept), index="again").exit_code == 0
    assert pq.read_table(kept).column("id").to_pylist() == ["a", "b", "c", "c"]
    # Run again: the first row of each id finds itself stored (not a pair); the copies are still copies.
    pairs = invoke("dedupe", str(path), index="twice").stdout.splitlines()
    assert pairs == ["a\ta\t0", "d\tc\t0", "a\ta\t0"]
    assert invoke("dedupe", "--groups", str(path), index="twice").stdout == "2\tc\td\n"


def test_a_verified_index_adds_the_jaccard(invoke: Invoke, tmp_path: Path) -> None:
    new = _crawl(tmp_path / "new.parquet", 8, copies=1)
    out = tmp_path / "all.parquet"
    result = invoke(
        "--verified", "--index", "v", "dedupe", "-q", str(new), "--output", str(out), "--rows", "all"
    )
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out).to_pylist()
    assert [row["status"] for row in rows] == ["kept"] * 8 + ["dropped"] * 8
    assert rows[0]["jaccard"] is None and rows[9]["duplicate_of"] == "a1" and rows[9]["jaccard"] >= 0.8


def test_a_dataset_in_and_bad_rows_left_out(invoke: Invoke, tmp_path: Path) -> None:
    data = tmp_path / "snapshot"
    data.mkdir()
    _crawl(data / "part-0.parquet", 10, copies=1)
    _crawl(data / "part-1.parquet", 10, start=10)
    bad = pa.table(
        {"id": ["b1", None], "text": [article(50), article(51)], "url": ["u", "v"], "meta": [None, None]}
    )
    pq.write_table(bad.cast(pq.read_schema(data / "part-0.parquet")), data / "part-2.parquet")
    out = tmp_path / "kept.parquet"
    result = invoke("dedupe", str(data), "--output", str(out))
    assert result.exit_code == 0, result.output
    assert f"{data / 'part-2.parquet'}:2: the id is null" in result.stderr
    kept = pq.read_table(out)
    assert kept.column("id").to_pylist() == [f"a{i}" for i in range(20)] + ["b1"]
    every = invoke("dedupe", "-q", str(data), "--output", str(tmp_path / "all.parquet"), "--rows", "all")
    assert every.exit_code == 0, every.output
    assert pq.read_table(tmp_path / "all.parquet").column("status").to_pylist()[-1] == "bad"


def test_refused_before_anything_is_stored(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "j1", "text": article(1)}) + "\n", encoding="utf-8")
    new = _crawl(tmp_path / "new.parquet", 4)
    not_a_table = invoke("dedupe", str(tmp_path / "a.jsonl"), "--output", str(tmp_path / "o.parquet"))
    assert (
        not_a_table.exit_code == 2 and "an output table needs Parquet or Arrow inputs" in not_a_table.stderr
    )
    itself = invoke("dedupe", str(new), "--output", str(new))
    assert itself.exit_code == 2 and "is one of the inputs" in itself.stderr
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": ["x"], "text": [article(9)]}), other)
    mixed = invoke("dedupe", str(new), str(other), "--output", str(tmp_path / "o.parquet"))
    assert mixed.exit_code == 2 and "differ from" in mixed.stderr
    nowhere = invoke("dedupe", str(new), "--output", str(tmp_path / "no" / "o.parquet"))
    assert nowhere.exit_code == 2 and "does not exist" in nowhere.stderr
    unknown = invoke("dedupe", str(new), "--output", str(tmp_path / "o.csv"))
    assert unknown.exit_code == 2 and "name it .parquet or .arrow" in unknown.stderr
    assert "Traceback" not in unknown.output + mixed.output + itself.output + not_a_table.output
    assert invoke("get", "a0").exit_code == 1  # nothing was stored


def test_a_failed_run_leaves_no_output(invoke: Invoke, tmp_path: Path) -> None:
    table = pa.table({"id": ["a", "b", "c"], "text": [article(1), "", article(3)]})
    pq.write_table(table, tmp_path / "new.parquet")
    out = tmp_path / "kept.parquet"
    result = invoke("dedupe", "--max-errors", "0", str(tmp_path / "new.parquet"), "--output", str(out))
    assert result.exit_code == 3, result.output
    assert list(tmp_path.iterdir()) == [tmp_path / "new.parquet"]  # no output, no partial file


def test_output_row_groups_stay_small(invoke: Invoke, tmp_path: Path) -> None:
    n = arrow.BATCH_ROWS // 2 + 100
    new = _crawl(tmp_path / "new.parquet", n, copies=1, row_group=1000)
    out = tmp_path / "kept.parquet"
    assert invoke("dedupe", "-q", "-j", "1", str(new), "--output", str(out)).exit_code == 0
    meta = pq.ParquetFile(out).metadata
    assert meta.num_rows == n
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert max(sizes) <= 2 * arrow.BATCH_ROWS


def test_columns_of_any_type_are_written_back(invoke: Invoke, tmp_path: Path) -> None:
    # An Arrow file keeps a dictionary of integers and string_view; the reader decodes the one and
    # pyarrow cannot filter the other: both went back as a traceback after the run had stored its rows.
    ids = [f"a{i}" for i in range(6)] + ["a0-copy1"]
    texts = [article(i) for i in range(6)] + [article(0, 1)]
    columns = {
        "id": pa.array(ids).cast(pa.string_view()),
        "text": texts,
        "shard": pa.array([i % 2 for i in range(7)])
        .dictionary_encode()
        .cast(pa.dictionary(pa.int8(), pa.int64())),
    }
    source = tmp_path / "in.arrow"
    with pa.ipc.new_file(str(source), pa.table(columns).schema) as writer:
        writer.write_table(pa.table(columns))
    for rows, expect in (("kept", ids[:6]), ("all", ids)):
        out = tmp_path / f"{rows}.arrow"
        result = invoke("--plain", "dedupe", "-q", str(source), "--output", str(out), "--rows", rows)
        assert result.exit_code == 0, result.output
        table = pa.ipc.open_file(str(out)).read_all()
        assert (
            table.column("id").to_pylist() == expect
            and table.schema.field("shard").type == columns["shard"].type
        )
        assert table.column("shard").to_pylist() == [i % 2 for i in range(7)][: len(expect)]
