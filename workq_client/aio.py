"""``AsyncClient``: the Workq client on anyio (asyncio and trio). It only moves bytes.

Many tasks may share one client: each call queues its command on the session and waits for its
reply through :class:`jobwire._transport.AsyncTransport` (one writer and one reader at a time,
replies matched in FIFO order). A call that is cancelled, or whose ``timeout`` runs out, abandons
its reply: it is dropped when it arrives, never handed to another caller.

The server answers one connection's commands in order, so a call queued behind a blocking
``lease``/``run``/``result`` waits for it (its ``timeout`` counts from the end of their waits).
An abandoned ``run``/``result`` would hold everything behind it, so the connection is closed
instead (calls in flight with it get ``ConnectionLost``; the next call reconnects) -- unless a
``lease`` is outstanding on it. **An abandoned lease keeps its connection**: the server cannot
be told to drop it, and it leases the next job of one of its names to the connection whether
it is open or not (Workq 0.2.0 does not notice closed connections). Open, the job reaches
this client, which hands it to its next ``lease`` call naming that queue (see
``_session.LeaseDesk``); closed, the job would stay leased to nobody until its TTR. Later calls
wait behind that lease at most the rest of its wait: keep lease waits short.

Workq keeps no per-connection state a client relies on, so when a connection ends -- the server
went away, or it may be out of step after a ``-CLIENT-ERROR`` to a command with a data block --
the next call opens a new one. (The calls in flight on the old one get ``ConnectionLost``.)
Use separate clients for concurrent blocking calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from types import TracebackType

import anyio

from jobwire._pending import Pending
from jobwire._streams import SSLOption, tls_context
from jobwire._transport import AsyncTransport, connect_limit
from jobwire._url import AddressLike, address_url, describe, resolve_address
from jobwire.errors import ConnectionLost
from jobwire.serializers import Serializer, detail, or_raw

from ._api_async import AsyncCommands
from ._commands import Command, Lease
from ._events import Reply
from ._protocol import MAX_FIELDS, MAX_RECORD_SIZE
from ._records import B
from ._session import WorkqSession

__all__ = ["DEFAULT_PORT", "AsyncClient"]

DEFAULT_PORT = 9922

logger = logging.getLogger("workq_client")


class AsyncClient(AsyncCommands[B]):
    """An async connection to a Workq server.

    ``async with AsyncClient("127.0.0.1", 9922) as client:`` connects and closes; without the
    context manager, the first call connects.

    Args:
        address: the server: ``"workq://host:port"``, ``"host:port"``, ``("host", port)``,
            ``"host"`` (port 9922), or a host with ``port`` (the collection's address rule;
            Workq servers listen on TCP only).
        port: the port, when ``address`` is a bare host.
        timeout: seconds a reply may take beyond what the server may hold it back (the wait of
            ``lease``/``result``, wait + TTR of ``run``, and those of the blocking commands
            sent before it on the connection); ``None`` for no limit. Running out
            raises ``OperationTimeout``; the late reply is dropped.
        connect_timeout: seconds to connect and finish the TLS handshake (default:
            ``timeout``, or 10 when that is ``None``: a connect is always bounded).
        max_fields: most keys accepted in one ``inspect`` record (default 256).
        max_record_size: most bytes of keys and values accepted in one ``inspect`` record
            (default 1 MiB + 64 KiB). A reply past either cap, or announcing more records than
            the command asked for, raises ``RemoteProtocolError`` and closes the connection.
        ssl: TLS: ``True`` (the default context: certificate and host name checked) or an
            ``ssl.SSLContext``; ``None``/``False``: plain. Reconnects use it too. A refused
            certificate raises ``jobwire.TLSError``; there is never a plaintext fallback.
        server_hostname: the name the server's certificate must carry (default: the host).
        serializer: how payloads, results and errors become bytes and back
            (``jobwire.serializers``): ``TEXT`` for ``str``, ``JSON`` for JSON values, or your
            own; default: bytes as they are. A call raises ``SerializationError`` for a value
            it cannot write; one it cannot read raises ``DeserializationError`` (with the job's
            id).

    Raises:
        TypeError, InvalidAddress: ``address`` is not a server address, or ``ssl`` is not a
            bool or an ``ssl.SSLContext`` (TypeError); nothing is sent.
    """

    def __init__(
        self,
        address: AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        timeout: float | None = 10.0,
        connect_timeout: float | None = None,
        max_fields: int = MAX_FIELDS,
        max_record_size: int = MAX_RECORD_SIZE,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
        serializer: Serializer[B] | None = None,
    ) -> None:
        self.address = resolve_address(
            address, port, scheme="workq", default_port=DEFAULT_PORT, unix=False
        )
        self._serializer = or_raw(serializer)
        self.timeout = timeout
        self.connect_timeout = connect_limit(connect_timeout, timeout)
        self._caps = (max_fields, max_record_size)
        #: The TLS context of ``ssl=`` (``None``: plain TCP), for every connection it opens.
        self.ssl_context = tls_context(ssl)
        self.server_hostname = server_hostname
        self._session = WorkqSession(None, *self._caps)
        self._transport = self._new_transport()
        self._lock: anyio.Lock | None = None
        self._closed = False
        #: How many connections this client has opened (reconnects included).
        self.connections = 0

    def _new_transport(self) -> AsyncTransport:
        return AsyncTransport(
            self.address, self._session, connect_timeout=self.connect_timeout,
            ssl=self.ssl_context, server_hostname=self.server_hostname,
        )

    @classmethod
    def from_url(
        cls, url: str, *, serializer: Serializer[B] | None = None, **kwargs: object
    ) -> AsyncClient[B]:
        """Build a client from ``workq://host[:port]``; ``kwargs`` as for the constructor.

        Raises:
            InvalidAddress: the URL is not of that form.
        """
        return cls(url, serializer=serializer, **kwargs)  # type: ignore[arg-type]

    async def connect(self) -> None:
        """Open the connection now (a no-op when open); reopen it if it had ended.

        Raises:
            ConnectFailed: the server cannot be reached.
            TLSError: the TLS handshake failed or the server's certificate was refused.
            ConnectionLost: the client was closed.
        """
        if self._closed:
            raise ConnectionLost("client is closed")
        if self._transport.connected:
            return
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._closed:
                raise ConnectionLost("client is closed")
            if self._transport.closed:  # broken: start over on a new connection
                self._session = WorkqSession(self._session.desk, *self._caps)
                self._transport = self._new_transport()
            if not self._transport.connected:
                await self._transport.connect()
                self.connections += 1

    async def aclose(self) -> None:
        """Close the connection; calls still waiting get ``ConnectionLost``.

        A job that reached this client for a lease whose caller gave up, and that no later
        ``lease`` call took, stays leased until its TTR runs out: it is logged (a warning).
        """
        self._closed = True
        held = self._session.desk.unclaimed
        if held:
            logger.warning("closing with %d job(s) leased for lease calls that gave up and not "
                           "taken since; they stay leased until their TTR runs out: %s",
                           len(held), ", ".join(held))
        await self._transport.aclose()

    def __repr__(self) -> str:
        return describe(self, address_url(self.address, "workq"), detail(self._serializer),
                        "tls" if self.ssl_context is not None else "",
                        "closed" if self._closed else "")

    async def __aenter__(self) -> AsyncClient[B]:
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

    def _limit(self, wait: float) -> float | None:
        return None if self.timeout is None else wait + self.timeout

    async def _call(self, command: Command, wait: float = 0.0) -> Reply:
        if self._closed or not self._transport.connected:
            await self.connect()
        transport, session = self._transport, self._session
        if session.busy_until:  # a blocking call was sent: what it may still hold back
            wait += session.held_back()
        pending = session.submit(command)
        try:
            if not transport.flush_nowait():
                await transport.flush()
            return await transport.wait(
                pending, None if self.timeout is None else wait + self.timeout
            )
        except BaseException:
            if (
                not pending.done
                and command.blocking
                and not isinstance(command, Lease)
                and not session.leases_out
            ):
                # An abandoned run/result still blocks this connection on the server, and
                # every call queued behind it: start over on a new connection instead. Never
                # under a lease (module docstring): its job would go to the closed connection.
                with anyio.CancelScope(shield=True):
                    await transport.aclose()
            raise

    async def _call_many(
        self, commands: Iterable[Command], window: int, max_bytes: int | None
    ) -> list[Pending[Reply]]:
        await self.connect()
        session = self._session
        return await self._transport.pipeline(
            session.submit, commands, window, self._limit(session.held_back()),
            max_bytes=max_bytes, size=Command.wire_size,
        )
