"""Data pipelines: `load` from Parquet against JSON Lines, `dedupe` Parquet in and out, the datatrove step.

Run from the repository root::

    python -m benchmarks.bench_pipelines [--docs 20000] [--gb 1.0] [--quick]

* `load` of the same real 3.5 KB texts (70% English, 30% Chinese, as bench_load) from a Parquet file and
  from JSON Lines, end to end through the CLI, alternately, each on an emptied server, best of
  `--rounds`. Target: Parquet >= 0.9x the docs/s of JSON Lines.
* `dedupe FILE.parquet --output kept.parquet` of a Parquet file of `--gb` GB (uncompressed, row groups
  of 10,000 rows) and of a quarter of it: the peak RSS of the largest process of the command (the reader
  or a fingerprinting worker, from wait4), which must not grow with the input. Its documents are the real
  texts recombined (the first half of one and the second half of another), so that there are more of
  them than the corpus holds and few are near-duplicates.
* The datatrove step (`NearDuplicateFilter`, verified and plain) reading the same texts from Parquet with
  2 tasks on 2 workers, against `load` and `dedupe` of the same Parquet file in the same run.

On a machine shared with other jobs absolute rates drift: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from benchmarks import Figure, corpus, rate
from benchmarks.bench_load import _run_load

COMMAND = "python -m benchmarks.bench_pipelines"


def _exe() -> str:
    exe = shutil.which("simhash-redis", path=str(Path(sys.executable).parent)) or shutil.which(
        "simhash-redis"
    )
    if exe is None:
        raise SystemExit("the simhash-redis command is not installed")
    return exe


def _texts(count: int) -> list[str]:
    english = count * 7 // 10
    return corpus.documents("en", english) + corpus.documents("zh", count - english)


def _write_parquet(path: Path, ids: list[str], texts: list[str], files: int = 1) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if files == 1:
        pq.write_table(pa.table({"id": ids, "text": texts}), path)
        return
    path.mkdir()
    for part in range(files):
        pq.write_table(
            pa.table({"id": ids[part::files], "text": texts[part::files]}), path / f"part-{part}.parquet"
        )


def load_formats(exe: str, url: str, tmp: Path, texts: list[str], rounds: int) -> tuple[list[Figure], float]:
    """`load` of the texts from JSON Lines and from Parquet, alternately; the figures and load's docs/s."""
    ids = [corpus.id_of(i) for i in range(len(texts))]
    jsonl = tmp / "docs.jsonl"
    with jsonl.open("w", encoding="utf-8") as out:
        for doc_id, text in zip(ids, texts, strict=True):
            out.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    parquet = tmp / "docs.parquet"
    _write_parquet(parquet, ids, texts)
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    ratios: list[float] = []
    client = redis.Redis.from_url(url)
    for turn in range(rounds):
        # Alternated, and the first format of each round alternated too: a shared machine's load drifts.
        order = (("jsonl", jsonl), ("parquet", parquet))
        figures_of_round = {}
        for name, path in order if turn % 2 == 0 else order[::-1]:
            # Every load on an empty server: creating an index scans the keyspace for keys left under its
            # name, so each load would start slower than the one before it (a 1-document load: 0.4 s on
            # an empty server, 1.1 s after 8 of these loads), and the first load of all (always JSON
            # Lines) would be the best of its format by that alone.
            client.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
            seconds, summary = _run_load(exe, url, f"fmt-{name}-{turn}", path, "native")
            figures_of_round[name] = (rate(len(texts), seconds), float(summary.get("docs_per_s", 0.0)))
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, summary)
        (pq_wall, pq_inner), (js_wall, js_inner) = figures_of_round["parquet"], figures_of_round["jsonl"]
        ratios.append(pq_wall / js_wall)
        print(
            f"  round {turn + 1}: Parquet {pq_wall:,.0f} docs/s (loading {pq_inner:,.0f}), JSON Lines "
            f"{js_wall:,.0f} ({js_inner:,.0f}): {pq_wall / js_wall:.2f}x ({pq_inner / js_inner:.2f}x)"
        )
    print(f"  median of the rounds' ratios: {statistics.median(ratios):.2f}x")
    wall = {name: rate(len(texts), seconds) for name, (seconds, _) in best.items()}
    inner = {name: float(summary.get("docs_per_s", 0.0)) for name, (_, summary) in best.items()}
    figures = [
        Figure(
            f"load of {len(texts):,} texts from Parquet, end to end",
            wall["parquet"],
            "docs/s",
            "the same from JSON Lines",
            wall["jsonl"],
            target=">= 0.9x JSON Lines",
            met=wall["parquet"] >= 0.9 * wall["jsonl"],
            command=COMMAND,
            extra={
                "bytes": {"jsonl": jsonl.stat().st_size, "parquet": parquet.stat().st_size},
                "round_ratios": [round(r, 2) for r in ratios],
                "median_round_ratio": round(statistics.median(ratios), 2),
            },
        ),
        Figure(
            "load from Parquet, loading only (no process start)",
            inner["parquet"],
            "docs/s",
            "the same from JSON Lines",
            inner["jsonl"],
            command=COMMAND,
        ),
    ]
    return figures, wall["jsonl"]


def _peak_rss_mb(argv: list[str]) -> tuple[float, float, str]:
    """Run a command; its wall seconds, the peak RSS of its largest process (MB) and its stderr."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[3:]} failed ({proc.returncode}): {stderr[-500:]}")
    return seconds, usage.ru_maxrss / 1024, stderr


def _big_parquet(path: Path, texts: list[str], gigabytes: float) -> int:
    """A Parquet file of about `gigabytes` of text, uncompressed, row groups of 10,000 rows; its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    size = sum(len(t.encode()) for t in texts) / len(texts)
    rows = int(gigabytes * 1e9 / size)
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("source", pa.string())])
    halves = [len(t) // 2 for t in texts]
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        for start in range(0, rows, 10_000):
            ids, docs = [], []
            for r in range(start, min(rows, start + 10_000)):
                i = r % len(texts)
                j = (i + 1 + r // len(texts)) % len(texts)  # a distinct pair of texts for every row
                ids.append(f"big:{r:012d}")
                docs.append(texts[i][: halves[i]] + texts[j][halves[j] :])
            writer.write_table(
                pa.table({"id": ids, "text": docs, "source": ["bench"] * len(ids)}, schema=schema),
                row_group_size=10_000,
            )
    return rows


def dedupe_memory(exe: str, url: str, tmp: Path, texts: list[str], gigabytes: float) -> list[Figure]:
    """`dedupe` Parquet in and out: peak RSS for the whole input and for a quarter of it."""
    runs: dict[str, tuple[float, float, int, int]] = {}
    for label, share in (("quarter", gigabytes / 4), ("whole", gigabytes)):
        path = tmp / f"big-{label}.parquet"
        rows = _big_parquet(path, texts, share)
        out = tmp / f"kept-{label}.parquet"
        argv = [exe, "--redis-url", url, "--index", f"big-{label}", "dedupe", str(path), "--output", str(out)]
        seconds, peak, stderr = _peak_rss_mb(argv)
        runs[label] = (seconds, peak, rows, path.stat().st_size)
        size = path.stat().st_size / 1e9
        print(f"  dedupe {size:.2f} GB ({rows:,} rows): {seconds:.1f} s, peak RSS {peak:.0f} MB")
        print("   ", stderr.strip().splitlines()[-1] if stderr.strip() else "")
        path.unlink()
        out.unlink()
    seconds, peak, rows, size = runs["whole"]
    return [
        Figure(
            f"dedupe Parquet in and out, {size / 1e9:.2f} GB: peak RSS",
            peak,
            "MB",
            f"the same on {runs['quarter'][3] / 1e9:.2f} GB",
            runs["quarter"][1],
            higher_is_better=False,
            target="bounded: <= 1.25x the quarter's",
            met=peak <= 1.25 * runs["quarter"][1],
            command=COMMAND,
            extra={"rows": rows, "seconds": round(seconds, 1), "docs_per_s": round(rate(rows, seconds), 1)},
        )
    ]


def datatrove_step(exe: str, url: str, tmp: Path, texts: list[str], load_rate: float) -> list[Figure]:
    """The datatrove step on the texts from Parquet (2 tasks, 2 workers) against load and dedupe."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DATATROVE_COLORIZE_LOGS", "0")
    try:
        from datatrove.executor import LocalPipelineExecutor
        from datatrove.pipeline.readers import ParquetReader

        from simhash_redis.contrib.datatrove import NearDuplicateFilter
    except ImportError:
        print("  datatrove is not installed: its step is not measured")
        return []
    ids = [corpus.id_of(i) for i in range(len(texts))]
    folder = tmp / "dataset"
    _write_parquet(folder, ids, texts, files=2)
    start = time.perf_counter()
    subprocess.run(
        [exe, "--redis-url", url, "--index", "dt-dedupe", "dedupe", str(folder), "-q"],
        capture_output=True,
        check=True,
    )
    dedupe_rate = rate(len(texts), time.perf_counter() - start)
    figures = []
    for verified in (True, False):
        start = time.perf_counter()
        LocalPipelineExecutor(
            pipeline=[
                ParquetReader(str(folder)),
                NearDuplicateFilter(url, f"dt-{verified}", verified=verified, batch_size=500),
            ],
            tasks=2,
            workers=2,
            logging_dir=str(tmp / f"logs-{verified}"),
        ).run()
        ours = rate(len(texts), time.perf_counter() - start)
        mode = "verified" if verified else "plain"
        figures.append(
            Figure(
                f"datatrove step ({mode}), 2 tasks on 2 workers",
                ours,
                "docs/s",
                "load of the same texts",
                load_rate,
                command=COMMAND,
                extra={"dedupe_docs_per_s": round(dedupe_rate, 1)},
            )
        )
    figures.append(
        Figure(
            "dedupe of the same Parquet dataset, end to end",
            dedupe_rate,
            "docs/s",
            "load of the same texts",
            load_rate,
            command=COMMAND,
        )
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=20_000, help="3.5 KB texts for load and datatrove")
    parser.add_argument("--gb", type=float, default=1.0, help="size of the Parquet file dedupe reads")
    parser.add_argument("--rounds", type=int, default=2, help="alternate loads per format (best kept)")
    parser.add_argument("--quick", action="store_true", help="4,000 texts, 0.2 GB, one round")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: load,dedupe,datatrove")
    args = parser.parse_args()
    docs, gigabytes, rounds = (4_000, 0.2, 1) if args.quick else (args.docs, args.gb, args.rounds)
    skip = set(filter(None, args.skip.split(",")))
    corpus.unpin()
    exe = _exe()
    texts = _texts(docs)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="simhash-bench-") as tmp, corpus.server(cpu=None) as server:
        load_rate = 0.0
        if "load" not in skip:
            found, load_rate = load_formats(exe, server.url, Path(tmp), texts, rounds)
            figures += found
        if "datatrove" not in skip:
            figures += datatrove_step(exe, server.url, Path(tmp), texts, load_rate)
        if "dedupe" not in skip:
            figures += dedupe_memory(exe, server.url, Path(tmp), texts, gigabytes)
    for figure in figures:
        print(figure.line())
    print("(a shared machine: absolute rates drift, the ratios of one run hold)")


if __name__ == "__main__":
    main()
