"""Workers: lease jobs in a loop, run a handler, report ``complete`` or ``fail``.

    async def handle(job: JobContext) -> bytes:
        return job.payload.upper()

    worker = AsyncWorker("127.0.0.1:9922", ["resize", "thumbnail"], concurrency=4)
    await worker.run(handle)    # until worker.stop(), SIGTERM or SIGINT

    Worker("127.0.0.1:9922", ["resize"], concurrency=4).run(handle_blocking)

Why it is shaped like this:

* **One connection per slot.** The server answers one connection's commands in order and a
  ``lease`` blocks its connection, so each of the ``concurrency`` slots owns a client and loops
  ``lease`` (with a wait-timeout, as the document recommends) -> handler -> ``complete``/``fail``
  on it. The slots run on the worker engine (``jobwire._worker``): a lease loop per connection
  fetches, the engine's handler tasks run the handlers, one task watches every job's TTR.
* **Results.** A handler's return value (``bytes``, ``str`` as UTF-8, or ``None`` for empty)
  is sent with ``complete``; an exception is logged with its traceback (ERROR) and sent with
  ``fail`` as ``"<Type>: <message>"``, and so is a return value the server would refuse
  (another type, or over 1 MiB).
* **TTR.** Each job carries its TTR; when it runs out the handler is *told*: ``job.overrun``
  becomes true and ``on_overrun(job)`` is called (default: a warning in the log). The handler is
  not cancelled (the server has requeued the job, or failed it at max-attempts). When it finally
  returns, its result is still reported -- Workq accepts a late ``complete``/``fail`` unless the
  job was finished meanwhile or evicted -- and the outcome goes to ``on_late_result`` (default: a
  warning), never silently dropped. ``stats`` counts all of it.
* **Reconnects** with jittered exponential back-off (``jobwire.Backoff``); a report whose
  connection died, or whose reply did not come within ``timeout``, is sent again on a new one
  (Workq allows finishing a job on another connection). The first copy may have reached the
  server all the same (a server that stalled, then went on): a copy sent again that is refused
  with ``Duplicate result`` is counted as done (``completed``/``failed``), not as a report
  error. A first send refused that way is an error (someone else finished the job).
* **Graceful stop, no stranded job.** ``stop()`` issues no new lease and cancels none: a lease
  already sent cannot be withdrawn, and the server hands it the next job of one of its names
  even if the connection is closed (Workq 0.2.0 does not notice; it has no release either), so
  such a job would stay leased to nobody until its TTR. Each slot's lease runs out instead
  (within ``wait``), a job it brings runs and is reported like any other, running handlers
  get ``shutdown_timeout`` seconds to finish and report, and then ``run()`` returns normally
  (SIGTERM and SIGINT do the same while ``run`` handles signals). A handler still running at
  that deadline is given up (an async one cancelled; a thread, which cannot be, runs on and its
  result is dropped) and nothing is reported for its job: Workq has no release, and a ``fail``
  would end the job for good (the server does not retry failed jobs), so the job is left to its
  TTR, after which the server requeues it. Those jobs are counted in ``stats.abandoned``.
  Cancelling ``run()`` itself is the hard stop that does not wait, and may leave a job its
  cancelled leases take leased until its TTR.
* **Events.** With ``events=`` (a :class:`jobwire.events.EventSink`) each job is recorded as
  ``reserved`` (the lease's answer), then ``completed`` or ``failed`` (group = the exception
  type) once the server took the report, or ``lost`` when it refused it or it could not be sent,
  or when the job was given up at the shutdown deadline.
  Times are ``time.time()`` of the lease's answer and of the report that was taken; queue = the
  job name, worker = ``<hostname>-<pid>``.
"""

from __future__ import annotations

import logging
import math
import operator
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeVar

import anyio
from typing_extensions import Self

from jobwire._backoff import Backoff
from jobwire._signals import wants_signals
from jobwire._streams import SSLOption, tls_context
from jobwire._url import AddressLike, address_url, describe, resolve_address
from jobwire._worker import BlockingRunner, Engine, Source
from jobwire.errors import (
    ConnectFailed,
    JobwireConnectionError,
    OperationTimeout,
    RemoteProtocolError,
    TLSError,
)
from jobwire.events import EventSink, default_worker_id, failure_group

from ._commands import MAX_PAYLOAD, validate_name
from ._records import LeasedJob
from .aio import DEFAULT_PORT, AsyncClient
from .errors import ClientError, TimedOut, WorkqError

__all__ = ["AsyncWorker", "JobContext", "LateResult", "Worker", "WorkerStats"]

logger = logging.getLogger("workq_client.worker")

Result = bytes | str | None
AsyncHandler = Callable[["JobContext"], Awaitable[Result]]
SyncHandler = Callable[["JobContext"], Result]
T = TypeVar("T")
_RETRYABLE = (JobwireConnectionError, OperationTimeout, RemoteProtocolError)
_REPORT_ATTEMPTS = 5


@dataclass
class JobContext:
    """A leased job as a handler sees it."""

    job_id: str
    name: str
    payload: bytes
    #: Time-to-run in seconds, counted from the lease.
    ttr: float
    #: ``time.monotonic()`` when the TTR runs out.
    deadline: float
    #: Set once the TTR ran out: the server has requeued (or failed) the job.
    overrun: bool = False

    def time_left(self) -> float:
        """Seconds until the TTR runs out (negative once it has)."""
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class LateResult:
    """What became of a result reported after the job's TTR ran out."""

    job_id: str
    success: bool
    #: Seconds past the TTR when it was reported.
    late_by: float
    #: The server took it (``+OK``); otherwise ``error`` says why not.
    accepted: bool
    error: str = ""


@dataclass
class WorkerStats:
    """Counters of a worker (read them from any thread or task; they only grow, but
    ``in_flight``)."""

    leased: int = 0
    completed: int = 0  #: ``complete`` accepted
    failed: int = 0  #: ``fail`` accepted: handlers that raised or returned a refused result
    lost: int = 0  #: reports the server refused or that could not be sent (late ones too)
    abandoned: int = 0  #: handlers still running at the shutdown deadline: left to the TTR
    overruns: int = 0  #: jobs whose TTR ran out while their handler ran
    late_accepted: int = 0  #: reports after the TTR that the server took
    late_rejected: int = 0  #: reports after the TTR that the server refused (also ``lost``)
    reconnects: int = 0
    in_flight: int = 0  #: jobs leased and not yet reported or given up
    late_results: list[LateResult] = field(default_factory=list)


def _encode(result: object) -> bytes:
    if result is None:
        return b""
    if isinstance(result, str):
        return result.encode("utf-8")
    if isinstance(result, (bytes, bytearray, memoryview)):
        return bytes(result)
    raise TypeError(f"a handler must return bytes, str or None, not {type(result).__name__}")


def _error_text(exc: BaseException) -> bytes:
    return f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:MAX_PAYLOAD]


def _outcome(result: object) -> tuple[bool, bytes, str | None]:
    """What to report for a handler's return value: ``(success, data, failure group)``. A
    result the server would refuse (not bytes/str/None, or over 1 MiB) is reported as a
    failure saying so."""
    try:
        data = _encode(result)
    except TypeError as exc:
        return False, _error_text(exc), failure_group(exc)
    if len(data) > MAX_PAYLOAD:
        return (False, b"ResultTooLarge: %d bytes, the limit is %d" % (len(data), MAX_PAYLOAD),
                "ResultTooLarge")
    return True, data, None


def _log_connection_problem(exc: BaseException) -> None:
    # A refused certificate is a setup problem, not a passing outage: say it louder.
    level = logging.WARNING if isinstance(exc, TLSError) else logging.INFO
    logger.log(level, "worker connection problem (%r); reconnecting", exc)


def _may_have_arrived(exc: BaseException) -> bool:
    """Whether a report that failed with ``exc`` may still have reached the server (its reply
    was lost, or late): anything but a connection that never opened."""
    return not isinstance(exc, ConnectFailed)


def _already_reported(exc: WorkqError, job: JobContext, success: bool) -> bool:
    """Whether ``exc``, refusing a report sent again, says that an earlier copy of it reached
    the server: ``Duplicate result``, the job being finished already, is what the server
    answers the second ``complete``/``fail`` of a job (docs/workq.md)."""
    if isinstance(exc, ClientError) and exc.text == "Duplicate result":
        logger.info("job %s: the %s sent before the connection failed reached the server; "
                    "counted as done", job.job_id, "complete" if success else "fail")
        return True
    return False


def _call_hook(hook: Callable[[T], None], arg: T) -> None:
    try:
        hook(arg)
    except Exception:  # a faulty callback must not take the worker down
        logger.exception("worker callback %r failed", hook)


def _context(job: LeasedJob) -> JobContext:
    return JobContext(job.job_id, job.name, job.payload, job.ttr, time.monotonic() + job.ttr)


def _default_overrun(job: JobContext) -> None:
    logger.warning("job %s (%s) overran its TTR of %gs; still running", job.job_id, job.name,
                   job.ttr)


def _default_late(late: LateResult) -> None:
    if late.accepted:
        logger.warning("late result for job %s (%.3fs past TTR) was accepted", late.job_id,
                       late.late_by)
    else:
        logger.warning("late result for job %s (%.3fs past TTR) was refused: %s", late.job_id,
                       late.late_by, late.error)


class _Base:
    def __init__(
        self,
        address: AddressLike,
        names: str | Sequence[str],
        *,
        port: int | None,
        concurrency: int,
        wait: float,
        timeout: float | None,
        shutdown_timeout: float,
        backoff: Callable[[], Backoff] | None,
        on_overrun: Callable[[JobContext], None] | None,
        on_late_result: Callable[[LateResult], None] | None,
        events: EventSink | None,
        ssl: SSLOption,
        server_hostname: str | None,
    ) -> None:
        names = (names,) if isinstance(names, str) else tuple(names)
        if not names:
            raise ValueError("a worker needs at least one job name")
        for name in names:
            validate_name(name)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not shutdown_timeout >= 0:
            raise ValueError(f"shutdown_timeout must be >= 0, got {shutdown_timeout!r}")
        self.address = resolve_address(
            address, port, scheme="workq", default_port=DEFAULT_PORT, unix=False
        )
        #: The TLS context of ``ssl=`` (``None``: plain TCP) for every connection the worker
        #: opens, and the name the certificate must carry.
        self.ssl_context = tls_context(ssl)
        self.server_hostname = server_hostname
        self.names = names
        self.concurrency = concurrency
        self.wait = wait
        self.timeout = timeout
        self.shutdown_timeout = shutdown_timeout
        self._backoff = backoff or (lambda: Backoff(base=0.05, cap=5.0))
        self.on_overrun = on_overrun or _default_overrun
        self.on_late_result = on_late_result or _default_late
        self.stats = WorkerStats()
        self.events = events
        #: The ``worker`` of its events.
        self.worker_id = default_worker_id()
        self._running = False

    def __repr__(self) -> str:
        return describe(self, address_url(self.address, "workq"), f"names={list(self.names)!r}",
                        f"concurrency={self.concurrency}",
                        "tls" if self.ssl_context is not None else "")

    def _leased(self, job: LeasedJob, at: float) -> None:
        self.stats.leased += 1  # in_flight: the engine's count (offered until done)
        if self.events is not None:
            self.events.emit("reserved", at, "workq", job.name, job.job_id, self.worker_id)

    def _overran(self, job: JobContext) -> None:
        job.overrun = True
        self.stats.overruns += 1
        _call_hook(self.on_overrun, job)

    def _abandoned(self, job: JobContext, started: bool) -> None:
        """Give up ``job`` at the shutdown deadline: nothing is reported (Workq has no release;
        a ``fail`` would end the job for good), so the server requeues it when its TTR runs
        out."""
        self.stats.abandoned += 1
        logger.warning("job %s (%s): %s at the shutdown deadline; left to its TTR (%gs), after "
                       "which the server requeues it", job.job_id, job.name,
                       "handler still running" if started else "leased", job.ttr)
        if self.events is not None:
            self.events.emit("lost", time.time(), "workq", job.name, job.job_id, self.worker_id)

    def _reported(self, job: JobContext, success: bool, error: BaseException | None,
                  group: str | None, at: float) -> None:
        """Account for a finished report sent at ``at`` (``error``: why the server refused it
        or it could not be sent; ``group``: the failure's)."""
        if self.events is not None:
            if error is None:
                self.events.emit("completed" if success else "failed", at, "workq", job.name,
                                 job.job_id, self.worker_id, group=None if success else group)
            else:
                self.events.emit("lost", time.time(), "workq", job.name, job.job_id,
                                 self.worker_id)
        if error is None:
            if success:
                self.stats.completed += 1
            else:
                self.stats.failed += 1
        else:
            self.stats.lost += 1
            if not job.overrun:
                logger.warning("reporting job %s failed: %r", job.job_id, error)
        if job.overrun:
            late = LateResult(job.job_id, success, -job.time_left(), error is None,
                              "" if error is None else str(error))
            self.stats.late_results.append(late)
            if error is None:
                self.stats.late_accepted += 1
            else:
                self.stats.late_rejected += 1
            _call_hook(self.on_late_result, late)


def _handler_failed(job: JobContext, exc: Exception) -> tuple[bool, bytes, str]:
    """Log a handler's exception with its traceback; what to report for it."""
    logger.error("job %s (%s): handler failed", job.job_id, job.name, exc_info=exc)
    return False, _error_text(exc), failure_group(exc)


class AsyncWorker(_Base):
    """Runs an async handler on jobs leased from ``names`` (asyncio or trio).

        worker = AsyncWorker("127.0.0.1:9922", ["resize"], concurrency=8)
        await worker.run(handle)       # until worker.stop(), SIGTERM or SIGINT

    Args:
        address: the Workq server, in any form :class:`AsyncClient` takes (``"host:port"``,
            ``("host", port)``, ``"host"``, ``workq://host:port``).
        names: the job names to lease from (one ``lease`` names them all).
        concurrency: how many jobs run at once (one connection each).
        wait: the lease wait-timeout in seconds (leases are repeated while running); also how
            long :meth:`stop` may wait for the leases in flight.
        timeout: the clients' reply timeout beyond the waits.
        shutdown_timeout: on stop, how long running handlers may finish and report; a handler
            still running then is cancelled and its job left to its TTR (see the module
            docstring).
        backoff: makes the reconnect back-off (default 0.05 s doubling up to 5 s, jittered).
        on_overrun: called in the worker's task when a job's TTR runs out mid-handler.
        on_late_result: called with what became of a result reported after the TTR.
        events: where to record job lifecycle events (off by default; see the module
            docstring).
        ssl: TLS for every connection the worker opens (reconnects included): ``True`` (the
            default context: certificate and host name checked) or an ``ssl.SSLContext``;
            ``None``/``False``: plain. A refused certificate is retried with back-off like any
            failed connection; there is never a plaintext fallback.
        server_hostname: the name the server's certificate must carry (default: the host).

    Raises:
        ValueError, LocalProtocolError: no names, a bad name, concurrency or shutdown_timeout.
            TypeError, InvalidAddress: a bad address, or ``ssl`` is not a bool or an
            ``ssl.SSLContext``; an unknown keyword.
    """

    def __init__(
        self,
        address: AddressLike,
        names: str | Sequence[str],
        *,
        port: int | None = None,
        concurrency: int = 1,
        wait: float = 5.0,
        timeout: float | None = 10.0,
        shutdown_timeout: float = 30.0,
        backoff: Callable[[], Backoff] | None = None,
        on_overrun: Callable[[JobContext], None] | None = None,
        on_late_result: Callable[[LateResult], None] | None = None,
        events: EventSink | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        super().__init__(address, names, port=port, concurrency=concurrency, wait=wait,
                         timeout=timeout, shutdown_timeout=shutdown_timeout, backoff=backoff,
                         on_overrun=on_overrun, on_late_result=on_late_result, events=events,
                         ssl=ssl, server_hostname=server_hostname)
        self._engine = self._new_engine()

    def _new_engine(self) -> Engine[_Held]:
        source = _Leasing(self)
        engine = Engine(source, self.stats, logger, concurrency=self.concurrency,
                        handler_timeout=None, shutdown_timeout=self.shutdown_timeout,
                        backoff=Backoff(), reconnect_on=())
        source.engine = engine
        return engine

    def _new_client(self) -> AsyncClient:
        return AsyncClient(self.address, timeout=self.timeout, ssl=self.ssl_context,
                           server_hostname=self.server_hostname)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop leasing: no new lease is sent; each lease in flight runs out (within ``wait``)
        and a job it brings still runs; running handlers get ``shutdown_timeout`` seconds to
        finish and report; then :meth:`run` returns. No lease is cancelled, so no job is left
        leased to a closed connection (see the module docstring). Safe to call from the
        worker's event loop only (a handler, another task, a signal handler there); before
        :meth:`run`, it makes the next run return at once."""
        self._engine.stop()

    async def run(self, handler: AsyncHandler, *, handle_signals: bool | None = None) -> None:
        """Run ``handler`` (``async def handler(job: JobContext) -> bytes | str | None``) in
        ``concurrency`` slots until :meth:`stop`, or SIGTERM/SIGINT when ``handle_signals`` (by
        default only in the main thread); then return normally. Cancelling it is the hard
        stop (see the module docstring).

        Raises:
            RuntimeError: the worker is already running.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        self._running = True
        engine = self._engine  # the settings as they are now (public attributes: reassignable)
        engine.concurrency, engine.shutdown_timeout = self.concurrency, self.shutdown_timeout
        engine.stats = self.stats
        try:
            await engine.run(handler, _job_of, signals=wants_signals(handle_signals))
        finally:
            self._running = False
            self._engine = self._new_engine()  # the next run starts afresh


class _Held:
    """A leased job, held from the lease until its report (or until it is given up), and the
    lane (connection) that leased it."""

    __slots__ = ("job", "lane")

    def __init__(self, job: JobContext, lane: _Lane) -> None:
        self.job = job
        self.lane = lane


class _Lane:
    """One of ``concurrency`` lease loops: its connection, its back-off, and the event set
    when the job it leased last is reported or given up."""

    __slots__ = ("client", "backoff", "settled")

    def __init__(self, backoff: Backoff) -> None:
        self.client: AsyncClient | None = None
        self.backoff = backoff
        self.settled: anyio.Event | None = None


_job_of = operator.attrgetter("job")


class _Leasing(Source[_Held]):
    """How a Workq worker fetches (a lease loop per connection, each holding at most one job),
    settles (``complete``/``fail`` on the connection that leased the job, sent again on a new
    one when it fails), and watches its jobs' TTRs (one task for all of them)."""

    def __init__(self, worker: AsyncWorker) -> None:
        self.w = worker
        self.engine: Engine[_Held]
        #: Jobs whose handler runs (or is about to): their TTRs are watched.
        self.running: set[_Held] = set()
        #: The overrun watcher sleeps until ``until``, or until ``sooner`` is set.
        self.until = math.inf
        self.sooner: anyio.Event | None = None

    def connection_tasks(self) -> Sequence[Callable[[], Awaitable[None]]]:
        return (self._watch_overruns,)

    async def fetch(self) -> None:
        """Run the lease loops; they end once stopping, each after its lease in flight ran out
        and the job it brought (if any) was reported."""
        async with anyio.create_task_group() as tg:
            for _ in range(self.w.concurrency):
                tg.start_soon(self._lease_loop)

    async def _lease_loop(self) -> None:
        w, engine = self.w, self.engine
        lane = _Lane(w._backoff())
        try:
            while not engine.stopping:
                try:
                    if lane.client is None:
                        lane.client = w._new_client()
                        await lane.client.connect()
                    if engine.stopping:  # stop() ran while this lane was connecting
                        break
                    leased = await lane.client.lease(w.names, wait=w.wait)
                    lane.backoff.reset()
                except TimedOut:
                    continue
                except OperationTimeout as exc:
                    # The server did not answer the lease in time. Keep the connection: a job
                    # the lease still brings is handed to this client's next lease (aio.py).
                    logger.info("worker lease unanswered (%r); leasing again", exc)
                    continue
                except _RETRYABLE as exc:
                    _log_connection_problem(exc)
                    w.stats.reconnects += 1
                    if lane.client is not None:
                        await lane.client.aclose()
                        lane.client = None
                    await engine.pause(lane.backoff.next_delay())
                    continue
                w._leased(leased, time.time())
                held = _Held(_context(leased), lane)
                if engine.past_deadline:  # leased after the shutdown deadline: not started
                    w._abandoned(held.job, False)
                    continue
                lane.settled = settled = anyio.Event()
                self.running.add(held)
                if held.job.deadline < self.until and self.sooner is not None:
                    self.sooner.set()
                engine.offer(held)
                await settled.wait()
        finally:
            if lane.client is not None:
                with anyio.CancelScope(shield=True):
                    await lane.client.aclose()

    async def _watch_overruns(self) -> None:
        """Tell the handlers whose job's TTR ran out (``job.overrun``, ``on_overrun``)."""
        running = self.running
        while True:
            now = time.monotonic()
            soonest = math.inf
            for held in list(running):
                deadline = held.job.deadline
                if deadline <= now:
                    running.discard(held)
                    self.w._overran(held.job)
                elif deadline < soonest:
                    soonest = deadline
            self.until, self.sooner = soonest, anyio.Event()
            with anyio.move_on_after(soonest - now):
                await self.sooner.wait()

    def settle(self, job: _Held, result: object,
               error: Exception | None) -> Awaitable[None] | None:
        self.running.discard(job)
        if error is None:
            success, data, group = _outcome(result)
        else:
            success, data, group = _handler_failed(job.job, error)
        return self._report(job, success, data, group)

    async def _report(self, held: _Held, success: bool, data: bytes, group: str | None) -> None:
        """Send ``complete``/``fail``; on a lost connection or a late reply, again on a new one
        (up to ``_REPORT_ATTEMPTS``). Shielded: the shutdown deadline cancels handlers, not
        the reports of those that finished."""
        w, lane, job = self.w, held.lane, held.job
        sent_at: float | None = None  # an earlier attempt that may have reached the server
        with anyio.CancelScope(shield=True):
            for attempt in range(_REPORT_ATTEMPTS):
                client = lane.client
                if client is None:  # a report sent again: the lane lost its connection
                    client = lane.client = w._new_client()
                at = time.time()
                try:
                    if success:
                        await client.complete(job.job_id, data)
                    else:
                        await client.fail(job.job_id, data)
                except WorkqError as exc:
                    if sent_at is not None and _already_reported(exc, job, success):
                        w._reported(job, success, None, group, sent_at)
                    else:
                        w._reported(job, success, exc, group, at)
                    return
                except _RETRYABLE as exc:
                    if sent_at is None and _may_have_arrived(exc):
                        sent_at = at
                    if attempt == _REPORT_ATTEMPTS - 1:
                        w._reported(job, success, exc, group, at)
                        return
                    w.stats.reconnects += 1
                    await client.aclose()
                    lane.client = None
                    await anyio.sleep(lane.backoff.next_delay())
                    continue
                w._reported(job, success, None, group, at)
                return

    async def give_back(self, jobs: Sequence[_Held], *, started: bool) -> None:
        for held in jobs:
            self.running.discard(held)
            self.w._abandoned(held.job, started)

    def forget(self, job: _Held) -> None:
        settled = job.lane.settled
        if settled is not None:
            settled.set()


class Worker(_Base):
    """Runs a handler on jobs leased from ``names``, in ``concurrency`` threads.

        worker = Worker("127.0.0.1:9922", ["resize"], concurrency=4)
        worker.run(handle)             # until worker.stop() (any thread), SIGTERM or SIGINT

    It is :class:`AsyncWorker` on an event loop in the calling thread, each handler in a
    daemon thread (at most ``concurrency`` at once): leases, reports, ``on_overrun``,
    ``on_late_result`` and events run in the loop's thread.

    Args: as for :class:`AsyncWorker`, with ``wait`` defaulting to 1 s (how long :meth:`stop`
    may wait for the leases in flight). A thread cannot be cancelled: a handler still running
    at the shutdown deadline is given up (it runs on, and still fills its slot until it
    returns; its result is dropped) and its job left to its TTR.
    """

    def __init__(
        self,
        address: AddressLike,
        names: str | Sequence[str],
        *,
        port: int | None = None,
        concurrency: int = 1,
        wait: float = 1.0,
        timeout: float | None = 10.0,
        shutdown_timeout: float = 30.0,
        backoff: Callable[[], Backoff] | None = None,
        on_overrun: Callable[[JobContext], None] | None = None,
        on_late_result: Callable[[LateResult], None] | None = None,
        events: EventSink | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        super().__init__(address, names, port=port, concurrency=concurrency, wait=wait,
                         timeout=timeout, shutdown_timeout=shutdown_timeout, backoff=backoff,
                         on_overrun=on_overrun, on_late_result=on_late_result, events=events,
                         ssl=ssl, server_hostname=server_hostname)
        self._run_lock = threading.Lock()
        self._runner: BlockingRunner[JobContext, WorkerStats] = BlockingRunner(
            self._async_worker, lambda: self.stats
        )

    def _async_worker(self) -> AsyncWorker:
        """The async worker one :meth:`run` drives (every run counts into the same stats)."""
        worker = AsyncWorker(
            self.address, self.names, concurrency=self.concurrency, wait=self.wait,
            timeout=self.timeout, shutdown_timeout=self.shutdown_timeout,
            backoff=self._backoff, on_overrun=self.on_overrun,
            on_late_result=self.on_late_result, events=self.events, ssl=self.ssl_context,
            server_hostname=self.server_hostname,
        )
        worker.stats = self.stats
        return worker

    def stop(self) -> None:
        """Stop leasing (from any thread); running handlers get ``shutdown_timeout`` seconds to
        finish and report, then :meth:`run` returns. Before :meth:`run`, it makes the next run
        return at once."""
        self._runner.stop()

    def run(self, handler: SyncHandler, *, handle_signals: bool | None = None) -> None:
        """Run ``handler`` (``handler(job: JobContext) -> bytes | str | None``) in
        ``concurrency`` threads until :meth:`stop`, or SIGTERM/SIGINT when ``handle_signals``
        (by default when called in the main thread: the previous handlers are put back when
        it returns); then return normally.

        Raises:
            RuntimeError: the worker is already running.
            ValueError: ``handle_signals=True`` outside the main thread.
        """
        with self._run_lock:
            if self._running:
                raise RuntimeError("this worker is already running")
            self._running = True
        try:
            self._runner.run(handler, handle_signals)
        finally:
            self._running = False
            self._runner = BlockingRunner(self._async_worker, lambda: self.stats)
