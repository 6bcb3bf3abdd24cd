"""qless workers over ONE Redis connection: several queues, N jobs at once, automatic heartbeats,
lost locks, retries by policy, reconnect with back-off, graceful stop.

    async def handle(job: AsyncJob) -> None:
        await send_email(**job.data)

    async with AsyncWorker("redis://127.0.0.1:6379/0", queues=["urgent", "emails"],
                           concurrency=16) as worker:
        await worker.run(handle)            # until worker.stop(), SIGTERM or SIGINT

    Worker("redis://127.0.0.1:6379/0", queues=["emails"], concurrency=8).run(handle_sync)

What a handler's outcome does
-----------------------------
* It **returns**: the job is completed (``complete``). Returning :class:`Next` completes it
  into another queue: ``return Next("deliver", delay=30)``. Changes the handler made to
  ``job.data`` are saved with it, written by the client's serializer; data the handler never
  read goes back exactly as stored (data the serializer cannot read completes too).
* It **raises**: the job is failed (``fail``) with group = the exception's type
  (``module.QualName``; builtins without ``builtins.``) and message = the traceback. An
  exception the :class:`RetryPolicy` lists is retried instead (``retry`` with the policy's
  delay, fractions of a second as given: the script's clock has them): that uses one of the
  job's retries, and the script fails the job itself (group ``failed-retries-<queue>``) once
  none are left. A policy's ``max_attempts`` (none by default) fails the job sooner: at its
  ``attempt``-th try (``retries - remaining + 1``). The policy is :class:`jobwire.RetryPolicy`
  (this module exports it as ``RetryPolicy``); a worker given none retries nothing.
* It **settled the job itself** (``await job.complete(next=...)``, ``job.fail(...)``,
  ``job.retry(...)``): the worker leaves the job alone.

Locks and heartbeats
--------------------
A popped job is locked for the queue's lock length (config ``<queue>-heartbeat``, else
``heartbeat``, 60 s by default); the pop answers the expiry. One heartbeat task renews every
held job's lock when half of what is left has passed (a 1 s lock: every 0.5 s), for as long as
its handler runs. A lock is lost the way qless-core reports it: a heartbeat is refused with
``LostLock`` (``Job given out to another worker``: another worker popped the job after the lock
ran out and the grace period passed, or it was moved and popped; ``Job not currently running``:
it was timed out, moved, failed or completed by another client) or ``JobNotFound`` (cancelled).
The job is then *lost*: ``job.lost`` is set, an async handler is cancelled (a sync one, in its
thread, cannot be: it should look at ``job.lost``), and nothing is reported for it; the worker
never completes, fails or retries a job it knows it lost. ``complete`` and ``retry`` are
refused by the script for a lock that is not ours; ``fail`` only checks that the job is running,
not by whom, so the worker heartbeats first and fails only if that was accepted.

Popping
-------
One *pump* task pops whenever handler slots are free, as many jobs as there are free slots,
with the count in one ``pop`` per queue. ``mode="ordered"`` asks the queues in the order given,
each for what the ones before did not fill (a later queue only gets work while the earlier ones
are empty). ``mode="round-robin"`` starts each round at the queue after the one that last gave a
job, and splits the free slots evenly over the queues left, passing what one queue could not
fill on to the next. With queues A (5 jobs), B (2), C (3) and one slot, ordered C, B, A pops
C C C B B A A A A A and round-robin pops C B A C B A C A A A. When a round finds fewer jobs than
slots, the pump waits ``idle_wait`` seconds (qless has no blocking pop) before it asks again.

Pops are guarded (``_popguard.py``): a pop in flight runs to its reply even if the worker is
cancelled, and jobs that cannot be handled any more are handed back with ``retry``. A graceful
stop sends no new pop, lets every popped job's handler finish and report (up to
``shutdown_timeout``), then cancels what is left and hands those jobs back (``retry``: one retry
each, the same as their locks running out, without the wait).

Connection
----------
One :class:`~qless_client.AsyncClient` carries everything: pops, heartbeats, reports, and (in
:class:`Worker`) the calls that handler threads make on their jobs (their jobs' client is
:meth:`AsyncClient.blocking`). The slots, the graceful stop, signals and the in-flight count are
the shared worker engine's (:mod:`jobwire._worker`); this module pops, reports and heartbeats.
Redis keeps no state per
connection that qless needs, so when the server goes away the next call opens a new connection
(and reloads the script after a restart); the pump waits with jittered exponential back-off
(``backoff``) between failed pops, and reports are retried until the job's lock runs out. A
report whose reply never came may have been run anyway (a server that stalled, then went on):
when the copy sent again is refused, the job's history is read back, and if it shows what the
unanswered copy did after this worker's pop (``done`` at its ``now``, in whole seconds; for a
retry, the job back in its queue with one retry less and nothing after the pop) the report
counts as done; only otherwise is the job lost (docs/qless.md).

Events
------
With ``events=`` (a :class:`jobwire.events.EventSink`) the worker records ``reserved`` for every
job a pop hands it, ``completed``, ``failed`` (group = the failure group sent), ``retried``
(followed by ``failed``, group ``failed-retries-<queue>``, when the script failed the job for
running out of retries) and ``lost``. The time of each is exactly the ``now`` the call that did
it passed to the script, and a ``reserved`` event's ``put_time`` is when the wait the script
counts began: as qless-core does, the job's last put, pop or completion before this pop (a
retried or timed-out job's wait runs from its previous pop), read from its history, so in whole
seconds (the script itself uses the exact time, which a job's description leaves out). Every
call on the worker's client is seen, through the client's public hook (its ``observer``): the
ones a handler makes on its job (``job.complete()``...) and the hand-backs included. The
observer runs as each reply is read, so it sees the calls in the order the server ran them
(a ``pop`` that hands out a job just retried comes after the ``retry``, whichever task wakes
first); the worker also finds through it that a job popped again while still held was lost.
A client given to the worker is not changed: the worker observes a client of its own over the
given one's connection, which calls the given client's observer too.
"""

from __future__ import annotations

import logging
import math
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Literal, TypedDict, TypeVar

import anyio
from typing_extensions import Self, Unpack

from jobwire._backoff import Backoff
from jobwire._retry import RetryPolicy
from jobwire._signals import wants_signals
from jobwire._streams import SSLOption
from jobwire._url import AddressLike, describe
from jobwire._worker import BlockingRunner, Engine, Source
from jobwire.errors import ConnectFailed, JobwireError, LocalProtocolError
from jobwire.events import EventSink, failure_group

from . import _scripts as sc
from ._client_async import _UNREAD as _UNREAD_ASYNC
from ._client_async import AsyncClient, AsyncJob, Observer, _dump_text, _name, _seconds
from ._client_sync import _UNREAD as _UNREAD_SYNC
from ._client_sync import Client, Job
from ._popguard import AsyncPopGuard, give_back
from ._redis import AsyncRedis
from ._resp import Push
from .errors import JobNotFound, LostLock, RedisError, ScriptError, WrongQueue, WrongState

__all__ = ["AsyncWorker", "Next", "RetryPolicy", "Worker", "WorkerStats"]

log = logging.getLogger("qless_client.worker")

T = TypeVar("T")
AsyncHandler = Callable[[AsyncJob], Awaitable[object]]
SyncHandler = Callable[[Job], object]
Mode = Literal["ordered", "round-robin"]
#: The script's refusals that mean "this job is not ours any more".
_NOT_OURS = (LostLock, JobNotFound, WrongQueue, WrongState)
#: Longest wait for a hand-back (``retry``) when handlers are cancelled.
GIVE_BACK_TIMEOUT = 10.0
#: What the handler call returns when a lost lock cancelled the handler.
_LOST: Any = object()


class RedisOptions(TypedDict, total=False):
    """The connection's keyword arguments a worker passes on (see :class:`AsyncRedis`), typed so
    that a misspelt one is refused by mypy as well as at construction."""

    db: int | None
    username: str | None
    password: str | None
    protocol: int
    client_name: str | None
    timeout: float | None
    connect_timeout: float | None
    max_bulk: int
    max_line: int
    max_depth: int
    max_array: int
    max_reply_items: int
    max_reply_bytes: int
    on_push: Callable[[Push], None] | None
    ssl: SSLOption
    server_hostname: str | None


@dataclass
class WorkerStats:
    """Counters a worker keeps (read them any time; they only grow, but ``in_flight``)."""

    popped: int = 0
    completed: int = 0  #: ``complete`` accepted (into a next queue too)
    failed: int = 0  #: jobs failed: handlers that raised, and retries the script refused
    retried: int = 0  #: ``retry`` accepted: by policy, or a job handed back at shutdown
    lost: int = 0  #: jobs whose lock was lost: nothing was (or could be) reported for them
    heartbeats: int = 0  #: heartbeats accepted
    reconnects: int = 0  #: pops that failed on the connection, each followed by a back-off
    in_flight: int = 0  #: jobs popped and not yet settled


@dataclass(frozen=True)
class Next:
    """A handler's return value that completes the job into ``queue`` (``complete ... next``):
    after ``delay`` seconds, or once the jobs ``depends`` names are complete (not both).

    Raises:
        LocalProtocolError, TypeError: a bad queue name, delay or depends (at construction,
            so in the handler: the job then fails with that error).
    """

    queue: str
    delay: float = 0.0
    depends: Sequence[str] = ()

    def __post_init__(self) -> None:
        _name(self.queue, "next queue")
        _seconds(self.delay, "delay")
        if isinstance(self.depends, str):
            raise TypeError("depends is a sequence of jids, not a str")
        for jid in self.depends:
            _name(jid, "depends jid")
        if self.delay and self.depends:
            raise LocalProtocolError("Next takes delay or depends, not both")


def failure_message(error: BaseException) -> str:
    """The failure message of a handler's exception: its traceback, as Python prints it."""
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


class _Held:
    """One pop of a job the worker holds: handled, not yet settled (the engine holds it until
    then)."""

    __slots__ = ("beating", "due", "expires", "finished", "job", "raw", "scope")

    def __init__(self, job: AsyncJob | Job, raw: sc.JobData, expires: float, due: float) -> None:
        self.job = job
        #: The job as the pop returned it: which pop this is (:class:`_Events` knows it so).
        self.raw = raw
        #: When the lock runs out, on the client's clock (UTC seconds).
        self.expires = expires
        #: When to heartbeat next (anyio.current_time()).
        self.due = due
        self.beating = False
        #: The handler is done: no more heartbeats (the report settles the lock).
        self.finished = False
        #: The handler's cancel scope while it runs (a lost lock cancels it).
        self.scope: anyio.CancelScope | None = None


def _same(held: _Held) -> _Held:
    return held


def _validate_queues(queues: Sequence[str]) -> list[str]:
    if isinstance(queues, str) or not isinstance(queues, Sequence):
        raise TypeError("queues is a sequence of queue names, not "
                        f"{type(queues).__name__}")
    names = [_name(q, "queue name") for q in queues]
    if not names:
        raise ValueError("a worker needs at least one queue")
    if len(set(names)) != len(names):
        raise LocalProtocolError(f"a queue is listed twice: {names}")
    return names


class AsyncWorker:
    """Run an async handler on jobs popped from ``queues``, up to ``concurrency`` at once, on
    one connection (anyio: asyncio or trio). The module docstring says what happens when.

    Args:
        address: the Redis server in any form :class:`AsyncClient` takes
            (``redis://host:port/db``, ``unix://...``, ``"host:port"``, ``("host", port)``...),
            or an :class:`AsyncClient` (used as is, its worker name and serializer too; not
            closed).
        port: the port, when ``address`` is a bare host.
        queues: the queues to pop from, in order.
        mode: ``"ordered"`` (earlier queues first) or ``"round-robin"``.
        concurrency: most jobs handled at once; also the most jobs one round of pops asks for.
        idle_wait: seconds between rounds of pops when the queues had fewer jobs than free
            slots.
        retry: which exceptions retry the job, with what delay (default: none; every exception
            fails the job).
        handler_timeout: hard limit per handler, in seconds; over it the handler is cancelled
            and ``TimeoutError`` is its outcome (failed, or retried if the policy says so).
        shutdown_timeout: on stop, how long running handlers may finish before they are
            cancelled and their jobs handed back.
        backoff: delays between failed pops (jittered exponential; default 0.1 s up to 5 s).
        worker_name: who pops (default ``<hostname>-<pid>``); not with an AsyncClient.
        events: where to record job lifecycle events (off by default; see the module
            docstring); the worker id in them is the worker name.
        redis_options: further keyword arguments for the client's connection (``db``,
            ``password``, ``timeout``, ``ssl``...); not with an AsyncClient.

    Raises:
        TypeError, ValueError, InvalidAddress, LocalProtocolError: bad arguments (nothing is
            sent).
    """

    def __init__(
        self,
        address: AsyncClient | AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        queues: Sequence[str],
        mode: Mode = "ordered",
        concurrency: int = 1,
        idle_wait: float = 1.0,
        retry: RetryPolicy | None = None,
        handler_timeout: float | None = None,
        shutdown_timeout: float = 30.0,
        backoff: Backoff | None = None,
        worker_name: str | None = None,
        events: EventSink | None = None,
        **redis_options: Unpack[RedisOptions],
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise TypeError(f"concurrency is an int, not {type(concurrency).__name__}")
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if mode not in ("ordered", "round-robin"):
            raise ValueError(f"mode is 'ordered' or 'round-robin', not {mode!r}")
        self.queues = _validate_queues(queues)
        self.mode: Mode = mode
        self.concurrency = concurrency
        self.idle_wait = _seconds(idle_wait, "idle_wait")
        self.retry = retry or RetryPolicy(retry_on=())
        self.handler_timeout = (
            None if handler_timeout is None else _seconds(handler_timeout, "handler_timeout")
        )
        self.shutdown_timeout = _seconds(shutdown_timeout, "shutdown_timeout")
        self.backoff = backoff or Backoff(base=0.1, cap=5.0)
        self.stats = WorkerStats()
        self.events = events
        if isinstance(address, AsyncClient):
            if port is not None or worker_name is not None or redis_options:
                raise TypeError("port, worker_name and Redis options go with an address, "
                                "not with an AsyncClient")
            self._given: AsyncClient | None = address
            self.worker_name = address.worker_name
            redis = address.redis
        else:
            if isinstance(address, Client):
                raise TypeError("AsyncWorker takes an AsyncClient or an address, not a Client")
            # Built now so that a bad address raises here; opened (and closed) by run().
            self._given = None
            self._address: tuple[Any, ...] = (address, port)
            self._options: dict[str, Any] = {"worker_name": worker_name, **redis_options}
            probe = AsyncClient(address, port, **self._options)
            self.worker_name, redis = probe.worker_name, probe.redis
        #: The server as ``repr`` shows it (never the password).
        self._where = _where(redis)
        #: Handlers run in threads (the sync :class:`Worker`): they get a blocking ``Job`` on
        #: this worker's connection, and a lost lock cannot cancel them (they are only told).
        self._threads = False
        self._running = False
        self._source = _Popping(self)
        self._engine: Engine[_Held] = Engine(
            self._source, self.stats, log, concurrency=concurrency,
            handler_timeout=self.handler_timeout, shutdown_timeout=self.shutdown_timeout,
            backoff=self.backoff, reconnect_on=(),
        )
        self._source.engine = self._engine

    def __repr__(self) -> str:
        return _describe(self, self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop popping; :meth:`run` then lets running handlers finish and report (up to
        ``shutdown_timeout``), hands back what is left and returns. Safe to call from a
        handler, another task, or a signal handler in the event loop's thread; before
        :meth:`run`, it makes the next run return at once."""
        self._engine.stop()

    async def run(self, handler: AsyncHandler, *, handle_signals: bool | None = None) -> None:
        """Pop and handle jobs until :meth:`stop` (or SIGTERM/SIGINT when ``handle_signals``;
        by default only in the main thread). Connection failures never end it: pops wait with
        back-off and the next call reconnects.

        Raises:
            RuntimeError: the worker is already running.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        self._running = True
        engine, source = self._engine, self._source
        # The settings as they are now (public attributes: reassignable).
        engine.concurrency, engine.handler_timeout = self.concurrency, self.handler_timeout
        engine.shutdown_timeout, engine.backoff = self.shutdown_timeout, self.backoff
        client = source.open(*self._client())
        try:
            log.info("worker %s: popping %s (%s), %d at once", self.worker_name,
                     ", ".join(self.queues), self.mode, self.concurrency)
            await engine.run(source.handling(handler), _same,
                             signals=wants_signals(handle_signals))
        finally:
            # Cancelled from outside: popped jobs no handler started go back at once.
            leftover = list(engine.ready)
            engine.ready.clear()
            if leftover:
                try:
                    await source.give_back(leftover, started=False)
                finally:
                    for held in leftover:
                        engine.done(held)
            source.close()
            self._running = False
            engine.stopping = False
            if client is not self._given:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
            log.info("worker %s: stopped (%s)", self.worker_name, self.stats)

    def _client(self) -> tuple[AsyncClient, _Events]:
        """The client of one run, whose observer follows the jobs this worker holds (and
        records the events, with a sink): a new one to the address, or one over the given
        client's connection (after the given client's own observer); and that observer."""
        given = self._given
        events = _Events(self.events, self.worker_name, self._source.repopped)
        if given is None:
            return AsyncClient(*self._address, observer=events, **self._options), events
        observer: Observer = events if given.observer is None else _both(given.observer, events)
        return AsyncClient(given.redis, worker_name=given.worker_name, clock=given.clock,
                           serializer=given.serializer, observer=observer), events


def _both(first: Observer, then: Observer) -> Observer:
    def observe(call: sc.ScriptCall[Any], result: Any) -> None:
        try:
            first(call, result)
        finally:  # the worker's own bookkeeping, whatever the given observer raised
            then(call, result)

    return observe


class _Popping(Source[_Held]):
    """How a qless worker fetches (pops, see the module docstring), settles (``complete``,
    ``retry`` or ``fail``, sent until answered) and keeps its jobs alive (heartbeats), on the
    one client of a run. The engine holds every job popped until it is settled."""

    def __init__(self, worker: AsyncWorker) -> None:
        self.w = worker
        self.engine: Engine[_Held]
        self.client: AsyncClient | None = None
        #: The run's client's observer: follows the jobs held (and records the events, with a
        #: sink).
        self.events: _Events | None = None
        #: Makes the job object a handler gets.
        self.make_job: Callable[[sc.JobData], AsyncJob | Job] = self._async_job
        #: Cancel an async handler whose lock is lost (a thread cannot be: it is only told).
        self.cancel_lost = True
        #: The newest pop of each jid: the one heartbeats renew. A job popped again while a
        #: handler still runs on its first pop is held twice (both fill a slot).
        self.held: dict[str, _Held] = {}
        self.beat_wake = anyio.Event()
        self.next_queue = 0  # round-robin: where the next round starts

    def open(self, client: AsyncClient, events: _Events | None) -> AsyncClient:
        """Start a run on ``client`` (whose observer includes ``events``), in the event
        loop."""
        self.client, self.events = client, events
        if self.w._threads:
            blocking = client.blocking()
            self.make_job = lambda raw: Job(blocking, raw)
            self.cancel_lost = False
        self.beat_wake = anyio.Event()
        return client

    def close(self) -> None:
        self.client = None
        self.events = None

    def _async_job(self, raw: sc.JobData) -> AsyncJob:
        assert self.client is not None
        return AsyncJob(self.client, raw)

    def handling(self, handler: Callable[[Any], Awaitable[object]]
                 ) -> Callable[[_Held], Awaitable[object]]:
        """``handler`` as the engine calls it: on the job, in a cancel scope that a lost lock
        cancels (then the outcome is :data:`_LOST`)."""

        async def handle(held: _Held) -> object:
            job = held.job
            with anyio.CancelScope() as scope:
                held.scope = scope
                if job.lost:
                    scope.cancel()
                try:
                    return await handler(job)
                finally:
                    held.scope = None
            return _LOST

        return handle

    def connection_tasks(self) -> Sequence[Callable[[], Awaitable[None]]]:
        return (self._heartbeater,)

    # -- popping -------------------------------------------------------------------------------

    async def fetch(self) -> None:
        client, engine, w = self.client, self.engine, self.w
        assert client is not None
        while not engine.stopping:
            # A fresh event before looking at the slots: a handler finishing from here on
            # wakes this loop.
            wake = engine.changed()
            free = engine.free
            if free <= 0:
                await wake.wait()
                continue
            try:
                got = await self._pop_round(client, free)
            except JobwireError as exc:  # connection lost or refused, LOADING, BUSY...
                await engine.back_off(exc, "pop failed (%s); trying again in %.2f s")
                continue
            engine.backoff.reset()
            if got < free and not engine.stopping:
                await engine.pause(w.idle_wait)

    async def _pop_round(self, client: AsyncClient, free: int) -> int:
        """Pop up to ``free`` jobs (see the module docstring for the order); hand each to a
        slot as it arrives. Returns how many came."""
        got = 0
        queues = self.w.queues
        count = len(queues)
        if self.w.mode == "ordered":
            for queue in queues:
                got += await self._pop(client, queue, free - got)
                if got >= free:
                    break
            return got
        start = self.next_queue
        for i in range(count):
            need = free - got
            if need <= 0:
                break
            index = (start + i) % count
            n = await self._pop(client, queues[index], -(-need // (count - i)))
            if n:
                self.next_queue = (index + 1) % count
            got += n
        return got

    async def _pop(self, client: AsyncClient, queue: str, count: int) -> int:
        jobs = await AsyncPopGuard.pop(
            client, sc.pop(client.clock(), queue, client.worker_name, count)
        )
        if self.engine.past_deadline:  # a pop that ended past the shutdown deadline
            with anyio.move_on_after(GIVE_BACK_TIMEOUT, shield=True):
                self.w.stats.retried += await give_back(client, jobs)
            return len(jobs)
        for raw in jobs:
            self._take(client, raw)
        return len(jobs)

    def _take(self, client: AsyncClient, raw: sc.JobData) -> None:
        job = self.make_job(raw)
        left = max(0.0, raw["expires"] - client.clock())
        held = _Held(job, raw, raw["expires"], anyio.current_time() + left / 2)
        # An earlier pop of the job still here was settled before this pop, or was lost when
        # its reply came (see repopped); this one is the one heartbeats renew now.
        self.held[job.jid] = held
        self.w.stats.popped += 1
        self.engine.offer(held)
        self.beat_wake.set()

    # -- settling ------------------------------------------------------------------------------

    def settle(self, job: _Held, result: object,
               error: Exception | None) -> Awaitable[None] | None:
        job.finished = True
        if result is _LOST or job.job.lost:
            return None  # counted and logged when the loss was found; nothing may be sent
        if job.job.state != "running":  # the handler completed, failed or retried it itself
            if error is not None:
                log.warning("job %s: handler raised after settling the job itself",
                            job.job.jid, exc_info=error)
            return None
        return self._report(job, result, error)

    async def _report(self, held: _Held, result: object, error: Exception | None) -> None:
        # The report is not cut short by a shutdown: it ends by the lock's expiry.
        with anyio.CancelScope(shield=True):
            if error is None:
                await self._complete(held, result)
                return
            job, retry = held.job, self.w.retry
            attempt = job.retries - job.remaining + 1
            if retry.retries(error, attempt):
                log.warning("job %s: handler raised %s; retrying", job.jid,
                            failure_group(error), exc_info=error)
                await self._retry(held, retry.delay(attempt))
            else:
                log.error("job %s: handler failed", job.jid, exc_info=error)
                await self._fail(held, error)

    async def give_back(self, jobs: Sequence[_Held], *, started: bool) -> None:
        """Hand jobs back to their queue now (``retry``, no delay): a cancelled handler's
        (shutdown deadline, or run() cancelled), or popped jobs no handler started."""
        with anyio.move_on_after(GIVE_BACK_TIMEOUT, shield=True):
            if started:
                for held in jobs:
                    held.finished = True
                    job = held.job
                    if not job.lost and job.state == "running":
                        log.warning("job %s: handler cancelled; handing the job back", job.jid)
                        await self._retry(held, 0)
                return
            client = self.client or self.w._given
            if client is not None:
                back = [{"jid": h.job.jid, "queue": h.job.queue or "", "worker": h.job.worker}
                        for h in jobs if not h.job.lost]
                self.w.stats.retried += await give_back(client, back)

    def forget(self, job: _Held) -> None:
        job.finished = True
        jid = job.job.jid
        if self.held.get(jid) is job:
            del self.held[jid]
        if self.events is not None:
            self.events.forget(jid, job.raw)

    def repopped(self, jid: str, raw: sc.JobData) -> None:
        """A pop's reply handed out ``jid`` again while the pop that returned ``raw`` held it
        (:class:`_Events` saw it, in the order the replies came): that pop's lock ran out."""
        held = self.held.get(jid)
        if held is not None and held.raw is raw:
            self._lose(held, "popped again after its lock ran out", None)  # event: _Events

    # -- reports -------------------------------------------------------------------------------

    async def _send(
        self, held: _Held, what: str, build: Callable[[float], sc.ScriptCall[T]],
        landed: Callable[[sc.JobData, float], T | None] | None = None,
    ) -> T | None:
        """Send ``build(now)`` for ``held`` until it is answered: its reply, or None when the
        job turned out not to be ours (counted as lost) or the lock ran out while the
        connection was down. Sent again, with a fresh ``now``, after connection failures.

        A copy whose reply never came (timeout, connection lost) may have been run all the
        same (a server that stalled, then went on). When a copy sent again is refused as not
        ours, the job's history is read (``get``): ``landed(job, now)`` returns the reply the
        call sent with ``now`` got if the history shows it was run (the script writes each
        call's ``now`` there), and that reply is this call's; only otherwise is the job lost.
        """
        client = self.client
        assert client is not None
        backoff = Backoff(base=0.05, cap=1.0)
        #: Copies sent whose replies never came: each may have been run.
        unanswered: list[sc.ScriptCall[T]] = []
        while True:
            if unanswered and held.job.lost:
                # Popped again by this worker meanwhile (see _take, counted there): a copy
                # sent now would settle the new lock, not ours.
                return None
            call = build(client.clock())
            try:
                return await client._run(call)
            except _NOT_OURS as exc:
                if unanswered and landed is not None:
                    found = await self._find_run(held, what, unanswered, landed)
                    if found is not None:
                        return found
                self._lose(held, f"{what} refused: {exc.detail or exc}", _sent_now(call))
                return None
            except ScriptError as exc:  # a bug: the call was malformed
                log.error("job %s: %s refused: %s", held.job.jid, what, exc)
                return None
            except JobwireError as exc:  # the connection, or a passing LOADING/BUSY
                if not isinstance(exc, (ConnectFailed, RedisError)):  # sent, reply lost
                    unanswered.append(call)
                now = client.clock()
                left = held.expires - now
                if left <= 0:
                    self._lose(held, f"{what} not sent before the lock ran out ({exc})", now)
                    return None
                delay = min(backoff.next_delay(), left)
                log.info("job %s: %s failed (%s); trying again in %.2f s", held.job.jid, what,
                         exc, delay)
                await anyio.sleep(delay)

    async def _find_run(
        self, held: _Held, what: str, unanswered: list[sc.ScriptCall[T]],
        landed: Callable[[sc.JobData, float], T | None],
    ) -> T | None:
        """The reply of the copy in ``unanswered`` that the job's history shows was run (its
        event recorded with that copy's ``now``), or None: none was, there is no job, or it
        could not be read within ``GIVE_BACK_TIMEOUT``."""
        client, jid = self.client, held.job.jid
        assert client is not None
        backoff = Backoff(base=0.05, cap=1.0)
        raw: sc.JobData | None = None
        with anyio.move_on_after(GIVE_BACK_TIMEOUT):
            while True:
                try:
                    raw = await client._run(sc.get(client.clock(), jid))
                    break
                except JobwireError as exc:
                    log.info("job %s: reading it back failed (%s)", jid, exc)
                    await anyio.sleep(backoff.next_delay())
        if raw is None:
            return None
        for call in unanswered:
            reply = landed(raw, _sent_now(call))
            if reply is not None:
                log.info("job %s: the %s sent with now=%.3f was run, its reply lost; "
                         "counted as done", jid, what, _sent_now(call))
                if self.events is not None:
                    self.events(call, reply)
                return reply
        return None

    async def _complete(self, held: _Held, result: object) -> None:
        job = held.job
        queue = job.queue or ""
        try:
            data = _data_to_save(job)
        except LocalProtocolError as exc:  # SerializationError: the new data cannot be written
            await self._fail(held, exc)
            return
        nxt = result if isinstance(result, Next) else None

        def build(now: float) -> sc.ScriptCall[str]:
            if nxt is None:
                return sc.complete(now, job.jid, job.worker, queue, data)
            return sc.complete(now, job.jid, job.worker, queue, data, next=nxt.queue,
                               delay=nxt.delay or None, depends=list(nxt.depends) or None)

        def landed(raw: sc.JobData, now: float) -> str | None:
            # complete adds ``done`` (at ``now``, whole seconds) after this worker's pop
            # (then, with a next queue, a ``put`` there).
            after = _after_my_pop(raw, job.worker)
            if after and after[0].get("what") == "done" and _at(after[0].get("when"), now):
                return "complete" if nxt is None else raw["state"]
            return None

        state = await self._send(held, "complete", build, landed)
        if state is not None:
            job.state, job.queue = state, (nxt.queue if nxt is not None else None)
            self.w.stats.completed += 1

    async def _retry(self, held: _Held, delay: float) -> None:
        job = held.job
        queue = job.queue or ""

        def landed(raw: sc.JobData, now: float) -> int | None:
            # retry writes no history: the job is back in its queue with one retry less and
            # nothing after this worker's pop; with no retries left it adds ``failed`` (at
            # ``now``, whole seconds) instead.
            after = _after_my_pop(raw, job.worker)
            if after is None:
                return None
            if (raw["state"] == "failed" and after and after[0].get("what") == "failed"
                    and _at(after[0].get("when"), now)):
                return min(-1, int(raw["remaining"]))
            if (not after and raw["state"] in ("waiting", "scheduled")
                    and raw["remaining"] == job.remaining - 1):
                return max(0, int(raw["remaining"]))
            return None

        left = await self._send(
            held, "retry", lambda now: sc.retry(now, job.jid, queue, job.worker, delay), landed
        )
        if left is None:
            return
        job.remaining = left
        if left < 0:
            job.state = "failed"
            self.w.stats.failed += 1
            log.error("job %s: no retries left; the script failed it (failed-retries-%s)",
                      job.jid, queue)
        else:
            job.state = "scheduled" if delay else "waiting"
            self.w.stats.retried += 1

    async def _fail(self, held: _Held, error: BaseException) -> None:
        job = held.job
        # The script fails a job from any state for anyone: renew the lock first, so that a
        # job another worker holds by now is never failed from here.
        if await self._heartbeat_once(held) is None:
            return
        group, message = failure_group(error), failure_message(error)
        if await self._send(
            held, "fail", lambda now: sc.fail(now, job.jid, job.worker, group, message)
        ) is not None:
            job.state = "failed"
            self.w.stats.failed += 1

    async def _heartbeat_once(self, held: _Held) -> float | None:
        job = held.job
        expires = await self._send(
            held, "heartbeat", lambda now: sc.heartbeat(now, job.jid, job.worker)
        )
        if expires is not None:
            held.expires = expires
            job.expires = datetime.fromtimestamp(expires, timezone.utc)
            self.w.stats.heartbeats += 1
        return expires

    def _lose(self, held: _Held, why: str, now: float | None) -> None:
        """Mark ``held``'s job lost (at ``now``, for the event; None: already recorded)."""
        job = held.job
        if job.lost:
            return
        job.lost = True
        self.w.stats.lost += 1
        if self.events is not None and now is not None:
            self.events.lost(job.jid, held.raw, now)
        if held.scope is not None and self.cancel_lost:
            held.scope.cancel()
            log.warning("job %s: lock lost (%s); handler cancelled", job.jid, why)
        elif held.scope is not None:
            log.warning("job %s: lock lost (%s); the handler's result will be dropped "
                        "(job.lost is set)", job.jid, why)
        else:
            log.warning("job %s: lock lost (%s)", job.jid, why)

    # -- heartbeats ----------------------------------------------------------------------------

    async def _heartbeater(self) -> None:
        """Renew the lock of every held job at half of what is left of it. One task for all;
        each heartbeat runs in a task of its own, so a slow reply delays no other job's."""
        async with anyio.create_task_group() as tg:
            while True:
                wake = self.beat_wake = anyio.Event()
                now = anyio.current_time()
                soonest = math.inf
                for held in list(self.held.values()):
                    if held.finished or held.beating or held.job.lost:
                        continue
                    if held.due <= now:
                        held.beating = True
                        tg.start_soon(self._beat, held)
                    else:
                        soonest = min(soonest, held.due)
                with anyio.move_on_after(soonest - now):
                    await wake.wait()

    async def _beat(self, held: _Held) -> None:
        client, job = self.client, held.job
        assert client is not None
        try:
            if held.finished:
                return
            call = sc.heartbeat(client.clock(), job.jid, job.worker)
            try:
                expires = await client._run(call)
            except _NOT_OURS as exc:
                if not held.finished:  # once reporting began, the report finds out itself
                    self._lose(held, f"heartbeat refused: {exc.detail or exc}", _sent_now(call))
                return
            except JobwireError as exc:
                left = held.expires - client.clock()
                held.due = anyio.current_time() + max(0.05, min(1.0, left / 4))
                log.info("job %s: heartbeat failed (%s); %.1f s left on the lock", job.jid, exc,
                         left)
                return
            held.expires = expires
            job.expires = datetime.fromtimestamp(expires, timezone.utc)
            held.due = anyio.current_time() + max(0.0, expires - client.clock()) / 2
            self.w.stats.heartbeats += 1
        finally:
            held.beating = False
            self.beat_wake.set()


def _data_to_save(job: AsyncJob | Job) -> str:
    """The data ``complete`` sends for a handler's job: the JSON text as stored when the handler
    never read ``job.data`` (nothing is written again, so data the serializer cannot read, or
    another binding's spelling of JSON, goes back untouched), else ``job.data`` written by the
    client's serializer (what the handler changed in place is saved too).

    Raises:
        SerializationError: the serializer cannot write the handler's data.
    """
    if job._data is _UNREAD_ASYNC or job._data is _UNREAD_SYNC:
        return job._data_text()
    serializer: Any = job.client.serializer
    return _dump_text(serializer, job._data)


def _where(redis: AsyncRedis) -> str:
    """A Redis connection's server for ``repr``: its URL with the database, never the
    credentials, and ``tls`` when it uses TLS that the URL does not say."""
    shown = redis._where()
    return shown + " tls" if redis.ssl_context is not None and not redis.options.tls else shown


def _describe(shown: object, worker: AsyncWorker) -> str:
    """The ``repr`` of both workers: ``<qless_client.Worker redis://127.0.0.1:6379/0
    queues=['emails'] concurrency=8 worker='host-42'>``."""
    return describe(
        shown, worker._where, f"queues={worker.queues!r}",
        "" if worker.mode == "ordered" else f"mode={worker.mode!r}",
        f"concurrency={worker.concurrency}", f"worker={worker.worker_name!r}",
    )


def _at(value: object, now: float) -> bool:
    """Whether a history time is ``now``: the script writes ``floor(now)``."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and value == math.floor(now))


def _sent_now(call: sc.ScriptCall[Any]) -> float:
    """The ``now`` a script call carries, exactly as the script reads it."""
    return call.now


#: The history events that change who holds a job or where it is (the others: ``timed-out``,
#: a lock that ran out but is still the holder's in its grace period, and ``log`` messages).
_MOVES = frozenset({"put", "popped", "done", "failed"})


def _after_my_pop(raw: sc.JobData, worker: str) -> list[sc.HistoryEntry] | None:
    """The :data:`_MOVES` events after ``worker``'s last pop of the job, or None when it has
    none. A report of this worker's is the *first* of them: history times are whole seconds,
    so a ``done`` further on, in the same second, may be another worker's after a move and a
    pop (a ``put`` and a ``popped`` come first then)."""
    history = raw["history"]
    for i in range(len(history) - 1, -1, -1):
        if history[i].get("what") == "popped" and history[i].get("worker") == worker:
            return [e for e in history[i + 1:] if e.get("what") in _MOVES]
    return None


#: The history events at which qless-core sets a job's ``time``, the start of the next wait.
_WAIT_STARTS = frozenset({"put", "popped", "done"})


def _put_time(raw: sc.JobData) -> float | None:
    """When a popped job's wait began, as qless-core's ``pop`` counts it (``now`` minus the
    job's ``time``): the last ``put``, ``popped`` or ``done`` in its history before this pop
    (the last entry), in whole seconds."""
    history = raw.get("history") or []
    for entry in reversed(history[:-1]):
        when = entry.get("when")
        if entry.get("what") in _WAIT_STARTS and isinstance(when, (int, float)) \
                and not isinstance(when, bool):
            return float(when)
    return None


class _Events:
    """The observer (:attr:`AsyncClient.observer`) of a worker's client. It runs as each reply
    is read, so it sees the calls in the order the server ran them, which the tasks that sent
    them may not resume in: it follows which jobs this worker holds (popped, not settled), and
    a job a pop hands out again while still held was lost by the earlier pop (its lock ran
    out; ``repopped`` is told, with that pop's job). With an event sink, every script call on
    that client that pops, completes, fails or retries one of this worker's jobs becomes an
    event, with that call's own ``now``. Handlers' jobs are bound to the same client, so what
    a handler settles itself is seen too, and so are hand-backs (``give_back``) and the pop
    guard's calls."""

    def __init__(self, sink: EventSink | None, worker_name: str,
                 repopped: Callable[[str, sc.JobData], None]) -> None:
        self.sink = sink
        self.worker_name = worker_name
        self.repopped = repopped
        #: The jobs popped and not settled yet: jid -> (queue, attempt, the job as popped).
        self._popped: dict[str, tuple[str, int, sc.JobData]] = {}

    def __call__(self, call: sc.ScriptCall[Any], result: Any) -> None:
        if call.command in _OBSERVED:
            self._observe(call, result)

    def _emit(self, event: str, now: float, queue: str, jid: str, attempt: int,
              group: str | None = None, put_time: float | None = None) -> None:
        if self.sink is not None:
            self.sink.emit(event, now, "qless", queue, jid, self.worker_name, put_time, group,
                           attempt)

    def _observe(self, call: sc.ScriptCall[Any], result: Any) -> None:
        now = _sent_now(call)
        if call.command == "pop":
            for raw in result:
                jid = raw["jid"]
                old = self._popped.pop(jid, None)
                if old is not None:  # ours, popped again after its lock ran out
                    self._emit("lost", now, old[0], jid, old[1])
                    self.repopped(jid, old[2])
                queue = raw["queue"] or call.args[2]
                attempt = raw["retries"] - raw["remaining"] + 1
                self._popped[jid] = (queue, attempt, raw)
                self._emit("reserved", now, queue, jid, attempt, put_time=_put_time(raw))
            return
        jid = call.args[2]
        known = self._popped.pop(jid, None)
        if known is None:
            return  # not a job this worker popped
        queue, attempt, _ = known
        if call.command == "complete":
            self._emit("completed", now, queue, jid, attempt)
        elif call.command == "fail":
            self._emit("failed", now, queue, jid, attempt, group=call.args[4])
        else:  # retry
            self._emit("retried", now, queue, jid, attempt)
            if result < 0:  # no retries were left: the script failed the job
                group = call.args[6] if len(call.args) > 6 else f"failed-retries-{queue}"
                self._emit("failed", now, queue, jid, attempt, group=group)

    def lost(self, jid: str, raw: sc.JobData, now: float) -> None:
        """Record that the pop of ``jid`` that returned ``raw`` lost its lock at ``now``."""
        known = self._popped.get(jid)
        if known is not None and known[2] is raw:
            del self._popped[jid]
            self._emit("lost", now, known[0], jid, known[1])

    def forget(self, jid: str, raw: sc.JobData) -> None:
        """The worker is done with the pop of ``jid`` that returned ``raw`` (settled, lost, or
        its report failed); a later pop of the job is left alone."""
        known = self._popped.get(jid)
        if known is not None and known[2] is raw:
            del self._popped[jid]


#: The script commands whose calls become events.
_OBSERVED = frozenset({"pop", "complete", "fail", "retry"})


class Worker:
    """Run a blocking handler on jobs popped from ``queues``, up to ``concurrency`` at once in
    threads, over one connection. Same arguments and behaviour as :class:`AsyncWorker`
    (``address`` is an address here, not a client: the connection lives on the worker's own
    event loop).

        Worker("redis://127.0.0.1:6379/0", queues=["emails"], concurrency=8).run(handle)

    The handler gets a :class:`~qless_client.Job` whose calls (``job.heartbeat()``,
    ``job.complete(next=...)``...) run on the worker's connection
    (:meth:`AsyncClient.blocking`). A thread cannot be cancelled: when the job's lock is lost,
    ``job.lost`` becomes true and whatever the handler then returns or raises is dropped. Over
    ``handler_timeout`` or ``shutdown_timeout`` the thread is abandoned (it runs on; its result
    is ignored) and the job is failed or handed back. A thread that runs on (abandoned, or on
    a lost job) still fills its slot until it returns: the worker never runs more than
    ``concurrency`` handler threads, nor pops more jobs than it has slots free.

    The constructor raises what :class:`AsyncWorker`'s raises (not :meth:`run`), and:

    Raises:
        TypeError: a client as ``address``, or a keyword it does not take (``concurency=8``).
    """

    def __init__(
        self,
        address: AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        queues: Sequence[str],
        mode: Mode = "ordered",
        concurrency: int = 1,
        idle_wait: float = 1.0,
        retry: RetryPolicy | None = None,
        handler_timeout: float | None = None,
        shutdown_timeout: float = 30.0,
        backoff: Backoff | None = None,
        worker_name: str | None = None,
        events: EventSink | None = None,
        **redis_options: Unpack[RedisOptions],
    ) -> None:
        if isinstance(address, (AsyncClient, Client)):
            raise TypeError("Worker takes an address (its connection lives on its own event "
                            "loop); AsyncWorker takes an AsyncClient")
        options: dict[str, Any] = {
            "queues": queues, "mode": mode, "concurrency": concurrency, "idle_wait": idle_wait,
            "retry": retry, "handler_timeout": handler_timeout,
            "shutdown_timeout": shutdown_timeout, "backoff": backoff,
            "worker_name": worker_name, "events": events, **redis_options,
        }
        shape = AsyncWorker(address, port, **options)  # bad arguments raise here
        self._shown = _describe(self, shape)

        def make() -> Any:  # an AsyncWorker whose handlers are blocking ones in threads
            worker = AsyncWorker(address, port, **options)
            worker._threads = True
            return worker

        self._make = make
        self._runner: BlockingRunner[Job, WorkerStats] = BlockingRunner(make, WorkerStats)
        self._stop_requested = False

    def __repr__(self) -> str:
        return self._shown

    @property
    def stats(self) -> WorkerStats:
        """The counters of the running (or last) run."""
        return self._runner.stats

    def run(self, handler: SyncHandler, *, handle_signals: bool | None = None) -> None:
        """Block, handling jobs, until :meth:`stop` (from any thread) or SIGTERM/SIGINT (when
        ``handle_signals``; by default in the main thread). A stop ends this run only: the
        worker may run again."""
        last = self._runner
        runner = self._runner = BlockingRunner(self._make, lambda: last.stats)
        if self._stop_requested:  # stop() came before this run
            runner.stop()
        try:
            runner.run(handler, handle_signals)
        finally:
            self._stop_requested = False

    def stop(self) -> None:
        """Ask the worker to stop (from any thread, a handler's included)."""
        self._stop_requested = True
        self._runner.stop()
