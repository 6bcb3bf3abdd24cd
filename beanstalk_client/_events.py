"""What a beanstalkd server can send: one frozen record per reply kind.

Each reply knows how to encode itself (the bundled server uses that); the client-role parser in
``_protocol.py`` builds them from bytes. Which reply may answer which command is declared on the
commands in ``_commands.py``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from jobwire._events import NEED_DATA, NeedData
from jobwire._record import record

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "NEED_DATA",
    "BuriedReply",
    "ConnectionClosed",
    "Deleted",
    "ErrorReply",
    "Event",
    "Found",
    "Inserted",
    "Kicked",
    "NeedData",
    "Ok",
    "Paused",
    "Released",
    "Reply",
    "Reserved",
    "Touched",
    "Using",
    "Watching",
]


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of the slot ``name`` of the frozen record ``cls``: how a hand-written
    ``__init__`` of a hot event or command sets its fields (a third of the cost of the generated
    one, which goes through ``object.__setattr__``). Call it after the class is built."""
    setter: Callable[[Any, Any], None] = cls.__dict__[name].__set__
    return setter


class Event:
    """Base class of everything ``next_event()`` returns besides :data:`NEED_DATA`."""

    __slots__ = ()


class Reply(Event):
    """Base class of server replies."""

    __slots__ = ()
    #: The first word of the reply line.
    word: str = ""

    def encode(self) -> bytes:
        """The reply as the server writes it."""
        return self.word.encode() + b"\r\n"


@record
class ConnectionClosed(Event):
    """The peer closed the connection (``receive_data(b"")``).

    ``pending`` is how many commands were still waiting for replies; ``partial`` says whether a
    reply had started arriving and was cut short.
    """

    pending: int = 0
    partial: bool = False
    reason: str = "closed by peer"


@record(init=False)
class Inserted(Reply):
    """``INSERTED <id>``: ``put`` succeeded."""

    job_id: int
    word = "INSERTED"

    def __init__(self, job_id: int) -> None:
        _set_inserted_id(self, job_id)

    def encode(self) -> bytes:
        return b"INSERTED %d\r\n" % self.job_id


@record
class BuriedReply(Reply):
    """``BURIED`` (bury succeeded; release hit out-of-memory) or ``BURIED <id>`` (put hit
    out-of-memory and buried the new job)."""

    job_id: int | None = None
    word = "BURIED"

    def encode(self) -> bytes:
        if self.job_id is None:
            return b"BURIED\r\n"
        return b"BURIED %d\r\n" % self.job_id


@record
class Using(Reply):
    """``USING <tube>``: answer to ``use`` and ``list-tube-used``."""

    tube: str
    word = "USING"

    def encode(self) -> bytes:
        return b"USING " + self.tube.encode("ascii") + b"\r\n"


@record(init=False)
class Reserved(Reply):
    """``RESERVED <id> <bytes>`` and the body: a job is now reserved by this connection."""

    job_id: int
    body: bytes
    word = "RESERVED"

    def __init__(self, job_id: int, body: bytes) -> None:
        _set_reserved_id(self, job_id)
        _set_reserved_body(self, body)

    def encode(self) -> bytes:
        return b"RESERVED %d %d\r\n%b\r\n" % (self.job_id, len(self.body), self.body)


_set_inserted_id = slot_setter(Inserted, "job_id")
_set_reserved_id = slot_setter(Reserved, "job_id")
_set_reserved_body = slot_setter(Reserved, "body")


@record
class Found(Reply):
    """``FOUND <id> <bytes>`` and the body: answer to the peek commands."""

    job_id: int
    body: bytes
    word = "FOUND"

    def encode(self) -> bytes:
        return b"FOUND %d %d\r\n%b\r\n" % (self.job_id, len(self.body), self.body)


@record
class Watching(Reply):
    """``WATCHING <count>``: answer to ``watch`` and ``ignore``."""

    count: int
    word = "WATCHING"

    def encode(self) -> bytes:
        return b"WATCHING %d\r\n" % self.count


@record
class Kicked(Reply):
    """``KICKED <count>`` (answer to ``kick``) or a bare ``KICKED`` (``kick-job``, count None)."""

    count: int | None = None
    word = "KICKED"

    def encode(self) -> bytes:
        if self.count is None:
            return b"KICKED\r\n"
        return b"KICKED %d\r\n" % self.count


@record
class Ok(Reply):
    """``OK <bytes>`` and a YAML document: stats and tube lists."""

    data: bytes
    word = "OK"

    def encode(self) -> bytes:
        return b"OK %d\r\n%b\r\n" % (len(self.data), self.data)


@record
class Deleted(Reply):
    """``DELETED``."""

    word = "DELETED"


@record
class Released(Reply):
    """``RELEASED``."""

    word = "RELEASED"


@record
class Touched(Reply):
    """``TOUCHED``."""

    word = "TOUCHED"


@record
class Paused(Reply):
    """``PAUSED``."""

    word = "PAUSED"


class ErrorCode(str, enum.Enum):
    """Every one-word reply that is not a success."""

    #: The job or tube does not exist, or is not in a state the command accepts.
    NOT_FOUND = "NOT_FOUND"
    #: ``reserve-with-timeout`` ran out, or the client half-closed its socket.
    TIMED_OUT = "TIMED_OUT"
    #: A job this connection holds is within 1 s of its TTR deadline.
    DEADLINE_SOON = "DEADLINE_SOON"
    #: ``ignore`` of the only watched tube.
    NOT_IGNORED = "NOT_IGNORED"
    #: The body is larger than the server's ``max-job-size``. The connection stays usable.
    JOB_TOO_BIG = "JOB_TOO_BIG"
    #: The server is in drain mode and takes no new jobs.
    DRAINING = "DRAINING"
    #: The body was not followed by CRLF. The connection is out of step: close it.
    EXPECTED_CRLF = "EXPECTED_CRLF"
    #: The server could not allocate memory.
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    #: A bug in the server.
    INTERNAL_ERROR = "INTERNAL_ERROR"
    #: A malformed command line. The connection is out of step: close it.
    BAD_FORMAT = "BAD_FORMAT"
    #: An unknown command. The connection is out of step: close it.
    UNKNOWN_COMMAND = "UNKNOWN_COMMAND"


#: After these replies the two ends may disagree about where the next command starts.
FATAL_CODES: Final = frozenset(
    {ErrorCode.EXPECTED_CRLF, ErrorCode.BAD_FORMAT, ErrorCode.UNKNOWN_COMMAND}
)
#: Replies any command may get.
GENERIC_CODES: Final = frozenset(
    {
        ErrorCode.OUT_OF_MEMORY,
        ErrorCode.INTERNAL_ERROR,
        ErrorCode.BAD_FORMAT,
        ErrorCode.UNKNOWN_COMMAND,
    }
)


@record
class ErrorReply(Reply):
    """A one-word reply other than success, e.g. ``NOT_FOUND`` or ``DEADLINE_SOON``."""

    code: ErrorCode

    @property
    def fatal(self) -> bool:
        """True when the connection must be closed after this reply."""
        return self.code in FATAL_CODES

    def encode(self) -> bytes:
        return self.code.value.encode() + b"\r\n"


DELETED: Final = Deleted()
RELEASED: Final = Released()
TOUCHED: Final = Touched()
PAUSED: Final = Paused()
