"""Gearman workers: :class:`AsyncWorker` (anyio) and :class:`Worker` (blocking, handlers in
threads). They only move bytes through jobwire's shared transport and the Sans-IO core.

    worker = Worker("gearman://127.0.0.1:4730", concurrency=8)
    worker.register("resize", resize)      # a handler per function: the protocol's own idea
    worker.run()                           # until worker.stop(), SIGTERM or SIGINT

How a worker runs, per server:

1. connect; send RESET_ABILITIES, SET_CLIENT_ID (if given) and CAN_DO / CAN_DO_TIMEOUT for every
   registered function (again after every reconnect, with a jittered back-off between attempts);
2. count a grab against the free slots *before* sending it, so it never holds a job it cannot
   start (the slots, shared by all servers, are :mod:`jobwire._worker`'s engine, as are the
   graceful stop and the signals; this module keeps one connection per server);
3. GRAB_JOB_UNIQ (GRAB_JOB_ALL with ``grab_all=True``): a job goes to an idle handler slot; NO_JOB
   gives the slot back and sends PRE_SLEEP, then waits for NOOP, or at most ``regrab_interval``
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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

from jobwire._backoff import Backoff
from jobwire._pending import Pending
from jobwire._signals import wants_signals
from jobwire._streams import SSLOption, tls_context
from jobwire._transport import AsyncTransport
from jobwire._url import Address, address_url, describe
from jobwire._worker import BlockingRunner, Engine, Source
from jobwire.errors import JobwireError, LocalProtocolError, OperationTimeout, TLSError
from jobwire.events import EventSink, default_worker_id, failure_group

from . import _packets as pk
from ._api_async import ServersLike, _addresses, as_bytes
from ._session import GearmanSession

__all__ = ["AsyncJob", "AsyncWorker", "Job", "Worker", "WorkerStats"]

logger = logging.getLogger("gearman_client.worker")


class _Link:
    """One open connection to a server and the jobs assigned on it."""

    __slots__ = ("running", "session", "transport")

    def __init__(self, session: GearmanSession, transport: AsyncTransport) -> None:
        self.session = session
        self.transport = transport
        #: Jobs assigned on this connection and not yet done (their reports go on it).
        self.running = 0


@dataclass(eq=False)
class AsyncJob:
    """A job given to an async handler."""

    handle: bytes
    function: bytes
    unique: bytes
    data: bytes
    reducer: bytes | None
    _link: _Link = field(repr=False)
    #: Its function was registered with ``exceptions=True`` (set when its handler starts).
    _exceptions: bool = field(default=False, repr=False, init=False)

    async def _send(self, packet: pk.Packet) -> None:
        link = self._link
        link.session.request(packet)
        await link.transport.flush()

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


def _as_is(job: AsyncJob) -> AsyncJob:
    return job


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
        self._source = _Grabbing(self)
        self._engine: Engine[AsyncJob] = self._new_engine()

    def __repr__(self) -> str:
        return _describe(self, self)

    @property
    def sleeping(self) -> bool:
        """True while a connection waits for NOOP after PRE_SLEEP (its last grab got NO_JOB)."""
        return bool(self._source.noop_waits)

    def _new_engine(self) -> Engine[AsyncJob]:
        """An engine for the next run (a blocking worker's runs each take a fresh one: handler
        threads given up in one run do not hold slots in the next)."""
        # Each server backs off on its own (_Grabbing): the engine reconnects nothing.
        self._engine = Engine(
            self._source, self.stats, logger, concurrency=self.concurrency,
            handler_timeout=None, shutdown_timeout=self.shutdown_timeout, backoff=Backoff(),
            reconnect_on=(),
        )
        self._source.engine = self._engine
        return self._engine

    def register(
        self, function: str | bytes, handler: AsyncHandler, *,
        timeout: float | None = None, exceptions: bool = False,
    ) -> None:
        """Run ``handler`` for jobs of ``function``; what it returns (``bytes``, ``str`` as
        UTF-8, or ``None`` for no data) is sent as WORK_COMPLETE.

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
        self._source.announce(packet)

    def unregister(self, function: str | bytes) -> None:
        """Stop taking jobs of ``function`` (CANT_DO on every open connection)."""
        name = as_bytes(function, "function")
        self._abilities.pop(name, None)
        self._source.announce(pk.CantDo(name))

    def stop(self) -> None:
        """Stop grabbing; :meth:`run` returns once the running jobs have reported, or once
        ``shutdown_timeout`` has passed (the jobs still running are then abandoned to the
        server, which requeues them). Safe to call from a handler, another task, or a signal
        handler in the event loop's thread; before :meth:`run`, it makes the next run return
        at once."""
        self._engine.stop()

    async def run(self, *, handle_signals: bool | None = None) -> None:
        """Serve every server until :meth:`stop`, or SIGTERM/SIGINT when ``handle_signals``
        (by default only in the main thread). Connection failures are retried with back-off;
        the worker can run again after.

        Raises:
            LocalProtocolError: nothing is registered.
        """
        if not self._abilities:
            raise LocalProtocolError("register at least one function before run()")
        engine = self._engine  # the settings as they are now (public attributes: reassignable)
        engine.concurrency, engine.shutdown_timeout = self.concurrency, self.shutdown_timeout
        try:
            await engine.run(self._dispatch, _as_is, signals=wants_signals(handle_signals))
        finally:
            engine.stopping = False

    def _dispatch(self, job: AsyncJob) -> Awaitable[Any]:
        """The engine's handler: the one registered for the job's function."""
        ability = self._abilities.get(job.function)
        if ability is None:
            raise LookupError(f"no handler for {job.function!r}")
        if ability.exceptions:
            job._exceptions = True
        return ability.handler(job)


class _Grabbing(Source[AsyncJob]):
    """How a Gearman worker fetches (one grab at a time per server, PRE_SLEEP until NOOP),
    settles (WORK_COMPLETE, or WORK_WARNING + WORK_FAIL / WORK_EXCEPTION, on the job's own
    connection) and hands back (it cannot: the connection's close requeues the job). Each
    server has a task of its own (:meth:`connection_tasks`) that connects, grabs and, once
    the connection fails, backs off and connects again."""

    def __init__(self, worker: AsyncWorker) -> None:
        self.w = worker
        self.engine: Engine[AsyncJob]
        #: The open connections (register and unregister reach them).
        self.live: list[_Link] = []
        #: Grabs sent and not answered yet, over all servers: they count against free slots.
        self.grabs_out = 0
        self.sleeps: set[anyio.CancelScope] = set()  # every wait stop() interrupts
        self.noop_waits: set[anyio.CancelScope] = set()  # waits for NOOP only
        #: Set when a slot may have come free (a job done, a grab answered NO_JOB) or on the
        #: stop, while ``waiting`` tasks wait for it (the servers' tasks share it).
        self.freed = anyio.Event()
        self.waiting = 0

    def announce(self, packet: pk.Packet) -> None:
        """Queue a CAN_DO / CANT_DO on every open connection, and wake the sleeping ones: a
        sleeping connection sends nothing until woken, so it goes out now (followed by a grab,
        in order on the same connection)."""
        for link in self.live:
            link.session.request(packet)
        for scope in list(self.noop_waits):
            scope.cancel()

    # -- connections ---------------------------------------------------------------------------

    def connection_tasks(self) -> list[Callable[[], Awaitable[None]]]:
        self.freed, self.waiting, self.grabs_out = anyio.Event(), 0, 0  # this run's loop
        return [partial(self._serve, address) for address in self.w._addresses]

    async def fetch(self) -> None:
        """The grabs run in the servers' tasks: wait for the stop, then end every wait it
        interrupts (a grab a server may never answer, a sleep until NOOP)."""
        await self.engine.pause(math.inf)
        self.freed.set()
        for scope in list(self.sleeps):
            scope.cancel()

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds, looking again whenever ``freed`` is set."""
        while not condition():
            if self.freed.is_set():
                self.freed = anyio.Event()
            freed = self.freed
            self.waiting += 1
            try:
                await freed.wait()
            finally:
                self.waiting -= 1

    async def _serve(self, address: Address) -> None:
        """One server, until the engine cancels it: connect, register and grab; after a
        failure, let the jobs assigned on the connection report on it (or fail to), close it,
        back off and connect again. Once stopping, the connection stays open until the engine
        is done with the handlers."""
        w, engine = self.w, self.engine
        backoff = Backoff(base=0.05, cap=5.0)
        while not engine.stopping:
            session = GearmanSession()
            link = _Link(session, AsyncTransport(
                address, session, connect_timeout=w.connect_timeout, ssl=w.ssl_context,
                server_hostname=w.server_hostname,
            ))
            try:
                try:
                    await self._open(link, address)
                    backoff.reset()
                    await self._grab(link)
                except TLSError as exc:  # a setup problem, not a passing outage: say it louder
                    logger.warning("worker connection to %s: %s", address, exc)
                except JobwireError as exc:
                    logger.info("worker connection to %s: %s", address, exc)
                await self._until(partial(self._settled, link))
                if engine.stopping:
                    await anyio.sleep_forever()
            finally:
                if link in self.live:
                    self.live.remove(link)
                with anyio.CancelScope(shield=True):
                    await link.transport.aclose()
            if not engine.stopping:
                w.stats.reconnects += 1
                await engine.pause(backoff.next_delay())

    def _settled(self, link: _Link) -> bool:
        """Whether ``link``'s jobs are all done (or the engine stops: it waits for them)."""
        return self.engine.stopping or not link.running

    async def _open(self, link: _Link, address: Address) -> None:
        session, transport = link.session, link.transport
        await transport.connect()
        session.on_error = lambda error: logger.info(
            "%s answered %s: %s", address, error.code.decode(errors="replace"),
            error.text.decode(errors="replace"),
        )
        session.request(pk.ResetAbilities())
        if self.w.client_id is not None:
            session.request(pk.SetClientId(self.w.client_id))
        for name, ability in self.w._abilities.items():
            session.request(pk.CanDo(name) if ability.timeout is None
                            else pk.CanDoTimeout(name, ability.timeout))
        await transport.flush()
        self.live.append(link)

    async def _grab(self, link: _Link) -> None:
        """Grab one job at a time while a slot is free, until stopping.

        Raises:
            JobwireError: the connection failed, or a grab went unanswered for ``timeout``.
        """
        w, engine = self.w, self.engine
        stats, events = w.stats, w.events
        session, transport = link.session, link.transport
        grab = pk.GrabJobAll() if w.grab_all else pk.GrabJobUniq()
        while True:
            if engine.free <= self.grabs_out and not engine.stopping:
                await self._until(lambda: engine.stopping or engine.free > self.grabs_out)
            if engine.stopping:
                return
            self.grabs_out += 1
            try:
                pending = session.request(grab)
                await transport.flush()
                # stop() ends this wait too: a server may never answer (gear's ignores
                # GRAB_JOB_ALL). A job assigned to an abandoned grab is requeued by the server
                # when the connection closes.
                with anyio.CancelScope() as scope:
                    self.sleeps.add(scope)
                    try:
                        reply = await transport.wait(pending, w.timeout)
                    finally:
                        self.sleeps.discard(scope)
            finally:
                self.grabs_out -= 1
            if scope.cancelled_caught:
                return
            if isinstance(reply, pk.NoJob):
                if self.waiting:  # the slot it counted against is free for another server
                    self.freed.set()
                await self._sleep(link)
                continue
            if isinstance(reply, pk.JobAssignUniq):
                job = AsyncJob(reply.handle, reply.function, reply.unique, reply.data, None,
                               link)
            elif isinstance(reply, pk.JobAssignAll):
                job = AsyncJob(reply.handle, reply.function, reply.unique, reply.data,
                               reply.reducer, link)
            else:
                assert isinstance(reply, pk.JobAssign)
                job = AsyncJob(reply.handle, reply.function, b"", reply.data, None, link)
            stats.grabbed += 1
            link.running += 1
            if events is not None:
                events.emit("reserved", time.time(), "gearman", _text(job.function),
                            _text(job.handle), w.worker_id)
            engine.offer(job)

    async def _sleep(self, link: _Link) -> None:
        session, transport = link.session, link.transport
        woken: Pending[None] = Pending("NOOP")
        session.on_noop = lambda: None if woken.done else woken.resolve(None)
        session.request(pk.PreSleep())
        await transport.flush()
        limit = self.w.regrab_interval
        with anyio.CancelScope() as scope:
            self.sleeps.add(scope)
            self.noop_waits.add(scope)
            try:
                if self.engine.stopping:
                    return
                await transport.wait(woken, limit if limit is not None else math.inf)
            except OperationTimeout:
                pass  # periodic re-grab
            finally:
                self.sleeps.discard(scope)
                self.noop_waits.discard(scope)
                session.on_noop = None

    # -- settling ------------------------------------------------------------------------------

    def settle(self, job: AsyncJob, result: object,
               error: Exception | None) -> Awaitable[None] | None:
        ended_at = time.time() if self.w.events is not None else 0.0
        group: str | None = None
        if error is None:
            if isinstance(result, bytes):
                packet: pk.Packet = pk.WorkComplete(job.handle, result)
            elif result is None:
                packet = pk.WorkComplete(job.handle, b"")
            elif isinstance(result, str):
                packet = pk.WorkComplete(job.handle, result.encode())
            else:  # the job failed, not the worker
                error = LocalProtocolError(
                    f"result must be str or bytes, got {type(result).__name__}")
        link = job._link
        try:
            if error is not None:
                logger.error("job %s (%s): handler failed", _text(job.handle),
                             _text(job.function), exc_info=error)
                group = failure_group(error)
                text = f"{type(error).__name__}: {error}".encode(errors="replace")
                if job._exceptions:
                    packet = pk.WorkException(job.handle, text)
                else:  # WORK_FAIL ends every client's wait, whatever options it asked for
                    link.session.request(pk.WorkWarning(job.handle, text))
                    packet = pk.WorkFail(job.handle)
            link.session.request(packet)
            if not link.transport.flush_nowait():
                return self._report(job, group, ended_at)
        except JobwireError as exc:  # the server requeues the job
            self._lost(job, exc, ended_at)
        else:
            self._reported(job, group, ended_at)
        return None

    async def _report(self, job: AsyncJob, group: str | None, ended_at: float) -> None:
        try:
            await job._link.transport.flush()  # sends in a shielded scope
        except JobwireError as exc:
            self._lost(job, exc, ended_at)
        else:
            self._reported(job, group, ended_at)

    def _reported(self, job: AsyncJob, group: str | None, ended_at: float) -> None:
        stats = self.w.stats
        if group is None:
            stats.completed += 1
        else:
            stats.failed += 1
        if self.w.events is not None:
            self._emit("completed" if group is None else "failed", job, ended_at, group)

    def _lost(self, job: AsyncJob, error: JobwireError, ended_at: float) -> None:
        logger.warning("could not report job %s: %s", _text(job.handle), error)
        self.w.stats.lost += 1
        if self.w.events is not None:
            self._emit("lost", job, ended_at)

    async def give_back(self, jobs: Sequence[AsyncJob], *, started: bool) -> None:
        """Gearman has no packet for it: the connection's close, which follows, makes the
        server requeue the jobs."""
        state = "still running" if started else "not started"
        for job in jobs:
            self.w.stats.abandoned += 1
            logger.warning("job %s (%s): handler %s at the shutdown deadline; abandoned to the "
                           "server", _text(job.handle), _text(job.function), state)
            if self.w.events is not None:
                self._emit("released", job, time.time())

    def forget(self, job: AsyncJob) -> None:
        job._link.running -= 1
        if self.waiting:  # a slot is free
            self.freed.set()

    def _emit(self, event: str, job: AsyncJob, at: float, group: str | None = None) -> None:
        events = self.w.events
        assert events is not None
        events.emit(event, at, "gearman", _text(job.function), _text(job.handle),
                    self.w.worker_id, group=group)


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
    #: The handler registered for its function.
    _handler: Callable[[Job], Any] = field(repr=False)

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


def _call_handler(job: Job) -> object:
    """What the worker's threads run: the job's handler."""
    return job._handler(job)


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
        #: While running: the event loop, and how a job's handler runs in a thread.
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._in_thread: Callable[[Job], Awaitable[object]] | None = None
        self._runner: BlockingRunner[Job, WorkerStats] = BlockingRunner(
            lambda: _BlockingRun(self), WorkerStats)

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

    def register(self, function: str | bytes, handler: Callable[[Job], str | bytes | None], *,
                 timeout: float | None = None, exceptions: bool = False) -> None:
        """Run ``handler(job)`` (in a thread) for jobs of ``function``; what it returns
        (``bytes``, ``str`` as UTF-8, or ``None`` for no data) is sent as WORK_COMPLETE.
        ``timeout`` and ``exceptions`` as for :meth:`AsyncWorker.register`. Callable while
        running, from any thread.

        Raises:
            LocalProtocolError: an invalid function name or timeout.
        """

        def in_thread(job: AsyncJob) -> Awaitable[str | bytes | None]:
            run, token = self._in_thread, self._token
            assert run is not None and token is not None
            # The thread's result is what ``handler`` returned.
            return cast("Awaitable[str | bytes | None]", run(
                Job(job.handle, job.function, job.unique, job.data, job.reducer, job, token,
                    handler)))

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
        self._runner.run(_call_handler, handle_signals)

    def stop(self) -> None:
        """Graceful stop (from any thread, a handler's included): no more grabs; running jobs
        finish within ``shutdown_timeout``; :meth:`run` returns. Before :meth:`run`, it makes
        the next run return at once."""
        self._runner.stop()


class _BlockingRun:
    """One run of a :class:`Worker` as the engine's :class:`BlockingRunner` drives it: the
    worker's one :class:`AsyncWorker`, its handlers in the runner's threads."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.stats = worker._async.stats
        self._engine = worker._async._new_engine()

    async def __aenter__(self) -> _BlockingRun:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def stop(self) -> None:
        self.worker._async.stop()

    async def run(self, handler: Callable[[Job], Awaitable[object]], *,
                  handle_signals: bool | None = None) -> None:
        worker = self.worker
        worker._in_thread, worker._token = handler, anyio.lowlevel.current_token()
        try:
            await worker._async.run(handle_signals=handle_signals)
        finally:
            worker._token = None
