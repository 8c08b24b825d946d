"""The planner: candidate layouts, their expected candidates and memory, the recommendation, the CLI."""

from __future__ import annotations

import importlib
import itertools
import json
import math
from types import ModuleType

import pytest
import typer
from typer.testing import CliRunner

from simhash_redis import Layout, defaults
from simhash_redis.errors import InvalidArgument
from simhash_redis.tools import planner


def _plan_module() -> ModuleType:
    # Installed, the CLI is simhash_redis.cli; from a source checkout it is the top-level cli/ folder.
    try:
        return importlib.import_module("simhash_redis.cli.plan")
    except ImportError:
        return importlib.import_module("cli.plan")


def _app() -> typer.Typer:
    """A tiny app registering `plan` the way cli/app.py does."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    app.command("plan")(_plan_module().plan)
    return app


def test_candidates_for_f64_k3() -> None:
    labels = {label: layout for label, layout in planner.candidate_layouts(64, 3)}
    assert list(labels) == ["pigeonhole", "permuted-5", "permuted-6", "permuted-7", "permuted-8"]
    assert labels["pigeonhole"] == Layout.pigeonhole(64, 3)
    paper = labels["permuted-6"]
    assert paper.blocks == (11, 11, 11, 11, 10, 10)
    assert len(paper.tables) == 20 and set(paper.key_bits) == {31, 32, 33}
    assert [len(layout.tables) for layout in labels.values()] == [4, 10, 20, 35, 56]


def test_candidates_stop_at_limits() -> None:
    assert [label for label, _ in planner.candidate_layouts(64, 3, max_tables=20)][-1] == "permuted-6"
    assert [label for label, _ in planner.candidate_layouts(64, 3, max_key_bits=33)][-1] == "permuted-6"
    # f=128 keys are wide already: only the pigeonhole layout is listed (no empty result).
    assert [label for label, _ in planner.candidate_layouts(128, 3)] == ["pigeonhole"]


def test_paper_configuration_is_recommended_at_8e9() -> None:
    plans = planner.plan(64, 3, 8e9)
    by_label = {p.label: p for p in plans}
    paper = by_label["permuted-6"]
    assert paper.tables == 20 and paper.recommended
    assert sum(p.recommended for p in plans) == 1
    # 4 tables of 16-bit keys: 4 * 8e9 / 2^16 candidates, far over any budget.
    assert by_label["pigeonhole"].candidates == pytest.approx(4 * 8e9 / 2**16)
    assert paper.candidates == pytest.approx(sum(8e9 / 2**b for b in paper.key_bits))
    assert paper.candidates < planner.DEFAULT_BUDGET < by_label["permuted-5"].candidates


def test_small_index_keeps_pigeonhole() -> None:
    plans = planner.plan(64, 3, 1e6)
    assert [p.label for p in plans if p.recommended] == ["pigeonhole"]
    memory = [p.memory_bytes for p in plans]
    assert memory == sorted(memory)  # every extra table stores every fingerprint again


def test_no_layout_within_budget_recommends_fewest_candidates() -> None:
    plans = planner.plan(64, 3, 1e15, budget=1)
    best = next(p for p in plans if p.recommended)
    assert best.candidates == min(p.candidates for p in plans)


def test_tie_on_tables_goes_to_less_memory() -> None:
    plans = planner.plan(64, 3, 1e6, budget=1e12)
    assert [p.label for p in plans if p.recommended] == ["pigeonhole"]


def _enumerated_probability(layout: Layout) -> float:
    p = [2.0**-w for w in layout.blocks]
    total = 0.0
    for agree in itertools.product((False, True), repeat=len(p)):
        if any(all(agree[b] for b in t) for t in layout.tables):
            total += math.prod(pj if a else 1 - pj for pj, a in zip(p, agree, strict=True))
    return total


@pytest.mark.parametrize(
    "layout",
    [
        Layout.pigeonhole(32, 3),
        Layout.permuted(32, 3, blocks=6),
        Layout.permuted(32, 2, blocks=5),
        Layout(f=32, k=1, blocks=(8, 8, 8, 8), tables=((0, 1), (2, 3))),
    ],
    ids=str,
)
def test_distinct_candidate_probability(layout: Layout) -> None:
    assert planner.distinct_candidate_probability(layout) == pytest.approx(_enumerated_probability(layout))


def test_distinct_at_most_summed_candidates() -> None:
    for p in planner.plan(64, 3, 1e9):
        assert p.distinct_candidates <= p.candidates * (1 + 1e-9)
        # Overlaps are rare: two tables share a key only when more blocks agree than either needs.
        assert p.distinct_candidates == pytest.approx(p.candidates, rel=0.01)


def test_memory_model_is_clamped_and_scales() -> None:
    assert planner.table_bytes_per_fp(1e-30) == planner.TABLE_BYTES_64[0][1]
    assert planner.table_bytes_per_fp(1e30) == planner.TABLE_BYTES_64[-1][1]
    assert planner.table_bytes_per_fp(0.0) == planner.TABLE_BYTES_64[0][1]
    layout = Layout.permuted(64, 3, 6)
    rated = planner.estimate("p", layout, 1e7, id_buckets=1000)
    expected = sum(1e7 * planner.table_bytes_per_fp(1e7 / 2**b) for b in layout.key_bits)
    assert rated.table_bytes == pytest.approx(expected)
    assert rated.map_bytes == pytest.approx(1e7 * planner.map_bytes_per_doc(1e4))
    assert rated.memory_bytes == rated.table_bytes + rated.map_bytes


@pytest.mark.parametrize(
    "kwargs",
    [{"n": -1.0}, {"n": math.inf}, {"n": math.nan}, {"budget": 0.0}, {"id_buckets": 0}, {"k": 64}],
)
def test_bad_arguments(kwargs: dict[str, float]) -> None:
    args: dict[str, float] = {"f": 64, "k": 3, "n": 1e6, **kwargs}
    with pytest.raises(InvalidArgument):
        planner.plan(int(args.pop("f")), int(args.pop("k")), args.pop("n"), **args)  # type: ignore[arg-type]


def test_cli_table_shows_paper_layout() -> None:
    result = CliRunner().invoke(_app(), ["plan", "--n", "8e9", "--k", "3"])
    assert result.exit_code == 0, result.output
    rows = {
        line.split()[1] if line.startswith("*") else line.split()[0]: line
        for line in result.output.splitlines()
        if "permuted" in line or "pigeonhole" in line
    }
    paper = rows["permuted-6"]
    assert paper.startswith("*")
    assert " 20 " in paper and "31-33" in paper and "11,11,11,11,10,10" in paper
    assert "recommended: permuted-6" in result.output


def test_cli_json() -> None:
    result = CliRunner().invoke(_app(), ["plan", "--n", "8e9", "--k", "3", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["n"] == 8e9
    paper = next(row for row in payload["layouts"] if row["tables"] == 20)
    assert paper["blocks"] == [11, 11, 11, 11, 10, 10]
    assert paper["recommended"] is True
    assert Layout.from_meta(paper["layout"], 64, 3) == Layout.permuted(64, 3, 6)


def test_cli_rejects_bad_n() -> None:
    result = CliRunner().invoke(_app(), ["plan", "--n", "-5"])
    assert result.exit_code == 2
    assert "n must be" in result.output
    for tables in ("0", "-1"):  # were accepted, listing pigeonhole alone
        refused = CliRunner().invoke(_app(), ["plan", "--n", "1e6", "--max-tables", tables])
        assert refused.exit_code == 2 and "max_tables must be at least 1" in refused.output, refused.output


@pytest.mark.parametrize("k", range(0, 64, 3))
def test_a_recommended_layout_is_one_a_new_index_accepts(k: int) -> None:
    # Creation refuses a layout whose queries read back a large share of the index; the planner never
    # recommends one, and recommends nothing when every listed layout is refused.
    plans = planner.plan(64, k, 1e6)
    best = [p for p in plans if p.recommended]
    assert len(best) <= 1
    assert all(p.refused == (p.layout.read_fraction >= defaults.MAX_READ_FRACTION) for p in plans)
    assert best == [] if all(p.refused for p in plans) else not best[0].refused


def test_cli_recommends_nothing_when_every_layout_is_refused() -> None:
    result = CliRunner().invoke(_app(), ["plan", "--n", "1e6", "--k", "63"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "No layout recommended for k = 63" in result.output and "32 times" in result.output
    assert any(line.startswith("x  pigeonhole") for line in result.output.splitlines())
    payload = json.loads(CliRunner().invoke(_app(), ["plan", "--n", "1e6", "--k", "63", "--json"]).output)
    assert payload["recommended"] is None and payload["layouts"][0]["refused"] is True
    # k = 12: pigeonhole is refused, a permuted layout is recommended in its place.
    mixed = CliRunner().invoke(_app(), ["plan", "--n", "1e6", "--k", "12"])
    assert mixed.exit_code == 0 and "recommended: permuted-14" in mixed.output
    assert any(line.startswith("x  pigeonhole") for line in mixed.output.splitlines())


def test_the_commands_of_a_lookup_are_the_ones_sent() -> None:
    # docs/architecture.md, "The path of a `near`": the query's own fingerprint-map bucket is read whole
    # where it holds no more than a table's bucket, else its fingerprint's field alone; verified mode adds
    # the band HGETs and reads ids with sketches.
    small, *_, paper = planner.plan(64, 3, 8e9)[:3]
    assert (small.label, paper.label) == ("pigeonhole", "permuted-6")
    assert small.commands.startswith("4 SMEMBERS + HGETALL of the query's own fingerprint-map bucket")
    assert "then 1 HGET per matching fingerprint outside that bucket" in small.commands
    assert paper.commands.startswith("20 SMEMBERS + HGET of the query's fingerprint in the fingerprint map")
    assert "then 1 HGET per other matching fingerprint" in paper.commands
    for row in (small, paper):
        assert "verified adds 1 HGET per band" in row.commands and "(HMGET)" in row.commands
    # Fewer map buckets than a pigeonhole table's 2^16: each would outgrow the sets read, so HGET.
    (few,) = [p for p in planner.plan(64, 3, 8e9, id_buckets=1 << 15) if p.label == "pigeonhole"]
    assert few.commands.startswith("4 SMEMBERS + HGET of the query's fingerprint")
    result = CliRunner().invoke(_app(), ["plan", "--n", "8e9", "--k", "3"])
    assert f"A lookup is {paper.commands}: 1 round trip" in " ".join(result.output.split())
    assert "SMEMBERS + 1 HGET per matching fingerprint" not in result.output
    payload = json.loads(CliRunner().invoke(_app(), ["plan", "--n", "8e9", "--k", "3", "--json"]).output)
    assert payload["layouts"][0]["commands"] == small.commands
