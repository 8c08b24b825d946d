"""What a user meets on the command line: one-line errors in the command's own words, the mode an index
was created in, prompts, and tab-separated output a script can split. Against the suite's real server."""

from __future__ import annotations

import gzip
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import xxhash

from simhash_redis import InvalidArgument, Retention, SimhashIndex
from tests.cli.conftest import Invoke, article
from tests.servers import ServerProcess

SCRIPT = Path(sys.executable).with_name("simhash-redis")


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


# -- the engine ---------------------------------------------------------------------------------------


def test_an_unknown_engine_is_one_line_naming_the_valid_values(redis_url: str) -> None:
    env = {**os.environ, "SIMHASH_REDIS_ENGINE": "bogus", "SIMHASH_REDIS_URL": redis_url}
    for args in (["fingerprint", "some text"], ["--index", "eng", "add", "a", "some text"]):
        result = _run(args, env)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith("error: ") and "SIMHASH_REDIS_ENGINE" in result.stderr
        assert "'native'" in result.stderr and "'python'" in result.stderr and "'bogus'" in result.stderr
    assert _run(["--help"], env).returncode == 0  # help needs no engine


@pytest.mark.parametrize(
    ("setup", "call"),
    [
        ("", "simhash_redis.Scheme().fingerprint('some text')"),
        # An index opens, stores int fingerprints and counts without an engine: only a text needs one.
        (
            "index = simhash_redis.SimhashIndex(fakeredis.FakeRedis(), 'x')\n"
            "index.add('a', 12345)\n"
            "assert index.get('a') == 12345 and index.count() == (1, 1)\n",
            "index.add('b', 'some text')",
        ),
    ],
    ids=["scheme", "index"],
)
def test_the_library_imports_and_names_a_wrong_engine_when_one_is_needed(setup: str, call: str) -> None:
    code = (
        f"import fakeredis, simhash_redis\n{setup}try:\n    {call}\n"
        "except simhash_redis.InvalidArgument as exc:\n    print('refused:', exc)\n"
    )
    env = {**os.environ, "SIMHASH_REDIS_ENGINE": "bogus"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: ") and "SIMHASH_REDIS_ENGINE" in result.stdout


# -- the mode of an index -----------------------------------------------------------------------------


def test_stats_and_indexes_show_a_verified_index(invoke: Invoke) -> None:
    assert invoke("--verified", "add", "a", article(1), index="ver").exit_code == 0
    assert invoke("--plain", "add", "a", article(1), index="pla").exit_code == 0
    stats = invoke("stats", index="ver")
    assert stats.exit_code == 0, stats.output
    assert "verified       Jaccard threshold 0.8 (odd sketches of 1,008 bits" in stats.stdout
    assert "verified       no" in invoke("stats", index="pla").stdout
    listed = invoke("indexes")
    assert listed.stdout.splitlines() == ["pla\t1 document\tk=3 f=64", "ver\t1 document\tk=3 f=64 verified"]
    rows = {row["name"]: row for row in map(json.loads, invoke("indexes", "--json").stdout.splitlines())}
    assert rows["ver"]["verified"] is True and rows["pla"]["verified"] is False
    assert rows["ver"]["retention"] is None


def test_indexes_shows_a_retention_window(invoke: Invoke) -> None:
    """An index that forgets its documents was listed as one that keeps them: `stats` said so, `indexes`
    did not."""
    assert invoke("--retention", "7d", "--sliding", "add", "a", article(1), index="wire").exit_code == 0
    listed = invoke("indexes")
    line = "wire\t1 document\tk=3 f=64 verified retention 1w (periods of 28h), sliding"
    assert listed.stdout.splitlines() == [line]
    (row,) = map(json.loads, invoke("indexes", "--json").stdout.splitlines())
    assert row["retention"] == "604800;period=100800;sliding"


# -- retention units ----------------------------------------------------------------------------------


def test_a_retention_without_a_unit_is_refused_with_one_that_has_it(
    invoke: Invoke, redis_client: redis.Redis
) -> None:
    bare = invoke("--plain", "--retention", "7", "add", "a", article(1), index="bare")
    assert bare.exit_code == 2 and "Traceback" not in bare.output, bare.output
    assert bare.stderr.startswith("error: --retention '7' needs a unit") and "7d" in bare.stderr
    assert not redis_client.exists("simhash:bare:meta")
    assert invoke("--plain", "--retention", "7d", "add", "a", article(1), index="bare").exit_code == 0
    assert redis_client.hget("simhash:bare:meta", "retention") == b"604800;period=100800"


@pytest.mark.parametrize("given", ["7", " 90 ", "0"])
def test_the_library_refuses_a_string_without_a_unit(given: str) -> None:
    with pytest.raises(InvalidArgument, match="needs a unit"):
        Retention.of(given)


def test_the_library_reads_a_number_as_seconds(redis_client: redis.Redis) -> None:
    index = SimhashIndex(redis_client, "secs", retention=90)
    assert index.config.retention == Retention.of("90s")


# -- a lost meta key ----------------------------------------------------------------------------------


def test_a_lost_meta_points_to_restore_meta_and_its_refusals_are_readable(
    invoke: Invoke, redis_client: redis.Redis
) -> None:
    index = SimhashIndex(redis_client, "lost", k=5)
    index.add_many([("builtins.issubclass", 0x9D4A_0000_0000_0001), ("doc-2", 0x1234)])
    redis_client.delete(index.keys.meta)
    for args in (["near", article(1)], ["get", "doc-2"], ["stats"], ["export", "-o", os.devnull]):
        result = invoke(*args, index="lost")
        assert result.exit_code == 1 and "Traceback" not in result.output, (args, result.output)
        assert "no meta key" in result.stderr
        assert "simhash-redis --index lost --k K restore-meta" in result.stderr
        # A dump is msgpack: its configuration is in a header record, which no `head -1` shows.
        assert "header record names them" in result.stderr and "first line" not in result.stderr
        assert "no index named" not in result.stderr and "SimhashIndex" not in result.stderr
    wrong = invoke("--k", "3", "restore-meta", index="lost")
    assert wrong.exit_code == 5, wrong.output
    assert "b'" not in wrong.stderr and 'b"' not in wrong.stderr, wrong.stderr
    assert "of id 'builtins.issubclass'" in wrong.stderr or "of id 'doc-2'" in wrong.stderr, wrong.stderr
    assert "0x" in wrong.stderr and "give restore-meta the options the index was created with" in wrong.stderr
    # An index made with other buckets is restored only with them: the hints and the help name them.
    assert "--id-buckets or --band-buckets" in wrong.stderr, wrong.stderr
    assert "--id-buckets and --band-buckets" in invoke("stats", index="lost").stderr
    help_text = " ".join(invoke("restore-meta", "--help").stdout.split())
    assert "--id-buckets, --band-" in help_text, help_text  # (wrapped at its hyphen)
    windowed = invoke("--k", "5", "--retention", "1d", "restore-meta", index="lost")
    assert windowed.exit_code == 5 and windowed.stderr.endswith("leave out --retention\n"), windowed.stderr
    assert invoke("--k", "5", "restore-meta", index="lost").exit_code == 0
    assert invoke("get", "doc-2", index="lost").stdout.strip() == "0x0000000000001234"


def test_the_library_says_the_meta_is_lost_when_only_reading(redis_client: redis.Redis) -> None:
    from simhash_redis import IndexCorrupted, IndexNotFound

    index = SimhashIndex(redis_client, "lost-lib", k=5)
    index.add("a", 7)
    redis_client.delete(index.keys.meta)
    with pytest.raises(IndexCorrupted, match="no meta key") as refused:
        SimhashIndex(redis_client, "lost-lib", create=False)
    assert refused.value.remedy == "restore-meta" and "SimhashIndex.restore" in str(refused.value)
    with pytest.raises(IndexNotFound):
        SimhashIndex(redis_client, "never-made", create=False)


# -- the command line's words -------------------------------------------------------------------------


def test_the_index_k_and_the_query_distance_are_told_apart(invoke: Invoke) -> None:
    assert invoke("add", "a", article(1), index="kk").exit_code == 0
    trap = invoke("near", "--k", "2", article(1), index="kk")
    assert trap.exit_code == 5, trap.output
    assert "k=3, not k=2" in trap.stderr and "k='" not in trap.stderr
    assert "leave out --k" in trap.stderr and "near -k 2 (--distance 2)" in trap.stderr
    assert invoke("near", "-k", "2", article(1), index="kk").exit_code == 0
    other = invoke("--k", "2", "add", "b", article(2), index="kk")
    assert other.exit_code == 5 and "leave out --k" in other.stderr and "near -k" not in other.stderr


def test_import_refusals_name_options_not_library_arguments(invoke: Invoke, tmp_path: Path) -> None:
    assert invoke("--plain", "add", "a", article(1), index="src").exit_code == 0
    dump = tmp_path / "src.dump"
    assert invoke("export", "-o", str(dump), index="src").exit_code == 0
    assert invoke("--plain", "add", "x", article(2), index="full").exit_code == 0
    assert invoke("--verified", "add", "x", article(2), index="ver").exit_code == 0
    assert invoke("--plain", "--retention", "1d", "add", "x", article(2), index="win").exit_code == 0
    windowed = tmp_path / "win.dump"
    assert invoke("export", "-o", str(windowed), index="win").exit_code == 0
    for name, source, code in (("full", dump, 2), ("ver", dump, 2), ("win", dump, 2), ("full", windowed, 5)):
        refused = invoke("import", str(source), index=name)
        assert refused.exit_code == code, (name, refused.output)
        assert "another --index" in refused.stderr, refused.stderr
        assert not any(word in refused.stderr for word in ("=True", "merge=", "name="))
    assert "give --merge to do that" in invoke("import", str(dump), index="full").stderr
    assert invoke("import", "--merge", str(dump), index="full").exit_code == 0


def test_the_library_hint_names_its_own_arguments(redis_client: redis.Redis) -> None:
    import io

    from simhash_redis.jobs.dump import export_index, import_index

    source = SimhashIndex(redis_client, "lib-src")
    source.add("a", 1)
    data = io.BytesIO()
    export_index(source, data)
    SimhashIndex(redis_client, "lib-dst").add("b", 2)
    with pytest.raises(InvalidArgument, match="pass merge=True") as refused:
        import_index(redis_client, io.BytesIO(data.getvalue()), name="lib-dst")
    assert refused.value.remedy == "merge" and "--" not in str(refused.value)


# -- prompts ------------------------------------------------------------------------------------------


# The read(2) system call's number, where /proc/PID/syscall names it.
_READ = {"x86_64": 0, "aarch64": 63}.get(platform.machine())


def _wait_reading_stdin(pid: int) -> None:
    """Wait until a process is blocked reading its stdin (where /proc tells; elsewhere return at once)."""
    where = Path(f"/proc/{pid}/syscall")
    if _READ is None or not where.exists():
        return
    deadline = time.monotonic() + 60  # only stops a hang
    while time.monotonic() < deadline:
        fields = where.read_text().split()
        if len(fields) > 1 and fields[0] == str(_READ) and int(fields[1], 16) == 0:
            return
        time.sleep(0.01)
    raise AssertionError(f"the command never waited for an answer: {where.read_text()!r}")


def test_ctrl_c_at_a_prompt_is_an_interrupt(redis_url: str, redis_client: redis.Redis) -> None:
    SimhashIndex(redis_client, "asked").add("a", 1)
    primary, secondary = os.openpty()  # drop asks only when stdin is a terminal
    # Ctrl-C ignored here (a shell's background job runs the suite so) would be ignored by the command:
    # a handler of this process's own is reset to the default in the child, as a terminal's shell has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            drop = subprocess.Popen(
                [str(SCRIPT), "--index", "asked", "drop"],
                stdin=secondary,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "SIMHASH_REDIS_URL": redis_url},
            )
        finally:
            signal.signal(signal.SIGINT, previous)
        assert drop.stdout is not None
        shown = b""
        while b"[y/N]" not in shown:  # the question is asked: the command waits for the answer
            chunk = drop.stdout.read1(1024)
            assert chunk, (shown, drop.wait(60), drop.stderr.read() if drop.stderr else b"")
            shown += chunk
        # A signal that lands between the prompt and the read of the answer would leave the read waiting
        # (Python handles it between bytecodes): sent once the command waits in that read.
        _wait_reading_stdin(drop.pid)
        drop.send_signal(signal.SIGINT)  # what Ctrl-C at the terminal sends
        try:
            _, err = drop.communicate(timeout=60)  # only stops a hang
        except subprocess.TimeoutExpired:
            status = Path(f"/proc/{drop.pid}/status")
            ignored = [line for line in status.read_text().splitlines() if line.startswith("Sig")]
            drop.kill()
            drop.communicate()
            raise AssertionError(f"drop went on after SIGINT: {ignored}") from None
    finally:
        os.close(primary)
        os.close(secondary)
    assert drop.returncode == 130, err
    assert err.decode() == "interrupted\n"
    assert redis_client.exists("simhash:asked:meta") and SimhashIndex(redis_client, "asked").get("a") == 1


def test_no_answer_at_a_prompt_deletes_nothing(
    invoke: Invoke, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simhash_redis.cli import admin

    SimhashIndex(redis_client, "asked").add("a", 1)
    monkeypatch.setattr(admin, "stdin_is_terminal", lambda: True)
    ended = invoke("drop", input="", index="asked")  # end of input before an answer
    assert ended.exit_code == 1 and "Aborted" not in ended.output, ended.output
    assert ended.stderr == "error: no answer (end of input): nothing was done\n"
    assert SimhashIndex(redis_client, "asked").get("a") == 1


# -- tab-separated output -----------------------------------------------------------------------------

#: Ids a script splitting on TABs and lines would misread unless they are escaped.
AWKWARD = ["tab\there", "line\nbreak", "back\\slash\\t", "cr\rid", "comma,id"]


def _unescaped(field: str) -> str:
    r"""The documented reading of an escaped field: \t \n \r \\ (and \, in a list) are the characters."""
    out, chars = [], iter(field)
    for char in chars:
        if char == "\\":
            nxt = next(chars)
            out.append({"t": "\t", "n": "\n", "r": "\r"}.get(nxt, nxt))
        else:
            out.append(char)
    return "".join(out)


def _split_list(field: str) -> list[str]:
    """A list field's items, split at the commas that are not escaped."""
    items, current, chars = [], "", iter(field)
    for char in chars:
        if char == "\\":
            current += char + next(chars)
        elif char == ",":
            items.append(current)
            current = ""
        else:
            current += char
    return [_unescaped(item) for item in [*items, current]]


def test_tab_separated_output_escapes_ids(invoke: Invoke, tmp_path: Path) -> None:
    from tests.cli.conftest import write_jsonl

    stored = write_jsonl(tmp_path / "stored.jsonl", [{"id": "first\tone", "text": article(1)}])
    assert invoke("load", "-q", str(stored), index="tsv").exit_code == 0
    copies = [{"id": doc_id, "text": article(1, copy)} for copy, doc_id in enumerate(AWKWARD, 1)]
    batch = write_jsonl(tmp_path / "batch.jsonl", copies)
    pairs = invoke("dedupe", "--dry-run", "-q", str(batch), index="tsv")
    assert pairs.exit_code == 0, pairs.output
    rows = [line.split("\t") for line in pairs.stdout.split("\n")[:-1]]
    assert [len(row) for row in rows] == [3] * len(AWKWARD), pairs.stdout
    read = [(_unescaped(new), _unescaped(old)) for new, old, _ in rows]
    assert read == [(doc_id, "first\tone") for doc_id in AWKWARD]
    grouped = invoke("dedupe", "--dry-run", "--groups", "-q", str(batch), index="tsv")
    [group] = [line.split("\t") for line in grouped.stdout.split("\n")[:-1]]
    assert group[0] == str(len(AWKWARD) + 1) and _unescaped(group[1]) == "first\tone"
    assert sorted(_split_list(group[2])) == sorted(AWKWARD)
    loaded = invoke("load", "--dedupe", "-q", str(batch), index="tsv")
    assert loaded.stdout == pairs.stdout
    assert invoke("add", "tab\there", article(2), index="tsv").exit_code == 0
    near = invoke("near", article(2), index="tsv")
    [row] = [line.split("\t") for line in near.stdout.split("\n")[:-1]]
    assert _unescaped(row[0]) == "tab\there" and row[0] == "tab\\there" and row[1] == "0"


# -- the index name -------------------------------------------------------------------------------------


def test_an_empty_index_name_is_a_usage_error_not_the_default(
    invoke: Invoke, tmp_path: Path, redis_client: redis.Redis
) -> None:
    # A script with an unset variable (--index "$IDX") must not act on the default index, or the dump's.
    assert invoke("--plain", "add", "a", article(1)).exit_code == 0
    assert invoke("--plain", "add", "a", article(1), index="src").exit_code == 0
    dump = tmp_path / "src.dump"
    assert invoke("export", "-o", str(dump), index="src").exit_code == 0
    for args in (["drop", "--yes"], ["stats"], ["add", "b", article(2)], ["import", str(dump)]):
        refused = invoke(*args, index="")
        assert refused.exit_code == 2, (args, refused.output)
        assert refused.stderr.startswith("error: --index must be 1-100 characters"), refused.stderr
        assert "Traceback" not in refused.stderr
    assert SimhashIndex(redis_client, "default", create=False).count()[0] == 1
    assert SimhashIndex(redis_client, "src", create=False).count()[0] == 1


# -- import ---------------------------------------------------------------------------------------------


def test_import_refuses_options_that_differ_from_the_dumps_configuration(
    invoke: Invoke, tmp_path: Path, redis_client: redis.Redis
) -> None:
    made = invoke(
        "--plain", "--f", "128", "--k", "4", "--scheme", "words/tf", "add", "a", article(1), index="src"
    )
    assert made.exit_code == 0, made.output
    dump = tmp_path / "src.dump"
    assert invoke("export", "-o", str(dump), index="src").exit_code == 0
    for options, said in (
        (["--k", "3"], "k=4, not --k 3"),
        (["--f", "64"], "f=128, not --f 64"),
        (["--scheme", "chars-4/tf"], "not --scheme chars-4/tf"),
        (["--layout", "pigeonhole", "--k", "3"], "k=4, not --k 3"),
        (["--retention", "7d"], "no retention, not --retention 7d"),
        (["--id-buckets", "64"], "id buckets, not --id-buckets 64"),
        (["--verified"], "a plain index, not --verified"),
        (["--threshold", "0.5"], "a plain index, not --threshold"),
    ):
        refused = invoke(*options, "import", str(dump), index="dst")
        assert refused.exit_code == 5, (options, refused.output)
        assert said in refused.stderr and "leave out the option" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.output and not SimhashIndex.exists(redis_client, "dst")
    # What the dump states, said again (labels read at its width), is accepted.
    same = invoke(
        "--k", "4", "--f", "128", "--scheme", "words/tf", "--plain", "import", str(dump), index="dst"
    )
    assert same.exit_code == 0, same.output
    assert invoke("--verified", "add", "a", article(1), index="ver").exit_code == 0
    verified = tmp_path / "ver.dump"
    assert invoke("export", "-o", str(verified), index="ver").exit_code == 0
    plain = invoke("--plain", "import", str(verified), index="dst2")
    assert plain.exit_code == 5 and "a verified index, not --plain" in plain.stderr


def test_a_bad_dump_record_is_bad_input_naming_the_file_and_record(invoke: Invoke, tmp_path: Path) -> None:
    import io

    import msgpack

    assert invoke("--plain", "add", "a", article(1), index="src").exit_code == 0
    dump = tmp_path / "src.dump"
    assert invoke("export", "-o", str(dump), index="src").exit_code == 0
    header = next(iter(msgpack.Unpacker(io.BytesIO(dump.read_bytes()), raw=False)))
    records = [[f"d{i}", i] for i in range(1500)] + [["", 1]]
    bad = tmp_path / "bad.dump"
    body = b"".join(msgpack.packb(r) for r in [header, *records])
    end = {"type": "end", "records": 1501, "xxh3_64": xxhash.xxh3_64_intdigest(body)}
    bad.write_bytes(body + msgpack.packb(end))
    result = invoke("import", str(bad), index="dst")
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"error: {bad}: record 1501: ") and "Traceback" not in result.output
    assert "documents      1,500\n" in invoke("stats", index="dst").stdout


def test_an_altered_dump_is_refused_and_a_gzipped_one_imported(invoke: Invoke, tmp_path: Path) -> None:
    assert invoke("--plain", "add", "a", article(1), index="src").exit_code == 0
    dump = tmp_path / "src.dump"
    assert invoke("export", "-o", str(dump), index="src").exit_code == 0
    data = dump.read_bytes()
    altered = tmp_path / "altered.dump"
    altered.write_bytes(data[:40] + bytes([data[40] ^ 4]) + data[41:])
    result = invoke("import", str(altered), index="dst")
    assert result.exit_code == 3 and result.stderr.startswith(
        f"error: {altered}: the dump's checksum does not"
    )
    assert invoke("indexes").stdout.split("\t")[0] == "src"  # nothing written: no index dst
    gzipped = tmp_path / "src.dump.gz"
    gzipped.write_bytes(gzip.compress(data))
    assert invoke("import", str(gzipped), index="dst").exit_code == 0
    assert invoke("import", "-", index="piped", input=gzip.compress(data)).exit_code == 0
    assert invoke("get", "a", index="piped").exit_code == 0


# -- the Redis URL --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "user:wrongPW123@127.0.0.1:16392/0",
        ":wrongPW123@127.0.0.1:16392/0",
        "redis:/:wrongPW123@127.0.0.1:16392/0",
        "redis:wrongPW123@127.0.0.1",
        "127.0.0.1:16392/0?password=wrongPW123",
    ],
)
def test_a_malformed_url_never_shows_its_password(url: str) -> None:
    for args, env in (
        (["--redis-url", url, "stats"], dict(os.environ)),
        (["stats"], {**os.environ, "SIMHASH_REDIS_URL": url}),
    ):
        result = _run(args, env)
        assert result.returncode == 2, result.stderr
        assert "wrongPW" not in result.stderr + result.stdout and "Traceback" not in result.stderr
        assert result.stderr.startswith("error: url ") and "***" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("ssl_cert_reqs=bogus", "Invalid SSL Certificate Requirements Flag: bogus"),
        ("protocol=9", "protocol must be either 2 or 3"),
    ],
)
def test_a_url_option_redis_py_checks_only_when_connecting_is_a_usage_error(
    invoke: Invoke, redis_server: ServerProcess, query: str, reason: str
) -> None:
    # redis-py checks these when it makes a connection: the first command failed with exit 1 (a Redis
    # error) or 4 (cannot reach Redis), sending the user after the server.
    url = f"rediss://u:s3cr3t-pw@127.0.0.1:{redis_server.port}/0?{query}"
    result = invoke("stats", index="x", url=url)
    assert result.exit_code == 2, result.output
    shown = url.replace("s3cr3t-pw", "***")
    assert result.stderr == f"error: url {shown!r} is not a valid Redis URL: {reason}\n"
    with pytest.raises(InvalidArgument, match=f"not a valid Redis URL: {reason}") as caught:
        SimhashIndex.from_url(url, "x")
    assert "s3cr3t-pw" not in str(caught.value)
