"""The base of a client session for a protocol whose replies come strictly in order.

A *session* sits between a protocol's Sans-IO core and a transport (:mod:`jobwire._transport`):
it queues the bytes of each request for the transport to send, keeps a :class:`Pending` per
request in FIFO order, and completes each one as the core parses its reply. The transport only
needs :meth:`data_to_send`, :meth:`receive_data`, :attr:`broken` and :meth:`fail`; any object
with those four can be driven by it (Gearman's, whose replies are keyed by job handle, is not a
FIFO). Subclasses implement :meth:`receive_data` with their core.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, Protocol, TypeVar

from ._pending import Pending
from .errors import ConnectionLost, JobwireError

__all__ = ["FifoSession", "SessionLike"]

P = TypeVar("P", bound=Pending[Any])


class SessionLike(Protocol):
    """What a transport needs of a session."""

    broken: JobwireError | None

    def data_to_send(self) -> bytes: ...

    def receive_data(self, data: bytes) -> None: ...

    def fail(self, error: JobwireError) -> None: ...


class FifoSession(Generic[P]):
    """Outgoing bytes plus the Pendings awaiting replies, oldest first. No I/O."""

    __slots__ = ("_fifo", "_out", "broken")

    def __init__(self) -> None:
        self._out = bytearray()
        self._fifo: deque[P] = deque()
        #: Why the connection can no longer be used, once it cannot.
        self.broken: JobwireError | None = None

    @property
    def in_flight(self) -> int:
        """Requests sent (or queued to send) whose replies have not arrived."""
        return len(self._fifo)

    def check_usable(self) -> None:
        """Raise ``ConnectionLost`` if the connection is already broken or closed."""
        if self.broken is not None:
            raise ConnectionLost(f"connection unusable: {self.broken}")

    def queue(self, data: bytes) -> None:
        """Add bytes for the transport to send."""
        self._out += data

    def expect(self, pending: P) -> None:
        """Add a Pending that the next unclaimed reply will complete."""
        self._fifo.append(pending)

    def data_to_send(self) -> bytes:
        """Take every byte queued for the socket."""
        if not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        return data

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the socket (``b""`` at EOF); complete every Pending they answer."""
        raise NotImplementedError

    def fail(self, error: JobwireError) -> None:
        """Mark the connection unusable and fail every waiting request with ``error``."""
        if self.broken is None:
            self.broken = error
        while self._fifo:
            self._fifo.popleft().reject(type(error)(str(error)))
