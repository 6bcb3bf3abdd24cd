"""Typed errors for beanstalkd replies that are not successes.

Every reply error is a :class:`BeanstalkError`; connection and protocol failures are the shared
``jobwire.errors`` classes (``ConnectionLost`` is also a builtin ``ConnectionError``).
"""

from __future__ import annotations

from jobwire.errors import BulkError as _BulkError
from jobwire.errors import JobwireError

from ._events import ErrorCode

__all__ = [
    "BadFormat",
    "BulkError",
    "BeanstalkError",
    "Buried",
    "DeadlineSoon",
    "Draining",
    "ExpectedCRLF",
    "InternalError",
    "JobTooBig",
    "NotFound",
    "NotIgnored",
    "OutOfMemory",
    "TimedOut",
    "UnknownCommand",
]


class BeanstalkError(JobwireError):
    """A reply from beanstalkd that is not the command's success reply."""

    #: The reply word, e.g. ``"NOT_FOUND"``.
    code: str = ""

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.code)


class NotFound(BeanstalkError):
    """``NOT_FOUND``: no such job or tube, or the job is not in a state the command accepts
    (for release, bury and touch: not reserved by this connection)."""

    code = "NOT_FOUND"


class TimedOut(BeanstalkError):
    """``TIMED_OUT``: ``reserve-with-timeout`` ran out with no job."""

    code = "TIMED_OUT"


class DeadlineSoon(BeanstalkError):
    """``DEADLINE_SOON``: a job this connection holds is within 1 s of its TTR deadline.

    Not a failure of that job: delete, release, touch or bury it now.
    """

    code = "DEADLINE_SOON"


class JobTooBig(BeanstalkError):
    """``JOB_TOO_BIG``: the body is over the server's ``max-job-size``. The connection is
    still usable."""

    code = "JOB_TOO_BIG"


class Draining(BeanstalkError):
    """``DRAINING``: the server is in drain mode and accepts no new jobs."""

    code = "DRAINING"


class Buried(BeanstalkError):
    """``BURIED``: the server ran out of memory and buried the job instead (put, release)."""

    code = "BURIED"

    def __init__(self, job_id: int | None) -> None:
        super().__init__(f"BURIED {job_id}" if job_id is not None else "BURIED")
        #: The job that was buried.
        self.job_id = job_id


class NotIgnored(BeanstalkError):
    """``NOT_IGNORED``: the tube is the only one watched."""

    code = "NOT_IGNORED"


class BadFormat(BeanstalkError):
    """``BAD_FORMAT``: the server could not parse the command. The connection is closed."""

    code = "BAD_FORMAT"


class UnknownCommand(BeanstalkError):
    """``UNKNOWN_COMMAND``: the server does not know the command. The connection is closed."""

    code = "UNKNOWN_COMMAND"


class ExpectedCRLF(BeanstalkError):
    """``EXPECTED_CRLF``: the body was not followed by CRLF. The connection is closed."""

    code = "EXPECTED_CRLF"


class OutOfMemory(BeanstalkError):
    """``OUT_OF_MEMORY``: the server could not allocate memory; try again later."""

    code = "OUT_OF_MEMORY"


class InternalError(BeanstalkError):
    """``INTERNAL_ERROR``: a bug in the server."""

    code = "INTERNAL_ERROR"


ERRORS: dict[ErrorCode, type[BeanstalkError]] = {
    ErrorCode.NOT_FOUND: NotFound,
    ErrorCode.TIMED_OUT: TimedOut,
    ErrorCode.DEADLINE_SOON: DeadlineSoon,
    ErrorCode.NOT_IGNORED: NotIgnored,
    ErrorCode.JOB_TOO_BIG: JobTooBig,
    ErrorCode.DRAINING: Draining,
    ErrorCode.EXPECTED_CRLF: ExpectedCRLF,
    ErrorCode.OUT_OF_MEMORY: OutOfMemory,
    ErrorCode.INTERNAL_ERROR: InternalError,
    ErrorCode.BAD_FORMAT: BadFormat,
    ErrorCode.UNKNOWN_COMMAND: UnknownCommand,
}


class BulkError(_BulkError, BeanstalkError):
    """Some commands of a bulk call (``put_many``, ``delete_many``) failed: the collection's
    :class:`jobwire.errors.BulkError`, also a :class:`BeanstalkError`.

    ``results`` has one entry per command, in order: its result (a job id for puts, ``None``
    for deletes) or the exception it got; ``error`` is the first of those exceptions, ``index``
    its command, ``done`` the ``(index, result)`` of the others. When only replies failed
    (``JobTooBig``, ``NotFound`` ...) every reply was read and the connection is usable; when
    the connection failed, the commands sent and unanswered got ``ConnectionLost`` and those
    never sent ``NotSent``.
    """

    code = "BULK"
