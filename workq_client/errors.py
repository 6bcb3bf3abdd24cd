"""Typed errors for Workq replies that are not successes.

Every reply error is a :class:`WorkqError`; connection and protocol failures are the shared
``jobwire.errors`` classes (``ConnectionLost`` is also a builtin ``ConnectionError``,
``OperationTimeout`` -- the caller's own timeout -- a builtin ``TimeoutError``).
"""

from __future__ import annotations

from jobwire.errors import BulkError as _BulkError
from jobwire.errors import JobwireError

from ._events import ErrorKind, ErrorReply

__all__ = ["BulkError", "ClientError", "DuplicateJob", "NotFound", "ServerError", "TimedOut",
           "WorkqError", "error_for"]


class WorkqError(JobwireError):
    """A reply from the Workq server that is not the command's success reply."""

    #: The reply's kind, e.g. ``"NOT-FOUND"``.
    kind: str = ""

    def __init__(self, text: str = "") -> None:
        super().__init__(f"{self.kind} {text}".strip())
        #: The server's text (``-CLIENT-ERROR`` and ``-SERVER-ERROR`` carry one).
        self.text = text


class NotFound(WorkqError):
    """``-NOT-FOUND``: no job with that id (never added, deleted, or past its TTL), or no queue
    with that name."""

    kind = "NOT-FOUND"


class TimedOut(WorkqError):
    """``-TIMEOUT``: ``lease``, ``run`` or ``result`` ran out of its wait-timeout, or a job that
    ``run`` waited on ran out of its TTR. (The caller's own ``timeout`` raises
    ``jobwire.OperationTimeout`` instead.)"""

    kind = "TIMEOUT"


class ClientError(WorkqError):
    """``-CLIENT-ERROR <text>``: the server refused the command; ``text`` says why."""

    kind = "CLIENT-ERROR"


class DuplicateJob(ClientError):
    """``-CLIENT-ERROR Duplicate job``: a job with that id exists (until its TTL runs out)."""


class ServerError(WorkqError):
    """``-SERVER-ERROR <text>``: the server failed while running the command."""

    kind = "SERVER-ERROR"


class BulkError(_BulkError, WorkqError):
    """Some adds of :meth:`~workq_client.AsyncClient.add_many` failed: ``.error`` is the first
    real error (a ``ClientError``, not the ``ConnectionLost`` that followed it), ``.index``
    its item, ``.done`` the ``(index, job id)`` of the jobs added, ``.results`` per item its id
    or its exception (see :class:`jobwire.errors.BulkError`)."""


def error_for(reply: ErrorReply) -> WorkqError:
    """The exception for an error reply."""
    if reply.kind is ErrorKind.NOT_FOUND:
        return NotFound(reply.text)
    if reply.kind is ErrorKind.TIMEOUT:
        return TimedOut(reply.text)
    if reply.kind is ErrorKind.SERVER_ERROR:
        return ServerError(reply.text)
    if reply.text == "Duplicate job":
        return DuplicateJob(reply.text)
    return ClientError(reply.text)
