"""Tubes, jobs, connections and timers of the bundled beanstalk server, with no I/O at all.

Why a separate, synchronous module: every rule of beanstalkd's job lifecycle lives here, and
nothing here awaits. The caller passes the current time (``time.monotonic()`` seconds) into every
method, so the whole lifecycle -- TTR expiry, delays, the DEADLINE_SOON margin, paused tubes --
can be driven by a fake clock in unit tests, and a command runs to completion without another
connection interleaving (no lock is needed because there is no await; cf. httpcore #880).

Data structures, chosen so that no operation scans all jobs and nothing polls on a tick:

* each tube has a ready heap keyed ``(priority, id)`` and a delayed heap keyed ``(ready-at, id)``,
  both with lazy deletion (an entry is live only while the job still carries the entry's token),
  and a FIFO of buried jobs (an ``OrderedDict``: O(1) append, pop-first and removal by id);
* one global heap of ``(when, seq, target)`` timers -- a delayed job's ready time, a reserved
  job's TTR deadline, a waiting reserve's timeout or DEADLINE_SOON moment, a tube's unpause
  time. Each target remembers the ``seq`` of its one live timer, so replacing or cancelling a
  timer is O(1) and stale entries are skipped when they reach the top (or swept when they
  outnumber live ones). :meth:`ServerState.next_deadline` tells the I/O layer how long it may
  sleep.

Orderings copy beanstalkd 1.12 where a client can see them: the tube list and a connection's watch
list behave like beanstalkd's ``Ms`` arrays (append; removal moves the last item into the hole),
ready jobs go lowest priority then lowest id first, delayed jobs soonest first, buried jobs
oldest first. Waiting connections are served oldest first (beanstalkd rotates; both are fair).

Counters follow what beanstalkd 1.12 counts, measured against it: ``cmd-put`` also counts a put
answered JOB_TOO_BIG, EXPECTED_CRLF or DRAINING; EXPECTED_CRLF and DRAINING use up a job id (the
real server allocates the job before it reads the body); ``kick-job`` and ``reserve-job`` have no
counter of their own in ``stats``.

Memory (``max_memory``, off by default as beanstalkd has no such limit): each stored job counts
its body plus :data:`JOB_OVERHEAD` against it; a ``put`` that would go past it is answered
``OUT_OF_MEMORY`` (beanstalkd's answer when it cannot allocate a job), counted in ``cmd-put``,
and uses up no job id. Only ``delete`` gives the bytes back: released, buried, kicked and
timed-out jobs are still stored.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import os
import socket
from collections import OrderedDict
from collections.abc import Callable

from .._commands import (
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
from .._events import (
    DELETED,
    PAUSED,
    RELEASED,
    TOUCHED,
    BuriedReply,
    ErrorCode,
    ErrorReply,
    Found,
    Inserted,
    Kicked,
    Ok,
    Reply,
    Reserved,
    Using,
    Watching,
)
from .._stats import SERVER_KEYS, StatsValue, format_dict, format_list

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import Any, Final

try:  # pragma: no cover - resource is POSIX-only
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

__all__ = [
    "DEADLINE_MARGIN",
    "DEFAULT_TUBE",
    "JOB_OVERHEAD",
    "URGENT_THRESHOLD",
    "ConnState",
    "Job",
    "JobState",
    "ServerState",
    "Tube",
]

#: The last second of a TTR is the safety margin in which a reserve answers DEADLINE_SOON.
DEADLINE_MARGIN: Final = 1.0
#: Ready jobs with a priority below this count as urgent.
URGENT_THRESHOLD: Final = 1024
#: The tube every connection uses and watches at first; it always exists.
DEFAULT_TUBE: Final = "default"
VERSION: Final = "1.12"
BINLOG_MAX_SIZE: Final = 10485760
#: What a stored job counts against ``max_memory`` beyond its body: its ``Job``, the body's
#: header, its heap entry and its place in the job table (measured: 421 bytes a job with
#: tracemalloc, ~500 in the server's RSS).
JOB_OVERHEAD: Final = 512

_NOT_FOUND: Final = ErrorReply(ErrorCode.NOT_FOUND)
_TIMED_OUT: Final = ErrorReply(ErrorCode.TIMED_OUT)
_DEADLINE_SOON: Final = ErrorReply(ErrorCode.DEADLINE_SOON)
_NOT_IGNORED: Final = ErrorReply(ErrorCode.NOT_IGNORED)
_DRAINING: Final = ErrorReply(ErrorCode.DRAINING)
_OUT_OF_MEMORY: Final = ErrorReply(ErrorCode.OUT_OF_MEMORY)
_BURIED: Final = BuriedReply()
_KICKED: Final = Kicked()

# Tokens that mark heap entries as live; 0 means "in no heap" / "no timer".
_tokens = itertools.count(1)


class JobState(enum.Enum):
    """Where a job is. The values are what ``stats-job`` prints."""

    #: In its tube's ready heap.
    READY = "ready"
    #: Held by one connection until deleted, released, buried or its TTR runs out.
    RESERVED = "reserved"
    #: Waiting in its tube's delayed heap until its delay is over.
    DELAYED = "delayed"
    #: In its tube's buried FIFO until kicked or deleted.
    BURIED = "buried"


class Job:
    """One job and its ``stats-job`` counters."""

    __slots__ = (
        "body", "buries", "created", "deadline", "delay", "heap_token", "id", "kicks",
        "priority", "releases", "reserver", "reserves", "state", "timeouts", "timer_seq", "ttr",
        "tube",
    )

    def __init__(
        self, job_id: int, tube: Tube, priority: int, delay: int, ttr: int, body: bytes,
        now: float,
    ) -> None:
        self.id = job_id
        self.tube = tube
        self.priority = priority
        #: The delay of the last put or release, in seconds (``stats-job`` shows it).
        self.delay = delay
        self.ttr = ttr
        self.body = body
        self.created = now
        self.state = JobState.READY
        #: Delayed: when it becomes ready. Reserved: when its TTR runs out.
        self.deadline = 0.0
        self.reserver: ConnState | None = None
        self.heap_token = self.timer_seq = 0
        self.reserves = self.timeouts = self.releases = self.buries = self.kicks = 0

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.state.value} in {self.tube.name!r} pri={self.priority}>"


class _JobHeap:
    """A min-heap of jobs keyed ``(key, job id)`` with O(1) lazy removal.

    An entry is live while ``job.heap_token`` equals the token stored with it; a job sits in at
    most one heap at a time, so one token per job suffices.
    """

    __slots__ = ("_heap", "_live")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Job]] = []
        self._live = 0

    def __len__(self) -> int:
        return self._live

    def push(self, key: float, job: Job) -> None:
        job.heap_token = token = next(_tokens)
        heapq.heappush(self._heap, (key, job.id, token, job))
        self._live += 1

    def discard(self, job: Job) -> None:
        """Forget ``job`` (which must be in this heap); its entry is dropped later."""
        job.heap_token = 0
        self._live -= 1
        heap = self._heap
        if len(heap) > 64 and len(heap) > 2 * self._live:  # mostly dead entries: sweep them
            heap[:] = [entry for entry in heap if entry[3].heap_token == entry[2]]
            heapq.heapify(heap)

    def peek(self) -> Job | None:
        """The live job with the smallest key, or ``None``."""
        heap = self._heap
        while heap:
            _, _, token, job = heap[0]
            if job.heap_token == token:
                return job
            heapq.heappop(heap)
        return None

    def pop(self) -> Job | None:
        """Remove and return the live job with the smallest key, or ``None``."""
        job = self.peek()
        if job is not None:
            heapq.heappop(self._heap)
            job.heap_token = 0
            self._live -= 1
        return job


class Tube:
    """A named queue: ready heap, delayed heap, buried FIFO, and its ``stats-tube`` counters."""

    __slots__ = (
        "buried", "cmd_delete", "cmd_pause", "delayed", "index", "jobs", "name", "pause",
        "ready", "reserved", "timer_seq", "total_jobs", "unpause_at", "urgent", "using",
        "waiting", "watching",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready = _JobHeap()
        self.delayed = _JobHeap()
        self.buried: OrderedDict[int, Job] = OrderedDict()
        self.urgent = 0  # ready jobs with priority < URGENT_THRESHOLD
        self.reserved = 0
        self.jobs = 0  # jobs in any state: each keeps the tube alive
        self.total_jobs = 0
        self.cmd_delete = 0
        self.cmd_pause = 0
        self.pause = 0  # seconds of the last pause-tube
        self.unpause_at = 0.0
        self.using = 0
        self.watching = 0
        #: Connections waiting in a reserve that watch this tube, oldest first.
        self.waiting: dict[ConnState, None] = {}
        self.timer_seq = 0
        self.index = -1  # position in the server's tube list

    def paused(self, now: float) -> bool:
        """True while ``pause-tube`` keeps reserves away from this tube."""
        return self.unpause_at > now

    def __repr__(self) -> str:
        return f"<Tube {self.name!r}>"


class ConnState:
    """What the server remembers about one client connection.

    The I/O layer reads :attr:`reply` after :attr:`on_reply` fires: that is how a reserve that
    had to wait is answered later (by another connection's put, a timer, or a half-close).
    """

    __slots__ = (
        "_soonest", "_soonest_known", "closed", "half_closed", "id", "on_reply", "producer",
        "reply", "reserved", "timeout_at", "timer_seq", "use", "waiting", "watch", "worker",
    )

    def __init__(self, conn_id: int, default: Tube) -> None:
        self.id = conn_id
        self.use = default
        #: Watched tubes, in beanstalkd's order (removal moves the last one into the hole).
        self.watch: list[Tube] = [default]
        #: Jobs this connection holds, by id.
        self.reserved: dict[int, Job] = {}
        self._soonest: Job | None = None
        self._soonest_known = True
        self.producer = False
        self.worker = False
        #: True while a reserve of this connection waits for a job.
        self.waiting = False
        self.timeout_at: float | None = None
        self.timer_seq = 0
        self.half_closed = False
        self.closed = False
        #: The answer to a reserve that waited, set when the wait ends.
        self.reply: Reply | None = None
        #: Called (synchronously) when :attr:`reply` is set.
        self.on_reply: Callable[[], None] | None = None

    def take_reply(self) -> Reply | None:
        """Return and clear the answer to a reserve that waited."""
        reply, self.reply = self.reply, None
        return reply

    def soonest_deadline(self) -> float | None:
        """The earliest TTR deadline among the jobs this connection holds."""
        if not self._soonest_known:
            jobs = self.reserved.values()
            self._soonest = min(jobs, key=_deadline) if jobs else None
            self._soonest_known = True
        return None if self._soonest is None else self._soonest.deadline

    def _hold(self, job: Job) -> None:
        self.reserved[job.id] = job
        if self._soonest_known and (self._soonest is None or job.deadline < self._soonest.deadline):
            self._soonest = job

    def _drop(self, job: Job) -> None:
        del self.reserved[job.id]
        if self._soonest is job:
            self._soonest = None
            self._soonest_known = False

    def __repr__(self) -> str:
        return f"<ConnState {self.id}>"


def _deadline(job: Job) -> float:
    return job.deadline


_Target = Job | ConnState | Tube
_Handler = Callable[[ConnState, "Any", float], "Reply | None"]


class ServerState:
    """All tubes, jobs and connections of one server. Every method takes the current time.

    Args:
        now: the current time, for ``uptime``.
        max_job_size: the largest body ``put`` accepts (only shown in ``stats`` here: the
            protocol core enforces it).
        on_timer: called when a timer earlier than every other one is armed, so a scheduler
            sleeping until :meth:`next_deadline` knows to wake up sooner.
        max_memory: bytes the stored jobs may take, each its body plus :data:`JOB_OVERHEAD`
            (``None``: no limit); a ``put`` past it is answered ``OUT_OF_MEMORY``.

    Raises:
        ValueError: ``max_memory`` is below 1.
    """

    def __init__(
        self,
        now: float,
        *,
        max_job_size: int = 65535,
        on_timer: Callable[[], None] | None = None,
        max_memory: int | None = None,
    ) -> None:
        if max_memory is not None and max_memory < 1:
            raise ValueError(f"max_memory must be at least 1, got {max_memory}")
        self.started = now
        self.max_job_size = max_job_size
        self.max_memory = max_memory
        #: Bytes the stored jobs count against ``max_memory`` (counted with or without it).
        self.memory = 0
        self.on_timer = on_timer
        #: Drain mode: puts are answered DRAINING.
        self.draining = False
        self.jobs: dict[int, Job] = {}
        self._tubes: dict[str, Tube] = {}
        self._tube_list: list[Tube] = []
        self._next_job_id = 1
        self._next_conn_id = 1
        self._conns: set[ConnState] = set()
        self._waiting_count = 0
        self.total_connections = 0
        self._timers: list[tuple[float, int, _Target]] = []
        self._timers_live = 0
        self.counts: dict[str, int] = dict.fromkeys(
            (key for key in SERVER_KEYS if key.startswith("cmd-")), 0
        )
        self.counts["job-timeouts"] = 0
        self.counts["total-jobs"] = 0
        #: A random id per server instance, as beanstalkd draws one per process.
        self.instance_id = os.urandom(8).hex()  # as beanstalkd; importing secrets slows start
        uname = os.uname() if hasattr(os, "uname") else None
        self._hostname = uname.nodename if uname else socket.gethostname()
        self._os = uname.version if uname else ""
        self._platform = uname.machine if uname else ""
        #: Never deleted: beanstalkd holds a reference to it for its whole life.
        self.default_tube = self._tube(DEFAULT_TUBE)
        self._handlers: dict[type[Command[Any]], _Handler] = {
            Put: self._put, Use: self._use, Reserve: self._reserve,
            ReserveWithTimeout: self._reserve_with_timeout, ReserveJob: self._reserve_job,
            Delete: self._delete, Release: self._release, Bury: self._bury,
            Touch: self._touch, Watch: self._watch, Ignore: self._ignore, Peek: self._peek,
            PeekReady: self._peek_ready, PeekDelayed: self._peek_delayed,
            PeekBuried: self._peek_buried, Kick: self._kick, KickJob: self._kick_job,
            StatsJob: self._stats_job, StatsTube: self._stats_tube, Stats: self._stats,
            ListTubes: self._list_tubes, ListTubeUsed: self._list_tube_used,
            ListTubesWatched: self._list_tubes_watched, PauseTube: self._pause_tube,
        }

    # -- public API ----------------------------------------------------------------------------

    def connect(self, now: float) -> ConnState:
        """Register a new connection (using and watching ``default``)."""
        conn = ConnState(self._next_conn_id, self.default_tube)
        self._next_conn_id += 1
        self.default_tube.using += 1
        self.default_tube.watching += 1
        self._conns.add(conn)
        self.total_connections += 1
        return conn

    def disconnect(self, conn: ConnState, now: float) -> None:
        """Forget a closed connection; the jobs it held go back to ready at once. Idempotent."""
        if conn.closed:
            return
        self.advance(now)
        conn.closed = True
        if conn.waiting:
            self._stop_waiting(conn)
        for job in list(conn.reserved.values()):
            self._unreserve(job)
            self._make_ready(job, now)
        for tube in conn.watch:
            tube.watching -= 1
            self._maybe_drop(tube)
        conn.watch = []
        conn.use.using -= 1
        self._maybe_drop(conn.use)
        self._conns.discard(conn)
        conn.on_reply = None

    def half_close(self, conn: ConnState, now: float) -> None:
        """The client closed its sending side: a waiting reserve is answered TIMED_OUT, and so
        is any later reserve that finds no job."""
        conn.half_closed = True
        self.advance(now)
        if conn.waiting:
            self._answer(conn, _TIMED_OUT)

    def execute(self, conn: ConnState, command: Command[Any], now: float) -> Reply | None:
        """Run one command of ``conn`` and return its reply.

        Returns ``None`` when the command is a reserve that has to wait: the answer comes later
        through ``conn.reply`` / ``conn.on_reply``. ``Quit`` is the I/O layer's business.

        Raises:
            TypeError: ``command`` is ``Quit`` or not a command.
        """
        if self._timers and self._timers[0][0] <= now:
            self.advance(now)
        handler = self._handlers.get(type(command))
        if handler is None:
            raise TypeError(f"cannot execute {command!r}")
        return handler(conn, command, now)

    def bad_request(
        self, conn: ConnState, code: ErrorCode, now: float, counted: str = ""
    ) -> Reply:
        """The reply to input the protocol core rejected, counted as beanstalkd counts it
        (``counted``: a stats counter it increments before rejecting the command)."""
        if counted:
            self.counts[counted] += 1
        if code is ErrorCode.JOB_TOO_BIG:
            self.counts["cmd-put"] += 1
        elif code is ErrorCode.EXPECTED_CRLF:
            # beanstalkd made the job (and used up an id) before it saw the bad trailer.
            self.counts["cmd-put"] += 1
            conn.producer = True
            self._next_job_id += 1
        return ErrorReply(code)

    def advance(self, now: float) -> None:
        """Fire every timer due at or before ``now``."""
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, seq, target = heapq.heappop(timers)
            if target.timer_seq != seq:
                continue  # replaced or cancelled
            target.timer_seq = 0
            self._timers_live -= 1
            if isinstance(target, Job):
                self._job_due(target, now)
            elif isinstance(target, ConnState):
                self._wait_due(target, now)
            else:
                self._unpause_due(target, now)

    def next_deadline(self) -> float | None:
        """When the earliest live timer is due, or ``None`` if there is none."""
        timers = self._timers
        while timers:
            _, seq, target = timers[0]
            if target.timer_seq == seq:
                return timers[0][0]
            heapq.heappop(timers)
        return None

    def tube(self, name: str) -> Tube | None:
        """The tube named ``name`` if it exists."""
        return self._tubes.get(name)

    def tube_names(self) -> list[str]:
        """Every existing tube, in ``list-tubes`` order."""
        return [tube.name for tube in self._tube_list]

    @property
    def connections(self) -> int:
        """How many connections are open."""
        return len(self._conns)

    # -- tubes ---------------------------------------------------------------------------------

    def _tube(self, name: str) -> Tube:
        tube = self._tubes.get(name)
        if tube is None:
            tube = self._tubes[name] = Tube(name)
            tube.index = len(self._tube_list)
            self._tube_list.append(tube)
        return tube

    def _maybe_drop(self, tube: Tube) -> None:
        """Delete ``tube`` once no job or connection refers to it (as beanstalkd does)."""
        if tube.jobs or tube.using or tube.watching or tube is self.default_tube:
            return
        del self._tubes[tube.name]
        last = self._tube_list.pop()
        if last is not tube:
            self._tube_list[tube.index] = last
            last.index = tube.index
        tube.index = -1
        self._cancel_timer(tube)

    # -- timers --------------------------------------------------------------------------------

    def _set_timer(self, target: _Target, when: float) -> None:
        if target.timer_seq:
            self._timers_live -= 1
        target.timer_seq = seq = next(_tokens)
        timers = self._timers
        earliest = not timers or when < timers[0][0]
        heapq.heappush(timers, (when, seq, target))
        self._timers_live += 1
        if earliest and self.on_timer is not None:
            self.on_timer()

    def _cancel_timer(self, target: _Target) -> None:
        if target.timer_seq:
            target.timer_seq = 0
            self._timers_live -= 1
            timers = self._timers
            if len(timers) > 256 and len(timers) > 2 * self._timers_live:
                # In place: advance() may be iterating over this very list.
                timers[:] = [entry for entry in timers if entry[2].timer_seq == entry[1]]
                heapq.heapify(timers)

    def _job_due(self, job: Job, now: float) -> None:
        if job.state is JobState.DELAYED:
            job.tube.delayed.discard(job)
            self._make_ready(job, now)
        elif job.state is JobState.RESERVED:
            self._unreserve(job)
            job.timeouts += 1
            self.counts["job-timeouts"] += 1
            self._make_ready(job, now)

    def _wait_due(self, conn: ConnState, now: float) -> None:
        if not conn.waiting:
            return
        soonest = conn.soonest_deadline()
        if soonest is not None and now >= soonest - DEADLINE_MARGIN:
            self._answer(conn, _DEADLINE_SOON)
        elif conn.timeout_at is not None and now >= conn.timeout_at:
            self._answer(conn, _TIMED_OUT)
        else:  # woken a hair early by float rounding: sleep again
            self._arm_wait(conn)

    def _unpause_due(self, tube: Tube, now: float) -> None:
        tube.pause = 0
        self._serve_waiters(tube, now)

    # -- job moves -----------------------------------------------------------------------------

    def _make_ready(self, job: Job, now: float) -> None:
        tube = job.tube
        job.state = JobState.READY
        tube.ready.push(job.priority, job)
        if job.priority < URGENT_THRESHOLD:
            tube.urgent += 1
        if tube.waiting:
            self._serve_waiters(tube, now)

    def _make_delayed(self, job: Job, delay: int, now: float) -> None:
        job.state = JobState.DELAYED
        job.deadline = now + delay
        job.tube.delayed.push(job.deadline, job)
        self._set_timer(job, job.deadline)

    def _make_buried(self, job: Job) -> None:
        job.state = JobState.BURIED
        job.tube.buried[job.id] = job

    def _detach(self, job: Job) -> None:
        """Take ``job`` out of whatever ready/delayed/buried/reserved structure holds it."""
        tube = job.tube
        state = job.state
        if state is JobState.READY:
            tube.ready.discard(job)
            if job.priority < URGENT_THRESHOLD:
                tube.urgent -= 1
        elif state is JobState.DELAYED:
            tube.delayed.discard(job)
            self._cancel_timer(job)
        elif state is JobState.BURIED:
            del tube.buried[job.id]
        else:
            self._unreserve(job)

    def _unreserve(self, job: Job) -> None:
        conn = job.reserver
        assert conn is not None
        conn._drop(job)
        job.reserver = None
        job.tube.reserved -= 1
        self._cancel_timer(job)

    def _hand_over(self, conn: ConnState, job: Job, now: float) -> Reserved:
        """Reserve ``job`` (already detached) for ``conn``."""
        job.state = JobState.RESERVED
        job.reserver = conn
        job.reserves += 1
        job.deadline = now + job.ttr
        job.tube.reserved += 1
        conn._hold(job)
        self._set_timer(job, job.deadline)
        return Reserved(job.id, job.body)

    def _kick_one(self, job: Job, now: float) -> None:
        self._detach(job)
        job.kicks += 1
        self._make_ready(job, now)

    def _delete_job(self, job: Job) -> None:
        self._detach(job)
        del self.jobs[job.id]
        self.memory -= JOB_OVERHEAD + len(job.body)
        tube = job.tube
        tube.cmd_delete += 1
        tube.jobs -= 1
        self._maybe_drop(tube)

    # -- reserving -----------------------------------------------------------------------------

    def _best_ready(self, conn: ConnState, now: float) -> Job | None:
        best: Job | None = None
        for tube in conn.watch:
            if tube.unpause_at > now:
                continue
            job = tube.ready.peek()
            if job is not None and (
                best is None or (job.priority, job.id) < (best.priority, best.id)
            ):
                best = job
        return best

    def _begin_reserve(self, conn: ConnState, timeout: float | None, now: float) -> Reply | None:
        conn.worker = True
        job = self._best_ready(conn, now)
        if job is not None:
            self._detach(job)
            return self._hand_over(conn, job, now)
        soonest = conn.soonest_deadline()
        if soonest is not None and now >= soonest - DEADLINE_MARGIN:
            return _DEADLINE_SOON
        if timeout == 0 or conn.half_closed:
            return _TIMED_OUT
        conn.waiting = True
        conn.reply = None
        conn.timeout_at = None if timeout is None else now + timeout
        for tube in conn.watch:
            tube.waiting[conn] = None
        self._waiting_count += 1
        self._arm_wait(conn)
        return None

    def _arm_wait(self, conn: ConnState) -> None:
        soonest = conn.soonest_deadline()
        wake = None if soonest is None else soonest - DEADLINE_MARGIN
        if conn.timeout_at is not None and (wake is None or conn.timeout_at < wake):
            wake = conn.timeout_at
        if wake is not None:
            self._set_timer(conn, wake)

    def _stop_waiting(self, conn: ConnState) -> None:
        conn.waiting = False
        conn.timeout_at = None
        for tube in conn.watch:
            tube.waiting.pop(conn, None)
        self._waiting_count -= 1
        self._cancel_timer(conn)

    def _answer(self, conn: ConnState, reply: Reply) -> None:
        self._stop_waiting(conn)
        conn.reply = reply
        if conn.on_reply is not None:
            conn.on_reply()

    def _serve_waiters(self, tube: Tube, now: float) -> None:
        """Give ``tube``'s ready jobs to the connections waiting on it, oldest waiter first.

        No other tube a waiter watches can have a reservable job (it would have been given
        already), so the tube's best job is that waiter's best job.
        """
        if tube.unpause_at > now:
            return
        while tube.waiting:
            job = tube.ready.peek()
            if job is None:
                return
            conn = next(iter(tube.waiting))
            self._detach(job)
            self._answer(conn, self._hand_over(conn, job, now))

    # -- commands ------------------------------------------------------------------------------

    def put(
        self, conn: ConnState, body: bytes, priority: int, delay: int, ttr: int, now: float
    ) -> int | Reply:
        """``execute(conn, Put(body, priority, delay, ttr), now)`` without the ``Put`` (the
        fields as the protocol core checked them) and the ``Inserted``: the new job's id, or
        the reply when no job was stored (``OUT_OF_MEMORY``, ``DRAINING``). The server's fast
        path for pipelined puts."""
        if self._timers and self._timers[0][0] <= now:
            self.advance(now)
        return self._insert(conn, body, priority, delay, ttr, now)

    def _put(self, conn: ConnState, cmd: Put, now: float) -> Reply:
        job_id = self._insert(conn, cmd.body, cmd.priority, cmd.delay, cmd.ttr, now)
        return Inserted(job_id) if isinstance(job_id, int) else job_id

    def _insert(
        self, conn: ConnState, body: bytes, priority: int, delay: int, ttr: int, now: float
    ) -> int | Reply:
        counts = self.counts
        counts["cmd-put"] += 1
        conn.producer = True
        size = JOB_OVERHEAD + len(body)
        if self.max_memory is not None and self.memory + size > self.max_memory:
            return _OUT_OF_MEMORY  # as beanstalkd's failed allocation: before an id is taken
        job_id = self._next_job_id
        self._next_job_id = job_id + 1
        if self.draining:
            return _DRAINING
        tube = conn.use
        job = Job(job_id, tube, priority, delay, ttr or 1, body, now)
        self.jobs[job_id] = job
        self.memory += size
        tube.jobs += 1
        tube.total_jobs += 1
        counts["total-jobs"] += 1
        if delay:
            self._make_delayed(job, delay, now)
        else:
            self._make_ready(job, now)
        return job_id

    def _use(self, conn: ConnState, cmd: Use, now: float) -> Reply:
        self.counts["cmd-use"] += 1
        tube = self._tube(cmd.tube)
        old = conn.use
        if old is not tube:
            tube.using += 1
            conn.use = tube
            old.using -= 1
            self._maybe_drop(old)
        return Using(tube.name)

    def _reserve(self, conn: ConnState, cmd: Reserve, now: float) -> Reply | None:
        self.counts["cmd-reserve"] += 1
        return self._begin_reserve(conn, None, now)

    def _reserve_with_timeout(
        self, conn: ConnState, cmd: ReserveWithTimeout, now: float
    ) -> Reply | None:
        self.counts["cmd-reserve-with-timeout"] += 1
        return self._begin_reserve(conn, cmd.seconds, now)

    def _reserve_job(self, conn: ConnState, cmd: ReserveJob, now: float) -> Reply:
        # Never DEADLINE_SOON: this command does not block (beanstalkd's own reasoning).
        job = self.jobs.get(cmd.job_id)
        if job is None or job.state is JobState.RESERVED:
            return _NOT_FOUND
        conn.worker = True
        self._detach(job)
        return self._hand_over(conn, job, now)

    def _delete(self, conn: ConnState, cmd: Delete, now: float) -> Reply:
        self.counts["cmd-delete"] += 1
        job = self.jobs.get(cmd.job_id)
        if job is None or (job.state is JobState.RESERVED and job.reserver is not conn):
            return _NOT_FOUND
        self._delete_job(job)
        return DELETED

    def _release(self, conn: ConnState, cmd: Release, now: float) -> Reply:
        self.counts["cmd-release"] += 1
        job = conn.reserved.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        self._unreserve(job)
        job.priority = cmd.priority
        job.delay = cmd.delay
        job.releases += 1
        if cmd.delay:
            self._make_delayed(job, cmd.delay, now)
        else:
            self._make_ready(job, now)
        return RELEASED

    def _bury(self, conn: ConnState, cmd: Bury, now: float) -> Reply:
        self.counts["cmd-bury"] += 1
        job = conn.reserved.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        self._unreserve(job)
        job.priority = cmd.priority
        job.buries += 1
        self._make_buried(job)
        return _BURIED

    def _touch(self, conn: ConnState, cmd: Touch, now: float) -> Reply:
        self.counts["cmd-touch"] += 1
        job = conn.reserved.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        conn._drop(job)
        job.deadline = now + job.ttr
        conn._hold(job)
        self._set_timer(job, job.deadline)
        return TOUCHED

    def _watch(self, conn: ConnState, cmd: Watch, now: float) -> Reply:
        self.counts["cmd-watch"] += 1
        tube = self._tube(cmd.tube)
        if tube not in conn.watch:
            conn.watch.append(tube)
            tube.watching += 1
        return Watching(len(conn.watch))

    def _ignore(self, conn: ConnState, cmd: Ignore, now: float) -> Reply:
        self.counts["cmd-ignore"] += 1
        watch = conn.watch
        tube = next((t for t in watch if t.name == cmd.tube), None)
        if tube is None:  # not watched: nothing to do (beanstalkd does not create the tube)
            return Watching(len(watch))
        if len(watch) < 2:
            return _NOT_IGNORED
        i = watch.index(tube)
        last = watch.pop()
        if i < len(watch):
            watch[i] = last
        tube.watching -= 1
        self._maybe_drop(tube)
        return Watching(len(watch))

    def _peek(self, conn: ConnState, cmd: Peek, now: float) -> Reply:
        self.counts["cmd-peek"] += 1
        return _found(self.jobs.get(cmd.job_id))

    def _peek_ready(self, conn: ConnState, cmd: PeekReady, now: float) -> Reply:
        self.counts["cmd-peek-ready"] += 1
        return _found(conn.use.ready.peek())

    def _peek_delayed(self, conn: ConnState, cmd: PeekDelayed, now: float) -> Reply:
        self.counts["cmd-peek-delayed"] += 1
        return _found(conn.use.delayed.peek())

    def _peek_buried(self, conn: ConnState, cmd: PeekBuried, now: float) -> Reply:
        self.counts["cmd-peek-buried"] += 1
        buried = conn.use.buried
        return _found(next(iter(buried.values())) if buried else None)

    def _kick(self, conn: ConnState, cmd: Kick, now: float) -> Reply:
        self.counts["cmd-kick"] += 1
        tube = conn.use
        kicked = 0
        if tube.buried:
            while kicked < cmd.bound and tube.buried:
                self._kick_one(next(iter(tube.buried.values())), now)
                kicked += 1
        else:
            while kicked < cmd.bound:
                job = tube.delayed.peek()
                if job is None:
                    break
                self._kick_one(job, now)
                kicked += 1
        return Kicked(kicked)

    def _kick_job(self, conn: ConnState, cmd: KickJob, now: float) -> Reply:
        job = self.jobs.get(cmd.job_id)
        if job is None or job.state not in (JobState.BURIED, JobState.DELAYED):
            return _NOT_FOUND
        self._kick_one(job, now)
        return _KICKED

    def _stats_job(self, conn: ConnState, cmd: StatsJob, now: float) -> Reply:
        self.counts["cmd-stats-job"] += 1
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return _NOT_FOUND
        time_left = 0
        if job.state is JobState.RESERVED or job.state is JobState.DELAYED:
            time_left = int(job.deadline - now)
        return Ok(format_dict({
            "id": job.id, "tube": job.tube.name, "state": job.state.value, "pri": job.priority,
            "age": int(now - job.created), "delay": job.delay, "ttr": job.ttr,
            "time-left": time_left, "file": 0, "reserves": job.reserves,
            "timeouts": job.timeouts, "releases": job.releases, "buries": job.buries,
            "kicks": job.kicks,
        }))

    def _stats_tube(self, conn: ConnState, cmd: StatsTube, now: float) -> Reply:
        self.counts["cmd-stats-tube"] += 1
        tube = self._tubes.get(cmd.tube)
        if tube is None:
            return _NOT_FOUND
        paused = tube.paused(now)
        return Ok(format_dict({
            "name": tube.name, "current-jobs-urgent": tube.urgent,
            "current-jobs-ready": len(tube.ready), "current-jobs-reserved": tube.reserved,
            "current-jobs-delayed": len(tube.delayed), "current-jobs-buried": len(tube.buried),
            "total-jobs": tube.total_jobs,
            "current-using": tube.using,
            "current-watching": tube.watching, "current-waiting": len(tube.waiting),
            "cmd-delete": tube.cmd_delete, "cmd-pause-tube": tube.cmd_pause,
            "pause": tube.pause if paused else 0,
            "pause-time-left": int(tube.unpause_at - now) if paused else 0,
        }))

    def _stats(self, conn: ConnState, cmd: Stats, now: float) -> Reply:
        self.counts["cmd-stats"] += 1
        return Ok(format_dict(self.server_stats(now)))

    def server_stats(self, now: float) -> dict[str, StatsValue]:
        """The ``stats`` document as a dict, in beanstalkd 1.12's key order."""
        urgent = ready = reserved = delayed = buried = 0
        for tube in self._tube_list:
            urgent += tube.urgent
            ready += len(tube.ready)
            reserved += tube.reserved
            delayed += len(tube.delayed)
            buried += len(tube.buried)
        if resource is not None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            utime, stime = usage.ru_utime, usage.ru_stime
        else:  # pragma: no cover
            utime, stime = 0.0, 0.0
        values: dict[str, StatsValue] = {
            "current-jobs-urgent": urgent, "current-jobs-ready": ready,
            "current-jobs-reserved": reserved, "current-jobs-delayed": delayed,
            "current-jobs-buried": buried,
        }
        values.update(self.counts)
        values.update({
            "max-job-size": self.max_job_size,
            "current-tubes": len(self._tube_list),
            "current-connections": len(self._conns),
            "current-producers": sum(1 for c in self._conns if c.producer),
            "current-workers": sum(1 for c in self._conns if c.worker),
            "current-waiting": self._waiting_count,
            "total-connections": self.total_connections,
            "pid": os.getpid(), "version": VERSION,
            "rusage-utime": float(utime), "rusage-stime": float(stime),
            "uptime": int(now - self.started),
            "binlog-oldest-index": 0, "binlog-current-index": 0,
            "binlog-records-migrated": 0, "binlog-records-written": 0,
            "binlog-max-size": BINLOG_MAX_SIZE,
            "draining": "true" if self.draining else "false",
            "id": self.instance_id, "hostname": self._hostname, "os": self._os,
            "platform": self._platform,
        })
        return {key: values[key] for key in SERVER_KEYS}

    def _list_tubes(self, conn: ConnState, cmd: ListTubes, now: float) -> Reply:
        self.counts["cmd-list-tubes"] += 1
        return Ok(format_list(self.tube_names()))

    def _list_tube_used(self, conn: ConnState, cmd: ListTubeUsed, now: float) -> Reply:
        self.counts["cmd-list-tube-used"] += 1
        return Using(conn.use.name)

    def _list_tubes_watched(self, conn: ConnState, cmd: ListTubesWatched, now: float) -> Reply:
        self.counts["cmd-list-tubes-watched"] += 1
        return Ok(format_list([tube.name for tube in conn.watch]))

    def _pause_tube(self, conn: ConnState, cmd: PauseTube, now: float) -> Reply:
        self.counts["cmd-pause-tube"] += 1
        tube = self._tubes.get(cmd.tube)
        if tube is None:
            return _NOT_FOUND
        tube.cmd_pause += 1
        tube.pause = cmd.delay
        tube.unpause_at = now + cmd.delay
        if cmd.delay:
            self._set_timer(tube, tube.unpause_at)
        else:  # a pause of 0 ends at once (beanstalkd pauses for 1 ns)
            self._cancel_timer(tube)
            self._serve_waiters(tube, now)
        return PAUSED


def _found(job: Job | None) -> Reply:
    return _NOT_FOUND if job is None else Found(job.id, job.body)
