"""`load`'s input path as a user meets it: what help promises, encodings, bad records, counts and words."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import redis
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import InputError, SimhashIndex
from simhash_redis.jobs.jsonlines import read_json_lines
from simhash_redis.jobs.readers import ReadOptions, read
from tests.cli.conftest import Invoke, article, write_jsonl


def _help(*command: str) -> str:
    """A command's help as one line of words (rich's boxes and wrapping taken out)."""
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stdout).split())


def _indexes(redis_url: str) -> list[str]:
    client = redis.Redis.from_url(redis_url)
    try:
        return [
            key.decode().split(":")[1]
            for key in client.scan_iter(match="simhash:*:meta")
            if key.count(b":") == 2
        ]
    finally:
        client.close()


def test_the_plain_text_ids_help_gives_are_the_ones_load_stores(
    tmp_path: Path, invoke: Invoke, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # ids name the file as given
    text = _help("load")
    example = re.search(r"the line '([^']+)' of (\S+) is (\S+?);", text)
    assert example is not None, text
    line, name, doc_id = example.groups()
    numbered = re.search(r"--id-prefix (\S+) gives (\S+?)\)", text)
    assert numbered is not None, text
    prefix, numbered_id = numbered.groups()
    number = int(numbered_id.removeprefix(prefix))
    (tmp_path / name).write_text("\n" * (number - 1) + f"{line}\n", encoding="utf-8")
    for args, expected in (([], doc_id), (["--id-prefix", prefix], numbered_id)):
        result = invoke("load", *args, name, index="helped")
        assert result.exit_code == 0, result.output
        index = SimhashIndex(redis.Redis.from_url(redis_url), "helped", create=False)
        assert index.get(expected) is not None, (expected, result.output)


def test_a_latin1_file_is_bad_input_with_a_hint_and_loads_with_encoding(
    tmp_path: Path, invoke: Invoke, redis_url: str
) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("café au lait et crème brûlée\nnaïve façade of the old town\n".encode("latin-1"))
    bad = invoke("load", str(path), "--json", index="nonutf")
    assert bad.exit_code == 3, bad.output
    assert f"{path}:1: not valid UTF-8 (byte 3)" in bad.stderr and "--encoding" in bad.stderr
    assert "nothing loaded: every record was bad" in bad.stderr and "Traceback" not in bad.output
    assert "nonutf" not in _indexes(redis_url)  # no empty index left behind
    good = invoke("load", "--encoding", "latin-1", str(path), "--json", index="latin")
    assert good.exit_code == 0, good.output
    assert json.loads(good.stdout)["added"] == 2
    index = SimhashIndex(redis.Redis.from_url(redis_url), "latin", create=False)
    assert index.near("café au lait et crème brûlée")


def test_encoding_applies_to_every_format(tmp_path: Path) -> None:
    texts = ["über alles déjà vu", "ça va très bien"]
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_bytes(
        "".join(
            json.dumps({"id": f"é{i}", "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)
        ).encode("cp1252")
    )
    csv = tmp_path / "a.csv"
    csv.write_bytes(("id,text\n" + "".join(f"é{i},{t}\n" for i, t in enumerate(texts))).encode("cp1252"))
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "é0.txt").write_bytes(texts[0].encode("cp1252"))
    options = ReadOptions(encoding="cp1252")
    for path in (jsonl, csv):
        records = list(read(str(path), None, options))
        assert [(r.id, r.doc) for r in records] == [(f"é{i}", t) for i, t in enumerate(texts)], records
        utf8 = [item for item in read(str(path)) if isinstance(item, InputError)]
        assert utf8 and "not valid UTF-8" in str(utf8[0])
    assert [r.doc for r in read(str(folder), None, options)] == [texts[0]]


def test_a_csv_or_tsv_row_that_does_not_decode_names_the_byte(tmp_path: Path) -> None:
    # As docs/cli.md shows and a JSON line's error says: FILE:LINE: not valid UTF-8 (byte N), N counted
    # from the start of the row's first line (a quoted field may span lines).
    for name, data, line, at in [
        ("a.csv", b"id,text\na,fine\nb,caf\xe9 au lait\n", 3, 5),
        ("a.tsv", b"id\ttext\nb\tna\xefve\n", 2, 4),
        ("b.csv", b'id,text\nb,"two\nlin\xe9s"\n', 2, 10),
    ]:
        path = tmp_path / name
        path.write_bytes(data)
        errors = [str(item) for item in read(str(path)) if isinstance(item, InputError)]
        assert errors == [f"{path}:{line}: not valid UTF-8 (byte {at})"]
    cp1252 = tmp_path / "c.csv"
    cp1252.write_bytes(b"id,text\nb,bad \x81 byte\n")  # 0x81 has no character in cp1252
    errors = [
        str(e) for e in read(str(cp1252), None, ReadOptions(encoding="cp1252")) if isinstance(e, InputError)
    ]
    assert errors == [f"{cp1252}:2: not valid cp1252 (byte 6)"]


def test_an_unknown_or_unsplittable_encoding_is_a_usage_error(tmp_path: Path, invoke: Invoke) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello there\n")
    for encoding, words in (("klingon", "unknown encoding"), ("utf-16", "cannot be read line by line")):
        result = invoke("load", "--encoding", encoding, str(path), index="enc")
        assert result.exit_code == 2 and words in result.stderr, result.output
        assert "Traceback" not in result.output


def test_a_wrong_csv_column_prints_only_its_error(tmp_path: Path, invoke: Invoke, redis_url: str) -> None:
    path = tmp_path / "a.csv"
    path.write_text("id,text\n1,hello there\n")
    result = invoke("load", "--text-field", "body", str(path), index="wrongcol")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"error: {path}: no column 'body' in the header (columns: id, text)"
    ], result.stderr
    assert "wrongcol" not in _indexes(redis_url)


def test_counts_of_one_are_singular(tmp_path: Path, invoke: Invoke) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"id": "a", "text": article(1)}, {"id": "b"}])
    result = invoke("load", str(path), index="one")
    assert result.exit_code == 0, result.output
    assert "loaded: 1 document in" in result.stderr and ", 1 error" in result.stderr, result.stderr
    listed = invoke("indexes")
    assert "one\t1 document\t" in listed.stdout, listed.output
    dropped = invoke("drop", "--yes", index="one")
    assert "1 document," in dropped.stdout, dropped.output


def test_text_files_that_look_like_documents_warn_first_with_the_documents_load_reads(
    tmp_path: Path, invoke: Invoke
) -> None:
    posts = []
    for i in range(3):
        post = tmp_path / f"post{i}.txt"
        # 4 lines of text and 3 blank lines each: 12 documents, not 21 lines
        post.write_text("".join(article(i * 10 + j) + "\n\n" for j in range(3)) + article(i * 10 + 9) + "\n")
        posts.append(str(post))
    result = invoke("load", "--progress-every", "0", "--batch-size", "2", *posts, "--json", index="posts")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["written"] == 12
    lines = result.stderr.splitlines()
    warning = [
        n for n, line in enumerate(lines) if line.startswith("warning: 3 text files give 12 documents")
    ]
    progress = [n for n, line in enumerate(lines) if line.startswith("progress:")]
    assert warning and progress and warning[0] < progress[0], result.stderr


def test_json_nested_too_deeply_is_one_bad_record(tmp_path: Path, invoke: Invoke) -> None:
    deep = "[" * 5000 + "]" * 5000
    path = tmp_path / "deep.jsonl"
    path.write_text(
        json.dumps({"id": "a", "text": article(1)})
        + "\n"
        + '{"id": "b", "text": '
        + deep
        + "}\n"
        + '{"id": "c", "text": "x", "extra": '
        + "[" * 1000
        + "]" * 1000
        + "}\n"
        + json.dumps({"id": "d", "text": article(2)})
        + "\n"
    )
    for args, kwargs in (
        (["load", str(path)], {}),
        (["load", "-"], {"input": path.read_bytes()}),
        (["dedupe", str(path)], {}),
    ):
        result = invoke(*args, "--json" if args[0] == "load" else "--dry-run", index="deep", **kwargs)
        assert result.exit_code == 0, result.output
        assert ":2: not valid JSON (nested too deeply)" in result.stderr, result.output
        assert "Traceback" not in result.output and "RecursionError" not in result.output
    with pytest.raises(InputError, match=r":2: not valid JSON \(nested too deeply\)"):
        list(read_json_lines(path))


def test_a_json_file_holding_an_array_is_read_element_by_element(
    tmp_path: Path, invoke: Invoke, redis_url: str
) -> None:
    rows = [
        {"id": f"a{i}", "text": article(i) + ' with "quotes", [brackets] and {braces} \\ '} for i in range(5)
    ]
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps([*rows[:3], ["not an object"], *rows[3:]], indent=2))
    flat = tmp_path / "flat.json.gz"
    flat.write_bytes(gzip.compress(json.dumps(rows).encode()))
    result = invoke("load", str(pretty), "--json", index="arrays")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 5
    # the bad element is named at the line it starts on
    assert result.stderr.splitlines()[0] == f"{pretty}:14: expected a JSON object, got list", result.stderr
    again = invoke("load", str(flat), "--json", index="arrays")
    assert again.exit_code == 0 and json.loads(again.stdout)["unchanged"] == 5, again.output
    piped = invoke("load", "-", "--json", index="piped", input=json.dumps(rows).encode())
    assert piped.exit_code == 0 and json.loads(piped.stdout)["added"] == 5, piped.output
    index = SimhashIndex(redis.Redis.from_url(redis_url), "arrays", create=False)
    assert index.get("a4") == index.fingerprint(rows[4]["text"])


def test_a_malformed_json_array_is_one_error_where_it_goes_wrong(tmp_path: Path, invoke: Invoke) -> None:
    path = tmp_path / "cut.json"
    path.write_text(
        '[\n  {"id": "a", "text": "first text here"},\n  ,\n'
        '  {"id": "b", "text": "second one"},\n  {"id": "c", '
    )
    result = invoke("load", str(path), "--json", index="cut")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 2
    assert result.stderr.splitlines()[:2] == [
        f"{path}:3: not valid JSON (an empty element of the array)",
        f"{path}:5: the JSON array is not closed: the input ends inside it",
    ], result.stderr


@pytest.mark.parametrize("path", ["atomic", "bulk"])
def test_ids_that_collide_across_inputs_are_reported_and_can_be_kept_apart(
    tmp_path: Path, invoke: Invoke, redis_url: str, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = Path("copyright")
    folder.mkdir()
    for i, name in enumerate(["builtins", "os", "re", "sys", "io", "abc", "json"]):
        (folder / name).write_text(article(i))
    # the docstrings name 7 of their documents like the folder's files, with other texts
    rows = [{"id": name, "text": article(100 + i)} for i, name in enumerate(["zlib", "builtins", "os", "re"])]
    rows += [{"id": name, "text": article(200 + i)} for i, name in enumerate(["sys", "io", "abc", "json"])]
    write_jsonl(Path("pydocs.jsonl"), rows)
    # The bulk path is a plain index's; the atomic one runs on the default, a verified index.
    mode = ["--plain", "--bulk", "--window", "3"] if path == "bulk" else ["--no-bulk", "--batch-size", "3"]
    result = invoke("load", *mode, "copyright", "pydocs.jsonl", "--json", index=f"mixed-{path}")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["added"], summary["replaced"], summary["repeated"]) == (8, 7, 7), summary
    warning = [line for line in result.stderr.splitlines() if "--id-prefix-input" in line]
    assert len(warning) == 1, result.stderr
    assert warning[0].startswith(
        "warning: 7 documents of this run replaced what it had stored under the same id ('builtins', 'os', "
        "'re', 'sys', 'io', ...)"
    ), warning
    apart = invoke(
        "load", *mode, "--id-prefix-input", "copyright/", "pydocs.jsonl", "--json", index=f"apart-{path}"
    )
    assert apart.exit_code == 0, apart.output
    summary = json.loads(apart.stdout)
    assert (summary["added"], summary["replaced"], summary["repeated"]) == (15, 0, 0), summary
    assert "--id-prefix-input" not in apart.stderr
    index = SimhashIndex(redis.Redis.from_url(redis_url), f"apart-{path}", create=False)
    assert index.get("copyright/builtins") == index.fingerprint(article(0))
    assert index.get("pydocs.jsonl:builtins") == index.fingerprint(article(101))


def test_a_second_run_that_updates_documents_is_not_a_collision(tmp_path: Path, invoke: Invoke) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", [{"id": f"d{i}", "text": article(i)} for i in range(3)])
    second = write_jsonl(tmp_path / "b.jsonl", [{"id": f"e{i}", "text": article(i)} for i in range(3)])
    assert invoke("load", str(first), str(second), index="upd").exit_code == 0
    first.write_text("".join(json.dumps({"id": f"d{i}", "text": article(50 + i)}) + "\n" for i in range(3)))
    again = invoke("load", str(first), str(second), "--json", index="upd")
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert (summary["replaced"], summary["repeated"]) == (3, 0) and "warning" not in again.stderr, (
        again.output
    )
