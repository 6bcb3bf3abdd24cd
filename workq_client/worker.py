"""Workers: lease jobs in a loop, run a handler, report ``complete`` or ``fail``.

    async def handle(job: JobContext) -> bytes:
        return job.payload.upper()

    worker = AsyncWorker("127.0.0.1:9922", ["resize", "thumbnail"], handle, concurrency=4)
    await worker.run()          # until worker.stop()

Why it is shaped like this:

* **One connection per slot.** The server answers one connection's commands in order and a
  ``lease`` blocks its connection, so each of the ``concurrency`` slots owns a client and loops
  ``lease`` (with a wait-timeout, as the document recommends) -> handler -> ``complete``/``fail``.
* **Results.** A handler's return value (``bytes``, ``str`` as UTF-8, or ``None`` for empty)
  is sent with ``complete``; an exception is sent with ``fail`` as ``"<Type>: <message>"``, and
  so is a return value the server would refuse (another type, or over 1 MiB).
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
  finish and report, and then ``run()`` returns: a stop takes at most ``wait`` plus the
  handlers' time. Cancelling ``run()`` itself is the hard stop that does not wait, and may
  leave a job its cancelled leases take leased until its TTR.
* **Events.** With ``events=`` (a :class:`jobwire.events.EventSink`) each job is recorded as
  ``reserved`` (the lease's answer), then ``completed`` or ``failed`` (group = the exception
  type) once the server took the report, or ``lost`` when it refused it or it could not be sent.
  Times are ``time.time()`` of the lease's answer and of the report that was taken; queue = the
  job name, worker = ``<hostname>-<pid>``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from jobwire._backoff import Backoff
from jobwire._streams import SSLOption, tls_context
from jobwire._url import AddressLike, resolve_address
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
    """Counters of a worker (read them from any thread or task)."""

    leased: int = 0
    completed: int = 0
    failed: int = 0
    overruns: int = 0
    late_accepted: int = 0
    late_rejected: int = 0
    report_errors: int = 0
    reconnects: int = 0
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
        self._backoff = backoff or (lambda: Backoff(base=0.05, cap=5.0))
        self.on_overrun = on_overrun or _default_overrun
        self.on_late_result = on_late_result or _default_late
        self.stats = WorkerStats()
        self.events = events
        #: The ``worker`` of its events.
        self.worker_id = default_worker_id()
        self._stopping = False

    def _leased(self, job: LeasedJob, at: float) -> None:
        if self.events is not None:
            self.events.emit("reserved", at, "workq", job.name, job.job_id, self.worker_id)

    def _overran(self, job: JobContext) -> None:
        job.overrun = True
        self.stats.overruns += 1
        _call_hook(self.on_overrun, job)

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
        elif not job.overrun:
            self.stats.report_errors += 1
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


class AsyncWorker(_Base):
    """Runs an async handler on jobs leased from ``names`` (asyncio or trio).

    Args:
        address: the Workq server, in any form :class:`AsyncClient` takes (``"host:port"``,
            ``("host", port)``, ``"host"``, ``workq://host:port``).
        names: the job names to lease from (one ``lease`` names them all).
        handler: ``async def handler(job: JobContext) -> bytes | str | None``.
        concurrency: how many jobs run at once (one connection each).
        wait: the lease wait-timeout in seconds (leases are repeated while running); also how
            long :meth:`stop` may wait for the leases in flight.
        timeout: the clients' reply timeout beyond the waits.
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
        ValueError, LocalProtocolError: no names, a bad name or concurrency. TypeError,
            InvalidAddress: a bad address, or ``ssl`` is not a bool or an ``ssl.SSLContext``.
    """

    def __init__(
        self,
        address: AddressLike,
        names: str | Sequence[str],
        handler: Callable[[JobContext], Awaitable[Result]],
        *,
        port: int | None = None,
        concurrency: int = 1,
        wait: float = 5.0,
        timeout: float | None = 10.0,
        backoff: Callable[[], Backoff] | None = None,
        on_overrun: Callable[[JobContext], None] | None = None,
        on_late_result: Callable[[LateResult], None] | None = None,
        events: EventSink | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        super().__init__(address, names, port=port, concurrency=concurrency, wait=wait,
                         timeout=timeout, backoff=backoff, on_overrun=on_overrun,
                         on_late_result=on_late_result, events=events, ssl=ssl,
                         server_hostname=server_hostname)
        self.handler = handler

    def _new_client(self) -> AsyncClient:
        return AsyncClient(self.address, timeout=self.timeout, ssl=self.ssl_context,
                           server_hostname=self.server_hostname)

    def stop(self) -> None:
        """Stop leasing: no new lease is sent; each lease in flight runs out (within ``wait``)
        and a job it brings still runs; running handlers finish and report; then :meth:`run`
        returns. No lease is cancelled, so no job is left leased to a closed connection (see
        the module docstring). Safe to call from the worker's event loop only."""
        self._stopping = True

    async def run(self) -> None:
        """Run the slots until :meth:`stop` (or until cancelled)."""
        self._stopping = False
        async with anyio.create_task_group() as tg:
            for _ in range(self.concurrency):
                tg.start_soon(self._slot)

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
                    await anyio.sleep(backoff.next_delay())
                    continue
                self.stats.leased += 1
                self._leased(leased, time.time())
                client = await self._process(client, leased, backoff)
        finally:
            if client is not None:
                with anyio.CancelScope(shield=True):
                    await client.aclose()

    async def _process(self, client: AsyncClient, leased: LeasedJob,
                       backoff: Backoff) -> AsyncClient:
        job = _context(leased)
        success, data, group = True, b"", None
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await anyio.sleep(max(0.0, job.time_left()))
                self._overran(job)

            tg.start_soon(watch)
            try:
                success, data, group = _outcome(await self.handler(job))
            except Exception as exc:
                success, data, group = False, _error_text(exc), failure_group(exc)
            tg.cancel_scope.cancel()
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


class Worker(_Base):
    """Runs a handler on jobs leased from ``names``, in ``concurrency`` threads.

    Args: as for :class:`AsyncWorker`, with a plain ``handler(job) -> bytes | str | None`` and
    ``wait`` defaulting to 1 s (how soon a thread notices :meth:`stop`). ``on_overrun`` runs in a
    timer thread; events are emitted from the slot threads.
    """

    def __init__(
        self,
        address: AddressLike,
        names: str | Sequence[str],
        handler: Callable[[JobContext], Result],
        *,
        port: int | None = None,
        concurrency: int = 1,
        wait: float = 1.0,
        timeout: float | None = 10.0,
        backoff: Callable[[], Backoff] | None = None,
        on_overrun: Callable[[JobContext], None] | None = None,
        on_late_result: Callable[[LateResult], None] | None = None,
        events: EventSink | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        super().__init__(address, names, port=port, concurrency=concurrency, wait=wait,
                         timeout=timeout, backoff=backoff, on_overrun=on_overrun,
                         on_late_result=on_late_result, events=events, ssl=ssl,
                         server_hostname=server_hostname)
        self.handler = handler
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

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
        """Stop leasing (from any thread or a signal handler); running handlers finish and
        report, then :meth:`run` returns."""
        self._stopping = True
        self._stop_event.set()

    def run(self) -> None:
        """Run ``concurrency`` threads until :meth:`stop`."""
        self._stopping = False
        self._stop_event.clear()
        threads = [threading.Thread(target=self._slot, name=f"workq-worker-{i}", daemon=True)
                   for i in range(self.concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _slot(self) -> None:
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
                with self._lock:
                    self.stats.leased += 1
                self._leased(leased, time.time())
                client = self._process(client, leased, backoff)
        finally:
            if client is not None:
                client.close()

    def _process(self, client: Client, leased: LeasedJob, backoff: Backoff) -> Client:
        job = _context(leased)
        timer = threading.Timer(max(0.0, job.time_left()), self._overran, (job,))
        timer.daemon = True
        timer.start()
        try:
            success, data, group = _outcome(self.handler(job))
        except Exception as exc:
            success, data, group = False, _error_text(exc), failure_group(exc)
        finally:
            timer.cancel()
        timer.join()
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
