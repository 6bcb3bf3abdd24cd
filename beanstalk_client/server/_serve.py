"""The bundled server's I/O: its session on the shared serving loop (``jobwire._serving``).

Everything that decides anything lives in ``_state.py`` (no I/O) and ``_server_protocol.py``
(framing); this module only binds them to a connection of the loop. Why it is shaped this way:

* **One send per turn.** A connection's commands read at once are answered and the replies
  of each turn of the loop (up to 64 commands) written with a single ``send``. Pipelined
  clients then cost one syscall per turn instead of one per command, and the puts they
  pipeline are stored without a ``Put`` event or an ``Inserted`` reply
  (:meth:`_Session.fast_path`): 3.7 µs of server CPU per put, 2.3x beanstalkd's pipelined
  put rate on the benchmark machine (8.6 µs). Past 256 KiB of unsent replies the
  connection's commands stop and it is not read until the kernel took them: a client that
  never reads is not read either, as with beanstalkd, rather than growing the server.
* **Strict order per connection.** beanstalkd answers one connection's commands in order and
  reads nothing new while a reserve waits. Here, while a reserve waits, the replies so far are
  sent and what the client sends is only *buffered* (up to a cap), so that a half-close
  (answered TIMED_OUT, as beanstalkd does) or a vanished peer is noticed; the buffered
  commands run after the reserve is answered.
* **No polling.** The loop sleeps until the state's earliest timer (TTR, delay, reserve
  timeout, DEADLINE_SOON, unpause) or the next input. Commands also fire due timers
  themselves, so the answer never depends on the loop having fired them first.
* **Limits and TLS** (``max_connections``, ``idle_timeout``, ``line_timeout``, ``ssl_context``;
  all off by default, as beanstalkd has none): the loop applies them the same way in all three
  bundled servers.

``python -m beanstalk_client.server`` runs the loop of :func:`make_loop` in its main thread;
:func:`serve` and :func:`run_server` run it in a thread of their own.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from jobwire._listen import Limits, close_unix, tcp_sockets, unix_socket
from jobwire._serving import (
    CLOSE,
    OUTPUT_CAP,
    Connection,
    InOrderSession,
    Log,
    Loop,
    Turn,
    running,
    running_async,
)

from .._commands import Put, Quit
from .._events import ConnectionClosed, Reply
from .._server_protocol import BadRequest, ServerConnection
from . import MAX_JOB_SIZE_LIMIT
from ._state import ConnState, ServerState

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    import ssl
    from typing import TypeVar

    from jobwire._url import Address
else:
    from jobwire._typing import TypeVar

__all__ = ["Server", "make_loop", "run_server", "serve", "serve_listening"]

log = Log("beanstalk_client.server")
# While a reserve waits, buffer at most this much of what the client sends after it.
_WAIT_BUFFER_CAP = 1 << 20
T = TypeVar("T")


class Server:
    """A running bundled beanstalk server (what :func:`serve` and :func:`run_server` yield)."""

    def __init__(self, state: ServerState, address: Address, loop: Loop) -> None:
        #: The shared state: tubes, jobs, connections. It belongs to the server's thread:
        #: read or change it through :meth:`call`.
        self.state = state
        #: Where the server listens.
        self.address = address
        self._loop = loop

    @property
    def url(self) -> str:
        """A URL for the client, e.g. ``beanstalk://127.0.0.1:11300`` or ``unix:///tmp/bs``."""
        from jobwire._url import UnixAddress

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

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the server's thread and return its result (or raise its
        exception): how another thread reads or changes :attr:`state` safely, e.g.
        ``server.call(lambda: server.state.connections)``."""
        return self._loop.call(function)

    def __repr__(self) -> str:
        return f"<Server {self.url}>"


class _Session(InOrderSession):
    """One client: beanstalkd's rules on the shared in-order session."""

    record: ConnState

    def __init__(self, conn: Connection, state: ServerState) -> None:
        self.state = state
        self.proto = ServerConnection(max_job_size=state.max_job_size)
        super().__init__(conn, time.monotonic)

    def open(self, now: float) -> ConnState:
        return self.state.connect(now)

    def fast_path(self, out: bytearray, turn: Turn) -> bool:
        """The puts in their common form at the front of the input, stored without a ``Put``
        event or an ``Inserted`` reply: what a pipelining producer sends. The replies and
        the stored jobs are the general path's (a property test in
        tests/beanstalk/test_server.py holds the two to each other)."""
        next_put = self.proto.next_put
        put = next_put()
        if put is None:
            return False
        insert, record, clock = self.state.put, self.record, self.clock
        while True:
            body, priority, delay, ttr = put
            job_id = insert(record, body, priority, delay, ttr, clock())
            if type(job_id) is int:
                out += b"INSERTED %d\r\n" % job_id
            else:
                out += job_id.encode()  # type: ignore[union-attr]
            if len(out) >= OUTPUT_CAP or turn.ran():
                return True
            put = next_put()
            if put is None:
                return False

    def answer(self, event: object, now: float) -> Reply | object | None:
        if type(event) is Put:  # the common case first
            return self.state.execute(self.record, event, now)
        if isinstance(event, BadRequest):
            return self.state.bad_request(self.record, event.code, now, event.counted)
        if isinstance(event, (ConnectionClosed, Quit)):
            return CLOSE
        return self.state.execute(self.record, event, now)  # type: ignore[arg-type]

    def peer_closed(self, now: float) -> None:
        self.state.half_close(self.record, now)  # a waiting reserve gets TIMED_OUT

    def close(self) -> None:
        self.state.disconnect(self.record, time.monotonic())

    def busy(self) -> bool:
        return bool(self.record.reserved)  # a worker busy with its jobs is not idle


def make_loop(
    sockets: Sequence[socket.socket],
    *,
    max_job_size: int = 65535,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_memory: int | None = None,
) -> tuple[Loop, ServerState]:
    """The serving loop of a server on ``sockets`` (listening), and its state.

    Raises:
        ValueError: ``max_job_size`` or ``max_memory`` is out of range.
    """
    _check_max_job_size(max_job_size)
    state = ServerState(time.monotonic(), max_job_size=max_job_size, max_memory=max_memory)
    loop = Loop(
        sockets, lambda conn: _Session(conn, state), clock=time.monotonic,
        advance=state.advance, next_deadline=state.next_deadline, log=log, limits=limits,
        ssl_context=ssl_context, wait_buffer_cap=_WAIT_BUFFER_CAP,
    )
    return loop, state


@contextlib.contextmanager
def _started(
    sockets: Sequence[socket.socket],
    unix_path: str | None,
    max_job_size: int,
    limits: Limits | None,
    ssl_context: ssl.SSLContext | None,
    max_memory: int | None,
) -> Iterator[Server]:
    """The :class:`Server` on ``sockets``, which it takes over: they are closed on exit (and
    ``unix_path``, the file of a unix socket, removed)."""
    from jobwire._url import TCPAddress, UnixAddress

    with contextlib.ExitStack() as stack:
        address: Address
        if unix_path is not None:
            stack.callback(close_unix, sockets[0], unix_path)
            address = UnixAddress(unix_path)
        else:
            for sock in sockets:
                stack.callback(sock.close)
            bound = sockets[0].getsockname()
            address = TCPAddress(str(bound[0]), int(bound[1]))
        loop, state = make_loop(sockets, max_job_size=max_job_size, limits=limits,
                                ssl_context=ssl_context, max_memory=max_memory)
        log.info("listening on %s", address)
        yield Server(state, address, loop)


def _bind(
    host: str, port: int, unix_path: str | None, max_job_size: int, max_memory: int | None
) -> list[socket.socket]:
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    _check_max_job_size(max_job_size)  # before anything is bound
    if max_memory is not None and max_memory < 1:
        raise ValueError(f"max_memory must be at least 1, got {max_memory}")
    return [unix_socket(unix_path)] if unix_path is not None else tcp_sockets(host, port)


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
    """Run a beanstalkd 1.12-compatible server while the ``async with`` block runs (in a
    thread of its own; asyncio and trio alike).

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
            ``jobwire._listen.server_tls_context``).
        max_memory: bytes the stored jobs may take (body and a fixed overhead each); a
            ``put`` past it is answered ``OUT_OF_MEMORY``, until deletes free enough.

    Yields:
        The :class:`Server`, already listening.

    Raises:
        ValueError: ``port``, ``max_job_size`` or a limit is out of range.
        OSError: the address cannot be bound.
    """
    limits = Limits(max_connections, idle_timeout, line_timeout)
    sockets = _bind(host, port, unix_path, max_job_size, max_memory)
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
    """:func:`serve` on sockets that already listen (bound with ``jobwire._listen``). Takes
    them over: they are closed on exit, and ``unix_path``, the file of a unix socket, removed.

    Raises:
        ValueError: ``max_job_size`` is out of range.
    """
    with _started(sockets, unix_path, max_job_size, limits, ssl_context, max_memory) as server:
        async with running_async(server._loop, "beanstalk server"):
            yield server


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
    """:func:`serve` for synchronous code and tests: the server runs in a background thread;
    yields the :class:`Server` once it is listening, and on exit closes every connection,
    stops the loop and joins the thread.

    Args:
        host, port, unix_path, max_job_size, max_connections, idle_timeout, line_timeout,
        ssl_context, max_memory: as for :func:`serve`.

    Raises:
        ValueError, OSError: as for :func:`serve`, raised in the calling thread.
    """
    limits = Limits(max_connections, idle_timeout, line_timeout)
    sockets = _bind(host, port, unix_path, max_job_size, max_memory)
    with (
        _started(sockets, unix_path, max_job_size, limits, ssl_context, max_memory) as server,
        running(server._loop, "beanstalk server"),
    ):
        yield server
