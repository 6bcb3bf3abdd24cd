# GENERATED from _client_async.py by scripts/unasync.py: do not edit.
"""The qless API, async: :class:`Client`, :class:`Queue`, :class:`Job`,
:class:`RecurringJob`, and qless-py's collections (``client.jobs``, ``client.queues``,
``client.workers``).

``_client_sync.py`` (``Client``, ``Queue``, ``Job``...) is generated from this file by
``scripts/unasync.py``; a test fails when the two drift apart. Every call is one ``EVALSHA`` of
the qless script (``lua/qless.lua``) in qless-core's convention, built by ``_scripts``: these
classes check arguments, supply the clock and the worker name, encode job data as JSON and
decode replies.

Times: ``now`` comes from the client's ``clock`` (UTC seconds, sent as Python writes the
float). Delays and intervals are seconds; timestamps that come back (``Job.expires``) are aware
UTC datetimes.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta, timezone
from types import TracebackType
from typing import Any, Generic, TypeVar, overload

from typing_extensions import Self
from typing_extensions import TypeVar as DefaultTypeVar

from jobwire._ids import pooled, uuid4_hex
from jobwire._numbers import parse_decimal
from jobwire._pending import Pending
from jobwire._url import AddressLike, describe
from jobwire.errors import LocalProtocolError
from jobwire.serializers import (
    JSON,
    SerializationError,
    Serializer,
    detail,
    dump,
    load,
)

from . import _scripts as sc
from ._popguard import PopGuard
from ._redis import Redis
from ._resp import Arg
from .errors import BulkError, JobNotFound, LostLock

__all__ = [
    "Client",
    "Job",
    "Jobs",
    "Queue",
    "Queues",
    "RecurringJob",
    "Workers",
    "Observer",
    "default_worker_name",
    "new_jid",
]


T = TypeVar("T")
#: The type of job data: any JSON value unless a ``serializer=`` says otherwise.
D = DefaultTypeVar("D", default=Any)
#: Seconds, as a number or a ``timedelta``.
Seconds = float | timedelta

#: What a client calls with each script call it sent and the call's decoded result: its
#: ``observer`` (see :class:`Client`).
Observer = Callable[[sc.ScriptCall[Any], Any], None]
#: Jobs in flight at once in :meth:`Queue.put_many`.
DEFAULT_WINDOW = 512
_KEEP: Any = object()  # "send the job's current data"


class _Observed(Generic[T]):
    """A script call's reply follow-up (its ``Pending.then``) when the client has an observer:
    when the reply is dispatched (in the order replies come, in whichever task reads), decode
    it and show it to the observer; what either raises is kept for the caller, who raises it
    once awake (:meth:`outcome`). An error reply, or a reply whose caller left (cancelled,
    timed out), is not shown."""

    __slots__ = ("call", "error", "observer", "result")

    def __init__(self, call: sc.ScriptCall[T], observer: Observer) -> None:
        self.call = call
        self.observer = observer
        self.result: T | None = None
        self.error: BaseException | None = None

    def __call__(self, pending: Pending[Any]) -> None:
        if pending.error is not None or pending.abandoned:
            return
        try:
            self.result = result = self.call.decode(pending.reply)
            self.observer(self.call, result)
        except BaseException as exc:  # not the reading task's to raise: the caller's
            self.error = exc

    def outcome(self) -> T:
        """The decoded result (the reply came), or raise what decoding or the observer
        raised."""
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set: the reply came


_fresh_jid = pooled(uuid4_hex)


def new_jid() -> str:
    """A new job id: a UUID4 as 32 lower-case hex digits (from ``os.urandom``, read for a batch
    of ids at a time: ``jobwire._ids``)."""
    return _fresh_jid()


def default_worker_name() -> str:
    """``<hostname>-<pid>``, the worker name qless bindings use."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is a str, not {type(value).__name__}")
    if not value or not value.isprintable() or value != value.strip():
        raise LocalProtocolError(f"{what} must be printable, non-empty and unpadded: {value!r}")
    return value


def _seconds(value: object, what: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} is a number of seconds or a timedelta, not "
                        f"{type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise LocalProtocolError(f"{what} must be a finite number of seconds >= 0: {value!r}")
    return float(value)


#: ``json.dumps(data, allow_nan=False, separators=(",", ":"))``, without making an encoder per
#: call (it keeps no state between calls).
_JSON_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _encode(data: object) -> str:
    """Job data as JSON text: any JSON value in, the same value out.

    Raises:
        SerializationError: not a JSON value (a ``LocalProtocolError``).
    """
    try:
        return _JSON_ENCODER.encode(data)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"job data is not JSON-serialisable: {exc}") from None


def _dump_text(serializer: Serializer[D], data: D | None) -> str:
    """Job data as the JSON text the script stores: ``None`` is ``null``; anything else goes
    through ``serializer``, whose output must be UTF-8 JSON (every qless binding reads it, and
    the script refuses anything else).

    Raises:
        SerializationError: the serializer cannot write ``data``, or wrote no JSON text.
    """
    if data is None:
        return "null"
    if serializer is JSON:
        return _encode(data)
    raw = dump(serializer, data, "job data")
    try:
        text = raw.decode()
        json.loads(text)
    except ValueError:
        raise SerializationError(
            f"{serializer!r} wrote {raw[:40]!r}: qless job data must be JSON text"
        ) from None
    return text


def _when(value: datetime | date | float | None, clock: Callable[[], float]) -> float:
    if value is None:
        return clock()
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise LocalProtocolError("a datetime must be aware (tzinfo=timezone.utc)")
        return value.timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc).timestamp()
    return _seconds(value, "date")


def _datetime(value: float | None) -> datetime | None:
    return None if not value else datetime.fromtimestamp(value, timezone.utc)


_UNREAD: Any = object()  # "data not decoded yet"


class Job(Generic[D]):
    """A job as the server described it when it was fetched (``get``, ``pop``, ``peek``).

    The attributes are a snapshot; the methods act on the job in Redis. A popped job's
    :meth:`complete`, :meth:`fail`, :meth:`retry` and :meth:`heartbeat` speak for the worker
    that popped it (:attr:`worker`); they raise :class:`~qless_client.LostLock` once that
    worker no longer holds the job. qless-py's attribute names are there too
    (:attr:`klass_name`, :attr:`queue_name`, :attr:`worker_name`, :attr:`expires_at`,
    :attr:`original_retries`, :attr:`retries_left`, :attr:`ttl`).
    """

    __slots__ = (
        "_data", "_text", "client", "dependencies", "dependents", "expires", "failure",
        "history", "jid", "klass", "lost", "priority", "queue", "remaining", "retries",
        "spawned_from_jid", "state", "tags", "tracked", "worker",
    )

    def __init__(self, client: Client[D], raw: sc.JobData) -> None:
        self.client = client
        #: The job id (32 hex digits for jobs this library made).
        self.jid: str = raw["jid"]
        #: The job's class name: what the worker runs.
        self.klass: str = raw["klass"]
        #: ``waiting``, ``scheduled``, ``depends``, ``running``, ``stalled``, ``failed`` or
        #: ``complete``.
        self.state: str = raw["state"]
        #: The queue it is in (None once complete).
        self.queue: str | None = raw["queue"] or None
        #: The worker holding it ("" when none).
        self.worker: str = raw["worker"]
        #: Higher is popped sooner.
        self.priority: int = raw["priority"]
        #: When the lock runs out (None unless running).
        self.expires: datetime | None = _datetime(raw["expires"])
        self.retries: int = raw["retries"]
        #: Retries left before the job fails by itself.
        self.remaining: int = raw["remaining"]
        # The data as stored (JSON text), read through the client's serializer on first use
        # (``data``), so a job whose data it cannot read can still be failed or retried.
        self._text: str | None = raw["data"]
        self._data: D = _UNREAD
        self.tags: list[str] = list(raw["tags"])
        self.tracked: bool = bool(raw["tracked"])
        #: What happened to the job, oldest first: ``{"what": "put", "when": 1700000000,
        #: "q": "emails"}``, ``popped`` (``worker``), ``done``, ``failed`` (``group``),
        #: ``timed-out``, and the messages of :meth:`log`. ``when`` is whole seconds.
        self.history: list[sc.HistoryEntry] = list(raw["history"])
        self.failure: sc.Failure | None = raw["failure"] or None
        self.dependents: list[str] = list(raw["dependents"])
        self.dependencies: list[str] = list(raw["dependencies"])
        #: The recurring template this job is a run of (None for other jobs).
        self.spawned_from_jid: str | None = raw.get("spawned_from_jid")
        #: Set once a heartbeat found the lock lost (this object's :meth:`heartbeat`, or a
        #: worker's): whoever works on the job should stop; it must not be completed.
        self.lost = False

    def __repr__(self) -> str:
        return f"<Job {self.jid} {self.klass} {self.state} in {self.queue!r}>"

    # -- qless-py's names ------------------------------------------------------------------------

    @property
    def klass_name(self) -> str:
        """:attr:`klass` (qless-py's name)."""
        return self.klass

    @property
    def queue_name(self) -> str:
        """:attr:`queue`, "" when in none (qless-py's name)."""
        return self.queue or ""

    @property
    def worker_name(self) -> str:
        """:attr:`worker` (qless-py's name)."""
        return self.worker

    @property
    def expires_at(self) -> float:
        """When the lock runs out, in UTC seconds; 0 unless running (qless-py's name)."""
        return self.expires.timestamp() if self.expires is not None else 0.0

    @property
    def original_retries(self) -> int:
        """:attr:`retries` (qless-py's name)."""
        return self.retries

    @property
    def retries_left(self) -> int:
        """:attr:`remaining` (qless-py's name)."""
        return self.remaining

    @property
    def ttl(self) -> float:
        """Seconds until the lock runs out, on the client's clock (negative once it has)."""
        return self.expires_at - self.client.clock()

    # -- data ------------------------------------------------------------------------------------

    @property
    def data(self) -> D:
        """The job's data: the JSON value it was put with, through the client's serializer.

        Raises:
            DeserializationError: the serializer cannot read it (``.data``: the JSON text as
                bytes, ``.job_id``: the jid); the job can still be failed, retried or
                cancelled.
        """
        if self._data is _UNREAD:
            text = self._text or "null"
            self._data = load(self.client._serializer, text.encode(), self.jid, "data")
        return self._data

    @data.setter
    def data(self, value: D) -> None:
        self._data, self._text = value, None

    def _data_text(self) -> str:
        """The data to send back: as stored when it was neither replaced nor changed in place
        (no round trip through the serializer, so another binding's JSON spelling is kept),
        else the current value written by the serializer."""
        if self._text is not None:
            if self._data is _UNREAD:
                return self._text
            # Read, and perhaps changed in place (``job.data["k"] = v``): keep the stored text
            # only if it still reads as the current value.
            stored = load(self.client._serializer, self._text.encode(), self.jid, "data")
            if stored == self._data:
                return self._text
        return _dump_text(self.client._serializer, self.data)

    def _worker(self) -> str:
        """Who speaks for the job: the worker holding it, else this client's worker."""
        return self.worker or self.client.worker_name

    def _queue(self) -> str:
        if self.queue is None:
            raise LocalProtocolError(f"job {self.jid} is in no queue (state {self.state})")
        return self.queue

    # -- the worker's calls ----------------------------------------------------------------------

    def complete(
        self, next: str | None = None, *, delay: Seconds = 0, depends: Sequence[str] = (),
        data: D = _KEEP,
    ) -> str:
        """Send ``complete``: the job is done (with ``next``: put into that queue, after
        ``delay`` seconds or once ``depends`` are complete). ``data`` replaces the job's data.

        Returns:
            The job's new state: ``complete``, or ``waiting``/``scheduled``/``depends`` in
            ``next``.

        Raises:
            LostLock: this worker no longer holds the job (another worker does, or it is not
                running any more). JobNotFound.
            LocalProtocolError: bad arguments (``delay`` and ``depends`` together...).
            SerializationError: the client's serializer cannot write ``data`` (nothing sent).
        """
        if next is not None:
            _name(next, "next")
        if delay and depends:
            raise LocalProtocolError("complete takes delay or depends, not both")
        if (delay or depends) and next is None:
            raise LocalProtocolError("delay and depends go with next=")
        wait = _seconds(delay, "delay")
        text = self._data_text() if data is _KEEP else _dump_text(self.client._serializer, data)
        state = self.client._run(sc._complete(
            self.client.clock(), self.jid, self._worker(), self._queue(), text, next,
            wait or None, list(depends) or None, checked=True,  # as stored, or the serializer's
        ))
        self.state, self.queue = state, (next if next is not None else None)
        self.worker, self.expires = "", None
        if data is not _KEEP:
            self.data = data
        return state

    def fail(self, group: str, message: str, *, data: D = _KEEP) -> str:
        """Send ``fail``: the running job failed for good, in failure ``group`` (e.g. the
        exception type) with ``message`` (e.g. the traceback).

        Returns:
            The jid.

        Raises:
            WrongState: the job is not running. JobNotFound. LocalProtocolError: an empty
                group.
        """
        text = None if data is _KEEP else _dump_text(self.client._serializer, data)
        jid = self.client._run(sc.fail(
            self.client.clock(), self.jid, self._worker(), _name(group, "group"),
            str(message), text,
        ))
        self.state, self.worker, self.expires = "failed", "", None
        if data is not _KEEP:
            self.data = data
        return jid

    def retry(
        self, delay: Seconds = 0, group: str | None = None, message: str | None = None
    ) -> int:
        """Send ``retry``: give the job back to its queue (after ``delay`` seconds), counting
        against its retries; with none left it fails by itself. With ``group`` and
        ``message`` (both), the job keeps them as its failure, and fails in that group when no
        retries are left (else in ``failed-retries-<queue>``).

        Returns:
            The retries left; negative when the job failed for running out.

        Raises:
            LostLock: this worker does not hold the job's lock any more.
            JobNotFound: no job has this jid.
            LocalProtocolError: ``group`` without ``message`` or the reverse.
        """
        if (group is None) != (message is None):
            raise LocalProtocolError("retry takes group and message together")
        left = self.client._run(sc.retry(
            self.client.clock(), self.jid, self._queue(), self._worker(),
            _seconds(delay, "delay"), None if group is None else _name(group, "group"),
            None if message is None else str(message),
        ))
        self.remaining = left
        self.state = "failed" if left < 0 else ("scheduled" if delay else "waiting")
        self.worker, self.expires = "", None
        return left

    def heartbeat(self, data: D = _KEEP) -> datetime:
        """Send ``heartbeat``: renew the lock (and replace the job's data with ``data``).

        Returns:
            When the renewed lock runs out (also in :attr:`expires`; Redis answers whole
            seconds).

        Raises:
            LostLock: the lock was lost; the worker must stop working on the job
                (:attr:`lost` is set).
            JobNotFound: the job is gone (cancelled); :attr:`lost` is set too.
        """
        text = None if data is _KEEP else _dump_text(self.client._serializer, data)
        try:
            expires = self.client._run(sc.heartbeat(
                self.client.clock(), self.jid, self._worker(), text,
            ))
        except (LostLock, JobNotFound):
            self.lost = True
            raise
        self.expires = _datetime(expires)
        if data is not _KEEP:
            self.data = data
        return self.expires or datetime.fromtimestamp(0, timezone.utc)

    def timeout(self) -> None:
        """Send ``timeout``: end the job's lock now. It becomes ``stalled``; its worker's
        heartbeat and complete are refused, and the next pop of its queue hands it out again.

        Raises:
            WrongState: the job is not running. JobNotFound.
        """
        self.client._run(sc.timeout(self.client.clock(), self.jid))
        self.state, self.expires = "stalled", None

    # -- everyone's calls ------------------------------------------------------------------------

    def cancel(self) -> list[str]:
        """Send ``cancel``: delete the job. Raises ``HasDependents`` if others wait on it."""
        return self.client.cancel(self.jid)

    def track(self) -> None:
        """Send ``track track``: list the job among the tracked ones.

        Raises:
            JobNotFound: the job does not exist.
        """
        self.client._run(sc.track(self.client.clock(), self.jid))
        self.tracked = True

    def untrack(self) -> None:
        """Send ``track untrack``.

        Raises:
            JobNotFound: the job does not exist.
        """
        self.client._run(sc.untrack(self.client.clock(), self.jid))
        self.tracked = False

    def tag(self, *tags: str) -> list[str]:
        """Send ``tag add``: add ``tags``; return the job's tags.

        Raises:
            JobNotFound: the job does not exist.
        """
        self.tags = self.client._run(sc.tag_add(self.client.clock(), self.jid,
                                                      *[_name(t, "tag") for t in tags]))
        return self.tags

    def untag(self, *tags: str) -> list[str]:
        """Send ``tag remove``: remove ``tags``; return the job's tags.

        Raises:
            JobNotFound: the job does not exist.
        """
        self.tags = self.client._run(sc.tag_remove(self.client.clock(), self.jid,
                                                         *[_name(t, "tag") for t in tags]))
        return self.tags

    def set_priority(self, priority: int) -> int:
        """Send ``priority``: change the job's priority (higher is popped sooner; a waiting job
        moves in its queue).

        Raises:
            JobNotFound: the job does not exist.
        """
        self.client._run(sc.priority(self.client.clock(), self.jid, priority))
        self.priority = priority
        return priority

    def depend(self, *jids: str) -> None:
        """Send ``depends on``: the job (in state ``depends``) also waits for ``jids`` (those
        that exist and are not complete).

        Raises:
            WrongState: the job is not waiting on dependencies (or does not exist).
        """
        self.client._run(sc.depends_on(self.client.clock(), self.jid,
                                             *[_name(j, "jid") for j in jids]))
        self.dependencies = list(dict.fromkeys([*self.dependencies, *jids]))

    def undepend(self, *jids: str, all: bool = False) -> None:
        """Send ``depends off``: stop waiting for ``jids`` (or for every job, ``all=True``);
        a job left with none becomes waiting.

        Raises:
            WrongState: the job is not waiting on dependencies (or does not exist).
        """
        now = self.client.clock()
        if all:
            self.client._run(sc.depends_off_all(now, self.jid))
            self.dependencies = []
        else:
            self.client._run(sc.depends_off(now, self.jid,
                                                  *[_name(j, "jid") for j in jids]))
            self.dependencies = [j for j in self.dependencies if j not in jids]

    def log(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Send ``log``: add an event ``message`` (with the fields of ``data``, a JSON object)
        to the job's history.

        Raises:
            JobNotFound. LocalProtocolError: ``data`` is not JSON.
        """
        self.client._run(sc.log(self.client.clock(), self.jid, _name(message, "message"),
                                      data))

    def move(
        self, queue: str, *, delay: Seconds = 0, depends: Sequence[str] | None = None
    ) -> str:
        """Send ``put`` of this job into ``queue`` (it leaves its current queue or worker,
        keeping its data, priority, tags and retries); after ``delay`` seconds, or once
        ``depends`` are complete. A job cancelled meanwhile is put anew."""
        target = self.client.queue(queue)
        jid = self.client._run(target._put_call(
            self.klass, None, self.jid, None, None, delay, None, depends,
            text=self._data_text(),
        ))
        self.queue, self.worker, self.expires = queue, "", None
        return jid

    def requeue(
        self, queue: str | None = None, *, delay: Seconds = 0,
        depends: Sequence[str] | None = None, priority: int | None = None,
        tags: Sequence[str] | None = None, retries: int | None = None,
    ) -> str:
        """Send ``requeue``: like :meth:`move` (into ``queue``, default the job's own), but
        refused if the job no longer exists; ``priority``, ``tags`` and ``retries`` replace
        the job's own.

        Raises:
            JobNotFound: the job is gone (cancelled, pruned).
        """
        target = self.client.queue(queue if queue is not None else self._queue())
        call = target._put_call(self.klass, None, self.jid, priority, tags, delay, retries,
                                depends, text=self._data_text(), command="requeue")
        jid = self.client._run(call)
        self.queue, self.worker, self.expires = target.name, "", None
        return jid


class RecurringJob(Generic[D]):
    """A recurring job's template (``recur.get``): every ``interval`` seconds it puts job
    ``<jid>-<n>`` into :attr:`queue`. The attributes are a snapshot; the methods act in
    Redis."""

    __slots__ = ("_text", "backlog", "client", "count", "interval", "jid", "klass", "priority",
                 "queue", "retries", "state", "tags")

    def __init__(self, client: Client[D], raw: sc.RecurData) -> None:
        self.client = client
        self.jid: str = raw["jid"]
        self.klass: str = raw["klass"]
        self.queue: str = raw["queue"]
        #: ``recur``.
        self.state: str = raw["state"]
        self.priority: int = raw["priority"]
        #: Seconds between two jobs.
        self.interval: float = raw["interval"]
        #: The retries each job gets.
        self.retries: int = raw["retries"]
        #: How many jobs it put so far (the last is ``<jid>-<count>``).
        self.count: int = raw["count"]
        #: The most missed runs made up at once (0: all).
        self.backlog: int = raw.get("backlog") or 0
        self.tags: list[str] = list(raw["tags"])
        self._text: str = raw["data"]

    def __repr__(self) -> str:
        return f"<RecurringJob {self.jid} {self.klass} every {self.interval}s in {self.queue!r}>"

    @property
    def data(self) -> D:
        """The data each job gets, read through the client's serializer."""
        return load(self.client._serializer, self._text.encode(), self.jid, "data")

    @property
    def klass_name(self) -> str:
        """:attr:`klass` (qless-py's name)."""
        return self.klass

    @property
    def queue_name(self) -> str:
        """:attr:`queue` (qless-py's name)."""
        return self.queue

    def update(
        self, *, priority: int | None = None, interval: Seconds | None = None,
        retries: int | None = None, data: D = _KEEP, klass: str | None = None,
        queue: str | None = None, backlog: int | None = None,
    ) -> None:
        """Send ``recur.update`` with the fields given: ``interval`` moves the next run by the
        difference; ``queue`` moves the template (its next run kept).

        Raises:
            JobNotFound: there is no such template any more. LocalProtocolError: no field.
        """
        fields: dict[str, str | float] = {}
        if priority is not None:
            fields["priority"] = priority
        if interval is not None:
            every = _seconds(interval, "interval")
            if every <= 0:
                raise LocalProtocolError("interval must be > 0 seconds")
            fields["interval"] = every
        if retries is not None:
            fields["retries"] = retries
        if data is not _KEEP:
            fields["data"] = _dump_text(self.client._serializer, data)
        if klass is not None:
            fields["klass"] = _name(klass, "klass")
        if queue is not None:
            fields["queue"] = _name(queue, "queue")
        if backlog is not None:
            fields["backlog"] = backlog
        self.client._run(sc.recur_update(self.client.clock(), self.jid, **fields))
        for key, value in fields.items():
            if key == "data":
                self._text = str(value)
            else:
                setattr(self, key, value)

    def move(self, queue: str) -> None:
        """Send ``recur.update ... queue``: the template puts its jobs into ``queue`` now."""
        self.update(queue=queue)

    def tag(self, *tags: str) -> list[str]:
        """Send ``recur.tag``: the jobs it puts from now on carry ``tags`` too."""
        self.tags = self.client._run(sc.recur_tag(self.client.clock(), self.jid,
                                                        *[_name(t, "tag") for t in tags]))
        return self.tags

    def untag(self, *tags: str) -> list[str]:
        """Send ``recur.untag``."""
        self.tags = self.client._run(sc.recur_untag(self.client.clock(), self.jid,
                                                          *[_name(t, "tag") for t in tags]))
        return self.tags

    def cancel(self) -> None:
        """Send ``unrecur``: no more jobs (those it put stay)."""
        self.client._run(sc.unrecur(self.client.clock(), self.jid))


class Queue(Generic[D]):
    """One queue of a client: ``client.queue("emails")`` or ``client.queues["emails"]``."""

    __slots__ = ("client", "name")

    def __init__(self, client: Client[D], name: str) -> None:
        self.client = client
        self.name = _name(name, "queue name")

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def _put_call(
        self, klass: str, data: D | None, jid: str | None, priority: int | None,
        tags: Sequence[str] | None, delay: Seconds, retries: int | None,
        depends: Sequence[str] | None, text: str | None = None, command: str = "put",
    ) -> sc.ScriptCall[str]:
        if delay and depends:
            raise LocalProtocolError(f"{command} takes delay or depends, not both")
        if text is None:
            text = _dump_text(self.client._serializer, data)
        return sc._put(
            command, self.client.clock(), self.name,
            _name(jid, "jid") if jid is not None else new_jid(), _name(klass, "klass"), text,
            _seconds(delay, "delay"), priority,
            None if tags is None else [_name(t, "tag") for t in tags], retries,
            None if depends is None else [_name(j, "depends jid") for j in depends],
            checked=True,  # the client's own JSON text (``_dump_text``, ``_data_text``)
        )

    def put(
        self, klass: str, data: D | None = None, *, jid: str | None = None,
        priority: int | None = None, tags: Sequence[str] | None = None, delay: Seconds = 0,
        retries: int | None = None, depends: Sequence[str] | None = None,
    ) -> str:
        """Send ``put``: a job of class ``klass`` with ``data`` (any JSON value by default;
        what the client's serializer writes otherwise; ``None``: JSON ``null``).

        Args:
            jid: the job id (default: a new hex UUID4). Putting an existing jid moves that job
                here (its old worker's heartbeat and complete then fail).
            priority: higher is popped sooner (default 0; a moved job keeps its own).
            tags: tags to find the job by.
            delay: seconds before the job may be popped (``scheduled``).
            retries: how often the job may be retried before it fails by itself (default 5).
            depends: jids that must complete first (``depends``); not with ``delay``.

        Returns:
            The jid.

        Raises:
            LocalProtocolError: bad input (empty names, a negative delay...); nothing is sent.
            SerializationError: data the serializer cannot write (by default: not a JSON
                value); nothing is sent. TypeError: a value of the wrong type.
        """
        return self.client._run(
            self._put_call(klass, data, jid, priority, tags, delay, retries, depends)
        )

    def put_many(
        self, jobs: Iterable[tuple[str, D]], *, priority: int | None = None,
        tags: Sequence[str] | None = None, delay: Seconds = 0, retries: int | None = None,
        window: int = DEFAULT_WINDOW,
    ) -> list[str]:
        """Pipelined ``put`` of many ``(klass, data)`` jobs, each with a new jid and the same
        options, at most ``window`` unanswered at once. Every job is checked before the first
        is sent.

        Returns:
            The jids, in order.

        Raises:
            BulkError: some puts failed; ``.done`` has the ``(index, jid)`` of those that
                landed, ``.error`` the first failure.
            LocalProtocolError, TypeError: a bad job (nothing is sent).
        """
        calls = [self._put_call(k, d, None, priority, tags, delay, retries, None)
                 for k, d in jobs]
        return self.client._run_many(calls, window)

    @overload
    def pop(self, count: None = None) -> Job[D] | None: ...

    @overload
    def pop(self, count: int) -> list[Job[D]]: ...

    def pop(self, count: int | None = None) -> Job[D] | list[Job[D]] | None:
        """Send ``pop``: lock jobs for this client's worker: jobs whose lock expired (past the
        grace period) first, then recurring and scheduled jobs that came due, then waiting
        jobs by priority (highest first) and age. As in qless-py: ``pop()`` returns one job or
        None, ``pop(n)`` a list of up to ``n`` (fewer, or none, when the queue has fewer; none
        while the queue is paused or at its ``max-concurrency``).

        Async callers: one cancelled while the pop is out strands no job; the pop runs to its
        reply and the jobs it locked are handed back at once with ``retry`` (one retry each, as
        an expired lock would cost), then the cancellation propagates (``_popguard.py``)."""
        raw = PopGuard.pop(self.client, sc.pop(
            self.client.clock(), self.name, self.client.worker_name,
            1 if count is None else _count(count)))
        jobs = [Job(self.client, job) for job in raw]
        if count is None:
            return jobs[0] if jobs else None
        return jobs

    @overload
    def peek(self, count: None = None) -> Job[D] | None: ...

    @overload
    def peek(self, count: int) -> list[Job[D]]: ...

    def peek(self, count: int | None = None) -> Job[D] | list[Job[D]] | None:
        """Send ``peek``: the jobs :meth:`pop` would hand out next, without locking them: one
        or None for ``peek()``, a list for ``peek(n)``."""
        raw = self.client._run(sc.peek(self.client.clock(), self.name,
                                             1 if count is None else _count(count)))
        jobs = [Job(self.client, job) for job in raw]
        if count is None:
            return jobs[0] if jobs else None
        return jobs

    def counts(self) -> sc.QueueCounts:
        """Send ``queues <name>``: how many jobs are waiting, running, stalled, scheduled,
        depending and recurring, and whether the queue is paused."""
        return self.client._run(sc.queue(self.client.clock(), self.name))

    def length(self) -> int:
        """Send ``length``: jobs waiting, scheduled or running (stalled included)."""
        return self.client._run(sc.length(self.client.clock(), self.name))

    def jobs(self, state: str, offset: int = 0, limit: int = 25) -> list[str]:
        """Send ``jobs <state> <queue>``: a page of the jids in ``state`` (``running``,
        ``stalled``, ``scheduled``, ``depends``, ``recurring``), ``limit`` from ``offset``."""
        return self.client._run(sc.jobs(self.client.clock(), state, self.name, offset,
                                              limit))

    def stats(self, day: datetime | date | float | None = None) -> sc.Stats:
        """Send ``stats``: wait and run times (count, mean, standard deviation, histogram),
        failures and retries of this queue on the UTC day of ``day`` (default today)."""
        return self.client._run(sc.stats(self.client.clock(), self.name,
                                               _when(day, self.client.clock)))

    def pause(self) -> None:
        """Send ``pause``: pops of this queue hand out nothing until :meth:`unpause` (jobs
        already running go on)."""
        self.client._run(sc.pause(self.client.clock(), self.name))

    def unpause(self) -> None:
        """Send ``unpause``."""
        self.client._run(sc.unpause(self.client.clock(), self.name))

    def forget(self) -> None:
        """Send ``queue.forget``: drop the queue from :meth:`Client.queues` (its jobs
        stay; a put brings it back)."""
        self.client._run(sc.queue_forget(self.client.clock(), self.name))

    def recur(
        self, klass: str, data: D | None = None, interval: Seconds | None = None,
        offset: Seconds = 0, *, jid: str | None = None, priority: int | None = None,
        tags: Sequence[str] | None = None, retries: int | None = None,
        backlog: int | None = None,
    ) -> str:
        """Send ``recur``: put a job of ``klass`` every ``interval`` seconds, the first after
        ``offset`` (each occurrence is job ``<jid>-<n>``; ``backlog`` caps how many missed
        runs are made up). Recurring an existing jid replaces its template and keeps its
        count. Returns the template's jid.

        Raises:
            LocalProtocolError: no interval, or one <= 0.
        """
        if interval is None:
            raise LocalProtocolError("recur needs an interval")
        every = _seconds(interval, "interval")
        if every <= 0:
            raise LocalProtocolError("interval must be > 0 seconds")
        options: dict[str, Any] = {}
        if priority is not None:
            options["priority"] = priority
        if tags is not None:
            options["tags"] = [_name(t, "tag") for t in tags]
        if retries is not None:
            options["retries"] = retries
        if backlog is not None:
            options["backlog"] = backlog
        return self.client._run(sc.recur(
            self.client.clock(), self.name, _name(jid, "jid") if jid else new_jid(),
            _name(klass, "klass"), _dump_text(self.client._serializer, data), every,
            _seconds(offset, "offset"), **options,
        ))

    def unrecur(self, jid: str) -> None:
        """Send ``unrecur``: stop a recurring job (qless-core answers the same whether there
        was one or not)."""
        self.client._run(sc.unrecur(self.client.clock(), _name(jid, "jid")))

    def heartbeat(self) -> float:
        """The lock length of this queue in seconds (config ``<queue>-heartbeat``, else
        ``heartbeat``, else 60), as ``pop`` and ``heartbeat`` read it.

        Raises:
            RemoteProtocolError: the stored value is not a plain number (another binding
                wrote it).
        """
        value = self.client.config_get(f"{self.name}-heartbeat")
        if value is None:
            value = self.client.config_get("heartbeat")
        if value is None:
            return 60.0
        return float(parse_decimal(str(value), f"config heartbeat of queue {self.name!r}"))

    def set_heartbeat(self, seconds: Seconds | None) -> None:
        """Send ``config.set <queue>-heartbeat``: this queue's lock length (None: unset, the
        global ``heartbeat`` applies)."""
        option = f"{self.name}-heartbeat"
        if seconds is None:
            self.client.config_unset(option)
        else:
            self.client.config_set(option, _seconds(seconds, "heartbeat"))

    def max_concurrency(self) -> int:
        """The most jobs of this queue running at once (config ``<queue>-max-concurrency``;
        0: no limit)."""
        value = self.client.config_get(f"{self.name}-max-concurrency")
        if value is None:
            return 0
        return int(parse_decimal(str(value), f"config max-concurrency of queue {self.name!r}"))

    def set_max_concurrency(self, limit: int | None) -> None:
        """Send ``config.set <queue>-max-concurrency``: ``pop`` hands out jobs only while fewer
        than ``limit`` of this queue run (0 or None: no limit)."""
        option = f"{self.name}-max-concurrency"
        if not limit:
            self.client.config_unset(option)
        else:
            self.client.config_set(option, _count(limit))


def _count(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"count is an int, not {type(value).__name__}")
    if value < 1:
        raise LocalProtocolError(f"count must be >= 1, not {value}")
    return value


class Jobs(Generic[D]):
    """``client.jobs``: jobs by jid and the listings of jobs, as qless-py's ``client.jobs``."""

    __slots__ = ("client",)

    def __init__(self, client: Client[D]) -> None:
        self.client = client

    def __getitem__(self, jid: str) -> Job[D] | RecurringJob[D] | None:
        """``client.jobs[jid]``: the job (``get``), else the recurring job of that jid
        (``recur.get``), else None."""
        job = self.client.get(jid)
        if job is not None:
            return job
        return self.client.recurring(jid)

    def get(self, *jids: str) -> list[Job[D]]:
        """Send ``multiget``: the jobs among ``jids`` that exist, in order."""
        if not jids:
            return []
        raw = self.client._run(sc.multiget(self.client.clock(),
                                                 *[_name(j, "jid") for j in jids]))
        return [Job(self.client, j) for j in raw]

    def complete(self, offset: int = 0, count: int = 25) -> list[str]:
        """Send ``jobs complete``: a page of completed jids, newest first."""
        return self.client.completed(offset, count)

    def tracked(self) -> tuple[list[Job[D]], list[str]]:
        """Send ``track``: the tracked jobs, and the tracked jids whose job is gone."""
        return self.client.tracked()

    def tagged(self, tag: str, offset: int = 0, count: int = 25) -> sc.Page:
        """Send ``tag get``: a page of the jids tagged ``tag`` (``total``, ``jobs``)."""
        return self.client.tagged(tag, offset, count)

    def failed(
        self, group: str | None = None, start: int = 0, limit: int = 25
    ) -> dict[str, int] | tuple[int, list[Job[D]]]:
        """Send ``failed``: without ``group``, how many jobs each failure group holds; with
        it, the group's total and a page of its jobs, newest first."""
        if group is None:
            return self.client.failed()
        return self.client.failed_jobs(group, start, limit)


class Queues(Generic[D]):
    """``client.queues``: ``client.queues["emails"]`` is that queue (nothing is sent);
    ``client.queues()`` the counts of every known queue."""

    __slots__ = ("client",)

    def __init__(self, client: Client[D]) -> None:
        self.client = client

    def __getitem__(self, name: str) -> Queue[D]:
        return Queue(self.client, name)

    def __call__(self) -> list[sc.QueueCounts]:
        """Send ``queues``: every known queue with its counts by state, in the order they were
        first seen."""
        return self.client._run(sc.queues(self.client.clock()))

    def counts(self) -> list[sc.QueueCounts]:
        """The same as calling it (qless-py's ``client.queues.counts``)."""
        return self()

    def pause(self, *names: str) -> None:
        """Send ``pause`` for these queues."""
        self.client._run(sc.pause(self.client.clock(),
                                        *[_name(n, "queue name") for n in names]))

    def unpause(self, *names: str) -> None:
        """Send ``unpause`` for these queues."""
        self.client._run(sc.unpause(self.client.clock(),
                                          *[_name(n, "queue name") for n in names]))

    def forget(self, *names: str) -> None:
        """Send ``queue.forget``: drop these queues from the known ones (jobs stay)."""
        self.client._run(sc.queue_forget(self.client.clock(),
                                               *[_name(n, "queue name") for n in names]))


class Workers(Generic[D]):
    """``client.workers``: ``client.workers()`` lists the workers; ``await
    client.workers[name]`` is the jobs one holds."""

    __slots__ = ("client",)

    def __init__(self, client: Client[D]) -> None:
        self.client = client

    def __call__(self) -> list[sc.WorkerSummary]:
        """Send ``workers``: every worker, most recently active first, with its job counts."""
        return self.client._run(sc.workers(self.client.clock()))

    def counts(self) -> list[sc.WorkerSummary]:
        """The same as calling it (qless-py's ``client.workers.counts``)."""
        return self()

    def __getitem__(self, name: str) -> sc.WorkerJobs:
        """Send ``workers <name>``: the jids the worker holds, live and stalled."""
        return self.client._run(sc.worker(self.client.clock(), _name(name, "worker")))

    def deregister(self, *names: str) -> None:
        """Send ``worker.deregister``: forget these workers (a pop brings one back)."""
        self.client._run(sc.worker_deregister(self.client.clock(),
                                                    *[_name(n, "worker") for n in names]))


class Client(Generic[D]):
    """A qless client on one Redis connection, shared by many tasks (anyio: asyncio or trio).

        with Client("redis://127.0.0.1:6379/0") as client:
            jid = client.queue("emails").put("app.SendEmail", {"to": "a@example.com"})
            job = client.queues["emails"].pop()
            job.complete()

    Every call is one run of the qless script in qless-core's convention, so jobs are shared
    with qless-py, the Ruby gem and the web UI on the same Redis. qless-py's entry points are
    there too: ``client.jobs[jid]``, ``client.queues[name]``, ``client.workers[name]``,
    ``client.tags()``.

    Args:
        address: the Redis server, in any form :class:`~qless_client.Redis` takes
            (``redis://``, ``rediss://``, ``unix://`` URLs with db and password, ``"host:port"``,
            ``("host", port)``...). Or an :class:`Redis` to use (not closed by
            :meth:`close` then).
        port: the port, when ``address`` is a bare host.
        worker_name: who pops and completes (default ``<hostname>-<pid>``).
        clock: UTC seconds now; every call passes it to the script (Lua has no clock).
        serializer: how job data becomes the JSON text qless stores and back
            (``jobwire.serializers``; default ``JSON``: any JSON value). Yours must write JSON
            (every qless binding reads the data, and the script refuses anything else): wrap
            a model's ``model_dump_json``/``model_validate_json``, or use
            ``Json(default=...)`` for values ``json`` cannot write. Data it cannot write
            raises ``SerializationError`` at the call; a job whose data it cannot read raises
            ``DeserializationError`` when ``job.data`` is read.
        observer: called with every script call this client sends (a
            :class:`qless_client.script.ScriptCall`: its ``command``, ``args`` and ``now``)
            and the call's decoded result, when its reply is read: in the order the replies
            come, which is the order the calls were sent on the connection, in whichever task
            reads (in the event loop, for :meth:`blocking`'s calls), before the caller gets
            the result; for a pipelined batch (``put_many``...), once for each call that
            succeeded. It must not block: the connection's other replies wait for it. A call
            that raised (refused by the script, its connection lost), or whose caller had left
            before its reply came (cancelled, out of time), is not seen. What the observer
            raises (or a reply that cannot be decoded) is raised by that call, in its
            caller's task (the call was run; for a batch, the first such error, once every
            call was seen). The attribute :attr:`observer` may be set or cleared later (a
            call sees the observer set when it is sent). The workers record their events
            this way.
        redis_options: further keyword arguments for :class:`Redis` (``db``, ``password``,
            ``timeout``, ``ssl``...).

    Raises:
        TypeError, InvalidAddress: the address is not one (nothing is sent).
    """

    _serializer: Serializer[D] = JSON
    #: Where a client made by :meth:`_relayed` sends its calls, instead of a connection of its
    #: own: ``(run, run_many)``.
    _relay: tuple[Callable[..., Any], Callable[..., Any]] | None = None

    def __init__(
        self, address: AddressLike | Redis = "127.0.0.1", port: int | None = None, *,
        worker_name: str | None = None, clock: Callable[[], float] = time.time,
        serializer: Serializer[D] | None = None, observer: Observer | None = None,
        **redis_options: Any,
    ) -> None:
        if isinstance(address, Redis):
            if port is not None or redis_options:
                raise TypeError("port and Redis options go with an address, not a connection")
            self.redis, self._owns = address, False
        else:
            self.redis, self._owns = Redis(address, port, **redis_options), True
        self.worker_name = _name(worker_name or default_worker_name(), "worker_name")
        self.clock = clock
        if serializer is not None:
            self._serializer = serializer
        #: Called with each script call sent and its decoded result (see ``observer=``).
        self.observer = observer
        self._loaded = False

    @classmethod
    def _relayed(
        cls, like: Any, run: Callable[..., Any], run_many: Callable[..., Any]
    ) -> Client[Any]:
        """A client with no connection of its own: its script calls go to ``run(call)`` and
        ``run_many(calls, window)``; its worker name, clock and serializer are ``like``'s."""
        client: Client[Any] = cls.__new__(cls)
        client._owns, client._loaded, client._relay = False, True, (run, run_many)
        client.worker_name, client.clock = like.worker_name, like.clock
        client._serializer, client.observer = like.serializer, None
        return client

    def __repr__(self) -> str:
        where = "(relayed)" if self._relay is not None else self.redis._where()
        return describe(self, where, f"worker={self.worker_name!r}",
                        detail(self._serializer, JSON))

    @property
    def serializer(self) -> Serializer[D]:
        """How this client's job data becomes JSON text and back (``serializer=``)."""
        return self._serializer

    def __enter__(self) -> Self:
        if self._relay is None:
            self.redis.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (unless it was given to the constructor)."""
        if self._owns:
            self.redis.close()

    def _load(self) -> None:
        if not self._loaded:
            self.redis.load_script(sc.SOURCE)
            self._loaded = True

    def _run(self, call: sc.ScriptCall[T]) -> T:
        """Send one ``EVALSHA`` of the qless script (loading it first, once per client; a
        ``NOSCRIPT`` later reloads it), decode the reply and show it to the observer."""
        relay = self._relay
        if relay is not None:
            return relay[0](call)  # type: ignore[no-any-return]
        self._load()
        observer = self.observer
        if observer is None:
            return call.decode(self.redis._evalsha_encoded(sc.SHA, call.encode()))
        # Decoded and observed as the reply is read (wire order), raised here.
        seen = _Observed(call, observer)
        self.redis._evalsha_encoded(sc.SHA, call.encode(), seen)
        return seen.outcome()

    def _run_many(self, calls: Sequence[sc.ScriptCall[T]], window: int) -> list[T]:
        relay = self._relay
        if relay is not None:
            return relay[1](calls, window)  # type: ignore[no-any-return]
        self._load()
        commands: list[list[Arg]] = [list(c.command_line()) for c in calls]
        observer = self.observer
        if observer is not None:
            return self._run_many_observed(calls, commands, window, observer)
        try:
            replies = self.redis._pipeline(commands, window)
        except BulkError as exc:
            outcomes = [r if isinstance(r, BaseException) else c.decode(r)
                        for c, r in zip(calls, exc.results, strict=True)]
            raise BulkError(outcomes) from exc.error
        return [c.decode(r) for c, r in zip(calls, replies, strict=True)]

    def _run_many_observed(
        self, calls: Sequence[sc.ScriptCall[T]], commands: list[list[Arg]], window: int,
        observer: Observer,
    ) -> list[T]:
        """:meth:`_run_many` with an observer: each reply decoded and observed as it is read;
        the first error that raised is raised here once all are in."""
        seen = [_Observed(call, observer) for call in calls]
        try:
            self.redis._pipeline(commands, window, seen)
        except BulkError as exc:
            outcomes = [r if isinstance(r, BaseException) else s.outcome()
                        for s, r in zip(seen, exc.results, strict=True)]
            raise BulkError(outcomes) from exc.error
        return [s.outcome() for s in seen]

    # -- qless-py's entry points ----------------------------------------------------------------

    @property
    def jobs(self) -> Jobs[D]:
        """Jobs by jid (``client.jobs[jid]``) and listings (``client.jobs.failed()``...)."""
        return Jobs(self)

    @property
    def queues(self) -> Queues[D]:
        """``client.queues["emails"]``: a queue; ``client.queues()``: every queue's
        counts."""
        return Queues(self)

    @property
    def workers(self) -> Workers[D]:
        """``client.workers()``: the workers; ``client.workers[name]``: one's jobs;
        ``client.workers.deregister(...)``."""
        return Workers(self)

    def queue(self, name: str) -> Queue[D]:
        """The queue ``name`` (nothing is sent)."""
        return Queue(self, name)

    # -- jobs -----------------------------------------------------------------------------------

    def get(self, jid: str) -> Job[D] | None:
        """Send ``get``: the job, or None if there is no such job."""
        raw = self._run(sc.get(self.clock(), _name(jid, "jid")))
        return None if raw is None else Job(self, raw)

    def recurring(self, jid: str) -> RecurringJob[D] | None:
        """Send ``recur.get``: the recurring job's template, or None."""
        raw = self._run(sc.recur_get(self.clock(), _name(jid, "jid")))
        return None if raw is None else RecurringJob(self, raw)

    def cancel(self, *jids: str) -> list[str]:
        """Send ``cancel``: delete these jobs; returns the jids given.

        Raises:
            HasDependents: a job not cancelled with them depends on one of them (nothing is
                cancelled).
        """
        return self._run(sc.cancel(self.clock(), *[_name(j, "jid") for j in jids]))

    def timeout(self, *jids: str) -> None:
        """Send ``timeout``: end these running jobs' locks now (see :meth:`Job.timeout`).

        Raises:
            WrongState: one is not running (those before it were timed out). JobNotFound.
        """
        self._run(sc.timeout(self.clock(), *[_name(j, "jid") for j in jids]))

    def track(self, jid: str) -> bool:
        """Send ``track track``: True if the job was not tracked yet. Raises JobNotFound."""
        return self._run(sc.track(self.clock(), _name(jid, "jid")))

    def untrack(self, jid: str) -> bool:
        """Send ``track untrack``: True if the job was tracked. Raises JobNotFound."""
        return self._run(sc.untrack(self.clock(), _name(jid, "jid")))

    def tracked(self) -> tuple[list[Job[D]], list[str]]:
        """Send ``track``: the tracked jobs, and the tracked jids whose job is gone."""
        raw = self._run(sc.tracked(self.clock()))
        return [Job(self, j) for j in raw["jobs"]], list(raw["expired"])

    def tagged(self, tag: str, offset: int = 0, limit: int = 25) -> sc.Page:
        """Send ``tag get``: a page of the jids tagged ``tag`` (``total``, ``jobs``), oldest
        tagging first, ``limit`` from ``offset``."""
        return self._run(sc.tag_get(self.clock(), _name(tag, "tag"), offset,
                                          offset + _count(limit) - 1))

    def tags(self, offset: int = 0, count: int = 100) -> list[str]:
        """Send ``tag top``: the tags most jobs carry, most first (tags on fewer than two jobs
        are left out, as qless-core does)."""
        return self._run(sc.tag_top(self.clock(), offset, count))

    def failed(self) -> dict[str, int]:
        """Send ``failed``: how many failed jobs each failure group holds."""
        return self._run(sc.failed_counts(self.clock()))

    def failed_jobs(
        self, group: str, offset: int = 0, limit: int = 25
    ) -> tuple[int, list[Job[D]]]:
        """Send ``failed <group>``, then ``multiget``: the group's total and a page of its
        jobs, the most recently failed first (``limit`` from ``offset``)."""
        page = self._run(sc.failed(self.clock(), _name(group, "group"), offset,
                                         offset + limit))
        return page["total"], self.jobs.get(*page["jobs"])

    def unfail(self, queue: str, group: str, count: int = 25) -> int:
        """Send ``unfail``: put the oldest ``count`` jobs of failure ``group`` back into
        ``queue``; returns how many moved."""
        return self._run(sc.unfail(self.clock(), _name(queue, "queue"),
                                         _name(group, "group"), _count(count)))

    def completed(self, offset: int = 0, limit: int = 25) -> list[str]:
        """Send ``jobs complete``: a page of completed jids, newest first (``limit`` from
        ``offset``)."""
        return self._run(sc.jobs(self.clock(), "complete", None, offset, limit))

    def worker_jobs(self, name: str | None = None) -> sc.WorkerJobs:
        """Send ``workers <name>``: the jids a worker (default: this client's) holds."""
        return self._run(sc.worker(self.clock(), _name(name or self.worker_name,
                                                             "worker")))

    # -- config ---------------------------------------------------------------------------------

    def config(self) -> dict[str, str]:
        """Send ``config.get``: every option with its value (qless-core's defaults included),
        as text."""
        return self._run(sc.config_get_all(self.clock()))

    def config_get(self, option: str) -> str | None:
        """Send ``config.get <option>``: its value (or qless-core's default) as text, or None
        if unknown and unset."""
        return self._run(sc.config_get(self.clock(), _name(option, "option")))

    def config_set(self, option: str, value: str | int | float) -> None:
        """Send ``config.set``."""
        self._run(sc.config_set(self.clock(), _name(option, "option"), value))

    def config_unset(self, option: str) -> None:
        """Send ``config.unset``: back to the default."""
        self._run(sc.config_unset(self.clock(), _name(option, "option")))
