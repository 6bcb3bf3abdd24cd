"""SIGTERM and SIGINT as a graceful stop: the one rule every worker of the collection follows.

A worker's ``run(..., handle_signals=None)`` handles the two signals when it runs in the main
thread (``True``: always, ``False``: never), and each one calls the worker's ``stop()``: no
new jobs are taken, the running ones get ``shutdown_timeout`` seconds to finish, and ``run``
returns normally. A worker on an event loop watches them with :func:`watch_signals` (anyio's
signal receiver, asyncio and trio alike); a worker that runs no event loop (Workq's blocking
``Worker``, on threads) installs plain handlers with :func:`stop_on_signals`.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import anyio

__all__ = ["STOP_SIGNALS", "log_signal", "stop_on_signals", "wants_signals", "watch_signals"]

#: The signals that stop a worker gracefully.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: What ``signal.signal`` returns: the handler that was installed (``None``: not one of Python).
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def wants_signals(handle_signals: bool | None) -> bool:
    """Whether ``run`` handles :data:`STOP_SIGNALS`: ``handle_signals`` as given, and for
    ``None`` (the default of every worker), whether it runs in the main thread (the only one
    Python delivers signals to)."""
    if handle_signals is None:
        return threading.current_thread() is threading.main_thread()
    return handle_signals


def log_signal(logger: logging.Logger, signum: int) -> None:
    """Log, at INFO, that signal ``signum`` stops the worker after its running jobs."""
    logger.info("%s: stopping after the running jobs", signal.Signals(signum).name)


async def watch_signals(stop: Callable[[], None], logger: logging.Logger) -> None:
    """Call ``stop()`` (and log it) on every SIGTERM or SIGINT, until cancelled: a task the
    worker runs beside its work while ``run`` handles signals. A second signal calls ``stop()``
    again (every worker's ``stop`` may be called twice).

    Raises:
        NotImplementedError, RuntimeError, ValueError: signals cannot be received here (not
            the main thread, or an event loop without signal support), as
            ``anyio.open_signal_receiver`` raises them.
    """
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for signum in signals:
            log_signal(logger, signum)
            stop()


@contextmanager
def stop_on_signals(on_signal: Callable[[int], None]) -> Iterator[None]:
    """Call ``on_signal(signum)`` on SIGTERM and SIGINT while the block runs; the handlers that
    were installed before are put back when it ends (also when installing failed halfway).

    ``on_signal`` runs between two bytecodes of the main thread, which may hold any lock at
    that moment: it must take none (set a flag the worker's loop looks at; log from there).

    Raises:
        ValueError: not in the main thread (``signal.signal`` refuses).
    """
    previous: dict[signal.Signals, _Handler] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        on_signal(signum)

    try:
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)
