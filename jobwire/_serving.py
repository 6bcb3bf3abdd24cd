"""What the bundled servers share: the timer task, the accept loop, socket tuning, and the
per-connection loop of a protocol served strictly in order.

Each protocol's server keeps its decisions in a pure state module (no awaits, the clock passed
in) and its framing in its Sans-IO core; this module only moves time and connections to them.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, Protocol

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from ._events import NEED_DATA

__all__ = [
    "CLOSE", "InOrderConnection", "Scheduler", "WaitingConn", "accept_loop", "peer_name", "tune",
]

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


class WaitingConn(Protocol):
    """What :class:`InOrderConnection` needs of a server state's per-connection record."""

    #: Set (with ``on_reply`` called) when the state answers a command that had to wait.
    reply: Any
    on_reply: Callable[[], None] | None

    def take_reply(self) -> Any: ...


#: What :meth:`InOrderConnection.answer` returns to end the connection after the replies so far.
CLOSE: Final = object()


class InOrderConnection:
    """Serves one client of a protocol that answers a connection's commands strictly in order,
    where some commands wait for an event (a beanstalk ``reserve``, a Workq ``lease``).

    * **One send per read chunk.** Every complete command in a chunk is answered and the replies
      go out in one ``send``.
    * **A waiting command holds the line.** The replies before it are sent; then the socket is
      only watched (up to ``wait_buffer_cap`` bytes are read ahead, then TCP pushes back) until
      the state answers it. The answer cancels the pending read; no data is lost.
    * **A vanished peer** (end of input) is reported to the state at once (``peer_closed``), so
      a waiting command is answered (TIMED_OUT, -TIMEOUT) rather than handed a job.
    * **Isolation.** Nothing escapes :meth:`run`: a bug costs one connection, never the server.

    Subclasses bind it to their core and state: ``proto``, :meth:`open`, :meth:`answer`,
    :meth:`peer_closed`, :meth:`close`, and ``clock``.
    """

    #: The protocol's server-role core: ``receive_data(bytes)``, ``next_event()``.
    proto: Any
    #: The state's record of this connection, once :meth:`open` ran.
    conn: WaitingConn

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        peer: str,
        *,
        clock: Callable[[], float],
        logger: logging.Logger,
        read_size: int = 1 << 18,
        wait_buffer_cap: int = 1 << 20,
    ) -> None:
        self.stream = stream
        self.peer = peer
        self.clock = clock
        self.logger = logger
        self._read_size = read_size
        self._wait_buffer_cap = wait_buffer_cap
        self._eof = False

    # -- what a protocol supplies --------------------------------------------------------------

    def open(self, now: float) -> WaitingConn:
        """Register the connection with the state; return its record."""
        raise NotImplementedError

    def answer(self, event: object, now: float) -> Any:
        """The reply to ``event`` (a command or a framing error), ``None`` when it waits, or
        :data:`CLOSE` to end the connection."""
        raise NotImplementedError

    def peer_closed(self, now: float) -> None:
        """The client closed its sending side."""
        raise NotImplementedError

    def close(self, now: float) -> None:
        """Forget the connection (release what it held). Called at least once, maybe twice."""
        raise NotImplementedError

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it ends; never raises but cancellation."""
        # Registered here, not in __init__: a task cancelled before its first step never runs
        # its finally clause, and the state must never keep a connection nobody will close.
        self.conn = self.open(self.clock())
        self.logger.info("open %s", self.peer)
        try:
            await self._serve()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self.logger.info("connection %s broke: %r", self.peer, exc)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:  # a bug must cost one connection, never the server
            self.logger.exception("connection %s failed", self.peer)
        finally:
            try:
                self.close(self.clock())
            except Exception:
                self.logger.exception("connection %s: cleanup failed", self.peer)
            with anyio.CancelScope(shield=True):
                await self.stream.aclose()
            self.logger.info("close %s", self.peer)

    async def _receive(self) -> bytes:
        try:
            data = await self.stream.receive(self._read_size)
        except anyio.EndOfStream:
            data = b""
        self.proto.receive_data(data)
        if not data:
            self._eof = True
            self.peer_closed(self.clock())
        return data

    async def _serve(self) -> None:
        proto = self.proto
        while True:
            if not self._eof:
                await self._receive()
            out: list[bytes] = []
            while True:
                event = proto.next_event()
                if event is NEED_DATA:
                    break
                reply = self.answer(event, self.clock())
                if reply is CLOSE:
                    # Release the connection's jobs before the last send, which yields to the
                    # loop: a command another client sends right after must see it gone.
                    self.close(self.clock())
                    if out:
                        await self.stream.send(b"".join(out))
                    return
                if reply is None:  # it waits: the client gets what came before it now
                    if out:
                        await self.stream.send(b"".join(out))
                        out = []
                    reply = await self._wait()
                out.append(reply.encode())
            if out:
                await self.stream.send(b"".join(out))

    async def _wait(self) -> Any:
        """Wait for the state to answer this connection's waiting command, watching the socket
        for a vanished peer.

        Raises:
            anyio.BrokenResourceError, OSError: the connection broke while waiting.
        """
        conn = self.conn
        buffered = 0
        while conn.reply is None:
            if self._eof:  # already closed: the state answers the command now
                self.peer_closed(self.clock())
                break
            with anyio.CancelScope() as scope:
                conn.on_reply = scope.cancel
                if buffered >= self._wait_buffer_cap:
                    # The client pipelines heavily behind a waiting command: stop reading and
                    # let TCP push back until the command is answered.
                    await anyio.sleep_forever()
                buffered += len(await self._receive())
            conn.on_reply = None
        reply = conn.take_reply()
        assert reply is not None, "peer_closed() must answer a waiting command"
        return reply
