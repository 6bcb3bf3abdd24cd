"""Typed views of ``inspect`` records and of ``run``/``result``/``lease`` replies.

The core hands out :class:`~workq_client._events.Record` objects (key, raw fields); these
functions turn them into objects with Python types: seconds as ``float``, times as aware UTC
datetimes, states as :class:`JobState`. Unknown keys (a newer server's) are kept in ``extra``.
"""

from __future__ import annotations

import enum
from datetime import datetime

from jobwire._numbers import parse_int
from jobwire._record import field, record
from jobwire.errors import RemoteProtocolError

from ._commands import parse_time
from ._events import Record

__all__ = [
    "JobInfo",
    "JobResultRecord",
    "JobState",
    "LeasedJob",
    "QueueInfo",
    "ServerInfo",
    "job_info",
    "queue_info",
    "server_info",
]


#: The type of payloads and results: ``bytes`` unless a client's ``serializer=`` says otherwise.
TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import Generic

    from typing_extensions import TypeVar

    B = TypeVar("B", default=bytes)
else:  # the default is for type checkers; importing typing_extensions costs a server ~6 ms
    from jobwire._typing import Generic, TypeVar

    B = TypeVar("B")  # a stand-in for the classes below; __getattr__ (at the end) for the rest


class JobState(enum.IntEnum):
    """``state`` of ``inspect job``."""

    #: Brand new and untouched, ready for processing.
    NEW = 0
    #: Completed successfully; no further processing.
    COMPLETED = 1
    #: Failed; no further processing.
    FAILED = 2
    #: Waiting to be processed again (after a TTR expiry or a failure with retries left).
    PENDING = 3
    #: Leased by a worker.
    LEASED = 4


@record
class JobResultRecord(Generic[B]):
    """The answer to ``run`` and ``result``: the job's id, whether it succeeded, its data (the
    result, or the error when it failed; through the client's serializer)."""

    job_id: str
    success: bool
    data: B


@record
class LeasedJob(Generic[B]):
    """A job handed to a worker by ``lease``; ``ttr`` is its time-to-run in seconds, and
    ``payload`` went through the client's serializer."""

    job_id: str
    name: str
    ttr: float
    payload: B


@record
class JobInfo:
    """One job as ``inspect job``/``jobs``/``scheduled-jobs`` show it (times in seconds)."""

    job_id: str
    name: str
    ttr: float
    ttl: float
    payload: bytes
    max_attempts: int
    attempts: int
    max_fails: int
    fails: int
    priority: int
    state: JobState | int
    created: datetime
    #: The scheduled time (scheduled jobs only).
    time: datetime | None = None
    extra: dict[str, bytes] = field(default_factory=dict)


@record
class QueueInfo:
    """One queue: jobs ready now and jobs scheduled for later."""

    name: str
    ready_len: int
    scheduled_len: int
    extra: dict[str, bytes] = field(default_factory=dict)


@record
class ServerInfo:
    """``inspect server``: Workq 0.2.0's three keys; ``extra`` holds any others, such as the
    bundled server's ``waiting-leases``, ``waiting-runs`` and ``waiting-results``."""

    active_clients: int
    evicted_jobs: int
    started: datetime
    extra: dict[str, bytes] = field(default_factory=dict)


def _fields(record: Record, needed: tuple[str, ...]) -> tuple[dict[str, bytes], dict[str, bytes]]:
    values = dict(record.fields)
    missing = [k for k in needed if k not in values]
    if missing:
        raise RemoteProtocolError(f"record {record.key!r} lacks {', '.join(missing)}")
    extra = {k: v for k, v in values.items() if k not in needed}
    return values, extra


def _int(values: dict[str, bytes], key: str) -> int:
    return parse_int(values[key], key)


def _time(values: dict[str, bytes], key: str) -> datetime:
    try:
        return parse_time(values[key].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise RemoteProtocolError(f"{key} is not a time: {values[key][:40]!r}") from None


_JOB_KEYS = ("name", "ttr", "ttl", "payload-size", "payload", "max-attempts", "attempts",
             "max-fails", "fails", "priority", "state", "created")


def job_info(record: Record) -> JobInfo:
    """A job record as a :class:`JobInfo`.

    Raises:
        RemoteProtocolError: a key is missing or a value is malformed.
    """
    values, extra = _fields(record, _JOB_KEYS)
    extra.pop("time", None)
    state = _int(values, "state")
    return JobInfo(
        job_id=record.key,
        name=values["name"].decode("ascii", "replace"),
        ttr=_int(values, "ttr") / 1000,
        ttl=_int(values, "ttl") / 1000,
        payload=values["payload"],
        max_attempts=_int(values, "max-attempts"),
        attempts=_int(values, "attempts"),
        max_fails=_int(values, "max-fails"),
        fails=_int(values, "fails"),
        priority=_int(values, "priority"),
        state=JobState(state) if state in JobState._value2member_map_ else state,
        created=_time(values, "created"),
        time=_time(values, "time") if "time" in values else None,
        extra=extra,
    )


def queue_info(record: Record) -> QueueInfo:
    """A queue record as a :class:`QueueInfo`.

    Raises:
        RemoteProtocolError: a key is missing or a value is malformed.
    """
    values, extra = _fields(record, ("ready-len", "scheduled-len"))
    return QueueInfo(record.key, _int(values, "ready-len"), _int(values, "scheduled-len"), extra)


def server_info(record: Record) -> ServerInfo:
    """The server record as a :class:`ServerInfo`.

    Raises:
        RemoteProtocolError: a key is missing or a value is malformed.
    """
    values, extra = _fields(record, ("active-clients", "evicted-jobs", "started"))
    return ServerInfo(
        _int(values, "active-clients"), _int(values, "evicted-jobs"), _time(values, "started"),
        extra,
    )


if not TYPE_CHECKING:
    del B

    def __getattr__(name: str) -> object:
        """``B``, a ``typing.TypeVar`` made (importing typing) when a module first imports it:
        the clients' generic classes need the real one, the bundled server does not."""
        if name != "B":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from typing import TypeVar

        return globals().setdefault("B", TypeVar("B"))
