"""Gearman's own errors (all under :class:`jobwire.errors.JobwireError`)."""

from __future__ import annotations

from jobwire.errors import BulkError as _BulkError
from jobwire.errors import JobwireError

__all__ = [
    "BulkSubmitError", "GearmanError", "JobException", "JobFailed", "QueueFull", "ServerError"
]


class GearmanError(JobwireError):
    """Base of the errors a Gearman server's answers turn into."""


class ServerError(GearmanError):
    """The server answered ERROR ``code`` (e.g. ``UNKNOWN_OPTION``, ``ARGUMENT_TOO_LARGE``), or
    an admin ``ERR`` (``code`` is ``""`` for gearmand's errors that have words only, such as
    ``ERR function not found``)."""

    def __init__(self, code: str, text: str = "") -> None:
        super().__init__(f"{code}: {text}" if code and text else code or text)
        self.code = code
        self.text = text


class QueueFull(ServerError):
    """ERROR QUEUE_ERROR: the function's queue is at its ``maxqueue`` limit (on the bundled
    server also: its ``--max-memory`` or ``--max-functions`` is reached)."""


class JobFailed(GearmanError):
    """WORK_FAIL: the worker reported failure.

    WORK_FAIL carries no details; ``warning`` is the data of the last WORK_WARNING the job sent
    before it (``None`` if none). A jobwire worker whose handler raised sends the exception as
    that warning (``"ValueError: text"``), then WORK_FAIL.
    """

    def __init__(self, handle: bytes, warning: bytes | None = None) -> None:
        detail = "" if warning is None else f": {warning[:200]!r}"
        super().__init__(f"job {handle!r} failed{detail}")
        self.handle = handle
        self.warning = warning


class JobException(GearmanError):
    """WORK_EXCEPTION: the worker failed with ``data`` (the exception's text)."""

    def __init__(self, handle: bytes, data: bytes) -> None:
        super().__init__(f"job {handle!r} raised: {data[:200]!r}")
        self.handle = handle
        self.data = data


class BulkSubmitError(_BulkError, GearmanError):
    """Some jobs of a bulk call (``submit_background_many``, ``submit_many``) failed: the
    collection's :class:`jobwire.errors.BulkError`, also a :class:`GearmanError`.

    ``results`` holds, in order, each job's outcome: its handle (background) or result
    (foreground), or the exception it ended with: a :class:`GearmanError` (``QueueFull``,
    ``JobFailed`` ...) is the job's own; ``ConnectionLost`` means it was sent and no answer
    came (it may be queued or running); :class:`~jobwire.errors.NotSent`: never sent. ``error``
    is the first of those exceptions, ``index`` its job, ``done`` the ``(index, outcome)`` of
    the jobs that succeeded.
    """


def server_error(code: bytes, text: bytes) -> ServerError:
    """The exception for an ERROR packet."""
    c, t = code.decode("ascii", "replace"), text.decode("utf-8", "replace")
    return QueueFull(c, t) if c == "QUEUE_ERROR" else ServerError(c, t)
