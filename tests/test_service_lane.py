"""The service's fast lane (the compiled core's HTTP/1.1 loop), against real `simhash-redis serve`
processes over raw sockets: it answers byte for byte as uvicorn alone does (a service with the pure
engine has no lane), pipelined and split requests in order, and gives a connection back to uvicorn at
the first request it does not take, which is then answered as before."""

from __future__ import annotations

import json
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.servers import HOST, ServerProcess
from tests.service_process import ServiceProcess, until

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("simhash_redis_native")

# A socket's safety net, never what a test waits for.
NET = 30.0
_DATE = re.compile(rb"(?im)^date: [^\r\n]*\r\n")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two Redis servers: one for the service with the lane, one for uvicorn alone."""
    with ServerProcess() as lane_redis, ServerProcess() as plain_redis:
        yield lane_redis, plain_redis


@pytest.fixture(scope="module")
def pair(
    servers: tuple[ServerProcess, ServerProcess], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    """The service with its lane, and the same service without it (the pure engine: uvicorn serves all)."""
    log_dir = tmp_path_factory.mktemp("lane")
    options = ["--timeout", "5"]
    with (
        ServiceProcess(
            servers[0].url, log_dir, serve_options=options, env={"SIMHASH_REDIS_ENGINE": "native"}
        ) as lane,
        ServiceProcess(
            servers[1].url, log_dir, serve_options=options, env={"SIMHASH_REDIS_ENGINE": "python"}
        ) as alone,
    ):
        yield lane, alone


class Connection:
    """One keep-alive connection, its responses read one by one (by Content-Length)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=NET)
        self.buffer = b""

    def response(self) -> bytes:
        """The next whole response (a chunked body joined), its Date header left out (the two services'
        clocks differ)."""
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        if re.search(rb"(?i)transfer-encoding: *chunked", head):
            body = b""
            while True:
                while b"\r\n" not in self.buffer:
                    self._more()
                size_line, _, rest = self.buffer.partition(b"\r\n")
                size = int(size_line, 16)
                while len(rest) < size + 2:
                    self._more()
                    size_line, _, rest = self.buffer.partition(b"\r\n")
                body, self.buffer = body + rest[:size], rest[size + 2 :]
                if size == 0:
                    break
        else:
            found = re.search(rb"(?i)content-length: *(\d+)", head)
            length = int(found.group(1)) if found else 0
            while len(self.buffer) < length:
                self._more()
            body, self.buffer = self.buffer[:length], self.buffer[length:]
        return _DATE.sub(b"", head + b"\r\n") + b"\r\n" + body

    def ask(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        return self.response()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def closed(self) -> bool:
        """Whether the service closed the connection (waiting for it, or for more bytes)."""
        more = self.sock.recv(65536)
        self.buffer += more
        return not more

    def _more(self) -> None:
        more = self.sock.recv(65536)
        assert more, f"closed before a whole response: {self.buffer!r}"
        self.buffer += more


def ask_once(port: int, request: bytes) -> bytes:
    """A request's response, on a connection of its own."""
    with Connection(port) as conn:
        return conn.ask(request)


def post(path: str, body: bytes, headers: str = "Content-Type: application/json\r\n") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def handoffs(service: ServiceProcess) -> float:
    """The lane's handoffs so far, from /metrics (on a connection of its own: that one goes back too)."""
    with socket.create_connection((HOST, service.port), timeout=NET) as sock:
        sock.sendall(f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        text = b""
        while more := sock.recv(65536):
            text += more
    found = re.search(rb"(?m)^simhash_redis_lane_handoffs_total ([0-9.e+]+)", text)
    return float(found.group(1)) if found else 0.0


# The same calls, in order, to both services: writes, reads, and every kind of refusal.
CALLS = [
    post(
        "/v1/indexes/lane/add_if_new", b'{"id": "a", "text": "the quick brown fox jumps over the lazy dog"}'
    ),
    post(
        "/v1/indexes/lane/add_if_new", b'{"id": "b", "text": "the quick brown fox jumps over the lazy dog"}'
    ),
    post("/v1/indexes/lane/near", b'{"text": "the quick brown fox jumps over the lazy dog"}'),
    post("/v1/indexes/lane/near", b'{"text": "the quick brown fox", "k": 2, "threshold": 0.5}'),
    post("/v1/indexes/lane/add", b'{"id": "c", "text": "an entirely different sentence about red apples"}'),
    post("/v1/indexes/lane/get", b'{"id": "c"}'),
    post("/v1/indexes/lane/remove", b'{"id": "c"}'),
    post("/v1/indexes/lane/fingerprint", b'{"text": "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87"}'),
    post("/v1/indexes/lane/near/batch", b'[{"text": "the quick brown fox"}, {"text": "red apples"}]'),
    post("/v1/indexes/lane/near", b"{bad json"),
    post("/v1/indexes/lane/near", b'{"text": 3}'),
    post("/v1/indexes/lane/near", b'{"text": "   "}'),
    post("/v1/indexes/lane/near", b'{"text": "x", "k": 99}'),
    post("/v1/indexes/lane/near", b'{"text": "\xff\xfe"}'),
    post("/v1/indexes/lane/near", b'{"fingerprint": "0x1"}'),
    post("/v1/indexes/missing/near", b'{"text": "x"}'),
    post("/v1/indexes/lane/nothing", b"{}"),
    post("/v1/indexes/lane/near?k=2", b'{"text": "x"}'),
    post("/v1/indexes/a%2Fb/near", b'{"text": "x"}'),
    post("/v1/indexes/lane/add", b'{"id": "", "text": "x y z"}'),
    f"GET /v1/indexes/lane/stats HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode(),
    f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode(),
    f"GET /readyz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode(),
    f"GET /nothing HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode(),
    f"PUT /v1/indexes/lane/near HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 0\r\n\r\n".encode(),
    post("/v1/indexes/lane/near", b'{"text": "the quick brown fox"}', "Connection: close\r\n"),
    f"GET /healthz HTTP/1.1\nHost: {HOST}\r\n\r\n".encode(),  # a bare LF: both parsers must refuse it
]


def test_the_lane_answers_as_uvicorn_alone_does(pair: tuple[ServiceProcess, ServiceProcess]) -> None:
    lane, alone = pair
    given_back = handoffs(lane)
    for i, call in enumerate(CALLS):  # each on a connection of its own: no handoff carries over
        assert ask_once(lane.port, call) == ask_once(alone.port, call), (i, call)
    # The lane served every call but three, which it gave back: GET /nothing, the PUT, the bare LF.
    assert handoffs(lane) - given_back == 3


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.one_of(
        st.binary(max_size=40),
        st.dictionaries(
            st.sampled_from(["text", "fingerprint", "k", "threshold", "id", "other"]),
            st.one_of(st.text(max_size=30), st.integers(-5, 2**70), st.floats(allow_nan=False), st.none()),
            max_size=4,
        ).map(lambda d: json.dumps(d).encode()),
    ),
    operation=st.sampled_from(["near", "add_if_new", "add", "get", "remove", "fingerprint"]),
)
def test_any_single_call_is_answered_alike(
    pair: tuple[ServiceProcess, ServiceProcess], body: bytes, operation: str
) -> None:
    lane, alone = pair
    call = post(f"/v1/indexes/hypo/{operation}", body)
    assert ask_once(lane.port, call) == ask_once(alone.port, call), call


def test_pipelined_and_split_requests_are_answered_in_order(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    lane, _ = pair
    with Connection(lane.port) as conn:
        _pipelined(conn)


def _pipelined(conn: Connection) -> None:
    texts = [f"document number {i} about {'cats' if i % 2 else 'dogs'} and more" for i in range(5)]
    calls = [
        post("/v1/indexes/pipe/add", json.dumps({"id": str(i), "text": t}).encode())
        for i, t in enumerate(texts)
    ]
    conn.sock.sendall(b"".join(calls))
    for i in range(5):
        assert b'"id":"%d"' % i in conn.response()
    call = post("/v1/indexes/pipe/get", b'{"id": "3"}')
    for byte in range(len(call)):  # a slow client: a byte at a time
        conn.sock.sendall(call[byte : byte + 1])
    assert b'"id":"3"' in conn.response()


def test_a_connection_given_back_is_served_by_uvicorn_to_its_end(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    stream = post(
        "/v1/indexes/back/add/batch",
        b'{"id": "1", "text": "one two three four"}\n{"id": "2", "text": "five six seven eight"}\n',
        "Content-Type: application/x-ndjson\r\n",
    )
    text = b'{"text": "one two three four"}'
    chunked = (
        f"POST /v1/indexes/back/near HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(text), text)
    single = post("/v1/indexes/back/near", b'{"text": "five six seven eight"}')
    answers = []
    for service in pair:
        with Connection(service.port) as conn:
            # The lane answers the first, gives the connection back at the stream; uvicorn the rest.
            answers.append([conn.ask(single), conn.ask(stream), conn.ask(chunked), conn.ask(single)])
    assert answers[0] == answers[1]
    assert b'"outcome":"added"' in answers[0][1]


def test_http_1_0_and_expect_go_back_and_are_answered(pair: tuple[ServiceProcess, ServiceProcess]) -> None:
    lane, _ = pair
    with socket.create_connection((HOST, lane.port), timeout=NET) as sock:
        sock.sendall(f"GET /healthz HTTP/1.0\r\nHost: {HOST}\r\n\r\n".encode())
        received = b""
        while more := sock.recv(65536):  # HTTP/1.0: closed after its answer
            received += more
    assert received.startswith(b"HTTP/1.1 200") and received.endswith(b'{"status":"ok"}')
    body = b'{"text": "one two three four"}'
    call = post("/v1/indexes/back/near", body, "Content-Type: application/json\r\nExpect: 100-continue\r\n")
    with Connection(lane.port) as conn:
        conn.sock.sendall(call[: -len(body)])
        assert conn.response().startswith(b"HTTP/1.1 100")  # uvicorn asks for the body
        conn.sock.sendall(body)
        assert conn.response().startswith(b"HTTP/1.1 200")


def test_an_idle_connection_is_closed_and_a_stalled_one_given_back(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    lane, _ = pair
    with Connection(lane.port) as conn, Connection(lane.port) as stalled:
        health = conn.ask(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        assert health.endswith(b'{"status":"ok"}')
        # Part of a body, then nothing: given back, uvicorn answers 408 once its --timeout (5 s) is over.
        stalled.sock.sendall(post("/v1/indexes/back/near", b'{"text": "one two three four"}')[:-5])
        assert stalled.response().startswith(b"HTTP/1.1 408")
        assert conn.closed()  # idle for the keep-alive (5 s): the lane has closed it


def test_metrics_count_the_lanes_requests(pair: tuple[ServiceProcess, ServiceProcess]) -> None:
    lane, _ = pair
    with Connection(lane.port) as conn:
        for _ in range(3):
            conn.ask(post("/v1/indexes/counted/add", b'{"id": "x", "text": "counted words here"}'))

    def counted() -> bool:
        with socket.create_connection((HOST, lane.port), timeout=NET) as sock:
            sock.sendall(f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
            text = b""
            while more := sock.recv(65536):
                text += more
        line = rb'simhash_redis_requests_total\{method="POST",route="/v1/indexes/\{name\}/add",status="200"\}'
        found = re.search(line + rb" ([0-9.]+)", text)
        return found is not None and float(found.group(1)) >= 3

    until(counted)  # figures are flushed within a second


def test_sigterm_closes_the_lanes_idle_connections_and_ends(
    servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    with ServiceProcess(servers[0].url, tmp_path) as service, Connection(service.port) as conn:
        assert conn.ask(post("/v1/indexes/stop/add", b'{"id": "1", "text": "a b c d"}')).startswith(
            b"HTTP/1.1 200"
        )
        service.terminate()
        assert conn.closed()  # the lane closed its idle keep-alive connection at once
        # Once done, uvicorn raises the signal again for its default action.
        assert service.wait(NET) == -signal.SIGTERM


def test_a_client_that_shuts_its_side_after_its_request_gets_the_answer(
    pair: tuple[ServiceProcess, ServiceProcess],
) -> None:
    call = post("/v1/indexes/lane/near", b'{"text": "the quick brown fox"}')
    answers = []
    for service in pair:
        with Connection(service.port) as conn:
            conn.sock.sendall(call)
            conn.sock.shutdown(socket.SHUT_WR)
            answers.append(conn.response())
            assert conn.closed()
    assert answers[0] == answers[1]
