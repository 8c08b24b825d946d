"""A Hugging Face `datasets` filter and map over a shared index (NewDocuments), workers included.

Every dataset is built here from a dict or local files: nothing is downloaded (the hub is switched off).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simhash_redis import InvalidArgument, SimhashIndex
from simhash_redis.contrib.new_documents import NewDocuments
from tests.cli.conftest import article

os.environ["HF_HUB_OFFLINE"] = "1"  # before datasets reads its configuration: never the network
os.environ["HF_DATASETS_OFFLINE"] = "1"
datasets = pytest.importorskip("datasets")


def _snapshot(start: int, n: int, copies: int = 0, name: str = "s") -> dict[str, list[str]]:
    ids = [f"{name}:{i}" for i in range(start, start + n)]
    texts = [article(i) for i in range(start, start + n)]
    for c in range(1, copies + 1):
        ids += [f"{name}:{i}:copy{c}" for i in range(start, start + n)]
        texts += [article(i, c) for i in range(start, start + n)]
    return {"id": ids, "text": texts, "url": [f"https://example.org/{i}" for i in ids]}


def test_filter_keeps_only_what_earlier_snapshots_lack(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    keep = NewDocuments(redis_url, "crawl")
    old = datasets.Dataset.from_dict(_snapshot(0, 30, name="2024"))
    assert len(old.filter(keep, batched=True, batch_size=8)) == 30
    # The new snapshot, from local Parquet files: 20 stories seen before, 20 new, and a copy of each.
    new = datasets.Dataset.from_dict(_snapshot(10, 40, copies=1, name="2025"))
    new.to_parquet(str(tmp_path / "2025.parquet"))
    local = datasets.load_dataset("parquet", data_files=str(tmp_path / "2025.parquet"), split="train")
    kept = local.filter(keep, batched=True, batch_size=8, num_proc=2, load_from_cache_file=False)
    # Stories 10..29 were kept in 2024; of 30..49 the story or its copy (the two workers race), never both.
    assert sorted(int(doc_id.split(":")[1]) for doc_id in kept["id"]) == list(range(30, 50))
    assert kept.column_names == ["id", "text", "url"]
    # Run again (a pipeline resumed after a crash): what was kept is kept again, nothing else.
    again = local.filter(keep, batched=True, batch_size=8, num_proc=2, load_from_cache_file=False)
    assert sorted(again["id"]) == sorted(kept["id"])


def test_workers_racing_on_copies_keep_exactly_one(redis_url: str) -> None:
    # Each story and its copy land in different shards of the 2 workers (rows i and i + 40).
    rows = _snapshot(0, 40, copies=1)
    kept = datasets.Dataset.from_dict(rows).filter(
        NewDocuments(redis_url, "race"), batched=True, batch_size=4, num_proc=2
    )
    stories = [doc_id.split(":")[1] for doc_id in kept["id"]]
    assert sorted(stories) == sorted(str(i) for i in range(40))  # one of each story, never both


def test_map_writes_each_rows_verdict(redis_url: str) -> None:
    SimhashIndex.from_url(redis_url, "plain").add("old", article(3))
    marked = datasets.Dataset.from_dict(_snapshot(0, 6, copies=1)).map(
        NewDocuments(redis_url, "plain", verified=False).verdicts, batched=True, batch_size=4
    )
    assert marked["duplicate_of"][:6] == [None, None, None, "old", None, None]
    assert marked["duplicate_of"][6:] == ["s:0", "s:1", "s:2", "old", "s:4", "s:5"]
    assert marked["distance"][9] == 0 and marked["jaccard"] == [None] * 12
    verified = datasets.Dataset.from_dict(_snapshot(0, 3, copies=1)).map(
        NewDocuments(redis_url, "checked").verdicts, batched=True
    )
    assert verified["duplicate_of"][3:] == ["s:0", "s:1", "s:2"] and min(verified["jaccard"][3:]) >= 0.8


def test_a_batch_without_its_columns_is_refused(redis_url: str) -> None:
    rows = datasets.Dataset.from_dict({"content": [article(1)]})
    with pytest.raises(InvalidArgument, match="no 'id' column"):
        NewDocuments(redis_url, "crawl")(rows[:1])
    by_name = NewDocuments(redis_url, "crawl", id_column="content", text_column="content")
    assert by_name(rows[:1]) == [True]


def test_the_mode_is_the_stored_one_unless_asked_and_a_new_index_is_verified(redis_url: str) -> None:
    from simhash_redis import ConfigurationMismatch, VerifiedIndex

    # An existing plain index, still empty (its writer has not written yet), stays plain: opened by
    # default it is used as it is, never pinned verified; asked for verified, it is refused.
    SimhashIndex.from_url(redis_url, "flat")
    assert type(NewDocuments(redis_url, "flat").open()) is SimhashIndex
    with pytest.raises(ConfigurationMismatch, match="'flat' is not verified"):
        NewDocuments(redis_url, "flat", verified=True).open()
    assert SimhashIndex.from_url(redis_url, "flat", create=False).config.verification is None
    assert isinstance(NewDocuments(redis_url, "fresh").open(), VerifiedIndex)
    assert type(NewDocuments(redis_url, "plain-new", verified=False).open()) is SimhashIndex
