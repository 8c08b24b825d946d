"""The examples of docs/pipelines.md, run as written against a real server on local snapshots.

Nothing reaches the network: the Hugging Face hub is switched off before datasets or datatrove load.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import article

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

DOC = Path(__file__).resolve().parents[1] / "docs" / "pipelines.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def _snapshots(root: Path) -> None:
    """Two crawl snapshots: 2024-10 (stories 0..29), 2025-05 (stories 10..49, and a copy of each), in
    the files the page names; one row of 2025-05 has an empty text."""
    old = root / "snapshots" / "2024-10"
    new = root / "snapshots" / "2025-05"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {"id": [f"https://a.example/{i}" for i in range(30)], "text": [article(i) for i in range(30)]}
        ),
        old / "part-0.parquet",
    )
    ids = [f"https://b.example/{i}" for i in range(10, 50)] + [
        f"https://c.example/{i}" for i in range(10, 50)
    ]
    texts = [article(i) for i in range(10, 50)] + [article(i, 1) for i in range(10, 50)]
    texts[42] = "   "
    table = pa.table({"id": ids, "text": texts, "lang": ["en"] * len(ids)})
    pq.write_table(table.slice(0, 40), new / "part-0.parquet")
    pq.write_table(table.slice(40), new / "part-1.parquet")


def test_the_shell_examples_run_as_written(redis_url: str, tmp_path: Path) -> None:
    _snapshots(tmp_path)
    env = dict(os.environ, SIMHASH_REDIS_URL=redis_url)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    runs = []
    for block in _blocks("bash"):
        runs.append(
            subprocess.run(["bash", "-ec", block], cwd=tmp_path, env=env, capture_output=True, text=True)
        )
        assert runs[-1].returncode == 0, (block, runs[-1].stderr)
    kept = pq.read_table(tmp_path / "kept-2025-05.parquet")
    # Stories 10..29 were kept in 2024-10; of 30..49 the first met of each story and its copy.
    assert kept.column("id").to_pylist() == [f"https://b.example/{i}" for i in range(30, 50)]
    assert kept.column_names == ["id", "text", "lang"]
    assert "snapshots/2025-05/part-1.parquet:3: empty text" in runs[1].stderr
    audit = pq.read_table(tmp_path / "audit.parquet").to_pylist()
    statuses = [row["status"] for row in audit]  # the rows kept before are stored under their ids
    assert (statuses.count("kept"), statuses.count("dropped"), statuses.count("bad")) == (20, 59, 1)
    assert runs[3].stdout.startswith("https://b.example/10\thttps://a.example/10\t0\t")


def test_the_python_examples_run_as_written(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("datatrove")
    _snapshots(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    namespace: dict[str, object] = {"REDIS_URL": redis_url}
    hf, marks, trove = _blocks("python")
    exec(hf, namespace)
    kept = pq.read_table(tmp_path / "kept-hf.parquet").column("id").to_pylist()
    # One of each story, and the blank text (kept and not stored: the index refuses an empty text).
    assert len(kept) == 41 and len({doc_id.rsplit("/", 1)[1] for doc_id in kept}) == 40
    exec(marks, namespace)
    # Run again over the same rows: each kept row is its own stored document, every other a copy.
    copies = namespace["copies"]
    assert len(copies) == 39  # type: ignore[arg-type]
    exec(trove, namespace)
    kept_trove = pq.read_table(tmp_path / "kept" / "2025-05")  # a file per task
    dropped = pq.read_table(tmp_path / "dropped" / "2025-05")
    assert (kept_trove.num_rows, dropped.num_rows) == (41, 39)
    stored = set(kept_trove.column("id").to_pylist())
    assert {row["duplicate_of"] for row in dropped.column("metadata").to_pylist()} <= stored
