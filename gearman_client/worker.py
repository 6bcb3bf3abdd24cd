"""Gearman workers: :class:`AsyncWorker` (anyio) and :class:`Worker` (blocking, handlers in
threads). They only move bytes through jobwire's shared transport and the Sans-IO core.

    worker = Worker("gearman://127.0.0.1:4730", concurrency=8)
    worker.register("resize", resize)      # a handler per function: the protocol's own idea
    worker.run()                           # until worker.stop(), SIGTERM or SIGINT

How a worker runs, per server:

1. connect; send RESET_ABILITIES, SET_CLIENT_ID (if given) and CAN_DO / CAN_DO_TIMEOUT for every
   registered function (again after every reconnect, with a jittered back-off between attempts);
2. take a free slot of the concurrency limit *before* grabbing, so it never holds a job it cannot
   start (slots are shared by all servers);
3. GRAB_JOB_UNIQ (GRAB_JOB_ALL with ``grab_all=True``): a job runs in its own task; NO_JOB gives
   the slot back and sends PRE_SLEEP, then waits for NOOP, or at most ``regrab_interval``
   seconds (gearmand 1.1.x never wakes a worker for an epoch job that comes due);
4. a handler's return value is sent as WORK_COMPLETE. An exception is logged (with its
   traceback, at ERROR) and sent as WORK_WARNING (``"ValueError: text"``) followed by WORK_FAIL,
   as libgearman's own workers end a failed job with WORK_FAIL: that is the one ending every
   client finishes on. WORK_EXCEPTION is sent only for functions registered with
   ``exceptions=True``, because gearmand 1.1.20 hands it to the clients that did not ask for the
   ``exceptions`` option as a WORK_FAIL with a NUL after the handle, on which the ``gearman``
   tool waits forever and pygearman fails (docs/gearman.md).

Stopping (:meth:`AsyncWorker.stop`, or SIGTERM/SIGINT while ``run`` handles signals) is
graceful: no more grabs; the running jobs get ``shutdown_timeout`` seconds to finish and report;
then :meth:`AsyncWorker.run` returns. A job still running at that deadline cannot be handed back:
Gearman has no command for it. Its handler is cancelled (a thread is given up: Python cannot stop
it, and its result is dropped) and its connection closed, on which the server requeues the job
for another worker; it is counted in ``stats.abandoned``.

With ``events=`` (a :class:`jobwire.events.EventSink`) a worker records, per job: ``reserved``
when a JOB_ASSIGN arrives, then ``completed`` once WORK_COMPLETE is sent, ``failed`` once
WORK_FAIL or WORK_EXCEPTION is sent (group = the exception type), ``lost`` when the report
could not be sent (the server requeues the job), or ``released`` when it was abandoned at the
shutdown deadline (the server requeues it when the connection closes). Times are
``time.time()`` of the assignment and of the handler's end; queue = the function, job = the
handle, worker = the client id, else ``<hostname>-<pid>``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from jobwire._backoff import Backoff
from jobwire._pending import Pending
from jobwire._signals import wants_signals, watch_signals
from jobwire._streams import SSLOption, tls_context
from jobwire._threads import run_in_thread
from jobwire._transport import AsyncTransport
from jobwire._url import Address, address_url, describe
from jobwire.errors import JobwireError, LocalProtocolError, OperationTimeout, TLSError
from jobwire.events import EventSink, default_worker_id, failure_group

from . import _packets as pk
from ._api_async import ServersLike, _addresses, as_bytes
from ._session import GearmanSession

__all__ = ["AsyncJob", "AsyncWorker", "Job", "Worker", "WorkerStats"]

logger = logging.getLogger("gearman_client.worker")


@dataclass(eq=False)
class AsyncJob:
    """A job given to an async handler."""

    handle: bytes
    function: bytes
    unique: bytes
    data: bytes
    reducer: bytes | None
    _session: GearmanSession = field(repr=False)
    _transport: AsyncTransport = field(repr=False)

    async def _send(self, packet: pk.Packet) -> None:
        self._session.request(packet)
        await self._transport.flush()

    async def send_data(self, data: str | bytes) -> None:
        """WORK_DATA: partial data for the waiting clients."""
        await self._send(pk.WorkData(self.handle, as_bytes(data, "data")))

    async def send_warning(self, data: str | bytes) -> None:
        """WORK_WARNING: a warning for the waiting clients."""
        await self._send(pk.WorkWarning(self.handle, as_bytes(data, "data")))

    async def send_status(self, numerator: int, denominator: int) -> None:
        """WORK_STATUS: progress, also kept by the server for GET_STATUS."""
        await self._send(pk.WorkStatus(self.handle, numerator, denominator))


AsyncHandler = Callable[[AsyncJob], Awaitable["str | bytes | None"]]


@dataclass
class _Ability:
    handler: Callable[[AsyncJob], Awaitable[Any]]
    timeout: int | None  # milliseconds
    exceptions: bool = False  # a raising handler sends WORK_EXCEPTION


@dataclass
class WorkerStats:
    """Counters a worker keeps (read them any time; they only grow, but ``in_flight``)."""

    grabbed: int = 0  #: jobs assigned (JOB_ASSIGN, JOB_ASSIGN_UNIQ, JOB_ASSIGN_ALL)
    completed: int = 0  #: WORK_COMPLETE sent
    failed: int = 0  #: handlers that raised: WORK_FAIL or WORK_EXCEPTION sent
    lost: int = 0  #: reports that could not be sent (the server requeues the job)
    abandoned: int = 0  #: still running at the shutdown deadline: requeued by the server
    reconnects: int = 0  #: connections lost or refused, each followed by a back-off
    in_flight: int = 0  #: jobs whose handler runs right now


class _Connection:
    """One open connection to a server and the jobs running on it."""

    __slots__ = ("changed", "running", "session", "transport")

    def __init__(self, session: GearmanSession, transport: AsyncTransport) -> None:
        self.session = session
        self.transport = transport
        #: Jobs whose handlers run (or wait to start) on this connection.
        self.running = 0
        #: Set when a job ends, or on stop(): wakes the shutdown wait.
        self.changed = anyio.Event()


class AsyncWorker:
    """A worker for one or several servers.

        worker = AsyncWorker("gearman://127.0.0.1:4730", concurrency=64)
        worker.register("resize", handler)
        await worker.run()                  # until worker.stop(), SIGTERM or SIGINT

    Args:
        servers: one server or several, in any form :class:`~gearman_client.Client` takes
            (a list or comma-separated ``"host:port"`` string, ``("host", port)``, URLs).
        port: the port, when ``servers`` is one bare host.
        client_id: sent as SET_CLIENT_ID (shown by the ``workers`` admin command).
        concurrency: jobs run at once, over all servers.
        regrab_interval: while sleeping, grab again after this many seconds even without NOOP
            (``None``: only on NOOP); needed for epoch jobs on gearmand 1.1.x.
        grab_all: GRAB_JOB_ALL, so reduce jobs arrive with their reducer.
        timeout: seconds an answer (to a grab) may take before the connection is dropped.
        connect_timeout: seconds a connection may take to open, TLS handshake included
            (``None``: 10).
        shutdown_timeout: on stop, how long running jobs may finish before they are abandoned
            (their handlers cancelled, their connections closed: the server requeues them).
        events: where to record job lifecycle events (off by default; see the module
            docstring).
        ssl: TLS to every server: ``True`` (the default context: certificate and host name
            checked) or an ``ssl.SSLContext``, one for all servers; ``None``/``False``: plain.
            A refused certificate is logged (warning) and retried with back-off like any
            failed connection; there is never a plaintext fallback.
        server_hostname: the name the servers' certificates must carry (default: each
            server's host).

    Raises:
        LocalProtocolError: a bad concurrency or client id. ValueError: a negative
            ``shutdown_timeout``. TypeError, InvalidAddress: a bad server address, or ``ssl``
            is not a bool or an ``ssl.SSLContext`` (TypeError); an unknown keyword.
    """

    def __init__(
        self, servers: ServersLike = "127.0.0.1:4730", port: int | None = None, *,
        client_id: str | bytes | None = None, concurrency: int = 1,
        regrab_interval: float | None = None, grab_all: bool = False,
        timeout: float | None = 30.0, connect_timeout: float | None = 10.0,
        shutdown_timeout: float = 30.0, events: EventSink | None = None,
        ssl: SSLOption = None, server_hostname: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise LocalProtocolError("concurrency must be >= 1")
        if not shutdown_timeout >= 0:
            raise ValueError(f"shutdown_timeout must be >= 0, got {shutdown_timeout!r}")
        self._addresses: list[Address] = _addresses(servers, port)
        #: The TLS context of ``ssl=`` (``None``: plain TCP), and the name asked for.
        self.ssl_context = tls_context(ssl)
        self.server_hostname = server_hostname
        self.client_id = None if client_id is None else as_bytes(client_id, "client_id")
        if self.client_id is not None:
            pk.SetClientId(self.client_id).validate()
        self.concurrency = concurrency
        self.regrab_interval = regrab_interval
        self.grab_all = grab_all
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.shutdown_timeout = shutdown_timeout
        self.events = events
        self.stats = WorkerStats()
        #: The ``worker`` of its events: the client id, else ``<hostname>-<pid>``.
        self.worker_id = (default_worker_id() if self.client_id is None
                          else self.client_id.decode("utf-8", "replace"))
        self._abilities: dict[bytes, _Ability] = {}
        self._live: list[_Connection] = []
        self._stopping = False
        self._sleeps: set[anyio.CancelScope] = set()  # every wait stop() interrupts
        self._noop_waits: set[anyio.CancelScope] = set()  # waits for NOOP only
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return _describe(self, self)

    @property
    def sleeping(self) -> bool:
        """True while a connection waits for NOOP after PRE_SLEEP (its last grab got NO_JOB)."""
        return bool(self._noop_waits)

    def register(
        self, function: str | bytes, handler: Callable[[AsyncJob], Awaitable[Any]], *,
        timeout: float | None = None, exceptions: bool = False,
    ) -> None:
        """Run ``handler`` for jobs of ``function``.

        ``timeout`` (seconds; the server enforces at least 1) sends CAN_DO_TIMEOUT: a job running
        longer is taken back and requeued by the server, silently for the client, and this
        worker's late result is refused (JOB_NOT_FOUND). Takes effect on connections opened
        later, and on open ones with the next packet they send.

        A handler that raises ends its job with WORK_WARNING (``"ValueError: text"``) and
        WORK_FAIL: every client's wait ends, and jobwire clients raise ``JobFailed`` with the
        text in ``.warning``. With ``exceptions=True`` it sends WORK_EXCEPTION instead (jobwire
        clients raise ``JobException``); only for functions whose clients all ask for the
        ``exceptions`` option: gearmand 1.1.20 sends the others a WORK_FAIL with a NUL after the
        handle, which the ``gearman`` tool never finishes on (the bundled server sends them a
        clean WORK_FAIL).

        Raises:
            LocalProtocolError: an invalid function name or timeout.
        """
        name = as_bytes(function, "function")
        millis = None if timeout is None else math.ceil(timeout * 1000)
        if millis is not None and millis <= 0:
            raise LocalProtocolError(f"timeout must be positive, got {timeout!r}")
        packet: pk.Packet = pk.CanDo(name) if millis is None else pk.CanDoTimeout(name, millis)
        packet.validate()
        self._abilities[name] = _Ability(handler, millis, exceptions)
        for conn in self._live:
            conn.session.request(packet)
        self._wake_sleepers()

    def unregister(self, function: str | bytes) -> None:
        """Stop taking jobs of ``function`` (CANT_DO on every open connection)."""
        name = as_bytes(function, "function")
        self._abilities.pop(name, None)
        for conn in self._live:
            conn.session.request(pk.CantDo(name))
        self._wake_sleepers()

    def _wake_sleepers(self) -> None:
        # A sleeping connection sends nothing until woken: wake it so the CAN_DO / CANT_DO just
        # queued goes out now (followed by a grab, in order on the same connection).
        for scope in list(self._noop_waits):
            scope.cancel()

    def stop(self) -> None:
        """Stop grabbing; :meth:`run` returns once the running jobs have reported, or once
        ``shutdown_timeout`` has passed (the jobs still running are then abandoned to the
        server, which requeues them). Safe to call from a handler, another task, or a signal
        handler in the event loop's thread; before :meth:`run`, it makes the next run return
        at once."""
        self._stopping = True
        for scope in list(self._sleeps):
            scope.cancel()
        for conn in self._live:
            conn.changed.set()

    async def run(self, *, handle_signals: bool | None = None) -> None:
        """Serve every server until :meth:`stop`, or SIGTERM/SIGINT when ``handle_signals``
        (by default only in the main thread). Connection failures are retried with back-off;
        the worker can run again after.

        Raises:
            LocalProtocolError: nothing is registered.
        """
        if not self._abilities:
            raise LocalProtocolError("register at least one function before run()")
        self._limiter = anyio.CapacityLimiter(self.concurrency)
        try:
            async with anyio.create_task_group() as outer:
                if wants_signals(handle_signals):
                    outer.start_soon(watch_signals, self.stop, logger)
                async with anyio.create_task_group() as servers:
                    for address in self._addresses:
                        servers.start_soon(self._serve_server, address)
                outer.cancel_scope.cancel()
        finally:
            self._stopping = False

    async def _serve_server(self, address: Address) -> None:
        backoff = Backoff(base=0.05, cap=5.0)
        while not self._stopping:
            session = GearmanSession()
            transport = AsyncTransport(
                address, session, connect_timeout=self.connect_timeout,
                ssl=self.ssl_context, server_hostname=self.server_hostname,
            )
            try:
                await transport.connect()
                session.on_error = lambda error: logger.info(
                    "%s answered %s: %s", address, error.code.decode(errors="replace"),
                    error.text.decode(errors="replace"),
                )
                session.request(pk.ResetAbilities())
                if self.client_id is not None:
                    session.request(pk.SetClientId(self.client_id))
                for name, ability in self._abilities.items():
                    session.request(pk.CanDo(name) if ability.timeout is None
                                    else pk.CanDoTimeout(name, ability.timeout))
                await transport.flush()
                backoff.reset()
                conn = _Connection(session, transport)
                self._live.append(conn)
                try:
                    async with anyio.create_task_group() as jobs:
                        try:
                            await self._grab_loop(conn, jobs)
                        except JobwireError as exc:  # running jobs still finish (and fail to
                            logger.info("worker connection to %s: %s", address, exc)  # report)
                        await self._wait_jobs(conn, jobs)
                finally:
                    self._live.remove(conn)
            except TLSError as exc:  # a setup problem, not a passing outage: say it louder
                logger.warning("worker connection to %s: %s", address, exc)
            except JobwireError as exc:
                logger.info("worker connection to %s: %s", address, exc)
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.aclose()
            if not self._stopping:
                self.stats.reconnects += 1
                delay = backoff.next_delay()
                with anyio.CancelScope() as scope:
                    self._sleeps.add(scope)
                    try:
                        await anyio.sleep(delay)
                    finally:
                        self._sleeps.discard(scope)

    async def _grab_loop(self, conn: _Connection, jobs: anyio.abc.TaskGroup) -> None:
        limiter = self._limiter
        assert limiter is not None
        session, transport = conn.session, conn.transport
        grab = pk.GrabJobAll() if self.grab_all else pk.GrabJobUniq()
        while not self._stopping:
            token = object()
            acquired = False
            with anyio.CancelScope() as scope:  # stop() interrupts the wait for a free slot
                self._sleeps.add(scope)
                try:
                    if not self._stopping:
                        await limiter.acquire_on_behalf_of(token)
                        acquired = True
                finally:
                    self._sleeps.discard(scope)
            if not acquired:
                return
            try:
                if self._stopping:
                    limiter.release_on_behalf_of(token)
                    return
                pending = session.request(grab)
                await transport.flush()
                # stop() ends this wait too: a server may never answer (gear's ignores
                # GRAB_JOB_ALL). A job assigned to an abandoned grab is requeued by the server
                # when the connection closes.
                with anyio.CancelScope() as scope:
                    self._sleeps.add(scope)
                    try:
                        reply = await transport.wait(pending, self.timeout)
                    finally:
                        self._sleeps.discard(scope)
                if scope.cancelled_caught:
                    limiter.release_on_behalf_of(token)
                    return
            except BaseException:
                limiter.release_on_behalf_of(token)
                raise
            if isinstance(reply, pk.NoJob):
                limiter.release_on_behalf_of(token)
                await self._sleep(session, transport)
                continue
            self.stats.grabbed += 1
            self.stats.in_flight += 1
            conn.running += 1
            jobs.start_soon(self._run, conn, reply, token, time.time())

    async def _wait_jobs(self, conn: _Connection, jobs: anyio.abc.TaskGroup) -> None:
        """Wait for the jobs still running on ``conn``: for as long as they take, or, once the
        worker is stopping, up to ``shutdown_timeout``; then cancel what is left (closing the
        connection next makes the server requeue those jobs)."""
        deadline: float | None = None
        while conn.running:
            if self._stopping and deadline is None:
                deadline = anyio.current_time() + self.shutdown_timeout
                logger.info("stopping: waiting up to %.1f s for %d job(s)",
                            self.shutdown_timeout, conn.running)
            changed = conn.changed = anyio.Event()
            if deadline is None:
                await changed.wait()
                continue
            with anyio.move_on_after(deadline - anyio.current_time()):
                await changed.wait()
            if conn.running and anyio.current_time() >= deadline:
                logger.warning("stopping: %d job(s) still running after %.1f s; abandoning "
                               "them (the server requeues them when the connection closes)",
                               conn.running, self.shutdown_timeout)
                jobs.cancel_scope.cancel()
                return

    async def _sleep(self, session: GearmanSession, transport: AsyncTransport) -> None:
        woken: Pending[None] = Pending("NOOP")
        session.on_noop = lambda: None if woken.done else woken.resolve(None)
        session.request(pk.PreSleep())
        await transport.flush()
        limit = self.regrab_interval
        with anyio.CancelScope() as scope:
            self._sleeps.add(scope)
            self._noop_waits.add(scope)
            try:
                if self._stopping:
                    return
                await transport.wait(woken, limit if limit is not None else math.inf)
            except OperationTimeout:
                pass  # periodic re-grab
            finally:
                self._sleeps.discard(scope)
                self._noop_waits.discard(scope)
                session.on_noop = None

    async def _run(self, conn: _Connection, reply: pk.Packet, token: object,
                   assigned_at: float) -> None:
        assert self._limiter is not None
        session, transport = conn.session, conn.transport
        try:
            if isinstance(reply, pk.JobAssignAll):
                job = AsyncJob(reply.handle, reply.function, reply.unique, reply.data,
                               reply.reducer, session, transport)
            elif isinstance(reply, pk.JobAssignUniq):
                job = AsyncJob(reply.handle, reply.function, reply.unique, reply.data, None,
                               session, transport)
            else:
                assert isinstance(reply, pk.JobAssign)
                job = AsyncJob(reply.handle, reply.function, b"", reply.data, None, session,
                               transport)
            events = self.events
            if events is not None:
                events.emit("reserved", assigned_at, "gearman", _text(job.function),
                            _text(job.handle), self.worker_id)
            ability = self._abilities.get(job.function)
            group: str | None = None
            try:
                if ability is None:
                    raise LookupError(f"no handler for {job.function!r}")
                result = await ability.handler(job)
                packet: pk.Packet = pk.WorkComplete(
                    job.handle, b"" if result is None else as_bytes(result, "result")
                )
            except anyio.get_cancelled_exc_class():
                # The shutdown deadline: nothing can hand the job back but the connection's
                # close, which follows; the server requeues it then.
                self.stats.abandoned += 1
                logger.warning("job %s (%s): handler still running at the shutdown deadline; "
                               "abandoned to the server", _text(job.handle),
                               _text(job.function))
                if events is not None:
                    events.emit("released", time.time(), "gearman", _text(job.function),
                                _text(job.handle), self.worker_id)
                raise
            except Exception as exc:  # the job failed, not the worker
                logger.error("job %s (%s): handler failed", _text(job.handle),
                             _text(job.function), exc_info=exc)
                group = failure_group(exc)
                text = f"{type(exc).__name__}: {exc}".encode(errors="replace")
                if ability is not None and ability.exceptions:
                    packet = pk.WorkException(job.handle, text)
                else:  # WORK_FAIL ends every client's wait, whatever options it asked for
                    session.request(pk.WorkWarning(job.handle, text))
                    packet = pk.WorkFail(job.handle)
            ended_at = time.time()
            try:
                session.request(packet)
                await transport.flush()  # sends in a shielded scope: a deadline cannot cut it
            except JobwireError as exc:  # the server requeues the job
                logger.warning("could not report job %s: %s", _text(job.handle), exc)
                outcome = "lost"
                self.stats.lost += 1
            else:
                outcome = "completed" if group is None else "failed"
                if group is None:
                    self.stats.completed += 1
                else:
                    self.stats.failed += 1
            if events is not None:
                events.emit(outcome, ended_at, "gearman", _text(job.function),
                            _text(job.handle), self.worker_id,
                            group=group if outcome == "failed" else None)
        finally:
            self._limiter.release_on_behalf_of(token)
            self.stats.in_flight -= 1
            conn.running -= 1
            conn.changed.set()


def _text(name: bytes) -> str:
    """A function name or handle as event text (bytes that are not UTF-8 are replaced)."""
    return name.decode("utf-8", "replace")


def _describe(shown: object, worker: AsyncWorker) -> str:
    """The ``repr`` of both workers: ``<gearman_client.Worker gearman://10.0.0.1:4730,
    gearman://10.0.0.2:4730 functions=['resize'] client_id='w-1' concurrency=8>``."""
    servers = ",".join(address_url(a, "gearman") for a in worker._addresses)
    functions = [_text(name) for name in list(worker._abilities)]
    return describe(
        shown, servers, f"functions={functions!r}" if functions else "",
        "" if worker.client_id is None else f"client_id={_text(worker.client_id)!r}",
        f"concurrency={worker.concurrency}", "tls" if worker.ssl_context is not None else "",
    )


@dataclass(eq=False)
class Job:
    """A job given to a sync handler (runs in a worker thread). Its calls run on the worker's
    event loop, on the job's connection."""

    handle: bytes
    function: bytes
    unique: bytes
    data: bytes
    reducer: bytes | None
    _job: AsyncJob = field(repr=False)
    _token: anyio.lowlevel.EventLoopToken = field(repr=False)

    def send_data(self, data: str | bytes) -> None:
        """WORK_DATA."""
        anyio.from_thread.run(self._job.send_data, data, token=self._token)

    def send_warning(self, data: str | bytes) -> None:
        """WORK_WARNING."""
        anyio.from_thread.run(self._job.send_warning, data, token=self._token)

    def send_status(self, numerator: int, denominator: int) -> None:
        """WORK_STATUS."""
        anyio.from_thread.run(self._job.send_status, numerator, denominator,
                              token=self._token)


class Worker:
    """The blocking worker: handlers are plain functions run in threads (up to
    ``concurrency`` at once); the connections live on an event loop that :meth:`run` runs in
    the calling thread. Same arguments, stop and signals as :class:`AsyncWorker`.

        worker = Worker("gearman://127.0.0.1:4730", concurrency=8)
        worker.register("resize", resize)
        worker.run()            # until worker.stop() (any thread), SIGTERM or SIGINT

    A thread cannot be cancelled: one still running at the shutdown deadline is given up (its
    result is dropped; the server requeues its job when the connection closes) and runs on
    until it returns.

    Raises:
        The same as :class:`AsyncWorker`, at construction (a misspelt keyword is a TypeError).
    """

    def __init__(
        self, servers: ServersLike = "127.0.0.1:4730", port: int | None = None, *,
        client_id: str | bytes | None = None, concurrency: int = 1,
        regrab_interval: float | None = None, grab_all: bool = False,
        timeout: float | None = 30.0, connect_timeout: float | None = 10.0,
        shutdown_timeout: float = 30.0, events: EventSink | None = None,
        ssl: SSLOption = None, server_hostname: str | None = None,
    ) -> None:
        self._async = AsyncWorker(
            servers, port, client_id=client_id, concurrency=concurrency,
            regrab_interval=regrab_interval, grab_all=grab_all, timeout=timeout,
            connect_timeout=connect_timeout, shutdown_timeout=shutdown_timeout, events=events,
            ssl=ssl, server_hostname=server_hostname,
        )
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return _describe(self, self._async)

    @property
    def stats(self) -> WorkerStats:
        """The worker's counters."""
        return self._async.stats

    @property
    def sleeping(self) -> bool:
        """True while a connection waits for NOOP after PRE_SLEEP (its last grab got NO_JOB)."""
        return self._async.sleeping

    def register(self, function: str | bytes, handler: Callable[[Job], Any], *,
                 timeout: float | None = None, exceptions: bool = False) -> None:
        """Run ``handler(job)`` (in a thread) for jobs of ``function``; ``timeout`` and
        ``exceptions`` as for :meth:`AsyncWorker.register`. Callable while running, from any
        thread.

        Raises:
            LocalProtocolError: an invalid function name or timeout.
        """

        async def in_thread(job: AsyncJob) -> Any:
            token, limiter = self._token, self._limiter
            assert token is not None and limiter is not None
            sync_job = Job(job.handle, job.function, job.unique, job.data, job.reducer, job,
                           token)
            # At the shutdown deadline the thread is given up and runs on (nothing can stop
            # it); the run is over by then, so its slot no longer matters.
            return await run_in_thread(handler, sync_job, limiter=limiter,
                                       given_up=lambda threads: None)

        self._call(partial(self._async.register, function, in_thread, timeout=timeout,
                           exceptions=exceptions))

    def unregister(self, function: str | bytes) -> None:
        """Stop taking jobs of ``function`` (from any thread)."""
        self._call(partial(self._async.unregister, function))

    def _call(self, func: Callable[[], None]) -> None:
        """``func()`` in the event loop's thread while running, else here."""
        token = self._token
        if token is None:
            func()
            return
        try:
            anyio.from_thread.run_sync(func, token=token)
        except RuntimeError:  # called from the event loop's thread itself, or it just ended
            func()

    def run(self, *, handle_signals: bool | None = None) -> None:
        """Serve until :meth:`stop` (from any thread), or SIGTERM/SIGINT when
        ``handle_signals`` (by default when called in the main thread); then return
        normally.

        Raises:
            LocalProtocolError: nothing is registered.
        """
        anyio.run(self._main, handle_signals)

    async def _main(self, handle_signals: bool | None) -> None:
        self._limiter = anyio.CapacityLimiter(self._async.concurrency)
        self._token = anyio.lowlevel.current_token()
        try:
            await self._async.run(handle_signals=handle_signals)
        finally:
            self._token = None

    def stop(self) -> None:
        """Graceful stop (from any thread, a handler's included): no more grabs; running jobs
        finish within ``shutdown_timeout``; :meth:`run` returns. Before :meth:`run`, it makes
        the next run return at once."""
        self._call(self._async.stop)
