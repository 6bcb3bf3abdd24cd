"""What a Workq server can send: one frozen record per reply shape.

Every success reply starts with ``+`` and every error with ``-`` (docs/workq.md: the document's bare
``OK`` lines are wrong). Each reply knows how to encode itself (the bundled server uses that); the
client-role parser in ``_protocol.py`` builds them from bytes. Which shape answers which command
is declared on the commands in ``_commands.py`` (``Command.shape``).
"""

from __future__ import annotations

import enum

from jobwire._events import NEED_DATA, NeedData
from jobwire._record import field, record

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "NEED_DATA",
    "OK",
    "ConnectionClosed",
    "ErrorKind",
    "ErrorReply",
    "Event",
    "InspectReply",
    "JobResult",
    "Leased",
    "NeedData",
    "Ok",
    "Record",
    "Reply",
]


class Event:
    """Base class of everything ``next_event()`` returns besides :data:`NEED_DATA`."""

    __slots__ = ()


class Reply(Event):
    """Base class of server replies."""

    __slots__ = ()

    def encode(self) -> bytes:
        """The reply exactly as the server writes it."""
        raise NotImplementedError


@record
class ConnectionClosed(Event):
    """The peer closed the connection (``receive_data(b"")``), or must be disconnected.

    ``pending``: commands still waiting for replies (client role); ``partial``: a reply or command
    had started arriving and was cut short; ``reason``: why.
    """

    pending: int = 0
    partial: bool = False
    reason: str = "closed by peer"


@record
class Ok(Reply):
    """``+OK``: add, schedule, complete, fail and delete succeeded."""

    def encode(self) -> bytes:
        return b"+OK\r\n"


OK: Final = Ok()


@record
class JobResult(Reply):
    """``+OK 1`` / ``<id> <success> <size>`` / result bytes: answer to ``run`` and ``result``."""

    job_id: str
    success: bool
    result: bytes

    def encode(self) -> bytes:
        return b"+OK 1\r\n%s %d %d\r\n%b\r\n" % (
            self.job_id.encode("ascii"),
            1 if self.success else 0,
            len(self.result),
            self.result,
        )


@record
class Leased(Reply):
    """``+OK 1`` / ``<id> <name> <ttr> <size>`` / payload: answer to ``lease``.

    ``ttr_ms`` is the job's time-to-run in milliseconds, counted from the lease.
    """

    job_id: str
    name: str
    ttr_ms: int
    payload: bytes

    def encode(self) -> bytes:
        return b"+OK 1\r\n%s %s %d %d\r\n%b\r\n" % (
            self.job_id.encode("ascii"),
            self.name.encode("ascii"),
            self.ttr_ms,
            len(self.payload),
            self.payload,
        )


@record
class Record:
    """One ``<key> <key-count>`` block of an ``inspect`` reply and its ``<key> <value>`` lines.

    ``key`` is a job id, a queue name or ``server``. ``fields`` keeps the wire order; values are
    raw bytes (a job's ``payload`` value may hold any byte, CRLF included). ``announced`` is the
    key count the header line gave, which need not match (``inspect server`` of Workq 0.2.0
    announces 2 and sends 3); ``None`` means ``len(fields)``.
    """

    key: str
    fields: tuple[tuple[str, bytes], ...]
    announced: int | None = None

    def get(self, name: str) -> bytes | None:
        """The value of field ``name``, or ``None``."""
        for key, value in self.fields:
            if key == name:
                return value
        return None

    def encode(self) -> bytes:
        count = len(self.fields) if self.announced is None else self.announced
        out = [b"%s %d\r\n" % (self.key.encode("ascii"), count)]
        for key, value in self.fields:
            out.append(key.encode("ascii") + b" " + value + b"\r\n")
        return b"".join(out)


@record
class InspectReply(Reply):
    """``+OK <n>`` and ``n`` records: answer to every ``inspect`` command."""

    records: tuple[Record, ...] = field(default=())

    def encode(self) -> bytes:
        return b"+OK %d\r\n" % len(self.records) + b"".join(r.encode() for r in self.records)


class ErrorKind(str, enum.Enum):
    """The four error replies."""

    #: The command was malformed or invalid (with the server's text, e.g. ``Duplicate job``).
    CLIENT_ERROR = "CLIENT-ERROR"
    #: The server failed while running the command (with its text).
    SERVER_ERROR = "SERVER-ERROR"
    #: The job id, or the queue, does not exist.
    NOT_FOUND = "NOT-FOUND"
    #: ``lease``, ``run`` or ``result`` ran out of its wait-timeout (or a run's TTR ran out).
    TIMEOUT = "TIMEOUT"


@record
class ErrorReply(Reply):
    """``-<KIND>`` or ``-<KIND> <text>``."""

    kind: ErrorKind
    text: str = ""

    def encode(self) -> bytes:
        if self.text:
            return b"-%s %s\r\n" % (self.kind.value.encode(), self.text.encode("utf-8"))
        return b"-%s\r\n" % self.kind.value.encode()
