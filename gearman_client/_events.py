"""What ``next_event()`` returns besides packets: the NEED_DATA sentinel, answers, closure.

A Gearman server sends two kinds of packets to a client or worker:

* *answers* to requests, strictly in the order of the requests that get one (JOB_CREATED to a
  submit, STATUS_RES to GET_STATUS, NO_JOB/JOB_ASSIGN* to a grab, OPTION_RES, ECHO_RES, and
  ERROR in place of any of them). The core hands these out as :class:`Answer` so the caller
  knows which request each one answers;
* *unsolicited* packets, handed out as the bare packet: NOOP (wake up), the WORK_* packets of
  jobs this connection submitted (keyed by handle), and an ERROR that answers no waiting request
  (gearmand's JOB_NOT_FOUND to a late WORK_COMPLETE).

One request may go unanswered: an OPTION_REQ that the server skips (OpenStack gear's server
answers none). The core then hands out :class:`Unanswered` for it, and the reply that came
instead as the answer to the next request.
"""

from __future__ import annotations

from jobwire._events import NEED_DATA, NeedData
from jobwire._record import record

from ._packets import Packet

__all__ = [
    "NEED_DATA", "Answer", "ConnectionClosed", "Event", "NeedData", "Unanswered", "WrongMagic",
]


class Event:
    """Base class of the non-packet events."""

    __slots__ = ()


@record
class Answer(Event):
    """``reply`` answers ``request`` (the oldest request still waiting for an answer)."""

    request: Packet
    reply: Packet


@record
class Unanswered(Event):
    """The server went past ``request`` without answering it: the reply that came instead
    answers the next request, and is the next event.

    Only an OPTION_REQ is ever passed over (OpenStack gear's ``gear.Server`` never answers it).
    """

    request: Packet


@record
class ConnectionClosed(Event):
    """The peer closed the connection (``receive_data(b"")``).

    ``pending`` is how many requests were still waiting for an answer; ``partial`` says whether a
    packet had started arriving and was cut short.
    """

    pending: int = 0
    partial: bool = False


@record
class WrongMagic(Event):
    """Server role: a request arrived with ``\\0RES`` magic (gearmand answers INVALID_MAGIC)."""

    packet_type: int
