"""The bundled server's I/O: listeners, one task per connection, one scheduler task.

Everything that decides anything lives in ``_state.py`` (no awaits) and ``_server_protocol.py``
(framing); this module only moves bytes and time between them:

* **One send per read chunk.** A connection task reads a chunk, runs every complete command in
  it and writes all the replies with one ``send``, so pipelined clients cost one syscall per
  chunk.
* **Strict order per connection.** Workq answers one connection's commands in order. While a
  ``lease``, ``run`` or ``result`` waits, the task sends the replies so far and then only
  buffers what the client sends (up to a cap), to notice a vanished peer: end of input answers
  the waiting command ``-TIMEOUT`` at once (as beanstalkd does for a reserve), so no job is
  leased to a peer that is gone; the connection closes after the replies are sent.
* **No polling.** A scheduler task sleeps until the state's earliest timer (TTR, TTL, scheduled
  time, wait-timeout); the state pokes it when an earlier timer appears. Commands fire due
  timers themselves too, so no answer depends on the scheduler having run first.
* **Isolation.** A connection task never lets an exception out (the task group would take the
  whole server down with it).
* **Back-pressure, limits and TLS** are ``jobwire._serving``'s, the same in all three bundled
  servers: replies past 256 KiB are sent (and their sending waited for) before the next
  command runs, so a client that never reads is not read either; ``max_connections``,
  ``idle_timeout``, ``line_timeout`` and ``ssl_context`` are off by default.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator

import anyio

from jobwire._listen import Limits, tcp_sockets
from jobwire._serving import (
    CLOSE,
    Gate,
    InOrderConnection,
    Scheduler,
    ServeConnection,
    accept_loop,
    close_listening,
    peer_name,
)
from jobwire._streams import AsyncStream
from jobwire._url import TCPAddress

from .._events import ConnectionClosed, Reply
from .._server_protocol import BadRequest, ServerConnection
from . import DEFAULT_PORT
from ._state import ConnState, ServerState

__all__ = ["DEFAULT_PORT", "Server", "run_server", "serve"]

logger = logging.getLogger("workq_client.server")

_WAIT_BUFFER_CAP = 1 << 21


class Server:
    """A running bundled Workq server (what :func:`serve` and :func:`run_server` yield)."""

    def __init__(self, state: ServerState, address: TCPAddress) -> None:
        #: The shared state: queues, jobs, connections. Touch it only from the server's loop.
        self.state = state
        #: Where the server listens.
        self.address = address

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

    def __repr__(self) -> str:
        return f"<Server {self.url}>"


class _Connection(InOrderConnection):
    """One client: Workq's rules on the shared in-order connection loop."""

    conn: ConnState

    def __init__(
        self, stream: AsyncStream, state: ServerState, peer: str, limits: Limits
    ) -> None:
        super().__init__(
            stream, peer, clock=time.time, logger=logger, wait_buffer_cap=_WAIT_BUFFER_CAP,
            limits=limits,
        )
        self.state = state
        self.proto = ServerConnection()

    def open(self, now: float) -> ConnState:
        return self.state.connect(now)

    def answer(self, event: object, now: float) -> Reply | object | None:
        if isinstance(event, BadRequest):
            return event.reply
        if isinstance(event, ConnectionClosed):
            return CLOSE
        return self.state.execute(self.conn, event, now)  # type: ignore[arg-type]

    def peer_closed(self, now: float) -> None:
        self.state.half_close(self.conn, now)  # a waiting lease/run/result gets -TIMEOUT

    def close(self, now: float) -> None:
        self.state.disconnect(self.conn, now)


def _serving(state: ServerState, limits: Limits) -> ServeConnection:
    async def serve_connection(stream: AsyncStream) -> None:
        await _Connection(stream, state, peer_name(stream), limits).run()

    return serve_connection


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
    """Run a Workq 0.2.0-compatible server while the ``async with`` block runs.

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
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    if max_memory is not None and max_memory < 1:  # before anything is bound
        raise ValueError(f"max_memory must be at least 1, got {max_memory}")
    limits = Limits(max_connections, idle_timeout, line_timeout)
    async with serve_listening(
        tcp_sockets(host, port), rng=rng, limits=limits, ssl_context=ssl_context,
        max_memory=max_memory,
    ) as server:
        yield server


@contextlib.asynccontextmanager
async def serve_listening(
    sockets: list[socket.socket],
    *,
    rng: random.Random | None = None,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> AsyncIterator[Server]:
    """:func:`serve` on TCP sockets that already listen (``python -m workq_client.server``
    binds them before it imports the server; see ``jobwire._listen``). Takes them over: they
    are closed on exit."""
    limits = limits or Limits()
    gate = Gate(limits, ssl_context, logger)
    state = ServerState(time.time(), rng=rng, max_memory=max_memory)
    body_error: BaseException | None = None
    try:
        bound = sockets[0].getsockname()
        address = TCPAddress(str(bound[0]), int(bound[1]))
        scheduler = Scheduler(state.advance, state.next_deadline, time.time, logger)
        state.on_timer = scheduler.poke
        async with anyio.create_task_group() as tg:
            tg.start_soon(scheduler.run)
            for sock in sockets:
                tg.start_soon(accept_loop, sock, _serving(state, limits), tg, logger, gate)
            logger.info("listening on %s", address)
            try:
                yield Server(state, address)
            except BaseException as exc:  # re-raised below as is, not wrapped in a group
                body_error = exc
            finally:
                tg.cancel_scope.cancel()
        state.on_timer = None
    finally:
        for sock in sockets:
            close_listening(sock)
    if body_error is not None:
        raise body_error


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
    """Run :func:`serve` in a background thread with its own asyncio event loop (arguments as
    for :func:`serve`).

    Yields the :class:`Server` once it is listening; on exit closes every connection, stops the
    loop and joins the thread.

    Raises:
        ValueError, OSError: as for :func:`serve`, raised in the calling thread.
    """
    import anyio.from_thread  # not imported by the server process, which has no portal

    with (
        anyio.from_thread.start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(serve(
            host, port, rng=rng, max_connections=max_connections, idle_timeout=idle_timeout,
            line_timeout=line_timeout, ssl_context=ssl_context, max_memory=max_memory,
        )) as server,
    ):
        yield server
