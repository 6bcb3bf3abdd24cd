"""What the bundled servers share: the timer task, the accept loop, the limits that protect
them from misbehaving clients, TLS, and the per-connection loop of a protocol served strictly
in order.

Each protocol's server keeps its decisions in a pure state module (no awaits, the clock passed
in) and its framing in its Sans-IO core; this module only moves time and connections to them.
Connections are jobwire's own async streams (``_streams.AsyncStream``, ``AsyncTLSStream`` for
TLS) on the accepted non-blocking sockets, on asyncio and trio alike.

What protects a server from its clients (the same in all three):

* **Back-pressure.** A connection is read only when its task asks for bytes (the stream has no
  read-ahead), and its replies are sent before more of its input is read once they pass
  :data:`OUTPUT_CAP` bytes, the send waiting until the kernel took them. A client that sends
  and never reads therefore stops being read (TCP pushes back on it), as with beanstalkd,
  instead of growing the server's memory without bound. (anyio's asyncio socket streams read
  ahead without limit until their first wait for data: that is why they are not used here.)
* **Limits** (:class:`~jobwire._listen.Limits`; all off by default, as in beanstalkd and
  gearmand): a connection limit (one over it is accepted and closed at once), an idle timeout
  and a per-command ("line") timeout.
* **A bounded share of the loop** (:class:`Turn`): a connection task yields to the event loop
  after :data:`TURN` commands (a read counting one per :data:`TURN_READ_UNIT` bytes) or
  :data:`TURN_SECONDS` of work, whichever comes first, even when more of its commands are
  already buffered and its replies are taken at once. Reads and sends that the kernel serves
  at once never wait, so without this one client flooding pipelined commands (and reading
  its replies) kept every other connection waiting until its input ran dry: seconds.
* **TLS** (:func:`~jobwire._listen.server_tls_context`): the handshake runs in the connection's
  own task, under a deadline, so a plaintext or silent client costs one task for a few
  seconds at most; a plaintext client is disconnected when its first bytes fail the handshake.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from ._events import NEED_DATA
from ._listen import Limits
from ._streams import _TLS, AsyncStream, AsyncTLSStream
from ._url import Address, TCPAddress, UnixAddress
from .errors import JobwireConnectionError

__all__ = [
    "BROKEN", "CLOSE", "OUTPUT_CAP", "TURN", "TURN_READ_UNIT", "TURN_SECONDS", "Gate",
    "InOrderConnection", "Turn",
    "Scheduler", "ServeConnection",
    "TimedOut", "WaitingConn", "accept_loop", "close_listening", "drop_unread",
    "next_partial_since", "peer_name", "receive_within", "send_within",
]

#: How long to pause accepting after the system refused a connection (EMFILE, ENFILE ...).
RETRY_ACCEPT_AFTER = 0.1
#: Connections accepted at most per wake-up of the accept loop (the others wait their turn).
ACCEPT_BATCH = 64
#: Replies held for one connection before they are sent and the sending waited for (the
#: back-pressure point): a client that never reads costs the server about this much, plus
#: one reply and one read.
OUTPUT_CAP = 1 << 18
#: Commands a connection runs at most before its task yields to the event loop, so that the
#: other connections run too (0.3-3 ms of work on the benchmark machine, loaded).
TURN = 64
#: Bytes read that count as one command towards :data:`TURN` (a large command arriving takes
#: its share too: one read of 64 KiB counts 16).
TURN_READ_UNIT = 4096
#: Seconds of work after which a connection's turn ends whatever its count: commands differ
#: in cost (a Gearman submit costs several beanstalk puts), and the others' wait is time.
TURN_SECONDS = 0.0002
#: The longest a TLS handshake may take (shorter with a smaller idle or line timeout).
TLS_HANDSHAKE_TIMEOUT = 10.0

#: What serves one accepted connection (it must never raise but cancellation).
ServeConnection = Callable[[AsyncStream], Coroutine[Any, Any, None]]
#: What breaks a connection: the socket failed, or the peer reset it.
BROKEN = (JobwireConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class Turn:
    """One connection's bounded share of the event loop: its task calls :meth:`ran` after each
    command (and :meth:`read` after each read), and yields (:meth:`next`) when that says the
    share is spent: :data:`TURN` commands (a read counting one per :data:`TURN_READ_UNIT`
    bytes) or :data:`TURN_SECONDS` since the turn began. A read or send that had to wait on
    the loop (the stream's ``waits`` moved) already let the others run: a new turn begins.
    """

    __slots__ = ("_ends", "_left", "_stream", "_waits")

    def __init__(self, stream: AsyncStream) -> None:
        self._stream = stream
        self._begin()

    def _begin(self) -> None:
        self._left = TURN
        self._ends = time.monotonic() + TURN_SECONDS
        self._waits = self._stream.waits

    def read(self, size: int) -> bool:
        """``size`` bytes were read: True when the turn is spent."""
        if self._stream.waits != self._waits:
            self._begin()
        self._left -= size // TURN_READ_UNIT
        return self._left <= 0 or time.monotonic() >= self._ends

    def ran(self) -> bool:
        """One command ran: True when the turn is spent."""
        if self._stream.waits != self._waits:
            self._begin()
        self._left -= 1
        return self._left <= 0 or time.monotonic() >= self._ends

    async def next(self) -> None:
        """Let the other tasks run, then begin a new turn."""
        await anyio.lowlevel.checkpoint()
        self._begin()


class TimedOut(Exception):
    """A connection ran over its idle or line timeout (:class:`~jobwire._listen.Limits`)."""


class _ServerTLS(_TLS):
    """The server side of :class:`~jobwire._streams._TLS` (no host name: it is the client
    that checks the certificate)."""

    __slots__ = ()

    def __init__(self, context: ssl.SSLContext) -> None:  # replaces the client-side setup
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)


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


def peer_name(stream: AsyncStream) -> str:
    """``host:port`` of the peer, ``unix`` for a unix socket."""
    address = stream.address
    return str(address) if isinstance(address, TCPAddress) else "unix"


def _peer_address(listening: socket.socket, peer: Any) -> Address:
    if isinstance(peer, tuple):
        return TCPAddress(str(peer[0]), int(peer[1]))
    return UnixAddress(str(listening.getsockname()))


class Gate:
    """What an accepted connection passes before it is served: the connection limit, then
    (in the connection's own task) the TLS handshake when the server has a TLS context.

    One gate serves every listening socket of a server, so the limit counts all of its
    connections.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.ssl_context = ssl_context
        self.logger = logger or logging.getLogger(__name__)
        #: Connections being served (or handshaking) now.
        self.active = 0
        timeouts = [t for t in (self.limits.idle_timeout, self.limits.line_timeout) if t]
        self.handshake_timeout = min([TLS_HANDSHAKE_TIMEOUT, *timeouts])

    def admit(self) -> bool:
        """Count a new connection in; False (and nothing counted) when the limit is reached."""
        limit = self.limits.max_connections
        if limit is not None and self.active >= limit:
            return False
        self.active += 1
        return True

    async def serve(
        self, sock: socket.socket, address: Address, serve_connection: ServeConnection
    ) -> None:
        """Serve an admitted connection (after the TLS handshake, if any) and count it out at
        the end. A failed or overdue handshake closes the connection. Never raises but
        cancellation."""
        try:
            if self.ssl_context is None:
                stream = AsyncStream(sock, address)
            else:
                tls = AsyncTLSStream(sock, address, _ServerTLS(self.ssl_context))
                if not await self._handshake(tls):
                    return
                stream = tls
            await serve_connection(stream)
        finally:
            sock.close()  # already closed unless something failed before serving
            self.active -= 1

    async def _handshake(self, stream: AsyncTLSStream) -> bool:
        failure: object = f"no handshake within {self.handshake_timeout} s"
        with anyio.move_on_after(self.handshake_timeout):
            try:
                await stream.handshake()
                return True
            except Exception as exc:  # TLSError, a broken socket...: one client's problem
                failure = exc
        self.logger.info("connection %s: TLS handshake failed: %s", peer_name(stream), failure)
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        return False


def _tune(sock: socket.socket) -> None:
    """TCP_NODELAY on an accepted TCP connection (replies are small and awaited)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def accept_loop(
    listening: socket.socket,
    serve_connection: ServeConnection,
    tg: anyio.abc.TaskGroup,
    logger: logging.Logger,
    gate: Gate | None = None,
) -> None:
    """Accept connections on a listening socket (``jobwire._listen``) until it is closed
    (:func:`close_listening`) or the task is cancelled, serving each in its own task of ``tg``
    through ``gate``: over its connection limit a connection is closed at once. An accept the
    system refuses (EMFILE ...) is logged and retried after a pause.
    """
    gate = gate or Gate(logger=logger)
    listening.setblocking(False)
    while True:
        try:
            await anyio.wait_readable(listening)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ValueError, OSError):
            return  # closed under us
        for _ in range(ACCEPT_BATCH):  # what the kernel has queued, in one wake-up
            try:
                sock, peer = listening.accept()
            except (BlockingIOError, InterruptedError):
                break  # nothing more queued
            except ConnectionAbortedError:
                continue  # the client gave up meanwhile
            except OSError as exc:  # EMFILE, ENFILE...: back off, keep serving
                if listening.fileno() < 0:
                    return
                logger.warning("accept failed: %s", exc)
                await anyio.sleep(RETRY_ACCEPT_AFTER)
                break
            address = _peer_address(listening, peer)
            if not gate.admit():
                logger.info("connection %s refused: %d connections already", address,
                            gate.active)
                sock.close()
                continue
            sock.setblocking(False)
            _tune(sock)
            tg.start_soon(gate.serve, sock, address, serve_connection)


def close_listening(listening: socket.socket) -> None:
    """Close a listening socket that :func:`accept_loop` may be waiting on (it returns)."""
    if listening.fileno() >= 0:
        anyio.notify_closing(listening)
        listening.close()


async def receive_within(
    stream: AsyncStream,
    limits: Limits,
    partial_since: float | None,
    busy: Callable[[], bool] = lambda: False,
) -> bytes:
    """The next bytes from ``stream`` (``b""`` at its end), under ``limits``' idle timeout
    (which does not run out while ``busy()``) and line timeout (counted from
    ``partial_since``, ``time.monotonic()`` when the incomplete command began to arrive).

    Raises:
        TimedOut: nothing came for ``idle_timeout``, or the command took over
            ``line_timeout``.
        ConnectionLost: the connection broke.
    """
    while True:
        now = time.monotonic()
        deadline, why = math.inf, ""
        if limits.idle_timeout is not None:
            deadline, why = now + limits.idle_timeout, "idle"
        line = limits.line_timeout
        if partial_since is not None and line is not None and partial_since + line < deadline:
            deadline, why = partial_since + line, "line"
        with anyio.move_on_after(deadline - now):
            return await stream.receive()
        if why == "idle" and busy():
            continue
        if why == "idle":
            raise TimedOut(f"idle for {limits.idle_timeout} s")
        raise TimedOut(f"a command took over {limits.line_timeout} s to arrive")


async def send_within(stream: AsyncStream, data: bytes, limits: Limits | None) -> None:
    """Send ``data``, waiting until the kernel took it: at most ``limits.idle_timeout``.

    Raises:
        TimedOut: the client did not take its replies within ``idle_timeout``.
        ConnectionLost: the connection broke.
    """
    if limits is None or limits.idle_timeout is None:
        await stream.send(data)
        return
    with anyio.move_on_after(limits.idle_timeout):
        await stream.send(data)
        return
    raise TimedOut(f"replies not taken for {limits.idle_timeout} s")


async def drop_unread(stream: AsyncStream, cap: int = 1 << 20) -> None:
    """Read and drop what the client has already sent (up to ``cap`` bytes), without waiting
    for more, before a connection the server ends is closed: closing a socket with unread
    input makes the kernel reset the connection, and the client may then lose the replies
    sent just before."""
    dropped = 0
    while dropped < cap:
        with anyio.move_on_after(0) as scope:  # only what is already there
            try:
                data = await stream.receive()
            except BROKEN:
                return
        if scope.cancelled_caught or not data:
            return
        dropped += len(data)


def next_partial_since(partial: bool, answered: bool, since: float | None) -> float | None:
    """When the command now buffered began to arrive, after a chunk was read and handled:
    ``None`` when nothing is buffered, now when commands were answered (the rest is a new
    one) or none was buffered before, else the earlier time."""
    if not partial:
        return None
    return time.monotonic() if answered or since is None else since


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

    * **One send per read chunk.** Every complete command in a chunk (up to 64 KiB) is answered
      and the replies go out in one ``send``.
    * **A bounded share of the loop** (:class:`Turn`). When its turn is spent the task yields
      to the event loop before it goes on, so another connection is answered while this one
      floods the server. The replies of the chunk still go out in one ``send``.
    * **A waiting command holds the line.** The replies before it are sent; then the socket is
      only watched (up to ``wait_buffer_cap`` bytes are read ahead, then TCP pushes back) until
      the state answers it. The answer cancels the pending read; no data is lost.
    * **Back-pressure.** Once the replies gathered pass ``output_cap`` bytes they are sent,
      and the send waits for the kernel to take them, before the next command runs: a client
      that never reads stops being read instead of growing the server.
    * **A vanished peer** (end of input) is reported to the state at once (``peer_closed``), so
      a waiting command is answered (TIMED_OUT, -TIMEOUT) rather than handed a job.
    * **Timeouts** (``limits``): a connection that sends nothing for ``idle_timeout`` (and is
      not :meth:`busy`), that does not take its replies for as long, or whose command takes
      longer than ``line_timeout`` to arrive, is closed. A waiting command suspends both.
    * **Isolation.** Nothing escapes :meth:`run`: a bug costs one connection, never the server.

    Subclasses bind it to their core and state: ``proto``, :meth:`open`, :meth:`answer`,
    :meth:`peer_closed`, :meth:`close`, ``clock``, and optionally :meth:`busy`.
    """

    #: The protocol's server-role core: ``receive_data(bytes)``, ``next_event()``, and
    #: ``partial`` (True while part of a command is buffered).
    proto: Any
    #: The state's record of this connection, once :meth:`open` ran.
    conn: WaitingConn

    def __init__(
        self,
        stream: AsyncStream,
        peer: str,
        *,
        clock: Callable[[], float],
        logger: logging.Logger,
        wait_buffer_cap: int = 1 << 20,
        output_cap: int = OUTPUT_CAP,
        limits: Limits | None = None,
    ) -> None:
        self.stream = stream
        self.peer = peer
        self.clock = clock
        self.logger = logger
        self._wait_buffer_cap = wait_buffer_cap
        self._output_cap = output_cap
        self._limits = limits if limits is not None and limits.timed else None
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

    def busy(self) -> bool:
        """True while the connection may stay silent without being idle (it holds work)."""
        return False

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it ends; never raises but cancellation."""
        # Registered here, not in __init__: a task cancelled before its first step never runs
        # its finally clause, and the state must never keep a connection nobody will close.
        self.conn = self.open(self.clock())
        self.logger.info("open %s", self.peer)
        try:
            await self._serve()
        except TimedOut as exc:
            self.logger.info("connection %s closed: %s", self.peer, exc)
        except BROKEN as exc:
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
        data = await self.stream.receive()
        self._received(data)
        return data

    def _received(self, data: bytes) -> None:
        self.proto.receive_data(data)
        if not data:
            self._eof = True
            self.peer_closed(self.clock())

    async def _receive_in_time(self, partial_since: float | None) -> int:
        """:meth:`_receive` under the idle and line timeouts (see :func:`receive_within`);
        returns how many bytes came.

        Raises:
            TimedOut: the connection stayed idle, or its command incomplete, for too long.
        """
        if self._limits is None:
            return len(await self._receive())
        data = await receive_within(self.stream, self._limits, partial_since, self.busy)
        self._received(data)
        return len(data)

    async def _send(self, data: bytes) -> None:
        await send_within(self.stream, data, self._limits)

    async def _serve(self) -> None:
        proto = self.proto
        next_event, answer, clock = proto.next_event, self.answer, self.clock
        cap = self._output_cap
        timed = self._limits is not None
        partial_since: float | None = None
        turn = Turn(self.stream)
        while True:
            if not self._eof and turn.read(await self._receive_in_time(partial_since)):
                await turn.next()  # a large command arriving takes its share too
            out: list[bytes] = []
            size = 0
            answered = False
            while True:
                event = next_event()
                if event is NEED_DATA:
                    break
                answered = True
                reply = answer(event, clock())
                if reply is CLOSE:
                    # Release the connection's jobs before the last send, which yields to the
                    # loop: a command another client sends right after must see it gone.
                    self.close(self.clock())
                    if out:
                        await self._send(b"".join(out))
                    if not self._eof:
                        await drop_unread(self.stream)
                    return
                if reply is None:  # it waits: the client gets what came before it now
                    if out:
                        await self._send(b"".join(out))
                        out, size = [], 0
                    reply = await self._wait()
                data = reply.encode()
                out.append(data)
                size += len(data)
                if size >= cap:  # back-pressure: no more commands until these are taken
                    await self._send(b"".join(out))
                    out, size = [], 0
                if turn.ran():  # this connection had its share: the others run, then it goes on
                    await turn.next()
            if out:
                await self._send(b"".join(out))
            if timed:
                partial_since = next_partial_since(proto.partial, answered, partial_since)

    async def _wait(self) -> Any:
        """Wait for the state to answer this connection's waiting command, watching the socket
        for a vanished peer.

        Raises:
            ConnectionLost: the connection broke while waiting.
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
