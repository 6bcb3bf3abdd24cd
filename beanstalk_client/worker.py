"""Worker pools over ONE beanstalk connection: pipelined reserves, bounded ack delay,
DEADLINE_SOON absorbed, auto-touch, retries with back-off, reconnect, graceful stop.

How reserves are pipelined, and why the ack delay stays bounded
--------------------------------------------------------------
beanstalkd answers one connection strictly in order: a ``delete`` queued behind a blocking
``reserve`` waits until that reserve returns. So the worker keeps **at most one blocking
reserve** in flight (``reserve-with-timeout T``). While the connection holds jobs, ``T`` is
``max_ack_delay`` (1 s by default; the wire counts whole seconds), so any delete, release, bury or
touch a finished handler queues is answered within about ``T``, whatever the TTR. Only when
nothing is held and no other reserve is out may the blocking reserve wait longer
(``idle_wait``), since no acknowledgement can queue behind it then.

Free capacity beyond that one reserve is filled with **non-blocking** reserves
(``reserve-with-timeout 0``), issued only once the blocking reserve has found work and stopped
as soon as one answers ``TIMED_OUT``: a full tube gets up to ``concurrency`` reserves in flight
on the one connection, an empty tube costs one round trip per ``T`` seconds.

``DEADLINE_SOON`` answering a reserve is not a failure of any job: the server is unblocking the
connection because a held job is within 1 s of its TTR. When acknowledgements are queued behind
the reserve, the session itself sends the reserve again once they are answered (``_session.py``);
the worker sees only a DEADLINE_SOON that nothing queued explains (a handler still running into
the safety margin), counts it, and reserves again after a short pause (the server would answer
DEADLINE_SOON again at once until the job is touched or finished). Auto-touch keeps slow but
alive handlers' jobs: after ``touch_after`` seconds it asks ``stats-job`` for the time left and
touches the job before it runs out, again every TTR; ``handler_timeout`` is a hard limit.

A handler that overruns its job's TTR while the worker reserves that job again (the server gave
it back; a free slot took it) holds a reservation that no longer exists: each reservation is held
on its own, the stale one is counted as lost when the job comes back, and its handler's outcome
is dropped (nothing is sent for it: a delete would remove the job from under the new handler). It
still counts against ``concurrency`` and ``stop`` waits for it.

A server that stops answering without closing (frozen, a partition that drops nothing) would
leave the worker waiting forever, since its commands are queued without deadlines of their own:
a watchdog looks at the oldest command still unanswered and, once it has waited its own wait
(a reserve's seconds) plus ``timeout`` since it became the oldest, fails the connection; ``run``
reconnects with back-off (a reconnect that times out is retried the same way). Outcomes queued
on the dropped connection count as lost, as for any lost connection.

With ``events=`` (a :class:`jobwire.events.EventSink`), the worker records ``reserved``,
``completed`` (the delete was accepted), ``failed`` (the handler raised; group = the exception
type, attempt = the job's reserve count), ``released``, ``buried`` and ``lost``, with
``time.time()`` of the reserve's answer or of the moment the outcome was queued. A worker that
watches several tubes asks ``stats-job`` for each job it reserves to learn its tube (one more
pipelined command per job). ``put_time`` is left null: beanstalkd's ``age`` is whole seconds
since the job was made, not since its current wait began (docs/events.md).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
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
from jobwire._url import Address, AddressLike, address_url, describe, resolve_address
from jobwire.errors import ConnectionLost, JobwireConnectionError, JobwireError, OperationTimeout
from jobwire.events import EventSink, default_worker_id, failure_group

from ._commands import (
    DEFAULT_PRIORITY,
    Bury,
    Command,
    Delete,
    Release,
    Reserve,
    ReserveWithTimeout,
    StatsJob,
    Touch,
    validate_tube,
)
from ._events import Ok, Reply, Reserved
from ._job import Job
from ._stats import parse_job_stats
from .aio import DEFAULT_PORT, AsyncClient
from .client import Client
from .errors import DeadlineSoon, TimedOut

__all__ = ["AsyncWorker", "RetryPolicy", "Worker", "WorkerStats"]

log = logging.getLogger("beanstalk_client.worker")

AsyncHandler = Callable[[Job], Awaitable[object]]
SyncHandler = Callable[[Job], object]


@dataclass
class WorkerStats:
    """Counters a worker keeps (read them any time; they only grow, but ``in_flight``)."""

    reserved: int = 0
    deleted: int = 0
    released: int = 0
    buried: int = 0
    touched: int = 0
    failed: int = 0  #: handlers that raised or hit handler_timeout
    lost: int = 0  #: jobs whose outcome could not be reported (connection gone, TTR ran out)
    deadline_soon: int = 0  #: DEADLINE_SOON replies absorbed
    reconnects: int = 0
    in_flight: int = 0  #: jobs held by handlers right now


@dataclass(frozen=True)
class RetryPolicy:
    """What happens to a job whose handler raised.

    The job is released with ``delay(reserves)`` seconds of delay (exponential: ``base_delay``,
    then twice that, and so on, up to ``max_delay``), or buried once it has been reserved
    ``bury_after`` times (the count comes from ``stats-job``). ``priority`` None keeps the job's
    own priority.

    Delays are **whole seconds**: beanstalkd's ``release`` takes its delay as a whole number of
    seconds, so ``base_delay`` and ``max_delay`` must be whole numbers (``2`` or ``2.0``). A
    fraction such as ``0.1`` is refused rather than rounded: rounding it up would silently wait
    ten times longer than asked, rounding it down would not wait at all.

    Raises:
        TypeError: a delay, ``bury_after`` or ``priority`` that is not a number (an int for the
            last two).
        ValueError: a delay that is not a whole number of seconds, or outside 0 .. 2**32 - 1;
            ``bury_after`` below 1; ``priority`` outside 0 .. 2**32 - 1.
    """

    base_delay: int = 1
    max_delay: int = 60
    bury_after: int | None = 5
    priority: int | None = None

    def __post_init__(self) -> None:
        for name in ("base_delay", "max_delay"):
            object.__setattr__(self, name, _whole_seconds(getattr(self, name), name))
        if self.bury_after is not None:
            if isinstance(self.bury_after, bool) or not isinstance(self.bury_after, int):
                raise TypeError(f"bury_after is an int or None, not {self.bury_after!r}")
            if self.bury_after < 1:
                raise ValueError(f"bury_after must be >= 1 (or None: never bury), not "
                                 f"{self.bury_after}")
        if self.priority is not None:
            if isinstance(self.priority, bool) or not isinstance(self.priority, int):
                raise TypeError(f"priority is an int or None, not {self.priority!r}")
            if not 0 <= self.priority <= _U32:
                raise ValueError(f"priority must be in 0 .. {_U32}, not {self.priority}")

    def delay(self, reserves: int) -> int:
        """Seconds to delay the release after the ``reserves``-th reserve failed."""
        # 2**32 already takes any base_delay >= 1 past every max_delay the wire allows.
        exponent: int = min(max(reserves - 1, 0), 32)
        return min(self.max_delay, self.base_delay * (1 << exponent))


_U32 = 2**32 - 1


def _whole_seconds(value: object, name: str) -> int:
    """``value`` as a whole number of seconds for the wire.

    Raises:
        TypeError: not a number. ValueError: a fraction, not finite, or outside 0 .. 2**32 - 1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a whole number of seconds, not {value!r}")
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{name} must be a whole number of seconds (beanstalkd's delays are "
                         f"whole seconds), not {value!r}")
    if not 0 <= value <= _U32:
        raise ValueError(f"{name} must be in 0 .. {_U32} seconds, not {value!r}")
    return int(value)


ClientTarget = AsyncClient | Client | AddressLike


def _client_factory(
    target: ClientTarget,
    port: int | None,
    timeout: float | None,
    ssl: SSLOption = None,
    server_hostname: str | None = None,
) -> tuple[Address, bool, Callable[[], AsyncClient]]:
    """Resolve the worker's server and its TLS now (a bad address or ``ssl`` raises here, not
    in ``run``): the address, whether it uses TLS, and a function that opens a fresh client to
    it. A client given as the target lends its address, timeout and TLS (context and host
    name)."""
    if isinstance(target, (AsyncClient, Client)):
        if port is not None:
            raise TypeError("port goes with a host, not with a client")
        if ssl is not None or server_hostname is not None:
            raise TypeError("ssl and server_hostname go with an address; a client brings its own")
        address, timeout = target.address, target.timeout
        context, hostname = target.ssl_context, target.server_hostname
    else:
        address = resolve_address(target, port, scheme="beanstalk", default_port=DEFAULT_PORT)
        context, hostname = tls_context(ssl), server_hostname

    def make() -> AsyncClient:
        return AsyncClient(address, timeout=timeout, ssl=context, server_hostname=hostname)

    return address, context is not None, make


def _describe(worker: object, address: Address, tubes: Sequence[str], concurrency: int,
              tls: bool) -> str:
    """The ``repr`` of both workers: ``<beanstalk_client.Worker beanstalk://127.0.0.1:11300
    tubes=['emails'] concurrency=8>``."""
    return describe(worker, address_url(address, "beanstalk"), f"tubes={list(tubes)!r}",
                    f"concurrency={concurrency}", "tls" if tls else "")


class AsyncWorker:
    """Run an async handler on jobs from ``tubes``, up to ``concurrency`` at once, on one
    connection.

        async with AsyncWorker("beanstalk://127.0.0.1:11300", tubes=["emails"],
                               concurrency=16) as worker:
            await worker.run(handle)      # until worker.stop(), SIGTERM or SIGINT

    Returning from ``handler(job)`` deletes the job; raising releases it with back-off or
    buries it (see :class:`RetryPolicy`), logging the exception.

    Inside, one task reads the connection and dispatches replies, one *pump* task issues
    reserves whenever there is free capacity, one task touches long-running jobs, and each
    job's handler runs in its own task. Acknowledgements are queued without waiting for their
    replies: the server handles a connection's commands in order, so a delete queued before the
    next reserve is always processed before it.

    Args:
        address: the server in any form :class:`AsyncClient` takes (URL, ``"host:port"``,
            ``("host", port)``, ``"host"``, unix path), or an ``AsyncClient`` (used first;
            reconnects open new ones to its address, like it).
        port: the port, when ``address`` is a bare host.
        tubes: tubes to watch (``default`` is ignored unless listed).
        concurrency: most jobs handled at once; also the most reserves in flight.
        max_ack_delay: bound, in seconds, on how long a finished job's delete (or release,
            bury, touch) may wait behind a blocking reserve. Whole seconds on the wire; below 1,
            reserves poll without blocking every ``max_ack_delay`` seconds.
        idle_wait: how long the one blocking reserve may wait when nothing is held.
        retry: what to do with jobs whose handler raised.
        auto_touch: touch jobs whose handlers run long, before their TTR runs out.
        touch_after: seconds a handler runs before auto-touch looks at its job.
        handler_timeout: hard limit per handler, in seconds; over it, the handler is cancelled
            and the job treated as failed.
        shutdown_timeout: on stop, how long in-flight handlers may finish before they are
            cancelled and their jobs released.
        backoff: reconnect delays (jittered exponential).
        timeout: the client's reply timeout for connections the worker opens, and how long a
            command may go unanswered beyond its own wait before the worker drops the
            connection and reconnects (``None``: never; a client's own timeout is used for
            it).
        events: where to record job lifecycle events (off by default; see the module
            docstring); the worker id in them is ``<hostname>-<pid>``.
        ssl: TLS for the connections the worker opens, as for :class:`AsyncClient`
            (``True``, an ``ssl.SSLContext``, or ``None``/``False`` for plain TCP); not with a
            client as ``address``, whose own TLS (context and host name) the worker keeps.
        server_hostname: the name the server's certificate must carry (default: the host).

    Raises:
        TypeError: ``ssl`` is not a bool or an ``ssl.SSLContext``; ``port``, ``ssl`` or
            ``server_hostname`` given with a client.
        ValueError, LocalProtocolError, InvalidAddress: a bad count, tube name or address
            (nothing is sent).
    """

    def __init__(
        self,
        address: ClientTarget,
        port: int | None = None,
        *,
        tubes: Sequence[str] = ("default",),
        concurrency: int = 1,
        max_ack_delay: float = 1.0,
        idle_wait: float = 5.0,
        retry: RetryPolicy | None = None,
        auto_touch: bool = True,
        touch_after: float = 0.5,
        handler_timeout: float | None = None,
        shutdown_timeout: float = 30.0,
        backoff: Backoff | None = None,
        timeout: float | None = 10.0,
        events: EventSink | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not tubes:
            raise ValueError("watch at least one tube")
        if max_ack_delay <= 0:
            raise ValueError("max_ack_delay must be > 0")
        self.tubes = [validate_tube(t) for t in tubes]
        self.concurrency = concurrency
        self.max_ack_delay = max_ack_delay
        self.idle_wait = idle_wait
        self.retry = retry or RetryPolicy()
        self.auto_touch = auto_touch
        self.touch_after = touch_after
        self.handler_timeout = handler_timeout
        self.shutdown_timeout = shutdown_timeout
        self.backoff = backoff or Backoff(base=0.1, cap=5.0)
        self.stats = WorkerStats()
        self.events = events
        self.worker_id = default_worker_id()
        #: The server, resolved (a client given as ``address`` lends its own).
        self.address: Address
        self.address, self._tls, self._make_client = _client_factory(
            address, port, timeout, ssl, server_hostname
        )
        self._first: AsyncClient | None = address if isinstance(address, AsyncClient) else None
        self._client: AsyncClient | None = None
        self._generation = 0
        self._stopping = False
        self._stop_event: anyio.Event | None = None
        self._wake = anyio.Event()
        self._handlers_tg: anyio.abc.TaskGroup | None = None
        # Reserved jobs waiting for a free handler slot, and the slots idle right now.
        self._ready: deque[_Held] = deque()
        self._idle: list[anyio.Event] = []
        self._handler: AsyncHandler | None = None
        # Every reservation a handler holds (or waits to start on), and the newest one of each
        # job id: the one auto-touch renews. A job reserved again while a handler still runs
        # on its old reservation has two entries in ``_holding`` (issue 10).
        self._holding: set[_Held] = set()
        self._held: dict[int, _Held] = {}
        self._reserves_out = 0
        self._blocking_out = False
        self._work_known = False
        self._next_blocking = 0.0
        self._acks_out = 0
        #: Handler threads still running for jobs already settled (the sync Worker gives a
        #: thread up over handler_timeout or at shutdown; it cannot be stopped): they too fill
        #: a slot until they return.
        self._abandoned = 0

    def __repr__(self) -> str:
        return _describe(self, self.address, self.tubes, self.concurrency, self._tls)

    async def __aenter__(self) -> AsyncWorker:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._client is not None:
            await self._client.aclose()

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop reserving; ``run`` then lets in-flight handlers finish (up to
        ``shutdown_timeout``), releases what is left and returns. Safe to call from a handler,
        another task, or a signal handler in the event loop's thread."""
        self._stopping = True
        self._wake.set()
        if self._stop_event is not None:
            self._stop_event.set()

    async def run(self, handler: AsyncHandler, *, handle_signals: bool | None = None) -> None:
        """Reserve and handle jobs until :meth:`stop` (or SIGTERM/SIGINT when
        ``handle_signals``; by default only in the main thread). Reconnects with back-off when
        the connection is lost, restoring the watch list."""
        self._handler = handler
        self._stop_event = anyio.Event()
        if self._stopping:
            self._stop_event.set()
        async with anyio.create_task_group() as outer:
            if wants_signals(handle_signals):
                outer.start_soon(watch_signals, self.stop, log)
            # Handler tasks live in their own task group, hosted by a task, so that shutdown can
            # cancel them while the connection's reader still runs to carry their releases.
            self._handlers_tg = await outer.start(self._host_handlers)
            for _ in range(self.concurrency):
                self._handlers_tg.start_soon(self._slot)
            while not self._stopping:
                try:
                    client = await self._connect()
                    await self._serve(client)
                except (JobwireConnectionError, OperationTimeout) as exc:
                    # OperationTimeout: a server that accepts but does not answer (stopped,
                    # overloaded) timed out the watch list; try again like a lost connection.
                    await self._pause_before_reconnect(exc)
            outer.cancel_scope.cancel()
        self._handlers_tg = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @staticmethod
    async def _host_handlers(*, task_status: anyio.abc.TaskStatus[anyio.abc.TaskGroup]) -> None:
        async with anyio.create_task_group() as tg:
            task_status.started(tg)
            await anyio.sleep_forever()

    # -- connection ----------------------------------------------------------------------------

    async def _connect(self) -> AsyncClient:
        client, self._first = (self._first or self._make_client()), None
        try:
            for tube in self.tubes:
                await client.watch(tube)
            if "default" not in self.tubes:
                await client.ignore("default")
        except BaseException:
            await client.aclose()
            raise
        old, self._client = self._client, client
        self._generation += 1
        self._reserves_out = 0
        self._blocking_out = False
        self._work_known = False
        if old is not None:
            await old.aclose()
        self.backoff.reset()
        return client

    async def _pause_before_reconnect(self, exc: JobwireError) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._stopping:
            return
        self.stats.reconnects += 1
        delay = self.backoff.next_delay()
        log.warning("connection lost (%s); reconnecting in %.2f s", exc, delay)
        assert self._stop_event is not None
        with anyio.move_on_after(delay):
            await self._stop_event.wait()

    async def _serve(self, client: AsyncClient) -> None:
        """Run the reader, the pump and the toucher on ``client`` until stop or failure.

        Raises:
            JobwireConnectionError: the connection was lost (``run`` reconnects).
        """
        lost: list[JobwireConnectionError] = []

        async def guarded(task: Callable[[], Awaitable[None]]) -> None:
            try:
                await task()
            except JobwireConnectionError as exc:
                lost.append(exc)
                tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(guarded, client._serve_replies)
            if client.timeout is not None:
                tg.start_soon(guarded, lambda: self._watchdog(client))
            if self.auto_touch:
                tg.start_soon(guarded, lambda: self._toucher(client))
            # Stopping: wait for the handlers (cancelling, and so releasing, what overruns
            # shutdown_timeout), then for every queued ack to be answered, so that closing
            # cannot drop a delete the server has not read yet.
            await guarded(lambda: self._pump(client))
            await guarded(self._wait_handlers)
            await guarded(self._wait_acks)
            tg.cancel_scope.cancel()
        if lost:
            raise lost[0]

    async def _watchdog(self, client: AsyncClient) -> None:
        """Give up on a server that stopped answering without closing (frozen, partitioned):
        the worker's commands are queued without a deadline of their own, so this task checks
        the oldest one still unanswered. Once it has waited longer than its own wait (the
        seconds of a ``reserve-with-timeout``; 0 for any other command) plus the client's
        ``timeout``, counted from when it became the oldest (the server answers in order), the
        connection is treated as lost: every waiting command fails and ``run`` reconnects
        with back-off.

        Raises:
            ConnectionLost: the oldest command went unanswered past its deadline.
        """
        assert client.timeout is not None
        limit = client.timeout
        session = client._session
        interval = min(0.25, max(limit / 4, 0.01))
        head: object = None
        since = 0.0
        while True:
            await anyio.sleep(interval)
            fifo = session._fifo
            if not fifo:
                head = None
                continue
            oldest = fifo[0]
            now = time.monotonic()
            if oldest is not head:  # became the oldest since the last look
                head, since = oldest, now
                continue
            command = oldest.command
            if isinstance(command, Reserve):
                continue  # waits for as long as it takes (the worker never sends one)
            wait = command.seconds if isinstance(command, ReserveWithTimeout) else 0
            if now - since > wait + limit:
                error = ConnectionLost(
                    f"no reply to {command.name} within {wait + limit:g} s: the server has "
                    "stopped answering"
                )
                session.fail(error)
                raise error

    # -- reserving -----------------------------------------------------------------------------

    async def _pump(self, client: AsyncClient) -> None:
        while not self._stopping:
            # A fresh event *before* looking at the state: whatever changes it from here on
            # (a reply, a finished handler) wakes this loop, even during the flush below.
            wake = self._wake = anyio.Event()
            free = self.concurrency - len(self._holding) - self._abandoned - self._reserves_out
            retry_in = 0.0
            if free > 0:
                if self._work_known:
                    for _ in range(free):
                        client._submit_nowait(ReserveWithTimeout(0), self._on_reserve)
                    self._reserves_out += free
                elif not self._blocking_out:
                    retry_in = self._next_blocking - anyio.current_time()
                    if retry_in <= 0:
                        self._blocking_out = True
                        self._reserves_out += 1
                        client._submit_nowait(
                            ReserveWithTimeout(self._blocking_wait()), self._on_blocking_reserve
                        )
            await client._flush()
            if retry_in > 0:
                with anyio.move_on_after(retry_in):
                    await wake.wait()
            else:
                await wake.wait()

    def _blocking_wait(self) -> int:
        held = bool(self._holding) or self._reserves_out > 1
        wait = self.max_ack_delay if held else max(self.idle_wait, self.max_ack_delay)
        return int(wait) if wait >= 1 else 0

    def _on_blocking_reserve(self, pending: Pending[Reserved]) -> None:
        self._blocking_out = False
        if isinstance(pending.error, TimedOut) and self.max_ack_delay < 1:
            self._next_blocking = anyio.current_time() + self.max_ack_delay
        self._on_reserve(pending)

    def _on_reserve(self, pending: Pending[Reserved]) -> None:
        self._reserves_out -= 1
        self._wake.set()
        reply, error = pending.reply, pending.error
        if reply is not None:
            self._work_known = True
            self.stats.reserved += 1
            held = _Held(Job(reply.job_id, reply.body), anyio.current_time(), self._generation)
            stopping = self._stopping or self._handlers_tg is None or self._client is None
            old = self._held.get(held.job.id)
            if old is not None and not stopping:
                # Our handler overran the TTR and the server gave the job back to us: that
                # reservation is gone; its handler's outcome will be dropped.
                old.stale = True
                self._lost(old, "the earlier handler's outcome",
                           "the TTR ran out and the job was reserved again", held.reserved_at)
            if self.events is not None:
                self._reserved_event(held)
            if stopping:
                # Reserved after stop began: give it straight back, priority kept.
                self._ack(Release, held)
                return
            self._held[held.job.id] = held
            self._holding.add(held)
            self.stats.in_flight += 1
            self._ready.append(held)
            if self._idle:
                self._idle.pop().set()
        elif isinstance(error, TimedOut):
            self._work_known = False
        elif isinstance(error, DeadlineSoon):
            # A held job is within 1 s of its TTR; the server would answer a new reserve the
            # same way at once, so pause reserving briefly instead of spinning.
            self.stats.deadline_soon += 1
            self._work_known = False
            self._next_blocking = anyio.current_time() + 0.2

    # -- handling ------------------------------------------------------------------------------

    async def _slot(self) -> None:
        """One of ``concurrency`` long-lived handler tasks: cheaper than a task per job."""
        ready = self._ready
        while True:
            if ready:
                await self._handle(ready.popleft())
            else:
                woken = anyio.Event()
                self._idle.append(woken)
                try:
                    await woken.wait()
                finally:
                    if not woken.is_set():
                        self._idle.remove(woken)

    async def _handle(self, held: _Held) -> None:
        assert self._handler is not None
        job = held.job
        try:
            if self.handler_timeout is None:
                await self._handler(job)
            else:
                with anyio.fail_after(self.handler_timeout):
                    await self._handler(job)
        except anyio.get_cancelled_exc_class():
            if not held.stale:
                log.warning("job %d: handler cancelled at shutdown; releasing it", job.id)
                self._ack(Release, held)
            self._done(held)
            raise
        except Exception as exc:  # the handler's failure is the job's outcome
            self.stats.failed += 1
            log.error("job %d: handler failed", job.id, exc_info=exc)
            try:
                if not held.stale:
                    await self._fail(held, exc)
            finally:
                self._done(held)
            return
        except BaseException:
            self._done(held)
            raise
        if not held.stale:
            self._ack(Delete, held)
        self._done(held)

    def _done(self, held: _Held) -> None:
        if held in self._holding:
            self._holding.discard(held)
            self.stats.in_flight -= 1
        if self._held.get(held.job.id) is held:
            del self._held[held.job.id]
        self._wake.set()

    async def _fail(self, held: _Held, error: Exception) -> None:
        client = self._client
        failed_at = time.time()
        reserves: int | None = None
        priority = self.retry.priority
        if client is not None and held.generation == self._generation:
            try:
                stats = await client.stats_job(held.job)
                reserves = stats["reserves"]
                priority = stats["pri"] if priority is None else priority
            except JobwireError:
                pass
        if self.events is not None:
            self._emit("failed", held, failed_at, group=failure_group(error), attempt=reserves)
        reserves = reserves or 1
        if self.retry.bury_after is not None and reserves >= self.retry.bury_after:
            self._ack(Bury, held, priority=priority)
        else:
            self._ack(Release, held, priority=priority, delay=self.retry.delay(reserves))

    def _ack(
        self,
        kind: type[Delete | Release | Bury | Touch],
        held: _Held,
        *,
        priority: int | None = None,
        delay: int = 0,
    ) -> None:
        """Queue a job's outcome without waiting; the reply updates the counters, and one
        that says the server no longer holds the job for us is logged and counted as lost."""
        client = self._client
        job, generation = held.job, held.generation
        if client is None or client._session.broken is not None:
            self._lost(held, kind.name, "no connection")
            return
        if kind is not Delete and generation != self._generation:
            # Only this connection could release, bury or touch it; the server has put the
            # job back (TTR or connection close). A delete is still worth trying.
            self._lost(held, kind.name, "reserved on a lost connection")
            return
        queued_at = time.time()
        if kind is Delete:
            command: Command[Reply] = Delete(job.id)
        elif kind is Touch:
            command = Touch(job.id)
        elif kind is Bury:
            command = Bury(job.id, DEFAULT_PRIORITY if priority is None else priority)
        elif priority is None:  # release of a cancelled handler's job: keep its priority
            self._acks_out += 1

            def released(ok: bool) -> None:
                self._acks_out -= 1
                self._wake.set()
                if ok:
                    self.stats.released += 1
                    if self.events is not None:
                        self._emit("released", held, queued_at)
                else:
                    self._lost(held, "release", "server refused")

            client._session.give_back(job.id, released)
            self._wake.set()
            return
        else:
            command = Release(job.id, priority, delay)
        self._acks_out += 1

        def on_reply(pending: Pending[Reply]) -> None:
            self._acks_out -= 1
            self._wake.set()
            if pending.error is None:
                counter = _COUNTERS[kind]
                setattr(self.stats, counter, getattr(self.stats, counter) + 1)
                if self.events is not None and kind is not Touch:
                    self._emit(_EVENTS[kind], held, queued_at)
            else:
                self._lost(held, kind.name, str(pending.error))

        client._submit_nowait(command, on_reply)
        self._wake.set()  # the pump flushes it

    def _lost(self, held: _Held, action: str, why: str, at: float | None = None) -> None:
        self.stats.lost += 1
        if self.events is not None:
            self._emit("lost", held, time.time() if at is None else at)
        where = "a lost connection" if held.generation != self._generation else "this connection"
        log.warning(
            "job %d: %s not done (%s); it was reserved on %s and the server has released it "
            "or will when its TTR runs out", held.job.id, action, why, where,
        )

    # -- events --------------------------------------------------------------------------------

    def _reserved_event(self, held: _Held) -> None:
        """Record ``reserved`` for a job just reserved: at once when one tube is watched,
        else once ``stats-job`` has named its tube (queued now, ahead of any outcome)."""
        if len(self.tubes) == 1:
            held.tube = self.tubes[0]
            self._emit("reserved", held, held.reserved_at)
            return
        client = self._client
        if client is None:  # stopping: the job goes straight back; its tube stays unknown
            self._emit("reserved", held, held.reserved_at)
            return

        def named(pending: Pending[Ok]) -> None:
            if pending.reply is not None:
                held.tube = str(parse_job_stats(pending.reply.data)["tube"])
            self._emit("reserved", held, held.reserved_at)

        client._submit_nowait(StatsJob(held.job.id), named)

    def _emit(self, event: str, held: _Held, at: float, *, group: str | None = None,
              attempt: int | None = None) -> None:
        assert self.events is not None
        self.events.emit(event, at, "beanstalk", held.tube or "", str(held.job.id),
                         self.worker_id, None, group, attempt)

    # -- auto-touch ----------------------------------------------------------------------------

    async def _toucher(self, client: AsyncClient) -> None:
        """Touch held jobs before their TTR runs out. One task for all jobs; a handler that
        finishes within ``touch_after`` costs nothing here."""
        interval = min(self.touch_after, 0.25)
        while True:
            await anyio.sleep(interval)
            now = anyio.current_time()
            for job_id, held in list(self._held.items()):
                if held.generation != self._generation or now - held.started < self.touch_after:
                    continue
                if held.ttr is None and held.due is None:
                    held.due = math.inf  # asked; the answer sets the real due time
                    client._submit_nowait(StatsJob(job_id), self._touch_plan(held))
                elif held.due is not None and now >= held.due:
                    held.due = math.inf
                    client._submit_nowait(Touch(job_id), self._touched(job_id, held))
            await client._flush()

    def _touch_plan(self, held: _Held) -> Callable[[Pending[Ok]], None]:
        def plan(pending: Pending[Ok]) -> None:
            if pending.reply is not None:
                stats = parse_job_stats(pending.reply.data)
                held.schedule(stats["ttr"], stats["time-left"], self.max_ack_delay)

        return plan

    def _touched(self, job_id: int, held: _Held) -> Callable[[Pending[Reply]], None]:
        def touched(pending: Pending[Reply]) -> None:
            if pending.error is None and held.ttr is not None:
                self.stats.touched += 1
                held.schedule(held.ttr, held.ttr, self.max_ack_delay)
            else:
                log.warning("job %d: touch failed: %s", job_id, pending.error)

        return touched

    # -- shutdown ------------------------------------------------------------------------------

    async def _wait_handlers(self) -> None:
        if not self._holding:
            return
        log.info("stopping: waiting up to %.1f s for %d handler(s)", self.shutdown_timeout,
                 len(self._holding))
        with anyio.move_on_after(self.shutdown_timeout):
            await self._until(lambda: not self._holding)
        if self._holding and self._handlers_tg is not None:
            self._handlers_tg.cancel_scope.cancel()  # each releases its job as it ends
            while self._ready:  # reserved, never started: give them back too
                held = self._ready.popleft()
                if not held.stale:
                    self._ack(Release, held)
                self._done(held)
            await self._until(lambda: not self._holding)

    async def _until(self, condition: Callable[[], bool]) -> None:
        while True:
            wake = self._wake = anyio.Event()
            if condition():
                return
            if self._client is not None:
                await self._client._flush()
            await wake.wait()

    async def _wait_acks(self) -> None:
        with anyio.move_on_after(max(self.max_ack_delay, self.idle_wait) + 5):
            await self._until(lambda: self._acks_out == 0)


class _Held:
    """One reservation of a job: a handler works on it (or will, from ``_ready``)."""

    __slots__ = ("job", "started", "generation", "due", "ttr", "stale", "reserved_at", "tube")

    def __init__(self, job: Job, started: float, generation: int) -> None:
        self.job = job
        self.started = started  # monotonic
        self.generation = generation
        self.due: float | None = None  # when to touch next (monotonic)
        self.ttr: int | None = None
        #: The job was reserved again (TTR ran out): this reservation's outcome is dropped.
        self.stale = False
        self.reserved_at = time.time()  # for events
        self.tube: str | None = None  # for events, once known

    def schedule(self, ttr: int, left: float, max_ack_delay: float) -> None:
        """Touch ahead of the deadline by the time a touch may wait behind a blocking reserve
        plus half a second, or half the TTR for very short ones."""
        self.ttr = ttr
        self.due = anyio.current_time() + left - min(max_ack_delay + 0.5, ttr / 2)


_COUNTERS: dict[type[Any], str] = {
    Delete: "deleted", Release: "released", Bury: "buried", Touch: "touched",
}
_EVENTS: dict[type[Any], str] = {Delete: "completed", Release: "released", Bury: "buried"}


class Worker:
    """Run a blocking handler on jobs from ``tubes``, up to ``concurrency`` at once in a thread
    pool, over one connection. Same policy and arguments as :class:`AsyncWorker`.

        Worker("beanstalk://127.0.0.1:11300", tubes=["emails"], concurrency=8).run(handle)

    ``handler_timeout`` cannot stop a Python thread: over it, the job is released and the
    thread's eventual result is ignored. Such a thread still fills its slot until it returns:
    the worker never runs more than ``concurrency`` handler threads.

    The constructor raises what :class:`AsyncWorker`'s raises (not :meth:`run`), and:

    Raises:
        TypeError: an ``AsyncClient`` as ``address``, or a keyword it does not take
            (``concurency=8``).
    """

    def __init__(
        self,
        address: Client | AddressLike,
        port: int | None = None,
        *,
        tubes: Sequence[str] = ("default",),
        concurrency: int = 1,
        max_ack_delay: float = 1.0,
        idle_wait: float = 5.0,
        retry: RetryPolicy | None = None,
        auto_touch: bool = True,
        touch_after: float = 0.5,
        handler_timeout: float | None = None,
        shutdown_timeout: float = 30.0,
        backoff: Backoff | None = None,
        timeout: float | None = 10.0,
        events: EventSink | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        if isinstance(address, AsyncClient):
            raise TypeError("Worker takes a Client, URL or address; AsyncWorker an AsyncClient")
        self._target = address
        self._options: dict[str, Any] = {
            "port": port, "tubes": tubes, "concurrency": concurrency,
            "max_ack_delay": max_ack_delay, "idle_wait": idle_wait, "retry": retry,
            "auto_touch": auto_touch, "touch_after": touch_after,
            "handler_timeout": handler_timeout, "shutdown_timeout": shutdown_timeout,
            "backoff": backoff, "timeout": timeout, "events": events, "ssl": ssl,
            "server_hostname": server_hostname,
        }
        # Bad arguments (an address, ssl=, a count, a tube name) raise here, not in run().
        shape = AsyncWorker(address, **self._options)
        #: The server, resolved (a client given as ``address`` lends its own).
        self.address: Address = shape.address
        self._shown = (shape.tubes, shape.concurrency, shape._tls)
        self._async: AsyncWorker | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._stop_requested = False
        self._ready = threading.Event()

    def __repr__(self) -> str:
        return _describe(self, self.address, *self._shown)

    @property
    def stats(self) -> WorkerStats:
        """The counters of the running (or last) worker."""
        return self._async.stats if self._async is not None else WorkerStats()

    def run(self, handler: SyncHandler, *, handle_signals: bool | None = None) -> None:
        """Block, handling jobs, until :meth:`stop` (from any thread) or SIGTERM/SIGINT."""
        anyio.run(self._main, handler, handle_signals)

    async def _main(self, handler: SyncHandler, handle_signals: bool | None) -> None:
        worker = AsyncWorker(self._target, **self._options)
        limiter = anyio.CapacityLimiter(worker.concurrency)

        def given_up(threads: int) -> None:
            worker._abandoned += threads
            worker._wake.set()

        async def in_thread(job: Job) -> object:
            # Over handler_timeout or at shutdown the thread runs on in its slot until it
            # returns (the limiter, released at once, does not count it).
            return await run_in_thread(handler, job, limiter=limiter, given_up=given_up)

        self._async = worker
        self._token = anyio.lowlevel.current_token()
        self._ready.set()
        if self._stop_requested:
            worker.stop()
        async with worker:
            await worker.run(in_thread, handle_signals=handle_signals)

    def stop(self) -> None:
        """Ask the worker to stop (from any thread, a handler included)."""
        self._stop_requested = True
        if self._async is None or self._token is None:
            return
        try:
            anyio.from_thread.run_sync(self._async.stop, token=self._token)
        except RuntimeError:  # called from the event loop thread itself
            self._async.stop()

