# GENERATED from _api_async.py by scripts/unasync.py: do not edit.
"""The Workq commands as async methods: the single source of the client API.

``_api_sync.py`` is generated from this file by ``scripts/unasync.py`` (a test fails when the two
drift apart). Each method builds a validated command (``_commands.py``), hands it to the
transport's ``_call`` and shapes the reply; every protocol rule lives in the Sans-IO core, every
byte moved in the transport. Durations are seconds (``float`` or ``timedelta``), converted to the
wire's milliseconds (rounded up); times are aware datetimes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Generic, cast

from jobwire._pending import Pending
from jobwire.errors import JobwireError, LocalProtocolError, RemoteProtocolError
from jobwire.serializers import RAW, Serializer, dump, dump_all, load

from ._commands import (
    MIN_LEASE_WAIT_MS,
    Command,
    Complete,
    Delete,
    EncodedAdd,
    Fail,
    InspectJob,
    InspectJobs,
    InspectQueue,
    InspectQueues,
    InspectScheduledJobs,
    InspectServer,
    Lease,
    Result,
    Run,
    Schedule,
    to_ms,
)
from ._events import InspectReply, JobResult, Leased, Reply
from ._records import (
    B,
    JobInfo,
    JobResultRecord,
    LeasedJob,
    QueueInfo,
    ServerInfo,
    job_info,
    queue_info,
    server_info,
)
from .errors import BulkError, WorkqError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_TTL", "DEFAULT_TTR", "DEFAULT_WINDOW", "Commands"]

#: Time-to-run when none is given, in seconds.
DEFAULT_TTR = 60.0
#: Time-to-live when none is given, in seconds (one day).
DEFAULT_TTL = 86400.0
#: Commands in flight at once in bulk calls.
DEFAULT_WINDOW = 256
#: Unanswered bytes at most in bulk calls: Workq 0.2.0 reads through a 4096-byte buffer and
#: misreads a payload whose CR and LF straddle its end (docs/workq.md); no more than that sent,
#: and it never happens.
DEFAULT_MAX_BYTES = 4096

Seconds = float | timedelta


def _expect(reply: Reply, kind: type[Reply], verb: str) -> None:
    if not isinstance(reply, kind):  # the core already checked the shape: a second defence
        raise RemoteProtocolError(f"{reply!r} cannot answer {verb}")


def _result(reply: Reply, verb: str, serializer: Serializer[B]) -> JobResultRecord[B]:
    _expect(reply, JobResult, verb)
    assert isinstance(reply, JobResult)
    data = load(serializer, reply.result, reply.job_id, "result" if reply.success else "error")
    return JobResultRecord(reply.job_id, reply.success, data)


def _at(at: datetime | float) -> datetime:
    """When a scheduled job is due: an aware datetime, or a unix time.

    Raises:
        LocalProtocolError: neither (a naive datetime is refused when the command is sent).
    """
    if isinstance(at, datetime):
        return at
    if isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at) \
            and at >= 0:
        return datetime.fromtimestamp(at, timezone.utc)
    raise LocalProtocolError(f"at= must be an aware datetime or a unix time, got {at!r}")


def _records(reply: Reply, verb: str) -> InspectReply:
    _expect(reply, InspectReply, verb)
    assert isinstance(reply, InspectReply)
    return reply


def _one(reply: InspectReply, verb: str) -> InspectReply:
    if len(reply.records) != 1:
        raise RemoteProtocolError(f"{verb}: expected 1 record, got {len(reply.records)}")
    return reply


class Commands(Generic[B]):
    """Every Workq command as a method. Transports supply ``_call``, ``_call_many`` and
    ``_serializer``, which turns payloads, results and errors (``B``) into bytes and back.

    A call that sends one raises ``SerializationError`` (nothing sent) for a value the
    serializer cannot write; one that returns one raises ``DeserializationError`` (``.job_id``,
    ``.data``: the raw bytes) for bytes it cannot read. ``inspect_*`` records show payloads
    as the server holds them (bytes).
    """

    _serializer: Serializer[B]

    def _call(self, command: Command, wait: float = 0.0) -> Reply:
        """Send ``command`` and return its success reply (or raise its typed error); ``wait`` is
        how long the server may legitimately hold the reply back, in seconds."""
        raise NotImplementedError

    def _call_many(
        self, commands: Iterable[Command], window: int, max_bytes: int | None
    ) -> list[Pending[Reply]]:
        """Pipeline ``commands`` (``jobwire._transport``'s ``pipeline``): one done Pending per
        command, in order."""
        raise NotImplementedError

    # -- producer ------------------------------------------------------------------------------

    def add(
        self,
        name: str,
        payload: B,
        *,
        ttr: Seconds = DEFAULT_TTR,
        ttl: Seconds = DEFAULT_TTL,
        priority: int = 0,
        max_attempts: int = 0,
        max_fails: int = 0,
        job_id: str | None = None,
    ) -> str:
        """Send ``add``: enqueue a job under ``name``; return its id.

        ``ttr`` (time a worker has after leasing it) up to 24 h; ``ttl`` (lifetime of the job and
        its result) up to 30 days; ``priority`` signed 32-bit, higher first; ``max_attempts`` and
        ``max_fails`` 0 (unlimited) to 255. ``job_id``: a UUIDv4; a new one when not given.

        ``payload`` goes through the client's serializer (bytes as they are, by default).

        Raises:
            LocalProtocolError: an argument is invalid (nothing sent).
            SerializationError: the serializer cannot write ``payload`` (nothing sent).
            DuplicateJob: a job with this id exists (the client then reconnects, see docs).
            ClientError, ServerError: the server refused it (``ServerError`` ``Unable to add
                job`` from the bundled server's ``max_memory``: the connection stays usable).
        """
        serializer: object = self._serializer
        if type(payload) is bytes and serializer is RAW:
            data = cast(bytes, payload)  # what RAW.dumps returns: the same bytes
        else:
            data = dump(self._serializer, payload, "payload")
        command = EncodedAdd(name, data, to_ms("ttr", ttr), to_ms("ttl", ttl), priority,
                             max_attempts, max_fails, job_id=job_id or "")
        self._call(command)
        return command.job_id

    def add_many(
        self,
        name: str,
        payloads: Iterable[B],
        *,
        ttr: Seconds = DEFAULT_TTR,
        ttl: Seconds = DEFAULT_TTL,
        priority: int = 0,
        job_ids: Iterable[str] | None = None,
        window: int = DEFAULT_WINDOW,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> list[str]:
        """Pipeline one ``add`` per payload; return their ids, in order.

        At most ``window`` adds and ``max_bytes`` bytes are unanswered at once (an add larger
        than that goes alone). Workq 0.2.0 misreads a pipelined payload whose CR and LF straddle
        its 4096-byte read buffer, so keep the default against it; ``None`` lifts the byte limit.
        ``job_ids``: one UUIDv4 per payload (new ones when not given); with your own, retrying a
        failed call is safe, since an id already added gets ``DuplicateJob``.

        Raises:
            LocalProtocolError: an argument is invalid, or ``job_ids`` does not give one id per
                payload (nothing sent).
            SerializationError: the serializer cannot write a payload (nothing sent; the
                message names its index).
            BulkError: some adds failed. ``.error`` is the first real error (e.g. the
                ``ClientError`` the server answered), ``.index`` its payload, ``.done`` the
                ``(index, id)`` of every job added, ``.results`` per payload its id or its
                exception. After a ``-CLIENT-ERROR`` the connection closes (the server may be
                out of step): the adds sent behind it get ``ConnectionLost`` (maybe added:
                retry them with the same ids), those never sent ``NotSent``.
        """
        ttr_ms, ttl_ms = to_ms("ttr", ttr), to_ms("ttl", ttl)
        data = dump_all(self._serializer, payloads, "payload")
        ids = None if job_ids is None else list(job_ids)
        if ids is not None and len(ids) != len(data):
            raise LocalProtocolError(f"{len(ids)} job ids for {len(data)} payloads")
        commands = EncodedAdd.many(name, data, ttr_ms, ttl_ms, priority, ids)
        pendings = self._call_many(commands, window, max_bytes)
        added = [command.job_id for command in commands]
        if any(pending.error is not None for pending in pendings):
            BulkError.check([job_id if pending.error is None else pending.error
                             for job_id, pending in zip(added, pendings, strict=True)])
        return added

    def call_many(
        self,
        commands: Iterable[Command],
        *,
        window: int = DEFAULT_WINDOW,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> list[Reply | JobwireError]:
        """Send any commands pipelined (at most ``window`` and ``max_bytes`` unanswered, as
        :meth:`add_many`); return, in order, each one's reply event, or the :class:`WorkqError`
        its reply turned into (``NotFound``, ``TimedOut`` ...).

        Raises:
            BulkError: some commands got no reply: the connection failed or broke the protocol
                (``ConnectionLost``, ``RemoteProtocolError``: sent, maybe carried out), or they
                were never sent (``NotSent``). After a ``-CLIENT-ERROR`` (e.g. a duplicate
                ``add``) the connection closes and the commands behind it get
                ``ConnectionLost``. ``.results`` holds every command's entry as this method
                would have returned it, the exception for those.
            LocalProtocolError: a command is invalid (nothing sent).
        """
        pendings = self._call_many(commands, window, max_bytes)
        results: list[Reply | JobwireError] = [
            p.error if p.error is not None else p.result() for p in pendings
        ]
        if any(isinstance(r, JobwireError) and not isinstance(r, WorkqError) for r in results):
            BulkError.check(results)
        return results

    def schedule(
        self,
        name: str,
        payload: B,
        at: datetime | float,
        *,
        ttr: Seconds = DEFAULT_TTR,
        ttl: Seconds = DEFAULT_TTL,
        priority: int = 0,
        max_attempts: int = 0,
        max_fails: int = 0,
        job_id: str | None = None,
    ) -> str:
        """Send ``schedule``: enqueue a job that becomes ready at ``at`` (an aware datetime or
        a unix time, sent in UTC rounded up to the second); the TTL counts from ``at``. Returns
        its id.

        Raises:
            LocalProtocolError: an argument is invalid or ``at`` is naive (nothing sent).
            DuplicateJob, ClientError, ServerError: as for :meth:`add`.
        """
        command = Schedule(name, dump(self._serializer, payload, "payload"), to_ms("ttr", ttr),
                           to_ms("ttl", ttl), _at(at), priority, max_attempts, max_fails,
                           job_id=job_id or "")
        self._call(command)
        return command.job_id

    def run(
        self,
        name: str,
        payload: B,
        *,
        ttr: Seconds = DEFAULT_TTR,
        wait: Seconds = 60.0,
        priority: int = 0,
        job_id: str | None = None,
    ) -> JobResultRecord[B]:
        """Send ``run``: enqueue a job and wait for its result -- up to ``wait`` seconds for a
        worker to lease it, then up to its ``ttr``.

        Returns:
            The result record: ``success`` False when the worker failed it (``data`` is then
            the error it reported).

        Raises:
            TimedOut: no worker took it in time (the job is gone), or it ran out of its TTR.
            NotFound: the job was deleted while waiting.
            LocalProtocolError, DuplicateJob, ClientError, ServerError: as for :meth:`add`.
            OperationTimeout: the client's own ``timeout`` ran out on top of ``wait + ttr``.
            SerializationError: the serializer cannot write ``payload`` (nothing sent).
            DeserializationError: it cannot read the result (``.data``, ``.job_id``).
        """
        command = Run(name, dump(self._serializer, payload, "payload"), to_ms("ttr", ttr),
                      to_ms("wait", wait), priority, job_id=job_id or "")
        reply = self._call(command, (command.wait_ms + command.ttr_ms) / 1000)
        return _result(reply, "run", self._serializer)

    def result(self, job_id: str, *, wait: Seconds = 0.0) -> JobResultRecord[B]:
        """Send ``result``: the job's result, waiting up to ``wait`` seconds for it.

        Raises:
            NotFound: no such job. TimedOut: no result within ``wait``.
            LocalProtocolError: invalid id or wait (nothing sent).
            DeserializationError: the serializer cannot read the result (``.data``).
        """
        command = Result(job_id, to_ms("wait", wait))
        return _result(self._call(command, command.wait_ms / 1000), "result",
                       self._serializer)

    def delete(self, job_id: str) -> None:
        """Send ``delete``: remove the job and its result (a ``run``/``result`` waiting on it
        gets ``NotFound``).

        Raises:
            NotFound: no such job. LocalProtocolError: invalid id (nothing sent).
        """
        self._call(Delete(job_id))

    # -- worker --------------------------------------------------------------------------------

    def lease(self, names: str | Sequence[str], *, wait: Seconds = 60.0) -> LeasedJob[B]:
        """Send ``lease``: take a job from any of ``names``, waiting up to ``wait`` seconds.

        ``wait=0`` takes a ready job if there is one: it is sent as a 1 ms wait
        (``MIN_LEASE_WAIT_MS``), since Workq 0.2.0 never leases with a 0 ms wait, even with
        jobs ready (its timer beats the hand-off, docs/workq.md).

        The job must be completed or failed within its ``ttr`` (seconds, on the result), after
        which the server requeues it (or fails it once ``max-attempts`` is reached).

        A job that reached this client for a lease whose caller gave up is returned at once,
        without sending anything, when its queue is among ``names`` (its ``ttr`` is then what
        is left of it); a call made while such a lease is still out waits for that lease's job
        before it sends its own, so it never leaves a lease of its own behind
        (``_session.py``). On the anyio client a lease the caller gives up on (cancelled, or out of
        ``timeout``) stays on its connection, which later calls queue behind, since the server
        would lease the next job to it even on a closed connection (``aio.py``); the blocking
        client closes the connection on a timeout, as for any call.

        Raises:
            TimedOut: no job within ``wait``. LocalProtocolError: invalid names (nothing sent).
            DeserializationError: the serializer cannot read the payload; the job is leased:
                settle it by ``.job_id`` (``fail``, ``complete``).
        """
        names = (names,) if isinstance(names, str) else tuple(names)
        command = Lease(names, max(to_ms("wait", wait), MIN_LEASE_WAIT_MS))
        reply = self._call(command, command.wait_ms / 1000)
        _expect(reply, Leased, "lease")
        assert isinstance(reply, Leased)
        payload = load(self._serializer, reply.payload, reply.job_id, "payload")
        return LeasedJob(reply.job_id, reply.name, reply.ttr_ms / 1000, payload)

    def complete(self, job_id: str, result: B | None = None) -> None:
        """Send ``complete``: the job succeeded with ``result`` (through the serializer; at most
        1 MiB; ``None``: an empty result).

        Raises:
            NotFound: no such job (deleted or past its TTL).
            ClientError: already completed or failed (``Duplicate result``).
            LocalProtocolError: invalid id or result (nothing sent).
            SerializationError: the serializer cannot write ``result`` (nothing sent).
        """
        data = b"" if result is None else dump(self._serializer, result, "result")
        self._call(Complete(job_id, data))

    def fail(self, job_id: str, error: B | None = None) -> None:
        """Send ``fail``: the job failed with ``error`` (through the serializer, as results are:
        ``run`` and ``result`` read both the same way; at most 1 MiB; ``None``: empty). The
        server requeues it while ``max-fails`` allows, otherwise it is final.

        Raises:
            NotFound, ClientError, LocalProtocolError, SerializationError: as for
                :meth:`complete`.
        """
        data = b"" if error is None else dump(self._serializer, error, "error")
        self._call(Fail(job_id, data))

    # -- inspect -------------------------------------------------------------------------------

    def inspect_job(self, job_id: str) -> JobInfo:
        """Send ``inspect job``. Raises ``NotFound`` for an unknown id."""
        reply = _one(_records(self._call(InspectJob(job_id)), "inspect job"), "inspect job")
        return job_info(reply.records[0])

    def inspect_jobs(self, name: str, offset: int = 0, limit: int = 100) -> list[JobInfo]:
        """Send ``inspect jobs``: the ready jobs of queue ``name`` in the order they will be
        leased, ``limit`` (1-100) from ``offset``. Raises ``NotFound`` for an unknown queue."""
        reply = _records(self._call(InspectJobs(name, offset, limit)), "inspect jobs")
        return [job_info(record) for record in reply.records]

    def inspect_scheduled_jobs(
        self, name: str, offset: int = 0, limit: int = 100
    ) -> list[JobInfo]:
        """Send ``inspect scheduled-jobs``: jobs of ``name`` not yet due, soonest first.
        Raises ``NotFound`` for an unknown queue."""
        reply = _records(self._call(InspectScheduledJobs(name, offset, limit)),
                         "inspect scheduled-jobs")
        return [job_info(record) for record in reply.records]

    def inspect_queue(self, name: str) -> QueueInfo:
        """Send ``inspect queue``. Raises ``NotFound`` for an unknown queue."""
        reply = _one(_records(self._call(InspectQueue(name)), "inspect queue"),
                     "inspect queue")
        return queue_info(reply.records[0])

    def inspect_queues(self, offset: int = 0, limit: int = 100) -> list[QueueInfo]:
        """Send ``inspect queues``: queues in alphabetical order, ``limit`` (1-100) from
        ``offset``."""
        reply = _records(self._call(InspectQueues(offset, limit)), "inspect queues")
        return [queue_info(record) for record in reply.records]

    def inspect_server(self) -> ServerInfo:
        """Send ``inspect server``: active clients, evicted jobs, start time."""
        reply = _one(_records(self._call(InspectServer()), "inspect server"),
                     "inspect server")
        return server_info(reply.records[0])
