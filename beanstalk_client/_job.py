"""The job a reserve or peek returns, and the argument conversions every client method shares."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic

from typing_extensions import TypeVar

from jobwire.errors import LocalProtocolError

from ._events import slot_setter

__all__ = ["Job", "JobRef", "job_id_of", "whole_seconds"]


#: The body type of a client and its jobs: ``bytes`` unless a ``serializer=`` says otherwise.
B = TypeVar("B", default=bytes)


@dataclass(frozen=True, slots=True, init=False)
class Job(Generic[B]):
    """A job as the server handed it out: its id and its body (as the client's serializer
    read it: the bytes verbatim by default)."""

    #: The server-wide job id.
    id: int
    #: The body: the bytes exactly as they were put, or what the serializer made of them.
    body: B

    def __init__(self, id: int, body: B) -> None:
        _set_job_id(self, id)
        _set_job_body(self, body)


_set_job_id = slot_setter(Job, "id")
_set_job_body = slot_setter(Job, "body")


#: A job or a job id: every command that names a job takes either.
JobRef = Job[Any] | int


def job_id_of(job: JobRef) -> int:
    """The id of ``job`` (a :class:`Job` or an ``int``)."""
    if isinstance(job, Job):
        return job.id
    if isinstance(job, int) and not isinstance(job, bool):
        return job
    raise LocalProtocolError(f"expected a Job or an int job id, not {type(job).__name__}")


def whole_seconds(what: str, value: float | timedelta) -> int:
    """Seconds as the wire's whole seconds, rounding a fraction up (0.2 s waits 1 s, not 0).

    Raises:
        LocalProtocolError: negative, not finite, or not a number.
    """
    if type(value) is int:
        return value  # the command validates the range
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LocalProtocolError(f"{what} must be seconds (int, float or timedelta)")
    if isinstance(value, int):
        return value  # the command validates the range
    if not math.isfinite(value) or value < 0:
        raise LocalProtocolError(f"{what} must be a finite number >= 0, got {value}")
    return math.ceil(value)
