"""The base of a client session for a protocol whose replies come strictly in order.

A *session* sits between a protocol's Sans-IO core and a transport (:mod:`jobwire._transport`):
it queues the bytes of each request for the transport to send, keeps a :class:`Pending` per
request in FIFO order, and completes each one as the core parses its reply. The transport only
needs :meth:`data_to_send`, :meth:`receive_data`, :meth:`receive_early`, :attr:`idle`,
:attr:`broken` and :meth:`fail`.

:meth:`FifoSession.receive_data` drains the core (``conn``): a protocol error or the peer
closing fails every waiting request; every other event goes to :meth:`FifoSession.dispatch`,
which each protocol writes (Gearman's also routes packets keyed by job handle).

Bytes that arrive while no request is in flight answer none: a transport that finds some when
it is about to send the next request (it was :attr:`FifoSession.idle` when it last read) hands
them to :meth:`FifoSession.receive_early`, which lets the core read them with nothing awaiting a
reply, so a stale reply is the core's ``RemoteProtocolError`` (failing the connection and the
requests just queued) instead of the answer to the next call. A Redis push stays a push.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from ._events import NEED_DATA
from ._pending import Pending
from ._typing import mypyc_attr
from .errors import ConnectionLost, JobwireError, RemoteProtocolError

__all__ = ["FifoSession", "SessionLike"]

P = TypeVar("P", bound=Pending[Any])


class SessionLike(Protocol):
    """What a transport needs of a session."""

    broken: JobwireError | None

    @property
    def idle(self) -> bool: ...

    def data_to_send(self) -> bytes: ...

    def receive_data(self, data: bytes) -> None: ...

    def receive_early(self, data: bytes) -> None: ...

    def fail(self, error: JobwireError) -> None: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class FifoSession(Generic[P]):
    """Outgoing bytes plus the Pendings awaiting replies, oldest first. No I/O."""

    __slots__ = ("_fifo", "_next", "_out", "broken", "conn")

    def __init__(self) -> None:
        # What to send: ``_next`` (bytes queued while nothing else was, kept without a copy),
        # then ``_out`` (what came after it; subclasses may also append to ``_out`` directly).
        self._next: bytes | None = None
        self._out = bytearray()
        self._fifo: deque[P] = deque()
        #: Why the connection can no longer be used, once it cannot.
        self.broken: JobwireError | None = None

    @property
    def in_flight(self) -> int:
        """Requests sent (or queued to send) whose replies have not arrived."""
        return len(self._fifo)

    @property
    def idle(self) -> bool:
        """No request is in flight, nor awaited by the core: whatever the server sends now
        answers nothing (see :meth:`receive_early`)."""
        return not self._fifo and not getattr(self.conn, "pending", 0)

    def check_usable(self) -> None:
        """Raise ``ConnectionLost`` if the connection is already broken or closed."""
        if self.broken is not None:
            raise ConnectionLost(f"connection unusable: {self.broken}")

    def queue(self, data: bytes) -> None:
        """Add bytes for the transport to send."""
        if self._next is None and not self._out:
            self._next = data
        else:
            self._out += data

    def expect(self, pending: P) -> None:
        """Add a Pending that the next unclaimed reply will complete."""
        self._fifo.append(pending)

    def data_to_send(self) -> bytes:
        """Take every byte queued for the socket."""
        first = self._next
        if first is not None:
            self._next = None
            if not self._out:
                return first  # one request queued: sent as it is, no copy
            self._out[:0] = first
        elif not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        return data

    #: The protocol's client-role core: ``receive_batch(bytes)``, ``receive_data(bytes)``,
    #: ``next_event()`` (subclasses set it in ``__init__``).
    conn: Any
    #: The core's event for "the peer closed" (with ``pending`` and ``partial``, maybe
    #: ``reason``).
    closed_event: ClassVar[type[object]]

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the socket (``b""`` at EOF); complete every Pending they answer.

        A protocol error or the peer closing fails every waiting request (``fail``). Once
        the session has failed, bytes that still arrive are dropped: every request already has
        its error, and the core may still expect replies its requests will never be matched
        with (a send failed while the reader held bytes from before)."""
        if self.broken is not None:
            return
        conn = self.conn
        batch = conn.receive_batch(data)
        if batch is not None:  # the core's one-step read of pipelined replies
            dispatch = self.dispatch
            for event in batch:
                dispatch(event)
            return
        conn.receive_data(data)
        while True:
            try:
                event = conn.next_event()
            except RemoteProtocolError as exc:
                self.fail(exc)
                return
            if event is NEED_DATA:
                return
            if isinstance(event, self.closed_event):
                self.fail(ConnectionLost(_closed_message(event)))
                return
            self.dispatch(event)

    def receive_early(self, data: bytes) -> None:
        """Feed bytes that were received before the requests now queued were sent (the
        transport read them just before sending, the session having been :attr:`idle`): they
        can answer none of those requests. A core with ``early_replies_refused`` (beanstalk,
        Workq, Redis, Gearman's admin core: ``jobwire._core.InOrderClientCore``) reads them
        with nothing awaiting a reply: a reply is its ``RemoteProtocolError``, which fails the
        connection and every request (a Redis push is still dispatched). A core without it
        (Gearman's, which routes unsolicited packets itself) gets them as any bytes."""
        conn = self.conn
        if self.broken is not None or not getattr(conn, "early_replies_refused", False):
            self.receive_data(data)
            return
        awaiting, conn._pending = conn._pending, deque()  # the requests not sent yet
        try:
            self.receive_data(data)
        finally:
            awaiting.extend(conn._pending)  # none, unless a callback sent a command
            conn._pending = awaiting

    def dispatch(self, event: Any) -> None:
        """Handle one event of the core (complete the oldest Pending, for a plain FIFO)."""
        raise NotImplementedError

    def fail(self, error: JobwireError) -> None:
        """Mark the connection unusable and fail every waiting request with ``error``."""
        if self.broken is None:
            self.broken = error
        while self._fifo:
            self._fifo.popleft().reject(type(error)(str(error)))


def _closed_message(event: object) -> str:
    if getattr(event, "partial", False):
        what = " mid-reply"
    elif getattr(event, "pending", 0):
        what = " with replies outstanding"
    else:
        what = ""
    reason = getattr(event, "reason", "")
    return f"server closed the connection{what}" + (f": {reason}" if reason else "")
