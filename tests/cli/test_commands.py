"""Every command through CliRunner against the suite's real server, and every error path."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import redis
from simhash_redis.cli import admin
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import IndexCorrupted, InvalidArgument, Scheme, SimhashIndex, defaults
from simhash_redis.codec import format_fingerprint
from simhash_redis.tools.server import EmbeddedServer
from tests.cli.conftest import Invoke, article, write_jsonl
from tests.servers import ServerProcess

COMMANDS = [
    "load",
    "dedupe",
    "near",
    "add",
    "get",
    "remove",
    "fingerprint",
    "stats",
    "export",
    "import",
    "drop",
]


def _news(tmp_path: Path, n: int = 200, copies: int = 0, name: str = "news.jsonl") -> Path:
    rows = [{"id": f"a{i}", "text": article(i)} for i in range(n)]
    rows += [{"id": f"a{i}-copy{c}", "text": article(i, c)} for c in range(1, copies + 1) for i in range(n)]
    return write_jsonl(tmp_path / name, rows)


# -- help and version -------------------------------------------------------------------------------


def test_help_lists_commands_and_exit_codes() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in [*COMMANDS, "server"]:
        assert name in result.stdout
    assert "Exit codes" in result.stdout and "130" in result.stdout


@pytest.mark.parametrize("command", [*COMMANDS, "server start", "server status"])
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = CliRunner().invoke(app, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "simhash-redis" in result.stdout or command.startswith("server s")


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("simhash-redis ")


# -- load -------------------------------------------------------------------------------------------


def test_load_jsonl_reports_bad_lines_and_summary(invoke: Invoke, tmp_path: Path) -> None:
    path = _news(tmp_path)
    with path.open("a") as fh:
        fh.write("this is not json\n")
        fh.write('{"id": "x"}\n')
    result = invoke("load", str(path), "--json", "-j", "2")
    assert result.exit_code == 0, result.output
    assert f"{path}:201: not valid JSON" in result.stderr
    assert f"{path}:202: no 'text' field" in result.stderr
    assert "loaded: 200 documents" in result.stderr and "2 errors" in result.stderr
    summary = json.loads(result.stdout)
    assert (summary["added"], summary["errors"]) == (200, 2)
    again = json.loads(invoke("load", str(path), "--json", "-q").stdout)
    assert (again["added"], again["unchanged"]) == (0, 200)
    assert invoke("get", "a3").stdout.strip() == format_fingerprint(Scheme().fingerprint(article(3)), 64)


def test_load_every_format(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text(
        "url,body\nc1,first csv text here\nc2,second csv text\n", encoding="utf-8"
    )
    (tmp_path / "b.tsv.gz").write_bytes(gzip.compress(b"t1\ttab separated text\n"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.txt").write_text("a file per document", encoding="utf-8")
    (tmp_path / "c.fp").write_text("f1\t0x00000000000000ff\nf2 18446744073709551615\n", encoding="utf-8")
    assert invoke("load", "--id-field", "url", "--text-field", "body", str(tmp_path / "a.csv")).exit_code == 0
    assert (
        invoke(
            "load", "--no-header", "--id-field", "1", "--text-field", "2", str(tmp_path / "b.tsv.gz")
        ).exit_code
        == 0
    )
    assert invoke("load", str(tmp_path / "docs")).exit_code == 0
    # Precomputed fingerprints make a plain index of their own (a verified one needs the texts).
    assert invoke("load", str(tmp_path / "c.fp"), index="fps").exit_code == 0
    lines = invoke(
        "load", "--format", "lines", "--id-prefix", "in:", "-", input="line one text\n\nline three\n"
    )
    assert lines.exit_code == 0, lines.output
    for doc_id in ("c1", "c2", "t1", "one.txt", "in:1", "in:3"):
        assert invoke("get", doc_id).exit_code == 0, doc_id
    assert invoke("get", "f1", index="fps").stdout.strip() == "0x00000000000000ff"
    assert invoke("get", "f2", index="fps").stdout.strip() == "0x" + "f" * 16


def test_load_fingerprint_field(invoke: Invoke, tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "fp.jsonl", [{"id": "a", "fp": "0x10"}, {"id": "b", "fp": 255}, {"id": "c", "fp": "zz"}]
    )
    result = invoke("load", "--fingerprint-field", "fp", str(path))
    assert result.exit_code == 0 and f"{path}:3:" in result.stderr
    assert invoke("get", "b").stdout.strip() == "0x00000000000000ff"


def test_load_max_errors_exit_3(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(f"bad {i}\n" for i in range(10)), encoding="utf-8")
    result = invoke("load", "--max-errors", "3", str(path))
    assert result.exit_code == 3
    assert result.stderr.count("not valid JSON") == 4
    assert "error: stopped after 4 bad records" in result.stderr and "Traceback" not in result.output


def test_load_usage_errors(invoke: Invoke, tmp_path: Path) -> None:
    missing = invoke("load", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 1 and "no such file" in missing.stderr
    (tmp_path / "a.docx").write_text("x", encoding="utf-8")
    unknown = invoke("load", str(tmp_path / "a.docx"))
    assert unknown.exit_code == 2 and "--format" in unknown.stderr
    # Neither left a new, empty index behind (pinned verified, k = 3: a `--plain load` was then refused).
    assert invoke("dedupe", str(tmp_path / "nope.jsonl")).exit_code == 1
    assert invoke("indexes").stdout == ""
    (tmp_path / "a.csv").write_text("id,text\n1,x\n", encoding="utf-8")
    column = invoke("load", "--text-field", "body", str(tmp_path / "a.csv"))
    assert column.exit_code == 2 and "no column 'body'" in column.stderr
    assert invoke("load", "--pairs", "p.tsv", str(tmp_path / "a.csv")).exit_code == 2
    assert invoke("load", "--format", "xml", str(tmp_path / "a.csv")).exit_code == 2
    for result in (missing, unknown, column):
        assert "Traceback" not in result.output


def test_id_prefix_of_an_input_that_is_not_plain_text_is_refused(invoke: Invoke, tmp_path: Path) -> None:
    # It numbers plain text's lines only: a JSON Lines load stored its ids unprefixed, and the warning
    # about replaced ids advised it for any input.
    news = _news(tmp_path, n=3)
    for args in (["load", str(news)], ["dedupe", "--format", "csv", "-"]):
        result = invoke(*args[:1], "--id-prefix", "wire:", *args[1:], input="id,text\na,b\n", index="pre")
        assert result.exit_code == 2 and "--id-prefix numbers the lines of plain text" in result.stderr
    assert invoke("stats", index="pre").exit_code == 1  # nothing was loaded, no index made
    lines = invoke("load", "--id-prefix", "wire:", "-", "--format", "lines", input="one story\n", index="pre")
    assert lines.exit_code == 0 and invoke("get", "wire:1", index="pre").exit_code == 0


def test_load_interrupted_prints_summary_and_resumes(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _news(tmp_path, 500)
    calls = {"n": 0}

    def interrupt(self: object, done: int, *, force: bool = False) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("simhash_redis.cli.load.Progress.update", interrupt)
    result = invoke("load", "--batch-size", "100", "-j", "1", str(path))
    assert result.exit_code == 130
    assert "interrupted: 200 documents" in result.stderr and "run the same command again" in result.stderr
    monkeypatch.undo()
    resumed = json.loads(invoke("load", "--json", str(path)).stdout)
    assert (resumed["added"], resumed["unchanged"]) == (300, 200)


def test_load_json_prints_its_summary_however_the_load_stops(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A caller parsing --json got nothing on stdout from a load that stopped (exit 3, 130, 143).
    from simhash_redis.cli.load import Terminated

    path = _news(tmp_path, 500)
    for stop, code, why in [(KeyboardInterrupt, 130, "interrupted"), (Terminated, 143, "terminated")]:
        calls = [stop, stop]  # raised at the second progress update

        def interrupt(self: object, done: int, *, force: bool = False, calls: list[type] = calls) -> None:
            raised = calls.pop()
            if not calls:
                raise raised

        monkeypatch.setattr("simhash_redis.cli.load.Progress.update", interrupt)
        result = invoke("load", "--batch-size", "100", "-j", "1", "--json", str(path), index=why)
        assert result.exit_code == code, result.output
        summary = json.loads(result.stdout)
        assert (summary["added"], summary["stopped"], summary["in_flight"]) == (200, why, 0), summary
    monkeypatch.undo()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + '{"id": "x"}\n')
    result = invoke("load", "--max-errors", "0", "--json", str(bad), index="bad")
    assert result.exit_code == 3
    summary = json.loads(result.stdout)
    assert summary["added"] == 500 and summary["stopped"].startswith("stopped after 1 bad records"), summary
    result = invoke("load", "--json", "-", input='{"id": "x"}\n', index="none")
    assert result.exit_code == 3 and json.loads(result.stdout)["stopped"].startswith("nothing loaded")
    assert json.loads(invoke("load", "--json", str(path), index="bad").stdout)["stopped"] is None


def test_load_dedupe_writes_pairs(invoke: Invoke, tmp_path: Path) -> None:
    base = _news(tmp_path, 50)
    assert invoke("load", str(base)).exit_code == 0
    more = _news(tmp_path, 60, copies=1, name="more.jsonl")
    pairs = tmp_path / "pairs.tsv"
    result = invoke("load", "--dedupe", "--pairs", str(pairs), "--json", str(more))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["added"], summary["unchanged"], summary["duplicates"]) == (10, 50, 60)
    rows = [line.split("\t") for line in pairs.read_text().splitlines()]
    assert len(rows) == 60 and rows[7][:2] == ["a7-copy1", "a7"] and int(rows[7][2]) <= 3
    to_stdout = invoke("load", "--dedupe", str(more))
    assert to_stdout.exit_code == 0 and len(to_stdout.stdout.splitlines()) == 60


# -- dedupe -----------------------------------------------------------------------------------------


def test_dedupe_pairs_groups_and_dry_run(invoke: Invoke, tmp_path: Path) -> None:
    assert invoke("load", str(_news(tmp_path, 10))).exit_code == 0
    batch = _news(tmp_path, 20, copies=2, name="today.jsonl")
    dry = invoke("dedupe", "--dry-run", "--json", "-q", str(batch))
    pairs = [json.loads(line) for line in dry.stdout.splitlines()]
    assert dry.exit_code == 0 and len(pairs) == 40
    assert {"id": "a12-copy1", "duplicate_of": "a12"}.items() <= pairs[12].items()
    assert invoke("get", "a12").exit_code == 1  # the dry run stored nothing
    grouped = invoke("dedupe", "--groups", str(batch))
    assert grouped.exit_code == 0 and "checked: 60 documents" in grouped.stderr
    lines = grouped.stdout.splitlines()
    assert len(lines) == 20 and lines[0].split("\t")[0] == "3"
    assert "a0\ta0-copy1,a0-copy2" in grouped.stdout
    assert invoke("get", "a12").exit_code == 0 and invoke("get", "a12-copy1").exit_code == 1
    json_groups = invoke("dedupe", "--groups", "--json", "-q", str(batch))
    assert json.loads(json_groups.stdout.splitlines()[0])["size"] == 3


# -- near, add, get, remove, fingerprint -------------------------------------------------------------


def test_dedupe_rows_without_output_is_refused(invoke: Invoke, tmp_path: Path) -> None:
    # It was accepted and ignored: the pairs were printed and every new document stored.
    refused = invoke("dedupe", "--rows", "dropped", str(_news(tmp_path, n=3)), index="rows")
    assert refused.exit_code == 2 and "--output" in refused.stderr, refused.output
    assert invoke("stats", index="rows").exit_code == 1  # nothing was stored


def test_add_near_get_remove(invoke: Invoke, tmp_path: Path) -> None:
    # A plain index: its matches are by fingerprint alone (no Jaccard), near takes a --fingerprint.
    assert invoke("--plain", "add", "s1", article(1)).stdout.strip() == "added"
    assert invoke("add", "s1", article(1)).stdout.strip() == "unchanged"
    assert invoke("add", "s2", article(1, 1)).exit_code == 0
    near = invoke("near", article(1))
    assert near.exit_code == 0 and near.stdout.splitlines()[0].startswith("s1\t0\t")
    assert len(near.stdout.splitlines()) == 2
    (tmp_path / "q.txt").write_text(article(1), encoding="utf-8")
    by_file = json.loads(invoke("near", "--file", str(tmp_path / "q.txt"), "--json").stdout)
    assert by_file[0] == {
        "id": "s1",
        "distance": 0,
        "fingerprint": format_fingerprint(Scheme().fingerprint(article(1)), 64),
    }
    fp = by_file[0]["fingerprint"]
    assert json.loads(invoke("near", "--fingerprint", fp, "-k", "0", "--json").stdout) == by_file
    assert json.loads(invoke("near", "--fingerprint", fp.upper(), "--json").stdout)[0]["id"] == "s1"
    assert invoke("near", "nothing like it at all, completely different words here").stdout == ""
    assert json.loads(invoke("get", "s1", "--json").stdout) == {"id": "s1", "fingerprint": fp}
    assert invoke("remove", "s1", "zz").stdout.strip() == "removed 1 of 2"
    assert json.loads(invoke("remove", "s2", "--json").stdout) == {"removed": 1, "missing": []}
    missing = invoke("get", "s1")
    assert missing.exit_code == 1 and "no document with id 's1'" in missing.stderr
    assert json.loads(invoke("get", "s1", "--json").stdout)["fingerprint"] is None


def test_add_of_a_text_refused_creates_no_index(invoke: Invoke, tmp_path: Path) -> None:
    # The index was made (and its mode and k pinned) before the text was read: an empty text or a
    # missing --file left an empty index that a corrected `--plain add` was then refused (exit 5).
    assert invoke("add", "x", "   ", index="fresh").exit_code == 2
    assert invoke("add", "x", "--file", str(tmp_path / "nope.txt"), index="fresh").exit_code == 1
    assert invoke("add", "", "a text with an empty id", index="fresh").exit_code == 2
    assert invoke("stats", index="fresh").exit_code == 1
    assert invoke("--plain", "--k", "5", "add", "x", "the text at last", index="fresh").exit_code == 0


def test_an_empty_text_is_a_bad_record_and_the_others_load(invoke: Invoke, tmp_path: Path) -> None:
    # One behaviour with the library and the service: an empty (or white-space) text is refused with a
    # clear error, and nothing else is lost: a load reports it and stores the other records.
    rows = [{"id": "a", "text": article(1)}, {"id": "e", "text": ""}, {"id": "w", "text": " \t"}]
    path = write_jsonl(tmp_path / "crawl.jsonl", [*rows, {"id": "b", "text": article(2)}])
    result = invoke("load", "--json", str(path), index="blank")
    assert result.exit_code == 0, result.output
    assert f"{path}:2: empty text\n{path}:3: empty text\n" in result.stderr
    assert (json.loads(result.stdout)["added"], json.loads(result.stdout)["errors"]) == (2, 2)
    for args in (["add", "e", ""], ["near", " "], ["fingerprint", ""]):
        refused = invoke(*args, index="blank")
        assert refused.exit_code == 2 and refused.stderr == "error: the text is empty\n", refused.output


def test_query_usage_errors(invoke: Invoke) -> None:
    invoke("--plain", "add", "s1", "some text to have an index")  # near takes a --fingerprint
    both = invoke("near", "text", "--fingerprint", "ff")
    assert both.exit_code == 2 and "only one" in both.stderr
    bad_fp = invoke("near", "--fingerprint", "xyz")
    assert bad_fp.exit_code == 2 and "not a hex or decimal fingerprint" in bad_fp.stderr
    too_far = invoke("near", "text", "-k", "9")
    assert too_far.exit_code == 2 and "k must be in 0..3" in too_far.stderr
    nothing = invoke("near")
    assert nothing.exit_code == 2


def test_near_refuses_table_options_without_a_table_and_reads_a_table_in_its_encoding(
    invoke: Invoke, tmp_path: Path
) -> None:
    # A query text has no columns: --id-field and the rest were accepted and did nothing.
    assert invoke("add", "s1", "café crème brûlée with vanilla and sugar and eggs").exit_code == 0
    for option in (["--id-field", "qid"], ["--text-field", "body"], ["--format", "csv"]):
        stray = invoke("near", "some text", *option)
        assert stray.exit_code == 2 and option[0] in stray.stderr, stray.output
    table = tmp_path / "q.jsonl"
    row = {"id": "q", "text": "café crème brûlée with vanilla and sugar and eggs"}
    table.write_bytes((json.dumps(row, ensure_ascii=False) + "\n").encode("latin-1"))
    found = invoke("near", "--file", str(table), "--format", "jsonl", "--encoding", "latin-1")
    assert found.exit_code == 0 and found.stdout.startswith("q\ts1\t0\t"), found.output


def test_unknown_index(invoke: Invoke) -> None:
    for args in (["get", "x"], ["near", "text"], ["stats"], ["remove", "x"], ["export"], ["drop", "--yes"]):
        result = invoke(*args, index="nosuch")
        assert result.exit_code == 1, args
        assert "no index named 'nosuch'" in result.stderr


def test_fingerprint_command() -> None:
    runner = CliRunner()
    expected = format_fingerprint(Scheme().fingerprint("hello big world"), 64)
    assert runner.invoke(app, ["fingerprint", "hello big world"]).stdout.strip() == expected
    assert runner.invoke(app, ["fingerprint"], input="hello big world").stdout.strip() == expected
    wide = runner.invoke(
        app, ["fingerprint", "--bits", "128", "--features", "chars", "-n", "4", "--json", "abc def"]
    )
    data = json.loads(wide.stdout)
    assert len(data["fingerprint"]) == 2 + 32 and "features=chars;n=4;f=128" in data["scheme"]
    bad = runner.invoke(app, ["fingerprint", "--bits", "48", "x"])
    assert bad.exit_code == 2 and "f must be one of" in bad.stderr


def test_fingerprint_takes_the_scheme_an_index_was_created_with(invoke: Invoke) -> None:
    # The global --scheme and --f were accepted and ignored: the default scheme's fingerprint was
    # printed, not the one the index stores. -n was ignored with --features words.
    text = "the quick brown fox jumps over the lazy dog"
    assert (
        invoke("--plain", "--scheme", "words/binary", "--f", "32", "add", "x", text, index="wb").exit_code
        == 0
    )
    stored = invoke("get", "x", index="wb").stdout.strip()
    for args in (
        ["--scheme", "words/binary", "--f", "32", "fingerprint"],
        ["fingerprint", "--scheme", "words/binary", "--f", "32"],
    ):
        printed = invoke(*args, text)
        assert printed.exit_code == 0 and printed.stdout.strip() == stored, printed.output
    assert invoke("--f", "32", "fingerprint", text).stdout.strip() == format_fingerprint(
        Scheme(f=32).fingerprint(text), 32
    )
    for args in (
        ["--scheme", "words/binary", "fingerprint", "--bits", "32"],
        ["fingerprint", "--features", "words", "-n", "5"],
    ):
        refused = invoke(*args, text)
        assert refused.exit_code == 2 and refused.stderr.startswith("error: "), refused.output


def test_fingerprint_file(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("hello big world", encoding="utf-8")
    result = CliRunner().invoke(app, ["fingerprint", "--file", str(tmp_path / "t.txt")])
    assert result.stdout.strip() == format_fingerprint(Scheme().fingerprint("hello big world"), 64)
    missing = CliRunner().invoke(app, ["fingerprint", "--file", str(tmp_path / "nope.txt")])
    assert missing.exit_code == 1 and "nope.txt" in missing.stderr and "Traceback" not in missing.output


# -- stats, export, import, drop --------------------------------------------------------------------


def test_stats(invoke: Invoke, tmp_path: Path) -> None:
    invoke("load", str(_news(tmp_path, 100)))
    text = invoke("stats")
    assert text.exit_code == 0 and "documents      100" in text.stdout and "largest buckets" in text.stdout
    assert "sampled keys" in text.stdout or "exact" in text.stdout
    data = json.loads(invoke("stats", "--json", "--sample", "10").stdout)
    assert data["documents"] == 100 and data["memory"]["exact"] is False and data["config"]["k"] == "3"


def _records(dump: bytes) -> tuple[object, list[str]]:
    """A dump's header and its records in a canonical order."""
    header, *records = msgpack.Unpacker(io.BytesIO(dump), raw=False, strict_map_key=False)
    return header, sorted(json.dumps(record, sort_keys=True, default=repr) for record in records)


def test_export_import(invoke: Invoke, tmp_path: Path) -> None:
    invoke("load", str(_news(tmp_path, 100)), index="src")
    dump = tmp_path / "src.dump"
    exported = invoke("export", "-o", str(dump), index="src")
    assert exported.exit_code == 0 and "exported 100 records" in exported.stderr
    to_stdout = invoke("export", index="src")
    # The same header and records; their order is SCAN's, which a rehashing server may change between runs.
    assert _records(to_stdout.stdout_bytes) == _records(dump.read_bytes())
    imported = invoke("import", str(dump), "--json", index="copy")
    assert imported.exit_code == 0 and json.loads(imported.stdout)["added"] == 100
    into_full = invoke("import", "-", input=dump.read_bytes(), index="copy")
    assert into_full.exit_code == 2 and "--merge" in into_full.stderr and "Traceback" not in into_full.output
    from_stdin = invoke("import", "-", "--json", "--merge", input=dump.read_bytes(), index="copy")
    assert json.loads(from_stdin.stdout)["unchanged"] == 100
    by_name = invoke("import", str(dump), "--merge")  # no --index: the dump's own name
    assert by_name.exit_code == 0 and "into index 'src'" in by_name.stderr
    assert invoke("export", index="copy").stdout_bytes.count(b"a99") == 1
    mismatched = invoke("--k", "2", "add", "x", "text here", index="other")
    assert mismatched.exit_code == 0
    refused = invoke("import", str(dump), index="other")
    assert refused.exit_code == 5 and "error:" in refused.stderr
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x00\x01 not a dump")
    bad = invoke("import", str(garbage), index="g")
    assert bad.exit_code == 3 and "not a simhash-redis dump" in bad.stderr


def test_import_without_a_file_on_a_terminal_is_refused(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `simhash-redis import` with the file forgotten waited, silent, for a binary dump typed in.
    monkeypatch.setattr(admin, "stdin_is_terminal", lambda: True)
    for args in (["import"], ["import", "-"]):
        refused = invoke(*args, index="typed")
        assert refused.exit_code == 2 and "pipe it into stdin" in refused.stderr, refused.output


def test_export_round_trip_equals(invoke: Invoke, tmp_path: Path) -> None:
    invoke("load", str(_news(tmp_path, 30)), index="a")
    first = invoke("export", index="a").stdout_bytes
    invoke("drop", "--yes", index="a")
    invoke("import", "-", input=first)
    second = invoke("export", index="a").stdout_bytes
    assert sorted(list(msgpack.Unpacker(io.BytesIO(first)))[1:-1]) == sorted(
        list(msgpack.Unpacker(io.BytesIO(second)))[1:-1]
    )


def test_drop(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    invoke("add", "a", "some text in the index")
    refused = invoke("drop")
    assert refused.exit_code == 2 and "needs --yes" in refused.stderr
    monkeypatch.setattr(admin, "stdin_is_terminal", lambda: True)
    declined = invoke("drop", input="n\n")
    assert declined.exit_code == 1 and "nothing was deleted" in declined.stderr
    confirmed = invoke("drop", input="y\n")
    assert confirmed.exit_code == 0 and "dropped index 'default': 1 document" in confirmed.stdout
    assert invoke("get", "a").exit_code == 1


# -- Redis errors -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured() -> Iterator[ServerProcess]:
    with ServerProcess({"requirepass": "s3cret-pw"}) as server:
        yield server


@pytest.fixture(scope="module")
def full() -> Iterator[ServerProcess]:
    with ServerProcess({"maxmemory": "1mb", "maxmemory-policy": "noeviction"}) as server:
        yield server


def test_redis_unreachable(invoke: Invoke) -> None:
    result = invoke("get", "x", url="redis://127.0.0.1:1/0")
    assert result.exit_code == 4
    assert result.stderr.startswith("error: cannot reach Redis at redis://127.0.0.1:1/0")
    assert "Traceback" not in result.output


def test_wrong_password_is_never_printed(invoke: Invoke, secured: ServerProcess) -> None:
    url = f"redis://:wrong-pw@127.0.0.1:{secured.port}/0"
    result = invoke("add", "x", "text", url=url)
    assert result.exit_code == 4 and "refused the credentials" in result.stderr
    assert "wrong-pw" not in result.output and "***" in result.stderr
    good = invoke("add", "x", "some text", url=f"redis://:s3cret-pw@127.0.0.1:{secured.port}/0")
    assert good.exit_code == 0 and "s3cret" not in good.output


def test_out_of_memory(invoke: Invoke, full: ServerProcess, tmp_path: Path) -> None:
    result = invoke("load", str(_news(tmp_path, 3000)), url=full.url)
    assert result.exit_code == 4 and "out of memory" in result.stderr
    assert "Traceback" not in result.output


def test_configuration_mismatch(invoke: Invoke) -> None:
    assert invoke("--k", "3", "add", "a", "text of a doc").exit_code == 0
    result = invoke("--k", "2", "add", "b", "text of b")
    assert result.exit_code == 5 and "k=" in result.stderr and "leave out --k" in result.stderr


def test_bad_index_name(invoke: Invoke) -> None:
    result = invoke("get", "x", index="bad name!")
    assert result.exit_code == 2 and "--index" in result.stderr


def test_an_empty_redis_url_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--redis-url "$REDIS_URL"` with the variable unset wrote to a private embedded server, exit 0.
    monkeypatch.setenv("SIMHASH_REDIS_HOME", str(tmp_path))
    try:
        result = CliRunner().invoke(app, ["--redis-url", "", "add", "a", "a text meant for a shared server"])
    finally:
        started = EmbeddedServer(tmp_path / "server").stop()
    assert result.exit_code == 2 and "--redis-url is empty" in result.stderr, result.output
    assert not started  # no embedded server was started


# -- server -----------------------------------------------------------------------------------------


def test_server_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMHASH_REDIS_HOME", str(tmp_path))
    runner = CliRunner()
    assert runner.invoke(app, ["server", "status"]).stdout.startswith("not running")
    assert runner.invoke(app, ["server", "url"]).exit_code == 1
    started = runner.invoke(app, ["server", "start"])
    try:
        assert started.exit_code == 0, started.output
        url = started.stdout.strip()
        assert runner.invoke(app, ["server", "url"]).stdout.strip() == url
        # A running server was reused and its URL printed, whatever --port asked for.
        other = int(url.rsplit(":", 1)[1]) % 60_000 + 1024
        elsewhere = runner.invoke(app, ["server", "start", "--port", str(other)])
        assert elsewhere.exit_code == 1 and f"runs already, at {url}" in elsewhere.stderr, elsewhere.output
        assert runner.invoke(app, ["server", "start", "--port", url.rsplit(":", 1)[1]]).stdout.strip() == url
        status = json.loads(runner.invoke(app, ["server", "status", "--json"]).stdout)
        assert status["running"] and status["url"] == url
        monkeypatch.delenv("SIMHASH_REDIS_URL", raising=False)
        added = runner.invoke(app, ["add", "doc", "the embedded server is used by default"])
        assert added.exit_code == 0 and added.stdout.strip() == "added"
    finally:
        stopped = runner.invoke(app, ["server", "stop"])
    assert stopped.stdout.strip() == "stopped"
    assert runner.invoke(app, ["server", "stop"]).stdout.strip() == "not running"


def test_global_options_after_the_command(invoke: Invoke, tmp_path: Path, redis_url: str) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"id": "a", "text": article(1)}) + "\n")
    from simhash_redis.cli.app import app
    from typer.testing import CliRunner

    run = CliRunner()
    loaded = run.invoke(app, ["load", str(path), "--index", "after", "--redis-url", redis_url, "-q"])
    assert loaded.exit_code == 0, loaded.output
    got = run.invoke(app, ["get", "a", f"--redis-url={redis_url}", "--index=after"])
    assert got.exit_code == 0 and got.output.strip(), got.output
    # A command's own option of the same name keeps its meaning.
    planned = run.invoke(app, ["plan", "--n", "1e6", "--k", "5"])
    assert planned.exit_code == 0 and "k = 5" in planned.output, planned.output


def test_indexes_lists_every_index(invoke: Invoke, redis_client: redis.Redis) -> None:
    SimhashIndex(redis_client, "alpha", k=4).add("a", 1)
    SimhashIndex(redis_client, "beta")
    listed = invoke("indexes")
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines() == ["alpha\t1 document\tk=4 f=64", "beta\t0 documents\tk=3 f=64"]
    rows = [json.loads(line) for line in invoke("indexes", "--json").stdout.splitlines()]
    assert [row["name"] for row in rows] == ["alpha", "beta"] and rows[0]["k"] == 4


def test_text_that_is_not_utf8_is_an_error_unless_its_encoding_is_given(
    invoke: Invoke, tmp_path: Path
) -> None:
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café au lait et croissant".encode("latin-1"))
    expected = invoke("fingerprint", "café au lait et croissant").stdout
    for args, stdin in ((["--file", str(latin)], None), ([], latin.read_bytes())):
        refused = invoke("fingerprint", *args, input=stdin)
        assert refused.exit_code == 3 and "not valid utf-8 (byte 3)" in refused.stderr, refused.output
        assert "Traceback" not in refused.output
        decoded = invoke("fingerprint", *args, "--encoding", "latin-1", input=stdin)
        assert decoded.exit_code == 0 and decoded.stdout == expected
    assert invoke("add", "seed", "an index for near to read", index="enc").exit_code == 0
    for command in (["add", "x"], ["near"]):
        result = invoke(*command, "--file", str(latin), index="enc")
        assert result.exit_code == 3 and "--encoding" in result.stderr, result.output
    # A whole text is read whole, so UTF-16 decodes (the help said "not UTF-16" for every command).
    wide = tmp_path / "utf16.txt"
    wide.write_bytes("café au lait et croissant".encode("utf-16"))
    assert invoke("fingerprint", "--file", str(wide), "--encoding", "utf-16").stdout == expected
    for command in ("add", "near", "fingerprint"):
        said = " ".join(invoke(command, "--help").stdout.split())
        assert "UTF-16 for a single text only" in said and "so not UTF-16" not in said, said
    unknown = invoke("fingerprint", "--file", str(latin), "--encoding", "no-such-codec")
    assert unknown.exit_code == 2 and "unknown --encoding" in unknown.stderr


def test_utf8_sig_is_read_as_utf8_with_its_bom_skipped(invoke: Invoke, tmp_path: Path) -> None:
    bom = "\ufeff".encode()
    inputs = {
        "a.jsonl": bom + b'{"id": "j1", "text": "caf\xc3\xa9 au lait"}\n',
        "a.csv": bom + b"id,text\nc1,caf\xc3\xa9 au lait\n",
        "a.txt": bom + b"caf\xc3\xa9 au lait\n",
    }
    for name, data in inputs.items():
        (tmp_path / name).write_bytes(data)
        for encoding, index in (("utf-8-sig", "sig"), ("utf-8", "plain")):
            loaded = invoke("load", "--json", "--encoding", encoding, str(tmp_path / name), index=index)
            assert loaded.exit_code == 0, (name, encoding, loaded.output)
            assert json.loads(loaded.stdout)["added"] == 1
    # The same documents under the same ids: the BOM is no part of the first line, either way.
    for args in (["get", "j1"], ["get", "c1"], ["near", "café au lait"]):
        found = invoke(*args, index="sig")
        assert found.exit_code == 0 and found.stdout == invoke(*args, index="plain").stdout, args
    assert len(invoke("near", "café au lait", index="sig").stdout.splitlines()) == 3


def test_layout_recommended_by_plan_can_be_created(invoke: Invoke, redis_client: redis.Redis) -> None:
    plan = invoke("plan", "--n", "1e7", "--k", "8")
    assert plan.exit_code == 0 and "no listed layout stays within 256" in plan.stdout
    assert "Create it with --k 8 --layout permuted-10." in plan.stdout
    made = invoke("--k", "4", "--layout", "permuted-6", "add", "a", "one two three four", index="perm")
    assert made.exit_code == 0, made.output
    index = SimhashIndex(redis_client, "perm")
    assert (index.k, len(index.layout.tables), index.layout.blocks) == (4, 15, (11, 11, 11, 11, 10, 10))
    # Another layout for the same index is a configuration mismatch (exit 5), not a silent mix.
    other = invoke("--k", "4", "--layout", "pigeonhole", "near", "one two", index="perm")
    assert other.exit_code == 5 and "Traceback" not in other.output
    bad = invoke("--k", "4", "--layout", "permuted-x", "add", "b", "x", index="perm2")
    assert bad.exit_code == 2 and "permuted-B" in bad.output
    # A layout is cut for one k: without --k it would be the default k's, not the stored index's.
    alone = invoke("--layout", "permuted-6", "near", "one two", index="perm")
    assert alone.exit_code == 2 and "--layout needs --k" in alone.output


def test_a_layout_reading_much_of_the_index_is_refused_at_creation(
    invoke: Invoke, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = invoke("--k", "63", "add", "a", "one two three", index="wide")
    assert refused.exit_code == 2 and "of the index" in refused.output and "Traceback" not in refused.output
    assert not redis_client.keys("simhash:wide:*")
    SimhashIndex(redis_client, "narrow", k=10)
    with pytest.raises(InvalidArgument, match="k=11"):
        SimhashIndex(redis_client, "wider", k=11)
    # An index made before the rule keeps working: only creation is refused.
    monkeypatch.setattr(defaults, "MAX_READ_FRACTION", 1.0)
    SimhashIndex(redis_client, "old", k=12).add("a", 1)
    monkeypatch.undo()
    assert SimhashIndex(redis_client, "old", k=12).near(1)[0].id == "a"
    assert invoke("get", "a", index="old").exit_code == 0
    # An index whose meta is lost says so, whatever layout the caller names.
    SimhashIndex(redis_client, "ghost", k=3).add("a", 1)
    redis_client.delete("simhash:ghost:meta")
    with pytest.raises(IndexCorrupted, match="no meta key"):
        SimhashIndex(redis_client, "ghost", k=12)


def test_scheme_and_width_at_creation(invoke: Invoke, redis_client: redis.Redis) -> None:
    text = "the quick brown fox jumps over the lazy dog"
    made = invoke("--scheme", "chars-4/binary", "--f", "128", "add", "a", text, index="chars")
    assert made.exit_code == 0, made.output
    index = SimhashIndex(redis_client, "chars")
    assert index.scheme == Scheme("chars", 4, 128, "binary") and index.f == 128
    assert index.get("a") == Scheme("chars", 4, 128, "binary").fingerprint(text)
    # Workers that name nothing adopt it; naming another one is refused (exit 5).
    assert invoke("near", text, index="chars").exit_code == 0
    assert invoke("--scheme", "words/tf", "near", text, index="chars").exit_code == 5
    assert invoke("--f", "64", "near", text, index="chars").exit_code == 5
    assert invoke("--f", "128", "near", text, index="chars").exit_code == 0  # --f alone checks the width
    bad = invoke("--scheme", "lines-2/tf", "add", "b", text, index="other")
    assert bad.exit_code == 2 and "eval names its settings" in bad.output and "Traceback" not in bad.output
    assert invoke("--f", "48", "add", "b", text, index="other").exit_code == 2


def test_a_scheme_or_layout_without_f_is_read_at_the_index_width(invoke: Invoke) -> None:
    text = "the quick brown fox jumps over the lazy dog"
    made = invoke("--f", "128", "--k", "3", "--scheme", "words/tf", "add", "a", text, index="f128")
    assert made.exit_code == 0, made.output
    # The index's own settings, without --f: read at its 128 bits, not at 64 (which refused them, exit 5).
    for options in (["--scheme", "words/tf"], ["--k", "3", "--layout", "pigeonhole"]):
        same = invoke(*options, "add", "b", text, index="f128")
        assert same.exit_code == 0, (options, same.output)
    other = invoke("--scheme", "chars-4/tf", "add", "c", text, index="f128")
    assert other.exit_code == 5 and "f=128" in other.stderr, other.output
