# GENERATED from _client_async.py by scripts/unasync.py: do not edit.
"""The beanstalk client classes on their transports, public in ``beanstalk_client.aio`` and
``beanstalk_client.client``. They only move bytes; the commands are in the ``_api`` modules.

``_client_sync.py`` is generated from ``_client_async.py`` by ``scripts/unasync.py``; a test fails
when the two drift apart. They differ only where their transports do (:mod:`jobwire._transport`):
the async client connects on first use and a call whose ``timeout`` runs out abandons its
Pending; the blocking client connects in its constructor and such a call closes the connection.
Only the async client has ``connect()`` and the dedicated reader its worker uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TypeVar, cast

from typing_extensions import Self

from jobwire._pending import Pending as BasePending
from jobwire._streams import SSLOption, tls_context
from jobwire._transport import Transport, connect_limit
from jobwire._url import Address, AddressLike, address_url, describe, resolve_address
from jobwire.serializers import RAW, Serializer, detail, or_raw

from ._api_sync import Commands
from ._commands import Command
from ._events import Reply
from ._job import B
from ._protocol import DEFAULT_MAX_BODY_SIZE
from ._session import Pending, Session

__all__ = ["DEFAULT_PORT", "Client"]

R = TypeVar("R", bound=Reply)

DEFAULT_PORT = 11300


class Client(Commands[B]):
    """A blocking connection to a beanstalkd server, opened by the constructor.

    Args:
        address: the server: ``"beanstalk://host:port"``, ``"unix:///path"``, ``"host:port"``,
            ``("host", port)``, ``"host"`` (port 11300), a unix socket path, or a host with
            ``port`` (the collection's one address rule, ``jobwire._url``).
        port: the port, when ``address`` is a bare host.
        timeout: seconds a reply may take beyond what the command itself waits (a
            reserve's ``wait``); ``None`` for no limit. Running out raises
            ``OperationTimeout`` and closes the connection.
        connect_timeout: seconds to connect and finish the TLS handshake (default:
            ``timeout``, or 10 when that is ``None``: a connect is always bounded).
        max_body_size: largest job body or stats document accepted from the server.
        ssl: TLS: ``True`` (the default context: certificate and host name checked) or an
            ``ssl.SSLContext``; ``None``/``False``: plain. A refused certificate raises
            ``jobwire.TLSError``; there is never a plaintext fallback.
        server_hostname: the name the server's certificate must carry (default: the host).
        serializer: how bodies become bytes and back (``jobwire.serializers``): ``TEXT`` for
            ``str`` bodies, ``JSON`` for JSON values, or your own; default: bytes as they are.
            ``put`` raises ``SerializationError`` for a body it cannot write; a job whose body
            it cannot read raises ``DeserializationError`` (with the job's id).

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
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
        serializer: Serializer[B] | None = None,
    ) -> None:
        self.address: Address = resolve_address(
            address, port, scheme="beanstalk", default_port=DEFAULT_PORT
        )
        self._serializer = or_raw(serializer)
        self._raw = serializer is None or cast(object, serializer) is RAW
        self.timeout = timeout
        self.connect_timeout = connect_limit(connect_timeout, timeout)
        #: The TLS context of ``ssl=`` (``None``: plain TCP).
        self.ssl_context = tls_context(ssl)
        self.server_hostname = server_hostname
        self._session = Session(max_body_size=max_body_size)
        self._transport = Transport(
            self.address, self._session, timeout=timeout, connect_timeout=self.connect_timeout,
            ssl=self.ssl_context, server_hostname=server_hostname,
        )
        self._transport.connect_on_init()

    @classmethod
    def from_url(
        cls, url: str, *, serializer: Serializer[B] | None = None, **kwargs: object
    ) -> Client[B]:
        """Connect to ``beanstalk://host[:port]`` or ``unix:///path``; ``kwargs`` as for the
        constructor.

        Raises:
            InvalidAddress: the URL is not one of those forms.
            ConnectFailed: the server cannot be reached.
            TLSError: the TLS handshake failed or the certificate was refused.
        """
        return cls(url, serializer=serializer, **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the connection (what ``quit`` does); the server releases the jobs it held."""
        self._transport.close()

    def __repr__(self) -> str:
        return describe(
            self, address_url(self.address, "beanstalk"), f"tube={self._tube!r}",
            detail(self._serializer), "tls" if self.ssl_context is not None else "",
            "closed" if self._transport.closed else "",
        )

    def __enter__(self) -> Self:
        self._transport.connect_on_use()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the transport: move bytes, nothing else -----------------------------------------------

    def _limit(self, wait: float | None) -> float | None:
        return None if wait is None or self.timeout is None else wait + self.timeout

    def _call(self, command: Command[R], wait: float | None = 0.0) -> R:
        transport = self._transport
        if not transport.connected:
            transport.connect_on_use()
        timeout = self.timeout
        return transport.call(
            self._session.submit(command),
            None if wait is None or timeout is None else wait + timeout,
        )

    def _call_many(
        self, commands: Iterable[Command[Reply]], window: int
    ) -> list[Pending[Reply]]:
        self._transport.connect_on_use()
        return self._transport.pipeline(
            self._session.submit, commands, window, self._limit(0.0)
        )

    # -- for workers: submit without waiting, one dedicated reader ------------------------------

    def _submit_nowait(
        self, command: Command[R], then: Callable[[BasePending[R]], None] | None = None
    ) -> Pending[R]:
        """Queue ``command``; ``then(pending)`` runs (synchronously, in whichever task reads)
        when its reply or failure arrives. Bytes go out on the next :meth:`_flush`."""
        pending = self._session.submit(command)
        pending.then = then
        return pending

    def _flush(self) -> None:
        self._transport.flush()
