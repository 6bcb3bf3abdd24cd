"""The four systems as the worker tests drive them: a server to work against, how to put one job
there for a worker process (``tests/signal_worker.py``) to take, the worker's stats that count
a job done or handed back, and how the server shows it done or handed back.

The servers are the real ones where one runs here (beanstalkd, gearmand, redis-server for
qless); Workq's is the session backend's (the bundled server by default).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

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


@dataclass
class Trial:
    """One job put for the worker process: its id when known before a worker takes it (a
    Gearman handle is known only once the job is assigned), and checks on the server."""

    job_id: str | None
    #: Assert the job ended done (the handler's result taken), given its id.
    done: Callable[[str], None]
    #: Assert the job was handed back to be worked again, given its id.
    handed_back: Callable[[str], None]


@dataclass(frozen=True)
class WorkerSystem:
    """One system, for the worker tests."""

    #: The SYSTEM argument of ``tests/signal_worker.py``.
    name: str
    #: Put one job in a queue on the server at a URL; ``lingering`` when its handler will
    #: outlive the worker's ``shutdown_timeout``.
    put: Callable[[str, str, bool], AbstractContextManager[Trial]]
    #: The worker's stats once its one job is done; once it was handed back at shutdown.
    done_stats: dict[str, int]
    handed_back_stats: dict[str, int]

    def __str__(self) -> str:
        return self.name


# -- beanstalk ----------------------------------------------------------------------------------

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


BEANSTALK = WorkerSystem(
    name="beanstalk",
    put=_beanstalk_put,
    done_stats={"reserved": 1, "deleted": 1, "released": 0, "in_flight": 0},
    handed_back_stats={"deleted": 0, "released": 1},
)


# -- Gearman ------------------------------------------------------------------------------------

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


GEARMAN = WorkerSystem(
    name="gearman",
    put=_gearman_put,
    done_stats={"grabbed": 1, "completed": 1, "failed": 0, "abandoned": 0, "in_flight": 0},
    handed_back_stats={"completed": 0, "abandoned": 1, "in_flight": 0},
)


# -- Workq --------------------------------------------------------------------------------------

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


WORKQ = WorkerSystem(
    name="workq",
    put=_workq_put,
    done_stats={"leased": 1, "completed": 1, "abandoned": 0, "in_flight": 0},
    handed_back_stats={"completed": 0, "failed": 0, "abandoned": 1, "in_flight": 0},
)


# -- qless --------------------------------------------------------------------------------------

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


QLESS = WorkerSystem(
    name="qless",
    put=_qless_put,
    done_stats={"popped": 1, "completed": 1, "retried": 0, "in_flight": 0},
    handed_back_stats={"completed": 0, "retried": 1, "in_flight": 0},
)


# -- fixtures -----------------------------------------------------------------------------------

REAL = pytest.mark.real_server
SYSTEMS = [
    pytest.param(BEANSTALK, marks=REAL, id="beanstalk"),
    pytest.param(GEARMAN, marks=REAL, id="gearman"),
    pytest.param(WORKQ, id="workq"),
    pytest.param(QLESS, id="qless"),
]
#: The qless tests' Redis database (flushed before each test).
QLESS_DB = 13


@pytest.fixture(params=SYSTEMS)
def system(request: pytest.FixtureRequest) -> WorkerSystem:
    """Each system's description in turn."""
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


@pytest.fixture
def url(system: WorkerSystem, request: pytest.FixtureRequest) -> str:
    """The system's server for this test (started once for the session)."""
    if system is BEANSTALK:
        beanstalk: BeanstalkServer = request.getfixturevalue("beanstalkd")
        return beanstalk.url
    if system is GEARMAN:
        gearman: GearmanServer = request.getfixturevalue("gearmand")
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
