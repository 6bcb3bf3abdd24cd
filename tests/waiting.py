"""Wait on observable state, never on time: the suite's one polling helper.

A test that must see something happen in another thread, process or server (a job reserved, a
connection closed, a line printed) polls a predicate that reads that state, and fails naming what
it awaited, with the last value seen, when a bound passes. The bound is a behaviour bound (it
never happened), not a speed check: nothing asserts how soon it happened.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

import anyio

__all__ = ["await_until", "wait_until"]

T = TypeVar("T")

#: How long to sleep between two polls: short, so a test goes on as soon as the state is there.
INTERVAL = 0.02


def _failure(what: str, timeout: float, last: object) -> AssertionError:
    seen = f"{type(last).__name__}: {last}" if isinstance(last, BaseException) else repr(last)
    return AssertionError(f"never happened within {timeout} s: {what} (last seen: {seen})")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    what: str = "the condition",
    *,
    ignoring: tuple[type[BaseException], ...] = (),
    interval: float = INTERVAL,
) -> T:
    """Call ``predicate`` until it returns a true value, and return that value.

    Args:
        predicate: reads the state awaited (a count, a listing, a file); called at once, then every
            ``interval`` seconds.
        timeout: the bound after which the state is taken as never coming.
        what: what is awaited, for the failure message.
        ignoring: exceptions that mean "not yet" (say ``ConnectionRefusedError`` while a server
            starts); the last one is reported as the last value seen.

    Raises:
        AssertionError: naming ``what`` and the last value seen, when ``timeout`` passes first.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
        except ignoring as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() > deadline:
            raise _failure(what, timeout, last)
        time.sleep(interval)


@overload
async def await_until(
    predicate: Callable[[], Awaitable[T]], timeout: float = ..., what: str = ..., *,
    ignoring: tuple[type[BaseException], ...] = ..., interval: float = ...,
) -> T: ...


@overload
async def await_until(
    predicate: Callable[[], T], timeout: float = ..., what: str = ..., *,
    ignoring: tuple[type[BaseException], ...] = ..., interval: float = ...,
) -> T: ...


async def await_until(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 10.0,
    what: str = "the condition",
    *,
    ignoring: tuple[type[BaseException], ...] = (),
    interval: float = INTERVAL,
) -> T:
    """:func:`wait_until` for async tests (asyncio and trio): ``predicate`` may be a plain
    function or return an awaitable (a coroutine that asks a server), and the wait yields to the
    event loop between polls."""
    deadline = anyio.current_time() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if anyio.current_time() > deadline:
            raise _failure(what, timeout, last)
        await anyio.sleep(interval)
