"""The index service's connections, against a real `simhash-redis serve` over raw sockets: a body that
stalls is answered 408 (its connection closed, a JSON Lines stream ended by an error line), a stop with
``--grace 0`` cuts a request in flight at once, and a HEAD answered ahead of a pipelined request is sent."""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import HOST, ServerProcess
from tests.service_process import ServiceProcess

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

# Far longer than the service's --timeout below: a socket's safety net, never what a test waits for.
NET = 30.0


@pytest.fixture(scope="module")
def service(
    redis_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """A service whose requests (and their bodies' parts) may wait 0.5 s."""
    log_dir = tmp_path_factory.mktemp("service")
    with ServiceProcess(redis_server.url, log_dir, serve_options=["--timeout", "0.5"]) as running:
        yield running


def read_to_end(conn: socket.socket) -> bytes:
    """What the service sends until it closes the connection."""
    received = b""
    while more := conn.recv(65536):
        received += more
    return received


def post(path: str, headers: str = "") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\n{headers}\r\n".encode()


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        ("/v1/indexes/svc-stall/near", b""),  # headers only: the first wait for the body
        ("/v1/indexes/svc-stall/near", b'{"text":'),  # part of it: the wait for the next part
        ("/v1/indexes/svc-stall/near/batch", b'[{"text"'),
    ],
)
def test_a_stalled_body_is_answered_408_and_its_connection_closed(
    service: ServiceProcess, path: str, sent: bytes
) -> None:
    with socket.create_connection((HOST, service.port), timeout=NET) as conn:
        conn.sendall(post(path, "Content-Type: application/json\r\nContent-Length: 100\r\n") + sent)
        head, _, body = read_to_end(conn).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), head
    assert b"connection: close" in head.lower()
    assert json.loads(body)["error"]["code"] == "request_timeout"


def test_a_stalled_json_lines_stream_answers_its_lines_then_ends_with_the_stall(
    service: ServiceProcess,
) -> None:
    lines = b'{"id":"a","fingerprint":"0x1"}\n{"id":"b","fingerprint":"0x2"}\n{"id":"c","fin'
    headers = "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n"
    with socket.create_connection((HOST, service.port), timeout=NET) as conn:
        conn.sendall(post("/v1/indexes/svc-stall-lines/add/batch", headers))
        conn.sendall(f"{len(lines):x}\r\n".encode() + lines + b"\r\n")
        received = b""
        while not received.endswith(b"0\r\n\r\n"):  # the stream's end
            more = conn.recv(65536)
            assert more, f"closed before the stream ended: {received!r}"
            received += more
    head, _, chunked = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    answer = [json.loads(line) for line in chunked.splitlines() if line.startswith(b"{")]
    assert [item.get("id") for item in answer[:2]] == ["a", "b"]
    assert [item["outcome"] for item in answer[:2]] == ["added", "added"]
    assert answer[2:] == [{"error": {"code": "request_timeout", "message": answer[2]["error"]["message"]}}]


def test_a_head_answered_ahead_of_a_pipelined_request_is_sent(service: ServiceProcess) -> None:
    both = (
        f"HEAD /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
        f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((HOST, service.port), timeout=NET) as conn:
        conn.sendall(both.encode())  # in one segment: the GET is read before the HEAD is answered
        received = read_to_end(conn)
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-length: 15" in head.lower(), received
    second, _, body = rest.partition(b"\r\n\r\n")
    assert second.startswith(b"HTTP/1.1 200") and body == b'{"status":"ok"}', received


def test_grace_0_cuts_a_request_in_flight_at_once(redis_server: ServerProcess, tmp_path: Path) -> None:
    # A --timeout far longer than the wait below: only the grace can end the request.
    options = ["--grace", "0", "--timeout", "600"]
    with (
        ServiceProcess(redis_server.url, tmp_path, serve_options=options) as service,
        socket.create_connection((HOST, service.port), timeout=NET) as conn,
    ):
        headers = "Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n"
        conn.sendall(post("/v1/indexes/svc-grace/near", headers))
        # The service asks for the body once the request is read and waits for it: it is in flight.
        assert conn.recv(65536).startswith(b"HTTP/1.1 100")
        conn.sendall(b'{"text":')
        service.terminate()
        assert service.wait(NET) == -signal.SIGTERM
        # Cut, as uvicorn cuts a request in flight when the grace is over: 500 and the connection closed.
        assert read_to_end(conn).startswith(b"HTTP/1.1 500")
