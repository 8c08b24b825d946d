"""The evaluation: exact Jaccard join against brute force, pair scoring, corpus and pair files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_redis import distance, fingerprint
from simhash_redis.errors import InputError, InvalidArgument
from simhash_redis.tools.evaluation import (
    Doc,
    brute_force_join,
    detect_lang,
    evaluate,
    format_report,
    hamming_pairs,
    jaccard_join,
    load_corpus,
    load_pairs,
    shingle_sets,
    standard_settings,
)

_sets = st.lists(st.frozensets(st.integers(0, 12), max_size=9), max_size=14)


@settings(max_examples=150, deadline=None)
@given(_sets, st.sampled_from([0.1, 0.3, 0.5, 2 / 3, 0.7, 0.8, 0.9, 1.0]))
def test_join_equals_brute_force(raw: list[frozenset[int]], threshold: float) -> None:
    sets = [np.array(sorted(s), dtype=np.int64) for s in raw]
    fast, slow = jaccard_join(sets, threshold), brute_force_join(sets, threshold)
    assert fast.i.tolist() == slow.i.tolist() and fast.j.tolist() == slow.j.tolist()
    assert fast.sim.tolist() == pytest.approx(slow.sim.tolist())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=40), st.integers(0, 64))
def test_hamming_pairs_equals_brute_force(fps: list[int], k: int) -> None:
    i, j, d = hamming_pairs(fps, 64, k, block=7)
    expect = [
        (a, b, (fps[a] ^ fps[b]).bit_count())
        for a in range(len(fps))
        for b in range(a + 1, len(fps))
        if (fps[a] ^ fps[b]).bit_count() <= k
    ]
    assert list(zip(i.tolist(), j.tolist(), d.tolist(), strict=True)) == expect


def test_hamming_pairs_128_bits() -> None:
    fps = [0, 1 << 100, (1 << 100) | 1, (1 << 128) - 1]
    i, j, d = hamming_pairs(fps, 128, 2)
    assert list(zip(i.tolist(), j.tolist(), d.tolist(), strict=True)) == [(0, 1, 1), (0, 2, 2), (1, 2, 1)]


def test_shingle_sets_and_bad_threshold() -> None:
    sets = shingle_sets([["a", "b", "c", "a", "b", "c"], ["a", "b"], []], 3)
    assert [len(s) for s in sets] == [3, 1, 0]
    with pytest.raises(InvalidArgument):
        jaccard_join(sets, 0.0)
    with pytest.raises(InvalidArgument):
        shingle_sets([], 0)


def test_detect_lang() -> None:
    assert detect_lang("近似重复检测 simhash") == "zh"
    assert detect_lang("plain English text") == "en"
    assert detect_lang("") == "en"


def _corpus() -> list[Doc]:
    base = " ".join(f"w{i}" for i in range(200))
    near = base.replace("w50 ", "x50 ")
    docs = [Doc("a", base, "en"), Doc("b", near, "en"), Doc("c", " ".join(f"v{i}" for i in range(200)), "en")]
    docs += [
        Doc("z1", "近似重复检测是搜索引擎中的常见任务" * 4, "zh"),
        Doc("z2", "近似重复检测是搜索引擎中的常见任务" * 4 + "了", "zh"),
    ]
    return docs


def test_evaluate_scores_all_pairs() -> None:
    report = evaluate(_corpus(), max_k=4)
    assert {t.lang: t.positives for t in report.truths} == {"en": 1, "zh": 1}
    by = {(r.lang, r.setting): r for r in report.results}
    main = by[("en", "shingles-3/tf")]
    docs = _corpus()
    d = distance(fingerprint(docs[0].text), fingerprint(docs[1].text))
    assert [s.tp for s in main.scores] == [int(d <= k) for k in range(5)]
    assert sum(main.band_counts.values()) == 1
    assert len(report.results) == 2 * len(standard_settings("en"))
    text = format_report(report, ks=[0, 3])
    assert "| shingles-3/tf |" in text and "k=3" in text
    assert json.loads(json.dumps(report.to_dict()))["results"][0]["scores"][0]["k"] == 0


def test_evaluate_with_labelled_and_unlabelled_pairs() -> None:
    docs = _corpus()
    labelled = evaluate(docs, standard_settings("en")[:1], pairs=[("a", "b", 1), ("a", "c", 0)], langs=["en"])
    assert labelled.truths[0].pairs == 2 and labelled.truths[0].positives == 1
    assert labelled.results[0].scores[8].fp == 0  # a and c share nothing
    listed = evaluate(docs, standard_settings("en")[:1], pairs=[("a", "c", None)], langs=["en"])
    assert listed.truths[0].pairs == 3 and listed.results[0].scores[8].recall == 0.0


def test_load_corpus_and_pairs(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"id": "a", "text": "hello world"}) + "\n\n")
        out.write(json.dumps({"id": 2, "text": "你好世界", "lang": "zh"}) + "\n")
    assert load_corpus(corpus) == [Doc("a", "hello world", "en"), Doc("2", "你好世界", "zh")]
    csv_file = tmp_path / "p.csv"
    csv_file.write_text("id_a,id_b,label\na,b,1\nc,d,false\ne,f\n")
    assert load_pairs(csv_file) == [("a", "b", 1), ("c", "d", 0), ("e", "f", None)]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"id_a": "a", "id_b": "b", "label": true}\n{"id_a": "c", "id_b": "d"}\n')
    assert load_pairs(jsonl) == [("a", "b", 1), ("c", "d", None)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": 1}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:1"):
        load_corpus(bad)
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(InputError, match="repeats"):
        load_corpus(dup)
    wrong = tmp_path / "w.csv"
    wrong.write_text("a,b,maybe\n")
    with pytest.raises(InputError):
        load_pairs(wrong)


def test_cli_eval_command(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from cli.eval import eval_command

    app = typer.Typer()
    app.command("eval")(eval_command)
    app.command("noop")(lambda: None)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": d.id, "text": d.text, "lang": d.lang}) + "\n" for d in _corpus())
    )
    out = tmp_path / "r.json"
    runner = CliRunner()
    result = runner.invoke(
        app, ["eval", str(corpus), "--setting", "shingles-3/tf", "--k", "3", "--report", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "| shingles-3/tf |" in result.stdout and "k=3" in result.stdout
    assert json.loads(out.read_text())["threshold"] == 0.8
    # --json is a flag, as for every other command: the report on stdout instead of the tables.
    as_json = runner.invoke(app, ["eval", str(corpus), "--setting", "shingles-3/tf", "--json", "-q"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["threshold"] == 0.8
    # Through the command line's handler, as docs/cli.md's exit codes say: 1 an unreadable file, 3 a
    # malformed record (they were both 2, a usage error).
    from cli.app import app as cli

    missing = runner.invoke(cli, ["eval", str(tmp_path / "missing.jsonl")])
    assert missing.exit_code == 1 and "missing.jsonl" in missing.output, missing.output
    (tmp_path / "bad.jsonl").write_text('{"id": "a"}\n')
    assert runner.invoke(cli, ["eval", str(tmp_path / "bad.jsonl")]).exit_code == 3
    # A language group without documents printed an empty table and exited 0.
    nowhere = runner.invoke(cli, ["eval", str(corpus), "--lang", "xx", "-q"])
    assert nowhere.exit_code == 2 and "no document of language group xx" in nowhere.output, nowhere.output
    unknown = runner.invoke(app, ["eval", str(corpus), "--setting", "nope", "--quiet"])
    assert unknown.exit_code != 0
    # A column past the k scored was a traceback (IndexError); a negative one showed k=8 as "k=-1".
    for column in ("9", "-1"):
        past = runner.invoke(app, ["eval", str(corpus), "--k", column, "-q"])
        assert past.exit_code == 2 and "--k" in past.output, past.output
