"""Loader.load: JSON Lines parsed by the fingerprinting workers, with the same outcome as Loader.run."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest
import redis

from simhash_redis import InputError, SimhashIndex
from simhash_redis.errors import TooManyErrors
from simhash_redis.jobs.loader import Loader, LoadStats
from simhash_redis.jobs.readers import ReadOptions, read_all
from tests.cli.conftest import article


def _messy_jsonl(count: int) -> bytes:
    """JSON lines with every kind of fault between good ones, a BOM and CRLF line ends."""
    lines: list[bytes] = []
    for i in range(count):
        kind = i % 11
        if kind == 3:
            lines.append(b"{not json")
        elif kind == 5:
            lines.append(b"")  # blank: skipped, not an error
        elif kind == 7:
            lines.append(json.dumps({"id": f"d{i}", "text": 42}).encode())
        elif kind == 9:
            lines.append(b'{"id": "d%d", "text": "caf\xe9"}' % i)  # not UTF-8
        else:
            lines.append(json.dumps({"id": f"d{i}", "text": article(i)}).encode())
    return b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n"


def _outcome(index: SimhashIndex, stats: LoadStats, errors: list[InputError], count: int) -> object:
    ids = [f"d{i}" for i in range(count)]
    return (
        (stats.read, stats.added, stats.errors, stats.written),
        [(e.source, e.line, e.reason) for e in errors],
        index.get_many(ids),
    )


def _both(
    client: redis.Redis, paths: list[str], count: int, options: ReadOptions | None = None, **kwargs: object
) -> tuple[object, object]:
    """The outcome of Loader.run(read_all(...)) and of Loader.load(...) on two fresh indexes."""
    outcomes = []
    for name in ("by-run", "by-load"):
        index = SimhashIndex(client, name)
        errors: list[InputError] = []
        loader = Loader(index, on_error=errors.append, **kwargs)  # type: ignore[arg-type]
        try:
            if name == "by-run":
                loader.run(read_all(paths, None, options))
            else:
                loader.load(paths, None, options)
        except InputError as exc:  # an input that could not be read to its end: raised after the rest
            assert exc.fatal
            errors.append(exc)
        outcomes.append(_outcome(index, loader.stats, errors, count))
    return outcomes[0], outcomes[1]


@pytest.mark.parametrize("workers", [1, 2])
def test_load_equals_run_on_messy_json_lines(redis_client: redis.Redis, tmp_path: Path, workers: int) -> None:
    path = tmp_path / "messy.jsonl"
    path.write_bytes(_messy_jsonl(700))
    by_run, by_load = _both(redis_client, [str(path)], 700, workers=workers, batch_size=100)
    assert by_load == by_run
    counts, errors, fps = by_load  # type: ignore[misc]
    assert counts[2] == len(errors) > 150 and None not in [fp for i, fp in enumerate(fps) if i % 11 in (0, 1)]
    assert [line for _, line, _ in errors] == sorted(line for _, line, _ in errors)  # in input order


def test_load_mixes_formats_and_reports_a_truncated_gzip_in_order(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    first = tmp_path / "a.jsonl.gz"
    data = b"".join(json.dumps({"id": f"d{i}", "text": article(i)}).encode() + b"\n" for i in range(300))
    first.write_bytes(gzip.compress(data)[:-40])  # cut: the last lines and the gzip trailer are lost
    second = tmp_path / "b.csv"
    second.write_text("id,text\n" + "".join(f"d{i},{article(i)}\n" for i in range(300, 400)) + "d400,\n")
    third = tmp_path / "c.jsonl"
    third.write_text("".join(json.dumps({"id": f"d{i}", "text": article(i)}) + "\n" for i in range(400, 500)))
    paths = [str(first), str(second), str(third)]
    by_run, by_load = _both(redis_client, paths, 500, workers=2, batch_size=64)
    assert by_load == by_run
    _, errors, fps = by_load  # type: ignore[misc]
    # The truncated gzip in order, the bad CSV row, then the run's end: that input was not read whole.
    assert [source for source, _, _ in errors] == [str(first), str(second), str(first)]
    assert None not in fps[300:400] + fps[401:]


def test_load_stops_where_run_stops_after_max_errors(redis_client: redis.Redis, tmp_path: Path) -> None:
    rows = [json.dumps({"id": f"d{i}", "text": article(i)}) for i in range(600)]
    for at in (150, 260, 270, 590):
        rows[at] = "{broken"
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(rows) + "\n")
    outcomes = []
    for name, use_load in (("by-run", False), ("by-load", True)):
        index = SimhashIndex(redis_client, name)
        loader = Loader(index, workers=2, batch_size=64, max_errors=2)
        with pytest.raises(TooManyErrors, match="max-errors 2"):
            loader.load([str(path)]) if use_load else loader.run(read_all([str(path)]))
        outcomes.append(_outcome(index, loader.stats, [], 600))
    assert outcomes[0] == outcomes[1]
    stored = outcomes[1][2]  # type: ignore[index]
    # Every good line before the third bad one (line 271) is stored, nothing after it.
    assert [i for i, fp in enumerate(stored) if fp is None] == [150, 260, *range(270, 600)]


def test_load_reads_precomputed_fingerprints_from_json_in_workers(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    rows = [{"id": f"d{i}", "fp": f"0x{i + 1:016x}"} for i in range(200)]
    rows[10]["fp"] = "zz"
    path = tmp_path / "fps.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    options = ReadOptions(fingerprint_field="fp")
    by_run, by_load = _both(redis_client, [str(path)], 200, options, workers=2, batch_size=64)
    assert by_load == by_run
    _, errors, fps = by_load  # type: ignore[misc]
    assert [line for _, line, _ in errors] == [11]
    assert fps[0] == 1 and fps[199] == 200 and fps[10] is None


def test_load_checks_every_input_before_loading(redis_client: redis.Redis, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": "d0", "text": article(0)}) + "\n")
    index = SimhashIndex(redis_client, "checked")
    with pytest.raises(FileNotFoundError):
        Loader(index, workers=1).load([str(good), str(tmp_path / "missing.jsonl")])
    assert index.count()[0] == 0


def test_input_errors_survive_pickling() -> None:
    error = InputError("news.jsonl", 7, "not valid JSON")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.source, copy.line, copy.reason, str(copy)) == (
        InputError,
        "news.jsonl",
        7,
        "not valid JSON",
        "news.jsonl:7: not valid JSON",
    )
