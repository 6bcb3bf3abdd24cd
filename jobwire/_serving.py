"""What the bundled servers share: the timer task, the accept loop, socket tuning.

Each protocol's server keeps its decisions in a pure state module (no awaits, the clock passed
in) and its framing in its Sans-IO core; this module only moves time and connections to them.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

__all__ = ["Scheduler", "accept_loop", "peer_name", "tune"]

#: How long to pause accepting after the system refused a connection (EMFILE, ENFILE ...).
RETRY_ACCEPT_AFTER = 0.1


class Scheduler:
    """Fires a server state's timers: sleeps until the earliest deadline or until poked.

    Args:
        advance: fires every timer due at the given time.
        next_deadline: the earliest pending deadline, or ``None``.
        clock: the clock the state's deadlines use (``time.monotonic`` or ``time.time``).
        logger: where a failing timer is reported (the others still fire).
    """

    def __init__(
        self,
        advance: Callable[[float], object],
        next_deadline: Callable[[], float | None],
        clock: Callable[[], float],
        logger: logging.Logger,
    ) -> None:
        self._advance = advance
        self._next_deadline = next_deadline
        self._clock = clock
        self._logger = logger
        self._wakeup = anyio.Event()

    def poke(self) -> None:
        """A new timer may be earlier than the one slept for: look again."""
        self._wakeup.set()

    async def run(self) -> None:
        """Fire timers until cancelled."""
        clock = self._clock
        while True:
            self._wakeup = anyio.Event()
            try:
                self._advance(clock())
            except Exception:  # the failed timer is gone; the others must still fire
                self._logger.exception("timer failed")
            due = self._next_deadline()
            if due is None:
                await self._wakeup.wait()
            else:
                with anyio.move_on_after(max(0.0, due - clock())):
                    await self._wakeup.wait()


def peer_name(stream: anyio.abc.ByteStream) -> str:
    """``host:port`` of the peer, ``unix`` for a unix socket, ``?`` when unknown."""
    try:
        addr = stream.extra(SocketAttribute.remote_address)
    except (anyio.TypedAttributeLookupError, OSError):
        return "?"
    if isinstance(addr, tuple):
        return f"{addr[0]}:{addr[1]}"
    return str(addr) or "unix"


def tune(stream: anyio.abc.ByteStream) -> None:
    """TCP_NODELAY on an accepted TCP connection (replies are small and awaited)."""
    with contextlib.suppress(anyio.TypedAttributeLookupError, OSError):
        sock = stream.extra(SocketAttribute.raw_socket)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def accept_loop(
    accept: Callable[[], Awaitable[anyio.abc.SocketStream]],
    serve_connection: Callable[[anyio.abc.SocketStream], Coroutine[Any, Any, None]],
    tg: anyio.abc.TaskGroup,
    logger: logging.Logger,
) -> None:
    """Accept connections until the listener closes, serving each in its own task of ``tg``
    (tuned first). An accept the system refuses is logged and retried after a pause.

    Raises:
        anyio.ClosedResourceError, anyio.BrokenResourceError: the listener was closed.
    """
    while True:
        try:
            stream = await accept()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise
        except OSError as exc:  # EMFILE, ENFILE, ECONNABORTED...: back off, keep serving
            logger.warning("accept failed: %s", exc)
            await anyio.sleep(RETRY_ACCEPT_AFTER)
            continue
        tune(stream)
        tg.start_soon(serve_connection, stream)
