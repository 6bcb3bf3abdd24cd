"""The bundled server's I/O: listeners, one task per connection, one scheduler task.

Everything that decides anything lives in ``_state.py`` (no awaits) and ``_server_protocol.py``
(framing); this module only moves bytes and time between them. Why it is shaped this way:

* **One send per read chunk.** A connection task reads a chunk, runs every complete command in
  it, and writes all the replies with a single ``send``. Pipelined clients then cost one
  syscall per chunk instead of one per command, which is what keeps pipelined ``put``
  throughput within reach of the C server. Replies past 256 KiB are sent (and their sending
  waited for) before the next command runs: a client that never reads is not read either,
  as with beanstalkd, rather than growing the server (``jobwire._serving``).
* **Strict order per connection.** beanstalkd answers one connection's commands in order and
  reads nothing new while a reserve waits. Here, while a reserve waits, the task flushes the
  replies so far and then only *buffers* what the client sends (up to a cap), so that it can
  notice a half-close (answered TIMED_OUT, as beanstalkd does) or a vanished peer; the
  buffered commands run after the reserve is answered.
* **No polling.** A single scheduler task sleeps until the state's earliest timer (TTR,
  delay, reserve timeout, DEADLINE_SOON, unpause). The state calls ``on_timer`` when a new
  timer is earlier than every other one, which wakes the scheduler through an ``anyio.Event``.
  Commands also fire due timers themselves, so the answer never depends on the scheduler
  having run first.
* **Isolation.** A connection task never lets an exception out (the task group would take the
  whole server down with it); accept errors such as EMFILE are logged and retried.
* **Limits and TLS** (``max_connections``, ``idle_timeout``, ``line_timeout``, ``ssl_context``;
  all off by default, as beanstalkd has none): ``jobwire._serving`` applies them the same way
  in all three bundled servers.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Sequence

import anyio

from jobwire._listen import Limits, close_unix, tcp_sockets, unix_socket
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
from jobwire._url import Address, TCPAddress, UnixAddress

from .._commands import Put, Quit
from .._events import ConnectionClosed, Reply
from .._server_protocol import BadRequest, ServerConnection
from . import MAX_JOB_SIZE_LIMIT
from ._state import ConnState, ServerState

__all__ = ["Server", "run_server", "serve", "serve_listening"]

logger = logging.getLogger("beanstalk_client.server")
# While a reserve waits, buffer at most this much of what the client sends after it.
_WAIT_BUFFER_CAP = 1 << 20


class Server:
    """A running bundled beanstalk server (what :func:`serve` and :func:`run_server` yield)."""

    def __init__(self, state: ServerState, address: Address) -> None:
        #: The shared state: tubes, jobs, connections. Touch it only from the server's loop.
        self.state = state
        #: Where the server listens.
        self.address = address

    @property
    def url(self) -> str:
        """A URL for the client, e.g. ``beanstalk://127.0.0.1:11300`` or ``unix:///tmp/bs``."""
        if isinstance(self.address, UnixAddress):
            return f"unix://{self.address.path}"
        return f"beanstalk://{self.address}"

    @property
    def max_job_size(self) -> int:
        """The largest job body ``put`` accepts."""
        return self.state.max_job_size

    @property
    def draining(self) -> bool:
        """True once :meth:`drain` was called."""
        return self.state.draining

    def drain(self) -> None:
        """Enter drain mode: from now on ``put`` is answered ``DRAINING``.

        Safe to call from any thread (it only sets a flag).
        """
        self.state.draining = True

    def __repr__(self) -> str:
        return f"<Server {self.url}>"


class _Connection(InOrderConnection):
    """One client: beanstalkd's rules on the shared in-order connection loop."""

    conn: ConnState

    def __init__(
        self, stream: AsyncStream, state: ServerState, peer: str, limits: Limits
    ) -> None:
        super().__init__(
            stream, peer, clock=time.monotonic, logger=logger, wait_buffer_cap=_WAIT_BUFFER_CAP,
            limits=limits,
        )
        self.state = state
        self.proto = ServerConnection(max_job_size=state.max_job_size)

    def open(self, now: float) -> ConnState:
        return self.state.connect(now)

    def answer(self, event: object, now: float) -> Reply | object | None:
        if type(event) is Put:  # the common case first
            return self.state.execute(self.conn, event, now)
        if isinstance(event, BadRequest):
            return self.state.bad_request(self.conn, event.code, now, event.counted)
        if isinstance(event, (ConnectionClosed, Quit)):
            return CLOSE
        return self.state.execute(self.conn, event, now)  # type: ignore[arg-type]

    def peer_closed(self, now: float) -> None:
        self.state.half_close(self.conn, now)  # a waiting reserve gets TIMED_OUT

    def close(self, now: float) -> None:
        self.state.disconnect(self.conn, now)

    def busy(self) -> bool:
        return bool(self.conn.reserved)  # a worker busy with its jobs is not idle


def _serving(state: ServerState, limits: Limits) -> ServeConnection:
    async def serve_connection(stream: AsyncStream) -> None:
        await _Connection(stream, state, peer_name(stream), limits).run()

    return serve_connection


@contextlib.asynccontextmanager
async def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    unix_path: str | None = None,
    max_job_size: int = 65535,
    max_connections: int | None = None,
    idle_timeout: float | None = None,
    line_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> AsyncIterator[Server]:
    """Run a beanstalkd 1.12-compatible server while the ``async with`` block runs.

    Args:
        host: the address to listen on (ignored with ``unix_path``); a name that resolves to
            several addresses (``localhost``) listens on each.
        port: the TCP port; 0 picks a free one (see :attr:`Server.address`).
        unix_path: listen on this unix socket instead of TCP (a stale socket file there is
            replaced; the file is removed on exit).
        max_job_size: the largest job body ``put`` accepts, 0 to 1 GiB (beanstalkd's ``-z``).
        max_connections: connections served at once; one more is accepted and closed at once.
        idle_timeout: close a connection that sends nothing (and takes no replies) for this
            many seconds, unless it waits in a reserve or holds reserved jobs.
        line_timeout: close a connection whose command (line and body) takes longer than
            this many seconds to arrive once its first byte has.
        ssl_context: serve TLS with this server-side context (see
            ``jobwire._serving.server_tls_context``).
        max_memory: bytes the stored jobs may take (body and a fixed overhead each); a
            ``put`` past it is answered ``OUT_OF_MEMORY``, until deletes free enough.

    Yields:
        The :class:`Server`, already listening.

    Raises:
        ValueError: ``port``, ``max_job_size`` or a limit is out of range.
        OSError: the address cannot be bound.
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    _check_max_job_size(max_job_size)  # before anything is bound
    if max_memory is not None and max_memory < 1:
        raise ValueError(f"max_memory must be at least 1, got {max_memory}")
    limits = Limits(max_connections, idle_timeout, line_timeout)
    sockets = [unix_socket(unix_path)] if unix_path is not None else tcp_sockets(host, port)
    async with serve_listening(
        sockets, unix_path=unix_path, max_job_size=max_job_size, limits=limits,
        ssl_context=ssl_context, max_memory=max_memory,
    ) as server:
        yield server


@contextlib.asynccontextmanager
async def serve_listening(
    sockets: Sequence[socket.socket],
    *,
    unix_path: str | None = None,
    max_job_size: int = 65535,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> AsyncIterator[Server]:
    """:func:`serve` on sockets that already listen (``python -m beanstalk_client.server``
    binds them with ``jobwire._listen``). Takes them over: they
    are closed on exit, and ``unix_path``, the file of a unix socket, removed.

    Raises:
        ValueError: ``max_job_size`` is out of range.
    """
    _check_max_job_size(max_job_size)
    limits = limits or Limits()
    gate = Gate(limits, ssl_context, logger)
    state = ServerState(time.monotonic(), max_job_size=max_job_size, max_memory=max_memory)
    body_error: BaseException | None = None
    with contextlib.ExitStack() as stack:
        address: Address
        if unix_path is not None:
            stack.callback(close_unix, sockets[0], unix_path)
            address = UnixAddress(unix_path)
        else:
            for sock in sockets:
                stack.callback(close_listening, sock)
            bound = sockets[0].getsockname()
            address = TCPAddress(str(bound[0]), int(bound[1]))
        scheduler = Scheduler(state.advance, state.next_deadline, time.monotonic, logger)
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
    if body_error is not None:
        raise body_error


def _check_max_job_size(max_job_size: int) -> None:
    if not 0 <= max_job_size <= MAX_JOB_SIZE_LIMIT:
        raise ValueError(f"max_job_size must be in 0..{MAX_JOB_SIZE_LIMIT}, got {max_job_size}")


@contextlib.contextmanager
def run_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    unix_path: str | None = None,
    max_job_size: int = 65535,
    max_connections: int | None = None,
    idle_timeout: float | None = None,
    line_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> Iterator[Server]:
    """Run :func:`serve` in a background thread with its own asyncio event loop.

    For synchronous code and tests: yields the :class:`Server` once it is listening, and on
    exit closes every connection, stops the loop and joins the thread.

    Args:
        host, port, unix_path, max_job_size, max_connections, idle_timeout, line_timeout,
        ssl_context, max_memory: as for :func:`serve`.

    Raises:
        ValueError, OSError: as for :func:`serve`, raised in the calling thread.
    """
    import anyio.from_thread  # not imported by the server process, which has no portal

    with (
        anyio.from_thread.start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(
            serve(host, port, unix_path=unix_path, max_job_size=max_job_size,
                  max_connections=max_connections, idle_timeout=idle_timeout,
                  line_timeout=line_timeout, ssl_context=ssl_context,
                  max_memory=max_memory)
        ) as server,
    ):
        yield server
