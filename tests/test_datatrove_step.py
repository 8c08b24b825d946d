"""The datatrove step (NearDuplicateFilter): small pipelines run end to end on local files, tasks in parallel.

Nothing reaches the network: the Hugging Face hub is switched off before datatrove is imported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.conftest import article, write_jsonl

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("DATATROVE_COLORIZE_LOGS", "0")
pytest.importorskip("datatrove")

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader, ParquetReader
from datatrove.pipeline.writers import JsonlWriter, ParquetWriter

from simhash_redis.contrib.datatrove import NearDuplicateFilter


def _snapshot(folder: Path, name: str, stories: range, copies: int = 0, files: int = 4) -> None:
    """A crawl snapshot as JSON Lines files: each story (and each copy) a document with a URL as id."""
    rows = [{"id": f"https://{name}.example/{i}", "text": article(i)} for i in stories]
    rows += [
        {"id": f"https://{name}.example/{i}/copy{c}", "text": article(i, c)}
        for c in range(1, copies + 1)
        for i in stories
    ]
    folder.mkdir(parents=True)
    for part in range(files):
        write_jsonl(folder / f"part-{part}.jsonl", rows[part::files])


def _ids(folder: Path) -> list[str]:
    return sorted(json.loads(line)["id"] for file in folder.glob("*.jsonl*") for line in _lines(file))


def _lines(file: Path) -> list[str]:
    import gzip

    data = gzip.decompress(file.read_bytes()) if file.suffix == ".gz" else file.read_bytes()
    return data.decode().splitlines()


def _run(redis_url: str, source: Path, out: Path, logs: Path, **step: object) -> None:
    LocalPipelineExecutor(
        pipeline=[
            JsonlReader(str(source)),
            NearDuplicateFilter(redis_url, "crawl", batch_size=8, **step),  # type: ignore[arg-type]
            JsonlWriter(str(out)),
        ],
        tasks=4,
        workers=2,
        logging_dir=str(logs),
        skip_completed=False,
    ).run()


def test_a_new_snapshot_keeps_only_what_earlier_ones_lack(redis_url: str, tmp_path: Path) -> None:
    _snapshot(tmp_path / "2024", "old", range(0, 30))
    _snapshot(tmp_path / "2025", "new", range(10, 50), copies=1)
    _run(redis_url, tmp_path / "2024", tmp_path / "kept-2024", tmp_path / "logs-2024")
    assert len(_ids(tmp_path / "kept-2024")) == 30
    dropped = tmp_path / "dropped-2025"
    _run(
        redis_url,
        tmp_path / "2025",
        tmp_path / "kept-2025",
        tmp_path / "logs-2025",
        exclusion_writer=JsonlWriter(str(dropped)),
    )
    kept = _ids(tmp_path / "kept-2025")
    # Stories 10..29 were kept in 2024; of 30..49, each story or its copy (tasks race), never both.
    assert len(kept) == 20 and sorted({doc_id.split("/")[3] for doc_id in kept}) == sorted(
        map(str, range(30, 50))
    )
    gone = [json.loads(line) for file in dropped.glob("*.jsonl*") for line in _lines(file)]
    assert len(gone) == 60
    assert all(doc["metadata"]["filter_reason"] == "near_duplicate" for doc in gone)
    assert {doc["metadata"]["duplicate_of"] for doc in gone if doc["id"].endswith("/10")} == {
        "https://old.example/10"
    }
    # A run again (a crashed run resumed): what was kept is kept again, nothing else.
    _run(redis_url, tmp_path / "2025", tmp_path / "again-2025", tmp_path / "logs-again")
    assert _ids(tmp_path / "again-2025") == kept


def test_parquet_in_and_out_with_the_plain_index(redis_url: str, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "in").mkdir()
    texts = [article(i) for i in range(12)] + [article(i, 1) for i in range(12)]
    table = pa.table({"text": texts, "id": [f"doc-{i}" for i in range(24)]})
    pq.write_table(table, tmp_path / "in" / "part-0.parquet", row_group_size=5)
    LocalPipelineExecutor(
        pipeline=[
            ParquetReader(str(tmp_path / "in")),
            NearDuplicateFilter(redis_url, "plain", verified=False),
            ParquetWriter(str(tmp_path / "out")),
        ],
        tasks=1,
        logging_dir=str(tmp_path / "logs"),
    ).run()
    out = pq.read_table(next((tmp_path / "out").glob("*.parquet")))
    assert out.column("id").to_pylist() == [f"doc-{i}" for i in range(12)]


def test_the_step_takes_an_existing_indexs_mode_and_verifies_a_new_one(redis_url: str) -> None:
    from simhash_redis import SimhashIndex, VerifiedIndex

    SimhashIndex.from_url(redis_url, "flat")  # existing, plain and still empty
    assert type(NearDuplicateFilter(redis_url, "flat").documents.open()) is SimhashIndex
    assert SimhashIndex.from_url(redis_url, "flat", create=False).config.verification is None
    assert isinstance(NearDuplicateFilter(redis_url, "fresh").documents.open(), VerifiedIndex)
