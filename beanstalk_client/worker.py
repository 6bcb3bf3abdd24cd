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
import operator
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
from typing_extensions import Self

import jobwire
from jobwire._backoff import Backoff
from jobwire._pending import Pending
from jobwire._signals import wants_signals
from jobwire._streams import SSLOption, tls_context
from jobwire._url import Address, AddressLike, address_url, describe, resolve_address
from jobwire._worker import BlockingRunner, Engine, Source
from jobwire.errors import (
    ConnectionLost,
    JobwireConnectionError,
    JobwireError,
    LocalProtocolError,
    OperationTimeout,
)
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


@dataclass(frozen=True, init=False)
class RetryPolicy(jobwire.RetryPolicy):
    """What happens to a job whose handler raised: :class:`jobwire.RetryPolicy` as beanstalkd
    can carry it.

    The job is released with ``delay(reserves)`` seconds of delay (exponential: ``base_delay``,
    then twice that, and so on, up to ``max_delay``), or buried once it has been reserved
    ``max_attempts`` times (the count comes from ``stats-job``; ``bury_after`` is the same
    setting under its older name) or when the failure is not one of ``retry_on`` (by default
    every ``Exception`` is retried). ``priority`` None keeps the job's own priority.

    Delays are **whole seconds**: beanstalkd's ``release`` takes its delay as a whole number of
    seconds, so ``base_delay`` and ``max_delay`` must be whole numbers (``2`` or ``2.0``). A
    fraction such as ``0.1`` is refused rather than rounded: rounding it up would silently wait
    ten times longer than asked, rounding it down would not wait at all. A worker given a
    plain :class:`jobwire.RetryPolicy` checks its delays the same way when it is made.

    Raises:
        TypeError: a delay, ``max_attempts``/``bury_after`` or ``priority`` that is not a
            number (an int for the last two); ``retry_on`` not a tuple of exception types;
            ``max_attempts`` and ``bury_after`` both given, and different.
        LocalProtocolError: (a ``ValueError``) a delay that is not a whole number of seconds,
            or outside 0 .. 2**32 - 1; ``max_attempts`` below 1; ``priority`` outside
            0 .. 2**32 - 1.
    """

    base_delay: int = 1
    max_delay: int = 60
    max_attempts: int | None = 5
    priority: int | None = None

    def __init__(
        self,
        base_delay: int = 1,
        max_delay: int = 60,
        bury_after: int | None = 5,
        priority: int | None = None,
        *,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        max_attempts: int | None = 5,
    ) -> None:
        if max_attempts != bury_after and 5 not in (max_attempts, bury_after):
            raise TypeError(f"max_attempts ({max_attempts!r}) and bury_after ({bury_after!r}) "
                            "are the same setting: give one")
        attempts, name = ((bury_after, "bury_after") if max_attempts == 5
                          else (max_attempts, "max_attempts"))
        if attempts is not None:
            if isinstance(attempts, bool) or not isinstance(attempts, int):
                raise TypeError(f"{name} is an int or None, not {attempts!r}")
            if attempts < 1:
                raise LocalProtocolError(f"{name} must be >= 1 (or None: never bury), not "
                                         f"{attempts}")
        if priority is not None:
            if isinstance(priority, bool) or not isinstance(priority, int):
                raise TypeError(f"priority is an int or None, not {priority!r}")
            if not 0 <= priority <= _U32:
                raise LocalProtocolError(f"priority must be in 0 .. {_U32}, not {priority}")
        for field, value in (
            ("retry_on", retry_on), ("base_delay", _whole_seconds(base_delay, "base_delay")),
            ("max_delay", _whole_seconds(max_delay, "max_delay")), ("max_attempts", attempts),
            ("priority", priority),
        ):
            object.__setattr__(self, field, value)
        self.__post_init__()

    @property
    def bury_after(self) -> int | None:
        """``max_attempts``, by its older name: reserves after which a failing job is buried."""
        return self.max_attempts

    def delay(self, attempt: int) -> int:
        """Seconds to delay the release after the ``attempt``-th reserve failed."""
        # 2**32 already takes any base_delay >= 1 past every max_delay the wire allows.
        exponent: int = min(max(attempt - 1, 0), 32)
        return min(self.max_delay, self.base_delay * (1 << exponent))

    @classmethod
    def for_the_wire(cls, policy: jobwire.RetryPolicy) -> RetryPolicy:
        """``policy`` as beanstalk's (it is already, or its delays are whole seconds).

        Raises:
            LocalProtocolError: a delay of ``policy`` is not a whole number of seconds (the
                error names the field: ``retry.base_delay``).
        """
        if isinstance(policy, cls):
            return policy
        return cls(_whole_seconds(policy.base_delay, "retry.base_delay"),
                   _whole_seconds(policy.max_delay, "retry.max_delay"),
                   retry_on=policy.retry_on, max_attempts=policy.max_attempts)


_U32 = 2**32 - 1


def _whole_seconds(value: object, name: str) -> int:
    """``value`` as a whole number of seconds for the wire.

    Raises:
        TypeError: not a number. LocalProtocolError: a fraction, not finite, or outside
            0 .. 2**32 - 1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a whole number of seconds, not {value!r}")
    if not math.isfinite(value) or value != int(value):
        raise LocalProtocolError(f"{name} must be a whole number of seconds (beanstalkd's "
                                 f"delays are whole seconds), not {value!r}")
    if not 0 <= value <= _U32:
        raise LocalProtocolError(f"{name} must be in 0 .. {_U32} seconds, not {value!r}")
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
        retry: what to do with jobs whose handler raised (a :class:`RetryPolicy`, or a
            :class:`jobwire.RetryPolicy` whose delays are whole seconds).
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
        ValueError, LocalProtocolError, InvalidAddress: a bad count, tube name or address,
            or a ``retry`` whose delays are not whole seconds (nothing is sent).
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
        retry: jobwire.RetryPolicy | None = None,
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
        self.retry = RetryPolicy() if retry is None else RetryPolicy.for_the_wire(retry)
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
        self.address, self._tls, make_client = _client_factory(
            address, port, timeout, ssl, server_hostname
        )
        self._source = _Reserving(self, address if isinstance(address, AsyncClient) else None,
                                  make_client)
        self._engine = Engine(
            self._source, self.stats, log, concurrency=concurrency,
            handler_timeout=handler_timeout, shutdown_timeout=shutdown_timeout,
            backoff=self.backoff, reconnect_on=(JobwireConnectionError, OperationTimeout),
        )
        self._source.engine = self._engine

    def __repr__(self) -> str:
        return _describe(self, self.address, self.tubes, self.concurrency, self._tls)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        await self._source.disconnect()

    def stop(self) -> None:
        """Stop reserving; ``run`` then lets in-flight handlers finish (up to
        ``shutdown_timeout``), releases what is left and returns. Safe to call from a handler,
        another task, or a signal handler in the event loop's thread."""
        self._engine.stop()

    async def run(self, handler: AsyncHandler, *, handle_signals: bool | None = None) -> None:
        """Reserve and handle jobs until :meth:`stop` (or SIGTERM/SIGINT when
        ``handle_signals``; by default only in the main thread). Reconnects with back-off when
        the connection is lost, restoring the watch list."""
        # OperationTimeout: a server that accepts but does not answer (stopped, overloaded)
        # timed out the watch list; it is tried again like a lost connection.
        engine = self._engine  # the settings as they are now (public attributes: reassignable)
        engine.concurrency, engine.handler_timeout = self.concurrency, self.handler_timeout
        engine.shutdown_timeout, engine.backoff = self.shutdown_timeout, self.backoff
        await engine.run(handler, _job_of, signals=wants_signals(handle_signals))


class _Reserving(Source["_Held"]):
    """How a beanstalk worker fetches (pipelined reserves), settles (acks queued without
    waiting), and keeps its jobs alive (auto-touch), on one connection at a time."""

    def __init__(self, worker: AsyncWorker, first: AsyncClient | None,
                 make_client: Callable[[], AsyncClient]) -> None:
        self.w = worker
        self.engine: Engine[_Held]
        self.make_client = make_client
        self.first = first
        self.client: AsyncClient | None = None
        #: Counts connections: a job's reservation belongs to the one it was made on.
        self.generation = 0
        #: The newest reservation of each job id: the one auto-touch renews. A job reserved
        #: again while a handler still runs on its old reservation is held twice (issue 10).
        self.held: dict[int, _Held] = {}
        self.reserves_out = 0
        self.blocking_out = False
        self.work_known = False
        self.next_blocking = 0.0
        self.acks_out = 0

    # -- connection ----------------------------------------------------------------------------

    async def connect(self) -> None:
        client, self.first = (self.first or self.make_client()), None
        try:
            for tube in self.w.tubes:
                await client.watch(tube)
            if "default" not in self.w.tubes:
                await client.ignore("default")
        except BaseException:
            await client.aclose()
            raise
        old, self.client = self.client, client
        self.generation += 1
        self.reserves_out = 0
        self.blocking_out = False
        self.work_known = False
        if old is not None:
            await old.aclose()
        self.engine.backoff.reset()

    async def disconnect(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    def connection_tasks(self) -> list[Callable[[], Awaitable[None]]]:
        client = self.client
        assert client is not None
        tasks: list[Callable[[], Awaitable[None]]] = [client._serve_replies]
        if client.timeout is not None:
            tasks.append(lambda: self._watchdog(client))
        if self.w.auto_touch:
            tasks.append(lambda: self._toucher(client))
        return tasks

    async def flush(self) -> None:
        if self.client is not None:
            await self.client._flush()

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

    async def fetch(self) -> None:
        client, engine = self.client, self.engine
        assert client is not None
        while not engine.stopping:
            # A fresh event *before* looking at the state: whatever changes it from here on
            # (a reply, a finished handler) wakes this loop, even during the flush below.
            wake = engine.changed()
            free = engine.free - self.reserves_out
            retry_in = 0.0
            if free > 0:
                if self.work_known:
                    self._reserve_free(client)
                elif not self.blocking_out:
                    retry_in = self.next_blocking - anyio.current_time()
                    if retry_in <= 0:
                        self.blocking_out = True
                        self.reserves_out += 1
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
        held = bool(self.engine.holding) or self.reserves_out > 1
        w = self.w
        wait = w.max_ack_delay if held else max(w.idle_wait, w.max_ack_delay)
        return int(wait) if wait >= 1 else 0

    def _on_blocking_reserve(self, pending: Pending[Reserved]) -> None:
        self.blocking_out = False
        if isinstance(pending.error, TimedOut) and self.w.max_ack_delay < 1:
            self.next_blocking = anyio.current_time() + self.w.max_ack_delay
        self._on_reserve(pending)

    def _on_reserve(self, pending: Pending[Reserved]) -> None:
        self.reserves_out -= 1
        engine, stats = self.engine, self.w.stats
        engine.wake()
        reply, error = pending.reply, pending.error
        if reply is not None:
            self.work_known = True
            stats.reserved += 1
            held = _Held(Job(reply.job_id, reply.body), time.monotonic(), self.generation,
                         0.0 if self.w.events is None else time.time())
            stopping = not engine.accepting or self.client is None
            old = self.held.get(held.job.id)
            if old is not None and not stopping:
                # Our handler overran the TTR and the server gave the job back to us: that
                # reservation is gone; its handler's outcome will be dropped.
                old.stale = True
                self._lost(old, "the earlier handler's outcome",
                           "the TTR ran out and the job was reserved again", held.reserved_at)
            if self.w.events is not None:
                self._reserved_event(held)
            if stopping:
                # Reserved after stop began: give it straight back, priority kept.
                self._ack(Release, held)
                return
            self.held[held.job.id] = held
            engine.offer(held)
        elif isinstance(error, TimedOut):
            self.work_known = False
        elif isinstance(error, DeadlineSoon):
            # A held job is within 1 s of its TTR; the server would answer a new reserve the
            # same way at once, so pause reserving briefly instead of spinning.
            stats.deadline_soon += 1
            self.work_known = False
            self.next_blocking = anyio.current_time() + 0.2

    # -- settling ------------------------------------------------------------------------------

    def settle(self, job: _Held, result: object,
               error: Exception | None) -> Awaitable[None] | None:
        if error is None:
            if not job.stale:
                self._delete(job)  # not awaited: its reply is counted when it comes
            return None
        self.w.stats.failed += 1
        log.error("job %d: handler failed", job.job.id, exc_info=error)
        return None if job.stale else self._fail(job, error)

    async def give_back(self, jobs: Sequence[_Held], *, started: bool) -> None:
        for held in jobs:
            if not held.stale:
                if started:
                    log.warning("job %d: handler cancelled at shutdown; releasing it",
                                held.job.id)
                self._ack(Release, held)

    def forget(self, job: _Held) -> None:
        held = self.held
        if held.get(job.job.id) is job:
            del held[job.job.id]
        client = self.client
        if (self.work_known and client is not None and not self.engine.stopping
                and client._session.broken is None):
            # The slot is free: queue its next reserve now, behind the job's outcome, so that
            # both leave in the write that follows this pass of the loop (the fetch loop would
            # queue it a pass later, in a write of its own). _reserve_free, inline.
            engine = self.engine
            free = engine.concurrency - len(engine.holding) - engine.abandoned - self.reserves_out
            if free > 0:
                self.reserves_out += free
                submit, then = client._session.submit, self._on_reserve
                for _ in range(free):
                    submit(_RESERVE_NOW).then = then

    def _reserve_free(self, client: AsyncClient) -> None:
        """Queue a non-blocking reserve for each free slot without one (work is known to
        wait: the last reserve found a job).

        Raises:
            ConnectionLost: the connection is broken.
        """
        free = self.engine.free - self.reserves_out
        if free > 0:
            self.reserves_out += free
            submit, then = client._session.submit, self._on_reserve
            for _ in range(free):
                submit(_RESERVE_NOW).then = then

    async def drain(self) -> None:
        """Wait for every queued ack to be answered, so that closing cannot drop a delete the
        server has not read yet."""
        w = self.w
        with anyio.move_on_after(max(w.max_ack_delay, w.idle_wait) + 5):
            await self.engine.until(lambda: self.acks_out == 0)

    async def _fail(self, held: _Held, error: Exception) -> None:
        client, retry = self.client, self.w.retry
        failed_at = time.time()
        reserves: int | None = None
        priority = retry.priority
        if client is not None and held.generation == self.generation:
            try:
                stats = await client.stats_job(held.job)
                reserves = stats["reserves"]
                priority = stats["pri"] if priority is None else priority
            except JobwireError:
                pass
        if self.w.events is not None:
            self._emit("failed", held, failed_at, group=failure_group(error), attempt=reserves)
        reserves = reserves or 1
        if retry.retries(error, reserves):
            self._ack(Release, held, priority=priority, delay=retry.delay(reserves))
        else:
            self._ack(Bury, held, priority=priority)

    def _delete(self, held: _Held) -> None:
        """``_ack(Delete, held)`` written out: the outcome of every handler that returns. No
        wake-up here: the engine wakes the fetch loop (which flushes) once the hold ends."""
        client = self.client
        if client is None or client._session.broken is not None:
            self._lost(held, Delete.name, "no connection")
            return
        events = self.w.events
        queued_at = 0.0 if events is None else time.time()
        self.acks_out += 1

        def deleted(pending: Pending[Reply]) -> None:
            self.acks_out -= 1
            if self.engine.stopping:  # only drain waits on acks_out
                self.engine.wake()
            if pending.error is None:
                self.w.stats.deleted += 1
                if events is not None:
                    self._emit("completed", held, queued_at)
            else:
                self._lost(held, Delete.name, str(pending.error))

        client._session.submit(Delete(held.job.id)).then = deleted

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
        client, engine, stats = self.client, self.engine, self.w.stats
        job, generation = held.job, held.generation
        if client is None or client._session.broken is not None:
            self._lost(held, kind.name, "no connection")
            return
        if kind is not Delete and generation != self.generation:
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
            self.acks_out += 1

            def released(ok: bool) -> None:
                self.acks_out -= 1
                engine.wake()
                if ok:
                    stats.released += 1
                    if self.w.events is not None:
                        self._emit("released", held, queued_at)
                else:
                    self._lost(held, "release", "server refused")

            client._session.give_back(job.id, released)
            engine.wake()
            return
        else:
            command = Release(job.id, priority, delay)
        self.acks_out += 1

        def on_reply(pending: Pending[Reply]) -> None:
            self.acks_out -= 1
            engine.wake()
            if pending.error is None:
                counter = _COUNTERS[kind]
                setattr(stats, counter, getattr(stats, counter) + 1)
                if self.w.events is not None and kind is not Touch:
                    self._emit(_EVENTS[kind], held, queued_at)
            else:
                self._lost(held, kind.name, str(pending.error))

        client._submit_nowait(command, on_reply)
        engine.wake()  # the pump flushes it

    def _lost(self, held: _Held, action: str, why: str, at: float | None = None) -> None:
        self.w.stats.lost += 1
        if self.w.events is not None:
            self._emit("lost", held, time.time() if at is None else at)
        where = "a lost connection" if held.generation != self.generation else "this connection"
        log.warning(
            "job %d: %s not done (%s); it was reserved on %s and the server has released it "
            "or will when its TTR runs out", held.job.id, action, why, where,
        )

    # -- events --------------------------------------------------------------------------------

    def _reserved_event(self, held: _Held) -> None:
        """Record ``reserved`` for a job just reserved: at once when one tube is watched,
        else once ``stats-job`` has named its tube (queued now, ahead of any outcome)."""
        tubes = self.w.tubes
        if len(tubes) == 1:
            held.tube = tubes[0]
            self._emit("reserved", held, held.reserved_at)
            return
        client = self.client
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
        events = self.w.events
        assert events is not None
        events.emit(event, at, "beanstalk", held.tube or "", str(held.job.id),
                    self.w.worker_id, None, group, attempt)

    # -- auto-touch ----------------------------------------------------------------------------

    async def _toucher(self, client: AsyncClient) -> None:
        """Touch held jobs before their TTR runs out. One task for all jobs; a handler that
        finishes within ``touch_after`` costs nothing here."""
        touch_after = self.w.touch_after
        interval = min(touch_after, 0.25)
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            for job_id, held in list(self.held.items()):
                if held.generation != self.generation or now - held.started < touch_after:
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
                held.schedule(stats["ttr"], stats["time-left"], self.w.max_ack_delay)

        return plan

    def _touched(self, job_id: int, held: _Held) -> Callable[[Pending[Reply]], None]:
        def touched(pending: Pending[Reply]) -> None:
            if pending.error is None and held.ttr is not None:
                self.w.stats.touched += 1
                held.schedule(held.ttr, held.ttr, self.w.max_ack_delay)
            else:
                log.warning("job %d: touch failed: %s", job_id, pending.error)

        return touched


class _Held:
    """One reservation of a job: a handler works on it (or will, from ``_ready``)."""

    __slots__ = ("job", "started", "generation", "due", "ttr", "stale", "reserved_at", "tube")

    def __init__(self, job: Job, started: float, generation: int, reserved_at: float) -> None:
        self.job = job
        self.started = started  # monotonic
        self.generation = generation
        self.due: float | None = None  # when to touch next (monotonic)
        self.ttr: int | None = None
        #: The job was reserved again (TTR ran out): this reservation's outcome is dropped.
        self.stale = False
        self.reserved_at = reserved_at  # time.time(), for events (0.0 without)
        self.tube: str | None = None  # for events, once known

    def schedule(self, ttr: int, left: float, max_ack_delay: float) -> None:
        """Touch ahead of the deadline by the time a touch may wait behind a blocking reserve
        plus half a second, or half the TTR for very short ones."""
        self.ttr = ttr
        self.due = time.monotonic() + left - min(max_ack_delay + 0.5, ttr / 2)


_job_of = operator.attrgetter("job")
#: The worker's non-blocking reserve: one record for all (records are immutable).
_RESERVE_NOW = ReserveWithTimeout(0)

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
        retry: jobwire.RetryPolicy | None = None,
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
        options: dict[str, Any] = {
            "port": port, "tubes": tubes, "concurrency": concurrency,
            "max_ack_delay": max_ack_delay, "idle_wait": idle_wait, "retry": retry,
            "auto_touch": auto_touch, "touch_after": touch_after,
            "handler_timeout": handler_timeout, "shutdown_timeout": shutdown_timeout,
            "backoff": backoff, "timeout": timeout, "events": events, "ssl": ssl,
            "server_hostname": server_hostname,
        }
        # Bad arguments (an address, ssl=, a count, a tube name) raise here, not in run().
        shape = AsyncWorker(address, **options)
        #: The server, resolved (a client given as ``address`` lends its own).
        self.address: Address = shape.address
        self._shown = (shape.tubes, shape.concurrency, shape._tls)
        self._runner: BlockingRunner[Job, WorkerStats] = BlockingRunner(
            lambda: AsyncWorker(address, **options), WorkerStats
        )

    def __repr__(self) -> str:
        return _describe(self, self.address, *self._shown)

    @property
    def stats(self) -> WorkerStats:
        """The counters of the running (or last) worker."""
        return self._runner.stats

    def run(self, handler: SyncHandler, *, handle_signals: bool | None = None) -> None:
        """Block, handling jobs, until :meth:`stop` (from any thread) or SIGTERM/SIGINT."""
        self._runner.run(handler, handle_signals)

    def stop(self) -> None:
        """Ask the worker to stop (from any thread, a handler included)."""
        self._runner.stop()
