"""The bundled server's I/O: listeners, a reader and a writer task per connection, a scheduler.

Everything that decides anything lives in ``_state.py`` (no awaits) and ``_server_protocol.py``
(framing); this module only moves bytes and time between them:

* **Reader task.** Reads a chunk, runs every complete request in it against the state, and lets
  the writer send what was produced. Bad magic, an unknown type or garbage closes that
  connection (as gearmand does) and nothing else.
* **A bounded share of the loop.** The reader yields to the event loop when its turn is spent
  (``jobwire._serving.Turn``: a number of requests or a fraction of a millisecond), so
  another connection is answered while this one floods the server.
* **Writer task.** The state queues packets for *other* connections too (WORK_* to attached
  clients, NOOP to sleeping workers), so each connection has one writer, woken by
  ``Conn.notify``; it alone sends on the stream, so sends never interleave.
* **Back-pressure.** A reader whose own connection has more than 256 KiB of replies waiting
  stops (reads nothing more) until the writer got them out: a client that sends and never
  reads is not read either, instead of growing the server. A worker's WORK_* packets are
  forwarded at the pace their client reads them: the worker's reader waits while that
  client has more than 256 KiB waiting. (NOOPs never wait: they are a few bytes, one per
  sleep.)
* **Scheduler.** Sleeps until the state's earliest timer (an epoch job coming due, a
  CAN_DO_TIMEOUT running out); the state calls ``on_timer`` when a new timer is the earliest.
* ``shutdown`` (only with ``allow_shutdown``) closes everything; ``shutdown graceful`` closes
  the listener and exits once the last connection has gone.
* **Limits and TLS** (``max_connections``, ``idle_timeout``, ``line_timeout``, ``ssl_context``;
  all off by default, as gearmand has none) are ``jobwire._serving``'s, as in the other
  bundled servers.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Sequence

import anyio
import anyio.abc
import anyio.lowlevel

from jobwire._listen import Limits, tcp_sockets
from jobwire._serving import (
    BROKEN,
    OUTPUT_CAP,
    Gate,
    Scheduler,
    TimedOut,
    Turn,
    accept_loop,
    close_listening,
    drop_unread,
    next_partial_since,
    peer_name,
    receive_within,
    send_within,
)
from jobwire._streams import AsyncStream
from jobwire._url import TCPAddress
from jobwire.errors import RemoteProtocolError

from .. import _packets as pk
from .._events import NEED_DATA, ConnectionClosed
from .._packets import DEFAULT_MAX_BODY_SIZE
from .._server_protocol import AdminLine, ServerConnection
from ._state import (
    DEFAULT_MAX_FUNCTIONS,
    DEFAULT_MAX_FUNCTIONS_PER_CONNECTION,
    Conn,
    ServerState,
)

__all__ = ["Server", "run_server", "serve", "serve_listening"]

logger = logging.getLogger("gearman_client.server")

#: What a worker sends about a job, forwarded to the job's clients at the pace they read.
_FORWARDED = (pk.WorkData, pk.WorkWarning, pk.WorkStatus, pk.WorkComplete, pk.WorkFail,
              pk.WorkException)


class Server:
    """A running bundled server: ``url``, ``host``, ``port``, and :meth:`wait_closed`."""

    def __init__(
        self,
        host: str,
        port: int,
        max_body_size: int,
        handle_prefix: str | None = None,
        *,
        allow_shutdown: bool = False,
        limits: Limits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_functions: int | None = DEFAULT_MAX_FUNCTIONS,
        max_functions_per_connection: int | None = DEFAULT_MAX_FUNCTIONS_PER_CONNECTION,
        max_memory: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.max_body_size = max_body_size
        self.limits = limits or Limits()
        self.state = ServerState(on_timer=self._timer_added, handle_prefix=handle_prefix,
                                 allow_shutdown=allow_shutdown, max_functions=max_functions,
                                 max_functions_per_connection=max_functions_per_connection,
                                 max_memory=max_memory)
        self._scheduler = Scheduler(self.state.tick, self.state.next_timer, time.time, logger)
        self._gate = Gate(self.limits, ssl_context, logger)
        self._fds = itertools.count(10)
        self._closed = anyio.Event()
        self._scope = anyio.CancelScope()
        self._sockets: list[socket.socket] = []
        self._links: dict[Conn, _Link] = {}
        #: Connections whose output passed the cap while the current request ran.
        self._pressed: list[_Link] = []

    @property
    def url(self) -> str:
        """``gearman://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"gearman://{host}:{self.port}"

    async def wait_closed(self) -> None:
        """Return once the server was shut down (admin ``shutdown``)."""
        await self._closed.wait()

    def _timer_added(self) -> None:
        self._scheduler.poke()

    async def _serve_listener(self, sock: socket.socket) -> None:
        async with anyio.create_task_group() as tg:
            await accept_loop(sock, self._connection, tg, logger, self._gate)

    async def _connection(self, stream: AsyncStream) -> None:
        address = stream.address.host if isinstance(stream.address, TCPAddress) else "unix"
        conn = Conn(next(self._fds), address, ServerConnection(max_body_size=self.max_body_size))
        link = _Link(self, conn, stream)
        self.state.connect(conn)
        self._links[conn] = link
        try:
            async with anyio.create_task_group() as tg:
                link.scope = tg.cancel_scope
                tg.start_soon(link.write)
                if await link.read():  # the client closed: what is queued still goes out
                    conn.close = True
                    link.notify()
                else:
                    tg.cancel_scope.cancel()
        except Exception as exc:  # never let one connection take the server down
            logger.debug("connection %d: %r", conn.fd, exc)
        finally:
            link.closed = True
            link.sent.set()
            self.state.disconnect(conn, time.time())
            self._links.pop(conn, None)
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            if self.state.shutdown == "graceful" and not self._links:
                self._stop()

    async def _drained(self, link: _Link, below: int = OUTPUT_CAP) -> None:
        """Wait until at most ``below`` bytes wait for ``link``'s writer (or it closed)."""
        while not link.closed and len(link.conn.out) > below:
            await link.sent.wait()

    async def _shutdown(self, link: _Link) -> None:
        with anyio.move_on_after(1):  # let the OK reach the admin client first
            await self._drained(link, 0)
        for sock in self._sockets:
            close_listening(sock)
        if self.state.shutdown == "now":
            self._stop()

    def _stop(self) -> None:
        self._scope.cancel()
        self._closed.set()


class _Link:
    """The I/O side of one connection: its stream, its reader and its writer."""

    def __init__(self, server: Server, conn: Conn, stream: AsyncStream) -> None:
        self.server = server
        self.conn = conn
        self.stream = stream
        self.closed = False
        #: Set (and replaced) after each send: readers waiting for this output to drain.
        self.sent = anyio.Event()
        self.scope: anyio.CancelScope | None = None
        self._wake = anyio.Event()
        conn.notify = self.notify

    def notify(self) -> None:
        """Bytes were queued for this connection: wake the writer, and note a backlog."""
        self._wake.set()
        if len(self.conn.out) > OUTPUT_CAP:
            self.server._pressed.append(self)

    async def read(self) -> bool:
        """Read and run requests until the connection should close: True when the client
        closed its side (replies still go out), False to close at once (garbage, a timeout,
        a broken socket, a shutdown)."""
        server, conn, state = self.server, self.conn, self.server.state
        protocol = conn.protocol
        limits = server.limits if server.limits.timed else None
        partial_since: float | None = None
        turn = Turn(self.stream)
        while True:
            await server._drained(self)  # our replies wait: read nothing more meanwhile
            try:
                if limits is None:
                    data = await self.stream.receive()
                else:
                    data = await receive_within(self.stream, limits, partial_since, self._busy)
            except TimedOut as exc:
                logger.info("connection %s closed: %s", peer_name(self.stream), exc)
                return False
            except BROKEN:
                return False
            protocol.receive_data(data)
            if turn.read(len(data)):  # a large request arriving takes its share too
                await turn.next()
            answered = False
            while True:
                try:
                    event = protocol.next_event()
                except RemoteProtocolError as exc:
                    logger.debug("connection %d: %s", conn.fd, exc)
                    await drop_unread(self.stream)
                    return False
                if event is NEED_DATA:
                    break
                if isinstance(event, ConnectionClosed):
                    return True
                answered = True
                server._pressed.clear()
                shutdown = state.shutdown
                if isinstance(event, AdminLine):
                    state.admin(conn, event, time.time())
                else:
                    state.handle(conn, event, time.time())
                if conn.out:
                    self.notify()
                if state.shutdown != shutdown:  # this request asked for it
                    await server._shutdown(self)
                    return False
                if isinstance(event, _FORWARDED):
                    for other in [link for link in server._pressed if link is not self]:
                        await server._drained(other)  # the client reads at its own pace
                await server._drained(self)
                if turn.ran():  # this connection had its share: the others run, then it goes on
                    await turn.next()
            if not data:
                return True
            if limits is not None:
                partial_since = next_partial_since(protocol.partial, answered, partial_since)

    def _busy(self) -> bool:
        """A sleeping worker, a worker with jobs, a client awaiting jobs: not idle."""
        conn = self.conn
        return conn.sleeping or bool(conn.running) or bool(conn.waiting)

    async def write(self) -> None:
        """Send what is queued until the connection closes; a failed or overdue send closes
        the connection."""
        conn = self.conn
        limits = self.server.limits
        try:
            while True:
                self._wake = anyio.Event()
                if not conn.out:
                    if conn.close:
                        return
                    await self._wake.wait()
                    continue
                data = bytes(conn.out)
                conn.out.clear()
                await send_within(self.stream, data, limits)
                self.sent.set()
                self.sent = anyio.Event()
        except (TimedOut, *BROKEN) as exc:
            logger.info("connection %s closed: %s", peer_name(self.stream), exc)
            conn.close = True
            if self.scope is not None:
                self.scope.cancel()


@contextlib.asynccontextmanager
async def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    handle_prefix: str | None = None,
    allow_shutdown: bool = False,
    max_connections: int | None = None,
    idle_timeout: float | None = None,
    line_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_functions: int | None = DEFAULT_MAX_FUNCTIONS,
    max_functions_per_connection: int | None = DEFAULT_MAX_FUNCTIONS_PER_CONNECTION,
    max_memory: int | None = None,
) -> AsyncIterator[Server]:
    """Run a server while the block runs (port 0: a free port, see ``server.port``).

    Args:
        host, port: where to listen (a name that resolves to several addresses listens on
            each).
        max_body_size: the largest request body accepted (64 MiB by default).
        handle_prefix: handles are ``{prefix}:{n}`` (default ``H:<hostname>``, as gearmand).
        allow_shutdown: obey the admin ``shutdown [graceful]`` command. Off by default: anyone
            who can connect could stop the server, and gearmand 1.1.20 has no such command
            (it answers ``ERR UNKNOWN_COMMAND``, as this server then does).
        max_connections: connections served at once; one more is accepted and closed at once.
        idle_timeout: close a connection that sends nothing (and takes no replies) for this
            many seconds, unless it is a sleeping worker, runs jobs or awaits them.
        line_timeout: close a connection whose packet or admin line takes longer than this
            many seconds to arrive once its first byte has.
        ssl_context: serve TLS with this server-side context
            (``jobwire._listen.server_tls_context``).
        max_functions: functions known at once (100,000 by default; ``None``: no limit).
            One more CAN_DO gets ``ERROR MEMORY_ALLOCATION_FAILURE`` and is not registered, a
            submit of a new function ``ERROR QUEUE_ERROR``.
        max_functions_per_connection: functions one connection may register (10,000 by
            default; ``None``: no limit); one more CAN_DO gets
            ``ERROR MEMORY_ALLOCATION_FAILURE``. A function nobody serves or queues is
            forgotten (unless an admin made it or gave it a ``maxqueue``).
        max_memory: bytes of stored jobs (each counts its data, function name, unique id,
            reducer and 256 bytes; ``None``, the default: no limit). A submit that would pass
            it gets ``ERROR QUEUE_ERROR`` (``QueueFull`` in jobwire's client).

    Raises:
        ValueError: ``port`` or a limit is out of range.
        OSError: the address cannot be bound.
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    limits = Limits(max_connections, idle_timeout, line_timeout)
    ServerState(max_functions=max_functions,  # checks them before anything listens
                max_functions_per_connection=max_functions_per_connection, max_memory=max_memory)
    async with serve_listening(
        tcp_sockets(host, port), host=host, max_body_size=max_body_size,
        handle_prefix=handle_prefix, allow_shutdown=allow_shutdown, limits=limits,
        ssl_context=ssl_context, max_functions=max_functions,
        max_functions_per_connection=max_functions_per_connection, max_memory=max_memory,
    ) as server:
        yield server


@contextlib.asynccontextmanager
async def serve_listening(
    sockets: Sequence[socket.socket],
    *,
    host: str | None = None,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    handle_prefix: str | None = None,
    allow_shutdown: bool = False,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_functions: int | None = DEFAULT_MAX_FUNCTIONS,
    max_functions_per_connection: int | None = DEFAULT_MAX_FUNCTIONS_PER_CONNECTION,
    max_memory: int | None = None,
) -> AsyncIterator[Server]:
    """:func:`serve` on TCP sockets that already listen (``python -m gearman_client.server``
    binds them with ``jobwire._listen``). Takes them over: they
    are closed on exit. ``host`` is what :attr:`Server.url` shows (default: the bound
    address)."""
    try:
        bound = sockets[0].getsockname()
        server = Server(
            host or str(bound[0]), int(bound[1]), max_body_size, handle_prefix,
            allow_shutdown=allow_shutdown, limits=limits, ssl_context=ssl_context,
            max_functions=max_functions,
            max_functions_per_connection=max_functions_per_connection, max_memory=max_memory,
        )
        server._sockets.extend(sockets)
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                with server._scope:
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(server._scheduler.run)
                        async with anyio.create_task_group() as accepting:
                            for sock in sockets:
                                accepting.start_soon(server._serve_listener, sock)
                        inner.cancel_scope.cancel()
                server._closed.set()

            tg.start_soon(run)
            try:
                yield server
            finally:
                tg.cancel_scope.cancel()
    finally:
        for sock in sockets:
            close_listening(sock)


@contextlib.contextmanager
def run_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    handle_prefix: str | None = None,
    allow_shutdown: bool = False,
    max_connections: int | None = None,
    idle_timeout: float | None = None,
    line_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_functions: int | None = DEFAULT_MAX_FUNCTIONS,
    max_functions_per_connection: int | None = DEFAULT_MAX_FUNCTIONS_PER_CONNECTION,
    max_memory: int | None = None,
) -> Iterator[Server]:
    """Run a server in a background thread while the block runs (for sync code and tests);
    arguments as for :func:`serve`."""
    import anyio.from_thread  # not imported by the server process, which has no portal

    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(
        serve(host, port, max_body_size=max_body_size, handle_prefix=handle_prefix,
              allow_shutdown=allow_shutdown, max_connections=max_connections,
              idle_timeout=idle_timeout, line_timeout=line_timeout, ssl_context=ssl_context,
              max_functions=max_functions,
              max_functions_per_connection=max_functions_per_connection, max_memory=max_memory)
    ) as server:
        yield server
