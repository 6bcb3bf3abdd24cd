# GENERATED from _client_async.py by scripts/unasync.py: do not edit.
"""The Workq client classes on their transports, public in ``workq_client.aio`` and
``workq_client.client``. They only move bytes; the commands are in the ``_api`` modules.

``_client_sync.py`` is generated from ``_client_async.py`` by ``scripts/unasync.py``; a test fails
when the two drift apart. They differ only where their transports do (:mod:`jobwire._transport`):
the async client connects on first use, reopens a connection under a lock its tasks share, and
closes the connection when a caller gives up on a ``run``/``result`` (see ``aio.py``); the
blocking client connects in its constructor, and a call whose ``timeout`` runs out closes the
connection. Both open a new connection on the next call once one has ended. Only the async
client has ``connect()``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from types import TracebackType

from typing_extensions import Self

from jobwire._pending import Pending
from jobwire._streams import SSLOption, tls_context
from jobwire._transport import Transport, connect_limit
from jobwire._url import AddressLike, address_url, describe, resolve_address
from jobwire.errors import ConnectionLost
from jobwire.serializers import Serializer, detail, or_raw

from ._api_sync import Commands
from ._commands import Command, Lease
from ._events import Reply
from ._protocol import MAX_FIELDS, MAX_RECORD_SIZE
from ._records import B
from ._session import WorkqSession

__all__ = ["DEFAULT_PORT", "Client"]

DEFAULT_PORT = 9922

logger = logging.getLogger("workq_client")


class Client(Commands[B]):
    """A blocking connection to a Workq server, opened by the constructor.

    Args:
        address: the server: ``"workq://host:port"``, ``"host:port"``, ``("host", port)``,
            ``"host"`` (port 9922), or a host with ``port`` (the collection's address rule;
            Workq servers listen on TCP only).
        port: the port, when ``address`` is a bare host.
        timeout: seconds a reply may take beyond what the server may hold it back (the wait of
            ``lease``/``result``, wait + TTR of ``run``, and those of the blocking commands
            sent before it on the connection); ``None`` for no limit. Running out
            raises ``OperationTimeout`` and closes the connection (the next call reopens it).
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
            bool or an ``ssl.SSLContext`` (TypeError).
        ConnectFailed: the server cannot be reached.
        TLSError: the TLS handshake failed or the server's certificate was refused.
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
        self._lock = Transport.client_lock()
        self._closed = False
        #: How many connections this client has opened (reconnects included).
        self.connections = 0
        self._transport.connect_on_init()
        if self._transport.connected:
            self.connections += 1

    def _new_transport(self) -> Transport:
        return Transport(
            self.address, self._session, timeout=self.timeout,
            connect_timeout=self.connect_timeout, ssl=self.ssl_context,
            server_hostname=self.server_hostname,
        )

    @classmethod
    def from_url(
        cls, url: str, *, serializer: Serializer[B] | None = None, **kwargs: object
    ) -> Client[B]:
        """Connect to ``workq://host[:port]``; ``kwargs`` as for the constructor.

        Raises:
            InvalidAddress: the URL is not of that form.
            ConnectFailed: the server cannot be reached.
            TLSError: the TLS handshake failed or the certificate was refused.
        """
        return cls(url, serializer=serializer, **kwargs)  # type: ignore[arg-type]

    def _ready(self) -> None:
        if self._closed:
            raise ConnectionLost("client is closed")
        if self._transport.connected:
            return
        with self._lock:
            if self._closed:
                raise ConnectionLost("client is closed")
            if self._transport.closed:  # broken: start over on a new connection
                # The lease desk outlives connections: a leased job may be finished on any.
                self._session = WorkqSession(self._session.desk, *self._caps)
                self._transport = self._new_transport()
            # Not connected: the last reconnect failed (ConnectFailed): this call tries again.
            if not self._transport.connected:
                self._transport.connect()
                self.connections += 1

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._closed = True
        held = self._session.desk.unclaimed
        if held:
            logger.warning("closing with %d job(s) leased for lease calls that gave up and not "
                           "taken since; they stay leased until their TTR runs out: %s",
                           len(held), ", ".join(held))
        self._transport.close()

    def __repr__(self) -> str:
        return describe(self, address_url(self.address, "workq"), detail(self._serializer),
                        "tls" if self.ssl_context is not None else "",
                        "closed" if self._closed else "")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the transport: move bytes, nothing else -----------------------------------------------

    def _limit(self, wait: float) -> float | None:
        return None if self.timeout is None else wait + self.timeout

    def _call(self, command: Command, wait: float = 0.0) -> Reply:
        if self._closed or not self._transport.connected:
            self._ready()
        transport, session = self._transport, self._session
        if session.busy_until:  # a blocking call was sent: what it may still hold back
            wait += session.held_back()
        pending = session.submit(command)
        try:
            return transport.call(
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
                # under a lease (aio.py): its job would go to the closed connection.
                transport.close_abandoned()
            raise

    def _call_many(
        self, commands: Iterable[Command], window: int, max_bytes: int | None
    ) -> list[Pending[Reply]]:
        self._ready()
        session = self._session
        return self._transport.pipeline(
            session.submit, commands, window, self._limit(session.held_back()),
            max_bytes=max_bytes, size=Command.wire_size,
        )
