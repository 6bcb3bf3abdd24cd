"""Gearman workers: :class:`AsyncWorker` (anyio) and :class:`Worker` (blocking, handlers in
threads). They only move bytes through jobwire's shared transport and the Sans-IO core.

How a worker runs, per server:

1. connect; send RESET_ABILITIES, SET_CLIENT_ID (if given) and CAN_DO / CAN_DO_TIMEOUT for every
   registered function (again after every reconnect, with a jittered back-off between attempts);
2. take a free slot of the concurrency limit *before* grabbing, so it never holds a job it cannot
   start (slots are shared by all servers);
3. GRAB_JOB_UNIQ (GRAB_JOB_ALL with ``grab_all=True``): a job runs in its own task; NO_JOB gives
   the slot back and sends PRE_SLEEP, then waits for NOOP, or at most ``regrab_interval``
   seconds (gearmand 1.1.x never wakes a worker for an epoch job that comes due);
4. a handler's return value is sent as WORK_COMPLETE. An exception is sent as WORK_WARNING
   (``"ValueError: text"``) followed by WORK_FAIL, as libgearman's own workers end a failed job
   with WORK_FAIL: that is the one ending every client finishes on. WORK_EXCEPTION is sent only
   for functions registered with ``exceptions=True``, because gearmand 1.1.20 hands it to the
   clients that did not ask for the ``exceptions`` option as a WORK_FAIL with a NUL after the
   handle, on which the ``gearman`` tool waits forever and pygearman fails (docs/gearman.md).

:meth:`AsyncWorker.stop` is graceful: no more grabs, in-flight jobs finish and report, then
:meth:`AsyncWorker.work` returns.

With ``events=`` (a :class:`jobwire.events.EventSink`) a worker records, per job: ``reserved``
when a JOB_ASSIGN arrives, then ``completed`` once WORK_COMPLETE is sent, ``failed`` once
WORK_FAIL or WORK_EXCEPTION is sent (group = the exception type), or ``lost`` when the report
could not be sent (the server requeues the job). Times are ``time.time()`` of the assignment
and of the handler's end; queue = the function, job = the handle, worker = the client id, else
``<hostname>-<pid>``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from jobwire._backoff import Backoff
from jobwire._pending import Pending
from jobwire._streams import SSLOption, tls_context
from jobwire._transport import AsyncTransport
from jobwire._url import Address
from jobwire.errors import JobwireError, LocalProtocolError, OperationTimeout, TLSError
from jobwire.events import EventSink, default_worker_id, failure_group

from . import _packets as pk
from ._api_async import ServersLike, _addresses, as_bytes
from ._session import GearmanSession

__all__ = ["AsyncJob", "AsyncWorker", "Job", "Worker"]

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


class AsyncWorker:
    """A worker for one or several servers.

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
        events: where to record job lifecycle events (off by default; see the module
            docstring).
        ssl: TLS to every server: ``True`` (the default context: certificate and host name
            checked) or an ``ssl.SSLContext``, one for all servers; ``None``/``False``: plain.
            A refused certificate is logged (warning) and retried with back-off like any
            failed connection; there is never a plaintext fallback.
        server_hostname: the name the servers' certificates must carry (default: each
            server's host).

    Raises:
        LocalProtocolError: a bad concurrency or client id. TypeError, InvalidAddress: a bad
            server address, or ``ssl`` is not a bool or an ``ssl.SSLContext`` (TypeError).
    """

    def __init__(
        self, servers: ServersLike = "127.0.0.1:4730", port: int | None = None, *,
        client_id: str | bytes | None = None, concurrency: int = 1,
        regrab_interval: float | None = None, grab_all: bool = False,
        timeout: float | None = 30.0, connect_timeout: float | None = 10.0,
        events: EventSink | None = None,
        ssl: SSLOption = None, server_hostname: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise LocalProtocolError("concurrency must be >= 1")
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
        self.events = events
        #: The ``worker`` of its events: the client id, else ``<hostname>-<pid>``.
        self.worker_id = (default_worker_id() if self.client_id is None
                          else self.client_id.decode("utf-8", "replace"))
        self._abilities: dict[bytes, _Ability] = {}
        self._live: list[tuple[GearmanSession, AsyncTransport]] = []
        self._stopping = False
        self._sleeps: set[anyio.CancelScope] = set()  # every wait stop() interrupts
        self._noop_waits: set[anyio.CancelScope] = set()  # waits for NOOP only
        self._limiter: anyio.CapacityLimiter | None = None

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
        for session, _ in self._live:
            session.request(packet)
        self._wake_sleepers()

    def unregister(self, function: str | bytes) -> None:
        """Stop taking jobs of ``function`` (CANT_DO on every open connection)."""
        name = as_bytes(function, "function")
        self._abilities.pop(name, None)
        for session, _ in self._live:
            session.request(pk.CantDo(name))
        self._wake_sleepers()

    def _wake_sleepers(self) -> None:
        # A sleeping connection sends nothing until woken: wake it so the CAN_DO / CANT_DO just
        # queued goes out now (followed by a grab, in order on the same connection).
        for scope in list(self._noop_waits):
            scope.cancel()

    def stop(self) -> None:
        """Stop grabbing; :meth:`work` returns once the running jobs have reported."""
        self._stopping = True
        for scope in list(self._sleeps):
            scope.cancel()

    async def work(self) -> None:
        """Serve every server until :meth:`stop` (a stop() that came first makes it return at
        once). Connection failures are retried with back-off; the worker can work again after.

        Raises:
            LocalProtocolError: nothing is registered.
        """
        if not self._abilities:
            raise LocalProtocolError("register at least one function before work()")
        self._limiter = anyio.CapacityLimiter(self.concurrency)
        try:
            async with anyio.create_task_group() as tg:
                for address in self._addresses:
                    tg.start_soon(self._serve_server, address)
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
                self._live.append((session, transport))
                try:
                    async with anyio.create_task_group() as jobs:
                        try:
                            await self._grab_loop(session, transport, jobs)
                        except JobwireError as exc:  # running jobs still finish (and fail to
                            logger.info("worker connection to %s: %s", address, exc)  # report)
                finally:
                    self._live.remove((session, transport))
            except TLSError as exc:  # a setup problem, not a passing outage: say it louder
                logger.warning("worker connection to %s: %s", address, exc)
            except JobwireError as exc:
                logger.info("worker connection to %s: %s", address, exc)
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.aclose()
            if not self._stopping:
                delay = backoff.next_delay()
                with anyio.CancelScope() as scope:
                    self._sleeps.add(scope)
                    try:
                        await anyio.sleep(delay)
                    finally:
                        self._sleeps.discard(scope)

    async def _grab_loop(
        self, session: GearmanSession, transport: AsyncTransport, jobs: anyio.abc.TaskGroup
    ) -> None:
        limiter = self._limiter
        assert limiter is not None
        grab = pk.GrabJobAll() if self.grab_all else pk.GrabJobUniq()
        while not self._stopping:
            token = object()
            await limiter.acquire_on_behalf_of(token)
            try:
                if self._stopping:
                    limiter.release_on_behalf_of(token)
                    return
                pending = session.request(grab)
                await transport.flush()
                reply = await transport.wait(pending, self.timeout)
            except BaseException:
                limiter.release_on_behalf_of(token)
                raise
            if isinstance(reply, pk.NoJob):
                limiter.release_on_behalf_of(token)
                await self._sleep(session, transport)
                continue
            jobs.start_soon(self._run, session, transport, reply, token, time.time())

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

    async def _run(
        self, session: GearmanSession, transport: AsyncTransport, reply: pk.Packet, token: object,
        assigned_at: float,
    ) -> None:
        assert self._limiter is not None
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
            except Exception as exc:  # the job failed, not the worker
                logger.debug("job %r raised %r", job.handle, exc)
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
                await transport.flush()
            except JobwireError as exc:  # the server requeues the job
                logger.info("could not report job %r: %s", job.handle, exc)
                outcome = "lost"
            else:
                outcome = "completed" if group is None else "failed"
            if events is not None:
                events.emit(outcome, ended_at, "gearman", _text(job.function),
                            _text(job.handle), self.worker_id,
                            group=group if outcome == "failed" else None)
        finally:
            self._limiter.release_on_behalf_of(token)


def _text(name: bytes) -> str:
    """A function name or handle as event text (bytes that are not UTF-8 are replaced)."""
    return name.decode("utf-8", "replace")


@dataclass(eq=False)
class Job:
    """A job given to a sync handler (runs in a worker thread)."""

    handle: bytes
    function: bytes
    unique: bytes
    data: bytes
    reducer: bytes | None
    _job: AsyncJob = field(repr=False)
    _portal: anyio.from_thread.BlockingPortal = field(repr=False)

    def send_data(self, data: str | bytes) -> None:
        """WORK_DATA."""
        self._portal.call(self._job.send_data, data)

    def send_warning(self, data: str | bytes) -> None:
        """WORK_WARNING."""
        self._portal.call(self._job.send_warning, data)

    def send_status(self, numerator: int, denominator: int) -> None:
        """WORK_STATUS."""
        self._portal.call(self._job.send_status, numerator, denominator)


class Worker:
    """The blocking worker: same arguments as :class:`AsyncWorker`; handlers are plain
    functions run in threads (up to ``concurrency`` at once). :meth:`work` blocks until
    :meth:`stop` (callable from any thread, e.g. a handler or a signal handler's thread)."""

    def __init__(self, servers: ServersLike = "127.0.0.1:4730", port: int | None = None,
                 **kwargs: Any) -> None:
        self._async = AsyncWorker(servers, port, **kwargs)
        self._portal: anyio.from_thread.BlockingPortal | None = None

    def register(self, function: str | bytes, handler: Callable[[Job], Any], *,
                 timeout: float | None = None, exceptions: bool = False) -> None:
        """Run ``handler(job)`` (in a thread) for jobs of ``function``; ``timeout`` and
        ``exceptions`` as for :meth:`AsyncWorker.register`."""

        async def run(job: AsyncJob) -> Any:
            portal = self._portal
            assert portal is not None
            sync_job = Job(job.handle, job.function, job.unique, job.data, job.reducer, job,
                           portal)
            return await anyio.to_thread.run_sync(handler, sync_job, abandon_on_cancel=False)

        if self._portal is not None:  # working: change it from the event loop's own thread
            self._portal.call(partial(self._async.register, function, run, timeout=timeout,
                                      exceptions=exceptions))
        else:
            self._async.register(function, run, timeout=timeout, exceptions=exceptions)

    def unregister(self, function: str | bytes) -> None:
        """Stop taking jobs of ``function``."""
        if self._portal is not None:
            self._portal.call(self._async.unregister, function)
        else:
            self._async.unregister(function)

    def work(self) -> None:
        """Serve until :meth:`stop`."""
        with anyio.from_thread.start_blocking_portal() as portal:
            self._portal = portal
            try:
                portal.call(self._async.work)
            finally:
                self._portal = None

    def stop(self) -> None:
        """Graceful stop: no more grabs; running jobs finish; :meth:`work` returns."""
        portal = self._portal
        if portal is None:
            self._async.stop()  # not working yet: the next work() returns at once
        else:
            with contextlib.suppress(RuntimeError):  # the portal is already closing
                portal.call(self._async.stop)
