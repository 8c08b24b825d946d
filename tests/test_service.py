"""The index service over HTTP: every endpoint, its batch forms, and the error mapping, against a real
`simhash-redis serve` process on a real server, called with a real HTTP client (httpx)."""

from __future__ import annotations

import ast
import asyncio
import io
import json
import logging
import os
import random
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.codec import format_fingerprint
from simhash_redis.service.app import create_app
from simhash_redis.service.config import ServiceConfig
from simhash_redis.service.guard import Metrics
from tests.servers import HOST, ServerProcess
from tests.service_process import ServiceProcess

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parent.parent
TEXT = (
    "The city council voted on Tuesday to expand the bicycle lane network across the northern districts, "
    "after months of public hearings and a study of traffic accidents on the main avenues."
)
EDIT = TEXT.replace("Tuesday", "Wednesday")
OTHER = "A recipe for bread: flour, water, salt and yeast, kneaded and left to rise overnight in a cool room."
THIRD = "Scientists reported a new species of frog, found in mountain forests during a survey last spring."
LINES = {"content-type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def service(
    redis_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """One service for the module, on the session's server (each test uses its own index names)."""
    with ServiceProcess(redis_server.url, tmp_path_factory.mktemp("service")) as running:
        yield running


@pytest.fixture
def http(service: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=30) as client:
        yield client


def error_of(response: httpx.Response) -> str:
    """The stable error code of an error response (and the body is the documented form)."""
    body = response.json()
    assert set(body) == {"error"} and isinstance(body["error"]["message"], str), body
    return str(body["error"]["code"])


def plain(redis_server: ServerProcess, name: str) -> None:
    """Create a plain index (a write of texts would create it verified)."""
    SimhashIndex(redis_server.client(), name, verification=None)


def test_add_if_new_stores_once_and_names_the_duplicate(
    http: httpx.Client, redis_server: ServerProcess
) -> None:
    plain(redis_server, "svc-a")
    first = http.post("/v1/indexes/svc-a/add_if_new", json={"id": "one", "text": TEXT})
    assert first.status_code == 200
    index = SimhashIndex(redis_server.client(), "svc-a", create=False)
    fp = format_fingerprint(index.fingerprint(TEXT), 64)
    assert first.json() == {"id": "one", "stored": True, "fingerprint": fp}
    again = http.post("/v1/indexes/svc-a/add_if_new", json={"id": "two", "text": TEXT}).json()
    assert again == {
        "id": "two",
        "stored": False,
        "fingerprint": fp,
        "duplicate": {"id": "one", "distance": 0, "fingerprint": fp},
    }
    assert index.get("one") == index.fingerprint(TEXT) and index.get("two") is None


def test_near_get_remove_stats_and_fingerprint(http: httpx.Client, redis_server: ServerProcess) -> None:
    plain(redis_server, "svc-b")
    assert http.post("/v1/indexes/svc-b/add", json={"id": "one", "text": TEXT}).json()["outcome"] == "added"
    again = http.post("/v1/indexes/svc-b/add", json={"id": "one", "text": TEXT})
    assert again.json()["outcome"] == "unchanged"
    index = SimhashIndex(redis_server.client(), "svc-b", create=False)
    fp = index.fingerprint(TEXT)
    shown = format_fingerprint(fp, 64)
    assert http.post("/v1/indexes/svc-b/fingerprint", json={"text": TEXT}).json() == {"fingerprint": shown}
    expected = {"matches": [{"id": "one", "distance": 0, "fingerprint": shown}]}
    assert http.post("/v1/indexes/svc-b/near", json={"text": TEXT}).json() == expected
    # a fingerprint one bit away, in decimal and in hex
    near = {"matches": [{"id": "one", "distance": 1, "fingerprint": shown}]}
    assert http.post("/v1/indexes/svc-b/near", json={"fingerprint": str(fp ^ 1)}).json() == near
    assert http.post("/v1/indexes/svc-b/near", json={"fingerprint": hex(fp ^ 1), "k": 0}).json() == {
        "matches": []
    }
    assert http.post("/v1/indexes/svc-b/get", json={"id": "one"}).json() == {
        "id": "one",
        "fingerprint": shown,
    }
    stats = http.get("/v1/indexes/svc-b/stats").json()
    assert stats["documents"] == 1 and stats["k"] == 3 and stats["f"] == 64 and stats["verified"] is False
    assert http.post("/v1/indexes/svc-b/remove", json={"id": "one"}).json() == {"id": "one", "removed": True}
    assert http.post("/v1/indexes/svc-b/remove", json={"id": "one"}).json() == {"id": "one", "removed": False}
    assert http.post("/v1/indexes/svc-b/get", json={"id": "one"}).json() == {"id": "one", "fingerprint": None}
    assert index.count() == (0, 0)


def test_json_array_batches(http: httpx.Client, redis_server: ServerProcess) -> None:
    plain(redis_server, "svc-c")
    docs = [{"id": "a", "text": TEXT}, {"id": "b", "text": TEXT + " "}, {"id": "c", "text": OTHER}]
    added = http.post("/v1/indexes/svc-c/add_if_new/batch", json=docs).json()
    # b is a near-duplicate of a, earlier in the same batch
    assert [r["stored"] for r in added] == [True, False, True]
    assert added[1]["duplicate"]["id"] == "a"
    found = http.post("/v1/indexes/svc-c/near/batch?k=3", json=[{"text": TEXT}, {"text": OTHER}]).json()
    assert [[m["id"] for m in r["matches"]] for r in found] == [["a"], ["c"]]
    outcomes = http.post("/v1/indexes/svc-c/add/batch", json=[{"id": "d", "fingerprint": "0x1"}]).json()
    assert outcomes == [{"id": "d", "outcome": "added", "fingerprint": "0x0000000000000001"}]
    got = http.post("/v1/indexes/svc-c/get/batch", json=[{"id": "d"}, {"id": "zz"}]).json()
    assert got == [{"id": "d", "fingerprint": "0x0000000000000001"}, {"id": "zz", "fingerprint": None}]
    fps = http.post("/v1/indexes/svc-c/fingerprint/batch", json=[{"text": TEXT}, {"text": OTHER}]).json()
    assert [r["fingerprint"] for r in fps] == [added[0]["fingerprint"], added[2]["fingerprint"]]
    removed = http.post("/v1/indexes/svc-c/remove/batch", json=[{"id": "a"}, {"id": "b"}]).json()
    assert removed == [{"id": "a", "removed": True}, {"id": "b", "removed": False}]
    assert http.post("/v1/indexes/svc-c/add/batch", json=[]).json() == []
    assert SimhashIndex(redis_server.client(), "svc-c", create=False).count()[0] == 2
    # As docs/service.md says: digits only are decimal, bare hex has a letter, a negative is two's complement.
    given = [{"id": f"n{i}", "fingerprint": fp} for i, fp in enumerate(["10", "ff", "-1"])]
    written = [r["fingerprint"] for r in http.post("/v1/indexes/svc-c/add/batch", json=given).json()]
    assert written == ["0x000000000000000a", "0x00000000000000ff", "0xffffffffffffffff"]


def test_json_lines_stream_in_and_out(http: httpx.Client, redis_server: ServerProcess) -> None:
    total = 2_300  # over two of the service's parts of 1,000
    rng = random.Random(5)
    fps = [rng.getrandbits(64) for _ in range(total)]  # far apart: none is within k of another
    lines = [json.dumps({"id": f"doc-{i}", "fingerprint": hex(fp)}) for i, fp in enumerate(fps)]
    lines.insert(700, "{not json")  # line 704, once the three below are inserted before it
    lines.insert(10, "")  # blank lines are skipped but counted
    lines.insert(20, json.dumps({"id": "", "fingerprint": "0x5"}))  # line 21: an id the library refuses
    lines.insert(30, json.dumps({"id": "x", "fingerprint": "0x5", "extra": 1}))  # line 31: unknown field
    body = ("\n".join(lines) + "\n").encode()

    def chunks() -> Iterator[bytes]:  # streamed in pieces that cut lines in two
        for start in range(0, len(body), 4_093):
            yield body[start : start + 4_093]

    with http.stream("POST", "/v1/indexes/svc-d/add_if_new/batch", content=chunks(), headers=LINES) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        out = [json.loads(line) for line in r.iter_lines() if line]
    errors = [o["error"] for o in out if "error" in o]
    assert [(e["line"], e["code"]) for e in errors] == [
        (21, "invalid_argument"),
        (31, "invalid_request"),
        (704, "malformed_json"),
    ]
    results = [o for o in out if "error" not in o]
    assert [r["id"] for r in results] == [f"doc-{i}" for i in range(total)]
    assert all(r["stored"] for r in results)
    assert SimhashIndex(redis_server.client(), "svc-d", create=False).count()[0] == total
    # the same stream again: every document is found stored (its own entry), nothing changes
    again = http.post("/v1/indexes/svc-d/add_if_new/batch", content=body, headers=LINES)
    repeated = [json.loads(line) for line in again.text.splitlines()]
    assert sum(1 for o in repeated if "error" not in o and not o["stored"]) == total
    query = json.dumps({"fingerprint": hex(fps[0])}).encode() + b"\n"
    near = http.post("/v1/indexes/svc-d/near/batch?k=0", content=query, headers=LINES)
    assert json.loads(near.text)["matches"][0]["id"] == "doc-0"


def test_an_empty_text_is_refused_as_the_library_and_the_cli_refuse_it(
    http: httpx.Client, redis_server: ServerProcess
) -> None:
    # It was stored with the fingerprint 0, and every later empty page was its near-duplicate.
    refused = http.post("/v1/indexes/svc-empty/add", json={"id": "e", "text": ""})
    assert refused.status_code == 400 and error_of(refused) == "invalid_argument", refused.text
    assert not SimhashIndex.exists(redis_server.client(), "svc-empty")  # no index made for it
    http.post("/v1/indexes/svc-empty/add", json={"id": "s", "text": OTHER}).raise_for_status()
    for path in ("add", "add_if_new", "near", "fingerprint"):
        for text in ("", " \n\t"):
            doc = {"text": text} if path in ("near", "fingerprint") else {"id": "e", "text": text}
            refused = http.post(f"/v1/indexes/svc-empty/{path}", json=doc)
            assert refused.status_code == 400 and error_of(refused) == "invalid_argument", refused.text
            assert "empty or only white space" in refused.json()["error"]["message"]
    batch = [{"id": "a", "text": TEXT}, {"id": "e", "text": ""}]
    refused = http.post("/v1/indexes/svc-empty/add/batch", json=batch)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("document 1: the text is empty or only white space")
    assert SimhashIndex(redis_server.client(), "svc-empty", create=False).count()[0] == 1  # nothing of it
    # A stream answers the empty text's line with its error and stores the others: nothing is lost.
    body = "".join(json.dumps(doc) + "\n" for doc in [*batch, {"id": "c", "text": THIRD}]).encode()
    out = http.post("/v1/indexes/svc-empty/add_if_new/batch", content=body, headers=LINES).text.splitlines()
    answers = [json.loads(line) for line in out]
    assert [a.get("id", a.get("error", {}).get("line")) for a in answers] == ["a", 2, "c"], answers
    assert SimhashIndex(redis_server.client(), "svc-empty", create=False).count()[0] == 3


def test_verified_index(http: httpx.Client, redis_server: ServerProcess) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_server.client(), "svc-v"))
    first = http.post("/v1/indexes/svc-v/add_if_new", json={"id": "one", "text": TEXT}).json()
    assert first["stored"] is True
    dup = http.post("/v1/indexes/svc-v/add_if_new", json={"id": "two", "text": EDIT}).json()
    assert dup["stored"] is False and dup["duplicate"]["id"] == "one"
    assert 0.8 <= dup["duplicate"]["jaccard"] < 1
    found = http.post("/v1/indexes/svc-v/near", json={"text": EDIT}).json()["matches"]
    assert [m["id"] for m in found] == ["one"] and found[0]["jaccard"] == dup["duplicate"]["jaccard"]
    none = http.post("/v1/indexes/svc-v/near", json={"text": EDIT, "threshold": 1.0}).json()
    assert none == {"matches": []}
    batch = http.post("/v1/indexes/svc-v/near/batch?threshold=0.5", json=[{"text": EDIT}, {"text": OTHER}])
    assert [[m["id"] for m in r["matches"]] for r in batch.json()] == [["one"], []]
    refused = http.post("/v1/indexes/svc-v/near", json={"fingerprint": "0x1"})
    assert refused.status_code == 400 and error_of(refused) == "invalid_argument"
    assert "verified" in refused.json()["error"]["message"]
    refused = http.post("/v1/indexes/svc-v/add", json={"id": "x", "fingerprint": "0x1"})
    assert refused.status_code == 400 and error_of(refused) == "invalid_argument"
    stats = http.get("/v1/indexes/svc-v/stats").json()
    assert stats["verified"] is True and stats["threshold"] == 0.8 and stats["documents"] == 1
    assert verified.sketch_of("one") is not None


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/indexes/svc-e/near", b"{not json", 400, "malformed_json"),
        ("POST", "/v1/indexes/svc-e/near", b"", 400, "malformed_json"),
        ("POST", "/v1/indexes/svc-e/add", b'{"id": 3, "text": "x"}', 422, "invalid_request"),
        ("POST", "/v1/indexes/svc-e/add", b'{"text": "x"}', 422, "invalid_request"),
        ("POST", "/v1/indexes/svc-e/near", b'{"text": "x", "kk": 2}', 422, "invalid_request"),
        ("POST", "/v1/indexes/svc-e/add/batch", b'{"id": "a", "text": "x"}', 422, "invalid_request"),
        ("POST", "/v1/indexes/svc-e/add", b'{"id": "a"}', 400, "invalid_argument"),
        (
            "POST",
            "/v1/indexes/svc-e/add",
            b'{"id": "a", "text": "x", "fingerprint": "0x1"}',
            400,
            "invalid_argument",
        ),
        ("POST", "/v1/indexes/svc-e/add", b'{"id": "", "text": "x"}', 400, "invalid_argument"),
        ("POST", "/v1/indexes/svc-e/add", b'{"id": "a", "fingerprint": "0xzz"}', 400, "invalid_argument"),
        (
            "POST",
            "/v1/indexes/svc-e/add",
            b'{"id": "a", "fingerprint": "0x1ffffffffffffffff"}',
            400,
            "invalid_argument",
        ),
        ("POST", "/v1/indexes/svc-e/near", b'{"text": "x", "k": 9}', 400, "invalid_argument"),
        ("POST", "/v1/indexes/svc-e/near", b'{"text": "x", "threshold": 0.5}', 400, "invalid_argument"),
        ("POST", "/v1/indexes/svc-e/near/batch?k=two", b"[]", 400, "invalid_argument"),
        ("POST", "/v1/indexes/no-such-index/near", b'{"text": "x"}', 404, "index_not_found"),
        ("GET", "/v1/indexes/no-such-index/stats", None, 404, "index_not_found"),
        ("POST", "/v1/indexes/bad%20name%0A/near", b'{"text": "x"}', 400, "invalid_argument"),
        ("POST", "/v1/indexes/svc-e/frobnicate", b"{}", 404, "not_found"),
        ("GET", "/v2/anything", None, 404, "not_found"),
        ("GET", "/v1/indexes/svc-e/near", None, 405, "method_not_allowed"),
    ],
)
def test_bad_requests_get_their_code_never_500(
    http: httpx.Client, method: str, path: str, body: bytes | None, status: int, code: str
) -> None:
    # Made from a precomputed fingerprint: plain (its near refuses a threshold).
    http.post("/v1/indexes/svc-e/add", json={"id": "seed", "fingerprint": "0x1"}).raise_for_status()
    response = http.request(method, path, content=body)
    assert (response.status_code, error_of(response)) == (status, code), response.text


def test_access_log_and_metrics(http: httpx.Client, service: ServiceProcess) -> None:
    http.post("/v1/indexes/svc-f/add_if_new", json={"id": "a", "text": TEXT}).raise_for_status()
    assert http.post("/v1/indexes/svc-f/near", content=b"{").status_code == 400
    metrics = http.get("/metrics").text
    assert (
        'simhash_redis_requests_total{method="POST",route="/v1/indexes/{name}/add_if_new",status="200"}'
        in metrics
    )
    assert 'simhash_redis_errors_total{code="malformed_json"}' in metrics
    assert "simhash_redis_request_duration_seconds_bucket" in metrics
    trips = [
        line for line in metrics.splitlines() if line.startswith("simhash_redis_redis_round_trips_total")
    ]
    assert trips and float(trips[0].split()[-1]) > 0
    records = [json.loads(line) for line in service.log().splitlines() if line.startswith("{")]
    mine = [r for r in records if r["path"] == "/v1/indexes/svc-f/near"]
    assert mine and mine[-1]["status"] == 400 and mine[-1]["error"] == "malformed_json"
    assert mine[-1]["route"] == "/v1/indexes/{name}/near" and mine[-1]["ms"] >= 0


def test_a_keep_alive_connection_gets_each_answer_in_one_piece(
    http: httpx.Client, service: ServiceProcess
) -> None:
    http.post("/v1/indexes/svc-one/add", json={"id": "a", "text": TEXT}).raise_for_status()
    body = json.dumps({"text": TEXT}).encode()
    head = f"POST /v1/indexes/svc-one/near HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {len(body)}\r\n\r\n"
    with socket.create_connection((HOST, service.port), timeout=30) as conn:
        for _ in range(3):
            conn.sendall(head.encode() + body)
            # The head and the body were written together: whatever one recv returns holds both.
            status, _, rest = conn.recv(65536).partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", status)
            assert status.startswith(b"HTTP/1.1 200") and length is not None
            assert len(rest) == int(length.group(1))
            assert json.loads(rest)["matches"][0]["id"] == "a"


def test_openapi_document(http: httpx.Client) -> None:
    doc = http.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    for op in ("fingerprint", "near", "add", "add_if_new", "remove", "get"):
        assert f"/v1/indexes/{{name}}/{op}" in doc["paths"]
        assert f"/v1/indexes/{{name}}/{op}/batch" in doc["paths"]
    assert "/v1/indexes/{name}/stats" in doc["paths"]
    assert {"AddIfNewResult", "ErrorBody", "Match", "Query"} <= set(doc["components"]["schemas"])


def test_probes(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json() == {"status": "ready"}


def test_a_first_part_over_the_limit_is_refused_whether_more_follows_or_not() -> None:
    # A chunked body may reach the app as one message over the limit that still says more follows (its
    # last chunk, empty, comes after): the limit holds there too (it was checked only on later parts).
    import asyncio

    from simhash_redis.service.problems import ServiceError
    from simhash_redis.service.streams import Call

    def refused(messages: list[dict[str, object]]) -> bool:
        async def receive() -> dict[str, object]:
            return messages.pop(0)

        async def send(message: object) -> None:
            raise AssertionError("nothing is sent")

        try:
            asyncio.run(Call({"type": "http", "headers": []}, receive, send).body(2000))  # type: ignore[arg-type]
        except ServiceError as exc:
            return exc.status == 413
        return False

    over = {"type": "http.request", "body": b"x" * 3000}
    assert refused([{**over, "more_body": True}, {"type": "http.request", "body": b"", "more_body": False}])
    assert refused([{**over, "more_body": False}])
    small = {"type": "http.request", "body": b"x" * 1500, "more_body": True}
    assert refused([small, small, {"type": "http.request", "body": b"", "more_body": False}])


def test_token_limits_and_no_secret_in_answers_or_logs(redis_server: ServerProcess, tmp_path: Path) -> None:
    token = "s3cret-token-value"
    (tmp_path / "token").write_text(token + "\n")
    options = ["--token-file", str(tmp_path / "token"), "--max-body", "2000", "--no-create"]
    SimhashIndex(redis_server.client(), "svc-g")  # exists: writes to it are allowed
    with (
        ServiceProcess(redis_server.url, tmp_path, serve_options=options) as service,
        httpx.Client(base_url=service.url) as http,
    ):
        doc = {"id": "a", "text": TEXT}
        refused = http.post("/v1/indexes/svc-g/add", json=doc)
        assert refused.status_code == 401 and error_of(refused) == "unauthorized"
        assert refused.headers["www-authenticate"] == "Bearer"
        wrong = http.post("/v1/indexes/svc-g/add", json=doc, headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert http.get("/metrics").status_code == 401
        assert http.get("/healthz").status_code == 200 and http.get("/readyz").status_code == 200
        auth = {"authorization": f"Bearer {token}"}
        assert http.post("/v1/indexes/svc-g/add", json=doc, headers=auth).status_code == 200
        new = http.post("/v1/indexes/svc-new/add", json=doc, headers=auth)  # --no-create
        assert new.status_code == 404 and error_of(new) == "index_not_found"
        assert "creates it" not in new.json()["error"]["message"]  # it does not, here
        assert "--no-create" in new.json()["error"]["message"]
        big = {"id": "b", "text": "word " * 1000}
        too_large = http.post("/v1/indexes/svc-g/add", json=big, headers=auth)
        assert too_large.status_code == 413 and error_of(too_large) == "body_too_large"

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"id": "c", "text": "'
            yield b"x" * 3000
            yield b'"}'

        streamed = http.post("/v1/indexes/svc-g/add", content=chunked(), headers=auth)
        assert streamed.status_code == 413 and error_of(streamed) == "body_too_large"
        long_line = b'{"id": "d", "text": "' + b"y" * 3000 + b'"}\n'
        lines = http.post("/v1/indexes/svc-g/add/batch", content=long_line, headers={**auth, **LINES})
        assert [json.loads(x)["error"]["code"] for x in lines.text.splitlines()] == ["body_too_large"]
    assert token not in service.log()


def test_server_packages_are_imported_only_by_the_service() -> None:
    server_packages = {"starlette", "msgspec", "uvicorn", "prometheus_client", "httpx"}
    found = []
    for path in [*(ROOT / "simhash_redis").rglob("*.py"), *(ROOT / "cli").rglob("*.py")]:
        if "service" in path.relative_to(ROOT).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in server_packages]
    assert found == []


def test_metrics_are_tallied_then_added_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import generate_latest

    from simhash_redis.service import guard as metrics_module

    monkeypatch.setattr(metrics_module, "FLUSH_AFTER", 0.0)
    route = "/test/tallied"
    mine = 'route="/test/tallied"'

    async def requests() -> str:
        found = Metrics.get()
        for seconds in (0.0003, 0.0005, 2.0):  # a bound is its own bucket's (le: less or equal)
            found.observe(route, "POST", 200, seconds, None)
        found.observe(route, "POST", 400, 0.0001, "malformed_json")
        before = generate_latest().decode()
        for _ in range(1000):  # until the flush the first request scheduled has run
            if mine in generate_latest().decode():
                break
            await asyncio.sleep(0)
        return before

    before = asyncio.run(requests())
    assert mine not in before  # tallied, not yet added
    lines = [line for line in generate_latest().decode().splitlines() if mine in line]
    value = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines}
    assert value[f'simhash_redis_requests_total{{method="POST",{mine},status="200"}}'] == 3
    assert value[f'simhash_redis_requests_total{{method="POST",{mine},status="400"}}'] == 1

    def bucket(le: str) -> float:
        return value[f'simhash_redis_request_duration_seconds_bucket{{le="{le}",{mine}}}']

    assert (bucket("0.0001"), bucket("0.00025"), bucket("0.0005"), bucket("1.0")) == (1, 1, 3, 3)
    assert bucket("2.5") == bucket("+Inf") == 4
    assert value[f"simhash_redis_request_duration_seconds_count{{{mine}}}"] == 4
    assert value[f"simhash_redis_request_duration_seconds_sum{{{mine}}}"] == pytest.approx(2.0009)


async def _get(app: Any, path: str) -> list[dict[str, object]]:
    """What an ASGI app sends for a GET of path (called in-process)."""
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8080),
    }
    await app(scope, receive, send)
    return sent


def test_access_log_goes_through_the_applications_own_handlers() -> None:
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    access = logging.getLogger("simhash_redis.service.access")
    keep, level = Keep(), access.level
    access.addHandler(keep)
    access.setLevel(logging.INFO)
    try:
        app = create_app(ServiceConfig(redis_url="redis://127.0.0.1:1", access_log=True))
        sent = asyncio.run(_get(app, "/healthz"))
    finally:
        access.removeHandler(keep)
        access.setLevel(level)
    assert sent[0]["status"] == 200
    records = [json.loads(line) for line in lines]
    assert [(r["path"], r["route"], r["status"], r["client"]) for r in records] == [
        ("/healthz", "/healthz", 200, "127.0.0.1:5555")
    ]
    assert records[0]["bytes"] == len(b'{"status":"ok"}')
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", str(records[0]["time"]))


def test_a_closed_stderr_never_fails_a_request() -> None:
    access = logging.getLogger("simhash_redis.service.access")
    before = access.handlers[:]
    for handler in before:
        access.removeHandler(handler)
    try:
        app = create_app(ServiceConfig(redis_url="redis://127.0.0.1:1", access_log=True))
        (own,) = access.handlers  # the service's own, on stderr
        closed = open(os.devnull, "w")  # noqa: SIM115 - closed at once: a stderr that is gone
        closed.close()
        assert isinstance(own, logging.StreamHandler)
        own.stream = closed
        sent = asyncio.run(_get(app, "/healthz"))
        assert sent[0]["status"] == 200 and sent[-1]["body"] == b'{"status":"ok"}'
    finally:
        for handler in access.handlers[:]:
            access.removeHandler(handler)
        for handler in before:
            access.addHandler(handler)


def test_the_access_log_honours_filters_and_levels_set_on_it() -> None:
    """The service's own stderr handler is written to directly only as made: a filter on the logger or
    the handler (dropping the probes' lines, the usual one), or a handler level above INFO, is honoured."""
    access = logging.getLogger("simhash_redis.service.access")
    before = access.handlers[:]
    for handler in before:
        access.removeHandler(handler)

    class NoProbes(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "/healthz" not in record.getMessage()

    try:
        app = create_app(ServiceConfig(redis_url="redis://127.0.0.1:1", access_log=True))
        (own,) = access.handlers
        assert isinstance(own, logging.StreamHandler)

        def logged() -> list[str]:
            own.stream = io.StringIO()
            for path in ("/healthz", "/openapi.json"):
                asyncio.run(_get(app, path))
            return [json.loads(line)["path"] for line in own.stream.getvalue().splitlines()]

        assert logged() == ["/healthz", "/openapi.json"]
        probes = NoProbes()
        for where in (access, own):
            where.addFilter(probes)
            assert logged() == ["/openapi.json"], where
            where.removeFilter(probes)
        own.setLevel(logging.WARNING)
        assert logged() == []
    finally:
        for handler in access.handlers[:]:
            access.removeHandler(handler)
        for handler in before:
            access.addHandler(handler)
