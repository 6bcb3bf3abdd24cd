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
  :class:`Unanswered` for the option, leaving the reply in the buffer, and on the next call
  the reply as the answer to the next request (a JOB_CREATED always reaches the submit that
  made the job). An ERROR answers the option only with gearmand's code for it,
  ``UNKNOWN_OPTION``; any other ERROR answers the next request.
* Everything else a server sends (NOOP, the WORK_* packets of submitted jobs) is unsolicited and
  returned as the bare packet; routing WORK_* by handle is the session's job.
* What every in-order core shares is ``jobwire._core.InOrderClientCore``'s: the buffer (the
  packets are framed by ``_packets.PacketDecoder`` reading it; framing keeps no state between
  calls), the FIFO of requests awaiting answers, ``next_event()`` draining what is buffered
  without another read, poisoning (any protocol error: every later call raises it again), EOF
  as ``receive_data(b"")`` (bytes fed after it raise ``LocalProtocolError``), and the states
  ``ConnectionState`` (never ``CLOSING``: Gearman has no goodbye). What is Gearman's: the
  unsolicited packets, the ERROR rules and the skipped option above, ``ConnectionClosed``
  reported once, and bytes read while the session was idle taken as any bytes
  (``early_replies_refused`` is False: they may be NOOP or WORK_*).
"""

from __future__ import annotations

from jobwire._core import ConnectionState, InOrderClientCore
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

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import ClassVar

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
_OPEN = ConnectionState.OPEN


class Connection(InOrderClientCore):
    """The client/worker role of one Gearman connection, on the shared in-order core (buffer,
    FIFO of requests awaiting answers, end of input, poisoning).

    ``next_event()`` returns :class:`Answer` for a reply to a request; :class:`Unanswered` for
    an OPTION_REQ the server went past (the reply that did so is the next event); the bare
    packet for NOOP, WORK_* and an unmatched ERROR; :class:`ConnectionClosed` once after EOF
    (then :data:`NEED_DATA`); else :data:`NEED_DATA`. It raises ``RemoteProtocolError`` for bad
    magic, an unknown type, an oversized or malformed packet, or a reply that answers no
    waiting request: the connection is poisoned (every later call raises it again, ``send``
    too).

    Args:
        max_body_size: largest packet body accepted from the server (default 64 MiB).
    """

    __slots__ = ("_decoder",)

    #: Bytes read while the session was idle are read as any bytes: NOOP and WORK_* come
    #: unasked, and this core routes them itself (``jobwire._session.FifoSession.receive_early``).
    early_replies_refused: ClassVar[bool] = False

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        super().__init__()
        self._decoder = PacketDecoder(RES, max_body_size, self._buffer)

    @property
    def awaiting_answers(self) -> int:
        """Requests sent whose answers have not arrived (the shared core's ``pending``)."""
        return len(self._pending)

    def send(self, packet: Packet) -> bytes:
        """Validate ``packet`` and return its bytes (``\\0REQ`` magic).

        Raises:
            LocalProtocolError: the packet is one only a server sends, an argument is invalid
                (empty or NUL-containing name, unique over 63 bytes, ...), or the connection is
                closed. Nothing is recorded: the connection stays usable.
            RemoteProtocolError: the connection is poisoned (the error again).
        """
        if self._state is not _OPEN:
            if self._error is not None:
                raise type(self._error)(str(self._error))
            self._check_open(type(packet).__name__)
        cls = type(packet)
        if cls not in CLIENT_SENDS:
            raise LocalProtocolError(f"{cls.__name__} is sent by servers, not clients")
        packet.validate()
        data = encode_packet(packet, REQ)
        if cls in ANSWERS:
            self._pending.append(packet)
        return data

    if TYPE_CHECKING:  # the shared core's, with this core's events

        def next_event(self) -> Packet | Answer | Unanswered | ConnectionClosed | NeedData: ...

    def _next_event(self) -> Packet | Answer | Unanswered | ConnectionClosed | NeedData:
        pending = self._pending
        if pending and type(pending[0]) is OptionReq and len(pending) > 1:
            skipped = self._skipped_option()
            if skipped is not None:
                return skipped
        packet = self._decoder.next_packet()
        if packet is None:
            return self._closed() if self._eof else NEED_DATA
        cls = type(packet)
        if cls in _UNSOLICITED:
            return packet
        if cls is Error:
            if not pending or packet.code == b"JOB_NOT_FOUND":  # type: ignore[attr-defined]
                return packet
            return Answer(pending.popleft(), packet)
        if pending and cls in _ANSWERED_BY[type(pending[0])]:
            return Answer(pending.popleft(), packet)
        if cls not in SERVER_SENDS:
            raise RemoteProtocolError(f"server sent {cls.__name__}, which only clients send")
        head = type(pending[0]).__name__ if pending else "nothing"
        raise RemoteProtocolError(f"server sent {cls.__name__} while {head} awaited an answer")

    def _skipped_option(self) -> Unanswered | None:
        """With an OPTION_REQ heading the FIFO and another request behind it: whether the next
        reply shows the server went past the option (it cannot answer it: OPTION_RES, or
        gearmand's ERROR ``UNKNOWN_OPTION``, would). Then the option is reported
        :class:`Unanswered` and the reply left in the buffer, to answer the next request on the
        next call; else ``None`` and nothing is consumed."""
        reply = self._decoder.peek_packet()
        if reply is None:
            return None
        if isinstance(reply, Error):
            if reply.code == b"UNKNOWN_OPTION" or reply.code == b"JOB_NOT_FOUND":
                return None
        elif type(reply) is OptionRes or type(reply) in _UNSOLICITED or (
            type(reply) not in SERVER_SENDS
        ):
            return None  # the option's answer, an unasked packet, or an error to raise
        return Unanswered(self._pending.popleft())

    def _closed(self) -> ConnectionClosed | NeedData:
        if self._state is ConnectionState.CLOSED:
            return NEED_DATA  # reported once
        self._state = ConnectionState.CLOSED
        return ConnectionClosed(len(self._pending), bool(self._buffer))
