"""Workers: lease jobs in a loop, run a handler, report ``complete`` or ``fail``.

    async def handle(job: JobContext) -> bytes:
        return job.payload.upper()

    worker = AsyncWorker("127.0.0.1:9922", ["resize", "thumbnail"], concurrency=4)
    await worker.run(handle)    # until worker.stop(), SIGTERM or SIGINT

    Worker("127.0.0.1:9922", ["resize"], concurrency=4).run(handle_blocking)

Why it is shaped like this:

* **One connection per slot.** The server answers one connection's commands in order and a
  ``lease`` blocks its connection, so each of the ``concurrency`` slots owns a client and loops
  ``lease`` (with a wait-timeout, as the document recommends) -> handler -> ``complete``/``fail``.
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

import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from jobwire._backoff import Backoff
from jobwire._signals import log_signal, stop_on_signals, wants_signals, watch_signals
from jobwire._streams import SSLOption, tls_context
from jobwire._url import AddressLike, address_url, describe, resolve_address
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
from .client import Client
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


def _encode(result: Result) -> bytes:
    if result is None:
        return b""
    if isinstance(result, str):
        return result.encode("utf-8")
    if isinstance(result, (bytes, bytearray, memoryview)):
        return bytes(result)
    raise TypeError(f"a handler must return bytes, str or None, not {type(result).__name__}")


def _error_text(exc: BaseException) -> bytes:
    return f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:MAX_PAYLOAD]


def _outcome(result: Result) -> tuple[bool, bytes, str | None]:
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
        self._stopping = False
        self._running = False

    def __repr__(self) -> str:
        return describe(self, address_url(self.address, "workq"), f"names={list(self.names)!r}",
                        f"concurrency={self.concurrency}",
                        "tls" if self.ssl_context is not None else "")

    def _leased(self, job: LeasedJob, at: float) -> None:
        self.stats.leased += 1
        self.stats.in_flight += 1
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
        self.stats.in_flight -= 1
        logger.warning("job %s (%s): %s at the shutdown deadline; left to its TTR (%gs), after "
                       "which the server requeues it", job.job_id, job.name,
                       "handler still running" if started else "leased", job.ttr)
        if self.events is not None:
            self.events.emit("lost", time.time(), "workq", job.name, job.job_id, self.worker_id)

    def _reported(self, job: JobContext, success: bool, error: BaseException | None,
                  group: str | None, at: float) -> None:
        """Account for a finished report sent at ``at`` (``error``: why the server refused it
        or it could not be sent; ``group``: the failure's)."""
        self.stats.in_flight -= 1
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
        self._handler: AsyncHandler | None = None
        self._stop_event: anyio.Event | None = None
        #: The handlers running now (their cancel scopes), and whether the shutdown deadline
        #: has passed (a job leased after it is not started).
        self._handling: set[anyio.CancelScope] = set()
        self._gave_up = False

    def _new_client(self) -> AsyncClient:
        return AsyncClient(self.address, timeout=self.timeout, ssl=self.ssl_context,
                           server_hostname=self.server_hostname)

    def stop(self) -> None:
        """Stop leasing: no new lease is sent; each lease in flight runs out (within ``wait``)
        and a job it brings still runs; running handlers get ``shutdown_timeout`` seconds to
        finish and report; then :meth:`run` returns. No lease is cancelled, so no job is left
        leased to a closed connection (see the module docstring). Safe to call from the
        worker's event loop only (a handler, another task, a signal handler there); before
        :meth:`run`, it makes the next run return at once."""
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()

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
        self._handler = handler
        self._gave_up = False
        self._stop_event = anyio.Event()
        if self._stopping:
            self._stop_event.set()
        try:
            async with anyio.create_task_group() as outer:
                if wants_signals(handle_signals):
                    outer.start_soon(watch_signals, self.stop, logger)
                outer.start_soon(self._shutdown_deadline, self._stop_event)
                async with anyio.create_task_group() as slots:
                    for _ in range(self.concurrency):
                        slots.start_soon(self._slot)
                outer.cancel_scope.cancel()
        finally:
            self._running = False
            self._stopping = False
            self._stop_event = None

    async def _shutdown_deadline(self, stopped: anyio.Event) -> None:
        """Once stopping, give the running handlers ``shutdown_timeout`` seconds, then cancel
        them (their jobs are left to their TTRs)."""
        await stopped.wait()
        if self._handling:
            logger.info("stopping: waiting up to %.1f s for %d handler(s)",
                        self.shutdown_timeout, len(self._handling))
        await anyio.sleep(self.shutdown_timeout)
        self._gave_up = True
        for scope in list(self._handling):
            scope.cancel()

    async def _slot(self) -> None:
        backoff = self._backoff()
        client: AsyncClient | None = None
        try:
            while not self._stopping:
                try:
                    if client is None:
                        client = self._new_client()
                        await client.connect()
                    if self._stopping:  # stop() ran while this slot was connecting
                        break
                    leased = await client.lease(self.names, wait=self.wait)
                    backoff.reset()
                except TimedOut:
                    continue
                except OperationTimeout as exc:
                    # The server did not answer the lease in time. Keep the connection: a job
                    # the lease still brings is handed to this client's next lease (aio.py).
                    logger.info("worker lease unanswered (%r); leasing again", exc)
                    continue
                except _RETRYABLE as exc:
                    _log_connection_problem(exc)
                    self.stats.reconnects += 1
                    if client is not None:
                        await client.aclose()
                        client = None
                    assert self._stop_event is not None
                    with anyio.move_on_after(backoff.next_delay()):
                        await self._stop_event.wait()
                    continue
                self._leased(leased, time.time())
                client = await self._process(client, leased, backoff)
        finally:
            if client is not None:
                with anyio.CancelScope(shield=True):
                    await client.aclose()

    async def _process(self, client: AsyncClient, leased: LeasedJob,
                       backoff: Backoff) -> AsyncClient:
        assert self._handler is not None
        job = _context(leased)
        if self._gave_up:  # leased after the shutdown deadline: not started
            self._abandoned(job, False)
            return client
        success, data, group = True, b"", None
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await anyio.sleep(max(0.0, job.time_left()))
                self._overran(job)

            tg.start_soon(watch)
            with anyio.CancelScope() as scope:
                self._handling.add(scope)
                try:
                    success, data, group = _outcome(await self._handler(job))
                except Exception as exc:
                    success, data, group = _handler_failed(job, exc)
                finally:
                    self._handling.discard(scope)
            tg.cancel_scope.cancel()
        if scope.cancelled_caught:  # the shutdown deadline
            self._abandoned(job, True)
            return client
        return await self._report(client, job, success, data, group, backoff)

    async def _report(self, client: AsyncClient, job: JobContext, success: bool, data: bytes,
                      group: str | None, backoff: Backoff) -> AsyncClient:
        sent_at: float | None = None  # an earlier attempt that may have reached the server
        for attempt in range(_REPORT_ATTEMPTS):
            at = time.time()
            try:
                if success:
                    await client.complete(job.job_id, data)
                else:
                    await client.fail(job.job_id, data)
            except WorkqError as exc:
                if sent_at is not None and _already_reported(exc, job, success):
                    self._reported(job, success, None, group, sent_at)
                else:
                    self._reported(job, success, exc, group, at)
                return client
            except _RETRYABLE as exc:
                if sent_at is None and _may_have_arrived(exc):
                    sent_at = at
                if attempt == _REPORT_ATTEMPTS - 1:
                    self._reported(job, success, exc, group, at)
                    return client
                self.stats.reconnects += 1
                await client.aclose()
                await anyio.sleep(backoff.next_delay())
                client = self._new_client()
                continue
            self._reported(job, success, None, group, at)
            return client
        return client  # pragma: no cover - the loop always returns


class _Run:
    """One :meth:`Worker.run`'s shared state, guarded by the worker's lock; a thread given up
    at the shutdown deadline keeps its run's, so it never acts for a later run."""

    __slots__ = ("gave_up", "handling", "abandoned")

    def __init__(self) -> None:
        #: The shutdown deadline has passed: nothing more is started or reported.
        self.gave_up = False
        #: The job each slot's handler runs now, by slot number.
        self.handling: dict[int, JobContext] = {}
        #: Slots whose handler was still running at the deadline: given up.
        self.abandoned: set[int] = set()


class Worker(_Base):
    """Runs a handler on jobs leased from ``names``, in ``concurrency`` threads.

        worker = Worker("127.0.0.1:9922", ["resize"], concurrency=4)
        worker.run(handle)             # until worker.stop() (any thread), SIGTERM or SIGINT

    Args: as for :class:`AsyncWorker`, with ``wait`` defaulting to 1 s (how soon a thread
    notices :meth:`stop`). ``on_overrun`` runs in a timer thread; events are emitted from the
    slot threads. A thread cannot be cancelled: a handler still running at the shutdown
    deadline is given up (it runs on; its result is dropped) and its job left to its TTR.
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
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        #: The signal that stopped the run (logged by :meth:`_supervise`), if one did.
        self._signalled: int | None = None

    def _leased(self, job: LeasedJob, at: float) -> None:
        with self._lock:
            super()._leased(job, at)

    def _overran(self, job: JobContext) -> None:
        with self._lock:
            super()._overran(job)

    def _reported(self, job: JobContext, success: bool, error: BaseException | None,
                  group: str | None, at: float) -> None:
        with self._lock:
            super()._reported(job, success, error, group, at)

    def _new_client(self) -> Client:
        return Client(self.address, timeout=self.timeout, ssl=self.ssl_context,
                      server_hostname=self.server_hostname)

    def stop(self) -> None:
        """Stop leasing (from any thread); running handlers get ``shutdown_timeout`` seconds to
        finish and report, then :meth:`run` returns. Before :meth:`run`, it makes the next run
        return at once."""
        self._stopping = True
        self._stop_event.set()

    def _on_signal(self, signum: int) -> None:
        # A signal handler runs between two bytecodes of the main thread, which may hold any
        # lock: it only sets flags, which run() looks at within 0.1 s.
        self._signalled = signum
        self._stopping = True

    def run(self, handler: SyncHandler, *, handle_signals: bool | None = None) -> None:
        """Run ``handler`` (``handler(job: JobContext) -> bytes | str | None``) in
        ``concurrency`` threads until :meth:`stop`, or SIGTERM/SIGINT when ``handle_signals``
        (by default when called in the main thread: the previous handlers are put back when
        it returns); then return normally.

        Raises:
            RuntimeError: the worker is already running.
            ValueError: ``handle_signals=True`` outside the main thread.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        with contextlib.ExitStack() as signals:
            if wants_signals(handle_signals):
                signals.enter_context(stop_on_signals(self._on_signal))
            self._running = True
            run = _Run()
            try:
                threads = [threading.Thread(target=self._slot, args=(handler, run, i),
                                            name=f"workq-worker-{i}", daemon=True)
                           for i in range(self.concurrency)]
                for thread in threads:
                    thread.start()
                self._supervise(threads, run)
            finally:
                signals.close()  # the old handlers first: a late signal cannot stop a next run
                self._running = False
                self._stopping = False
                self._signalled = None
                self._stop_event.clear()

    def _supervise(self, threads: list[threading.Thread], run: _Run) -> None:
        """Wait for stop, then for the slots: leases in flight run out within ``wait``,
        handlers get ``shutdown_timeout``; those still running then are given up."""
        while not self._stopping and any(t.is_alive() for t in threads):
            self._stop_event.wait(0.1)
        if self._signalled is not None:
            log_signal(logger, self._signalled)
        self._stop_event.set()  # wakes slots waiting out a back-off
        with self._lock:
            running = len(run.handling)
        if running:
            logger.info("stopping: waiting up to %.1f s for %d handler(s)",
                        self.shutdown_timeout, running)
        deadline = time.monotonic() + self.shutdown_timeout
        while True:
            with self._lock:
                if not run.gave_up and time.monotonic() >= deadline:
                    run.gave_up = True
                    for slot, job in run.handling.items():
                        run.abandoned.add(slot)
                        self._abandoned(job, True)
                # Slots still leasing or reporting are waited for; given-up ones are not.
                waiting = [t for i, t in enumerate(threads)
                           if t.is_alive() and i not in run.abandoned]
            if not waiting:
                return
            waiting[0].join(0.1)

    def _slot(self, handler: SyncHandler, run: _Run, slot: int) -> None:
        backoff = self._backoff()
        client: Client | None = None
        try:
            while not self._stopping:
                try:
                    if client is None:
                        client = self._new_client()
                    leased = client.lease(self.names, wait=self.wait)
                    backoff.reset()
                except TimedOut:
                    continue
                except _RETRYABLE as exc:
                    _log_connection_problem(exc)
                    with self._lock:
                        self.stats.reconnects += 1
                    if client is not None:
                        client.close()
                        client = None
                    self._stop_event.wait(backoff.next_delay())
                    continue
                self._leased(leased, time.time())
                job = _context(leased)
                with self._lock:
                    if run.gave_up:  # leased after the shutdown deadline: not started
                        self._abandoned(job, False)
                        return
                    run.handling[slot] = job
                kept = self._process(client, job, handler, run, slot, backoff)
                if kept is None:  # given up at the shutdown deadline
                    return
                client = kept
        finally:
            if client is not None:
                client.close()

    def _process(self, client: Client, job: JobContext, handler: SyncHandler, run: _Run,
                 slot: int, backoff: Backoff) -> Client | None:
        """Run the handler on ``job`` and report; the client to go on with, or None when the
        job was given up at the shutdown deadline (the slot then ends)."""
        timer = threading.Timer(max(0.0, job.time_left()), self._overran, (job,))
        timer.daemon = True
        timer.start()
        try:
            success, data, group = _outcome(handler(job))
        except Exception as exc:
            success, data, group = _handler_failed(job, exc)
        finally:
            timer.cancel()
        timer.join()
        with self._lock:
            del run.handling[slot]
            if slot in run.abandoned:  # counted when given up; nothing is reported
                return None
        sent_at: float | None = None  # an earlier attempt that may have reached the server
        for attempt in range(_REPORT_ATTEMPTS):
            at = time.time()
            try:
                if success:
                    client.complete(job.job_id, data)
                else:
                    client.fail(job.job_id, data)
            except WorkqError as exc:
                if sent_at is not None and _already_reported(exc, job, success):
                    self._reported(job, success, None, group, sent_at)
                else:
                    self._reported(job, success, exc, group, at)
                return client
            except _RETRYABLE as exc:
                if sent_at is None and _may_have_arrived(exc):
                    sent_at = at
                if attempt == _REPORT_ATTEMPTS - 1:
                    self._reported(job, success, exc, group, at)
                    return client
                with self._lock:
                    self.stats.reconnects += 1
                time.sleep(backoff.next_delay())
                try:
                    client.close()
                    client = self._new_client()
                except _RETRYABLE:
                    continue
                continue
            self._reported(job, success, None, group, at)
            return client
        return client  # pragma: no cover - the loop always returns
