"""The bundled server's I/O: a listener, a reader and a writer task per connection, a scheduler.

Everything that decides anything lives in ``_state.py`` (no awaits) and ``_server_protocol.py``
(framing); this module only moves bytes and time between them:

* **Reader task.** Reads a chunk, runs every complete request in it against the state, and lets
  the writer send what was produced. Bad magic, an unknown type or garbage closes that
  connection (as gearmand does) and nothing else.
* **Writer task.** The state queues packets for *other* connections too (WORK_* to attached
  clients, NOOP to sleeping workers), so each connection has one writer, woken by
  ``Conn.notify``; it alone sends on the stream, so sends never interleave.
* **Scheduler.** Sleeps until the state's earliest timer (an epoch job coming due, a
  CAN_DO_TIMEOUT running out); the state calls ``on_timer`` when a new timer is the earliest.
* ``shutdown`` closes everything; ``shutdown graceful`` closes the listener and exits once the
  last connection has gone.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import cast

import anyio
import anyio.abc
import anyio.from_thread
from anyio.abc import SocketAttribute

from jobwire._serving import Scheduler, accept_loop
from jobwire.errors import RemoteProtocolError

from .._events import NEED_DATA, ConnectionClosed
from .._packets import DEFAULT_MAX_BODY_SIZE
from .._server_protocol import AdminLine, ServerConnection
from ._state import Conn, ServerState

__all__ = ["Server", "run_server", "serve"]

logger = logging.getLogger("gearman_client.server")
_READ_SIZE = 1 << 18


class Server:
    """A running bundled server: ``url``, ``host``, ``port``, and :meth:`wait_closed`."""

    def __init__(
        self, host: str, port: int, max_body_size: int, handle_prefix: str | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.max_body_size = max_body_size
        self.state = ServerState(on_timer=self._timer_added, handle_prefix=handle_prefix)
        self._scheduler = Scheduler(self.state.tick, self.state.next_timer, time.time, logger)
        self._fds = itertools.count(10)
        self._closed = anyio.Event()
        self._scope = anyio.CancelScope()
        self._listeners: list[anyio.abc.SocketListener] = []
        self._conns: set[Conn] = set()

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

    async def _serve_listener(self, listener: anyio.abc.SocketListener) -> None:
        async with anyio.create_task_group() as tg:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await accept_loop(listener.accept, self._connection, tg, logger)

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        try:
            peer = stream.extra(SocketAttribute.remote_address)
            address = str(peer[0]) if isinstance(peer, tuple) else "unix"
        except Exception:
            address = "-"
        conn = Conn(next(self._fds), address, ServerConnection(max_body_size=self.max_body_size))
        self.state.connect(conn)
        self._conns.add(conn)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._writer, conn, stream)
                await self._reader(conn, stream)
                conn.close = True
                if conn.notify is not None:
                    conn.notify()
        except Exception as exc:  # never let one connection take the server down
            logger.debug("connection %d: %r", conn.fd, exc)
        finally:
            self.state.disconnect(conn, time.time())
            self._conns.discard(conn)
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            if self.state.shutdown == "graceful" and not self._conns:
                self._stop()

    async def _reader(self, conn: Conn, stream: anyio.abc.SocketStream) -> None:
        protocol = conn.protocol
        state = self.state
        while not conn.close:
            try:
                data = await stream.receive(_READ_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                data = b""
            except OSError:
                data = b""
            protocol.receive_data(data)
            now = time.time()
            while True:
                try:
                    event = protocol.next_event()
                except RemoteProtocolError as exc:
                    logger.debug("connection %d: %s", conn.fd, exc)
                    return
                if event is NEED_DATA:
                    break
                if isinstance(event, ConnectionClosed):
                    return
                if isinstance(event, AdminLine):
                    state.admin(conn, event, now)
                else:
                    state.handle(conn, event, now)
            if conn.out and conn.notify is not None:
                conn.notify()
            if state.shutdown is not None:
                await self._shutdown(conn)
                return
            if not data:
                return

    async def _writer(self, conn: Conn, stream: anyio.abc.SocketStream) -> None:
        while True:
            wake = anyio.Event()
            conn.notify = wake.set
            if not conn.out and not conn.close:
                await wake.wait()
            if conn.out:
                data = bytes(conn.out)
                conn.out.clear()
                try:
                    await stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    conn.close = True
                    return
            elif conn.close:
                return

    async def _shutdown(self, conn: Conn) -> None:
        # Let the OK reach the admin client first.
        with anyio.move_on_after(1):
            while conn.out:
                await anyio.sleep(0.01)
        for listener in self._listeners:
            with contextlib.suppress(Exception):
                await listener.aclose()
        if self.state.shutdown == "now":
            self._stop()

    def _stop(self) -> None:
        self._scope.cancel()
        self._closed.set()


@contextlib.asynccontextmanager
async def serve(
    host: str = "127.0.0.1", port: int = 0, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    handle_prefix: str | None = None,
) -> AsyncIterator[Server]:
    """Run a server while the block runs (port 0: a free port, see ``server.port``).

    ``handle_prefix`` makes handles ``{prefix}:{n}`` (default ``H:<hostname>``, as gearmand).

    Raises:
        OSError: the address cannot be bound.
    """
    multi = await anyio.create_tcp_listener(local_host=host, local_port=port)
    listeners = [cast(anyio.abc.SocketListener, one) for one in multi.listeners]
    bound = listeners[0].extra(SocketAttribute.local_address)
    server = Server(host, int(bound[1]) if isinstance(bound, tuple) else port, max_body_size,
                    handle_prefix)
    server._listeners.extend(listeners)
    listener = multi
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            with server._scope:
                async with anyio.create_task_group() as inner:
                    inner.start_soon(server._scheduler.run)
                    async with anyio.create_task_group() as accepting:
                        for one in listeners:
                            accepting.start_soon(server._serve_listener, one)
                    inner.cancel_scope.cancel()
            server._closed.set()

        tg.start_soon(run)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await listener.aclose()


@contextlib.contextmanager
def run_server(
    host: str = "127.0.0.1", port: int = 0, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    handle_prefix: str | None = None,
) -> Iterator[Server]:
    """Run a server in a background thread while the block runs (for sync code and tests);
    arguments as for :func:`serve`."""
    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(
        serve(host, port, max_body_size=max_body_size, handle_prefix=handle_prefix)
    ) as server:
        yield server
