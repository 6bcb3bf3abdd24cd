"""The bundled server's I/O: its session on the shared serving loop (``jobwire._serving``).

Everything that decides anything lives in ``_state.py`` (no I/O) and ``_server_protocol.py``
(framing); this module only binds them to a connection of the loop:

* **One send per read.** A connection's commands read at once are answered and the replies
  written with one ``send``, so pipelined clients cost one syscall per read.
* **Strict order per connection.** Workq answers one connection's commands in order. While a
  ``lease``, ``run`` or ``result`` waits, the replies so far are sent and what the client
  sends is only buffered (up to a cap), to notice a vanished peer: end of input answers the
  waiting command ``-TIMEOUT`` at once (as beanstalkd does for a reserve), so no job is leased
  to a peer that is gone; the connection closes after the replies are sent.
* **No polling.** The loop sleeps until the state's earliest timer (TTR, TTL, scheduled time,
  wait-timeout) or the next input. Commands fire due timers themselves too, so no answer
  depends on the loop having fired them first.
* **Back-pressure, limits, TLS and isolation** are the loop's, the same in all three bundled
  servers: past 256 KiB of unsent replies a connection's commands stop and it is not read, so
  a client that never reads is not read either; ``max_connections``, ``idle_timeout``,
  ``line_timeout`` and ``ssl_context`` are off by default; a failing connection is closed
  alone.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from jobwire._listen import Limits, tcp_sockets
from jobwire._serving import CLOSE, Connection, InOrderSession, Log, Loop, running, running_async

from .._events import ConnectionClosed, Reply
from .._server_protocol import BadRequest, ServerConnection
from . import DEFAULT_PORT
from ._state import ConnState, ServerState

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    import random
    import ssl
    from typing import TypeVar

    from jobwire._url import TCPAddress
else:
    from jobwire._typing import TypeVar

__all__ = ["DEFAULT_PORT", "Server", "make_loop", "run_server", "serve", "serve_listening"]

log = Log("workq_client.server")

_WAIT_BUFFER_CAP = 1 << 21
T = TypeVar("T")


class Server:
    """A running bundled Workq server (what :func:`serve` and :func:`run_server` yield)."""

    def __init__(self, state: ServerState, address: TCPAddress, loop: Loop) -> None:
        #: The shared state: queues, jobs, connections. It belongs to the server's thread:
        #: read or change it through :meth:`call`.
        self.state = state
        #: Where the server listens.
        self.address = address
        self._loop = loop

    @property
    def url(self) -> str:
        """A URL for the client, e.g. ``workq://127.0.0.1:9922``."""
        return f"workq://{self.address}"

    @property
    def host(self) -> str:
        return self.address.host

    @property
    def port(self) -> int:
        return self.address.port

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the server's thread and return its result (or raise its
        exception): how another thread reads or changes :attr:`state` safely, e.g.
        ``server.call(lambda: server.state.memory)``."""
        return self._loop.call(function)

    def __repr__(self) -> str:
        return f"<Server {self.url}>"


class _Session(InOrderSession):
    """One client: Workq's rules on the shared in-order session."""

    record: ConnState

    def __init__(self, conn: Connection, state: ServerState) -> None:
        self.state = state
        self.proto = ServerConnection()
        super().__init__(conn, time.time)

    def open(self, now: float) -> ConnState:
        return self.state.connect(now)

    def answer(self, event: object, now: float) -> Reply | object | None:
        if isinstance(event, BadRequest):
            return event.reply
        if isinstance(event, ConnectionClosed):
            return CLOSE
        return self.state.execute(self.record, event, now)  # type: ignore[arg-type]

    def peer_closed(self, now: float) -> None:
        self.state.half_close(self.record, now)  # a waiting lease/run/result gets -TIMEOUT

    def close(self) -> None:
        self.state.disconnect(self.record, time.time())


def make_loop(
    sockets: Sequence[socket.socket],
    *,
    rng: random.Random | None = None,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> tuple[Loop, ServerState]:
    """The serving loop of a server on ``sockets`` (listening), and its state.

    Raises:
        ValueError: ``max_memory`` is out of range.
    """
    state = ServerState(time.time(), rng=rng, max_memory=max_memory)
    loop = Loop(
        sockets, lambda conn: _Session(conn, state), clock=time.time, advance=state.advance,
        next_deadline=state.next_deadline, log=log, limits=limits, ssl_context=ssl_context,
        wait_buffer_cap=_WAIT_BUFFER_CAP,
    )
    return loop, state


@contextlib.contextmanager
def _started(
    sockets: Sequence[socket.socket],
    rng: random.Random | None,
    limits: Limits | None,
    ssl_context: ssl.SSLContext | None,
    max_memory: int | None,
) -> Iterator[Server]:
    """The :class:`Server` on ``sockets``, which it takes over: they are closed on exit."""
    from jobwire._url import TCPAddress

    try:
        bound = sockets[0].getsockname()
        address = TCPAddress(str(bound[0]), int(bound[1]))
        loop, state = make_loop(sockets, rng=rng, limits=limits, ssl_context=ssl_context,
                                max_memory=max_memory)
        log.info("listening on %s", address)
        yield Server(state, address, loop)
    finally:
        for sock in sockets:
            sock.close()


def _bind(host: str, port: int, max_memory: int | None) -> list[socket.socket]:
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    if max_memory is not None and max_memory < 1:  # before anything is bound
        raise ValueError(f"max_memory must be at least 1, got {max_memory}")
    return tcp_sockets(host, port)


@contextlib.asynccontextmanager
async def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    rng: random.Random | None = None,
    max_connections: int | None = None,
    idle_timeout: float | None = None,
    line_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> AsyncIterator[Server]:
    """Run a Workq 0.2.0-compatible server while the ``async with`` block runs (in a thread of
    its own; asyncio and trio alike).

    Args:
        host: the address to listen on (a name that resolves to several addresses, such as
            ``localhost``, listens on each).
        port: the TCP port; 0 picks a free one (see :attr:`Server.address`).
        rng: the random source for multi-name leases (for reproducible tests).
        max_connections: connections served at once; one more is accepted and closed at once.
        idle_timeout: close a connection that sends nothing (and takes no replies) for this
            many seconds, unless a ``lease``, ``run`` or ``result`` of it waits.
        line_timeout: close a connection whose command (line and payload) takes longer than
            this many seconds to arrive once its first byte has.
        ssl_context: serve TLS with this server-side context
            (``jobwire._listen.server_tls_context``).
        max_memory: bytes the stored jobs may take (payload, name, result and a fixed
            overhead each); an ``add``, ``schedule`` or ``run`` past it is answered
            ``-SERVER-ERROR Unable to ...`` as Workq answers a job it cannot store.

    Yields:
        The :class:`Server`, already listening.

    Raises:
        ValueError: ``port`` or a limit is out of range.
        OSError: the address cannot be bound.
    """
    limits = Limits(max_connections, idle_timeout, line_timeout)
    async with serve_listening(
        _bind(host, port, max_memory), rng=rng, limits=limits, ssl_context=ssl_context,
        max_memory=max_memory,
    ) as server:
        yield server


@contextlib.asynccontextmanager
async def serve_listening(
    sockets: Sequence[socket.socket],
    *,
    rng: random.Random | None = None,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> AsyncIterator[Server]:
    """:func:`serve` on TCP sockets that already listen (``python -m workq_client.server``
    binds them before it imports the server; see ``jobwire._listen``). Takes them over: they
    are closed on exit."""
    with _started(sockets, rng, limits, ssl_context, max_memory) as server:
        async with running_async(server._loop, "workq server"):
            yield server


@contextlib.contextmanager
def run_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    rng: random.Random | None = None,
    max_connections: int | None = None,
    idle_timeout: float | None = None,
    line_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> Iterator[Server]:
    """:func:`serve` for synchronous code and tests: the server runs in a background thread
    (arguments as for :func:`serve`).

    Yields the :class:`Server` once it is listening; on exit closes every connection, stops the
    loop and joins the thread.

    Raises:
        ValueError, OSError: as for :func:`serve`, raised in the calling thread.
    """
    limits = Limits(max_connections, idle_timeout, line_timeout)
    sockets = _bind(host, port, max_memory)
    with (
        _started(sockets, rng, limits, ssl_context, max_memory) as server,
        running(server._loop, "workq server"),
    ):
        yield server
