"""What the index service refuses, and how: the caller's mistakes are 4xx answers that leave nothing
behind (no index made, no other index reached through an encoded '/'), a JSON Lines stream goes on past a
bad line and holds at most about --max-body bytes of pending lines, refused parameters make no coalescer,
and the service's own faults (a malformed Redis URL, refused credentials) are told as such. Against real
`simhash-redis serve` processes (or uvicorn in a thread, where the worker's state is looked at) on a real
server, called with a real HTTP client."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.errors import IndexNotFound, InvalidArgument
from tests.servers import HOST, ServerProcess
from tests.service_process import ServiceProcess, in_thread, until

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

TEXT = "storm closes coastal roads as heavy rain hits the region on monday, and schools stay shut"
LINES = {"content-type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def service(
    redis_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """One service for the module, with a small --max-body (each test uses its own index names)."""
    log_dir = tmp_path_factory.mktemp("service")
    with ServiceProcess(redis_server.url, log_dir, serve_options=["--max-body", "3000"]) as running:
        yield running


@pytest.fixture
def http(service: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=30) as client:
        yield client


def code_of(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def exists(server: ServerProcess, name: str) -> bool:
    try:
        SimhashIndex(server.client(), name, create=False)
    except IndexNotFound:
        return False
    return True


def test_bytes_that_are_not_utf8_in_a_json_string_are_malformed_json_and_a_stream_goes_on(
    http: httpx.Client, redis_server: ServerProcess
) -> None:
    bad = b'{"text":"\xff\xfe"}'
    for path, body in (("/v1/indexes/u8/near", bad), ("/v1/indexes/u8/near/batch", b"[" + bad + b"]")):
        answer = http.post(path, content=body)
        assert code_of(answer) == (400, "malformed_json"), answer.text
        assert "UTF-8" in answer.json()["error"]["message"]
    lines = b'{"id":"u1","text":"one"}\n{"id":"u2","text":"\xff"}\n{"id":"u3","text":"three"}\n'
    answer = http.post("/v1/indexes/u8/add/batch", content=lines, headers=LINES)
    out = [json.loads(line) for line in answer.text.splitlines()]
    assert [o.get("id") for o in out] == ["u1", None, "u3"], out
    assert (out[1]["error"]["code"], out[1]["error"]["line"]) == ("malformed_json", 2)
    stored = SimhashIndex(redis_server.client(), "u8", create=False)
    assert stored.get_many(["u1", "u2", "u3"])[0] is not None and stored.count()[0] == 2


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_json_lines_stream_runs_its_pending_lines_once_they_hold_max_body_bytes(
    service: ServiceProcess, redis_server: ServerProcess
) -> None:
    # --max-body 3000, batch 1000: two lines of 2,000 bytes are run (and answered) before more come,
    # rather than held until 1,000 of them (up to 1,000 x --max-body bytes) are.
    SimhashIndex(redis_server.client(), "held", verification=None)
    line = json.dumps({"text": "word " * 398}).encode() + b"\n"
    assert 1900 < len(line) < 3000
    head = (
        f"POST /v1/indexes/held/fingerprint/batch HTTP/1.1\r\nHost: {HOST}\r\n"
        "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    with socket.create_connection((HOST, service.port), timeout=20) as conn:
        conn.sendall(head + _chunk(line * 2))  # the body stays open
        received = b""
        while received.count(b'"fingerprint"') < 2:
            more = conn.recv(65536)  # times out (a failure) if nothing is answered before the body ends
            assert more
            received += more
        assert received.startswith(b"HTTP/1.1 200")
        conn.sendall(_chunk(line) + b"0\r\n\r\n")
        while received.count(b'"fingerprint"') < 3:
            more = conn.recv(65536)
            assert more
            received += more


def test_a_refused_write_creates_no_index_and_an_empty_one_creates_none(
    http: httpx.Client, redis_server: ServerProcess
) -> None:
    refusals: list[tuple[str, object]] = [
        ("/v1/indexes/nx-1/add", {"id": "", "text": "x"}),
        ("/v1/indexes/nx-2/add", {"id": "a", "fingerprint": "0xZZ"}),
        ("/v1/indexes/nx-3/add_if_new/batch", [{"id": "a", "text": TEXT}, {"id": "", "text": "x"}]),
    ]
    for path, body in refusals:
        answer = http.post(path, json=body)
        assert code_of(answer) == (400, "invalid_argument"), answer.text
    assert answer.json()["error"]["message"].startswith("document 1: ")  # a JSON array names it
    assert http.post("/v1/indexes/nx-4/add/batch", json=[]).json() == []
    lines = http.post("/v1/indexes/nx-5/add/batch", content=b'{"id": "", "text": "x"}\n', headers=LINES)
    assert json.loads(lines.text)["error"]["line"] == 1
    for name in ("nx-1", "nx-2", "nx-3", "nx-4", "nx-5"):
        assert not exists(redis_server, name), name
    # The same index is then made in the mode its first accepted write chooses: plain from fingerprints.
    assert http.post("/v1/indexes/nx-2/add", json={"id": "a", "fingerprint": "0x1"}).status_code == 200
    assert SimhashIndex(redis_server.client(), "nx-2", create=False).config.verification is None
    # In an existing index, too, a refused batch names its document.
    refused = http.post("/v1/indexes/nx-2/add/batch", json=[{"id": "b", "fingerprint": "0x2"}, {"id": "c"}])
    assert refused.json()["error"]["message"].startswith("document 1: "), refused.text


def test_an_encoded_slash_stays_in_the_index_name(http: httpx.Client, redis_server: ServerProcess) -> None:
    http.post("/v1/indexes/sl/add", json={"id": "seed", "fingerprint": "0x1"}).raise_for_status()
    rerouted = http.post("/v1/indexes/sl%2Fadd/batch", json=[{"id": "x", "fingerprint": "0x2"}])
    assert code_of(rerouted) == (404, "not_found"), rerouted.text
    named = http.post("/v1/indexes/sl%2Fx/add", json={"id": "x", "fingerprint": "0x2"})
    assert code_of(named) == (400, "invalid_argument"), named.text
    assert code_of(http.get("/v1/indexes/sl%2Fstats")) == (404, "not_found")
    assert SimhashIndex(redis_server.client(), "sl", create=False).get("x") is None
    # Counted as the service routed it, not as the operation the decoded path names.
    assert 'route="/v1/other",status="404"' in http.get("/metrics").text


@pytest.mark.parametrize(
    "path",
    [
        "/v1/indexes/qp/near/batch?kk=2",
        "/v1/indexes/qp/near/batch?threshhold=0.5",
        "/v1/indexes/qp/near/batch?k=",
        "/v1/indexes/qp/get/batch?k=1",
        "/v1/indexes/qp/near/batch?k=1&k=2",
    ],
)
def test_a_misspelt_or_misplaced_query_parameter_is_refused(http: httpx.Client, path: str) -> None:
    http.post("/v1/indexes/qp/add", json={"id": "seed", "fingerprint": "0x1"}).raise_for_status()
    answer = http.post(path, json=[{"fingerprint": "0x1"}] if "near" in path else [{"id": "seed"}])
    assert code_of(answer) == (400, "invalid_argument"), answer.text
    single = http.post("/v1/indexes/qp/near?k=0", json={"fingerprint": "0x3"})
    assert code_of(single) == (400, "invalid_argument") and "body" in single.json()["error"]["message"]
    assert http.post("/v1/indexes/qp/near/batch?k=0", json=[{"fingerprint": "0x1"}]).status_code == 200
    assert code_of(http.get("/v1/indexes/qp/stats?x=1")) == (400, "invalid_argument")


def test_post_to_stats_is_405(http: httpx.Client) -> None:
    http.post("/v1/indexes/st/add", json={"id": "seed", "fingerprint": "0x1"}).raise_for_status()
    assert code_of(http.post("/v1/indexes/st/stats", json={})) == (405, "method_not_allowed")


def test_refused_parameters_make_no_coalescer_and_a_coalescer_goes_once_idle(redis_url: str) -> None:
    from simhash_redis.service import runner

    VerifiedIndex(SimhashIndex.from_url(redis_url, "co")).add("a", TEXT)
    with (
        in_thread(redis_url) as (app, port),
        socket.create_connection((HOST, port), timeout=30) as held,
        httpx.Client(base_url=f"http://{HOST}:{port}", timeout=30) as http,
    ):
        # A request whose body has not come yet: every other one is read while it is unanswered,
        # so goes through a coalescer.
        held.sendall(
            f"POST /v1/indexes/co/near HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 99\r\n\r\n".encode()
        )
        until(lambda: runner._unanswered[0] == 1)
        for i in range(40):
            refused = http.post("/v1/indexes/co/near", json={"text": TEXT, "k": 10**6 + i})
            assert code_of(refused) == (400, "invalid_argument")
            found = http.post("/v1/indexes/co/near", json={"text": TEXT, "threshold": 0.5 + i / 1000})
            assert found.json()["matches"][0]["id"] == "a"
        service = app.operation.__self__  # type: ignore[attr-defined]
        assert service.registry.get("co").coalescers == {}


@pytest.mark.parametrize(
    "url", ["redis://:s3cr3t-pw@127.0.0.1:99999/0", "redis://:s3cr3t-pw@127.0.0.1:abc/0"]
)
def test_serve_refuses_a_malformed_redis_url_at_start(url: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited") as failed:
        ServiceProcess(url, tmp_path).start()
    assert "not a valid Redis URL" in str(failed.value) and "s3cr3t-pw" not in str(failed.value)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("ssl_cert_reqs=bogus", "Invalid SSL Certificate Requirements Flag: bogus"),
        ("protocol=9", "protocol must"),
    ],
)
def test_a_url_option_redis_py_checks_only_when_connecting_is_refused_at_start(
    query: str, reason: str
) -> None:
    # ?protocol=9 stopped every request with 503 redis_unavailable, blaming the server.
    from simhash_redis.service.config import check_url

    with pytest.raises(InvalidArgument, match=f"is not a valid Redis URL: {reason}") as failed:
        check_url(f"rediss://:s3cr3t-pw@127.0.0.1:6379/0?{query}")
    assert "s3cr3t-pw" not in str(failed.value)


def test_a_worker_refuses_a_malformed_redis_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from simhash_redis.service.app import create_app
    from simhash_redis.service.config import ServiceConfig

    monkeypatch.setenv("SIMHASH_REDIS_URL", "redis://:s3cr3t-pw@127.0.0.1:99999/0")
    app = create_app(ServiceConfig(access_log=False))

    async def start() -> None:
        async with app.app.router.lifespan_context(app.app):
            raise AssertionError("the worker started")

    with pytest.raises(InvalidArgument, match="not a valid Redis URL") as failed:
        asyncio.run(start())
    assert "s3cr3t-pw" not in str(failed.value)


def test_refused_credentials_are_not_told_to_send_the_request_again(tmp_path: Path) -> None:
    with ServerProcess({"requirepass": "right-one"}) as server:
        url = f"redis://:wrong-one@{HOST}:{server.port}/0"
        with ServiceProcess(url, tmp_path) as service, httpx.Client(base_url=service.url, timeout=60) as http:
            answer = http.post("/v1/indexes/auth/near", json={"text": TEXT})
    assert code_of(answer) == (503, "redis_auth_failed"), answer.text
    assert "send the same request again" not in answer.text and "wrong-one" not in answer.text


def test_a_json_lines_write_to_an_unreachable_redis_is_answered_503() -> None:
    # A write stream opened its index only inside the stream: 200, then a lone error line, which a load
    # balancer or a client's retry takes for success; a read stream was 503 already.
    with socket.socket() as closed:
        closed.bind((HOST, 0))
        url = f"redis://{HOST}:{closed.getsockname()[1]}/0"
        with in_thread(url) as (_, port), httpx.Client(base_url=f"http://{HOST}:{port}", timeout=60) as http:
            for op in ("add", "add_if_new", "near"):
                line = json.dumps({"id": "a", "text": TEXT} if op != "near" else {"text": TEXT})
                answer = http.post(f"/v1/indexes/down/{op}/batch", content=line + "\n", headers=LINES)
                assert code_of(answer) == (503, "redis_unavailable"), (op, answer.text)
