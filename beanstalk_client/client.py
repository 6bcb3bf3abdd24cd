"""``Client``: the blocking beanstalk client on a plain socket. It only moves bytes.

One thread at a time: share a ``Client`` between threads only behind a lock (or give each
thread its own). A call whose ``timeout`` runs out closes the connection, since its reply would
otherwise be read by the next call; the server then releases every job it held.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TypeVar

from jobwire._streams import SyncStream
from jobwire._url import Address, TCPAddress, UnixAddress, parse_url
from jobwire.errors import ConnectionLost, JobwireError, OperationTimeout

from ._api_sync import Commands
from ._commands import Command
from ._events import Reply
from ._protocol import DEFAULT_MAX_BODY_SIZE
from ._session import Pending, Session

__all__ = ["Client"]

R = TypeVar("R", bound=Reply)
T = TypeVar("T")

DEFAULT_PORT = 11300


class Client(Commands):
    """A blocking connection to a beanstalkd server, opened by the constructor.

    Args:
        host, port: the server's TCP address.
        unix_path: a unix socket path instead of host and port.
        timeout: seconds a reply may take beyond what the command itself waits (a reserve's own
            timeout); ``None`` for no limit. Running out raises ``OperationTimeout`` and closes
            the connection.
        connect_timeout: seconds to connect (default: ``timeout``).
        max_body_size: largest job body or stats document accepted from the server.

    Raises:
        ConnectFailed: the server cannot be reached.
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
        self._session = Session(max_body_size=max_body_size)
        self._stream: SyncStream | None = SyncStream.connect(
            self.address, timeout if connect_timeout is None else connect_timeout
        )

    @classmethod
    def from_url(cls, url: str, **kwargs: object) -> Client:
        """Connect to ``beanstalk://host[:port]`` or ``unix:///path``; ``kwargs`` as for the
        constructor.

        Raises:
            LocalProtocolError: the URL is not one of those forms.
            ConnectFailed: the server cannot be reached.
        """
        address = parse_url(url, scheme="beanstalk", default_port=DEFAULT_PORT)
        if isinstance(address, UnixAddress):
            return cls(unix_path=address.path, **kwargs)  # type: ignore[arg-type]
        return cls(address.host, address.port, **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the connection (what ``quit`` does); the server releases the jobs it held."""
        self._session.fail(ConnectionLost("client closed"))
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

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

    def _call(self, command: Command[R], wait: float | None = 0.0) -> R:
        pending = self._session.submit(command)
        self._flush()
        limit = None if wait is None or self.timeout is None else wait + self.timeout
        self._wait(pending, limit)
        return pending.result()

    def _call_many(self, commands: Iterable[Command[Reply]], window: int) -> list[Pending[Reply]]:
        if window < 1:
            raise ValueError("window must be >= 1")
        pendings: list[Pending[Reply]] = []
        for command in commands:
            if self._session.in_flight >= window:
                # Refill only once half the window has drained: fewer, larger writes.
                self._flush()
                self._wait(pendings[-(window // 2) - 1], self.timeout)
            pendings.append(self._session.submit(command))
        self._flush()
        if pendings:
            self._wait(pendings[-1], self.timeout)
        return pendings

    def _flush(self) -> None:
        data = self._session.data_to_send()
        if data:
            self._io(lambda stream: stream.send(data, self.timeout))

    def _wait(self, pending: Pending[Reply], limit: float | None) -> None:
        deadline = None if limit is None else time.monotonic() + limit
        timeout = limit
        while not pending.done:
            data = self._io(lambda stream, t=timeout: stream.receive(t))  # type: ignore[misc]
            self._session.receive_data(data)
            if self._session.broken is not None:
                self._drop_stream()
            elif deadline is not None:
                timeout = max(deadline - time.monotonic(), 0.001)
            # receive_data may have queued follow-up commands (none in sync use today)
            self._flush()

    def _io(self, op: Callable[[SyncStream], T]) -> T:
        stream = self._stream
        if stream is None:
            raise ConnectionLost(f"connection closed: {self._session.broken or 'closed by caller'}")
        try:
            return op(stream)
        except OperationTimeout as exc:
            # The reply may still come and would be read by the next call: start over instead.
            self._session.fail(ConnectionLost(f"closed after a timeout: {exc}"))
            self._drop_stream()
            raise
        except JobwireError as exc:
            self._session.fail(exc)
            self._drop_stream()
            raise

    def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
