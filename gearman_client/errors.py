"""Gearman's own errors (all under :class:`jobwire.errors.JobwireError`)."""

from __future__ import annotations

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
    """ERROR QUEUE_ERROR: the function's queue is at its ``maxqueue`` limit."""


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


class BulkSubmitError(GearmanError):
    """Some jobs of a bulk call failed. ``results`` holds, in order, each job's outcome: its
    handle (background) or result (foreground), or the :class:`GearmanError` it ended with."""

    def __init__(self, results: list[bytes | ServerError] | list[bytes | GearmanError]) -> None:
        failed = [r for r in results if isinstance(r, GearmanError)]
        super().__init__(f"{len(failed)} of {len(results)} jobs failed, first: {failed[0]}")
        self.results: list[bytes | GearmanError] = list(results)


def server_error(code: bytes, text: bytes) -> ServerError:
    """The exception for an ERROR packet."""
    c, t = code.decode("ascii", "replace"), text.decode("utf-8", "replace")
    return QueueFull(c, t) if c == "QUEUE_ERROR" else ServerError(c, t)
