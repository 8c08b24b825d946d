"""Micro-batching in the service: single-document calls made in one turn of a worker's event loop run as
one batch call of the library, and each keeps its own result and its own error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from simhash_redis import SimhashIndex
from simhash_redis.errors import InvalidArgument, RedisUnavailable

pytest.importorskip("msgspec")

from simhash_redis.service import operations
from simhash_redis.service.indexes import MAX_BATCH, Coalescer, Opened
from simhash_redis.transport.wire import round_trips

TEXT = "storm closes coastal roads as heavy rain hits the region on monday, and schools stay shut"


def test_one_turns_calls_run_as_one_batch_each_with_its_answer(redis_url: str) -> None:
    index = Opened(SimhashIndex.from_url(redis_url, "coalesce"), None)
    calls: list[int] = []

    def run(docs: Sequence[operations.Document]) -> list[operations.AddIfNewResult]:
        calls.append(len(docs))
        return operations.add_if_new(index, docs)

    coalescer: Coalescer[operations.Document, operations.AddIfNewResult] = Coalescer(run)

    async def race() -> list[operations.AddIfNewResult | BaseException]:
        futures = [
            coalescer.submit(operations.Document("a", TEXT)),
            coalescer.submit(operations.Document("b", TEXT + "!")),  # a near-duplicate of a
            coalescer.submit(operations.Document("", TEXT)),  # an id the library refuses
            coalescer.submit(operations.Document("c", "a different story about the harbour ferries")),
        ]
        return await asyncio.gather(*futures, return_exceptions=True)

    before = round_trips()
    a, b, bad, c = asyncio.run(race())
    # One batch, refused whole for its bad id (nothing written), then each alone: its own answers.
    assert calls == [4, 1, 1, 1, 1]
    assert isinstance(a, operations.AddIfNewResult) and a.stored
    assert isinstance(b, operations.AddIfNewResult) and not b.stored and b.duplicate is not None
    assert b.duplicate.id == "a"
    assert isinstance(bad, InvalidArgument)
    assert isinstance(c, operations.AddIfNewResult) and c.stored
    assert index.plain.count() == (2, 2)
    assert round_trips() > before


def test_a_lone_call_is_a_batch_of_one_and_errors_reach_every_caller() -> None:
    calls: list[list[int]] = []

    def run(items: Sequence[int]) -> list[int]:
        calls.append(list(items))
        if -1 in items:
            raise RedisUnavailable("down")
        return [i * 2 for i in items]

    coalescer: Coalescer[int, int] = Coalescer(run)

    async def scenario() -> tuple[int, list[int | BaseException], list[int]]:
        alone = await coalescer.submit(1)
        failed = await asyncio.gather(coalescer.submit(-1), coalescer.submit(2), return_exceptions=True)
        many = await asyncio.gather(*(coalescer.submit(i) for i in range(MAX_BATCH + 3)))
        return alone, failed, many

    alone, failed, many = asyncio.run(scenario())
    assert alone == 2
    assert [type(e) for e in failed] == [RedisUnavailable, RedisUnavailable]
    assert many == [i * 2 for i in range(MAX_BATCH + 3)]
    assert [len(c) for c in calls] == [1, 2, MAX_BATCH, 3]


def test_a_call_still_waiting_at_its_timeout_gets_504_and_leaves_the_batch() -> None:
    from simhash_redis.service.app import Service
    from simhash_redis.service.config import ServiceConfig
    from simhash_redis.service.problems import ServiceError, problem_of

    calls: list[list[int]] = []

    def run(items: Sequence[int]) -> list[int]:
        calls.append(list(items))
        return list(items)

    coalescer: Coalescer[int, int] = Coalescer(run)
    service = Service(ServiceConfig(timeout=0.5))

    async def scenario() -> tuple[BaseException | int, int]:
        late, kept = coalescer.submit(1), coalescer.submit(2)
        service._expire(late)  # what the timer does once the timeout has passed
        results = await asyncio.gather(late, kept, return_exceptions=True)
        return results[0], results[1]  # type: ignore[return-value]

    late, kept = asyncio.run(scenario())
    assert isinstance(late, ServiceError) and problem_of(late)[0] == 504
    assert problem_of(late)[1].code == "timeout" and "0.5 s" in str(late)
    assert kept == 2 and calls == [[2]]


def test_a_lone_request_runs_at_once_and_requests_read_together_share_a_batch(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simhash_redis.service import runner
    from simhash_redis.service.app import Service
    from simhash_redis.service.config import ServiceConfig
    from simhash_redis.service.indexes import Registry

    SimhashIndex.from_url(redis_url, "lone").add("a", TEXT)
    config = ServiceConfig(redis_url=redis_url, access_log=False)
    service = Service(config)
    service._registry = Registry(config, redis_url)
    batches: list[int] = []
    near = operations.OPERATIONS["near"].function

    def counted(index: Opened, queries: Sequence[operations.Query], *params: object) -> object:
        batches.append(len(queries))
        return near(index, queries, *params)  # type: ignore[arg-type]

    monkeypatch.setattr(operations.OPERATIONS["near"], "function", counted)

    async def call(text: str) -> tuple[int, dict[str, object]]:
        sent: list[dict[str, object]] = []

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": json.dumps({"text": text}).encode(), "more_body": False}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/indexes/lone/near", "query_string": b""}
        await service.operation({**scope, "headers": []}, receive, send)  # type: ignore[arg-type]
        return sent[0]["status"], json.loads(sent[1]["body"])  # type: ignore[arg-type]

    async def gathered() -> list[tuple[int, dict[str, object]]]:
        return await asyncio.gather(call(TEXT), call(TEXT + "!"))

    def refused(*_: object) -> None:
        raise AssertionError("a lone request went through the coalescer")

    try:
        with monkeypatch.context() as lone:
            lone.setattr(runner, "_unanswered", [1])
            lone.setattr(Coalescer, "submit", refused)
            alone = asyncio.run(call(TEXT))
        assert batches == [1]
        monkeypatch.setattr(runner, "_unanswered", [2])
        both = asyncio.run(gathered())
        assert batches == [1, 2]
    finally:
        service.registry.close()
    assert alone == both[0]
    for status, answer in (alone, *both):
        assert status == 200 and answer["matches"][0]["id"] == "a"  # type: ignore[index]


def test_a_response_head_goes_with_its_body_in_one_write() -> None:
    from simhash_redis.service.runner import _HeadWithBody

    class Transport:
        def __init__(self) -> None:
            self.writes: list[bytes] = []
            self.closed = False

        def write(self, data: bytes) -> None:
            self.writes.append(data)

        def close(self) -> None:
            self.closed = True

        def is_closing(self) -> bool:
            return self.closed

    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"
    proceed = b"HTTP/1.1 100 Continue\r\n\r\n"
    transport = Transport()
    held = _HeadWithBody(transport, lambda: None)  # type: ignore[arg-type]
    held.write(proceed)  # at once: the client waits for it before it sends the body
    held.write(head)
    assert transport.writes == [proceed]
    held.write(b"{}")
    held.write(b"")  # after the head, writes pass through
    assert transport.writes == [proceed, head + b"{}", b""]
    assert held.is_closing() is False  # the rest is the transport's
    cut = Transport()
    held = _HeadWithBody(cut, lambda: None)  # type: ignore[arg-type]
    held.write(head)
    held.close()  # a response cut short after its head: the head still goes, then the connection closes
    assert cut.writes == [head] and cut.closed
    # A HEAD's answer (no body): its head goes when its own response completes, before the connection
    # goes on to the next request (of a pipeline, say).
    bare, done = Transport(), []
    held = _HeadWithBody(bare, lambda: done.append(bare.writes[:]))  # type: ignore[arg-type]
    held.write(head)
    held.complete()
    assert done == [[head]]


def test_the_worker_counts_each_request_until_it_is_answered_or_its_connection_lost(redis_url: str) -> None:
    import socket

    from simhash_redis.service import runner
    from tests.servers import HOST
    from tests.service_process import in_thread, until

    SimhashIndex.from_url(redis_url, "counted").add("a", TEXT)
    body = json.dumps({"text": TEXT}).encode()
    request = (
        f"POST /v1/indexes/counted/near HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with in_thread(redis_url) as (_, port):
        with socket.create_connection((HOST, port), timeout=30) as conn:
            conn.sendall(request * 3)  # pipelined: answered in order, each counted until answered
            received = b""
            while received.count(b'"id":"a"') < 3:
                more = conn.recv(65536)
                assert more
                received += more
            assert received.count(b"HTTP/1.1 200") == 3
            until(lambda: runner._unanswered[0] == 0)
        with socket.create_connection((HOST, port), timeout=30) as conn:
            # A HEAD response has no body to write: its held head goes when the response completes,
            # and the kept-alive connection serves the next request.
            conn.sendall(f"HEAD /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            received = b""
            while b"\r\n\r\n" not in received:
                more = conn.recv(65536)
                assert more
                received += more
            assert received.startswith(b"HTTP/1.1 200")
            conn.sendall(request)
            while b'"id":"a"' not in received:
                more = conn.recv(65536)
                assert more
                received += more
            until(lambda: runner._unanswered[0] == 0)
        with socket.create_connection((HOST, port), timeout=30) as conn:
            conn.sendall(request[:-10])  # a request whose body never comes, then the connection goes
            until(lambda: runner._unanswered[0] == 1)
        until(lambda: runner._unanswered[0] == 0)


def test_each_operation_holds_its_function_under_its_path_name() -> None:
    assert set(operations.OPERATIONS) == {"fingerprint", "near", "add", "add_if_new", "remove", "get"}
    for name, op in operations.OPERATIONS.items():
        assert op.name == name and op.function is getattr(operations, name)
