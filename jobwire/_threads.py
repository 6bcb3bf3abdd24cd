"""Blocking handlers in threads that a worker may give up on but cannot stop.

A sync worker runs each handler in a thread through anyio. When the handler's task is
cancelled (``handler_timeout``, the shutdown deadline), anyio lets the task go at once and
leaves the thread running: Python cannot stop it. Such a thread still works in the worker's
process, so it must still fill a slot of the worker's concurrency until it returns, or the
worker takes one more job per thread given up (and runs more threads than ``concurrency``).
:func:`run_in_thread` tells the worker when a thread is given up and when it finally returns.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

__all__ = ["run_in_thread"]

A = TypeVar("A")
R = TypeVar("R")


async def run_in_thread(
    func: Callable[[A], R], arg: A, *, limiter: anyio.CapacityLimiter,
    given_up: Callable[[int], None],
) -> R:
    """``func(arg)`` in a worker thread, as ``anyio.to_thread.run_sync(...,
    abandon_on_cancel=True)``: a cancelled caller is let go at once. If the thread is still
    running then, ``given_up(1)`` is called at once (in the caller's task) and ``given_up(-1)``
    in the event loop's thread once the thread returns (not at all if the loop has ended by
    then).

    Raises:
        Whatever ``func`` raises; the cancellation of the caller.
    """
    token = anyio.lowlevel.current_token()
    lock = threading.Lock()
    started = ended = abandoned = gone = False

    def call(value: A) -> R:
        nonlocal started, ended
        with lock:
            if gone:  # the caller left before the thread began: do not start the work
                raise RuntimeError("cancelled before the thread started")
            started = True
        try:
            return func(value)
        finally:
            with lock:
                ended = True
                tell = abandoned
            if tell:
                with contextlib.suppress(RuntimeError):  # the event loop has ended
                    anyio.from_thread.run_sync(given_up, -1, token=token)

    try:
        return await anyio.to_thread.run_sync(call, arg, limiter=limiter, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with lock:
            if not started:
                gone = True
            elif not ended:
                abandoned = True
        if abandoned:
            given_up(1)
        raise
