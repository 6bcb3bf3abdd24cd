"""The bundled server's state: functions, queues, jobs, workers. Pure: no I/O, no clock of its own.

Every method takes the current time where it needs one and writes the packets it produces into
the ``out`` buffers of the connections concerned (a WORK_COMPLETE goes to every client attached
to the job; a SUBMIT wakes sleeping workers with NOOP). ``_serve.py`` moves those bytes.

Behaviour follows gearmand 1.1.20 as measured (docs/gearman.md) with these deliberate
differences:

* a SUBMIT_JOB_EPOCH job whose time comes wakes sleeping workers (gearmand 1.1.20 does not);
* priority is global (a HIGH job of any function before a NORMAL one), as in gearmand 2.0;
* ``shutdown [graceful]`` exists when the server allows it (``allow_shutdown``; otherwise it is
  an unknown command, as in gearmand 1.1.20), and ``drop function`` refuses a function that
  has jobs (gearmand drops it and orphans the jobs);
* what gearmand gets wrong is not copied: a cancelled job or one whose clients all left does not
  swallow a later submit of its unique id, clients are told of a cancel once, a 64-byte unique
  id is refused (gearmand truncates it and corrupts the job), a newline in a client id is
  listed as ``?`` (gearmand's would forge ``workers`` lines) — docs/gearman.md;
* nothing else on purpose: CAN_DO_TIMEOUT is in milliseconds with a 1000 ms minimum, a job that
  runs out is requeued silently, as in gearmand.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
from collections import deque
from collections.abc import Callable

from jobwire._record import field, record
from jobwire.errors import LocalProtocolError

from .. import _packets as pk
from .._events import WrongMagic
from .._packets import Packet, Priority
from .._server_protocol import ServerConnection

__all__ = [
    "DEFAULT_MAX_FUNCTIONS", "DEFAULT_MAX_FUNCTIONS_PER_CONNECTION", "JOB_OVERHEAD", "Conn",
    "Job", "ServerState",
]

_PRIORITIES = (Priority.HIGH, Priority.NORMAL, Priority.LOW)

#: Functions the server knows at most (``--max-functions``): a few hundred bytes each.
DEFAULT_MAX_FUNCTIONS = 100_000
#: Functions one connection may register at most (``--max-functions-per-connection``).
DEFAULT_MAX_FUNCTIONS_PER_CONNECTION = 10_000
#: What a stored job counts against ``--max-memory`` beyond its data, function name, unique
#: id and reducer: its bookkeeping (the ``Job``, its handle, its places in the tables).
JOB_OVERHEAD = 256


@record(frozen=False, eq=False)
class Conn:
    """One client, worker or admin connection."""

    fd: int
    address: str
    protocol: ServerConnection = field(default_factory=ServerConnection)
    out: bytearray = field(default_factory=bytearray)
    #: As sent by SET_CLIENT_ID (``-`` if never sent), listed by the ``workers`` command.
    client_id: bytes = b"-"
    #: function -> CAN_DO_TIMEOUT in seconds (None: no timeout), in registration order.
    abilities: dict[bytes, float | None] = field(default_factory=dict)
    exceptions: bool = False
    sleeping: bool = False
    noop_sent: bool = False
    running: set[bytes] = field(default_factory=set)  # handles assigned to this worker
    waiting: set[bytes] = field(default_factory=set)  # foreground jobs this client waits for
    #: The server should close this connection once ``out`` is sent.
    close: bool = False
    #: Set by the I/O layer: called when bytes were queued for this connection.
    notify: Callable[[], None] | None = None

    def send(self, packet: Packet) -> None:
        self.out += self.protocol.send(packet)
        if self.notify is not None:
            self.notify()


@record(frozen=False, eq=False)
class Job:
    handle: bytes
    function: bytes
    unique: bytes
    data: bytes
    priority: Priority
    background: bool
    reducer: bytes | None = None
    when: float = 0.0
    #: What it counts against ``max_memory``.
    size: int = 0
    clients: list[Conn] = field(default_factory=list)
    worker: Conn | None = None
    numerator: int = 0
    denominator: int = 0
    #: Times the job went back to the queue after its worker left or timed out.
    retries: int = 0
    #: Every client left before it ran, or it was cancelled: dropped when next grabbed.
    ignore: bool = False
    cancelled: bool = False
    deadline: float | None = None


@record(frozen=False)
class Function:
    name: bytes
    #: A queue per priority, made when its first job comes (a function with no jobs holds none).
    queues: dict[Priority, deque[Job]] = field(default_factory=dict)
    future: int = 0  # epoch jobs not yet due
    running: int = 0
    #: Connections that registered it (CAN_DO, CAN_DO_TIMEOUT).
    workers: int = 0
    max_queue: dict[Priority, int] = field(default_factory=dict)
    #: Made by the admin ``create function``: kept, like one with a ``maxqueue``, when nobody
    #: serves or queues it.
    created: bool = False

    def queue(self, priority: Priority) -> deque[Job]:
        queue = self.queues.get(priority)
        if queue is None:
            queue = self.queues[priority] = deque()
        return queue

    def queued(self, priority: Priority) -> int:
        queue = self.queues.get(priority)
        return 0 if queue is None else len(queue)

    def has_queued(self) -> bool:
        return any(self.queues.values())

    def unused(self) -> bool:
        """Nobody serves it, no job of it waits or runs, no admin made or limited it."""
        return not (self.workers or self.running or self.future or self.has_queued()
                    or self.created or self.max_queue)


class ServerState:
    """Everything the server knows. All methods run without awaiting.

    Args:
        on_timer: called when a new timer (epoch job, job timeout) is earlier than every other,
            so the scheduler task can wake up.
        handle_prefix: handles are ``{prefix}:{n}`` (default ``H:<hostname>``).
        allow_shutdown: obey the admin ``shutdown [graceful]`` command (see :attr:`shutdown`);
            without it the command is unknown, as in gearmand 1.1.20.
        max_functions: functions known at once (``None``: no limit). A CAN_DO of one more
            gets ``ERROR MEMORY_ALLOCATION_FAILURE`` (and is not registered), a submit
            ``ERROR QUEUE_ERROR``, an admin ``create function`` or ``maxqueue`` an ``ERR``.
        max_functions_per_connection: functions one connection may register (``None``: no
            limit); one more CAN_DO gets ``ERROR MEMORY_ALLOCATION_FAILURE``.
        max_memory: bytes of stored jobs (:data:`JOB_OVERHEAD` plus data, function name,
            unique id and reducer each; ``None``: no limit); a submit past it gets
            ``ERROR QUEUE_ERROR``.

    Raises:
        ValueError: a limit is below 1.
    """

    def __init__(
        self,
        on_timer: Callable[[], None] | None = None,
        handle_prefix: str | None = None,
        *,
        allow_shutdown: bool = False,
        max_functions: int | None = DEFAULT_MAX_FUNCTIONS,
        max_functions_per_connection: int | None = DEFAULT_MAX_FUNCTIONS_PER_CONNECTION,
        max_memory: int | None = None,
    ) -> None:
        for name, value in (("max_functions", max_functions),
                            ("max_functions_per_connection", max_functions_per_connection),
                            ("max_memory", max_memory)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self.max_functions = max_functions
        self.max_functions_per_connection = max_functions_per_connection
        self.max_memory = max_memory
        #: Bytes the stored jobs count against ``max_memory``.
        self.memory = 0
        prefix = handle_prefix or f"H:{socket.gethostname()[:40]}"
        self._prefix = prefix.encode()
        self._next_handle = itertools.count(1)
        self.functions: dict[bytes, Function] = {}
        self.jobs: dict[bytes, Job] = {}
        self.uniques: dict[tuple[bytes, bytes], Job] = {}
        self.conns: dict[int, Conn] = {}
        self._future: list[tuple[float, int, Job]] = []  # epoch jobs by due time
        self._timeouts: list[tuple[float, int, bytes]] = []  # running jobs by deadline
        self._seq = itertools.count()
        self.on_timer = on_timer
        self.allow_shutdown = allow_shutdown
        self.shutdown: str | None = None  # "now" or "graceful" once asked

    # -- connections ----------------------------------------------------------------------------

    def connect(self, conn: Conn) -> None:
        self.conns[conn.fd] = conn

    def disconnect(self, conn: Conn, now: float) -> None:
        """Forget ``conn``: its running jobs go back to the front of their queues (the clients
        are told nothing, as in gearmand); jobs only it waited for are ignored."""
        self.conns.pop(conn.fd, None)
        for handle in list(conn.running):
            job = self.jobs.get(handle)
            if job is not None and job.worker is conn:
                self._requeue(job)
        conn.running.clear()
        for handle in conn.waiting:
            job = self.jobs.get(handle)
            if job is None:
                continue
            job.clients = [c for c in job.clients if c is not conn]
            if not job.clients and not job.background:
                job.ignore = True
        conn.waiting.clear()
        self._unregister(conn, list(conn.abilities))

    def _function(self, name: bytes) -> Function:
        """The function ``name``, which exists (it has jobs, workers, or an admin made it)."""
        return self.functions[name]

    def _new_function(self, name: bytes) -> Function | None:
        """The function ``name``, made if new; ``None`` when ``max_functions`` are known."""
        fn = self.functions.get(name)
        if fn is None:
            if self.max_functions is not None and len(self.functions) >= self.max_functions:
                return None
            fn = self.functions[name] = Function(name)
        return fn

    def _release(self, fn: Function) -> None:
        """Forget ``fn`` once nobody serves or queues it (unlike gearmand, which keeps every
        function it ever saw: a worker registering names could grow it without end)."""
        if fn.unused() and self.functions.get(fn.name) is fn:
            del self.functions[fn.name]

    def _unregister(self, conn: Conn, names: list[bytes]) -> None:
        for name in names:
            if name in conn.abilities:
                del conn.abilities[name]
                fn = self.functions.get(name)
                if fn is not None:
                    fn.workers -= 1
                    self._release(fn)

    # -- timers ---------------------------------------------------------------------------------

    def next_timer(self) -> float | None:
        """The earliest time something is due, or ``None``."""
        times = []
        if self._future:
            times.append(self._future[0][0])
        if self._timeouts:
            times.append(self._timeouts[0][0])
        return min(times) if times else None

    def tick(self, now: float) -> None:
        """Run every timer due at ``now``: epoch jobs become runnable (and wake workers), running
        jobs past their CAN_DO_TIMEOUT go back to the queue."""
        while self._future and self._future[0][0] <= now:
            _, _, job = heapq.heappop(self._future)
            if job.handle in self.jobs:
                fn = self._function(job.function)
                fn.future -= 1
                fn.queue(job.priority).append(job)
                self._wake(job.function)
        while self._timeouts and self._timeouts[0][0] <= now:
            _, _, handle = heapq.heappop(self._timeouts)
            timed_out = self.jobs.get(handle)
            deadline = None if timed_out is None else timed_out.deadline
            if timed_out is not None and deadline is not None and deadline <= now:
                if timed_out.worker is not None:
                    timed_out.worker.running.discard(handle)
                self._requeue(timed_out)

    def _timer_added(self) -> None:
        if self.on_timer is not None:
            self.on_timer()

    # -- requests -------------------------------------------------------------------------------

    def handle(self, conn: Conn, request: Packet | WrongMagic, now: float) -> None:
        """Run one binary request from ``conn``."""
        if isinstance(request, WrongMagic):
            conn.send(pk.Error(b"INVALID_MAGIC", b"Request magic expected"))
            return
        method = _HANDLERS.get(type(request))
        if method is None:
            conn.send(pk.Error(b"INVALID_COMMAND", b"Command not expected"))
            return
        method(self, conn, request, now)

    def _echo(self, conn: Conn, p: pk.EchoReq, now: float) -> None:
        conn.send(pk.EchoRes(p.data))

    def _option(self, conn: Conn, p: pk.OptionReq, now: float) -> None:
        if p.name == b"exceptions":
            conn.exceptions = True
            conn.send(pk.OptionRes(p.name))
        else:
            conn.send(pk.Error(b"UNKNOWN_OPTION", b"Server does not recognize given option"))

    def _submit(self, conn: Conn, p: Packet, now: float) -> None:
        function: bytes = p.function  # type: ignore[attr-defined]
        unique: bytes = p.unique  # type: ignore[attr-defined]
        data: bytes = p.data  # type: ignore[attr-defined]
        background = bool(getattr(p, "BACKGROUND", False))
        priority = getattr(p, "PRIORITY", Priority.NORMAL)
        reducer = getattr(p, "reducer", None)
        when = float(p.epoch) if isinstance(p, pk.SubmitJobEpoch) else 0.0
        if not self._valid_name(conn, function) or not self._valid_unique(conn, unique):
            return
        if reducer is not None and not self._valid_name(conn, reducer, b"Reducer"):
            return
        if unique:
            existing = self.uniques.get((function, unique))
            if existing is not None and not existing.cancelled:
                if not background and conn not in existing.clients:
                    existing.clients.append(conn)
                    existing.ignore = False
                    conn.waiting.add(existing.handle)
                conn.send(pk.JobCreated(existing.handle))
                return
        fn = self._new_function(function)
        if fn is None:
            conn.send(pk.Error(b"QUEUE_ERROR", b"Too many functions (--max-functions)"))
            return
        size = JOB_OVERHEAD + len(function) + len(unique) + len(data) + len(reducer or b"")
        if self.max_memory is not None and self.memory + size > self.max_memory:
            self._release(fn)
            conn.send(pk.Error(b"QUEUE_ERROR", b"Server memory is full (--max-memory)"))
            return
        limit = fn.max_queue.get(priority, 0)
        waiting = fn.queued(priority) + (fn.future if priority is Priority.NORMAL else 0)
        if limit > 0 and waiting >= limit:
            conn.send(pk.Error(b"QUEUE_ERROR", b"Job queue is full"))
            return
        handle = b"%s:%d" % (self._prefix, next(self._next_handle))
        job = Job(handle, function, unique, data, priority, background, reducer, when, size)
        self.jobs[handle] = job
        self.memory += size
        if unique:
            self.uniques[function, unique] = job
        if not background:
            job.clients.append(conn)
            conn.waiting.add(handle)
        conn.send(pk.JobCreated(handle))
        if when > now:
            fn.future += 1
            earliest = self.next_timer()
            heapq.heappush(self._future, (when, next(self._seq), job))
            if earliest is None or when < earliest:
                self._timer_added()
        else:
            fn.queue(priority).append(job)
            self._wake(function)

    def _wake(self, function: bytes) -> None:
        for worker in self.conns.values():
            if worker.sleeping and not worker.noop_sent and function in worker.abilities:
                worker.noop_sent = True
                worker.send(pk.Noop())

    def _valid_name(self, conn: Conn, name: bytes, what: bytes = b"Function") -> bool:
        """A function name (or reducer) as jobwire's client sends it: non-empty, no whitespace
        or control bytes, which would forge lines of ``status``, ``prioritystatus`` and
        ``workers``. Otherwise ``ERROR INVALID_FUNCTION_NAME`` and False."""
        try:
            pk.check_name(name, "name")
        except LocalProtocolError:
            reason = b"is empty" if not name else b"contains whitespace or a control byte"
            conn.send(pk.Error(b"INVALID_FUNCTION_NAME", b"%s name %s" % (what, reason)))
            return False
        return True

    def _valid_unique(self, conn: Conn, unique: bytes) -> bool:
        """A unique id as jobwire's client sends it: at most 63 bytes (``ARGUMENT_TOO_LARGE``,
        as gearmand for 65), no control bytes (``INVALID_ARGUMENT``: ``show unique jobs``
        lists one per line)."""
        if len(unique) > pk.MAX_UNIQUE:
            conn.send(pk.Error(b"ARGUMENT_TOO_LARGE", b"Unique value too large"))
            return False
        try:
            pk.check_unique(unique)
        except LocalProtocolError:
            conn.send(pk.Error(b"INVALID_ARGUMENT", b"Unique value contains a control byte"))
            return False
        return True

    def _register(self, conn: Conn, name: bytes, timeout: float | None) -> None:
        """CAN_DO and CAN_DO_TIMEOUT. Neither has a reply; a refused one gets an ERROR (and is
        not registered), whose bytes the connection must read before it is read again."""
        if not self._valid_name(conn, name):
            return
        if name not in conn.abilities:
            limit = self.max_functions_per_connection
            if limit is not None and len(conn.abilities) >= limit:
                conn.send(pk.Error(b"MEMORY_ALLOCATION_FAILURE", b"Too many functions on this "
                                   b"connection (--max-functions-per-connection)"))
                return
            fn = self._new_function(name)
            if fn is None:
                conn.send(pk.Error(b"MEMORY_ALLOCATION_FAILURE",
                                   b"Too many functions (--max-functions)"))
                return
            fn.workers += 1
        conn.abilities[name] = timeout

    def _can_do(self, conn: Conn, p: pk.CanDo, now: float) -> None:
        self._register(conn, p.function, None)

    def _can_do_timeout(self, conn: Conn, p: pk.CanDoTimeout, now: float) -> None:
        # milliseconds, at least one second (as gearmand 1.1.20 measures); 0: no timeout
        self._register(conn, p.function, max(p.timeout, 1000) / 1000 if p.timeout else None)

    def _cant_do(self, conn: Conn, p: pk.CantDo, now: float) -> None:
        self._unregister(conn, [p.function])

    def _reset(self, conn: Conn, p: pk.ResetAbilities, now: float) -> None:
        self._unregister(conn, list(conn.abilities))

    def _set_client_id(self, conn: Conn, p: pk.SetClientId, now: float) -> None:
        # As gearmand 1.1.20: up to the first NUL, at most 127 bytes, spaces, colons and control
        # bytes kept, an empty id listed empty. A newline becomes "?": gearmand prints it and
        # so lets a worker break (or forge) the lines of every admin's ``workers`` reply.
        conn.client_id = p.client_id.partition(b"\0")[0][:127].replace(b"\n", b"?")

    def _has_job_for(self, conn: Conn) -> bool:
        for function in conn.abilities:
            fn = self.functions.get(function)
            if fn is not None and fn.has_queued():
                return True
        return False

    def _pre_sleep(self, conn: Conn, p: pk.PreSleep, now: float) -> None:
        conn.sleeping = True
        conn.noop_sent = False
        if self._has_job_for(conn):
            conn.noop_sent = True
            conn.send(pk.Noop())

    def _take_job(self, conn: Conn) -> Job | None:
        for priority in _PRIORITIES:
            for function in conn.abilities:
                fn = self.functions.get(function)
                if fn is None:
                    continue
                queue = fn.queues.get(priority)
                while queue:
                    job = queue.popleft()
                    if job.handle not in self.jobs:
                        continue
                    if job.ignore:  # every client left before it ran: drop it
                        self._forget(job)
                        continue
                    return job
        return None

    def _grab(self, conn: Conn, p: Packet, now: float) -> None:
        conn.sleeping = False
        job = self._take_job(conn)
        if job is None:
            conn.send(pk.NoJob())
            return
        fn = self._function(job.function)
        fn.running += 1
        job.worker = conn
        conn.running.add(job.handle)
        timeout = conn.abilities.get(job.function)
        if timeout:
            job.deadline = now + timeout
            earliest = self.next_timer()
            heapq.heappush(self._timeouts, (job.deadline, next(self._seq), job.handle))
            if earliest is None or job.deadline < earliest:
                self._timer_added()
        if isinstance(p, pk.GrabJob):
            conn.send(pk.JobAssign(job.handle, job.function, job.data))
        elif isinstance(p, pk.GrabJobAll) and job.reducer is not None:
            conn.send(pk.JobAssignAll(job.handle, job.function, job.unique, job.reducer, job.data))
        else:
            conn.send(pk.JobAssignUniq(job.handle, job.function, job.unique, job.data))

    def _requeue(self, job: Job) -> None:
        if job.worker is not None:
            self._function(job.function).running -= 1
        job.retries += 1
        job.worker = None
        job.deadline = None
        self._function(job.function).queue(job.priority).appendleft(job)
        self._wake(job.function)

    def _forget(self, job: Job) -> None:
        if self.jobs.pop(job.handle, None) is not None:
            self.memory -= job.size
        if job.unique and self.uniques.get((job.function, job.unique)) is job:
            del self.uniques[job.function, job.unique]
        for client in job.clients:
            client.waiting.discard(job.handle)
        if job.worker is not None:
            job.worker.running.discard(job.handle)
            self._function(job.function).running -= 1
            job.worker = None
        fn = self.functions.get(job.function)
        if fn is not None:
            self._release(fn)

    def _running_job(self, conn: Conn, handle: bytes) -> Job | None:
        job = self.jobs.get(handle)
        if job is None or job.worker is not conn:
            conn.send(pk.Error(b"JOB_NOT_FOUND", b"Job given in work result not found"))
            return None
        return job

    def _work_update(self, conn: Conn, p: Packet, now: float) -> None:
        job = self._running_job(conn, p.handle)  # type: ignore[attr-defined]
        if job is None:
            return
        if isinstance(p, pk.WorkStatus):
            job.numerator, job.denominator = p.numerator, p.denominator
        for client in job.clients:
            client.send(p)

    def _work_done(self, conn: Conn, p: Packet, now: float) -> None:
        job = self._running_job(conn, p.handle)  # type: ignore[attr-defined]
        if job is None:
            return
        for client in job.clients:
            if isinstance(p, pk.WorkException) and not client.exceptions:
                client.send(pk.WorkFail(job.handle))
            else:
                client.send(p)
        self._forget(job)

    def _get_status(self, conn: Conn, p: pk.GetStatus, now: float) -> None:
        job = self.jobs.get(p.handle)
        if job is None:
            conn.send(pk.StatusRes(p.handle, False, False, 0, 0))
        else:
            conn.send(pk.StatusRes(p.handle, True, job.worker is not None, job.numerator,
                                   job.denominator))

    def _get_status_unique(self, conn: Conn, p: pk.GetStatusUnique, now: float) -> None:
        for (_, unique), job in self.uniques.items():
            if unique == p.unique:
                conn.send(pk.StatusResUnique(p.unique, True, job.worker is not None,
                                             job.numerator, job.denominator, len(job.clients)))
                return
        conn.send(pk.StatusResUnique(p.unique, False, False, 0, 0, 0))

    # -- admin ----------------------------------------------------------------------------------

    def admin(self, conn: Conn, line: str, now: float) -> None:
        """Run one admin text command from ``conn`` and queue its reply."""
        words = line.split()
        lowered = [w.lower() for w in words]
        out = conn.out

        def listing(lines: list[bytes]) -> None:
            for item in lines:
                out.extend(item + b"\n")
            out.extend(b".\n")

        if lowered == ["workers"]:
            listing([  # functions newest first, as gearmand lists them
                b"%d %s %s :" % (c.fd, c.address.encode(), c.client_id)
                + b"".join(b" " + f for f in reversed(c.abilities))
                for c in self.conns.values()
            ])
        elif lowered == ["status"]:
            listing([
                b"%s\t%d\t%d\t%d" % (fn.name, sum(map(len, fn.queues.values())) + fn.future
                                      + fn.running, fn.running, fn.workers)
                for fn in self.functions.values()
            ])
        elif lowered == ["prioritystatus"]:
            listing([
                b"%s\t%d\t%d\t%d\t%d" % (fn.name, fn.queued(Priority.HIGH),
                                          fn.queued(Priority.NORMAL) + fn.future,
                                          fn.queued(Priority.LOW), fn.workers)
                for fn in self.functions.values()
            ])
        elif lowered == ["show", "jobs"]:
            # gearmand's last column is job_queued: set for a background job (it is kept in the
            # persistent queue, even when there is none), cleared by a cancel
            listing([
                b"%s\t%d\t%d\t%d" % (j.handle, j.retries, j.ignore,
                                      j.background and not j.cancelled)
                for j in self.jobs.values()
            ])
        elif lowered == ["show", "unique", "jobs"]:
            listing([j.unique for j in self.jobs.values()])
        elif lowered[:2] == ["cancel", "job"] and len(words) == 3:
            job = self.jobs.get(words[2].encode("utf-8", "surrogateescape"))
            if job is None:
                out.extend(b"ERR UNKNOWN_JOB\r\n")
            else:
                self._cancel(job)
                out.extend(b"OK\r\n")
        elif lowered[:2] == ["create", "function"] and len(words) == 3:
            created = self._admin_function(words[2], out)
            if created is not None:
                created.created = True
                out.extend(b"OK\r\n")
        elif lowered[:2] == ["drop", "function"] and len(words) == 3:
            name = words[2].encode("utf-8", "surrogateescape")
            dropped = self.functions.get(name)
            if dropped is None:
                out.extend(b"ERR function not found\r\n")
            elif dropped.workers:
                out.extend(b"ERR there are still connected workers or executing clients\r\n")
            elif dropped.running or dropped.future or dropped.has_queued():
                out.extend(b"ERR there are still queued or running jobs\r\n")
            else:
                del self.functions[name]
                out.extend(b"OK\r\n")
        elif lowered[:1] == ["maxqueue"] and len(words) >= 2:
            sizes = words[2:]
            try:
                numbers = [int(s) for s in sizes]
            except ValueError:
                out.extend(b"ERR INVALID_ARGUMENTS Invalid+maxqueue+size\r\n")
                return
            fn = self._admin_function(words[1], out)
            if fn is None:
                return
            if not numbers:
                fn.max_queue.clear()
            elif len(numbers) < 3:
                fn.max_queue = dict.fromkeys(_PRIORITIES, numbers[0])
            else:
                fn.max_queue = dict(zip(_PRIORITIES, numbers[:3], strict=True))
            self._release(fn)  # "maxqueue F" (no sizes) of an unused function
            out.extend(b"OK\r\n")
        elif lowered == ["maxqueue"]:
            out.extend(b"ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+"
                       b"command+maxqueue\r\n")
        elif lowered == ["getpid"]:
            out.extend(b"OK %d\n" % os.getpid())
        elif lowered == ["verbose"]:
            out.extend(b"OK WARNING\n")
        elif lowered == ["version"]:
            out.extend(b"OK 1.1.20-jobwire\n")
        elif self.allow_shutdown and lowered in (["shutdown"], ["shutdown", "graceful"]):
            out.extend(b"OK\n")
            self.shutdown = "graceful" if len(words) == 2 else "now"
        else:
            word = words[0] if words else ""
            out.extend(b"ERR UNKNOWN_COMMAND Unknown+server+command%s\r\n" % word.encode(
                "utf-8", "surrogateescape"))

    def _cancel(self, job: Job) -> None:
        """``cancel job``, as gearmand 1.1.20 does it: the job's clients get WORK_FAIL now; the
        job stays (``show jobs`` lists it ignored, ``status`` counts it, GET_STATUS knows it)
        until a worker would be given it, and a running one runs to its end. Unlike gearmand,
        its clients are let go (never told twice, and a later WORK_* goes to nobody) and a new
        submit of its unique id makes a new job."""
        job.ignore = job.cancelled = True
        for client in job.clients:
            client.waiting.discard(job.handle)
            client.send(pk.WorkFail(job.handle))
        job.clients = []

    def _admin_function(self, word: str, out: bytearray) -> Function | None:
        """The function an admin command names, made if new; ``None`` (and an ``ERR`` line
        queued) for a name a client may not send or one past ``max_functions``."""
        name = word.encode("utf-8", "surrogateescape")
        try:
            pk.check_name(name, "name")
        except LocalProtocolError:
            out.extend(b"ERR INVALID_FUNCTION_NAME Function+name+contains+a+control+byte\r\n")
            return None
        fn = self._new_function(name)
        if fn is None:
            out.extend(b"ERR MEMORY_ALLOCATION_FAILURE Too+many+functions\r\n")
        return fn


_HANDLERS: dict[type[Packet], Callable[[ServerState, Conn, Packet, float], None]] = {
    pk.EchoReq: ServerState._echo,  # type: ignore[dict-item]
    pk.OptionReq: ServerState._option,  # type: ignore[dict-item]
    pk.CanDo: ServerState._can_do,  # type: ignore[dict-item]
    pk.CanDoTimeout: ServerState._can_do_timeout,  # type: ignore[dict-item]
    pk.CantDo: ServerState._cant_do,  # type: ignore[dict-item]
    pk.ResetAbilities: ServerState._reset,  # type: ignore[dict-item]
    pk.SetClientId: ServerState._set_client_id,  # type: ignore[dict-item]
    pk.PreSleep: ServerState._pre_sleep,  # type: ignore[dict-item]
    pk.GrabJob: ServerState._grab,
    pk.GrabJobUniq: ServerState._grab,
    pk.GrabJobAll: ServerState._grab,
    pk.WorkData: ServerState._work_update,
    pk.WorkWarning: ServerState._work_update,
    pk.WorkStatus: ServerState._work_update,
    pk.WorkComplete: ServerState._work_done,
    pk.WorkFail: ServerState._work_done,
    pk.WorkException: ServerState._work_done,
    pk.GetStatus: ServerState._get_status,  # type: ignore[dict-item]
    pk.GetStatusUnique: ServerState._get_status_unique,  # type: ignore[dict-item]
    **{cls: ServerState._submit for cls in pk.SUBMITS if cls is not pk.SubmitJobSched},
}
