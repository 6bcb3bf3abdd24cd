"""``AsyncClient``: the beanstalk client on anyio (asyncio and trio). It only moves bytes.

Many tasks may share one client. Each call submits its command to the :class:`Session` (which
queues the bytes and a Pending in FIFO order, with no await in between, so the order on the
wire is the order of the FIFO) and then waits for its Pending:

* Writing: whichever task finds no write in progress becomes the writer and sends everything
  queued, its own bytes and others', until the queue is empty. The send is shielded from
  cancellation: a half-written command would put the stream out of step for everyone.
* Reading: whichever waiting task finds no read in progress becomes the reader; it reads, feeds
  the Session (which completes every Pending the bytes answer and wakes their tasks) and stops
  once its own reply is in, handing the reader role to the oldest task still waiting.
* A task that is cancelled, or whose ``timeout`` runs out, abandons its Pending: its reply is
  dropped when it arrives, never given to another caller; a job reserved for it is released.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TypeVar

import anyio

from jobwire._streams import AsyncStream
from jobwire._url import Address, TCPAddress, UnixAddress, parse_url
from jobwire.errors import ConnectionLost, JobwireError, OperationTimeout

from ._api_async import AsyncCommands
from ._commands import Command
from ._events import Reply
from ._protocol import DEFAULT_MAX_BODY_SIZE
from ._session import Pending, Session

__all__ = ["AsyncClient"]

R = TypeVar("R", bound=Reply)

DEFAULT_PORT = 11300


class AsyncClient(AsyncCommands):
    """An async connection to a beanstalkd server.

    ``async with AsyncClient("127.0.0.1", 11300) as client:`` connects and closes; without the
    context manager, the first call connects (or call :meth:`connect`).

    Args:
        host, port: the server's TCP address.
        unix_path: a unix socket path instead of host and port.
        timeout: seconds a reply may take beyond what the command itself waits (a reserve's own
            timeout); ``None`` for no limit. A call that runs out raises ``OperationTimeout``
            and its reply is dropped when it comes.
        connect_timeout: seconds to connect (default: ``timeout``).
        max_body_size: largest job body or stats document accepted from the server.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        unix_path: str | None = None,
        timeout: float | None = 10.0,
        connect_timeout: float | None = None,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        self.address: Address = UnixAddress(unix_path) if unix_path else TCPAddress(host, port)
        self.timeout = timeout
        self.connect_timeout = timeout if connect_timeout is None else connect_timeout
        self._max_body_size = max_body_size
        self._session = Session(max_body_size=max_body_size)
        self._stream: AsyncStream | None = None
        self._connecting: anyio.Lock | None = None
        self._writing = False
        self._reading = False
        self._closed = False

    @classmethod
    def from_url(cls, url: str, **kwargs: object) -> AsyncClient:
        """Build a client from ``beanstalk://host[:port]`` or ``unix:///path``; ``kwargs`` as for
        the constructor.

        Raises:
            LocalProtocolError: the URL is not one of those forms.
        """
        address = parse_url(url, scheme="beanstalk", default_port=DEFAULT_PORT)
        if isinstance(address, UnixAddress):
            return cls(unix_path=address.path, **kwargs)  # type: ignore[arg-type]
        return cls(address.host, address.port, **kwargs)  # type: ignore[arg-type]

    async def connect(self) -> None:
        """Open the connection now (calls otherwise open it on first use).

        Raises:
            ConnectFailed: the server cannot be reached.
            ConnectionLost: the client was closed.
        """
        if self._stream is not None:
            return
        if self._closed or self._session.broken is not None:
            # Never reconnect silently: the server would forget this connection's use/watch.
            raise ConnectionLost(f"client is closed: {self._session.broken or 'closed by caller'}")
        if self._connecting is None:
            self._connecting = anyio.Lock()
        async with self._connecting:
            if self._stream is None:
                self._stream = await AsyncStream.connect(self.address, self.connect_timeout)

    async def aclose(self) -> None:
        """Close the connection (what ``quit`` does). Callers still waiting get
        ``ConnectionLost``; the server releases every job this connection still holds."""
        if self._closed:
            return
        self._closed = True
        self._session.fail(ConnectionLost("client closed"))
        await self._drop_stream()

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the transport: move bytes, nothing else -----------------------------------------------

    async def _call(self, command: Command[R], wait: float | None = 0.0) -> R:
        if self._stream is None:
            await self.connect()
        pending = self._session.submit(command)
        await self._flush()
        limit = math.inf if wait is None or self.timeout is None else wait + self.timeout
        return await self._wait(pending, limit)

    async def _call_many(
        self, commands: Iterable[Command[Reply]], window: int
    ) -> list[Pending[Reply]]:
        if window < 1:
            raise ValueError("window must be >= 1")
        if self._stream is None:
            await self.connect()
        pendings: list[Pending[Reply]] = []
        limit = math.inf if self.timeout is None else self.timeout
        for command in commands:
            if len(pendings) >= window and not pendings[-window].done:
                # Refill only once half the window has drained: fewer, larger writes.
                await self._flush()
                await self._settle(pendings[-(window // 2) - 1], limit)
            pendings.append(self._session.submit(command))
        await self._flush()
        for pending in pendings:
            await self._settle(pending, limit)
        return pendings

    # -- for workers: submit without waiting, one dedicated reader --------------------------

    def _submit_nowait(
        self, command: Command[R], then: Callable[[Pending[R]], None] | None = None
    ) -> Pending[R]:
        """Queue ``command``; ``then(pending)`` runs (synchronously, in whichever task reads)
        when its reply or failure arrives. Bytes go out on the next flush; replies are read by
        :meth:`_serve_replies` or by any caller waiting for its own reply."""
        pending = self._session.submit(command)
        pending.then = then
        return pending

    async def _serve_replies(self) -> None:
        """Be the reader until cancelled: read, dispatch every reply, flush what callbacks
        queued. Callers meanwhile wait to be woken by their replies.

        Raises:
            ConnectionLost: the connection failed or the server closed it.
        """
        stream = self._stream
        if stream is None:
            await self.connect()
            stream = self._stream
            assert stream is not None
        if self._reading:
            raise RuntimeError("another task is already reading this connection")
        self._reading = True
        try:
            while True:
                await self._flush()
                data = await stream.receive()
                self._session.receive_data(data)
                if self._session.broken is not None:
                    await self._drop_stream()
                    raise ConnectionLost(str(self._session.broken))
        except JobwireError as exc:
            self._session.fail(exc)
            await self._drop_stream()
            raise
        finally:
            self._reading = False
            successor = self._session.oldest_waiting()
            if successor is not None and successor.waker is not None:
                successor.waker()

    async def _settle(self, pending: Pending[Reply], limit: float) -> None:
        try:
            await self._wait(pending, limit)
        except JobwireError:
            if not pending.done:
                raise

    async def _flush(self) -> None:
        if self._writing:
            return  # the task writing now sends our bytes too before it stops
        stream = self._stream
        if stream is None:
            raise ConnectionLost(f"not connected: {self._session.broken or 'closed'}")
        self._writing = True
        try:
            while data := self._session.data_to_send():
                with anyio.CancelScope(shield=True):
                    await stream.send(data)
        except JobwireError as exc:
            self._session.fail(exc)
            raise
        finally:
            self._writing = False

    async def _wait(self, pending: Pending[R], limit: float) -> R:
        try:
            with anyio.fail_after(limit if limit != math.inf else None):
                while not pending.done:
                    if self._reading:
                        woken = anyio.Event()
                        pending.waker = woken.set
                        await woken.wait()
                    else:
                        await self._read_until(pending)
        except TimeoutError:
            pending.abandoned = True
            raise OperationTimeout(
                f"{pending.command.name}: no reply within {limit:g} s from {self.address}"
            ) from None
        except BaseException:
            if not pending.done:
                pending.abandoned = True
            raise
        finally:
            pending.waker = None
        return pending.result()

    async def _read_until(self, pending: Pending[R]) -> None:
        stream = self._stream
        if stream is None:
            raise ConnectionLost(f"not connected: {self._session.broken or 'closed'}")
        self._reading = True
        try:
            while not pending.done:
                data = await stream.receive()
                self._session.receive_data(data)
                if self._session.broken is not None:
                    await self._drop_stream()
                    break
                await self._flush()
        except JobwireError as exc:
            self._session.fail(exc)
            await self._drop_stream()
        finally:
            self._reading = False
            successor = self._session.oldest_waiting()
            if successor is not None and successor.waker is not None:
                successor.waker()

    async def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
