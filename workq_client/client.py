"""``Client``: the blocking Workq client on a plain socket. It only moves bytes.

One thread at a time: share a ``Client`` between threads only behind a lock (or give each thread
its own). A call whose ``timeout`` runs out closes the connection, since its reply would
otherwise be read by the next call. Workq keeps no per-connection state a client relies on, so
when a connection ends -- timeout, server gone, or possibly out of step after a ``-CLIENT-ERROR``
to a command with a data block (NOTES.md) -- the next call opens a new one.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType

from jobwire._pending import Pending
from jobwire._transport import Transport
from jobwire._url import AddressLike, resolve_address
from jobwire.errors import ConnectionLost

from ._api_sync import Commands
from ._commands import Command
from ._events import Reply
from ._session import WorkqSession

__all__ = ["Client"]

DEFAULT_PORT = 9922


class Client(Commands):
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
        connect_timeout: seconds to connect (default: ``timeout``).

    Raises:
        ConnectFailed: the server cannot be reached.
    """

    def __init__(
        self,
        address: AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        timeout: float | None = 10.0,
        connect_timeout: float | None = None,
    ) -> None:
        self.address = resolve_address(
            address, port, scheme="workq", default_port=DEFAULT_PORT, unix=False
        )
        self.timeout = timeout
        self.connect_timeout = timeout if connect_timeout is None else connect_timeout
        self._closed = False
        #: How many connections this client has opened (reconnects included).
        self.connections = 0
        self._open()

    def _open(self) -> None:
        # The lease desk outlives connections: a leased job may be finished on any of them.
        old: WorkqSession | None = getattr(self, "_session", None)
        self._session = WorkqSession(old.desk if old is not None else None)
        self._transport = Transport(
            self.address, self._session, timeout=self.timeout,
            connect_timeout=self.connect_timeout,
        )
        self._transport.connect()
        self.connections += 1

    @classmethod
    def from_url(cls, url: str, **kwargs: object) -> Client:
        """Connect to ``workq://host[:port]``; ``kwargs`` as for the constructor.

        Raises:
            InvalidAddress: the URL is not of that form.
            ConnectFailed: the server cannot be reached.
        """
        return cls(url, **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._closed = True
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the transport: move bytes, nothing else -----------------------------------------------

    def _ready(self) -> Transport:
        if self._closed:
            raise ConnectionLost("client is closed")
        if self._transport.closed or self._session.broken is not None:
            self._transport.close()
            self._open()
        return self._transport

    def _limit(self, wait: float) -> float | None:
        return None if self.timeout is None else wait + self.timeout

    def _call(self, command: Command, wait: float = 0.0) -> Reply:
        transport = self._ready()
        session = self._session
        ahead = session.held_back()
        pending = session.submit(command)
        transport.flush()
        return transport.wait(pending, self._limit(ahead + wait))

    def _call_many(
        self, commands: Iterable[Command], window: int, max_bytes: int | None
    ) -> list[Pending[Reply]]:
        transport = self._ready()
        session = self._session
        return transport.pipeline(
            session.submit, commands, window, self._limit(session.held_back()),
            max_bytes=max_bytes, size=Command.wire_size,
        )
