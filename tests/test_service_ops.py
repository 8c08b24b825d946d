"""The index service in operation: replicas racing on one Redis, Redis down or out of memory, a graceful
stop, TLS with several workers, secrets kept out of answers and logs, and a client in another language."""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from simhash_redis import SimhashIndex
from tests.servers import HOST, ServerProcess
from tests.service_process import ServiceProcess

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

CLIENTS = Path(__file__).resolve().parent / "clients"
STORY = (
    "The harbour authority announced that the old ferry terminal will close in March, and that a new "
    "bridge across the estuary should open to traffic within three years if the budget is approved."
)


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    """A private server (these tests stop it, fill it, or race on it)."""
    with ServerProcess() as running:
        yield running


def test_racing_add_if_new_on_different_replicas_stores_exactly_one(
    server: ServerProcess, tmp_path: Path
) -> None:
    replicas = [ServiceProcess(server.url, tmp_path).start() for _ in range(3)]
    try:
        stories = 4
        callers = 12  # 4 per replica, each story's copies spread over every replica
        words = STORY.split()
        texts = [" ".join(random.Random(s).sample(words, len(words))) for s in range(stories)]
        results: list[tuple[int, dict[str, object]]] = []
        barrier = threading.Barrier(callers)

        def race(caller: int) -> None:
            replica = replicas[caller % len(replicas)]
            with httpx.Client(base_url=replica.url, timeout=60) as http:
                http.get("/healthz")  # connected before the start
                for story in range(stories):
                    barrier.wait()
                    doc = {"id": f"s{story}-c{caller}", "text": texts[story]}
                    answer = http.post("/v1/indexes/race/add_if_new", json=doc)
                    answer.raise_for_status()
                    results.append((story, answer.json()))

        threads = [threading.Thread(target=race, args=(c,)) for c in range(callers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == stories * callers
        for story in range(stories):
            answers = [a for s, a in results if s == story]
            winners = [a["id"] for a in answers if a["stored"]]
            assert len(winners) == 1, answers
            assert all(a["duplicate"]["id"] == winners[0] for a in answers if not a["stored"])  # type: ignore[index]
        assert SimhashIndex(server.client(), "race", create=False).count()[0] == stories
    finally:
        for replica in replicas:
            replica.stop()


def test_redis_down_then_back_and_no_password_anywhere(tmp_path: Path) -> None:
    password = "pa55-word-in-url"
    with ServerProcess({"requirepass": password, "appendonly": "yes"}) as server:  # kept over a restart
        url = f"redis://:{password}@{HOST}:{server.port}/0"
        with (
            ServiceProcess(url, tmp_path) as service,
            httpx.Client(base_url=service.url, timeout=120) as http,
        ):
            assert http.post("/v1/indexes/down/add", json={"id": "a", "text": STORY}).status_code == 200
            server.stop()
            answers = [
                http.post("/v1/indexes/down/near", json={"text": STORY}),
                http.post("/v1/indexes/down/add_if_new", json={"id": "b", "text": STORY}),
                http.get("/readyz"),
            ]
            for answer in answers:
                assert answer.status_code == 503, answer.text
                assert answer.json()["error"]["code"] == "redis_unavailable"
                assert password not in answer.text
            assert http.get("/healthz").status_code == 200
            server.restart()
            assert http.get("/readyz").status_code == 200
            found = http.post("/v1/indexes/down/near", json={"text": STORY}).json()
            assert [m["id"] for m in found["matches"]] == ["a"]
            assert password not in http.get("/metrics").text
        assert password not in service.log()


def test_a_stalled_redis_holds_a_request_no_longer_than_the_timeout(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A Redis that stops answering (SIGSTOP) is answered 504 redis_timeout once serve's --timeout has
    passed, not after the library's four attempts of 10 s (a worker runs its calls on its event loop:
    meanwhile it answers nothing, /healthz included)."""
    with (
        ServiceProcess(server.url, tmp_path, serve_options=["--timeout", "1"]) as service,
        httpx.Client(base_url=service.url, timeout=20) as http,  # a bound against the 40 s hang
    ):
        assert http.post("/v1/indexes/stall/add", json={"id": "a", "text": STORY}).status_code == 200
        assert server.pid is not None
        os.kill(server.pid, signal.SIGSTOP)
        try:
            for operation, body in (
                ("add", {"id": "b", "text": STORY + " Again."}),
                ("near", {"text": STORY}),
            ):
                answer = http.post(f"/v1/indexes/stall/{operation}", json=body)
                assert answer.status_code == 504, answer.text
                assert answer.json()["error"]["code"] == "redis_timeout"
            assert http.get("/healthz").status_code == 200
        finally:
            os.kill(server.pid, signal.SIGCONT)
        found = http.post("/v1/indexes/stall/near", json={"text": STORY}).json()
        assert "a" in [m["id"] for m in found["matches"]]


def test_redis_out_of_memory_is_507(tmp_path: Path) -> None:
    with (
        ServerProcess({"maxmemory": "3mb", "maxmemory-policy": "noeviction"}) as server,
        ServiceProcess(server.url, tmp_path) as service,
        httpx.Client(base_url=service.url, timeout=60) as http,
    ):
        rng = random.Random(7)
        for batch in range(400):
            docs = [{"id": f"d{batch}-{i}", "fingerprint": hex(rng.getrandbits(64))} for i in range(200)]
            answer = http.post("/v1/indexes/full/add/batch", json=docs)
            if answer.status_code != 200:
                break
        else:
            raise AssertionError("80,000 documents fit in 3 MB: raise the count")
        assert answer.status_code == 507 and answer.json()["error"]["code"] == "redis_out_of_memory"
        message = answer.json()["error"]["message"]  # what is true: no document half-written, some maybe
        assert "nothing was half-written" not in message and "may be partly stored" in message
        # reads still work, and the refused batch left nothing half-written
        assert http.get("/v1/indexes/full/stats").json()["documents"] == batch * 200
        assert http.post("/v1/indexes/full/get", json={"id": f"d{batch}-0"}).json()["fingerprint"] is None


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_sigterm_lets_a_request_in_flight_finish(server: ServerProcess, tmp_path: Path) -> None:
    service = ServiceProcess(server.url, tmp_path).start()
    rng = random.Random(11)

    sent = 0

    def lines(count: int) -> bytes:
        nonlocal sent
        sent += count
        return b"".join(
            json.dumps({"id": f"g{i}", "fingerprint": hex(rng.getrandbits(64))}).encode() + b"\n"
            for i in range(sent - count, sent)
        )

    head = (
        f"POST /v1/indexes/graceful/add/batch HTTP/1.1\r\nHost: {HOST}\r\n"
        "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    with socket.create_connection((HOST, service.port), timeout=60) as conn:
        conn.sendall(head)
        received = b""
        # Lines go in until results come out (however many the service hands the library at once):
        # then the request is in flight, half read.
        while b'"outcome"' not in received:
            assert sent < 100_000, "no result came back"
            conn.sendall(_chunk(lines(100)))
            if select.select([conn], [], [], 0.05)[0]:
                received += conn.recv(65536)
        service.terminate()
        conn.sendall(_chunk(lines(300)) + b"0\r\n\r\n")
        while not received.endswith(b"0\r\n\r\n"):
            more = conn.recv(65536)
            assert more, "the connection was closed before the response ended"
            received += more
    # Once done, uvicorn raises the signal again for its default action: "terminated" (143 in a shell).
    assert service.wait() == -signal.SIGTERM
    assert received.startswith(b"HTTP/1.1 200")
    assert received.count(b'"outcome":"added"') == sent
    assert SimhashIndex(server.client(), "graceful", create=False).count()[0] == sent


def test_tls_with_two_workers_and_their_metrics_added_up(server: ServerProcess, tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from tests.test_security import make_certificates

    certs = make_certificates(tmp_path)
    trusted = ssl.create_default_context(cafile=certs.ca)
    options = ["--workers", "2", "--tls-cert", str(certs.cert), "--tls-key", str(certs.key)]
    service = ServiceProcess(server.url, tmp_path, serve_options=options)
    service.scheme = "https"
    with service:
        total = 20
        for i in range(total):  # a connection each: the kernel spreads them over the workers
            with httpx.Client(base_url=service.url, verify=trusted) as http:
                answer = http.post("/v1/indexes/tls/add", json={"id": f"t{i}", "text": f"{STORY} {i}"})
                assert answer.status_code == 200
        route = 'route="/v1/indexes/{name}/add",status="200"'
        counted = 0.0
        deadline = time.monotonic() + 60
        # A worker adds its requests to the shared figures within a second (the one answering /metrics
        # adds its own at once): wait until they all are, then none more.
        with httpx.Client(base_url=service.url, verify=trusted) as http:
            while counted < total and time.monotonic() < deadline:
                metrics = http.get("/metrics").text
                lines = [line for line in metrics.splitlines() if "requests_total{" in line and route in line]
                counted = sum(float(line.split()[-1]) for line in lines)
                if counted < total:
                    time.sleep(0.1)  # polling the service's state
        assert counted == total
        with pytest.raises(httpx.HTTPError):  # not the certificate's CA
            httpx.get(f"{service.url}/healthz", verify=ssl.create_default_context(cafile=certs.other_ca))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: the other-language client")
def test_a_node_client_calls_add_if_new_and_near(server: ServerProcess, tmp_path: Path) -> None:
    with ServiceProcess(server.url, tmp_path) as service:
        node = shutil.which("node")
        assert node is not None
        done = subprocess.run(
            [node, str(CLIENTS / "service_client.mjs"), service.url, "from-node"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        answers = json.loads(done.stdout)
    assert answers["first"]["stored"] is True
    assert answers["copy"]["stored"] is False and answers["copy"]["duplicate"]["id"] == "node-1"
    assert [m["id"] for m in answers["near"]["matches"]] == ["node-1"]
    assert SimhashIndex(server.client(), "from-node", create=False).get("node-2") is None
