"""The bundled server's I/O: its session on the shared serving loop (``jobwire._serving``).

Everything that decides anything lives in ``_state.py`` (no I/O) and ``_server_protocol.py``
(framing); this module only binds them to a connection of the loop:

* **Requests.** The bytes read are fed to the connection's core, and every complete request
  runs against the state. Bad magic, an unknown type or garbage closes that connection (as
  gearmand does) and nothing else.
* **Output.** The state writes packets into the ``out`` buffer of the connections concerned,
  *other* connections too (WORK_* to attached clients, NOOP to sleeping workers, a job to a
  worker): that buffer is the loop's output buffer of that connection, which the loop sends
  (``Conn.notify`` tells it there is something).
* **A bounded share of the loop** (``jobwire._serving.Turn``: a number of requests or a
  fraction of a millisecond), so another connection is answered while this one floods it.
* **Back-pressure.** While a connection has more than 256 KiB of output unsent, its requests do
  not run and it is not read: a client that sends and never reads is not read either,
  instead of growing the server. A worker's WORK_* packets are forwarded at the pace their
  client reads them: the worker is held while that client has more than 256 KiB unsent.
  (NOOPs never hold anyone: they are a few bytes, one per sleep.)
* **Timers.** The loop sleeps until the state's earliest timer (an epoch job coming due, a
  CAN_DO_TIMEOUT running out) or the next input.
* ``shutdown`` (only with ``allow_shutdown``) closes everything; ``shutdown graceful`` closes
  the listener and exits once the last connection has gone.
* **Limits and TLS** (``max_connections``, ``idle_timeout``, ``line_timeout``, ``ssl_context``;
  all off by default, as gearmand has none) are the loop's, as in the other bundled servers.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from jobwire._listen import Limits, tcp_sockets
from jobwire._serving import (
    ABORT,
    AGAIN,
    CLOSE,
    OUTPUT_CAP,
    READ,
    Connection,
    Log,
    Loop,
    Turn,
    running,
    running_async,
)
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

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    import ssl
    from typing import TypeVar
else:
    from jobwire._typing import TypeVar

__all__ = ["Server", "run_server", "serve", "serve_listening"]

log = Log("gearman_client.server")

#: What a worker sends about a job, forwarded to the job's clients at the pace they read.
_FORWARDED = (pk.WorkData, pk.WorkWarning, pk.WorkStatus, pk.WorkComplete, pk.WorkFail,
              pk.WorkException)
T = TypeVar("T")


class Server:
    """A running bundled server: ``url``, ``host``, ``port``, :meth:`call` and
    :meth:`wait_closed`."""

    def __init__(
        self,
        host: str,
        port: int,
        max_body_size: int,
        handle_prefix: str | None = None,
        *,
        sockets: Sequence[socket.socket] = (),
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
        #: Everything the server knows. It belongs to the server's thread: read or change it
        #: through :meth:`call`.
        self.state = ServerState(handle_prefix=handle_prefix, allow_shutdown=allow_shutdown,
                                 max_functions=max_functions,
                                 max_functions_per_connection=max_functions_per_connection,
                                 max_memory=max_memory)
        self._fds = itertools.count(10)
        #: Connections whose output passed the cap while the current request ran.
        self._pressed: list[Connection] = []
        self._loop = Loop(
            sockets, self._session, clock=time.time, advance=self.state.tick,
            next_deadline=self.state.next_timer, log=log, limits=self.limits,
            ssl_context=ssl_context,
        )

    @property
    def url(self) -> str:
        """``gearman://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"gearman://{host}:{self.port}"

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the server's thread and return its result (or raise its
        exception): how another thread reads or changes :attr:`state` safely."""
        return self._loop.call(function)

    async def wait_closed(self) -> None:
        """Return once the server was shut down (admin ``shutdown``)."""
        import anyio.to_thread

        await anyio.to_thread.run_sync(self._loop.stopped.wait, abandon_on_cancel=True)

    def _session(self, link: Connection) -> _Session:
        return _Session(self, link)

    def _shutdown(self, link: Connection) -> None:
        link.flush()  # the OK, to the admin client first
        self._loop.close_listeners()
        if self.state.shutdown == "now":
            self._loop.stop()
        else:
            self._loop.stop_when_empty()


class _Session:
    """One client, worker or admin connection on the loop."""

    def __init__(self, server: Server, link: Connection) -> None:
        self.server = server
        self.link = link
        self.conn = conn = Conn(next(server._fds), link.host,
                                ServerConnection(max_body_size=server.max_body_size),
                                out=link.out)
        conn.notify = self._notify
        server.state.connect(conn)

    def _notify(self) -> None:
        """Bytes were queued for this connection: send them soon, and note a backlog."""
        link = self.link
        link.wrote()
        if len(self.conn.out) > OUTPUT_CAP:
            self.server._pressed.append(link)

    @property
    def partial(self) -> bool:
        return self.conn.protocol.partial

    def busy(self) -> bool:
        """A sleeping worker, a worker with jobs, a client awaiting jobs: not idle."""
        conn = self.conn
        return conn.sleeping or bool(conn.running) or bool(conn.waiting)

    def received(self, data: bytes) -> None:
        self.conn.protocol.receive_data(data)

    def run(self, turn: Turn) -> int:
        server, conn, link = self.server, self.conn, self.link
        state, protocol, pressed = server.state, conn.protocol, server._pressed
        while True:
            try:
                event = protocol.next_event()
            except RemoteProtocolError as exc:
                log.debug("connection %d: %s", conn.fd, exc)
                return ABORT
            if event is NEED_DATA:
                return READ
            if isinstance(event, ConnectionClosed):
                return CLOSE  # what is queued still goes out
            pressed.clear()
            shutdown = state.shutdown
            if isinstance(event, AdminLine):
                state.admin(conn, event, time.time())
            else:
                state.handle(conn, event, time.time())
            if conn.out:
                link.wrote()
            if state.shutdown != shutdown:  # this request asked for it
                server._shutdown(link)
                return ABORT
            if isinstance(event, _FORWARDED):
                for other in pressed:  # the client reads at its own pace
                    if other is not link and link.wait_for(other):
                        return AGAIN
            if len(conn.out) >= OUTPUT_CAP or turn.ran():
                return AGAIN

    def close(self) -> None:
        self.server.state.disconnect(self.conn, time.time())


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
    """Run a server while the block runs, in a thread of its own (port 0: a free port, see
    ``server.port``); asyncio and trio alike.

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
    limits = Limits(max_connections, idle_timeout, line_timeout)
    sockets = _bind(host, port, max_functions, max_functions_per_connection, max_memory)
    async with serve_listening(
        sockets, host=host, max_body_size=max_body_size, handle_prefix=handle_prefix,
        allow_shutdown=allow_shutdown, limits=limits, ssl_context=ssl_context,
        max_functions=max_functions, max_functions_per_connection=max_functions_per_connection,
        max_memory=max_memory,
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
    with _started(
        sockets, host=host, max_body_size=max_body_size, handle_prefix=handle_prefix,
        allow_shutdown=allow_shutdown, limits=limits, ssl_context=ssl_context,
        max_functions=max_functions, max_functions_per_connection=max_functions_per_connection,
        max_memory=max_memory,
    ) as server:
        async with running_async(server._loop, "gearman server"):
            yield server


@contextlib.contextmanager
def _started(
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
) -> Iterator[Server]:
    """The :class:`Server` on ``sockets``, which it takes over: they are closed on exit."""
    try:
        bound = sockets[0].getsockname()
        yield Server(
            host or str(bound[0]), int(bound[1]), max_body_size, handle_prefix, sockets=sockets,
            allow_shutdown=allow_shutdown, limits=limits, ssl_context=ssl_context,
            max_functions=max_functions,
            max_functions_per_connection=max_functions_per_connection, max_memory=max_memory,
        )
    finally:
        for sock in sockets:
            sock.close()


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
    arguments as for :func:`serve`.

    Raises:
        ValueError, OSError: as for :func:`serve`, raised in the calling thread.
    """
    sockets = _bind(host, port, max_functions, max_functions_per_connection, max_memory)
    with (
        _started(
            sockets, host=host, max_body_size=max_body_size, handle_prefix=handle_prefix,
            allow_shutdown=allow_shutdown,
            limits=Limits(max_connections, idle_timeout, line_timeout), ssl_context=ssl_context,
            max_functions=max_functions,
            max_functions_per_connection=max_functions_per_connection, max_memory=max_memory,
        ) as server,
        running(server._loop, "gearman server"),
    ):
        yield server


def _bind(
    host: str,
    port: int,
    max_functions: int | None,
    max_functions_per_connection: int | None,
    max_memory: int | None,
) -> list[socket.socket]:
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    ServerState(max_functions=max_functions,  # checks them before anything listens
                max_functions_per_connection=max_functions_per_connection, max_memory=max_memory)
    return tcp_sockets(host, port)
