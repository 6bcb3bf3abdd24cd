# GENERATED from _client_async.py by scripts/unasync.py: do not edit.
"""The qless API, async: :class:`Client`, :class:`Queue`, :class:`Job`.

``_client_sync.py`` (``Client``, ``Queue``, ``Job``) is generated from this file by
``scripts/unasync.py``; a test fails when the two drift apart. Every call is one ``EVALSHA`` of
the qless script (``lua/qless.lua``) built by ``_scripts``: these classes check arguments,
supply the clock and the worker name, encode job data as JSON and decode replies.

Times: ``now`` comes from the client's ``clock`` (UTC seconds, sent with millisecond
precision). Delays and intervals are seconds; timestamps that come back (``Job.expires``) are
aware UTC datetimes.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta, timezone
from types import TracebackType
from typing import Any, Generic, TypeVar

from typing_extensions import TypeVar as DefaultTypeVar

from jobwire._numbers import parse_decimal
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

__all__ = ["Client", "Job", "Queue", "default_worker_name", "new_jid"]

T = TypeVar("T")
#: The type of job data: any JSON value unless a ``serializer=`` says otherwise.
D = DefaultTypeVar("D", default=Any)
#: Seconds, as a number or a ``timedelta``.
Seconds = float | timedelta

#: Jobs in flight at once in :meth:`Queue.put_many`.
DEFAULT_WINDOW = 512
_KEEP: Any = object()  # "send the job's current data"


def new_jid() -> str:
    """A new job id: a UUID4 as 32 lower-case hex digits (from ``os.urandom``)."""
    return uuid.UUID(bytes=os.urandom(16), version=4).hex


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


def _encode(data: object) -> str:
    """Job data as JSON text: any JSON value in, the same value out.

    Raises:
        SerializationError: not a JSON value (a ``LocalProtocolError``).
    """
    try:
        return json.dumps(data, allow_nan=False, separators=(",", ":"))
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
    worker no longer holds the job.
    """

    __slots__ = (
        "_data", "_text", "client", "dependencies", "dependents", "expires", "failure",
        "history", "jid", "klass", "lost", "priority", "queue", "remaining", "retries", "state",
        "tags", "tracked", "worker",
    )

    def __init__(self, client: Client[D], raw: sc.JobData) -> None:
        self.client = client
        #: The job id (32 hex digits for jobs this library made).
        self.jid: str = raw["jid"]
        #: The job's class name: what the worker runs.
        self.klass: str = raw["klass"]
        #: ``waiting``, ``scheduled``, ``depends``, ``running``, ``failed`` or ``complete``.
        self.state: str = raw["state"]
        #: The queue it is in (None once complete).
        self.queue: str | None = raw["queue"] or None
        #: The worker holding it ("" when none).
        self.worker: str = raw["worker"]
        #: Lower runs sooner.
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
        self.history: list[sc.HistoryEntry] = list(raw["history"])
        self.failure: sc.Failure | None = raw["failure"] or None
        self.dependents: list[str] = list(raw["dependents"])
        self.dependencies: list[str] = list(raw["dependencies"])
        #: Set once a heartbeat found the lock lost (this object's :meth:`heartbeat`, or a
        #: worker's): whoever works on the job should stop; it must not be completed.
        self.lost = False

    def __repr__(self) -> str:
        return f"<Job {self.jid} {self.klass} {self.state} in {self.queue!r}>"

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
            LostLock: this worker no longer holds the job. WrongQueue, JobNotFound.
            LocalProtocolError: bad arguments (``delay`` and ``depends`` together...).
            SerializationError: the client's serializer cannot write ``data`` (nothing sent).
        """
        if next is not None:
            _name(next, "next")
        if delay and depends:
            raise LocalProtocolError("complete takes delay or depends, not both")
        if (delay or depends) and next is None:
            raise LocalProtocolError("delay and depends go with next=")
        text = self._data_text() if data is _KEEP else _dump_text(self.client._serializer, data)
        state = self.client._run(sc.complete(
            self.client.clock(), self.jid, self._worker(), self._queue(), text, next=next,
            delay=_seconds(delay, "delay"), depends=list(depends) or None,
        ))
        self.state, self.queue = state, (next if next is not None else None)
        if data is not _KEEP:
            self.data = data
        return state

    def fail(self, group: str, message: str, *, data: D = _KEEP) -> str:
        """Send ``fail``: the job failed for good, in failure ``group`` (e.g. the exception
        type) with ``message`` (e.g. the traceback). Any state can fail.

        Raises:
            JobNotFound. LocalProtocolError: an empty group.
        """
        text = None if data is _KEEP else _dump_text(self.client._serializer, data)
        jid = self.client._run(sc.fail(
            self.client.clock(), self.jid, self._worker(), _name(group, "group"),
            str(message), text,
        ))
        self.state = "failed"
        return jid

    def retry(self, delay: Seconds = 0) -> int:
        """Send ``retry``: give the job back to its queue (after ``delay`` seconds), counting
        against its retries; with none left it fails by itself.

        Returns:
            The retries left; negative when the job failed for running out.

        Raises:
            LostLock: this worker does not hold the job's lock any more.
            WrongQueue: the job is not in the queue the call named.
            JobNotFound: no job has this jid.
        """
        left = self.client._run(sc.retry(
            self.client.clock(), self.jid, self._queue(), self._worker(),
            _seconds(delay, "delay"),
        ))
        self.remaining = left
        self.state = "failed" if left < 0 else ("scheduled" if delay else "waiting")
        return left

    def heartbeat(self, data: D = _KEEP) -> datetime:
        """Send ``heartbeat``: renew the lock (and replace the job's data with ``data``).

        Returns:
            When the renewed lock runs out (also in :attr:`expires`).

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

    def cancel(self) -> list[str]:
        """Send ``cancel``: delete the job. Raises ``HasDependents`` if others wait on it."""
        return self.client.cancel(self.jid)

    def track(self) -> None:
        """Send ``track``: list the job among the tracked ones."""
        self.client._run(sc.track(self.client.clock(), self.jid))
        self.tracked = True

    def untrack(self) -> None:
        """Send ``track untrack``."""
        self.client._run(sc.untrack(self.client.clock(), self.jid))
        self.tracked = False

    def tag(self, *tags: str) -> list[str]:
        """Send ``tag add``: add ``tags``; return the job's tags."""
        self.tags = self.client._run(sc.tag_add(self.client.clock(), self.jid,
                                                      *[_name(t, "tag") for t in tags]))
        return self.tags

    def untag(self, *tags: str) -> list[str]:
        """Send ``tag remove``: remove ``tags``; return the job's tags."""
        self.tags = self.client._run(sc.tag_remove(self.client.clock(), self.jid,
                                                         *[_name(t, "tag") for t in tags]))
        return self.tags

    def set_priority(self, priority: int) -> int:
        """Send ``priority``: change the job's priority (a waiting job moves in its queue)."""
        self.priority = self.client._run(sc.priority(self.client.clock(), self.jid,
                                                           priority))
        return self.priority

    def depend(self, *jids: str) -> None:
        """Send ``depends on``: the job (in state ``depends``) also waits for ``jids``.

        Raises:
            WrongState: the job is not waiting on dependencies. JobNotFound.
        """
        self.client._run(sc.depends_on(self.client.clock(), self.jid, *jids))
        self.dependencies = list(dict.fromkeys([*self.dependencies, *jids]))

    def undepend(self, *jids: str, all: bool = False) -> None:
        """Send ``depends off``: stop waiting for ``jids`` (or for every job, ``all=True``);
        a job left with none becomes waiting."""
        now = self.client.clock()
        if all:
            self.client._run(sc.depends_off_all(now, self.jid))
            self.dependencies = []
        else:
            self.client._run(sc.depends_off(now, self.jid, *jids))
            self.dependencies = [j for j in self.dependencies if j not in jids]

    def move(self, queue: str, *, delay: Seconds = 0) -> str:
        """Send ``put`` of this job into ``queue`` (it leaves its current queue or worker,
        keeping its data, priority, tags and retries)."""
        target = self.client.queue(queue)
        return self.client._run(target._put_call(
            self.klass, None, self.jid, None, None, delay, None, None, text=self._data_text(),
        ))


class Queue(Generic[D]):
    """One queue of a client: ``client.queue("emails")``."""

    __slots__ = ("client", "name")

    def __init__(self, client: Client[D], name: str) -> None:
        self.client = client
        self.name = _name(name, "queue name")

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def _put_call(
        self, klass: str, data: D | None, jid: str | None, priority: int | None,
        tags: Sequence[str] | None, delay: Seconds, retries: int | None,
        depends: Sequence[str] | None, text: str | None = None,
    ) -> sc.ScriptCall[str]:
        if delay and depends:
            raise LocalProtocolError("put takes delay or depends, not both")
        if text is None:
            text = _dump_text(self.client._serializer, data)
        return sc.put(
            self.client.clock(), self.name, _name(jid, "jid") if jid is not None else new_jid(),
            _name(klass, "klass"), text, delay=_seconds(delay, "delay"),
            priority=priority, tags=None if tags is None else [_name(t, "tag") for t in tags],
            retries=retries, depends=None if depends is None else list(depends),
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
            priority: lower runs sooner (default 0).
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

    def pop(self, count: int = 1) -> list[Job[D]]:
        """Send ``pop``: lock up to ``count`` jobs for this client's worker: jobs whose lock
        expired first, then scheduled jobs that came due, then waiting jobs by priority and
        age. Returns fewer (or none) when the queue has fewer.

        Async callers: one cancelled while the pop is out strands no job; the pop runs to its
        reply and the jobs it locked are handed back at once with ``retry`` (one retry each, as
        an expired lock would cost), then the cancellation propagates (``_popguard.py``)."""
        raw = PopGuard.pop(self.client, sc.pop(
            self.client.clock(), self.name, self.client.worker_name, _count(count)))
        return [Job(self.client, job) for job in raw]

    def peek(self, count: int = 1) -> list[Job[D]]:
        """Send ``peek``: the jobs :meth:`pop` would hand out next, without locking them."""
        raw = self.client._run(sc.peek(self.client.clock(), self.name, _count(count)))
        return [Job(self.client, job) for job in raw]

    def counts(self) -> sc.QueueCounts:
        """Send ``queues <name>``: how many jobs are waiting, running, stalled, scheduled,
        depending and recurring."""
        return self.client._run(sc.queue(self.client.clock(), self.name))

    def length(self) -> int:
        """Jobs waiting, scheduled or running (stalled included)."""
        c = self.counts()
        return c["waiting"] + c["scheduled"] + c["running"] + c["stalled"]

    def jobs(self, state: str, offset: int = 0, limit: int = 25) -> list[str]:
        """Send ``jobs <state> <queue>``: a page of the jids in ``state`` (``waiting``,
        ``running``, ``stalled``, ``scheduled``, ``depends``, ``recurring``), ``limit`` from
        ``offset``."""
        return self.client._run(sc.jobs(self.client.clock(), state, self.name, offset,
                                              limit))

    def stats(self, day: datetime | date | float | None = None) -> sc.Stats:
        """Send ``stats``: wait and run times (count, mean, variance, histogram), failures
        and retries of this queue on the UTC day of ``day`` (default today)."""
        return self.client._run(sc.stats(self.client.clock(), self.name,
                                               _when(day, self.client.clock)))

    def recur(
        self, klass: str, data: D | None = None, *, interval: Seconds, offset: Seconds = 0,
        jid: str | None = None, priority: int | None = None, tags: Sequence[str] | None = None,
        retries: int | None = None, backlog: int | None = None,
    ) -> str:
        """Send ``recur``: put a job of ``klass`` every ``interval`` seconds, the first after
        ``offset`` (each occurrence is job ``<jid>-<n>``; ``backlog`` caps how many missed
        runs are made up). Returns the template's jid."""
        every = _seconds(interval, "interval")
        if every <= 0:
            raise LocalProtocolError("interval must be > 0 seconds")
        options: dict[str, Any] = {"offset": _seconds(offset, "offset")}
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
            _name(klass, "klass"), _dump_text(self.client._serializer, data), every, **options,
        ))

    def unrecur(self, jid: str) -> bool:
        """Send ``unrecur``: stop a recurring job; False if there was none."""
        removed: int = self.client._run(sc.unrecur(self.client.clock(), _name(jid, "jid")))
        return bool(removed)

    def heartbeat(self) -> int:
        """The lock length of this queue in seconds (``heartbeat-<queue>``, else
        ``heartbeat``).

        Raises:
            RemoteProtocolError: the stored value is not a plain non-negative number (another
                binding wrote it).
        """
        value = self.client.config_get(f"heartbeat-{self.name}")
        if value is None:
            value = self.client.config_get("heartbeat")
        if value is None:
            return 60
        return int(parse_decimal(str(value), f"config heartbeat of queue {self.name!r}"))


def _count(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"count is an int, not {type(value).__name__}")
    if value < 1:
        raise LocalProtocolError(f"count must be >= 1, not {value}")
    return value


class Client(Generic[D]):
    """A qless client on one Redis connection, shared by many tasks (anyio: asyncio or trio).

        with Client("redis://127.0.0.1:6379/0") as client:
            jid = client.queue("emails").put("app.SendEmail", {"to": "a@example.com"})
            [job] = client.queue("emails").pop()
            job.complete()

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
        redis_options: further keyword arguments for :class:`Redis` (``db``, ``password``,
            ``timeout``, ``ssl``...).

    Raises:
        TypeError, InvalidAddress: the address is not one (nothing is sent).
    """

    #: How job data becomes JSON text and back (a class default, for subclasses that skip
    #: ``__init__``).
    _serializer: Serializer[D] = JSON

    def __init__(
        self, address: AddressLike | Redis = "127.0.0.1", port: int | None = None, *,
        worker_name: str | None = None, clock: Callable[[], float] = time.time,
        serializer: Serializer[D] | None = None, **redis_options: Any,
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
        self._loaded = False

    def __repr__(self) -> str:
        return describe(self, self.redis._where(), f"worker={self.worker_name!r}",
                        detail(self._serializer, JSON))

    def __enter__(self) -> Client[D]:
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
        ``NOSCRIPT`` later reloads it) and decode the reply."""
        self._load()
        return call.decode(self.redis.evalsha(sc.SHA, call.keys, call.args))

    def _run_many(self, calls: Sequence[sc.ScriptCall[T]], window: int) -> list[T]:
        self._load()
        commands: list[list[Arg]] = [
            ["EVALSHA", sc.SHA, len(c.keys), *c.keys, *c.args] for c in calls
        ]
        try:
            replies = self.redis.pipeline(commands, window=window)
        except BulkError as exc:
            results = [r if isinstance(r, BaseException) else c.decode(r)
                       for c, r in zip(calls, exc.results, strict=True)]
            raise BulkError(results) from exc.error
        return [c.decode(r) for c, r in zip(calls, replies, strict=True)]

    def queue(self, name: str) -> Queue[D]:
        """The queue ``name`` (nothing is sent)."""
        return Queue(self, name)

    def get(self, jid: str) -> Job[D] | None:
        """Send ``get``: the job, or None if there is no such job."""
        raw = self._run(sc.get(self.clock(), _name(jid, "jid")))
        return None if raw is None else Job(self, raw)

    def cancel(self, *jids: str) -> list[str]:
        """Send ``cancel``: delete these jobs; returns the jids cancelled.

        Raises:
            HasDependents: a job not cancelled with them depends on one of them (nothing is
                cancelled).
        """
        return self._run(sc.cancel(self.clock(), *[_name(j, "jid") for j in jids]))

    def tracked(self) -> tuple[list[Job[D]], list[str]]:
        """Send ``track``: the tracked jobs, and the tracked jids whose job is gone."""
        raw = self._run(sc.tracked(self.clock()))
        return [Job(self, j) for j in raw["jobs"]], list(raw["expired"])

    def tagged(self, tag: str, offset: int = 0, limit: int = 25) -> sc.Page:
        """Send ``tag get``: a page of the jids tagged ``tag`` (``total``, ``jobs``), ``limit``
        from ``offset``."""
        return self._run(sc.tag_get(self.clock(), _name(tag, "tag"), offset, limit))

    def failed(self) -> dict[str, int]:
        """Send ``failed``: how many failed jobs each failure group holds."""
        return self._run(sc.failed_counts(self.clock()))

    def failed_jobs(
        self, group: str, offset: int = 0, limit: int = 25
    ) -> tuple[int, list[Job[D]]]:
        """Send ``failed <group>``: the group's total and a page of its jobs, newest first
        (``limit`` from ``offset``)."""
        raw = self._run(sc.failed(self.clock(), _name(group, "group"), offset, limit))
        return raw["total"], [Job(self, j) for j in raw["jobs"]]

    def unfail(self, queue: str, group: str, count: int = 25) -> int:
        """Send ``unfail``: put the oldest ``count`` jobs of failure ``group`` back into
        ``queue``; returns how many moved."""
        return self._run(sc.unfail(self.clock(), _name(queue, "queue"),
                                         _name(group, "group"), _count(count)))

    def queues(self) -> list[sc.QueueCounts]:
        """Send ``queues``: every known queue with its counts by state."""
        return self._run(sc.queues(self.clock()))

    def workers(self) -> list[sc.WorkerSummary]:
        """Send ``workers``: every worker, most recently active first, with its job counts."""
        return self._run(sc.workers(self.clock()))

    def worker_jobs(self, name: str | None = None) -> sc.WorkerJobs:
        """Send ``workers <name>``: the jids a worker (default: this client's) holds."""
        return self._run(sc.worker(self.clock(), _name(name or self.worker_name,
                                                             "worker")))

    def completed(self, offset: int = 0, limit: int = 25) -> list[str]:
        """Send ``jobs complete``: a page of completed jids, newest first (``limit`` from
        ``offset``)."""
        return self._run(sc.jobs(self.clock(), "complete", None, offset, limit))

    def config(self) -> dict[str, str]:
        """Send ``config.get``: every option with its value (defaults included)."""
        return self._run(sc.config_get_all(self.clock()))

    def config_get(self, option: str) -> str | None:
        """Send ``config.get <option>``: its value, or None if unknown and unset."""
        return self._run(sc.config_get(self.clock(), _name(option, "option")))

    def config_set(self, option: str, value: str | int | float) -> None:
        """Send ``config.set``."""
        self._run(sc.config_set(self.clock(), _name(option, "option"), value))

    def config_unset(self, option: str) -> None:
        """Send ``config.unset``: back to the default."""
        self._run(sc.config_unset(self.clock(), _name(option, "option")))
