"""Stalls: a paused server gives RedisTimeout within the configured bound, never a hang.

The server is paused with CLIENT PAUSE from another client. Each stalled call runs in a thread that
must finish within a generous bound (a correctness bound that catches a hang, not a performance
assertion): with socket_timeout 0.3 s and 2 retries the call gives up after about 1 s, well before the
pause ends. CLIENT UNPAUSE is itself held back by a PAUSE ALL, so every call is stalled by the same
pause, concurrently, to keep the module short. Retry delays are unit-tested on `Backoff.delays()`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from simhash_redis import SimhashIndex, defaults
from simhash_redis.errors import RedisTimeout, RedisUnavailable, SimhashRedisError
from simhash_redis.transport import Backoff, standalone
from simhash_redis.transport.connection import client_from_url
from tests.servers import ServerProcess

TIMEOUT = 0.3
BACKOFF = Backoff(retries=2, base=0.01, cap=0.05)
#: The server stays paused this long (a PAUSE ALL cannot be lifted earlier: UNPAUSE waits too).
PAUSE_MS = 3000
#: A stalled call must have returned or raised by then: 3 attempts x TIMEOUT + backoff is about 1 s.
HANG_BOUND = 2.7
A = 0x0123456789ABCDEF


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """A private server (pausing the suite's shared one would stall other tests)."""
    with ServerProcess() as srv:
        yield srv


@pytest.fixture
def admin(server: ServerProcess) -> Iterator[redis.Redis]:
    """A client that pauses the server; the pause is lifted after the test whatever happens."""
    server.flushall()
    client = server.client(socket_timeout=10)
    yield client
    client.execute_command("CLIENT", "UNPAUSE")
    client.close()


def open_index(server: ServerProcess) -> SimhashIndex:
    """An index on its own client with a short socket timeout (open it before pausing)."""
    return SimhashIndex(
        client_from_url(server.url, socket_timeout=TIMEOUT), "stall", k=3, id_buckets=64, backoff=BACKOFF
    )


@pytest.fixture
def index(server: ServerProcess, admin: redis.Redis) -> Iterator[SimhashIndex]:
    """An index (opened before any pause) on a client with a short socket timeout."""
    idx = open_index(server)
    yield idx
    idx.client.close()


def pause(admin: redis.Redis, mode: str = "ALL") -> None:
    """CLIENT PAUSE the server for PAUSE_MS (ALL: every command; WRITE: writes only)."""
    admin.execute_command("CLIENT", "PAUSE", PAUSE_MS, mode)


def bounded_all(
    calls: dict[str, Callable[[], Any]], bound: float = HANG_BOUND
) -> dict[str, BaseException | None]:
    """Run every call in its own thread at once; fail if any has not finished within bound (measured
    from the start). Returns what each raised (None if it returned)."""
    outcome: dict[str, BaseException | None] = {}

    def run(name: str, call: Callable[[], Any]) -> None:
        try:
            call()
            outcome[name] = None
        except BaseException as exc:
            outcome[name] = exc

    started = time.monotonic()
    threads = {
        name: threading.Thread(target=run, args=(name, call), daemon=True) for name, call in calls.items()
    }
    for thread in threads.values():
        thread.start()
    for thread in threads.values():
        thread.join(max(0.0, bound - (time.monotonic() - started)))
    hung = sorted(name for name, thread in threads.items() if thread.is_alive())
    assert not hung, f"these calls hung (still running after {bound} s): {hung}"
    return outcome


def assert_timed_out(exc: BaseException | None) -> None:
    """exc is the library's typed timeout, under the root and under the builtin TimeoutError."""
    assert isinstance(exc, RedisTimeout), repr(exc)
    assert isinstance(exc, RedisUnavailable) and isinstance(exc, SimhashRedisError)
    assert isinstance(exc, TimeoutError)


def test_every_call_on_a_paused_server_times_out(server: ServerProcess, admin: redis.Redis) -> None:
    """Reads, writes, unique adds and opening an index (a new connection's handshake stalls too)."""
    index = {name: open_index(server) for name in ("add", "add_many", "add_if_new", "near", "near_many")}
    more = {name: open_index(server) for name in ("get", "get_many", "count", "remove", "remove_many")}
    index.update(more)
    calls: dict[str, Callable[[], Any]] = {
        "add": lambda: index["add"].add("x", A),
        "add_many": lambda: index["add_many"].add_many([(f"m{i}", A ^ (1 << i)) for i in range(50)]),
        "add_if_new": lambda: index["add_if_new"].add_if_new("x", A),
        "near": lambda: index["near"].near(A),
        "near_many": lambda: index["near_many"].near_many([A, A ^ 1]),
        "get": lambda: index["get"].get("x"),
        "get_many": lambda: index["get_many"].get_many(["x", "y"]),
        "count": lambda: index["count"].count(),
        "remove": lambda: index["remove"].remove("x"),
        "remove_many": lambda: index["remove_many"].remove_many(["x", "y"]),
        "open": lambda: open_index(server),
    }
    pause(admin)
    outcome = bounded_all(calls)
    for name, exc in outcome.items():
        assert isinstance(exc, RedisTimeout), (name, exc)
        assert_timed_out(exc)
    for idx in index.values():
        idx.client.close()


def test_a_write_paused_midway_is_idempotent_afterwards(index: SimhashIndex, admin: redis.Redis) -> None:
    """The timed-out write may or may not have been applied; running it again gives the right state."""
    index.add("y", A ^ 0xFFFF0000)
    pause(admin, "WRITE")
    assert index.near(A ^ 0xFFFF0000, k=0)[0].id == "y"  # reads are not paused by PAUSE WRITE
    assert_timed_out(bounded_all({"add_many": lambda: index.add_many([("x", A), ("z", A)])})["add_many"])
    admin.execute_command("CLIENT", "UNPAUSE")
    index.add_many([("x", A), ("z", A)])
    assert index.get_many(["x", "y", "z"]) == [A, A ^ 0xFFFF0000, A]
    assert index.count() == (3, 2)
    assert index.verify().ok


def test_whole_index_operations_on_a_paused_server_time_out(
    server: ServerProcess, admin: redis.Redis
) -> None:
    verifying, dropping = open_index(server), open_index(server)
    verifying.add("x", A)
    pause(admin)
    outcome = bounded_all({"verify": verifying.verify, "drop": dropping.drop})
    assert_timed_out(outcome["verify"])
    assert_timed_out(outcome["drop"])


def test_the_default_client_has_finite_timeouts() -> None:
    """Without options, client_from_url never waits forever on a socket (the library's defaults)."""
    client = client_from_url("redis://127.0.0.1:1/0")
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == defaults.SOCKET_TIMEOUT
    assert kwargs["socket_connect_timeout"] == defaults.CONNECT_TIMEOUT
    assert 0 < defaults.SOCKET_TIMEOUT < 60 and 0 < defaults.CONNECT_TIMEOUT < 60
    client.close()


# -- Backoff ---------------------------------------------------------------------------------------------


def test_backoff_upper_bounds_double_up_to_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full jitter draws uniform(0, min(cap, base * 2**attempt)): with the draw pinned to its upper
    bound, the delays are exactly base, 2 base, 4 base, ... capped."""
    bounds: list[tuple[float, float]] = []

    def upper(low: float, high: float) -> float:
        bounds.append((low, high))
        return high

    monkeypatch.setattr(random, "uniform", upper)
    delays = list(Backoff(retries=8, base=0.1, cap=1.0).delays())
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0])
    assert all(low == 0 for low, _ in bounds)


def test_backoff_delays_are_jittered_within_bounds() -> None:
    backoff = Backoff(retries=12, base=0.01, cap=0.5)
    runs = [list(backoff.delays()) for _ in range(300)]
    assert all(len(run) == 12 for run in runs)
    for attempt in range(12):
        high = min(0.5, 0.01 * 2**attempt)
        column = [run[attempt] for run in runs]
        assert all(0 <= d <= high for d in column)
        assert max(column) > 0.5 * high  # really spread over the range, not stuck at 0
    assert len({run[5] for run in runs}) > 250  # jittered: different from run to run


def test_backoff_edge_cases() -> None:
    assert list(Backoff(retries=0).delays()) == []
    assert all(d <= 0.05 for d in Backoff(retries=50, base=1.0, cap=0.05).delays())
    default = Backoff()
    assert (default.retries, default.base, default.cap) == (
        defaults.RETRIES,
        defaults.BACKOFF_BASE,
        defaults.BACKOFF_CAP,
    )
    assert sum(Backoff().delays()) <= defaults.RETRIES * defaults.BACKOFF_CAP


def test_backoff_with_very_many_retries_does_not_overflow() -> None:
    delays = list(Backoff(retries=1100, base=0.001, cap=0.01).delays())
    assert len(delays) == 1100 and max(delays) <= 0.01


def test_no_retry_starts_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline ends the retries (their waits included) that many seconds after the call began, whatever
    retries are left: attempts that each time out after 0.4 s, on a clock of the test's."""
    clock = [100.0]
    monkeypatch.setattr(standalone.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(standalone, "pause", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    attempts: list[float] = []

    def stalled() -> None:
        attempts.append(clock[0])
        clock[0] += 0.4  # the socket timeout of an attempt
        raise redis.exceptions.TimeoutError("Timeout reading from socket")

    with pytest.raises(redis.exceptions.TimeoutError):
        Backoff(retries=50, base=0.01, cap=0.05, deadline=1.0).call_with_retry(stalled, lambda exc: True)
    assert 2 <= len(attempts) <= 3 and all(start < 101.0 for start in attempts)
    assert clock[0] < 101.4  # the last attempt began before the deadline, and no wait went past it
    attempts.clear()
    with pytest.raises(redis.exceptions.TimeoutError):  # without one, every retry is made
        Backoff(retries=5, base=0.01, cap=0.05).call_with_retry(stalled, lambda exc: True)
    assert len(attempts) == 6
