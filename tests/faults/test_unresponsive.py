"""A server that stops answering without closing (SIGSTOP): every call with a timeout ends on
time with ``OperationTimeout``, the client is in step again once the server resumes (its next
call gets its own answer), and workers notice, reconnect and go on working. A report sent to
the frozen server is sent again; the server runs both copies once it resumes, and the worker
counts the job done (Workq: ``Duplicate result``; qless: the first copy's ``now`` in the job's
history), while a job whose lock really went elsewhere is still lost.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire.errors import ConnectionLost, OperationTimeout
from tests.conftest import BeanstalkServer
from tests.gearman.conftest import GearmanServer
from tests.qless.conftest import RedisServer
from tests.waiting import await_until, wait_until
from tests.workq.conftest import WorkqServer

TIMEOUT = 0.5


@contextlib.contextmanager
def stopped(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """The server process frozen (SIGSTOP) for the block, then resumed (SIGCONT)."""
    proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGCONT)


def _times_out(call: Callable[[], Any]) -> None:
    began = time.monotonic()
    with pytest.raises(OperationTimeout):
        call()
    elapsed = time.monotonic() - began
    # Not before the deadline (a bound load cannot break); the frozen server never answers, so
    # the call returning at all is the deadline firing.
    assert elapsed >= TIMEOUT * 0.9, elapsed


# -- sync clients ------------------------------------------------------------------------------


def test_beanstalk_client(fresh_server: BeanstalkServer) -> None:
    tube = f"t-{uuid.uuid4().hex[:12]}"
    with beanstalk_client.Client(fresh_server.url, timeout=TIMEOUT) as client:
        client.use(tube)
        client.put(b"before")
        with stopped(fresh_server.proc):
            _times_out(lambda: client.put(b"while stopped"))
        # A beanstalk connection has state (the tube used, the tubes watched, the jobs
        # reserved) that a silent reconnect would lose: the client stays closed and says so.
        with pytest.raises(ConnectionLost, match="closed after a timeout"):
            client.put(b"after")
    with beanstalk_client.Client(fresh_server.url, timeout=TIMEOUT) as client:
        client.use(tube)
        job_id = client.put(b"after")
        assert client.peek(job_id).body == b"after"


def test_gearman_client(fresh_gearman: GearmanServer) -> None:
    with gearman_client.Client(fresh_gearman.url, timeout=TIMEOUT) as client:
        assert client.echo(b"before") == b"before"
        with stopped(fresh_gearman.proc):
            _times_out(lambda: client.echo(b"while stopped"))
        assert client.echo(b"after") == b"after"


def test_workq_client(fresh_workq_server: WorkqServer) -> None:
    with workq_client.Client(fresh_workq_server.url, timeout=TIMEOUT) as client:
        client.add("q", b"before")
        with stopped(fresh_workq_server.proc):
            _times_out(lambda: client.add("q", b"while stopped"))
        job_id = client.add("q", b"after")
        assert client.inspect_job(job_id).payload == b"after"


def test_qless_client(fresh_redis: RedisServer) -> None:
    with qless_client.Client(fresh_redis.url, timeout=TIMEOUT) as client:
        client.queue("q").put("K", "before")
        with stopped(fresh_redis.proc):
            _times_out(lambda: client.queue("q").put("K", "while stopped"))
        jid = client.queue("q").put("K", "after")
        job = client.get(jid)
        assert job is not None and job.data == "after"


# -- workers: a freeze while idle ---------------------------------------------------------------


#: How long a freeze lasts for a worker that has nothing to notice (a deliberate duration:
#: longer than the Workq worker's lease wait plus timeout, 1.5 s).
IDLE_FREEZE = 3.0


async def _freeze_and_resume(
    proc: subprocess.Popen[bytes], put: Callable[[str], Any], done: dict[str, anyio.Event],
    settled: Callable[[], bool], noticed: Callable[[], bool] | None = None,
) -> None:
    """One job handled and reported before the freeze (so that the freeze meets a worker that
    waits for work, not one reporting), one put after the resume must be handled too.

    The server stays frozen until ``noticed()`` holds (the worker gave up on it); for a worker
    that has nothing to notice (``None``), for ``IDLE_FREEZE`` seconds."""
    with anyio.fail_after(30):
        await anyio.to_thread.run_sync(put, "before")
        await done["before"].wait()
        await await_until(settled, what="the first job settled")
        with stopped(proc):
            if noticed is None:
                await anyio.sleep(IDLE_FREEZE)
            else:
                await await_until(noticed, 20, "the worker giving up on the frozen server")
        await anyio.to_thread.run_sync(put, "after")
        await done["after"].wait()


def _events() -> dict[str, anyio.Event]:
    return {"before": anyio.Event(), "after": anyio.Event()}


@pytest.mark.slow
@pytest.mark.anyio
async def test_beanstalk_worker_reconnects(fresh_server: BeanstalkServer) -> None:
    """Its reserves carry no deadline of their own: the watchdog gives up on the frozen server
    once the blocking reserve has waited its seconds plus ``timeout``."""
    tube = f"t-{uuid.uuid4().hex[:12]}"
    done = _events()

    async def handle(job: beanstalk_client.Job) -> None:
        done[job.body.decode()].set()

    def put(body: str) -> None:
        with beanstalk_client.Client(fresh_server.url) as c:
            c.use(tube)
            c.put(body.encode())

    worker = beanstalk_client.AsyncWorker(fresh_server.url, tubes=[tube], idle_wait=0.5,
                                          timeout=1.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: worker.run(handle, handle_signals=False))
        await _freeze_and_resume(fresh_server.proc, put, done, lambda: worker.stats.deleted == 1,
                                 lambda: worker.stats.reconnects >= 1)
        worker.stop()
    assert worker.stats.reconnects >= 1
    assert (worker.stats.deleted, worker.stats.lost) == (2, 0)


@pytest.mark.slow
@pytest.mark.anyio
async def test_workq_worker_goes_on(fresh_workq_server: WorkqServer) -> None:
    """A lease left unanswered keeps its connection (a job it brings later goes to the next
    lease on it), so the worker simply goes on once the server does."""
    done = _events()

    async def handle(job: workq_client.JobContext) -> bytes:
        done[job.payload.decode()].set()
        return b"ok"

    def put(body: str) -> None:
        with workq_client.Client(fresh_workq_server.url) as c:
            c.add("q", body.encode())

    worker = workq_client.AsyncWorker(fresh_workq_server.url, "q", wait=0.5, timeout=1.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, handle)
        await _freeze_and_resume(fresh_workq_server.proc, put, done,
                                 lambda: worker.stats.completed == 1)
        worker.stop()
    assert (worker.stats.completed, worker.stats.lost) == (2, 0)
    assert worker.stats.reconnects == 0


@pytest.mark.slow
@pytest.mark.anyio
async def test_qless_worker_reconnects(fresh_redis: RedisServer) -> None:
    done = _events()

    async def handle(job: qless_client.AsyncJob) -> None:
        done[job.data].set()

    def put(data: str) -> None:
        with qless_client.Client(fresh_redis.url) as c:
            c.queue("q").put("K", data)

    worker = qless_client.AsyncWorker(fresh_redis.url, queues=["q"], idle_wait=0.2, timeout=1.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: worker.run(handle, handle_signals=False))
        await _freeze_and_resume(fresh_redis.proc, put, done, lambda: worker.stats.completed == 1,
                                 lambda: worker.stats.reconnects >= 1)
        worker.stop()
    assert worker.stats.reconnects >= 1  # pops that timed out, each followed by a back-off
    assert (worker.stats.completed, worker.stats.lost) == (2, 0)


@pytest.mark.slow
@pytest.mark.anyio
async def test_gearman_worker_resumes(fresh_gearman: GearmanServer) -> None:
    """A sleeping Gearman worker has nothing outstanding to time out: it must simply take the
    next job once the server resumes."""
    function = f"f-{uuid.uuid4().hex[:12]}"
    done = _events()

    async def handle(job: gearman_client.AsyncJob) -> bytes:
        done[job.data.decode()].set()
        return b"ok"

    def put(data: str) -> None:
        with gearman_client.Client(fresh_gearman.url) as c:
            c.submit_background(function, data.encode())

    worker = gearman_client.AsyncWorker(fresh_gearman.url)
    worker.register(function, handle)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        # WORK_COMPLETE has no reply: the freeze comes once the worker, done, has gone to sleep.
        await _freeze_and_resume(fresh_gearman.proc, put, done, lambda: worker.sleeping)
        worker.stop()


# -- workers: a freeze while a report is on its way ----------------------------------------------
#
# The handler freezes the server and returns: its report is sent to the frozen server, times
# out, and is sent again. On resuming, the server runs the first copy (it was in its socket
# buffer) and refuses the copy sent again, since the job is finished. That refusal is the
# report's success, not a lost job.

FREEZE = 1.5  # seconds: more than the workers' timeout, TIMEOUT


def _freeze_for(proc: subprocess.Popen[bytes], seconds: float = FREEZE) -> None:
    """SIGSTOP now; SIGCONT ``seconds`` later, from a thread of its own."""
    proc.send_signal(signal.SIGSTOP)
    timer = threading.Timer(seconds, proc.send_signal, (signal.SIGCONT,))
    timer.daemon = True
    timer.start()


@pytest.mark.slow
@pytest.mark.anyio
async def test_workq_report_sent_again_after_a_freeze(fresh_workq_server: WorkqServer) -> None:
    async def handle(job: workq_client.JobContext) -> bytes:
        _freeze_for(fresh_workq_server.proc)
        return b"ours"

    def on_late(late: workq_client.LateResult) -> None:
        raise AssertionError(f"not late: {late}")

    worker = workq_client.AsyncWorker(fresh_workq_server.url, "q", wait=0.5,
                                      timeout=TIMEOUT, on_late_result=on_late)
    with workq_client.Client(fresh_workq_server.url) as c:
        job_id = c.add("q", b"x", ttr=30)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, handle)
        await await_until(lambda: worker.stats.completed + worker.stats.lost, 20,
                          "the job settled")
        worker.stop()
    assert worker.stats.reconnects >= 1  # the report was sent again, on a new connection
    assert (worker.stats.completed, worker.stats.lost) == (1, 0)
    with workq_client.Client(fresh_workq_server.url) as c:
        result = c.result(job_id)
        assert result.success and result.data == b"ours"


@pytest.mark.slow
def test_workq_sync_report_sent_again_after_a_freeze(fresh_workq_server: WorkqServer) -> None:
    def handle(job: workq_client.JobContext) -> bytes:
        _freeze_for(fresh_workq_server.proc)
        return b"ours"

    worker = workq_client.Worker(fresh_workq_server.url, "q", wait=0.5, timeout=TIMEOUT)
    with workq_client.Client(fresh_workq_server.url) as c:
        job_id = c.add("q", b"x", ttr=30)
    thread = threading.Thread(target=worker.run, args=(handle,), daemon=True)
    thread.start()
    wait_until(lambda: worker.stats.completed + worker.stats.lost, 20, "the job settled")
    worker.stop()
    thread.join(10)
    assert worker.stats.reconnects >= 1
    assert (worker.stats.completed, worker.stats.lost) == (1, 0)
    with workq_client.Client(fresh_workq_server.url) as c:
        result = c.result(job_id)
        assert result.success and result.data == b"ours"


@pytest.mark.anyio
async def test_workq_first_report_refused_as_duplicate_is_an_error(
    fresh_workq_server: WorkqServer,
) -> None:
    """Counting a refused copy as done is only for a copy sent again: a first send refused
    with ``Duplicate result`` means someone else finished the job."""

    async def handle(job: workq_client.JobContext) -> bytes:
        async with workq_client.AsyncClient(fresh_workq_server.url) as other:
            await other.complete(job.job_id, b"theirs")
        return b"ours"

    worker = workq_client.AsyncWorker(fresh_workq_server.url, "q", wait=0.5,
                                      timeout=TIMEOUT)
    with workq_client.Client(fresh_workq_server.url) as c:
        job_id = c.add("q", b"x", ttr=30)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, handle)
        await await_until(lambda: worker.stats.completed + worker.stats.lost, 10,
                          "the job settled")
        worker.stop()
    assert (worker.stats.completed, worker.stats.lost) == (0, 1)
    with workq_client.Client(fresh_workq_server.url) as c:
        assert c.result(job_id).data == b"theirs"


class Boom(Exception):
    """A handler's exception that the retry policy retries."""


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("outcome", ["complete", "retry", "retry-exhausted"])
async def test_qless_report_sent_again_after_a_freeze(
    fresh_redis: RedisServer, outcome: str
) -> None:
    """complete, retry, and a retry the script turns into a failure (no retries left): each
    sent to the frozen server, sent again, refused (the job is not running any more), and
    found in the job's history with the first copy's ``now``."""

    async def handle(job: qless_client.AsyncJob) -> None:
        _freeze_for(fresh_redis.proc)
        if outcome != "complete":
            raise Boom("again")

    policy = qless_client.RetryPolicy(retry_on=(Boom,), base_delay=30)
    worker = qless_client.AsyncWorker(fresh_redis.url, queues=["q"], idle_wait=0.2,
                                      timeout=TIMEOUT, retry=policy)
    with qless_client.Client(fresh_redis.url) as c:
        jid = c.queue("q").put("K", 1, retries=0 if outcome == "retry-exhausted" else 3)
    stats = worker.stats
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: worker.run(handle, handle_signals=False))
        await await_until(lambda: stats.completed + stats.retried + stats.failed + stats.lost,
                          20, "the job settled")
        worker.stop()
    expected = {"complete": (1, 0, 0), "retry": (0, 1, 0), "retry-exhausted": (0, 0, 1)}
    assert (stats.completed, stats.retried, stats.failed, stats.lost) == (*expected[outcome], 0)
    with qless_client.Client(fresh_redis.url) as c:
        job = c.get(jid)
    assert job is not None
    # The history is qless-core's list of events: what follows this worker's last pop.
    popped = max(i for i, e in enumerate(job.history)
                 if e["what"] == "popped" and e.get("worker") == worker.worker_name)
    after = [e["what"] for e in job.history[popped + 1:]]
    if outcome == "complete":
        assert job.state == "complete" and after == ["done"]
    elif outcome == "retry":
        assert job.state == "scheduled" and job.remaining == 2
        assert after == []  # qless-core's retry writes no history event
    else:
        assert job.state == "failed" and after == ["failed"]


@pytest.mark.anyio
async def test_qless_lost_job_is_never_taken_for_ours(
    fresh_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The other side of the history check: the first complete never reaches the server (its
    connection was killed), another worker takes the job and completes it, and the complete
    sent again is refused. The history has no entry with the first copy's ``now`` from this
    worker: the job is lost, not counted completed."""
    caplog.set_level(logging.INFO, logger="qless_client.worker")

    def take_away(jid: str) -> None:
        with qless_client.Redis(fresh_redis.url) as r:  # the worker's connection
            r.execute("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        with qless_client.Client(fresh_redis.url, worker_name="other") as c:
            job = c.get(jid)
            assert job is not None
            job.move("elsewhere")
            popped = c.queue("elsewhere").pop()
            assert popped is not None
            popped.complete(data={"by": "other"})

    async def handle(job: qless_client.AsyncJob) -> None:
        await anyio.to_thread.run_sync(take_away, job.jid)

    worker = qless_client.AsyncWorker(fresh_redis.url, queues=["q"], idle_wait=0.2,
                                      timeout=TIMEOUT)
    with qless_client.Client(fresh_redis.url) as c:
        jid = c.queue("q").put("K", 1)
    stats = worker.stats
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: worker.run(handle, handle_signals=False))
        await await_until(lambda: stats.completed + stats.lost, 20, "the job settled")
        worker.stop()
    assert (stats.completed, stats.lost) == (0, 1)
    assert any("complete failed" in r.getMessage() for r in caplog.records)  # sent again
    with qless_client.Client(fresh_redis.url) as c:
        job = c.get(jid)
    assert job is not None and job.state == "complete" and job.data == {"by": "other"}
