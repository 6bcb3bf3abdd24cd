"""Queues, jobs, connections and timers of the bundled Workq server, with no I/O at all.

Why a separate, synchronous module: every rule of the job lifecycle lives here and nothing here
awaits. The caller passes the current time (``time.time()`` seconds: scheduled times and
``created`` are wall-clock UTC) into every method, so TTR expiry, TTL eviction, scheduled jobs and
wait-timeouts can be driven by a fake clock in unit tests, and a command runs to completion
without another connection interleaving.

The rules are Workq 0.2.0's as measured (docs/workq.md, the transcript), except where it crashes,
where it leases to closed connections and where it ignores max-fails (see docs/workq.md):

* A queue exists once a job was added, scheduled or run under its name, or a ``lease`` named it.
  Ready jobs are taken highest priority first, then by scheduled time (jobs never scheduled
  first), then oldest first; ``lease`` with several names picks uniformly at random among those
  names that have a ready job.
* ``lease`` with a wait-timeout of 0 never leases, even with jobs ready: it answers ``-TIMEOUT``
  at once (measured on Workq 0.2.0, whose 0 ms timer beats the hand-off; 1 ms leases).
* ``lease`` counts an attempt and starts the TTR. When the TTR runs out the job is requeued
  (state PENDING) unless ``max-attempts`` is reached, in which case it ends FAILED with an empty
  result. Whatever max-attempts says, a job requeued after 255 attempts ends FAILED at the next
  lease that would take it (silently: no waiter is told), as in Workq.
* ``fail`` ends the job FAILED, the data kept as its result; ``fails`` is not counted (Workq
  0.2.0 shows 0). With ``max-fails`` N the job is requeued until its N-th failure, each one
  counted -- **documented, and enforced here; the Go server 0.2.0 stores max-fails but never
  enforces it**.
* ``complete``/``fail`` are accepted for any job not finished yet, even after its TTR ran out
  (the document allows that race); a finished job answers ``Duplicate result``.
* **One result per job.** A finished job's result goes to the first ``run``/``result`` still
  waiting on it, and to that one only (Workq writes it once to a channel of one); the others
  time out when their waits end. A ``result`` asked once the job is finished gets it at once.
* TTL counts from enqueueing (from the scheduled time for ``schedule``, even a past one; a
  schedule whose TTL would be over already is ``Invalid time``). When it runs out the job and
  its result are removed whatever the state; unfinished jobs count as ``evicted-jobs``.
* A duplicate id -- while the record lives, finished or not -- is ``Duplicate job``.
* ``run`` enqueues a job (no TTL, max-attempts 0: ``inspect`` shows both as 0) and blocks until
  the job's result reaches it. A TTR overrun requeues the job like any other, and a late
  ``complete``/``fail`` still answers the run. When its wait-timeout ends, a job leased at that
  moment gets until that lease's TTR runs out; otherwise (or then) the run gets ``-TIMEOUT``.
  Either way the job is removed when the run is answered (a later ``result`` is NOT-FOUND).
* Deleting or evicting a job answers nobody: a ``result`` or ``run`` waiting on it gets
  ``-TIMEOUT`` when its wait ends (Workq 0.2.0 crashes at that moment for a run).
* A connection that closes (or half-closes) while its ``lease``/``run``/``result`` waits gets
  ``-TIMEOUT`` at once and its lease is withdrawn, so no job is ever leased to a peer that is
  gone (Workq 0.2.0 leases the next job to it). A ``run``'s job lives on without its client,
  until the run's wait (or the TTR of a lease running then) ends.

Memory (``max_memory``, off by default as Workq has no such limit): each stored job counts its
payload, its name and :data:`JOB_OVERHEAD` against it, and its result once it has one. An
``add``, ``schedule`` or ``run`` that would go past it is refused with the reply Workq 0.2.0
sends when it cannot store a job -- ``-SERVER-ERROR Unable to add job``, ``Unable to schedule
job``, ``Unable to run`` -- after the checks Workq makes first (``Invalid time``, ``Duplicate
job``). A ``complete`` or ``fail`` is never refused (it finishes work; refusing it would keep
the job anyway), so results may take the total past the limit, by at most one result (1 MiB)
a job. The bytes come back when the record goes: ``delete``, TTL eviction, a ``run`` answered.

Data structures: per queue a ready heap keyed ``(-priority, time or 0, seq)`` and a scheduled
heap keyed ``(time, -priority, seq)``, both with lazy deletion (an entry is live only while the
job still carries the entry's token); one global timer heap of ``(when, seq, kind, target,
token)`` whose stale entries are skipped; waiting leases indexed by name in arrival order; per
job, the FIFO of :class:`Waiter` s that may take its one result.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from datetime import datetime, timezone

from jobwire._record import field, record

from .._commands import (
    Add,
    Command,
    Complete,
    Delete,
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
)
from .._events import (
    OK,
    ErrorKind,
    ErrorReply,
    InspectReply,
    JobResult,
    Leased,
    Record,
    Reply,
)
from .._records import JobState

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    import random
    from typing import Any

__all__ = ["JOB_OVERHEAD", "ConnState", "Job", "ServerState", "Waiter"]

_NOT_FOUND = ErrorReply(ErrorKind.NOT_FOUND)
_TIMEOUT = ErrorReply(ErrorKind.TIMEOUT)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: Workq's hard cap on a job's attempts, whatever its max-attempts.
MAX_HARD_ATTEMPTS = 255
#: What a stored job counts against ``max_memory`` beyond its payload, name and result: its
#: ``Job`` record, its id, its heap entry, its TTL timer and its place in the job table
#: (measured: 715 bytes a job with tracemalloc, ~950 in the server's RSS).
JOB_OVERHEAD = 1024
#: The reply of Workq 0.2.0 when it cannot store the job, per command.
_CANNOT_STORE = {
    "add": ErrorReply(ErrorKind.SERVER_ERROR, "Unable to add job"),
    "schedule": ErrorReply(ErrorKind.SERVER_ERROR, "Unable to schedule job"),
    "run": ErrorReply(ErrorKind.SERVER_ERROR, "Unable to run"),
}


def _fmt(epoch: float) -> bytes:
    return datetime.fromtimestamp(int(epoch), timezone.utc).strftime(TIME_FORMAT).encode()


@record(frozen=False, eq=False)
class Job:
    """One job record (it outlives the job's processing until its TTL runs out)."""

    job_id: str
    name: str
    payload: bytes
    ttr_ms: int
    ttl_ms: int  # 0 for a run's job: it has no TTL
    priority: int
    max_attempts: int
    max_fails: int
    created: float
    seq: int
    time: float | None = None  # scheduled time
    attempts: int = 0
    fails: int = 0
    state: JobState = JobState.NEW
    result: tuple[bool, bytes] | None = None
    token: int = 0  # bumped on every queue/lease transition: stale heap/timer entries die
    where: str = ""  # "ready", "scheduled", "leased" or "" (finished)
    ttr_deadline: float = 0.0  # when the current (or last) lease's TTR runs out
    #: The blocked ``run``/``result`` commands that may take the result, first come first.
    waiters: list[Waiter] = field(default_factory=list)
    #: The ``run`` that created this job, while it waits.
    run: Waiter | None = None
    #: What it counts against ``max_memory``.
    size: int = 0


@record(frozen=False, eq=False)
class Waiter:
    """A blocked ``run`` or ``result``: a candidate for its job's one result."""

    job: Job
    #: The connection to answer; ``None`` once it stopped waiting (a run then goes on).
    conn: ConnState | None
    is_run: bool
    #: A run whose wait ended while its job was leased: that lease's TTR bounds it now.
    overtime: bool = False
    #: A run that was answered (its timers are stale).
    done: bool = False


@record(frozen=False, eq=False)
class Queue:
    name: str
    ready: list[tuple[int, float, int, int, Job]] = field(default_factory=list)
    scheduled: list[tuple[float, int, int, int, Job]] = field(default_factory=list)
    ready_len: int = 0
    scheduled_len: int = 0


@record(frozen=False, eq=False)
class ConnState:
    """One client connection as the state sees it."""

    id: int
    #: The reply to this connection's blocked command, once it is answered.
    reply: Reply | None = None
    #: Called (by the state) when ``reply`` is set; the I/O layer wakes its task with it.
    on_reply: Callable[[], None] | None = None
    waiting: str = ""  # "lease", "run", "result" or ""
    lease_names: tuple[str, ...] = ()
    waiter: Waiter | None = None  # while a run or result waits
    token: int = 0

    def take_reply(self) -> Reply | None:
        reply, self.reply = self.reply, None
        return reply


class ServerState:
    """Every queue, job and waiting connection of one server. No I/O; the clock is passed in.

    Args:
        now: the current time (epoch seconds), taken as the server's start time.
        rng: the random source for choosing among several lease names.
        max_memory: bytes the stored jobs may take (payload, name, result and
            :data:`JOB_OVERHEAD` each; ``None``: no limit); an ``add``, ``schedule`` or ``run``
            past it is answered ``-SERVER-ERROR``, as Workq answers a job it cannot store.

    Raises:
        ValueError: ``max_memory`` is below 1.
    """

    def __init__(
        self, now: float, *, rng: random.Random | None = None, max_memory: int | None = None
    ) -> None:
        if max_memory is not None and max_memory < 1:
            raise ValueError(f"max_memory must be at least 1, got {max_memory}")
        self.started = now
        self.max_memory = max_memory
        #: Bytes the stored jobs count against ``max_memory`` (counted with or without it).
        self.memory = 0
        self.jobs: dict[str, Job] = {}
        self.queues: dict[str, Queue] = {}
        self.evicted_jobs = 0
        self.active_clients = 0
        #: Connections blocked in each of ``lease``, ``run`` and ``result`` now (``inspect
        #: server``'s ``waiting-leases``, ``waiting-runs`` and ``waiting-results``).
        self.waiting = {"lease": 0, "run": 0, "result": 0}
        #: Called when a timer earlier than every other one was added (wakes the scheduler).
        self.on_timer: Callable[[], None] | None = None
        self._rng = rng  # made by the first lease that finds a job: random costs a start 1 ms
        self._seq = itertools.count()
        self._conn_ids = itertools.count(1)
        self._timers: list[tuple[float, int, str, Any, int]] = []
        self._lease_waiters: dict[str, dict[ConnState, None]] = {}

    # -- connections ---------------------------------------------------------------------------

    def connect(self, now: float) -> ConnState:
        """Register a new connection."""
        self.active_clients += 1
        return ConnState(next(self._conn_ids))

    def disconnect(self, conn: ConnState, now: float) -> None:
        """Forget a connection (idempotent); a command it was blocked on is dropped (a lease is
        withdrawn; a run's job lives on until the run's wait ends)."""
        if conn.id < 0:
            return
        self._stop_waiting(conn)
        conn.id = -conn.id
        self.active_clients -= 1

    def half_close(self, conn: ConnState, now: float) -> None:
        """The client closed its sending side: a blocked command is answered ``-TIMEOUT`` now
        (a closed peer must not be handed a job it can never report; a ``run``'s job lives on
        until the run's wait ends, as it would on Workq)."""
        if conn.waiting:
            self._answer(conn, _TIMEOUT)

    # -- timers --------------------------------------------------------------------------------

    def _timer(self, when: float, kind: str, target: Any, token: int) -> None:
        first = not self._timers or when < self._timers[0][0]
        heapq.heappush(self._timers, (when, next(self._seq), kind, target, token))
        if first and self.on_timer is not None:
            self.on_timer()

    def next_deadline(self) -> float | None:
        """When the earliest timer is due (epoch seconds), or None."""
        return self._timers[0][0] if self._timers else None

    def _live(self, kind: str, target: Any, token: int) -> bool:
        if kind == "wait":
            return bool(target.token == token and target.waiting)
        if kind == "run":
            return not target.done
        job: Job = target
        if self.jobs.get(job.job_id) is not job:
            return False
        if kind == "ttl":
            return True
        return job.token == token and job.where == ("leased" if kind == "ttr" else "scheduled")

    def advance(self, now: float) -> None:
        """Fire every timer due at ``now``."""
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, kind, target, token = heapq.heappop(timers)
            if not self._live(kind, target, token):
                continue
            if kind == "wait":
                self._answer(target, _TIMEOUT)
            elif kind == "run":
                self._run_wait_over(target)
            elif kind == "ttl":
                self._evict(target, now)
            elif kind == "ttr":
                self._ttr_expired(target, now)
            else:
                self._make_ready(target, now)
        # Timers of deleted jobs linger until due (a TTL may be 30 days): sweep when they
        # outnumber the live ones.
        if len(timers) > 4 * len(self.jobs) + 1024:
            self._timers = [t for t in timers if self._live(t[2], t[3], t[4])]
            heapq.heapify(self._timers)

    # -- job movement --------------------------------------------------------------------------

    def _queue(self, name: str) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = Queue(name)
        return queue

    def _unplace(self, job: Job) -> None:
        """Take a job out of wherever it is (heaps are cleaned lazily)."""
        queue = self.queues[job.name]
        if job.where == "ready":
            queue.ready_len -= 1
        elif job.where == "scheduled":
            queue.scheduled_len -= 1
        job.where = ""
        job.token += 1
        # Stale heap entries are skipped when they surface; rebuild when they dominate.
        if len(queue.ready) > 2 * queue.ready_len + 64:
            queue.ready = [e for e in queue.ready if e[4].token == e[3] and e[4].where == "ready"]
            heapq.heapify(queue.ready)
        if len(queue.scheduled) > 2 * queue.scheduled_len + 64:
            queue.scheduled = [e for e in queue.scheduled
                               if e[4].token == e[3] and e[4].where == "scheduled"]
            heapq.heapify(queue.scheduled)

    def _make_ready(self, job: Job, now: float) -> None:
        self._unplace(job)
        queue = self.queues[job.name]
        job.where = "ready"
        queue.ready_len += 1
        # Workq's order: priority, then scheduled time (never scheduled sorts first), then age.
        heapq.heappush(queue.ready, (-job.priority, job.time or 0.0, job.seq, job.token, job))
        self._serve_lease_waiters(job.name, now)

    def _schedule(self, job: Job, when: float, now: float) -> None:
        self._unplace(job)
        queue = self.queues[job.name]
        job.where = "scheduled"
        queue.scheduled_len += 1
        heapq.heappush(queue.scheduled, (when, -job.priority, job.seq, job.token, job))
        self._timer(when, "sched", job, job.token)

    def _pop_ready(self, queue: Queue) -> Job | None:
        """The job a lease of this queue would take (left in place), or None."""
        while queue.ready:
            job, token = queue.ready[0][4], queue.ready[0][3]
            if job.token != token or job.where != "ready" or self.jobs.get(job.job_id) is not job:
                heapq.heappop(queue.ready)
            elif job.attempts >= MAX_HARD_ATTEMPTS:
                # Workq fails it here, without a result message: no waiter is told.
                self._unplace(job)
                job.state = JobState.FAILED
                job.result = (False, b"")
            else:
                return job
        return None

    def _lease(self, job: Job, now: float) -> Leased:
        self._unplace(job)
        job.where = "leased"
        job.state = JobState.LEASED
        job.attempts += 1
        job.ttr_deadline = now + job.ttr_ms / 1000
        self._timer(job.ttr_deadline, "ttr", job, job.token)
        return Leased(job.job_id, job.name, job.ttr_ms, job.payload)

    def _finish(self, job: Job, success: bool, data: bytes) -> None:
        self._unplace(job)
        job.state = JobState.COMPLETED if success else JobState.FAILED
        job.result = (success, data)
        job.size += len(data)
        self.memory += len(data)
        if job.waiters:  # the result goes to the first waiter only
            waiter = job.waiters.pop(0)
            reply = JobResult(job.job_id, success, data)
            if waiter.is_run:
                self._end_run(waiter, reply)
            elif waiter.conn is not None:
                self._answer(waiter.conn, reply)

    def _requeue_or_fail(self, job: Job, data: bytes, now: float) -> None:
        if job.max_attempts and job.attempts >= job.max_attempts:
            self._finish(job, False, data)
        else:
            job.state = JobState.PENDING
            self._make_ready(job, now)

    def _ttr_expired(self, job: Job, now: float) -> None:
        run = job.run
        if run is not None and run.overtime:
            self._end_run(run, _TIMEOUT)  # its wait is over and so is this lease
        else:
            self._requeue_or_fail(job, b"", now)

    def _remove(self, job: Job) -> None:
        """Forget a job. Nobody waiting on it is answered: their waits run out (Workq)."""
        self._unplace(job)
        del self.jobs[job.job_id]
        self.memory -= job.size

    def _evict(self, job: Job, now: float) -> None:
        if job.result is None:
            self.evicted_jobs += 1
        self._remove(job)

    # -- waiting -------------------------------------------------------------------------------

    def _answer(self, conn: ConnState, reply: Reply) -> None:
        self._stop_waiting(conn)
        conn.reply = reply
        if conn.on_reply is not None:
            conn.on_reply()

    def _stop_waiting(self, conn: ConnState) -> None:
        if conn.waiting == "lease":
            for name in conn.lease_names:
                waiters = self._lease_waiters.get(name)
                if waiters is not None:
                    waiters.pop(conn, None)
                    if not waiters:
                        del self._lease_waiters[name]
        if conn.waiting:
            self.waiting[conn.waiting] -= 1
        waiter = conn.waiter
        if waiter is not None:
            waiter.conn = None
            if not waiter.is_run and waiter in waiter.job.waiters:
                waiter.job.waiters.remove(waiter)
        conn.waiting = ""
        conn.waiter = None
        conn.lease_names = ()
        conn.token += 1

    def _wait(self, conn: ConnState, kind: str, wait_ms: int, now: float) -> None:
        conn.waiting = kind
        self.waiting[kind] += 1
        conn.token += 1
        self._timer(now + wait_ms / 1000, "wait", conn, conn.token)

    def _run_wait_over(self, run: Waiter) -> None:
        """A run's wait-timeout ran out (or, in overtime, the TTR of the lease it waited on)."""
        job = run.job
        if not run.overtime and job.where == "leased" and self.jobs.get(job.job_id) is job:
            run.overtime = True  # a worker has it: wait out that lease's TTR
            self._timer(job.ttr_deadline, "run", run, 0)
        else:
            self._end_run(run, _TIMEOUT)

    def _end_run(self, run: Waiter, reply: Reply) -> None:
        """Answer a run (if its client still waits) and remove its job, as Workq does."""
        run.done = True
        job = run.job
        job.run = None
        if run in job.waiters:
            job.waiters.remove(run)
        if run.conn is not None:
            self._answer(run.conn, reply)
        if self.jobs.get(job.job_id) is job:
            self._remove(job)

    def _serve_lease_waiters(self, name: str, now: float) -> None:
        waiters = self._lease_waiters.get(name)
        queue = self.queues[name]
        while waiters:
            job = self._pop_ready(queue)
            if job is None:
                return
            conn = next(iter(waiters))
            self._answer(conn, self._lease(job, now))
            waiters = self._lease_waiters.get(name)

    # -- commands ------------------------------------------------------------------------------

    def execute(self, conn: ConnState, command: Command, now: float) -> Reply | None:
        """Run ``command`` for ``conn``; return its reply, or ``None`` if it blocks (the reply
        then arrives in ``conn.reply`` and ``conn.on_reply`` is called)."""
        self.advance(now)
        handler = getattr(self, "_cmd_" + type(command).__name__.lower())
        reply: Reply | None = handler(conn, command, now)
        return reply

    def _new_job(self, cmd: Add | Schedule | Run, ttl_ms: int, max_attempts: int,
                 max_fails: int, now: float, when: float | None) -> Job | ErrorReply:
        if cmd.job_id in self.jobs:
            return ErrorReply(ErrorKind.CLIENT_ERROR, "Duplicate job")
        size = JOB_OVERHEAD + len(cmd.payload) + len(cmd.name)
        if self.max_memory is not None and self.memory + size > self.max_memory:
            return _CANNOT_STORE[cmd.verb]
        job = Job(cmd.job_id, cmd.name, cmd.payload, cmd.ttr_ms, ttl_ms, cmd.priority,
                  max_attempts, max_fails, now, next(self._seq), when, size=size)
        self.jobs[job.job_id] = job
        self.memory += size
        self._queue(job.name)
        if ttl_ms:
            self._timer((now if when is None else when) + ttl_ms / 1000, "ttl", job, 0)
        return job

    def _cmd_add(self, conn: ConnState, cmd: Add, now: float) -> Reply | None:
        job = self._new_job(cmd, cmd.ttl_ms, cmd.max_attempts, cmd.max_fails, now, None)
        if isinstance(job, ErrorReply):
            return job
        self._make_ready(job, now)
        return OK

    def _cmd_schedule(self, conn: ConnState, cmd: Schedule, now: float) -> Reply | None:
        when = cmd.time.timestamp()
        if when + cmd.ttl_ms / 1000 <= now:  # Workq checks the expiry is still ahead
            return ErrorReply(ErrorKind.CLIENT_ERROR, "Invalid time")
        job = self._new_job(cmd, cmd.ttl_ms, cmd.max_attempts, cmd.max_fails, now, when)
        if isinstance(job, ErrorReply):
            return job
        if when <= now:
            self._make_ready(job, now)
        else:
            self._schedule(job, when, now)
        return OK

    def _cmd_run(self, conn: ConnState, cmd: Run, now: float) -> Reply | None:
        job = self._new_job(cmd, 0, 0, 0, now, None)
        if isinstance(job, ErrorReply):
            return job
        run = Waiter(job, conn, is_run=True)
        job.run = run
        job.waiters.append(run)
        conn.waiting = "run"
        self.waiting["run"] += 1
        conn.waiter = run
        self._make_ready(job, now)  # may be leased at once by a waiting worker
        if cmd.wait_ms == 0:
            self._run_wait_over(run)  # -TIMEOUT now, unless a worker took it
            return conn.take_reply()
        self._timer(now + cmd.wait_ms / 1000, "run", run, 0)
        return None

    def _cmd_result(self, conn: ConnState, cmd: Result, now: float) -> Reply | None:
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        if job.result is not None:
            return JobResult(job.job_id, *job.result)
        if cmd.wait_ms == 0:
            return _TIMEOUT
        waiter = Waiter(job, conn, is_run=False)
        job.waiters.append(waiter)
        conn.waiter = waiter
        self._wait(conn, "result", cmd.wait_ms, now)
        return None

    def _cmd_lease(self, conn: ConnState, cmd: Lease, now: float) -> Reply | None:
        names = list(dict.fromkeys(cmd.names))
        queues = [self._queue(name) for name in names]  # a lease creates its queues (Workq)
        if cmd.wait_ms == 0:  # Workq's 0 ms timer beats the hand-off of a ready job
            return _TIMEOUT
        candidates = [job for queue in queues if (job := self._pop_ready(queue)) is not None]
        if candidates:
            if self._rng is None:
                import random

                self._rng = random.Random()
            return self._lease(self._rng.choice(candidates), now)
        conn.lease_names = tuple(names)
        for name in names:
            self._lease_waiters.setdefault(name, {})[conn] = None
        self._wait(conn, "lease", cmd.wait_ms, now)
        return None

    def _report(self, cmd: Complete | Fail, success: bool, now: float) -> Reply:
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        if job.result is not None:
            return ErrorReply(ErrorKind.CLIENT_ERROR, "Duplicate result")
        if success or not job.max_fails:
            self._finish(job, success, cmd.result)  # a fail is final and not counted (Workq)
            return OK
        job.fails += 1  # max-fails, enforced here (not by Workq 0.2.0)
        if job.fails < job.max_fails:
            self._requeue_or_fail(job, cmd.result, now)
        else:
            self._finish(job, False, cmd.result)
        return OK

    def _cmd_complete(self, conn: ConnState, cmd: Complete, now: float) -> Reply | None:
        return self._report(cmd, True, now)

    def _cmd_fail(self, conn: ConnState, cmd: Fail, now: float) -> Reply | None:
        return self._report(cmd, False, now)

    def _cmd_delete(self, conn: ConnState, cmd: Delete, now: float) -> Reply | None:
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        self._remove(job)
        return OK

    # -- inspect -------------------------------------------------------------------------------

    def job_record(self, job: Job) -> Record:
        """A job as ``inspect`` shows it (12 keys, 13 with ``time`` for scheduled jobs)."""
        fields: list[tuple[str, bytes]] = [
            ("name", job.name.encode()),
            ("ttr", b"%d" % job.ttr_ms),
            ("ttl", b"%d" % job.ttl_ms),
            ("payload-size", b"%d" % len(job.payload)),
            ("payload", job.payload),
            ("max-attempts", b"%d" % job.max_attempts),
            ("attempts", b"%d" % job.attempts),
            ("max-fails", b"%d" % job.max_fails),
            ("fails", b"%d" % job.fails),
            ("priority", b"%d" % job.priority),
            ("state", b"%d" % job.state),
            ("created", _fmt(job.created)),
        ]
        if job.time is not None:
            fields.append(("time", _fmt(job.time)))
        return Record(job.job_id, tuple(fields))

    def _queue_record(self, queue: Queue) -> Record:
        return Record(queue.name, (("ready-len", b"%d" % queue.ready_len),
                                   ("scheduled-len", b"%d" % queue.scheduled_len)))

    def _cmd_inspectjob(self, conn: ConnState, cmd: InspectJob, now: float) -> Reply | None:
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        return InspectReply((self.job_record(job),))

    def _cmd_inspectjobs(self, conn: ConnState, cmd: InspectJobs, now: float) -> Reply | None:
        queue = self.queues.get(cmd.name)
        if queue is None:
            return _NOT_FOUND
        live = sorted(
            (entry for entry in queue.ready
             if entry[4].token == entry[3] and entry[4].where == "ready"),
            key=lambda entry: entry[:3],
        )
        page = live[cmd.offset : cmd.offset + cmd.limit]
        return InspectReply(tuple(self.job_record(entry[4]) for entry in page))

    def _cmd_inspectscheduledjobs(
        self, conn: ConnState, cmd: InspectScheduledJobs, now: float
    ) -> Reply | None:
        queue = self.queues.get(cmd.name)
        if queue is None:
            return _NOT_FOUND
        live = sorted(
            (entry for entry in queue.scheduled
             if entry[4].token == entry[3] and entry[4].where == "scheduled"),
            key=lambda entry: (entry[1], entry[0], entry[2]),  # Workq: priority, then time
        )
        page = live[cmd.offset : cmd.offset + cmd.limit]
        return InspectReply(tuple(self.job_record(entry[4]) for entry in page))

    def _cmd_inspectqueue(self, conn: ConnState, cmd: InspectQueue, now: float) -> Reply | None:
        queue = self.queues.get(cmd.name)
        if queue is None:
            return _NOT_FOUND
        return InspectReply((self._queue_record(queue),))

    def _cmd_inspectqueues(self, conn: ConnState, cmd: InspectQueues, now: float) -> Reply | None:
        names = sorted(self.queues)[cmd.offset : cmd.offset + cmd.limit]
        return InspectReply(tuple(self._queue_record(self.queues[n]) for n in names))

    def _cmd_inspectserver(self, conn: ConnState, cmd: InspectServer, now: float) -> Reply | None:
        # As Workq 0.2.0's, the record announces 2 keys and ends with ``started``; before it
        # come Workq's keys and three of this server's own (the connections blocked now in each
        # blocking command), which a client reading on to ``started`` takes in its stride.
        return InspectReply((Record("server", (
            ("active-clients", b"%d" % self.active_clients),
            ("evicted-jobs", b"%d" % self.evicted_jobs),
            ("waiting-leases", b"%d" % self.waiting["lease"]),
            ("waiting-runs", b"%d" % self.waiting["run"]),
            ("waiting-results", b"%d" % self.waiting["result"]),
            ("started", _fmt(self.started)),
        ), announced=2),))
