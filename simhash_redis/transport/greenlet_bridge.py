"""Running the synchronous index on an event loop, in a greenlet per call (SQLAlchemy's design): where it
needs the network or a pause it hands an awaitable to `wait`, which the task that started the call awaits."""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "GREENLET",
    "bridged",
    "greenlet_installed",
    "off_greenlet",
    "on_loop_stack",
    "pause",
    "run",
    "wait",
]

T = TypeVar("T")
P = ParamSpec("P")

#: What to do when greenlet is missing.
GREENLET = "the asyncio API needs greenlet: `pip install greenlet` (the project's `asyncio` extra)"

try:
    from greenlet import getcurrent as _current
    from greenlet import greenlet as _greenlet

    class _Call(_greenlet):  # type: ignore[misc]
        """One call of the synchronous code, started by `run` and parked at each `wait`."""

        def __init__(self, fn: Callable[..., Any], parent: Any) -> None:
            super().__init__(fn, parent)
            # contextvars set by the caller's task stay visible to the code it runs.
            self.gr_context = parent.gr_context

except ImportError:  # pragma: no cover - only without the `asyncio` extra
    _greenlet = None

    def _current() -> Any:
        return None

    class _Call:  # type: ignore[no-redef]  # never instantiated without greenlet
        pass


def greenlet_installed() -> bool:
    """Whether greenlet, which the asyncio API needs, is importable."""
    return _greenlet is not None


def bridged() -> bool:
    """Whether the current code runs inside a call started by `run` (so it may `wait`)."""
    return isinstance(_current(), _Call)


def wait(awaitable: Awaitable[T]) -> T:
    """Await from synchronous code that `run` started: its task awaits, this call gets the result (or what
    awaiting raised, CancelledError included); RuntimeError outside `run`, the awaitable closed."""
    current = _current()
    if not isinstance(current, _Call):
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()
        raise RuntimeError("an asyncio client is used outside simhash_redis.asyncio's index classes")
    result: T = current.parent.switch(awaitable)
    return result


def pause(seconds: float) -> None:
    """Sleep `seconds` without blocking an event loop: awaited inside `run`, `time.sleep` elsewhere."""
    if bridged():
        wait(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def off_greenlet(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, run on the event loop's own stack when called inside `run` (else here): for numpy code
    with arrays of 256 KiB or more, as numpy checks its callers with backtrace() before reusing a temporary
    array, and backtrace() cannot unwind a greenlet's stack (the process crashes)."""
    return wait(_called(fn, args)) if bridged() else fn(*args)


def on_loop_stack(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn`, each of its calls made by `off_greenlet`: for a function of numpy passes over a batch (a
    caller's batch_size, 128-bit fingerprints or many queries make their arrays 256 KiB or more)."""

    @functools.wraps(fn)
    def called(*args: P.args, **kwargs: P.kwargs) -> T:
        if not bridged():
            return fn(*args, **kwargs)
        return wait(_called(functools.partial(fn, *args, **kwargs), ()))

    return called


async def _called(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    return fn(*args)


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn(*args, **kwargs)` in a greenlet, awaiting on its behalf whatever it passes to `wait`;
    ImportError without greenlet."""
    if _greenlet is None:
        raise ImportError(GREENLET)
    call = _Call(fn, _current())
    result: Any = call.switch(*args, **kwargs)
    while not call.dead:
        try:
            value = await result
        except BaseException:
            # Cancellation included: the synchronous code sees it where it waited, and its cleanup
            # (a connection with unread replies is closed, not pooled) runs before it propagates.
            result = call.throw(*sys.exc_info())
        else:
            result = call.switch(value)
    return result  # type: ignore[no-any-return]
