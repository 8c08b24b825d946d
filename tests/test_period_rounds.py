"""The rounds of a windowed write: a clock refusal gives up only when rounds in a row write nothing, and
then only for clocks that disagree (or after `_STALL_S` of a clock moving on faster than the rounds)."""

from __future__ import annotations

from typing import Any

import pytest

from simhash_redis.errors import WriteContention
from simhash_redis.store import windowed_writes
from simhash_redis.store.windowed_writes import in_rounds


class _Clock:
    """Stands in for an index's periods: counts the server times adopted."""

    period_ms = 1000

    def __init__(self) -> None:
        self.adopted: list[int] = []

    def view(self) -> Any:
        return object()

    def set_server_time(self, server_ms: int) -> None:
        self.adopted.append(server_ms)


def test_a_long_batch_crosses_many_boundaries() -> None:
    """Each round writes two documents before the server's clock moves on (a long batch, short periods)."""
    clock, written = _Clock(), list[int]()

    def attempt(view: Any, pending: list[int]) -> tuple[list[int], int | None]:
        written.extend(pending[:2])
        rest = pending[2:]
        return rest, (1000 * len(written) if rest else None)

    in_rounds(clock, attempt, list(range(30)))  # type: ignore[arg-type]
    assert written == list(range(30))
    assert len(clock.adopted) == 14 > windowed_writes._CLOCK_ROUNDS


def test_clocks_that_disagree_with_nothing_written_give_up() -> None:
    """Two nodes a period apart: each refusal names a period reported before."""
    clock, rounds = _Clock(), list[int]()

    def attempt(view: Any, pending: list[int]) -> tuple[list[int], int | None]:
        rounds.append(len(pending))
        return pending, 1000 * (10 + len(rounds) % 2)

    with pytest.raises(WriteContention, match="clock kept moving between periods"):
        in_rounds(clock, attempt, [1, 2, 3])  # type: ignore[arg-type]
    assert len(rounds) == windowed_writes._CLOCK_ROUNDS + 2  # the first refusal is the clock going on


def test_rounds_slower_than_a_period_go_on_while_the_clock_moves_on() -> None:
    """A loaded machine: twenty rounds in a row each end in a later period, then one fits."""
    clock, rounds = _Clock(), list[int]()

    def attempt(view: Any, pending: list[int]) -> tuple[list[int], int | None]:
        rounds.append(len(pending))
        if len(rounds) <= 20:
            return pending, 1000 * len(rounds)
        return [], None

    in_rounds(clock, attempt, [1, 2, 3])  # type: ignore[arg-type]
    assert len(rounds) == 21 and len(clock.adopted) == 20


def test_a_clock_moving_on_faster_than_every_round_gives_up_after_the_stall_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(windowed_writes, "_STALL_S", -1.0)  # already spent
    clock, rounds = _Clock(), list[int]()

    def attempt(view: Any, pending: list[int]) -> tuple[list[int], int | None]:
        rounds.append(len(pending))
        return pending, 1000 * len(rounds)

    with pytest.raises(WriteContention, match="took longer than a period"):
        in_rounds(clock, attempt, [1, 2, 3])  # type: ignore[arg-type]
    assert len(rounds) == 1


def test_a_refusal_after_progress_counts_anew() -> None:
    """As many refusals that write nothing as allowed, one round that writes, as many again: done."""
    clock, script = _Clock(), iter([0, 0, 0, 0, 1, 0, 0, 0, 0, 2])

    def attempt(view: Any, pending: list[int]) -> tuple[list[int], int | None]:
        done = next(script)
        rest = pending[done:]
        return rest, (1 if rest else None)

    in_rounds(clock, attempt, [1, 2, 3])  # type: ignore[arg-type]
    assert len(clock.adopted) == 9
