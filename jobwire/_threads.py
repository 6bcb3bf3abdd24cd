"""Blocking handlers in threads that a worker may give up on but cannot stop.

A sync worker runs each handler in a thread. When the handler's task is cancelled
(``handler_timeout``, the shutdown deadline), the task is let go at once and the thread runs on:
Python cannot stop it. Such a thread still works in the worker's process, so it must still fill
a slot of the worker's concurrency until it returns, or the worker takes one more job per
thread given up (and runs more threads than ``concurrency``). :func:`run_in_thread` tells the
worker when a thread is given up and when it finally returns.

The threads are **daemon** threads of this module's own pool, not anyio's worker threads: those
are not daemons, so a handler given up at the shutdown deadline (its job already handed back)
would keep the process alive after the worker's ``run`` returned, until the handler did. Idle
threads are reused, and end after ``IDLE`` seconds without work.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["run_in_thread"]

A = TypeVar("A")
R = TypeVar("R")

#: Seconds an idle pool thread waits for work before it ends.
IDLE = 10.0


class _DaemonThreads:
    """Daemon threads that run calls, reused while idle (the most recently idle first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work()`` (which must not raise) in an idle thread, or a new one."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="jobwire handler",
                             daemon=True).start()
        inbox.put(work)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            try:
                work = inbox.get(timeout=IDLE)
            except queue.Empty:
                with self._lock:
                    if any(idle is inbox for idle in self._idle):
                        self._idle[:] = [idle for idle in self._idle if idle is not inbox]
                        return
                continue  # taken from the idle list just now: its work is on the way
            work()
            del work
            with self._lock:
                self._idle.append(inbox)


_THREADS = _DaemonThreads()


def _call_soon(token: anyio.lowlevel.EventLoopToken, func: Callable[..., object],
               *args: object) -> None:
    """``func(*args)`` soon in the event loop's thread, without waiting for it there (as
    anyio's own worker threads hand back their results): asyncio's ``call_soon_threadsafe``,
    trio's ``run_sync_soon``; on another backend, ``anyio.from_thread.run_sync``.

    Raises:
        RuntimeError: the event loop has ended.
    """
    native = token.native_token
    call = (getattr(native, "call_soon_threadsafe", None)
            or getattr(native, "run_sync_soon", None))
    if call is None:
        anyio.from_thread.run_sync(func, *args, token=token)
    else:
        call(func, *args)


async def run_in_thread(
    func: Callable[[A], R], arg: A, *, limiter: anyio.CapacityLimiter,
    given_up: Callable[[int], None],
) -> R:
    """``func(arg)`` in a daemon thread (in a copy of the caller's context), holding a token of
    ``limiter`` while the caller waits. A cancelled caller is let go at once. If the thread is
    still running then, ``given_up(1)`` is called at once (in the caller's task) and
    ``given_up(-1)`` in the event loop's thread once the thread returns (not at all if the loop
    has ended by then); a thread that had not started yet does not run ``func`` at all.

    Raises:
        Whatever ``func`` raises; the cancellation of the caller.
    """
    token = anyio.lowlevel.current_token()
    context = contextvars.copy_context()
    lock = threading.Lock()
    started = ended = abandoned = gone = False
    done = anyio.Event()
    outcome: list[tuple[bool, object]] = []

    def call() -> None:
        nonlocal started, ended
        with lock:
            if gone:  # the caller left before the thread began: do not start the work
                return
            started = True
        try:
            outcome.append((True, context.run(func, arg)))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))
        finally:
            with lock:
                ended = True
                tell = abandoned
            with contextlib.suppress(RuntimeError):  # the event loop has ended
                if tell:
                    _call_soon(token, given_up, -1)
                else:
                    _call_soon(token, done.set)

    async with limiter:
        _THREADS.submit(call)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            with lock:
                if not started:
                    gone = True
                elif not ended:
                    abandoned = True
            if abandoned:
                given_up(1)
            raise
    ok, value = outcome.pop()
    if ok:
        return value  # type: ignore[return-value]
    assert isinstance(value, BaseException)
    raise value
