"""The client and worker side of the Gearman binary protocol as a Sans-IO state machine.

    conn = Connection()
    sock.sendall(conn.send(SubmitJob(b"reverse", b"", b"abc")))   # packets in, bytes out
    conn.receive_data(sock.recv(65536))                            # bytes in ...
    event = conn.next_event()        # ... events out: Answer(request=SubmitJob(...),
                                     #                        reply=JobCreated(b"H:host:1"))

Why it is shaped like this:

* One connection may act as client and worker at once (gearmand does not care), so there is
  one class for both roles; what it refuses is sending a packet only a server sends.
* gearmand handles one connection's requests in order, so the requests that get an answer
  (submits, GET_STATUS, GET_STATUS_UNIQUE, OPTION_REQ, ECHO_REQ, the grabs, and the packets
  gearmand rejects outright) are kept in a FIFO. Each answer is checked against the head
  (:data:`ANSWERS`); an answer that cannot answer it is a desync and raises
  ``RemoteProtocolError``. An ERROR answers the head, except gearmand's JOB_NOT_FOUND, which is
  the answer to a WORK_* packet for a job it no longer holds (those get no answer otherwise):
  it is handed out unsolicited, as is any ERROR when nothing waits.
* One exception to "every request gets its answer": OpenStack gear's ``gear.Server`` never
  answers OPTION_REQ. So a reply that cannot answer a waiting OPTION_REQ, while another request
  waits behind it, means the server skipped the option: the core hands out
  :class:`Unanswered` for the option, then the reply as the answer to the next request (a
  JOB_CREATED always reaches the submit that made the job). An ERROR answers the option only
  with gearmand's code for it, ``UNKNOWN_OPTION``; any other ERROR answers the next request.
* Everything else a server sends (NOOP, the WORK_* packets of submitted jobs) is unsolicited and
  returned as the bare packet; routing WORK_* by handle is the session's job.
* ``next_event()`` drains what is already buffered without another read.
* Any protocol error poisons the connection: every later call raises it again.
* EOF is ``receive_data(b"")``; bytes fed after it raise ``LocalProtocolError``. The states are
  the shared ``jobwire._core.ConnectionState`` (never ``CLOSING``: Gearman has no goodbye).
"""

from __future__ import annotations

from collections import deque

from jobwire._core import ConnectionState
from jobwire.errors import LocalProtocolError, RemoteProtocolError

from ._events import NEED_DATA, Answer, ConnectionClosed, NeedData, Unanswered
from ._packets import (
    DEFAULT_MAX_BODY_SIZE,
    REQ,
    RES,
    SUBMITS,
    AllYours,
    CanDo,
    CanDoTimeout,
    CantDo,
    EchoReq,
    EchoRes,
    Error,
    GetStatus,
    GetStatusUnique,
    GrabJob,
    GrabJobAll,
    GrabJobUniq,
    JobAssign,
    JobAssignAll,
    JobAssignUniq,
    JobCreated,
    NoJob,
    Noop,
    OptionReq,
    OptionRes,
    Packet,
    PacketDecoder,
    PreSleep,
    ResetAbilities,
    SetClientId,
    StatusRes,
    StatusResUnique,
    SubmitJobSched,
    Unused,
    WorkComplete,
    WorkData,
    WorkException,
    WorkFail,
    WorkStatus,
    WorkWarning,
    encode_packet,
)

__all__ = ["ANSWERS", "CLIENT_SENDS", "SERVER_SENDS", "Connection", "ConnectionState"]

#: Which packets answer which request (ERROR may answer any of them).
ANSWERS: dict[type[Packet], tuple[type[Packet], ...]] = {
    **{cls: (JobCreated,) for cls in SUBMITS},
    GetStatus: (StatusRes,),
    GetStatusUnique: (StatusResUnique,),
    EchoReq: (EchoRes,),
    OptionReq: (OptionRes,),
    GrabJob: (NoJob, JobAssign),
    GrabJobUniq: (NoJob, JobAssignUniq),
    GrabJobAll: (NoJob, JobAssignUniq, JobAssignAll),
    # gearmand rejects these with ERROR INVALID_COMMAND: the ERROR is their answer.
    SubmitJobSched: (),
    AllYours: (),
    Unused: (),
}

#: Packets a client or worker may send (with ``\\0REQ`` magic).
CLIENT_SENDS: frozenset[type[Packet]] = frozenset(
    {
        *ANSWERS,
        CanDo, CantDo, CanDoTimeout, ResetAbilities, PreSleep, SetClientId,
        WorkStatus, WorkComplete, WorkFail, WorkException, WorkData, WorkWarning,
    }
)

#: Packets a server may send (with ``\\0RES`` magic).
SERVER_SENDS: frozenset[type[Packet]] = frozenset(
    {
        Noop, JobCreated, NoJob, JobAssign, JobAssignUniq, JobAssignAll, EchoRes, Error,
        StatusRes, StatusResUnique, OptionRes,
        WorkStatus, WorkComplete, WorkFail, WorkException, WorkData, WorkWarning,
    }
)

#: :data:`ANSWERS` as sets.
_ANSWERED_BY: dict[type[Packet], frozenset[type[Packet]]] = {
    request: frozenset(replies) for request, replies in ANSWERS.items()
}

_UNSOLICITED: frozenset[type[Packet]] = frozenset(
    {Noop, WorkStatus, WorkComplete, WorkFail, WorkException, WorkData, WorkWarning}
)


class Connection:
    """The client/worker role of one Gearman connection.

    Args:
        max_body_size: largest packet body accepted from the server (default 64 MiB).
    """

    __slots__ = (
        "_closed_reported", "_decoder", "_eof", "_error", "_held", "_waiting", "state",
    )

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        self._decoder = PacketDecoder(RES, max_body_size)
        self._waiting: deque[Packet] = deque()
        # A reply read while a skipped OPTION_REQ headed the FIFO: the next event's packet.
        self._held: Packet | None = None
        self._eof = False
        self._closed_reported = False
        self._error: RemoteProtocolError | LocalProtocolError | None = None
        self.state = ConnectionState.OPEN

    @property
    def awaiting_answers(self) -> int:
        """Requests sent whose answers have not arrived."""
        return len(self._waiting)

    def _check(self) -> None:
        if self._error is not None:
            raise type(self._error)(str(self._error))

    def send(self, packet: Packet) -> bytes:
        """Validate ``packet`` and return its bytes (``\\0REQ`` magic).

        Raises:
            LocalProtocolError: the packet is one only a server sends, an argument is invalid
                (empty or NUL-containing name, unique over 63 bytes, ...), or the connection is
                closed or poisoned. Nothing is recorded: the connection stays usable.
        """
        if self.state is not ConnectionState.OPEN:
            self._check()
            raise LocalProtocolError(f"cannot send {type(packet).__name__}: connection is closed")
        cls = type(packet)
        if cls not in CLIENT_SENDS:
            raise LocalProtocolError(f"{cls.__name__} is sent by servers, not clients")
        packet.validate()
        data = encode_packet(packet, REQ)
        if cls in ANSWERS:
            self._waiting.append(packet)
        return data

    def receive_batch(self, data: bytes) -> None:
        """The session's batch hook (``jobwire._core.InOrderClientCore.receive_batch``): this
        core has no one-step read, so nothing is fed and the bytes go to :meth:`receive_data`."""
        return None

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the server; ``b""`` means the server closed the connection.

        Raises:
            LocalProtocolError: bytes fed after ``b""`` (the rule of every jobwire core).
                Nothing is fed; the connection is unchanged.
        """
        if data:
            if self._eof:
                raise LocalProtocolError("receive_data after EOF")
            self._decoder.feed(data)
        else:
            self._eof = True

    def next_event(self) -> Packet | Answer | Unanswered | ConnectionClosed | NeedData:
        """The next event from what is buffered.

        Returns:
            :class:`Answer` for a reply to a request; :class:`Unanswered` for an OPTION_REQ the
            server went past (the reply that did so is the next event); the bare packet for
            NOOP, WORK_* and an unmatched ERROR; :class:`ConnectionClosed` once after EOF; else
            :data:`NEED_DATA`.

        Raises:
            RemoteProtocolError: bad magic, unknown type, oversized or malformed packet, or a
                reply that answers no waiting request. The connection is poisoned.
        """
        if self._error is not None:
            raise type(self._error)(str(self._error))
        packet: Packet | None = self._held
        if packet is not None:
            self._held = None
        else:
            try:
                packet = self._decoder.next_packet()
            except RemoteProtocolError as exc:
                self._poison(exc)
                raise
        if packet is None:
            if self._eof and not self._closed_reported:
                self._closed_reported = True
                self.state = ConnectionState.CLOSED
                return ConnectionClosed(len(self._waiting), self._decoder.buffered > 0)
            return NEED_DATA
        cls = type(packet)
        if cls in _UNSOLICITED:
            return packet
        waiting = self._waiting
        if cls is Error:
            assert isinstance(packet, Error)
            if not waiting or packet.code == b"JOB_NOT_FOUND":
                return packet
            if self._skipped_option(packet):
                return self._pass_option(packet)
            return Answer(waiting.popleft(), packet)
        if cls not in SERVER_SENDS:
            error = RemoteProtocolError(f"server sent {cls.__name__}, which only clients send")
            self._poison(error)
            raise error
        if self._skipped_option(packet):
            return self._pass_option(packet)
        if not waiting or cls not in _ANSWERED_BY[type(waiting[0])]:
            head = type(waiting[0]).__name__ if waiting else "nothing"
            error = RemoteProtocolError(
                f"server sent {cls.__name__} while {head} awaited an answer"
            )
            self._poison(error)
            raise error
        return Answer(waiting.popleft(), packet)

    def _skipped_option(self, reply: Packet) -> bool:
        """Whether ``reply`` shows the server went past the OPTION_REQ heading the FIFO: it
        cannot answer the option (OPTION_RES, or gearmand's ERROR ``UNKNOWN_OPTION``, would)
        and another request waits behind it."""
        waiting = self._waiting
        if len(waiting) < 2 or type(waiting[0]) is not OptionReq:
            return False
        if isinstance(reply, Error):
            return reply.code != b"UNKNOWN_OPTION"
        return type(reply) is not OptionRes

    def _pass_option(self, reply: Packet) -> Unanswered:
        """Report the skipped option; ``reply`` is matched against the next request on the
        next call."""
        self._held = reply
        return Unanswered(self._waiting.popleft())

    def _poison(self, exc: RemoteProtocolError) -> None:
        self._error = exc
        self.state = ConnectionState.ERROR
