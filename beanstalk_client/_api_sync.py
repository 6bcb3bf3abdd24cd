# GENERATED from _api_async.py by scripts/unasync.py: do not edit.
"""The beanstalk commands as methods, written once: the single source of both client APIs.

``_api_sync.py`` is generated from ``_api_async.py`` by ``scripts/unasync.py`` (a test
fails when the two drift apart). Each method builds a validated command, hands it to the
transport's ``_call`` and shapes the reply; all protocol rules live in the Sans-IO core, all
I/O in the transport.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Generic, TypeVar

from jobwire.errors import JobwireError
from jobwire.serializers import Serializer, dump, dump_all, load

from ._commands import (
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    Bury,
    Command,
    Delete,
    Ignore,
    Kick,
    KickJob,
    ListTubes,
    ListTubesWatched,
    ListTubeUsed,
    PauseTube,
    Peek,
    PeekBuried,
    PeekDelayed,
    PeekReady,
    Put,
    Release,
    Reserve,
    ReserveJob,
    ReserveWithTimeout,
    Stats,
    StatsJob,
    StatsTube,
    Touch,
    Use,
    Watch,
)
from ._events import Found, Reply
from ._job import B, Job, JobRef, job_id_of, whole_seconds
from ._session import Pending
from ._stats import (
    JobStats,
    ServerStats,
    TubeStats,
    parse_job_stats,
    parse_list,
    parse_server_stats,
    parse_tube_stats,
)
from .errors import BeanstalkError, BulkError

__all__ = ["Commands"]

R = TypeVar("R", bound=Reply)

#: Commands in flight at once in bulk calls (docs/beanstalkd.md: unbounded bursts are slower).
DEFAULT_WINDOW = 256
#: ``reserve`` has no arguments: one (immutable) command serves every call.
_RESERVE = Reserve()


class Commands(Generic[B]):
    """Every beanstalkd 1.12 command as a method. Transports supply ``_call``/``_call_many``
    and ``_serializer``, which turns bodies (``B``) into bytes and back.

    Every call that returns a :class:`Job` (``reserve``, ``reserve_job``, ``peek*``) raises
    ``DeserializationError`` (``.job_id``, ``.data``: the raw body) when the serializer cannot
    read the body; ``call_many`` sends and returns raw events, bytes as they are.
    """

    _serializer: Serializer[B]
    #: ``_serializer`` is ``RAW``: bodies are bytes as they are (the hot paths test this).
    _raw = False
    #: The tube puts go to, as the last ``use`` answered (shown by ``repr``).
    _tube = "default"

    def _call(self, command: Command[R], wait: float | None = 0.0) -> R:
        """Send ``command`` and return its success reply; ``wait`` is how long the server may
        legitimately hold the reply back (a reserve's timeout; ``None``: without limit)."""
        raise NotImplementedError

    def _call_many(
        self, commands: Iterable[Command[Reply]], window: int
    ) -> list[Pending[Reply]]:
        raise NotImplementedError

    # -- producer ------------------------------------------------------------------------------

    def put(
        self,
        body: B,
        *,
        priority: int = DEFAULT_PRIORITY,
        delay: float | timedelta = 0,
        ttr: float | timedelta = DEFAULT_TTR,
    ) -> int:
        """Send ``put <priority> <delay> <ttr> <bytes>`` and the body; return the new job id.

        ``body`` goes through the client's serializer (bytes as they are, by default).
        ``priority``: 0 (most urgent) to 2**32-1. ``delay`` and ``ttr`` in seconds (a fraction
        is rounded up; a ttr of 0 is raised to 1 by the server).

        Raises:
            SerializationError: the serializer cannot write ``body`` (by default: it is not
                bytes); nothing sent.
            LocalProtocolError: a number is out of range (nothing sent).
            JobTooBig: the body is over the server's max-job-size (the connection stays usable).
            Draining: the server is in drain mode.
            Buried: the server ran out of memory and buried the job (``.job_id``).
            OutOfMemory: the server has no room for the job (the bundled server's
                ``max_memory``); nothing stored, the connection stays usable.
        """
        # The common case costs one test each: bytes as they are, whole seconds.
        if self._raw and type(body) is bytes:
            data: bytes = body  # type: ignore[assignment]  # checked: it is bytes
        else:
            data = dump(self._serializer, body)
        reply = self._call(Put(
            data,
            priority,
            delay if type(delay) is int else whole_seconds("delay", delay),
            ttr if type(ttr) is int else whole_seconds("ttr", ttr),
        ))
        return reply.job_id

    def use(self, tube: str) -> str:
        """Send ``use <tube>``: later puts go to ``tube``. Returns the tube name.

        Raises:
            LocalProtocolError: invalid tube name (nothing sent).
        """
        reply = self._call(Use(tube))
        self._tube = reply.tube
        return reply.tube

    def put_many(
        self,
        bodies: Iterable[B],
        *,
        priority: int = DEFAULT_PRIORITY,
        delay: float | timedelta = 0,
        ttr: float | timedelta = DEFAULT_TTR,
        window: int = DEFAULT_WINDOW,
    ) -> list[int]:
        """Put every body, pipelined with at most ``window`` puts in flight; return the ids.

        Raises:
            BulkError: some puts failed; ``.results`` holds an id or an error per body, in order,
                and every reply was read, so the connection stays usable.
            SerializationError: the serializer cannot write a body (by default: it is not
                bytes); raised before anything is sent, naming its index.
        """
        d, t = whole_seconds("delay", delay), whole_seconds("ttr", ttr)
        data = dump_all(self._serializer, bodies)
        commands: list[Command[Reply]] = [Put(body, priority, d, t) for body in data]
        return self._bulk(commands, window)  # type: ignore[return-value]  # ids, all int

    # -- worker --------------------------------------------------------------------------------

    def reserve(self, wait: float | timedelta | None = None) -> Job[B]:
        """Reserve a job from the watched tubes.

        Sends ``reserve`` (``wait=None``: wait as long as it takes) or
        ``reserve-with-timeout <seconds>`` (``wait`` seconds; 0: answer at once). The client's
        ``timeout`` counts on top of ``wait``.

        On a connection shared by tasks, the server may answer this reserve DEADLINE_SOON to let
        another task's ``delete`` (``release``, ``bury``, ``touch``) through; the reserve is then
        sent again once those are answered, with what is left of ``wait``, and the caller
        sees nothing of it.

        Raises:
            TimedOut: no job within ``wait``.
            DeserializationError: the client's serializer cannot read the body; the job is
                reserved: settle it by ``.job_id`` (bury, release, delete).
            DeadlineSoon: a job this connection holds is within 1 s of its TTR deadline and
                nothing queued behind this reserve can settle it: delete, release, bury or
                touch that job.
        """
        if wait is None:
            reply = self._call(_RESERVE, None)
        else:
            seconds = whole_seconds("wait", wait)
            reply = self._call(ReserveWithTimeout(seconds), seconds)
        if self._raw:
            return Job(reply.job_id, reply.body)  # type: ignore[arg-type]  # B is bytes
        return self._job(reply.job_id, reply.body)

    def reserve_job(self, job: JobRef) -> Job[B]:
        """Send ``reserve-job <id>``: reserve a ready, delayed or buried job by id.

        Raises:
            NotFound: no such job, or it is reserved already.
            DeserializationError: as for :meth:`reserve`.
        """
        reply = self._call(ReserveJob(job_id_of(job)))
        return self._job(reply.job_id, reply.body)

    def delete(self, job: JobRef) -> None:
        """Send ``delete <id>``.

        Raises:
            NotFound: no such job, or it is reserved by another connection.
        """
        self._call(Delete(job.id if type(job) is Job else job_id_of(job)))

    def delete_many(self, jobs: Iterable[JobRef], *, window: int = DEFAULT_WINDOW) -> None:
        """Delete every job, pipelined.

        Raises:
            BulkError: some deletes failed; ``.results`` has ``None`` or an error per job.
        """
        commands: list[Command[Reply]] = [Delete(job_id_of(job)) for job in jobs]
        self._bulk(commands, window)

    def release(
        self, job: JobRef, *, priority: int = DEFAULT_PRIORITY, delay: float | timedelta = 0
    ) -> None:
        """Send ``release <id> <priority> <delay>``: give a reserved job back.

        Raises:
            NotFound: the job is not reserved by this connection.
            Buried: the server ran out of memory and buried it.
        """
        self._call(Release(job_id_of(job), priority, whole_seconds("delay", delay)))

    def bury(self, job: JobRef, *, priority: int = DEFAULT_PRIORITY) -> None:
        """Send ``bury <id> <priority>``.

        Raises:
            NotFound: the job is not reserved by this connection.
        """
        self._call(Bury(job_id_of(job), priority))

    def touch(self, job: JobRef) -> None:
        """Send ``touch <id>``: restart the job's TTR.

        Raises:
            NotFound: the job is not reserved by this connection.
        """
        self._call(Touch(job_id_of(job)))

    def watch(self, tube: str) -> int:
        """Send ``watch <tube>``; return how many tubes are watched now.

        Raises:
            LocalProtocolError: invalid tube name (nothing sent).
        """
        reply = self._call(Watch(tube))
        return reply.count

    def ignore(self, tube: str) -> int:
        """Send ``ignore <tube>``; return how many tubes are watched now.

        Raises:
            NotIgnored: ``tube`` is the only tube watched.
        """
        reply = self._call(Ignore(tube))
        return reply.count

    # -- other ---------------------------------------------------------------------------------

    def peek(self, job: JobRef) -> Job[B]:
        """Send ``peek <id>``.

        Raises:
            NotFound: no such job.
        """
        return self._found(self._call(Peek(job_id_of(job))))

    def peek_ready(self) -> Job[B]:
        """Send ``peek-ready``: the next ready job of the used tube.

        Raises:
            NotFound: none.
        """
        return self._found(self._call(PeekReady()))

    def peek_delayed(self) -> Job[B]:
        """Send ``peek-delayed``: the delayed job of the used tube due soonest.

        Raises:
            NotFound: none.
        """
        return self._found(self._call(PeekDelayed()))

    def peek_buried(self) -> Job[B]:
        """Send ``peek-buried``: the oldest buried job of the used tube.

        Raises:
            NotFound: none.
        """
        return self._found(self._call(PeekBuried()))

    def kick(self, count: int) -> int:
        """Send ``kick <count>``: make up to ``count`` buried (else delayed) jobs of the used
        tube ready; return how many were kicked."""
        reply = self._call(Kick(count))
        return reply.count or 0

    def kick_job(self, job: JobRef) -> None:
        """Send ``kick-job <id>``.

        Raises:
            NotFound: no such job, or it is neither buried nor delayed.
        """
        self._call(KickJob(job_id_of(job)))

    def stats(self) -> ServerStats:
        """Send ``stats``; return the server's statistics (numbers as int/float)."""
        reply = self._call(Stats())
        return parse_server_stats(reply.data)

    def stats_job(self, job: JobRef) -> JobStats:
        """Send ``stats-job <id>``.

        Raises:
            NotFound: no such job.
        """
        reply = self._call(StatsJob(job_id_of(job)))
        return parse_job_stats(reply.data)

    def stats_tube(self, tube: str) -> TubeStats:
        """Send ``stats-tube <tube>``.

        Raises:
            NotFound: no such tube.
        """
        reply = self._call(StatsTube(tube))
        return parse_tube_stats(reply.data)

    def list_tubes(self) -> list[str]:
        """Send ``list-tubes``; return every tube name."""
        reply = self._call(ListTubes())
        return parse_list(reply.data)

    def list_tube_used(self) -> str:
        """Send ``list-tube-used``; return the tube puts go to."""
        reply = self._call(ListTubeUsed())
        return reply.tube

    def list_tubes_watched(self) -> list[str]:
        """Send ``list-tubes-watched``; return the watched tube names."""
        reply = self._call(ListTubesWatched())
        return parse_list(reply.data)

    def pause_tube(self, tube: str, delay: float | timedelta) -> None:
        """Send ``pause-tube <tube> <delay>``: no reserves from ``tube`` for ``delay`` seconds.

        Raises:
            NotFound: no such tube.
        """
        self._call(PauseTube(tube, whole_seconds("delay", delay)))

    def call_many(
        self, commands: Iterable[Command[Reply]], *, window: int = DEFAULT_WINDOW
    ) -> list[Reply | JobwireError]:
        """Send any commands pipelined (at most ``window`` in flight); return, in order, each
        one's reply event, or the :class:`BeanstalkError` its reply turned into (``NotFound``,
        ``TimedOut`` ...). Every reply is read, so the connection stays in step whatever the
        server refused.

        Raises:
            BulkError: some commands got no reply: the connection failed or broke the protocol
                (``ConnectionLost``, ``RemoteProtocolError``: sent, maybe carried out), a wait
                ran out (``OperationTimeout``), or they were never sent (``NotSent``).
                ``.results`` holds every command's entry as this method would have returned
                it, the exception for those.
            LocalProtocolError: the first command is invalid (nothing sent).
        """
        pendings = self._call_many(commands, window)
        results: list[Reply | JobwireError] = [
            p.error if p.error is not None else p.result() for p in pendings
        ]
        if any(isinstance(r, JobwireError) and not isinstance(r, BeanstalkError)
               for r in results):
            error = BulkError(results)
            raise error from error.error
        return results

    # -- helpers -------------------------------------------------------------------------------

    def _found(self, reply: Found) -> Job[B]:
        return self._job(reply.job_id, reply.body)

    def _job(self, job_id: int, body: bytes) -> Job[B]:
        return Job(job_id, load(self._serializer, body, job_id))

    def _bulk(self, commands: list[Command[Reply]], window: int) -> list[object]:
        pendings = self._call_many(commands, window)
        results: list[object] = []
        failed = False
        for p in pendings:
            if p.error is not None:
                failed = True
                results.append(p.error)
            else:
                results.append(getattr(p.reply, "job_id", None))
        if failed:
            raise BulkError(results)
        return results
