"""The worker engine every protocol's worker runs on: slots, graceful stop and signals,
reconnect with back-off, the in-flight count, and the blocking face of an async worker.

What the engine owns
--------------------
* **Slots.** ``concurrency`` long-lived handler tasks (cheaper than a task per job), in a task
  group of their own hosted by a task, so that a shutdown can cancel the handlers while the
  connection still runs to carry their hand-backs. A fetched job is :meth:`Engine.offer`-ed:
  held (``stats.in_flight`` counts it) and queued for the next idle slot. A slot runs the
  handler (under ``handler_timeout``, a failure like any other) and gives the outcome to the
  source to settle; :meth:`Engine.done` ends the hold. Threads a blocking handler was given up
  in still fill a slot until they return (:meth:`Engine.given_up`).
* **Stop.** :meth:`Engine.stop` (a handler, another task, SIGTERM/SIGINT through
  :func:`jobwire._signals.watch_signals`): no new fetches; the running handlers (and a fetch
  still winding down, such as a Workq lease that cannot be withdrawn) get until
  ``shutdown_timeout`` seconds after the stop; then they are cancelled and each job, and those
  fetched but not started, is handed back (the source's way; :attr:`Engine.past_deadline`
  tells the fetch to hand back what it still brings); then the source drains what it queued.
* **Per job** the engine costs a few plain calls: :meth:`Engine.offer`, the slot's handler
  call, :meth:`Source.settle` and the end of the hold (:meth:`Source.forget` only when the
  source defines it). :attr:`Engine.wake` is the current event's own ``set`` and events are
  made from the running backend's class (on asyncio: one loop future each, no
  ``asyncio.Event``), so no wrapper runs per reply.
* **Reconnect.** The source's ``connect`` and its fetch loop raising one of ``reconnect_on``
  close the connection and wait a jittered back-off (``stats.reconnects`` counts it) before
  trying again; a stop cuts the wait short.

What a protocol supplies (:class:`Source`)
------------------------------------------
How to open the connection jobs come on (``connect``), which tasks must run on it beside the
fetching (``connection_tasks``: a reply reader, a watchdog, the keep-alive that touches or
heartbeats held jobs), how to fetch (``fetch``: a loop that offers jobs while
:attr:`Engine.free` is above zero, until the engine stops), how to settle a handler's outcome
(``settle``), how to hand a job back at shutdown (``give_back``) and how to wait for the
outcomes it queued (``drain``). Everything protocol-shaped stays there: beanstalk's pipelined
reserves and batched acks, qless's pops and heartbeats.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from jobwire._backoff import Backoff
from jobwire._signals import watch_signals
from jobwire._streams import asyncio_loop
from jobwire._threads import run_in_thread
from jobwire.errors import JobwireConnectionError

if TYPE_CHECKING:
    import asyncio

__all__ = ["BlockingRunner", "Counters", "Engine", "Source", "Wakeup"]

J = TypeVar("J")
A = TypeVar("A")
S = TypeVar("S")
H_co = TypeVar("H_co", covariant=True)


class Wakeup(Protocol):
    """What :meth:`Engine.changed` hands out: an ``anyio.Event``, or on asyncio the same three
    calls on one loop future, for the one task that waits on it."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> None: ...


class _FutureEvent:
    """An event for one waiting task on asyncio, made of one loop future. An ``asyncio.Event``
    (under anyio's) looks the running loop up on every wait, which on Python 3.11 costs a
    getpid() system call: once per job for a handler slot. Waiting on an event already set is
    a checkpoint, as with ``anyio.Event``; a cancelled wait leaves the event set."""

    __slots__ = ("_future",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._future: asyncio.Future[None] = loop.create_future()

    def set(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    def is_set(self) -> bool:
        return self._future.done()

    async def wait(self) -> None:
        if self._future.done():
            await anyio.lowlevel.checkpoint()
        else:
            await self._future


class Counters(Protocol):
    """The counters the engine keeps in a worker's ``stats`` (every ``WorkerStats`` has them)."""

    in_flight: int
    reconnects: int


class Source(Generic[J]):
    """What one protocol supplies to the :class:`Engine`: how to connect, fetch, settle and
    hand back its jobs (``J``: the protocol's record of one held job). The defaults do
    nothing."""

    async def connect(self) -> None:
        """Open the connection jobs come on (again, after a loss).

        Raises:
            One of the engine's ``reconnect_on``: back off and try again.
        """

    def connection_tasks(self) -> Sequence[Callable[[], Awaitable[None]]]:
        """Tasks that run beside :meth:`fetch` while the connection is open (a reply reader, a
        watchdog, the keep-alive of held jobs); each may raise ``JobwireConnectionError``, which
        ends the connection (the engine reconnects)."""
        return ()

    async def fetch(self) -> None:
        """Fetch jobs, :meth:`Engine.offer`-ing each, while the engine is not stopping (ask
        :attr:`Engine.free` how many; :meth:`Engine.changed` wakes when it grows). Return once
        the engine stops; a fetch that cannot stop at once (a request already sent) may finish
        it, and offer what it brings unless :attr:`Engine.past_deadline`.

        Raises:
            JobwireConnectionError: the connection was lost (the engine reconnects).
        """

    def settle(self, job: J, result: object, error: Exception | None) -> Awaitable[None] | None:
        """Report a handler's outcome: its ``result``, or the ``error`` it raised (or
        ``TimeoutError`` past ``handler_timeout``); what to await for it, if anything (an
        outcome queued without waiting costs no coroutine). The engine ends the hold after."""
        return None

    async def give_back(self, jobs: Sequence[J], *, started: bool) -> None:
        """Hand ``jobs`` back at shutdown: their handlers were cancelled (``started``) or never
        ran. Runs in a cancelled scope: shield what must wait. The engine ends the holds."""

    def forget(self, job: J) -> None:
        """``job``'s hold has ended (called once, from :meth:`Engine.done`)."""

    async def flush(self) -> None:
        """Send what is queued (the engine calls it before it waits for a change)."""

    async def drain(self) -> None:
        """After the handlers: wait until what was queued for them is answered."""

    async def disconnect(self) -> None:
        """Close the connection (it was lost, or the run ends)."""


def _same(job: Any) -> Any:
    return job


async def _host_handlers(*, task_status: anyio.abc.TaskStatus[anyio.abc.TaskGroup]) -> None:
    async with anyio.create_task_group() as tg:
        task_status.started(tg)
        await anyio.sleep_forever()


class Engine(Generic[J]):
    """Runs one worker: ``concurrency`` handler slots fed by a :class:`Source`, a graceful
    stop, and reconnects with back-off (see the module docstring).

    Args:
        source: the protocol's side.
        stats: the worker's counters (``in_flight`` and ``reconnects`` are kept here).
        logger: the worker's logger.
        concurrency: handler slots.
        handler_timeout: seconds a handler may run; past it, it fails with ``TimeoutError``.
        shutdown_timeout: seconds the running handlers get once stopping.
        backoff: the delays between reconnects.
        reconnect_on: the errors of ``connect`` or ``fetch`` that mean "reconnect".
        lost_message: the warning logged before a reconnect, with ``%s`` for the error and
            ``%.2f`` for the delay.
    """

    def __init__(
        self, source: Source[J], stats: Counters, logger: logging.Logger, *,
        concurrency: int, handler_timeout: float | None, shutdown_timeout: float,
        backoff: Backoff, reconnect_on: tuple[type[BaseException], ...],
        lost_message: str = "connection lost (%s); reconnecting in %.2f s",
    ) -> None:
        self.source = source
        self.stats = stats
        self.log = logger
        self.concurrency = concurrency
        self.handler_timeout = handler_timeout
        self.shutdown_timeout = shutdown_timeout
        self.backoff = backoff
        self.reconnect_on = reconnect_on
        self.lost_message = lost_message
        #: Set by :meth:`stop`: no new fetches.
        self.stopping = False
        #: Set once the handlers had their ``shutdown_timeout`` after the stop and were
        #: cancelled: a job fetched from now on is handed back, not offered.
        self.past_deadline = False
        self._stopped_at = 0.0  # time.monotonic() of the stop
        #: Fetched jobs waiting for an idle slot (in order), and every job held (waiting or
        #: running) until :meth:`done`.
        self.ready: deque[J] = deque()
        self.holding: set[J] = set()
        #: Handler threads given up (the shutdown deadline, ``handler_timeout``) but still
        #: running: they fill a slot until they return.
        self.abandoned = 0
        #: Whether a job fetched now is handled (running, not stopping).
        self.accepting = False
        #: Makes the events of :meth:`changed` and of idle slots for the running backend
        #: (``anyio.Event()`` looks the backend up each time); set by :meth:`run`.
        self._event: Callable[[], Wakeup] = anyio.Event
        self._wake: Wakeup = anyio.Event()
        #: Sets the event :meth:`changed` handed out last (a bound method, rebound there).
        self.wake: Callable[[], None] = self._wake.set
        self._stop_event: anyio.Event | None = None
        self._idle: list[Wakeup] = []
        self._handlers_tg: anyio.abc.TaskGroup | None = None
        self._handler: Callable[[Any], Awaitable[object]] | None = None
        self._view: Callable[[J], Any] = _same
        self._settle = source.settle
        #: ``source.forget``, unless the source keeps nothing to forget.
        self._forget: Callable[[J], None] | None = (
            None if type(source).forget is Source.forget else source.forget
        )

    # -- what sources use --------------------------------------------------------------------

    @property
    def free(self) -> int:
        """Slots with no job held, less the threads given up."""
        return self.concurrency - len(self.holding) - self.abandoned

    def changed(self) -> Wakeup:
        """A fresh event, set at the next change (a job offered or done, a reply that called
        :attr:`wake`, a stop). Take it *before* looking at the state it guards."""
        self._wake = wake = self._event()
        self.wake = wake.set
        return wake

    def offer(self, job: J) -> None:
        """Hold ``job`` and queue it for the next idle slot."""
        self.holding.add(job)
        self.stats.in_flight += 1
        self.ready.append(job)
        if self._idle:
            self._idle.pop().set()

    def done(self, job: J) -> None:
        """End ``job``'s hold (again: nothing); tells the source (:meth:`Source.forget`)."""
        if job in self.holding:
            self.holding.discard(job)
            self.stats.in_flight -= 1
            if self._forget is not None:
                self._forget(job)
        self.wake()

    def given_up(self, threads: int) -> None:
        """``threads`` more (or, negative, fewer) handler threads given up but still running."""
        self.abandoned += threads
        self.wake()

    async def pause(self, delay: float) -> None:
        """Wait ``delay`` seconds, or until :meth:`stop`."""
        assert self._stop_event is not None
        with anyio.move_on_after(delay):
            await self._stop_event.wait()

    async def back_off(self, error: BaseException, message: str | None = None) -> None:
        """Count a reconnect, log it (``message``: as ``lost_message``) and :meth:`pause` for
        the next back-off delay."""
        self.stats.reconnects += 1
        delay = self.backoff.next_delay()
        self.log.warning(message or self.lost_message, error, delay)
        await self.pause(delay)

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds, looking again at every change (flushing the source
        before each wait)."""
        while True:
            wake = self.changed()
            if condition():
                return
            await self.source.flush()
            await wake.wait()

    # -- control -----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop fetching; :meth:`run` lets the running handlers finish (up to
        ``shutdown_timeout``), hands back what is left and returns. Safe from a handler,
        another task, or a signal handler in the event loop's thread; before :meth:`run`, it
        makes the next run return at once."""
        if not self.stopping:
            self._stopped_at = time.monotonic()
        self.stopping = True
        self.accepting = False
        self.wake()
        if self._stop_event is not None:
            self._stop_event.set()

    async def run(self, handler: Callable[[A], Awaitable[object]], view: Callable[[J], A], *,
                  signals: bool) -> None:
        """Connect, fetch and handle until :meth:`stop` (or SIGTERM/SIGINT with ``signals``),
        reconnecting with back-off; then shut down gracefully and close. A handler is called
        with ``view(job)``: what the protocol hands its handlers."""
        self._handler, self._view = handler, view
        loop = asyncio_loop()
        if loop is None:
            self._event = type(anyio.Event())
        else:
            self._event = partial(_FutureEvent, loop)
        # Waited on by more than one task in turn, and under timeouts: an anyio.Event.
        self._stop_event = anyio.Event()
        if self.stopping:
            self._stop_event.set()
        try:
            async with anyio.create_task_group() as outer:
                if signals:
                    outer.start_soon(watch_signals, self.stop, self.log)
                self._handlers_tg = await outer.start(_host_handlers)
                self.accepting = not self.stopping
                for _ in range(self.concurrency):
                    self._handlers_tg.start_soon(self._slot)
                while not self.stopping:
                    try:
                        await self.source.connect()
                        await self._serve()
                    except self.reconnect_on as exc:
                        await self.source.disconnect()
                        if not self.stopping:
                            await self.back_off(exc)
                outer.cancel_scope.cancel()
        finally:
            self._handlers_tg = None
            self.accepting = False
        await self.source.disconnect()

    async def _serve(self) -> None:
        """Run the source's connection tasks and its fetch loop until stop or a lost connection;
        once stopping, wait for the handlers (and for the fetch loop to end) and then for the
        source to drain.

        Raises:
            JobwireConnectionError, or another of ``reconnect_on``: the connection was lost.
        """
        lost: list[BaseException] = []
        fetched = False
        losses: tuple[type[BaseException], ...] = (JobwireConnectionError, *self.reconnect_on)

        async def guarded(task: Callable[[], Awaitable[None]]) -> None:
            try:
                await task()
            except losses as exc:
                lost.append(exc)
                tg.cancel_scope.cancel()

        async def fetch() -> None:
            nonlocal fetched
            await guarded(self.source.fetch)
            fetched = True
            self.wake()

        assert self._stop_event is not None
        async with anyio.create_task_group() as tg:
            for task in self.source.connection_tasks():
                tg.start_soon(guarded, task)
            tg.start_soon(fetch)
            await self._stop_event.wait()
            await guarded(lambda: self._wait_handlers(lambda: fetched))
            await guarded(self.source.drain)
            tg.cancel_scope.cancel()
        if lost:
            raise lost[0]

    # -- handling ----------------------------------------------------------------------------

    async def _slot(self) -> None:
        """One of ``concurrency`` long-lived handler tasks."""
        ready, idle, event = self.ready, self._idle, self._event
        while True:
            if ready:
                await self._handle(ready.popleft())
            else:
                woken = event()
                idle.append(woken)
                try:
                    await woken.wait()
                except BaseException:
                    if woken in idle:
                        idle.remove(woken)
                    raise

    async def _handle(self, job: J) -> None:
        """Run the handler on ``job`` and settle its outcome; the hot path, so :meth:`done`
        is written out at its end."""
        handler = self._handler
        assert handler is not None
        try:
            if self.handler_timeout is None:
                result = await handler(self._view(job))
            else:
                with anyio.fail_after(self.handler_timeout):
                    result = await handler(self._view(job))
        except anyio.get_cancelled_exc_class():
            try:
                await self.source.give_back((job,), started=True)
            finally:
                self.done(job)
            raise
        except Exception as exc:  # the handler's failure is the job's outcome
            try:
                settling = self._settle(job, None, exc)
                if settling is not None:
                    await settling
            finally:
                self.done(job)
            return
        except BaseException:
            self.done(job)
            raise
        try:
            settling = self._settle(job, result, None)
            if settling is not None:
                await settling
        finally:
            holding = self.holding
            if job in holding:
                holding.discard(job)
                self.stats.in_flight -= 1
                if self._forget is not None:
                    self._forget(job)
            self.wake()

    async def _wait_handlers(self, fetched: Callable[[], bool]) -> None:
        """Once stopping: the handlers (and a fetch loop still winding down, whose jobs run
        like any other) get until ``shutdown_timeout`` after the stop; then the handlers are
        cancelled (each hands its job back as it ends), the jobs no slot started are handed
        back, and :attr:`past_deadline` tells the fetch loop to hand back what it still
        brings."""

        def finished() -> bool:
            return fetched() and not self.holding

        if finished():
            return
        if self.holding:
            self.log.info("stopping: waiting up to %.1f s for %d handler(s)",
                          self.shutdown_timeout, len(self.holding))
        left = self._stopped_at + self.shutdown_timeout - time.monotonic()
        with anyio.move_on_after(max(left, 0.0)):
            await self.until(finished)
        if finished():
            return
        self.past_deadline = True
        if self.holding and self._handlers_tg is not None:
            self._handlers_tg.cancel_scope.cancel()
            leftover = list(self.ready)
            self.ready.clear()
            if leftover:
                try:
                    await self.source.give_back(leftover, started=False)
                finally:
                    for job in leftover:
                        self.done(job)
        await self.until(finished)


class _Runs(Protocol[H_co, S]):
    """An async worker as :class:`BlockingRunner` drives it."""

    stats: S
    _engine: Engine[Any]

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None: ...

    def stop(self) -> None: ...

    async def run(self, handler: Callable[[H_co], Awaitable[Any]], *,
                  handle_signals: bool | None = None) -> None: ...


class BlockingRunner(Generic[A, S]):
    """The blocking face of an async worker: :meth:`run` runs a fresh async worker on an event
    loop in the calling thread (``anyio.run``), each blocking handler in a daemon thread
    (:func:`jobwire._threads.run_in_thread`, at most ``concurrency`` at once); :meth:`stop`
    works from any thread.

    Args:
        make: builds the async worker for one run.
        empty: the counters to show before the first run.
    """

    def __init__(self, make: Callable[[], _Runs[A, S]], empty: Callable[[], S]) -> None:
        self._make = make
        self._empty = empty
        self._async: _Runs[A, S] | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._stop_requested = False
        self._ready = threading.Event()

    @property
    def stats(self) -> S:
        """The counters of the running (or last) worker."""
        return self._async.stats if self._async is not None else self._empty()

    def run(self, handler: Callable[[A], object], handle_signals: bool | None) -> None:
        """Block, handling jobs, until :meth:`stop` or SIGTERM/SIGINT."""
        anyio.run(self._main, handler, handle_signals)

    async def _main(self, handler: Callable[[A], object], handle_signals: bool | None) -> None:
        worker = self._make()
        engine = worker._engine
        limiter = anyio.CapacityLimiter(engine.concurrency)

        async def in_thread(job: A) -> object:
            # Over handler_timeout or at shutdown the thread runs on in its slot until it
            # returns (the limiter, released at once, does not count it).
            return await run_in_thread(handler, job, limiter=limiter, given_up=engine.given_up)

        self._async = worker
        self._token = anyio.lowlevel.current_token()
        self._ready.set()
        if self._stop_requested:
            worker.stop()
        try:
            async with worker:
                await worker.run(in_thread, handle_signals=handle_signals)
        finally:
            self._stop_requested = False  # this run took it: the next one runs

    def stop(self) -> None:
        """Ask the worker to stop (from any thread, a handler included)."""
        self._stop_requested = True
        worker, token = self._async, self._token
        if worker is None or token is None:
            return
        try:
            anyio.from_thread.run_sync(worker.stop, token=token)
        except RuntimeError:  # called from the event loop thread itself
            worker.stop()
