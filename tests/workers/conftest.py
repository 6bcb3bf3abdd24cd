"""The four systems as the worker tests drive them.

For the signal tests (``test_signals.py``): a server to work against, how to put one job there
for a worker process (``tests/signal_worker.py``) to take, the worker's stats that count a job
done or handed back, and how the server shows it done or handed back.

For the conformance suite (``test_conformance.py``): each system's worker made in a *mode*
(``sync``: the package's ``Worker``; ``asyncio``/``trio``: its ``AsyncWorker`` on that
backend), always run in a thread of its own (:class:`Running`) with handlers that do the same
in every mode (:class:`Handlers`: count, wait at a gate the test opens, raise for the payloads
named, return the system's result); the jobs put on the server and what the server says of
each (:class:`Jobs`); and a TCP relay between a worker and its server that can cut the
worker's connections and refuse new ones (:class:`Relay`).

The servers are the real ones where one runs here (beanstalkd, gearmand, redis-server for
qless; the bundled beanstalk and Gearman servers too, for the tests that take
``bundled=True`` systems); Workq's is the session backend's (the bundled server by default).
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire.testing import (
    BeanstalkServer,
    GearmanServer,
    RedisServer,
    WorkqServer,
    start_beanstalk,
    start_gearman,
)
from qless_client._redis import Redis
from tests.waiting import await_until, wait_until

#: How long a handler waits at its gate, and a test for a worker's thread: bounds on
#: something never happening, not speed checks.
BOUND = 30.0


@dataclass
class Trial:
    """One job put for the worker process: its id when known before a worker takes it (a
    Gearman handle is known only once the job is assigned), and checks on the server."""

    job_id: str | None
    #: Assert the job ended done (the handler's result taken), given its id.
    done: Callable[[str], None]
    #: Assert the job was handed back to be worked again, given its id.
    handed_back: Callable[[str], None]


class Jobs:
    """Jobs put on one system's server, by payload (each payload unique), and what the server
    says of each. ``queue`` is a tube, a Gearman function, a Workq job name or a qless
    queue."""

    def put(self, queue: str, payloads: list[str], *, lingering: bool = False) -> None:
        """Put a job per payload in ``queue``; ``lingering``: its handler will outlive the
        worker's ``shutdown_timeout`` (a Workq job gets a short TTR, to be leased again)."""
        raise NotImplementedError

    def assert_done(self, payload: str) -> None:
        """The server took the handler's result: the job is gone (beanstalk: deleted), its
        result reached the client (Gearman, Workq), or it is complete (qless)."""
        raise NotImplementedError

    def assert_failed(self, payload: str, group: str) -> None:
        """The server has the job failed for good (beanstalk: buried, with the worker's
        ``fail_options``)."""
        raise NotImplementedError

    def assert_waiting(self, queue: str, payloads: list[str]) -> None:
        """No worker took these jobs: they wait on the server as they were put."""
        raise NotImplementedError

    def assert_handed_back(self, queue: str, payload: str) -> None:
        """The job was handed back to be worked again (each system's way)."""
        raise NotImplementedError

    def close(self) -> None:
        """Clean up (Gearman: jobs still waiting are worked off, so their callers end)."""


class WorkerSystem:
    """One system, for the worker tests."""

    #: The SYSTEM argument of ``tests/signal_worker.py``, and the ``system`` of its events.
    name: str
    #: The worker's stats once its one job is done; once it was handed back at shutdown.
    done_stats: ClassVar[dict[str, int]]
    handed_back_stats: ClassVar[dict[str, int]]
    #: The stats counter of jobs fetched, and that of results the server took.
    fetched: str
    completed: str
    #: The event of a job handed back at the shutdown deadline.
    handed_back_event: str
    #: Whether the worker takes ``handler_timeout``.
    handler_timeout: bool = False
    #: Whether a sync ``Worker``'s stats count every run (else the last run's).
    stats_across_runs: bool = False
    #: Whether the log line of a failed handler names the queue (besides the job).
    logs_queue: bool = False
    #: The server: "real" or "bundled" (beanstalk, Gearman).
    server: str = "real"

    def __str__(self) -> str:
        return self.name

    def put(self, url: str, queue: str, lingering: bool) -> AbstractContextManager[Trial]:
        raise NotImplementedError

    # -- the worker --------------------------------------------------------------------------

    def make(self, mode: str, url: str, queues: list[str], **options: Any) -> Any:
        """The package's ``Worker`` (mode ``sync``) or ``AsyncWorker`` on ``queues``."""
        raise NotImplementedError

    def run_sync(self, worker: Any, queues: list[str], handler: Callable[[Any], object]) -> None:
        worker.run(handler, handle_signals=False)

    async def run_async(self, worker: Any, queues: list[str],
                        handler: Callable[[Any], Any]) -> None:
        await worker.run(handler, handle_signals=False)

    def payload(self, job: Any) -> str:
        raise NotImplementedError

    def job_id(self, job: Any) -> str:
        raise NotImplementedError

    def result(self, payload: str) -> object:
        """What a handler returns for a job done."""
        return None

    def connections(self, concurrency: int) -> int:
        """The connections a worker keeps open to the server."""
        return 1

    #: Options that make a handler's raise the end of its job.
    fail_options: ClassVar[dict[str, Any]] = {}

    def counts(self, *, done: int, failed: int) -> dict[str, int]:
        """The stats after ``done`` jobs done and ``failed`` failed (with ``fail_options``)."""
        raise NotImplementedError

    def fail_events(self, queue: str, group: str) -> list[tuple[Any, ...]]:
        """A failing job's events, as :meth:`event` shows them, under ``event_options``."""
        return [("reserved", queue, None), ("failed", queue, group)]

    #: Options of the events test (a retry policy that retries once).
    event_options: ClassVar[dict[str, Any]] = {}

    def event(self, record: dict[str, Any]) -> tuple[Any, ...]:
        """The part of an event record the events test compares."""
        return (record["event"], record["queue"], record["group"])

    def jobs(self, url: str) -> AbstractContextManager[Jobs]:
        raise NotImplementedError


# -- beanstalk ----------------------------------------------------------------------------------

class _BeanstalkJobs(Jobs):
    def __init__(self, url: str) -> None:
        self.client = beanstalk_client.Client(url)
        self.ids: dict[str, int] = {}

    def put(self, queue: str, payloads: list[str], *, lingering: bool = False) -> None:
        self.client.use(queue)
        for payload in payloads:
            self.ids[payload] = self.client.put(payload.encode(), priority=7)

    def assert_done(self, payload: str) -> None:
        with pytest.raises(beanstalk_client.NotFound):
            self.client.stats_job(self.ids[payload])

    def assert_failed(self, payload: str, group: str) -> None:
        stats = self.client.stats_job(self.ids[payload])
        assert (stats["state"], stats["pri"]) == ("buried", 7)

    def assert_waiting(self, queue: str, payloads: list[str]) -> None:
        for payload in payloads:
            stats = self.client.stats_job(self.ids[payload])
            assert (stats["state"], stats["reserves"]) == ("ready", 0), stats

    def assert_handed_back(self, queue: str, payload: str) -> None:
        stats = self.client.stats_job(self.ids[payload])  # ready again, as it was put
        assert (stats["state"], stats["pri"], stats["releases"]) == ("ready", 7, 1)

    def close(self) -> None:
        self.client.close()


@contextmanager
def _beanstalk_put(url: str, tube: str, lingering: bool) -> Iterator[Trial]:
    with beanstalk_client.Client(url) as client:
        client.use(tube)
        job_id = client.put(b"x", priority=7)

        def deleted(job: str) -> None:
            with pytest.raises(beanstalk_client.NotFound):
                client.stats_job(int(job))

        def released(job: str) -> None:  # ready again, as it was put
            stats = client.stats_job(int(job))
            assert (stats["state"], stats["pri"]) == ("ready", 7)

        yield Trial(str(job_id), deleted, released)


class Beanstalk(WorkerSystem):
    name = "beanstalk"
    done_stats: ClassVar[dict[str, int]] = {
        "reserved": 1, "deleted": 1, "released": 0, "in_flight": 0,
    }
    handed_back_stats: ClassVar[dict[str, int]] = {"deleted": 0, "released": 1}
    fetched, completed, handed_back_event = "reserved", "deleted", "released"
    handler_timeout = True
    fail_options: ClassVar[dict[str, Any]] = {
        "retry": beanstalk_client.RetryPolicy(base_delay=0, bury_after=1),
    }
    event_options: ClassVar[dict[str, Any]] = {
        "retry": beanstalk_client.RetryPolicy(base_delay=0, bury_after=2),
    }

    def __init__(self, server: str = "real") -> None:
        self.server = server

    def put(self, url: str, queue: str, lingering: bool) -> AbstractContextManager[Trial]:
        return _beanstalk_put(url, queue, lingering)

    def make(self, mode: str, url: str, queues: list[str], **options: Any) -> Any:
        cls = beanstalk_client.Worker if mode == "sync" else beanstalk_client.AsyncWorker
        return cls(url, tubes=queues, **options)

    def payload(self, job: Any) -> str:
        return job.body.decode()  # type: ignore[no-any-return]

    def job_id(self, job: Any) -> str:
        return str(job.id)

    def counts(self, *, done: int, failed: int) -> dict[str, int]:
        return {"reserved": done + failed, "deleted": done, "failed": failed, "buried": failed,
                "released": 0, "lost": 0, "reconnects": 0, "in_flight": 0}

    def fail_events(self, queue: str, group: str) -> list[tuple[Any, ...]]:
        """Released once (``bury_after=2``), then buried; the failures carry their attempt."""
        return [("reserved", queue, None, None), ("failed", queue, group, 1),
                ("released", queue, None, None),
                ("reserved", queue, None, None), ("failed", queue, group, 2),
                ("buried", queue, None, None)]

    def event(self, record: dict[str, Any]) -> tuple[Any, ...]:
        return (record["event"], record["queue"], record["group"], record["attempt"])

    @contextmanager
    def jobs(self, url: str) -> Iterator[Jobs]:
        jobs = _BeanstalkJobs(url)
        try:
            yield jobs
        finally:
            jobs.close()


# -- Gearman ------------------------------------------------------------------------------------

class _GearmanJobs(Jobs):
    """A foreground submit per job, each in a thread of its own: its result (or error) lands
    in ``results``. Gearman has no packet to hand a job back: a worker that gives a job up
    closes its connection and the server gives the job to the next worker; :meth:`close`
    runs one on what still waits, so that every caller ends."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.results: dict[str, object] = {}
        self.callers: dict[str, threading.Thread] = {}
        self.queues: set[str] = set()

    def put(self, queue: str, payloads: list[str], *, lingering: bool = False) -> None:
        self.queues.add(queue)
        with gearman_client.Admin(self.url) as admin:
            before = _queued(admin, queue)
        for payload in payloads:
            caller = threading.Thread(target=self._submit, args=(queue, payload), daemon=True)
            self.callers[payload] = caller
            caller.start()
        with gearman_client.Admin(self.url) as admin:  # queued (or done already)
            wait_until(lambda: _queued(admin, queue) + sum(p in self.results for p in payloads)
                       >= before + len(payloads), 10, "the submits queued")

    def _submit(self, queue: str, payload: str) -> None:
        with gearman_client.Client(self.url, timeout=60) as client:
            try:
                self.results[payload] = client.submit(queue, payload.encode())
            except Exception as exc:  # the assertion shows it
                self.results[payload] = exc

    def _result(self, payload: str) -> object:
        self.callers[payload].join(10)
        return self.results.get(payload)

    def assert_done(self, payload: str) -> None:
        assert self._result(payload) == b"done: " + payload.encode()

    def assert_failed(self, payload: str, group: str) -> None:
        assert isinstance(self._result(payload), gearman_client.JobFailed)

    def assert_waiting(self, queue: str, payloads: list[str]) -> None:
        assert not any(p in self.results for p in payloads)  # their callers still wait
        with gearman_client.Admin(self.url) as admin:
            [status] = [s for s in admin.status() if s.function == queue]
        assert (status.queued, status.running) == (len(payloads), 0), status

    def assert_handed_back(self, queue: str, payload: str) -> None:
        with gearman_client.Admin(self.url) as admin:
            # The server requeues it once it has read the close: queued again, not running.
            wait_until(lambda: [(s.queued, s.running) for s in admin.status()
                                if s.function == queue] == [(1, 0)], 10, "the job requeued")
        self.assert_waiting(queue, [payload])

    def close(self) -> None:
        waiting = [p for p, caller in self.callers.items() if caller.is_alive()]
        if not waiting:
            return
        worker = gearman_client.Worker(self.url)
        for queue in self.queues:
            worker.register(queue, lambda job: b"drained")
        runner = threading.Thread(target=worker.run, kwargs={"handle_signals": False},
                                  daemon=True)
        runner.start()
        try:
            for payload in waiting:
                self.callers[payload].join(BOUND)
        finally:
            worker.stop()
            runner.join(BOUND)
        # A job handed back was worked again: its caller got the next worker's result.
        assert {p: self.results.get(p) for p in waiting} == {p: b"drained" for p in waiting}


def _queued(admin: gearman_client.Admin, function: str) -> int:
    return sum(s.queued for s in admin.status() if s.function == function)


@contextmanager
def _gearman_put(url: str, function: str, lingering: bool) -> Iterator[Trial]:
    """A foreground submit in a thread of its own: its result (or error) lands in a list."""
    results: list[object] = []

    def submit() -> None:
        with gearman_client.Client(url, timeout=60) as client:
            try:
                results.append(client.submit(function, b"payload"))
            except Exception as exc:  # the assertion shows it
                results.append(exc)

    caller = threading.Thread(target=submit, daemon=True)
    caller.start()

    def completed(handle: str) -> None:  # the WORK_COMPLETE reached the waiting client
        caller.join(10)
        assert results == [b"done"]

    def requeued(handle: str) -> None:
        """Gearman has no packet to hand a job back: the worker closed its connection, and the
        server gives the job to the next worker, whose result the same client gets."""
        assert results == []  # the client still waits: the server has requeued the job

        def second(job: gearman_client.Job) -> bytes:
            worker.stop()
            return b"second: " + job.data

        worker = gearman_client.Worker(url)
        worker.register(function, second)
        worker.run(handle_signals=False)
        caller.join(10)
        assert results == [b"second: payload"]

    yield Trial(None, completed, requeued)


class Gearman(WorkerSystem):
    name = "gearman"
    done_stats: ClassVar[dict[str, int]] = {
        "grabbed": 1, "completed": 1, "failed": 0, "abandoned": 0, "in_flight": 0,
    }
    handed_back_stats: ClassVar[dict[str, int]] = {"completed": 0, "abandoned": 1, "in_flight": 0}
    fetched, completed, handed_back_event = "grabbed", "completed", "released"
    stats_across_runs = True
    logs_queue = True

    def __init__(self, server: str = "real") -> None:
        self.server = server

    def put(self, url: str, queue: str, lingering: bool) -> AbstractContextManager[Trial]:
        return _gearman_put(url, queue, lingering)

    def make(self, mode: str, url: str, queues: list[str], **options: Any) -> Any:
        cls = gearman_client.Worker if mode == "sync" else gearman_client.AsyncWorker
        return cls(url, **options)  # the functions are registered by run_*, with the handler

    def run_sync(self, worker: Any, queues: list[str], handler: Callable[[Any], object]) -> None:
        for queue in queues:
            worker.register(queue, handler)
        worker.run(handle_signals=False)

    async def run_async(self, worker: Any, queues: list[str],
                        handler: Callable[[Any], Any]) -> None:
        for queue in queues:
            worker.register(queue, handler)
        await worker.run(handle_signals=False)

    def payload(self, job: Any) -> str:
        return job.data.decode()  # type: ignore[no-any-return]

    def job_id(self, job: Any) -> str:
        return job.handle.decode()  # type: ignore[no-any-return]

    def result(self, payload: str) -> object:
        return b"done: " + payload.encode()

    def counts(self, *, done: int, failed: int) -> dict[str, int]:
        return {"grabbed": done + failed, "completed": done, "failed": failed, "lost": 0,
                "abandoned": 0, "reconnects": 0, "in_flight": 0}

    @contextmanager
    def jobs(self, url: str) -> Iterator[Jobs]:
        jobs = _GearmanJobs(url)
        try:
            yield jobs
        finally:
            jobs.close()


# -- Workq --------------------------------------------------------------------------------------

class _WorkqJobs(Jobs):
    """Workq has no release, and a ``fail`` would end the job: a job given up at shutdown is
    left to its TTR (1 s for a ``lingering`` one), after which the server has it pending, to
    be leased again."""

    def __init__(self, url: str) -> None:
        self.client = workq_client.Client(url)
        self.ids: dict[str, str] = {}

    def put(self, queue: str, payloads: list[str], *, lingering: bool = False) -> None:
        for payload in payloads:
            self.ids[payload] = self.client.add(queue, payload.encode(),
                                                ttr=1 if lingering else 30)

    def assert_done(self, payload: str) -> None:
        result = self.client.result(self.ids[payload], wait=5)
        assert (result.success, result.data) == (True, b"done: " + payload.encode())

    def assert_failed(self, payload: str, group: str) -> None:
        result = self.client.result(self.ids[payload], wait=5)
        assert not result.success and result.data.startswith(group.rsplit(".")[-1].encode())

    def assert_waiting(self, queue: str, payloads: list[str]) -> None:
        for payload in payloads:
            info = self.client.inspect_job(self.ids[payload])
            assert (info.state, info.attempts) == (workq_client.JobState.NEW, 0), info

    def assert_handed_back(self, queue: str, payload: str) -> None:
        job_id = self.ids[payload]
        wait_until(lambda: self.client.inspect_job(job_id).state
                   == workq_client.JobState.PENDING, 10, "the TTR to run out: the job pending")
        assert self.client.inspect_job(job_id).attempts == 1

    def close(self) -> None:
        self.client.close()


@contextmanager
def _workq_put(url: str, queue: str, lingering: bool) -> Iterator[Trial]:
    """Workq has no release, and a ``fail`` would end the job: a job given up at shutdown is
    left to its TTR (2 s then), after which the server leases it again."""
    with workq_client.Client(url) as client:
        job_id = client.add(queue, b"x", ttr=2 if lingering else 30)

        def completed(job: str) -> None:
            result = client.result(job, wait=5)
            assert result.success and result.data == b"done"

        def leased_again(job: str) -> None:
            again = client.lease([queue], wait=10)  # once the 2 s TTR has run out
            assert (again.job_id, again.payload) == (job, b"x")

        yield Trial(job_id, completed, leased_again)


class Workq(WorkerSystem):
    name = "workq"
    done_stats: ClassVar[dict[str, int]] = {
        "leased": 1, "completed": 1, "abandoned": 0, "in_flight": 0,
    }
    handed_back_stats: ClassVar[dict[str, int]] = {
        "completed": 0, "failed": 0, "abandoned": 1, "in_flight": 0,
    }
    fetched, completed, handed_back_event = "leased", "completed", "lost"
    stats_across_runs = True
    logs_queue = True

    def put(self, url: str, queue: str, lingering: bool) -> AbstractContextManager[Trial]:
        return _workq_put(url, queue, lingering)

    def make(self, mode: str, url: str, queues: list[str], **options: Any) -> Any:
        cls = workq_client.Worker if mode == "sync" else workq_client.AsyncWorker
        # A lease waits at most 0.5 s: what a stop with an idle slot waits for.
        return cls(url, queues, **{"wait": 0.5, **options})

    def payload(self, job: Any) -> str:
        return job.payload.decode()  # type: ignore[no-any-return]

    def job_id(self, job: Any) -> str:
        return str(job.job_id)

    def result(self, payload: str) -> object:
        return b"done: " + payload.encode()

    def connections(self, concurrency: int) -> int:
        return concurrency  # a lease per slot, each on its own connection

    def counts(self, *, done: int, failed: int) -> dict[str, int]:
        return {"leased": done + failed, "completed": done, "failed": failed, "lost": 0,
                "abandoned": 0, "reconnects": 0, "in_flight": 0}

    @contextmanager
    def jobs(self, url: str) -> Iterator[Jobs]:
        jobs = _WorkqJobs(url)
        try:
            yield jobs
        finally:
            jobs.close()


# -- qless --------------------------------------------------------------------------------------

class _QlessJobs(Jobs):
    def __init__(self, url: str) -> None:
        self.client = qless_client.Client(url, worker_name="other")
        self.ids: dict[str, str] = {}

    def put(self, queue: str, payloads: list[str], *, lingering: bool = False) -> None:
        for payload in payloads:
            self.ids[payload] = self.client.queue(queue).put("K", payload)

    def _job(self, payload: str) -> Any:
        job = self.client.get(self.ids[payload])
        assert job is not None
        return job

    def assert_done(self, payload: str) -> None:
        assert self._job(payload).state == "complete"

    def assert_failed(self, payload: str, group: str) -> None:
        job = self._job(payload)
        assert job.state == "failed" and job.failure is not None
        assert job.failure["group"] == group

    def assert_waiting(self, queue: str, payloads: list[str]) -> None:
        for payload in payloads:
            job = self._job(payload)
            assert (job.state, job.remaining) == ("waiting", job.retries), job

    def assert_handed_back(self, queue: str, payload: str) -> None:
        job = self._job(payload)  # waiting again, one retry spent
        assert (job.state, job.remaining) == ("waiting", job.retries - 1)

    def close(self) -> None:
        self.client.close()


@contextmanager
def _qless_put(url: str, queue: str, lingering: bool) -> Iterator[Trial]:
    with qless_client.Client(url, worker_name="other") as client:
        jid = client.queue(queue).put("K", {})

        def completed(job_id: str) -> None:
            job = client.get(job_id)
            assert job is not None and job.state == "complete"

        def retried(job_id: str) -> None:  # waiting again, one retry spent
            job = client.get(job_id)
            assert job is not None and (job.state, job.remaining) == ("waiting", job.retries - 1)

        yield Trial(jid, completed, retried)


class Qless(WorkerSystem):
    name = "qless"
    done_stats: ClassVar[dict[str, int]] = {
        "popped": 1, "completed": 1, "retried": 0, "in_flight": 0,
    }
    handed_back_stats: ClassVar[dict[str, int]] = {"completed": 0, "retried": 1, "in_flight": 0}
    fetched, completed, handed_back_event = "popped", "completed", "retried"
    handler_timeout = True

    def put(self, url: str, queue: str, lingering: bool) -> AbstractContextManager[Trial]:
        return _qless_put(url, queue, lingering)

    def make(self, mode: str, url: str, queues: list[str], **options: Any) -> Any:
        cls = qless_client.Worker if mode == "sync" else qless_client.AsyncWorker
        # Pops again every 0.05 s while the queues are empty (a job put later waits no more).
        return cls(url, queues=queues, **{"idle_wait": 0.05, **options})

    def payload(self, job: Any) -> str:
        return job.data  # type: ignore[no-any-return]

    def job_id(self, job: Any) -> str:
        return str(job.jid)

    def counts(self, *, done: int, failed: int) -> dict[str, int]:
        return {"popped": done + failed, "completed": done, "failed": failed, "retried": 0,
                "lost": 0, "reconnects": 0, "in_flight": 0}

    @contextmanager
    def jobs(self, url: str) -> Iterator[Jobs]:
        jobs = _QlessJobs(url)
        try:
            yield jobs
        finally:
            jobs.close()


BEANSTALK, GEARMAN, WORKQ, QLESS = Beanstalk(), Gearman(), Workq(), Qless()
BUNDLED_BEANSTALK, BUNDLED_GEARMAN = Beanstalk("bundled"), Gearman("bundled")


# -- what the handlers do -----------------------------------------------------------------------

class Boom(Exception):
    """A handler's own exception."""


class Handlers:
    """The handlers of one test, the same in every mode: each records its job (payload, id,
    thread), counts the handlers running at once, waits at ``gate`` (when given) until the
    test opens it (only those in ``hold``, when given), raises :class:`Boom` for a payload
    in ``fail``, and returns the system's result. ``on_start`` is called with the payload as a
    handler begins (in the handler's thread)."""

    def __init__(self, system: WorkerSystem, *, gate: threading.Event | None = None,
                 hold: tuple[str, ...] | None = None, fail: tuple[str, ...] = (),
                 on_start: Callable[[str], None] | None = None) -> None:
        self.system = system
        self.gate = gate
        self.hold = None if hold is None else set(hold)
        self.fail = set(fail)
        self.on_start = on_start
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.ids: dict[str, str] = {}
        self.threads: set[int] = set()
        self.running = 0
        self.peak = 0

    def _enter(self, job: Any) -> str:
        payload = self.system.payload(job)
        with self.lock:
            self.started.append(payload)
            self.ids[payload] = self.system.job_id(job)
            self.threads.add(threading.get_ident())
            self.running += 1
            self.peak = max(self.peak, self.running)
        if self.on_start is not None:
            self.on_start(payload)
        return payload

    def _holds(self, payload: str) -> bool:
        return self.gate is not None and (self.hold is None or payload in self.hold)

    def _leave(self, payload: str) -> object:
        with self.lock:
            self.running -= 1
        if payload in self.fail:
            raise Boom("out of paper")
        with self.lock:
            self.finished.append(payload)
        return self.system.result(payload)

    def sync(self, job: Any) -> object:
        payload = self._enter(job)
        if self._holds(payload):
            assert self.gate is not None
            self.gate.wait(BOUND)
        return self._leave(payload)

    async def aio(self, job: Any) -> object:
        payload = self._enter(job)
        if self._holds(payload):
            assert self.gate is not None
            try:
                await await_until(self.gate.is_set, BOUND, "the test to open the gate")
            except anyio.get_cancelled_exc_class():
                with self.lock:
                    self.running -= 1
                    self.cancelled.append(payload)
                raise
        return self._leave(payload)


class Running:
    """A worker running in a thread of its own: the sync ``Worker``'s ``run``, or the
    ``AsyncWorker``'s on an event loop of the mode's backend there."""

    def __init__(self, system: WorkerSystem, mode: str, worker: Any, queues: list[str],
                 handlers: Handlers) -> None:
        self.system, self.mode, self.worker, self.handlers = system, mode, worker, handlers
        self.queues = queues
        self.error: BaseException | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            if self.mode == "sync":
                self.system.run_sync(self.worker, self.queues, self.handlers.sync)
            else:
                anyio.run(self._run_async, backend=self.mode)
        except BaseException as exc:  # join() raises it in the test
            self.error = exc

    async def _run_async(self) -> None:
        self._token = anyio.lowlevel.current_token()
        await self.system.run_async(self.worker, self.queues, self.handlers.aio)

    @property
    def stats(self) -> Any:
        return self.worker.stats

    def stats_of(self, expected: dict[str, int]) -> dict[str, int]:
        """The counts of the worker's stats that ``expected`` names."""
        return {name: getattr(self.stats, name) for name in expected}

    def stop(self) -> None:
        """``stop()``: the sync worker's from any thread; the async worker's in its loop
        (from a handler too)."""
        if self.mode == "sync" or threading.current_thread() is self.thread:
            self.worker.stop()
            return
        token = wait_until(lambda: self._token or not self.thread.is_alive(), 10,
                           "the worker's event loop to start")
        if isinstance(token, bool):  # the run already ended
            return
        with suppress(RuntimeError):  # the loop just ended
            anyio.from_thread.run_sync(self.worker.stop, token=token)

    def join(self) -> None:
        """Wait for ``run`` to return; raise what it raised."""
        self.thread.join(BOUND)
        assert not self.thread.is_alive(), "the worker did not stop"
        if self.error is not None:
            raise self.error


# -- a relay that can cut a worker's connections ------------------------------------------------

class Relay:
    """A TCP relay on a loopback port in front of a server: each connection to it is carried
    to the server. :meth:`cut` closes every connection carried and refuses new ones (the port
    stays bound, listening no more); :meth:`restore` takes connections again.

    ``accepted`` counts the connections taken; ``live`` those carried now."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.accepted = 0
        self.peak = 0
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._listen()

    @property
    def live(self) -> int:
        with self._lock:
            return len(self._pairs)

    def url(self, url: str) -> str:
        """``url`` with the relay's port for the server's."""
        parts = urlsplit(url)
        return parts._replace(netloc=f"{parts.hostname}:{self.port}").geturl()

    def _listen(self) -> None:
        self._listener.listen(64)
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # cut: the listener closed
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                conn.close()
                continue
            pair = (conn, upstream)
            with self._lock:
                self.accepted += 1
                self._pairs.add(pair)
                self.peak = max(self.peak, len(self._pairs))
            for a, b in (pair, pair[::-1]):
                threading.Thread(target=self._pump, args=(a, b, pair), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket,
              pair: tuple[socket.socket, socket.socket]) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        self._close(pair)

    def _close(self, pair: tuple[socket.socket, socket.socket]) -> None:
        with self._lock:
            self._pairs.discard(pair)
        for sock in pair:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> None:
        """Close every connection carried; refuse new ones until :meth:`restore`."""
        with suppress(OSError):  # wakes the accepting thread (a close alone would not)
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._close(pair)

    def restore(self) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listen()

    def close(self) -> None:
        self.cut()


# -- fixtures -----------------------------------------------------------------------------------

REAL = pytest.mark.real_server
SYSTEMS = [
    pytest.param(BEANSTALK, marks=REAL, id="beanstalk"),
    pytest.param(GEARMAN, marks=REAL, id="gearman"),
    pytest.param(WORKQ, id="workq"),
    pytest.param(QLESS, id="qless"),
]
#: The systems, and the bundled beanstalk and Gearman servers besides the real ones.
WITH_BUNDLED = [
    *SYSTEMS,
    pytest.param(BUNDLED_BEANSTALK, id="beanstalk-bundled"),
    pytest.param(BUNDLED_GEARMAN, id="gearman-bundled"),
]
#: The systems whose workers take ``handler_timeout``.
WITH_HANDLER_TIMEOUT = [p for p in SYSTEMS if p.values[0].handler_timeout]  # type: ignore[union-attr]
#: ``sync``: the package's ``Worker``; ``asyncio``, ``trio``: its ``AsyncWorker`` there.
MODES = ["sync", "asyncio", "trio"]
#: The qless tests' Redis database (flushed before each test).
QLESS_DB = 13


@pytest.fixture(params=SYSTEMS)
def system(request: pytest.FixtureRequest) -> WorkerSystem:
    """Each system's description in turn."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """Each way to run a worker in turn."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def beanstalkd() -> Iterator[BeanstalkServer]:
    server = start_beanstalk("beanstalkd")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gearmand() -> Iterator[GearmanServer]:
    server = start_gearman("gearmand")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def bundled_beanstalk() -> Iterator[BeanstalkServer]:
    server = start_beanstalk("bundled")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def bundled_gearman() -> Iterator[GearmanServer]:
    server = start_gearman("bundled")
    yield server
    server.stop()


@pytest.fixture
def url(system: WorkerSystem, request: pytest.FixtureRequest) -> str:
    """The system's server for this test (started once for the session)."""
    if isinstance(system, Beanstalk):
        name = "beanstalkd" if system.server == "real" else "bundled_beanstalk"
        beanstalk: BeanstalkServer = request.getfixturevalue(name)
        return beanstalk.url
    if isinstance(system, Gearman):
        name = "gearmand" if system.server == "real" else "bundled_gearman"
        gearman: GearmanServer = request.getfixturevalue(name)
        return gearman.url
    if system is WORKQ:
        workq: WorkqServer = request.getfixturevalue("workq_server")
        return workq.url
    redis: RedisServer = request.getfixturevalue("redis_server")
    with Redis.from_url(f"{redis.url}/{QLESS_DB}") as r:
        r.execute("FLUSHDB")
    return f"{redis.url}/{QLESS_DB}"


@pytest.fixture
def queue() -> str:
    """A queue (tube, function) name no other test uses."""
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def relay(url: str) -> Iterator[Relay]:
    """A relay in front of the test's server."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    relay = Relay(parts.hostname, parts.port)
    yield relay
    relay.close()


@pytest.fixture
def jobs(system: WorkerSystem, url: str) -> Iterator[Jobs]:
    """The test's jobs on the system's server."""
    with system.jobs(url) as jobs:
        yield jobs


@pytest.fixture
def start(system: WorkerSystem, mode: str) -> Iterator[Callable[..., Running]]:
    """``start(url, queues, handlers, **options)``: a worker of the system in the mode,
    running; stopped (and every gate opened, so no handler thread lingers) after the test."""
    started: list[Running] = []

    def start(url: str, queues: list[str], handlers: Handlers, **options: Any) -> Running:
        worker = system.make(mode, url, queues, **options)
        running = Running(system, mode, worker, queues, handlers)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.handlers.gate is not None:
            running.handlers.gate.set()
        running.stop()
        running.thread.join(BOUND)


def free_slots(worker: Any) -> int:
    """The slots a running sync ``Worker`` could fill now: ``concurrency`` less the jobs held
    and the handler threads given up (the engine's count, which its fetching obeys)."""
    return int(worker._runner._async._engine.free)
