"""docs/security.md's minimal ACL is exactly what the library and the CLI need, on a real server.

Every library call and every CLI command that talks to Redis runs as a user with the documented ACL (so
a command the documentation omits is refused, and fails the run), while the server counts the commands
run (INFO commandstats, which counts those called inside scripts too): a documented command that
nothing ran is not needed, and fails the test as well. The server is the embedded Valkey, plain TCP
(TLS is tests/test_security.py's business); the test's own set-up commands run between the recordings.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from simhash_redis.cli.app import app
from typer.testing import CliRunner

from simhash_redis import Outcome, Retention, SimhashIndex, VerifiedIndex, drop_index, open_index
from simhash_redis.asyncio import AsyncSimhashIndex
from simhash_redis.codec import encode_fp
from simhash_redis.index import list_indexes
from tests.servers import HOST, ClusterProcess, ServerProcess
from tests.service_process import ServiceProcess
from tests.test_security import MINIMAL_ACL, STATS_ACL

DOCS = Path(__file__).resolve().parent.parent / "docs" / "security.md"
PASSWORD = "acl-test-pw"
#: Documented, but only a cluster runs it (`count()` sums bucket sizes there): this server cannot.
CLUSTER_ONLY = {"hlen"}
#: Commands the server lets any connection run, whatever its ACL (they authenticate it).
NO_ACL = {"auth", "hello"}
#: Refused to the documented user, and taken as answers: redis-py's connection handshake (it ignores a
#: refusal), and from_url's question whether the server is a cluster (a refusal means it is not).
PROBES = {"client|setinfo", "info"}

TEXTS = [
    "the council approved the budget for schools and roads after a long debate on tuesday evening",
    "The Council approved the budget for schools and roads, after a long debate on Tuesday evening!",
    "heavy rain and strong winds are expected along the coast tonight, closing roads in the region",
    "the football club signed a young striker from the second division for an undisclosed fee",
]


#: The CLI's commands, and those that never talk to Redis (`stats` has a test of its own).
COMMANDS = {command.name for command in app.registered_commands if command.name}
WITHOUT_REDIS = {"eval", "fingerprint", "plan", "server"}
RUN_COMMANDS: set[str] = set()
#: The indexes' members that never talk to Redis.
NO_IO = {"cluster", "f", "k", "layout", "scheme", "fingerprint", "fingerprint_many", "max_candidates"}


def documented() -> tuple[str, set[str], set[str]]:
    """docs/security.md's ACL rules for the library, its commands, and the commands `stats` adds."""
    text = DOCS.read_text()
    found = re.search(r"```\nACL SETUSER simhash on >PASSWORD (.*?)\n```", text, re.S)
    assert found, "docs/security.md has no ACL SETUSER block"
    rules = found.group(1).replace("\\\n", " ")
    stats = re.search(r"The CLI's `stats` also reads [^`]*`([^`]+)`", text)
    assert stats, "docs/security.md does not say what `stats` adds"
    return " ".join(rules.split()), _commands(rules), _commands(stats.group(1))


def _commands(rules: str) -> set[str]:
    return {rule[1:].lower() for rule in rules.split() if rule.startswith("+") and rule[1:2] != "@"}


class Recorder:
    """The server, its admin (the default user) and what the commands between `start` and `stop` ran."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.admin = server.client()
        self.used: set[str] = set()
        self.refused: set[str] = set()

    def start(self) -> None:
        self.admin.config_resetstat()

    def stop(self) -> None:
        # INFO's own call is counted after its reply is made, so it is not in it.
        for name, stats in self.admin.info("commandstats").items():
            command = name.removeprefix("cmdstat_")
            if command == "config|resetstat" or command in NO_ACL:  # the recorder's own; ungoverned
                continue
            if stats.get("calls", 0):
                self.used.add(command)
            if stats.get("rejected_calls", 0):
                self.refused.add(command)

    def url(self, user: str) -> str:
        return f"redis://{user}:{PASSWORD}@{HOST}:{self.server.port}/0"


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    rules, _, stats = documented()
    with ServerProcess() as server:
        rec = Recorder(server)
        rec.admin.execute_command("ACL", "SETUSER", "worker", "on", f">{PASSWORD}", *rules.split())
        extra = [f"+{command}" for command in sorted(stats)]
        rec.admin.execute_command("ACL", "SETUSER", "stats", "on", f">{PASSWORD}", *rules.split(), *extra)
        yield rec
        rec.admin.close()


def _library(url: str, admin: redis.Redis, recorder: Recorder) -> None:
    """Every method of the library's indexes that talks to Redis, on each kind of index."""
    kinds: dict[str, Retention | None] = {
        "lib": None,
        "lib-window": Retention.of("1d"),
        "lib-sliding": Retention.of("1d", sliding=True),
    }
    for name, retention in kinds.items():
        index = SimhashIndex.from_url(url, name, k=3, id_buckets=64, retention=retention)
        fps = [index.fingerprint(text) for text in TEXTS]
        assert index.add("a", TEXTS[0]).value == "added"
        index.add_many([("b", TEXTS[1]), ("c", TEXTS[2])])
        index.bulk_add([("d", fps[3]), ("e", fps[3] ^ 1)])
        index.bulk_add_columns([(["f", "g"], [fps[2] ^ 3, fps[2] ^ 0xF0])])
        assert index.add_if_new("h", TEXTS[1]) is not None and index.add_if_new("i", 12345) is None
        assert index.get("a") == fps[0] and index.get_many(["a", "zz"]) == [fps[0], None]
        assert "a" in [m.id for m in index.near(TEXTS[0], k=0)] and index.near_many(TEXTS[:2])
        assert index.remove("b") and index.remove_many(["c", "zz"]) == [True, False]
        assert index.count()[0] > 0 and SimhashIndex.exists(index.client, name)
        index._meta_read = float("-inf")  # its meta read again now, not a second after the last read
        index.check_unchanged()
        assert index.verify().ok
        recorder.stop()
        _damage(admin, index)  # as the admin, between the recordings
        recorder.start()
        report = index.verify(repair=True)
        assert report.problems and index.verify().ok, report.as_dict()
        opened = open_index(name, url)
        assert opened.k == 3
        opened.client.close()
        assert name in list_indexes(index.client)
        if retention is None:
            recorder.stop()
            admin.delete(index.keys.meta)  # a lost meta key, restored by the library
            recorder.start()
            SimhashIndex.restore(index.client, name, k=3, id_buckets=64)
        assert index.drop() > 0
        index.client.close()

    verified = VerifiedIndex.from_url(url, "libv")
    verified.add("a", TEXTS[0])
    verified.add_many([("b", TEXTS[2])])
    sketch = verified.sketch_of("a")  # read back, and stored again under another id
    verified.add_sketched(["c"], [verified.index.fingerprint(TEXTS[0])], [sketch])
    # The bulk path: a new id and a stored one of another text (a replacement), in one window.
    texts = [TEXTS[3], TEXTS[2]]
    fps, sketches = verified.index.fingerprint_many(texts), verified.hasher.sketch_many(texts)
    assert verified.bulk_add_sketched(["g", "c"], fps, sketches) == [Outcome.ADDED, Outcome.REPLACED]
    assert verified.add_if_new("d", TEXTS[1]) is not None
    assert verified.add_if_new_many([("e", TEXTS[1]), ("f", "a text of its own, nothing like the rest")])
    assert verified.near(TEXTS[1]) and verified.near_many(TEXTS[:2])
    query = verified.hasher.sketch(TEXTS[0])  # a query's sketch: the stored one holds one sampling level
    assert verified.near_sketched([verified.index.fingerprint(TEXTS[0])], [query])[0]
    assert verified.remove("a") and verified.remove_many(["b", "zz"]) == [True, False]
    assert verified.index.verify(repair=True).ok
    assert VerifiedIndex.on_client(verified.index.client, "libv").threshold == verified.threshold
    assert drop_index(verified.index.client, "libv") > 0
    verified.index.client.close()

    async def asynchronous() -> None:
        async with await AsyncSimhashIndex.from_url(url, "libasync", k=3) as index:
            await index.add_many([("a", TEXTS[0]), ("b", TEXTS[1])])
            assert await index.near(TEXTS[0]) and await index.add_if_new("c", TEXTS[1]) is not None
            await index.drop()

    asyncio.run(asynchronous())


def _damage(admin: redis.Redis, index: SimhashIndex) -> None:
    """Something for a repair to write: a table member lost, an orphan member, drifted counts."""
    keys, fp = index.keys, index.get("a")
    assert fp is not None
    if index.windows is not None:
        keys = index.windows.schema(index.windows.view().windows[0])
    member = encode_fp(fp, 64)
    admin.srem(keys.tables(fp)[0], member)
    admin.sadd(keys.tables(7)[1], encode_fp(7, 64))
    admin.hincrby(keys.counts, "docs", 3)


def _cli(url: str, tmp_path: Path, admin: redis.Redis, recorder: Recorder) -> None:
    """Every CLI command that talks to Redis."""
    run = CliRunner()

    def cli(*args: str, code: int = 0, stdin: str | None = None) -> str:
        RUN_COMMANDS.add(next(arg for arg in args if arg in COMMANDS))
        result = run.invoke(app, ["--redis-url", url, *args], input=stdin)
        assert result.exit_code == code, (args, result.output)
        return result.output

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    sample = tmp_path / "sample.jsonl"
    sample.write_text(docs.read_text())
    cli("demo", "--sample", str(sample))
    cli("--index", "cli", "load", str(docs))
    cli("--index", "cli", "add", "x", TEXTS[2])
    cli("--index", "cli", "near", TEXTS[0])
    cli("--index", "cli", "get", "d0")
    cli("--index", "cli", "dedupe", str(docs))
    cli("--index", "cli", "remove", "d1")
    cli("indexes")
    dump = tmp_path / "cli.dump"
    cli("--index", "cli", "export", "-o", str(dump))
    cli("--index", "copy", "import", str(dump))
    cli("--index", "cli", "verify")
    cli("--index", "cli", "verify", "--repair")
    recorder.stop()
    admin.delete(b"simhash:cli:meta")
    recorder.start()
    cli("--index", "cli", "--k", "3", "--verified", "restore-meta")  # created verified, the default
    cli("--index", "cli", "drop", "--yes")
    cli("--index", "copy", "drop", "--yes")
    cli("--index", "demo", "drop", "--yes")


def _service(url: str, tmp_path: Path) -> None:
    """`serve`, and every call a worker makes of it (its probes and each operation on one document)."""
    RUN_COMMANDS.add("serve")
    with ServiceProcess(url, tmp_path, options=["--k", "3"]) as service:
        calls = [("add", {"id": "a", "text": TEXTS[0]}), ("add_if_new", {"id": "b", "text": TEXTS[0]})]
        calls += [("near", {"text": TEXTS[0]}), ("get", {"id": "a"}), ("remove", {"id": "a"})]
        for operation, body in calls:
            answer = httpx.post(f"{service.url}/v1/indexes/svc/{operation}", json=body, timeout=30)
            assert answer.status_code == 200, (operation, answer.text)
        for path in ("/readyz", "/v1/indexes/svc/stats"):
            assert httpx.get(f"{service.url}{path}", timeout=30).status_code == 200, path
    client = redis.Redis.from_url(url)
    try:
        drop_index(client, "svc")
    finally:
        client.close()


def test_the_documented_acl_is_what_the_library_and_cli_need(recorder: Recorder, tmp_path: Path) -> None:
    _, minimal, _ = documented()
    recorder.start()
    _library(recorder.url("worker"), recorder.admin, recorder)
    _cli(recorder.url("worker"), tmp_path, recorder.admin, recorder)
    _service(recorder.url("worker"), tmp_path)
    recorder.stop()
    # A command added later must join the run (or be named in WITHOUT_REDIS).
    assert COMMANDS - WITHOUT_REDIS - {"stats"} == RUN_COMMANDS
    assert recorder.refused <= PROBES, f"refused to the documented user: {recorder.refused - PROBES}"
    assert recorder.used <= minimal, f"run, yet not documented: {recorder.used - minimal}"
    assert minimal - CLUSTER_ONLY <= recorder.used, f"documented, yet never run: {minimal - recorder.used}"


def test_the_acl_test_runs_every_method() -> None:
    """A method added later must join the run above (or be named in NO_IO)."""
    source = Path(__file__).read_text()
    for cls in (SimhashIndex, VerifiedIndex):
        public = {name for name in dir(cls) if not name.startswith("_")} - NO_IO
        assert {name for name in public if f".{name}(" not in source} == set(), cls.__name__


def test_stats_needs_what_is_documented_for_it(recorder: Recorder) -> None:
    _, minimal, stats = documented()
    url = recorder.url("stats")
    index = SimhashIndex.from_url(url, "st", k=3)
    index.add_many([("a", TEXTS[0]), ("b", TEXTS[2])])
    recorder.used.clear()
    recorder.start()
    result = CliRunner().invoke(app, ["--redis-url", url, "--index", "st", "stats"])
    recorder.stop()
    assert result.exit_code == 0, result.output
    assert recorder.used - minimal == stats, recorder.used - minimal
    index.drop()
    index.client.close()


def test_the_tls_tests_use_the_documented_acl() -> None:
    _, minimal, stats = documented()
    assert _commands(MINIMAL_ACL) == minimal
    assert _commands(STATS_ACL) == stats


def documented_cluster() -> set[str]:
    """The commands docs/security.md adds for Redis Cluster."""
    found = re.search(r"On Redis Cluster, add `([^`]+)`", DOCS.read_text())
    assert found, "docs/security.md does not say what a cluster adds"
    return _commands(found.group(1))


@pytest.mark.cluster
def test_the_documented_cluster_acl_is_what_a_cluster_needs(redis_cluster: ClusterProcess) -> None:
    rules, minimal, _ = documented()
    extra = documented_cluster()
    primaries = redis_cluster.primaries()
    redis_cluster.flushall()
    for port in redis_cluster.ports:
        with redis_cluster.nodes[port].client() as node:
            node.execute_command(
                "ACL", "SETUSER", "worker", "on", f">{PASSWORD}", *rules.split(), *[f"+{c}" for c in extra]
            )
            node.config_resetstat()
    try:
        url = f"redis://worker:{PASSWORD}@{HOST}:{primaries[0]}/0"
        index = SimhashIndex.from_url(url, "acl", k=3, id_buckets=64)
        assert index.cluster
        index.add_many([(f"d{i}", text) for i, text in enumerate(TEXTS)])
        assert index.add_if_new("x", TEXTS[1]) is not None and index.add_if_new("y", 12345) is None
        assert index.near(TEXTS[0]) and index.get("d0") is not None and index.count() == (5, 4)
        assert index.remove("d3") and index.verify(repair=True).ok
        assert index.drop() > 0
        index.client.close()
        used: set[str] = set()
        refused: set[str] = set()
        for port in primaries:  # a replica counts the writes it is sent, and its primary its REPLCONFs
            with redis_cluster.nodes[port].client() as node:
                for name, stats in node.info("commandstats").items():
                    command = name.removeprefix("cmdstat_")
                    # The recorder's own (its connection's handshake included), and replication's.
                    if command in NO_ACL | {"config|resetstat", "client|setinfo", "replconf"}:
                        continue
                    if stats.get("calls", 0):
                        used.add(command)
                    if stats.get("rejected_calls", 0):
                        refused.add(command)
    finally:
        for port in redis_cluster.ports:
            with redis_cluster.nodes[port].client() as node:
                node.execute_command("ACL", "DELUSER", "worker")
    assert refused <= {"client|setinfo"}, refused
    assert used <= minimal | extra, f"run, yet not documented: {used - minimal - extra}"
    assert extra <= used, f"documented for a cluster, yet never run: {extra - used}"
    assert "hlen" in used  # count() on a cluster
