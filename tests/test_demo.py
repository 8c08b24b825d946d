"""The demo: the bundled sample holds real near-duplicates, and `simhash-redis demo` finds and shows them."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Annotated

import pytest
import redis
import typer
from simhash_redis.cli.common import Settings
from simhash_redis.cli.demo import register
from typer.testing import CliRunner

from simhash_redis import Layout, SimhashIndex, VerifiedIndex, distance, fingerprint_many
from simhash_redis.errors import InputError, InvalidArgument
from simhash_redis.tools import demo as demo_job
from simhash_redis.tools.server import EmbeddedServer

SAMPLE = resources.files("simhash_redis").joinpath("data/sample.jsonl.gz")


def _app() -> typer.Typer:
    """A stand-in for cli/app.py with the same global options, holding only the demo command."""
    app = typer.Typer()

    @app.callback()
    def _root(
        ctx: typer.Context,
        redis_url: Annotated[str | None, typer.Option("--redis-url", envvar="SIMHASH_REDIS_URL")] = None,
        index: Annotated[str | None, typer.Option("--index")] = None,
        k: Annotated[int | None, typer.Option("--k")] = None,
        plain: Annotated[bool, typer.Option("--plain")] = False,
    ) -> None:
        ctx.obj = Settings(redis_url=redis_url, index=index, k=k, plain=plain)

    register(app)
    return app


@pytest.fixture(scope="module")
def sample() -> list[demo_job.SampleDoc]:
    return demo_job.read_sample()


def test_sample_is_small_and_well_formed(sample: list[demo_job.SampleDoc]) -> None:
    assert len(SAMPLE.read_bytes()) < 1_000_000
    assert len(sample) >= 100
    assert len({d.id for d in sample}) == len(sample)
    assert all(d.text.strip() for d in sample)
    rows = [json.loads(line) for line in gzip.decompress(SAMPLE.read_bytes()).splitlines()]
    assert all(row["source"] and row["license"] for row in rows)


def test_sample_has_real_near_duplicates_and_unrelated_documents(sample: list[demo_job.SampleDoc]) -> None:
    fps = fingerprint_many([d.text for d in sample])
    close = {
        (sample[i].id, sample[j].id)
        for i, j in itertools.combinations(range(len(sample)), 2)
        if distance(fps[i], fps[j]) <= 3
    }
    assert len(close) >= 50
    # successive releases of one README, and MIT licences of different projects
    assert ("requests-2.28.2/README", "requests-2.32.3/README") in close
    assert ("six-1.16.0/LICENSE", "pluggy-1.3.0/LICENSE") in close
    loners = {d.id for d in sample} - {doc_id for pair in close for doc_id in pair}
    assert len(loners) >= 40


def test_run_groups_the_pairs(redis_client: redis.Redis, sample: list[demo_job.SampleDoc]) -> None:
    index = demo_job.fresh_index(redis_client)
    assert isinstance(index, VerifiedIndex)  # as every new index made from texts
    report = demo_job.run(index, sample)
    assert report.documents == len(sample) == len(index.index)
    assert len(report.groups) >= 10
    sizes = [len(g.ids) for g in report.groups]
    assert sizes == sorted(sizes, reverse=True)
    position = {d.id: i for i, d in enumerate(sample)}
    for pair in report.pairs:
        assert position[pair.existing_id] < position[pair.new_id]
        assert pair.jaccard is not None and pair.jaccard >= index.threshold
    members = [doc_id for g in report.groups for doc_id in g.ids]
    assert len(members) == len(set(members)) == report.grouped
    assert {doc_id for p in report.pairs for doc_id in (p.new_id, p.existing_id)} == set(members)
    by_id = {doc_id: g for g in report.groups for doc_id in g.ids}
    assert by_id["requests-2.28.2/README"] is by_id["requests-2.32.3/README"]
    lines = demo_job.report_lines(report, index=index, where="test", elapsed=1.0)
    assert "verified (estimated Jaccard >= 0.8)" in "\n".join(lines) and " (Jaccard 0." in "\n".join(lines)
    assert lines[-1] == f"{demo_job.MARKER} {len(report.groups)}"
    assert len(lines) <= 32 and all(len(line) <= 100 for line in lines)


def test_run_on_a_plain_index_groups_by_distance(
    redis_client: redis.Redis, sample: list[demo_job.SampleDoc]
) -> None:
    index = demo_job.fresh_index(redis_client, verified=False)
    assert isinstance(index, SimhashIndex) and index.config.verification is None
    report = demo_job.run(index, sample)
    assert len(report.groups) >= 10
    assert all(p.jaccard is None and 0 <= p.distance <= index.k for p in report.pairs)
    lines = demo_job.report_lines(report, index=index, where="test", elapsed=1.0)
    assert f"(distance <= {index.k})" in "\n".join(lines) and "Jaccard" not in "\n".join(lines)


@pytest.mark.parametrize(("k", "threshold"), [(0, 0.8), (5, 0.8), (8, 0.5), (6, None)])
def test_report_lines_fit_the_width(
    redis_client: redis.Redis, sample: list[demo_job.SampleDoc], k: int, threshold: float | None
) -> None:
    index = demo_job.fresh_index(redis_client, k=k, threshold=threshold, verified=threshold is not None)
    lines = demo_job.report_lines(demo_job.run(index, sample), index=index, where="test", elapsed=1.0)
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)


def test_fresh_index_checks_its_arguments_before_dropping(redis_client: redis.Redis) -> None:
    SimhashIndex(redis_client, "demo").add("kept", "a document the demo must not drop for a bad argument")
    with pytest.raises(InvalidArgument):
        demo_job.fresh_index(redis_client, threshold=2.0)
    assert SimhashIndex(redis_client, "demo").get("kept") is not None
    with pytest.raises(InvalidArgument, match="threshold belong to verified mode"):
        demo_job.fresh_index(redis_client, threshold=0.9, verified=False)
    assert SimhashIndex(redis_client, "demo").get("kept") is not None
    index = demo_job.fresh_index(redis_client, band_buckets=64)
    assert isinstance(index, VerifiedIndex) and index.verification.band_buckets == 64


def test_fresh_index_drops_the_previous_one(redis_client: redis.Redis) -> None:
    old = SimhashIndex(redis_client, "demo", k=2, verification=None)
    old.add("stale", "a stale document from an earlier run")
    index = demo_job.fresh_index(redis_client, k=4, verified=False)
    assert isinstance(index, SimhashIndex) and (len(index), index.k) == (0, 4)
    verified = demo_job.fresh_index(redis_client)
    assert isinstance(verified, VerifiedIndex) and (len(verified.index), verified.index.k) == (0, 3)


def test_fresh_index_drops_the_keys_of_an_index_whose_meta_is_lost(redis_client: redis.Redis) -> None:
    old = SimhashIndex(redis_client, "demo", k=2, verification=None)
    old.add("stale", "a stale document from an earlier run")
    redis_client.delete("simhash:demo:meta")
    index = demo_job.fresh_index(redis_client, verified=False)
    assert isinstance(index, SimhashIndex) and index.get("stale") is None
    assert redis_client.keys("simhash:demo:*") == [b"simhash:demo:meta"]


def test_difference_shows_the_first_change() -> None:
    old, new, places = demo_job.difference("Copyright 2010 Pallets. Use it.", "Copyright 2007 Pallets. Use.")
    assert (old, new, places) == ("Copyright [2010] Pallets. Use it.", "Copyright [2007] Pallets. Use.", 2)
    assert demo_job.difference("a  b", "a b") == ("(identical text)", "(identical text)", 0)


def test_read_sample_reports_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "text": "x"}\n\n{"id": "b", "text": "y"}\n')
    assert demo_job.read_sample(good) == [demo_job.SampleDoc("a", "x"), demo_job.SampleDoc("b", "y")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x"}\n{"id": 1, "text": "y"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2"):
        demo_job.read_sample(bad)


def test_cli_demo_prints_groups_and_the_marker(redis_url: str) -> None:
    runner = CliRunner()
    first = runner.invoke(_app(), ["--redis-url", redis_url, "demo"])
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    assert lines[-1].startswith(demo_job.MARKER)
    assert int(lines[-1].split(":")[1]) >= 10
    assert any(" copies: " in line for line in lines)
    assert len(lines) <= 32
    again = runner.invoke(_app(), ["--redis-url", redis_url, "demo"])
    assert again.exit_code == 0 and again.output.splitlines()[-1] == lines[-1]  # a clean rerun
    client = redis.Redis.from_url(redis_url)
    stored = SimhashIndex(client, "demo")
    assert len(stored) == len(demo_job.read_sample()) and stored.config.verification is not None
    plain = runner.invoke(_app(), ["--redis-url", redis_url, "--plain", "demo"])
    assert plain.exit_code == 0, plain.output
    assert "(distance <= 3)" in plain.output and SimhashIndex(client, "demo").config.verification is None


def test_cli_demo_creates_its_index_with_the_global_options(redis_url: str) -> None:
    from simhash_redis.cli.app import app

    # --k was taken; --scheme, --f, --layout, --retention and --id-buckets were accepted and ignored.
    options = [
        "--scheme",
        "words/binary",
        "--f",
        "32",
        "--k",
        "2",
        "--layout",
        "permuted-4",
        "--retention",
        "1d",
    ]
    result = CliRunner().invoke(app, ["--redis-url", redis_url, *options, "--id-buckets", "64", "demo"])
    assert result.exit_code == 0, result.output
    config = SimhashIndex(redis.Redis.from_url(redis_url), "demo").config
    assert (config.f, config.k, config.layout, config.id_buckets) == (32, 2, Layout.permuted(32, 2, 4), 64)
    assert config.scheme.features == "words" and config.scheme.weighting == "binary"
    assert config.retention is not None and config.retention.seconds == 86_400


def test_cli_demo_refuses_to_drop_another_index(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    SimhashIndex(client, "news").add("keep", "an article someone needs")
    runner = CliRunner()
    refused = runner.invoke(_app(), ["--redis-url", redis_url, "--index", "news", "demo"])
    assert refused.exit_code == 1 and "--replace" in refused.output
    assert SimhashIndex(client, "news").get("keep") is not None
    replaced = runner.invoke(_app(), ["--redis-url", redis_url, "--index", "news", "demo", "--replace"])
    assert replaced.exit_code == 0, replaced.output
    assert SimhashIndex(client, "news").get("keep") is None


@pytest.fixture
def embedded_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private SIMHASH_REDIS_HOME; the embedded server started in it is stopped afterwards."""
    monkeypatch.setenv("SIMHASH_REDIS_HOME", str(tmp_path))
    monkeypatch.delenv("SIMHASH_REDIS_URL", raising=False)
    yield tmp_path
    EmbeddedServer(tmp_path / "server").stop()


def test_cli_demo_uses_the_embedded_server_that_workers_then_share(embedded_home: Path) -> None:
    result = CliRunner().invoke(_app(), ["demo", "--groups", "3", "--examples", "1"])
    assert result.exit_code == 0, result.output
    assert "embedded server redis://127.0.0.1:" in result.output
    url = EmbeddedServer(embedded_home / "server").status().url
    assert url is not None and url in result.output
    worker = SimhashIndex.from_url(url, "demo")  # what a worker given `simhash-redis server url` does
    assert len(worker) == len(demo_job.read_sample())
    first = demo_job.read_sample()[0]
    assert first.id in [m.id for m in worker.near(first.text, k=0)]


def test_the_real_app_registers_demo() -> None:
    from simhash_redis.cli import app as app_module

    if "demo" not in app_module.COMMAND_MODULES:
        pytest.skip('cli/app.py does not register the demo yet (add "demo" to COMMAND_MODULES)')
    result = CliRunner().invoke(app_module.app, ["demo", "--help"])
    assert result.exit_code == 0 and "bundled sample" in result.output
