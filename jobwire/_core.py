"""The base of a client-role Sans-IO core for a protocol answered strictly in order.

beanstalk, Workq, Redis and Gearman (its binary and its admin text protocol) share everything
but the parsing of a reply: a receive buffer (:class:`~jobwire._buffer.ReceiveBuffer`; each
protocol frames its own messages in it), the FIFO of commands awaiting replies, end of input
(``receive_data(b"")``; bytes fed after it raise ``LocalProtocolError``, as in h11), and the
rule that a protocol error poisons the connection (every later call raises it again). A
protocol's ``Connection`` subclasses :class:`InOrderClientCore` and writes ``send``,
``_next_event`` and ``_closed``.
"""

from __future__ import annotations

import enum
from collections import deque

from ._buffer import ReceiveBuffer
from ._events import NEED_DATA
from ._typing import mypyc_attr
from .errors import LocalProtocolError, RemoteProtocolError

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import Any, ClassVar

__all__ = ["ConnectionState", "InOrderClientCore"]


class ConnectionState(enum.Enum):
    """Where a client connection is in its life (every protocol's core uses these)."""

    #: Commands may be sent and replies read.
    OPEN = "OPEN"
    #: A goodbye was sent (beanstalk's ``quit``): no more commands; the server will close.
    CLOSING = "CLOSING"
    #: The peer closed, or a reply left the stream out of step. No more commands.
    CLOSED = "CLOSED"
    #: A protocol error happened. Every call raises it again.
    ERROR = "ERROR"


#: For the hot paths: an enum member looked up on its class costs as much as a small call.
_OPEN = ConnectionState.OPEN


@mypyc_attr(allow_interpreted_subclasses=True)
class InOrderClientCore:
    """Buffer, FIFO, end of input and poisoning; no I/O, not thread-safe."""

    __slots__ = ("_buffer", "_closed_reason", "_eof", "_error", "_pending", "_state")

    #: Whether bytes that arrived while the session was idle (nothing in flight) are read with
    #: no command awaiting a reply (``jobwire._session.FifoSession.receive_early``), so that a
    #: reply among them is this core's ``RemoteProtocolError`` rather than the answer to the
    #: command sent next. False for a core whose server also sends unasked events that the
    #: core routes itself (Gearman's NOOP and WORK_*): it reads them as any bytes.
    early_replies_refused: ClassVar[bool] = True

    def __init__(self) -> None:
        self._buffer = ReceiveBuffer()
        self._pending: deque[Any] = deque()
        self._state = ConnectionState.OPEN
        self._eof = False
        self._error: RemoteProtocolError | None = None
        self._closed_reason = "closed by peer"

    @property
    def state(self) -> ConnectionState:
        """Where the connection is in its life."""
        return self._state

    @property
    def pending(self) -> int:
        """How many sent commands still await replies."""
        return len(self._pending)

    def _check_open(self, name: str) -> None:
        if self._state is not ConnectionState.OPEN:
            raise LocalProtocolError(f"cannot send {name!r}: connection is {self._state.value}")

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the socket; ``b""`` means the server closed its end.

        Raises:
            LocalProtocolError: bytes fed after ``b""`` (a socket has none to give then: the
                caller is out of step). Nothing is fed; the connection is unchanged.
        """
        if data:
            if self._eof:
                raise LocalProtocolError("receive_data after EOF")
            self._buffer.feed(data)
        else:
            self._eof = True

    def receive_batch(self, data: bytes) -> list[Any] | None:
        """:meth:`receive_data` and the :meth:`next_event` calls after it in one step, for the
        protocol's commonest read of pipelined replies: the events (``NEED_DATA`` not
        included), or ``None`` when ``data`` is not such a read, and then nothing was fed.

        The session calls it before :meth:`receive_data` on every read (the one batch hook,
        ``jobwire._session.FifoSession.receive_data``). This default knows no such read; a core
        whose benchmark shows one pays overrides it (beanstalk: ``INSERTED`` lines answering
        puts; Workq: ``+OK`` lines), with a property test holding it to the event-by-event
        parse.
        """
        return None

    def next_event(self) -> Any:
        """Return the next complete reply, :data:`NEED_DATA`, or the protocol's
        ``ConnectionClosed``.

        Raises:
            RemoteProtocolError: the server broke the protocol (also on every later call).
        """
        if self._state is _OPEN:
            # Nothing buffered (the buffer's array is empty exactly then): the common end of a
            # batch, without a call.
            if not self._buffer._data and not self._eof:
                return NEED_DATA
            try:
                return self._next_event()
            except RemoteProtocolError as exc:
                self._state = ConnectionState.ERROR
                self._error = exc
                raise
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if self._state is ConnectionState.CLOSED:
            return self._closed()
        try:
            return self._next_event()
        except RemoteProtocolError as exc:
            self._state = ConnectionState.ERROR
            self._error = exc
            raise

    def _next_event(self) -> Any:
        """Parse the next event from the buffer (``NEED_DATA`` if incomplete)."""
        raise NotImplementedError

    def _closed(self) -> Any:
        """Enter CLOSED and return the protocol's ``ConnectionClosed`` (also called in state
        CLOSED, on every later ``next_event``)."""
        raise NotImplementedError
