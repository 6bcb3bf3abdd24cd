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
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, cast

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from jobwire._serving import CLOSE, InOrderConnection, Scheduler, accept_loop, peer_name
from jobwire._url import TCPAddress

from .._events import ConnectionClosed, Reply
from .._server_protocol import BadRequest, ServerConnection
from ._state import ConnState, ServerState

__all__ = ["DEFAULT_PORT", "Server", "run_server", "serve"]

logger = logging.getLogger("workq_client.server")

#: Workq's default port.
DEFAULT_PORT = 9922
_READ_SIZE = 1 << 18
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

    def __init__(self, stream: anyio.abc.ByteStream, state: ServerState, peer: str) -> None:
        super().__init__(
            stream, peer, clock=time.time, logger=logger, read_size=_READ_SIZE,
            wait_buffer_cap=_WAIT_BUFFER_CAP,
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


def _serving(state: ServerState) -> Callable[[anyio.abc.SocketStream], Coroutine[Any, Any, None]]:
    async def serve_connection(stream: anyio.abc.SocketStream) -> None:
        await _Connection(stream, state, peer_name(stream)).run()

    return serve_connection


@contextlib.asynccontextmanager
async def serve(
    host: str = "127.0.0.1", port: int = 0, *, rng: random.Random | None = None
) -> AsyncIterator[Server]:
    """Run a Workq 0.2.0-compatible server while the ``async with`` block runs.

    Args:
        host: the address to listen on.
        port: the TCP port; 0 picks a free one (see :attr:`Server.address`).
        rng: the random source for multi-name leases (for reproducible tests).

    Yields:
        The :class:`Server`, already listening.

    Raises:
        ValueError: ``port`` is out of range.
        OSError: the address cannot be bound.
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    state = ServerState(time.time(), rng=rng)
    body_error: BaseException | None = None
    multi = await anyio.create_tcp_listener(local_host=host, local_port=port)
    try:
        listeners = [cast(anyio.abc.SocketListener, lst) for lst in multi.listeners]
        bound = listeners[0].extra(SocketAttribute.local_address)
        assert isinstance(bound, tuple)
        address = TCPAddress(str(bound[0]), int(bound[1]))
        scheduler = Scheduler(state.advance, state.next_deadline, time.time, logger)
        state.on_timer = scheduler.poke
        async with anyio.create_task_group() as tg:
            tg.start_soon(scheduler.run)
            for listener in listeners:
                tg.start_soon(accept_loop, listener.accept, _serving(state), tg, logger)
            logger.info("listening on %s", address)
            try:
                yield Server(state, address)
            except BaseException as exc:  # re-raised below as is, not wrapped in a group
                body_error = exc
            finally:
                tg.cancel_scope.cancel()
        state.on_timer = None
    finally:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await multi.aclose()
    if body_error is not None:
        raise body_error


@contextlib.contextmanager
def run_server(
    host: str = "127.0.0.1", port: int = 0, *, rng: random.Random | None = None
) -> Iterator[Server]:
    """Run :func:`serve` in a background thread with its own asyncio event loop.

    Yields the :class:`Server` once it is listening; on exit closes every connection, stops the
    loop and joins the thread.

    Raises:
        ValueError, OSError: as for :func:`serve`, raised in the calling thread.
    """
    with (
        anyio.from_thread.start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(serve(host, port, rng=rng)) as server,
    ):
        yield server
