"""qless workers (AsyncWorker on asyncio and trio, Worker in threads) against a real redis-server:
queue order, one connection for N jobs, heartbeats, lost locks, outcomes, retries, signals,
restarts, SIGKILL, and pops whose caller is cancelled.

What the worker sent is checked with Redis' own ``MONITOR`` on a raw socket (a complete that
must never be sent is looked for in what the server received), and the state with a second
client.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import anyio
import pytest

from jobwire import LocalProtocolError
from jobwire.events import failure_group
from qless_client import AsyncClient, AsyncJob, Client, Job, Next, RetryPolicy
from qless_client._redis import Redis
from qless_client.worker import AsyncWorker, Worker
from tests.qless.conftest import RedisServer
from tests.waiting import await_until, wait_until

pytestmark = pytest.mark.anyio

DB = 12
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Boom(Exception):
    """A handler's own exception: its failure group is ``tests.qless.test_worker.Boom``."""


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    with Redis.from_url(f"{redis_server.url}/{DB}") as r:
        r.execute("FLUSHDB")
    yield f"{redis_server.url}/{DB}"


@pytest.fixture
def client(url: str) -> Iterator[Client]:
    """The test's own client (worker name "other"): puts, looks, and takes jobs away."""
    with Client(url, worker_name="other") as c:
        yield c


class Monitor:
    """Redis' MONITOR on a raw socket: every command the server receives, as text lines."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        self.sock.sendall(b"MONITOR\r\n")
        self.lines: list[str] = []
        self._buf = b""
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            self._buf += chunk
            *lines, self._buf = self._buf.split(b"\r\n")
            self.lines.extend(line.decode("utf-8", "replace") for line in lines)

    def sync(self) -> None:
        """Wait until everything sent before now has shown up."""
        marker = uuid.uuid4().hex
        with Redis(self.server.url) as r:
            r.execute("ECHO", marker)
        wait_until(lambda: any(marker in line for line in self.lines), 5,
                   "MONITOR to show the marker ECHO")

    def calls(self, command: str, *words: str, besides: Client | None = None) -> list[str]:
        """The qless script calls of ``command`` whose line holds every one of ``words`` (not
        counting those ``besides`` sent)."""
        self.sync()
        skip = "\0"  # in no line
        if besides is not None:
            info = besides.redis.execute("CLIENT", "INFO").decode()
            skip = " " + info.split("addr=", 1)[1].split(" ", 1)[0] + "]"
        return [line for line in self.lines
                if '"EVALSHA"' in line and f'"{command}"' in line and skip not in line
                and all(f'"{w}"' in line for w in words)]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def monitor(redis_server: RedisServer) -> Iterator[Monitor]:
    m = Monitor(redis_server)
    yield m
    m.close()


def _queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


async def _run_until(
    worker: AsyncWorker, handler: Callable[[AsyncJob], Awaitable[object]], done: anyio.Event,
    limit: float = 30,
) -> None:
    async def stopper() -> None:
        await done.wait()
        worker.stop()

    with anyio.fail_after(limit):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stopper)
            await worker.run(handler, handle_signals=False)
            tg.cancel_scope.cancel()


# -- queue order ---------------------------------------------------------------------------------


def _fill_abc(client: Client) -> tuple[str, str, str]:
    a, b, c = (f"{name}-{uuid.uuid4().hex[:8]}" for name in "ABC")
    clock, start, puts = client.clock, time.time(), itertools.count()
    client.clock = lambda: start + next(puts) / 1000  # distinct put times: FIFO within a queue
    try:
        for queue, n in ((a, 5), (b, 2), (c, 3)):
            for i in range(n):
                client.queue(queue).put("K", i)
    finally:
        client.clock = clock
    return a, b, c


@pytest.mark.parametrize(("mode", "expected"), [
    ("ordered", "CCCBBAAAAA"),
    ("round-robin", "CBACBACAAA"),
])
async def test_one_slot_pops_in_the_documents_order(
    url: str, client: Client, mode: str, expected: str
) -> None:
    a, b, c = _fill_abc(client)
    letter = {a: "A", b: "B", c: "C"}
    seen: list[str] = []
    done = anyio.Event()

    async def handler(job: AsyncJob) -> None:
        seen.append(letter[job.queue or ""])
        if len(seen) == 10:
            done.set()

    worker = AsyncWorker(url, queues=[c, b, a], mode=mode, concurrency=1)  # type: ignore[arg-type]
    await _run_until(worker, handler, done)
    assert "".join(seen) == expected
    assert (worker.stats.popped, worker.stats.completed) == (10, 10)
    assert all(client.queue(q).length() == 0 for q in (a, b, c))


@pytest.mark.parametrize(("mode", "first_round"), [
    ("ordered", ["hi", "lo", "lo", "lo"]),
    ("round-robin", ["hi", "lo", "lo", "mid"]),
])
async def test_free_slots_are_filled_in_one_round(
    url: str, client: Client, monitor: Monitor, mode: str, first_round: list[str]
) -> None:
    """Four free slots, 'hi' holding one job: ordered asks 'hi' for 4 and 'lo' for the 3
    left; round-robin asks 'hi' for its share (2 of 4), passes what it lacked on to 'lo' (2 of
    the 3 left) and 'mid' gets the last."""
    tag = uuid.uuid4().hex[:8]
    names = {k: f"{k}-{tag}" for k in ("hi", "lo", "mid")}
    for key, n in (("hi", 1), ("lo", 7), ("mid", 6)):
        for i in range(n):
            client.queue(names[key]).put("K", i)
    order = [names["hi"], names["lo"], names["mid"]]
    first: list[str] = []
    gate = anyio.Event()
    done = anyio.Event()
    count = 0

    async def handler(job: AsyncJob) -> None:
        nonlocal count
        if len(first) < 4:
            first.append(job.queue or "")
            if len(first) == 4:
                gate.set()
            await gate.wait()  # hold all four slots until the first round is in
        count += 1
        if count == 14:
            done.set()

    worker = AsyncWorker(url, queues=order, mode=mode, concurrency=4)  # type: ignore[arg-type]
    await _run_until(worker, handler, done)
    back = {v: k for k, v in names.items()}
    assert sorted(back[q] for q in first) == sorted(first_round)
    pops = monitor.calls("pop", worker.worker_name)
    assert pops[0].endswith(f'"{names["hi"]}" "{worker.worker_name}" "4"' if mode == "ordered"
                            else f'"{names["hi"]}" "{worker.worker_name}" "2"')
    assert worker.stats.completed == 14


async def test_n_slots_share_one_connection(url: str, client: Client, monitor: Monitor) -> None:
    q1, q2 = _queue(), _queue()
    client.queue(q1).put_many([("K", i) for i in range(150)])
    client.queue(q2).put_many([("K", i) for i in range(50)])
    name = f"w-{uuid.uuid4().hex[:8]}"
    running = peak = 0
    seen: list[str] = []
    done = anyio.Event()
    connections: list[int] = []

    async def handler(job: AsyncJob) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(3):  # let the other slots' handlers start
            await anyio.lowlevel.checkpoint()
        running -= 1
        seen.append(job.jid)
        if len(seen) == 100:
            with Redis(url) as r:
                listing = r.execute("CLIENT", "LIST").decode()
            connections.append(listing.count(f"name={name} "))
        if len(seen) == 200:
            done.set()

    async with AsyncClient(url, worker_name=name, client_name=name) as shared:
        worker = AsyncWorker(shared, queues=[q1, q2], concurrency=8)
        await _run_until(worker, handler, done)
        assert shared.redis.connections == 1
    assert connections == [1]
    assert len(set(seen)) == 200 and 1 < peak <= 8
    assert (worker.stats.popped, worker.stats.completed, worker.stats.lost) == (200, 200, 0)
    assert worker.stats.in_flight == 0
    counts = [int(line.rsplit('"', 2)[-2]) for line in monitor.calls("pop", name)]
    assert max(counts) > 1  # several jobs in one pop when several slots were free
    assert len(monitor.calls("complete", name)) == 200


# -- heartbeats and lost locks -----------------------------------------------------------------


@pytest.mark.slow
async def test_heartbeats_keep_a_long_job(url: str, client: Client) -> None:
    """A 1 s lock, a 3 s handler: the job is never stalled, never popped by another worker,
    and completes."""
    q = _queue()
    client.config_set(f"{q}-heartbeat", 1)
    jid = client.queue(q).put("K", {"n": 1})
    started, done = anyio.Event(), anyio.Event()
    intruders: list[str] = []
    stalled: list[str] = []

    async def handler(job: AsyncJob) -> None:
        started.set()
        # held past its 1 s lock: four heartbeats, one each half lock
        await await_until(lambda: worker.stats.heartbeats >= 4, what="four heartbeats")
        done.set()

    async def intruder() -> None:
        await started.wait()
        async with AsyncClient(url, worker_name="intruder") as other:
            while not done.is_set():  # a try to take the job after each heartbeat
                intruders.extend(j.jid for j in await other.queue(q).pop(1))
                stalled.extend(await other.queue(q).jobs("stalled"))
                beats = worker.stats.heartbeats
                await await_until(lambda b=beats: worker.stats.heartbeats > b or done.is_set(),
                                  what="the next heartbeat")

    worker = AsyncWorker(url, queues=[q])
    async with anyio.create_task_group() as tg:
        tg.start_soon(intruder)
        await _run_until(worker, handler, done)
    assert intruders == [] and stalled == []
    job = client.get(jid)
    assert job is not None and job.state == "complete" and job.remaining == job.retries
    assert worker.stats.heartbeats >= 4 and worker.stats.lost == 0
    assert worker.stats.completed == 1


def _take_away(client: Client, url: str, jid: str, how: str, q: str) -> None:
    """Another client takes the job from the worker holding it."""
    if how.startswith("moved"):
        job = client.get(jid)
        assert job is not None
        job.move(q + "-elsewhere")
        popped = client.queue(q + "-elsewhere").pop()
        assert popped is not None
        if how == "moved":
            popped.complete(data={"by": "other"})
    elif how == "failed":
        job = client.get(jid)
        assert job is not None
        job.fail("taken", "failed by another client")
    elif how == "cancelled":
        client.cancel(jid)
    else:  # repopped: another worker whose clock is past the lock takes the expired job
        ahead_by = [100.0]
        with Client(url, worker_name="other", clock=lambda: time.time() + ahead_by[0]) as ahead:
            # qless-core's grace period: the first pop past the lock only warns its worker
            assert ahead.queue(q).pop() is None
            ahead_by[0] = 200.0
            popped = ahead.queue(q).pop()
            assert popped is not None and popped.jid == jid
            popped.complete(data={"by": "other"})


def _check_taken(client: Client, jid: str, how: str) -> None:
    job = client.get(jid)
    if how == "cancelled":
        assert job is None
    elif how == "failed":
        assert job is not None and job.state == "failed"
        assert job.failure is not None and job.failure["group"] == "taken"
    else:
        assert job is not None and job.state == "complete" and job.data == {"by": "other"}
        assert job.history[-1]["what"] == "done"
        assert [e for e in job.history if e["what"] == "popped"][-1]["worker"] == "other"


@pytest.mark.parametrize("how", ["moved", "failed", "cancelled", "repopped"])
async def test_lost_lock_cancels_the_handler_and_nothing_is_sent(
    url: str, client: Client, monitor: Monitor, how: str
) -> None:
    q = _queue()
    client.config_set(f"{q}-heartbeat", 1)
    jid = client.queue(q).put("K", {"n": 1})
    started, cancelled = anyio.Event(), anyio.Event()

    async def handler(job: AsyncJob) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        raise AssertionError("the handler was not cancelled")

    worker = AsyncWorker(url, queues=[q], worker_name=f"w-{uuid.uuid4().hex[:8]}")

    async def scenario() -> None:
        await started.wait()
        await anyio.to_thread.run_sync(_take_away, client, url, jid, how, q)
        await cancelled.wait()

    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        async def drive() -> None:
            with anyio.fail_after(10):
                await scenario()
            done.set()

        tg.start_soon(drive)
        await _run_until(worker, handler, done)
    assert (worker.stats.lost, worker.stats.completed, worker.stats.failed) == (1, 0, 0)
    for command in ("complete", "fail", "retry"):  # the other client's fail names the holder
        assert monitor.calls(command, jid, worker.worker_name, besides=client) == []
    _check_taken(client, jid, how)


async def test_a_raise_after_the_lock_was_taken_fails_nothing(
    url: str, client: Client, monitor: Monitor
) -> None:
    """The script fails a job in any state for anyone. A handler that raises after another
    client took its job (before any heartbeat noticed: the lock is 60 s) must not fail the
    job now running elsewhere: the worker renews the lock first, and that is refused."""
    q = _queue()
    jid = client.queue(q).put("K", 1)

    async def handler(job: AsyncJob) -> None:
        await anyio.to_thread.run_sync(_take_away, client, url, jid, "moved-running", q)
        raise Boom("too late")

    worker = await _one(url, q, handler, worker_name=f"w-{uuid.uuid4().hex[:8]}")
    assert monitor.calls("fail", jid, besides=client) == []
    job = client.get(jid)
    assert job is not None and (job.state, job.worker) == ("running", "other")
    assert (worker.stats.lost, worker.stats.failed) == (1, 0)


async def test_a_sync_handler_is_told_its_lock_is_lost(
    url: str, client: Client, monitor: Monitor
) -> None:
    q = _queue()
    client.config_set(f"{q}-heartbeat", 1)
    jid = client.queue(q).put("K", {"n": 1})
    started = threading.Event()
    saw_lost: list[bool] = []
    worker = Worker(url, queues=[q], worker_name=f"w-{uuid.uuid4().hex[:8]}")

    def handler(job: Job) -> None:
        started.set()
        with contextlib.suppress(AssertionError):  # saw_lost says it, after the worker stops
            wait_until(lambda: job.lost, 10, "the handler to see its job lost")
        saw_lost.append(job.lost)
        worker.stop()

    runner = threading.Thread(target=worker.run, args=(handler,), kwargs={"handle_signals": False})
    runner.start()
    assert await anyio.to_thread.run_sync(started.wait, 10)
    _take_away(client, url, jid, "moved", q)
    await anyio.to_thread.run_sync(runner.join, 20)
    assert not runner.is_alive()
    assert saw_lost == [True]
    assert (worker.stats.lost, worker.stats.completed) == (1, 0)
    assert monitor.calls("complete", jid, "w-") == []  # only "other" completed it
    _check_taken(client, jid, "moved")


# -- outcomes ------------------------------------------------------------------------------------


async def _one(url: str, q: str, handler: Callable[[AsyncJob], Awaitable[object]],
               n: int = 1, **options: Any) -> AsyncWorker:
    """Run a worker on ``q`` until its handler has run ``n`` times (and reported)."""
    calls = 0
    done = anyio.Event()

    async def counted(job: AsyncJob) -> object:
        nonlocal calls
        calls += 1
        try:
            return await handler(job)
        finally:
            if calls == n:
                done.set()

    worker = AsyncWorker(url, queues=[q], **options)
    await _run_until(worker, counted, done)
    return worker


async def test_return_completes_and_saves_data(url: str, client: Client) -> None:
    q = _queue()
    jid = client.queue(q).put("K", {"n": 1})

    async def handler(job: AsyncJob) -> None:
        job.data["seen"] = True

    worker = await _one(url, q, handler)
    job = client.get(jid)
    assert job is not None and job.state == "complete" and job.data == {"n": 1, "seen": True}
    assert worker.stats.completed == 1


async def test_next_completes_into_another_queue(url: str, client: Client) -> None:
    q = _queue()
    jids = [client.queue(q).put("K", i) for i in range(2)]

    async def handler(job: AsyncJob) -> Next:
        return Next(q + "-next", delay=60) if job.data == 0 else Next(q + "-next")

    await _one(url, q, handler, n=2)
    first, second = client.get(jids[0]), client.get(jids[1])
    assert first is not None and (first.state, first.queue) == ("scheduled", q + "-next")
    assert client.redis.execute("ZSCORE", f"ql:q:{q}-next-scheduled", jids[0]) is not None
    assert second is not None and (second.state, second.queue) == ("waiting", q + "-next")


async def test_a_job_the_handler_settled_is_left_alone(
    url: str, client: Client, monitor: Monitor
) -> None:
    q = _queue()
    jids = [client.queue(q).put("K", i) for i in range(3)]

    async def handler(job: AsyncJob) -> None:
        if job.data == 0:
            await job.complete(q + "-next")
        elif job.data == 1:
            await job.fail("mine", "failed by the handler")
        else:
            await job.retry(30)
            raise Boom("after retrying")  # ignored: the job is settled

    worker = await _one(url, q, handler, n=3, worker_name=f"w-{uuid.uuid4().hex[:8]}")
    states = [client.get(j) for j in jids]
    assert [s.state if s else None for s in states] == ["waiting", "failed", "scheduled"]
    assert states[1] is not None and states[1].failure is not None
    assert states[1].failure["group"] == "mine"
    assert len(monitor.calls("complete", worker.worker_name)) == 1
    assert len(monitor.calls("fail", worker.worker_name)) == 1
    assert len(monitor.calls("retry", worker.worker_name)) == 1
    assert (worker.stats.completed, worker.stats.failed, worker.stats.retried) == (0, 0, 0)


async def test_raise_fails_with_the_type_and_the_traceback(url: str, client: Client) -> None:
    q = _queue()
    jids = [client.queue(q).put("K", i) for i in range(2)]

    async def handler(job: AsyncJob) -> None:
        if job.data == 0:
            raise Boom("boom!")
        raise ValueError("bad value")

    worker = await _one(url, q, handler, n=2)
    boom, value = client.get(jids[0]), client.get(jids[1])
    assert boom is not None and boom.state == "failed" and boom.failure is not None
    assert boom.failure["group"] == "tests.qless.test_worker.Boom"
    assert boom.failure["message"].startswith("Traceback (most recent call last):")
    assert "raise Boom(\"boom!\")" in boom.failure["message"]
    assert boom.failure["message"].rstrip().endswith("Boom: boom!")
    assert value is not None and value.failure is not None
    assert value.failure["group"] == "ValueError"
    assert worker.stats.failed == 2
    assert client.failed() == {"tests.qless.test_worker.Boom": 1, "ValueError": 1}


async def test_retry_policy_retries_until_the_script_fails_the_job(
    url: str, client: Client
) -> None:
    q = _queue()
    jid = client.queue(q).put("K", 1, retries=2)
    remaining: list[int] = []

    async def handler(job: AsyncJob) -> None:
        remaining.append(job.remaining)
        raise TimeoutError("slow backend")

    policy = RetryPolicy(retry_on=(TimeoutError,), base_delay=0)
    worker = await _one(url, q, handler, n=3, retry=policy, idle_wait=0.05)
    assert remaining == [2, 1, 0]
    job = client.get(jid)
    assert job is not None and job.state == "failed" and job.failure is not None
    assert job.failure["group"] == f"failed-retries-{q}"
    assert (worker.stats.retried, worker.stats.failed) == (2, 1)


async def test_retry_policy_delays_and_other_errors_fail(url: str, client: Client) -> None:
    q = _queue()
    retried = client.queue(q).put("K", "timeout")
    failed = client.queue(q).put("K", "other")

    async def handler(job: AsyncJob) -> None:
        raise TimeoutError() if job.data == "timeout" else Boom()

    policy = RetryPolicy(retry_on=(TimeoutError,), base_delay=30)
    assert [policy.delay(n) for n in (1, 2, 3)] == [30, 60, 60]
    await _one(url, q, handler, n=2, retry=policy)
    job = client.get(retried)
    assert job is not None and job.state == "scheduled" and job.remaining == 4
    job = client.get(failed)
    assert job is not None and job.state == "failed"


async def test_a_fractional_retry_delay_is_sent_as_given(
    url: str, client: Client, monitor: Monitor
) -> None:
    """qless delays are seconds with a fraction (unlike beanstalk's whole seconds): the job is
    scheduled exactly 0.25 s after the ``now`` of the retry, nothing rounded."""
    q = _queue()
    jid = client.queue(q).put("K", "timeout")

    async def handler(job: AsyncJob) -> None:
        raise TimeoutError()

    await _one(url, q, handler, retry=RetryPolicy(retry_on=(TimeoutError,), base_delay=0.25))
    job = client.get(jid)
    assert job is not None and job.state == "scheduled"
    [line] = monitor.calls("retry", jid)
    words = line.split('"EVALSHA"', 1)[1].split('" "')
    retried_at = float(words[words.index("retry") + 1])  # the retry's own ``now``
    assert words[-1].rstrip('"') == "0.25"
    score = client.redis.execute("ZSCORE", f"ql:q:{q}-scheduled", jid)
    assert float(score) - retried_at == pytest.approx(0.25, abs=1e-6)


async def test_worker_name_defaults_to_host_and_pid(url: str, client: Client) -> None:
    q = _queue()
    jid = client.queue(q).put("K", 1)
    holders: list[str] = []

    async def handler(job: AsyncJob) -> None:
        got = await anyio.to_thread.run_sync(client.get, jid)
        assert got is not None
        holders.append(got.worker)

    worker = await _one(url, q, handler)
    assert holders == [f"{socket.gethostname()}-{os.getpid()}"] == [worker.worker_name]


# -- stop, shutdown, cancellation ----------------------------------------------------------------


async def test_cancelling_run_hands_running_jobs_back(url: str, client: Client) -> None:
    q = _queue()
    jids = [client.queue(q).put("K", i) for i in range(3)]
    started = 0
    all_started = anyio.Event()

    async def handler(job: AsyncJob) -> None:
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        await anyio.sleep_forever()

    worker = AsyncWorker(url, queues=[q], concurrency=3)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handler)
            await all_started.wait()
            tg.cancel_scope.cancel()
    counts = client.queue(q).counts()
    assert (counts["waiting"], counts["running"]) == (3, 0)
    assert all((j := client.get(jid)) is not None and j.remaining == 4 for jid in jids)


async def _hold_server(url: str, seconds: float) -> None:
    async with AsyncClient(url) as blocker:
        await blocker.redis.execute("DEBUG", "SLEEP", seconds)


async def test_a_cancelled_pop_hands_its_jobs_back(url: str, client: Client) -> None:
    """The server is held (DEBUG SLEEP) so the pop is out when its caller is cancelled; the
    pop still runs once the server wakes, and its jobs must not stay locked to nobody."""
    await _cancel_a_pop(url, client, "anyio-scope")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("how", ["asyncio-cancel", "asyncio-wait_for"])
async def test_asyncio_cancelling_a_pop_hands_its_jobs_back(
    url: str, client: Client, how: str
) -> None:
    """The same with asyncio's own cancellation, which anyio's shields do not stop."""
    await _cancel_a_pop(url, client, how)


async def _cancel_a_pop(url: str, client: Client, how: str) -> None:
    q = _queue()
    jids = [client.queue(q).put("K", i) for i in range(3)]
    async with AsyncClient(url, worker_name="canceller") as popper:
        await popper.queue(q).peek()  # connected, script loaded
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hold_server, url, 0.5)
            await anyio.sleep(0.1)
            if how == "anyio-scope":
                with anyio.move_on_after(0.1) as scope:
                    await popper.queue(q).pop(3)
                assert scope.cancelled_caught
            elif how == "asyncio-cancel":
                task = asyncio.ensure_future(popper.queue(q).pop(3))
                await asyncio.sleep(0.1)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            else:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(popper.queue(q).pop(3), 0.1)

        async def back() -> bool:
            counts = await popper.queue(q).counts()
            return counts["waiting"] == 3 and counts["running"] == 0

        await await_until(back, 5, "the popped jobs back in the queue")
    for jid in jids:
        job = client.get(jid)
        assert job is not None and job.state == "waiting" and job.remaining == 4
        assert [h.get("worker") for h in job.history if h["what"] == "popped"] == ["canceller"]


async def test_an_uncancelled_pop_is_unchanged(url: str, client: Client) -> None:
    q = _queue()
    client.queue(q).put("K", 1)
    async with AsyncClient(url, worker_name="popper") as popper:
        [job] = await popper.queue(q).pop(3)
        assert job.state == "running" and job.remaining == 5
        assert await popper.queue(q).pop() is None


# -- the sync Worker -----------------------------------------------------------------------------


def test_a_sync_handler_completes_its_job_itself_or_returns_next(
    url: str, client: Client
) -> None:
    """A blocking handler's own ``complete`` goes over the worker's connection; a ``Next`` it
    returns completes the job into that queue. (Threads, slots and stop from a handler thread:
    tests/workers/test_conformance.py.)"""
    q = _queue()
    jids = client.queue(q).put_many([("K", i) for i in range(60)])
    lock = threading.Lock()
    seen: list[str] = []
    worker = Worker(url, queues=[q], concurrency=4)

    def handler(job: Job) -> object:
        with lock:
            seen.append(job.jid)
            if len(seen) == len(jids):
                worker.stop()  # from a handler thread
        if job.data % 2:
            job.complete(q + "-odd")  # the handler's own call, on the worker's connection
            return None
        return Next(q + "-even")

    runner = threading.Thread(target=worker.run, args=(handler,), daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive()
    assert sorted(seen) == sorted(jids)
    assert worker.stats.completed == 30 and worker.stats.popped == 60
    assert client.queue(q + "-odd").length() == 30 == client.queue(q + "-even").length()


def _script(tmp_path: Any, body: str) -> str:
    path = tmp_path / "w.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.slow
def test_a_killed_workers_job_is_popped_again_after_its_lock(
    url: str, client: Client, tmp_path: Any
) -> None:
    q = _queue()
    client.config_set(f"{q}-heartbeat", 1)
    client.config_set("grace-period", 1)  # qless-core's wait past an expired lock (10 s)
    jid = client.queue(q).put("K", 1)
    script = _script(tmp_path, f"""
        import time
        from qless_client import Worker
        def handler(job):
            print("start", job.jid, job.worker, flush=True)
            time.sleep(60)
        Worker({url!r}, queues=[{q!r}]).run(handler)
    """)
    proc = subprocess.Popen([sys.executable, script], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    assert proc.stdout is not None
    _, started, holder = proc.stdout.readline().split()
    assert started == jid and holder.endswith(f"-{proc.pid}")
    first = client.get(jid)
    assert first is not None and first.expires is not None
    # heartbeats keep the lock while the worker lives: renewed past its first expiry
    held = wait_until(lambda: (j := client.get(jid)) is not None and j.expires is not None
                      and j.expires >= first.expires + timedelta(seconds=1) and j, 10,
                      "the lock renewed past its first expiry", interval=0.1)
    assert client.queue(q).pop() is None
    assert (held.state, held.worker) == ("running", holder)
    proc.kill()
    proc.wait()
    [job] = wait_until(lambda: client.queue(q).pop(1), 10, "the job to come back",
                       interval=0.1)
    assert job.jid == jid and job.worker == "other" and job.remaining == job.retries - 1
    assert client.queue(q).stats()["retries"] == 1  # the script counts the expiry as a retry


@pytest.mark.slow
async def test_reconnects_after_a_redis_restart(fresh_redis: RedisServer) -> None:
    q = _queue()
    done_before, done_after = anyio.Event(), anyio.Event()
    seen: list[Any] = []

    async def handler(job: AsyncJob) -> None:
        seen.append(job.data)
        (done_before if job.data == "before" else done_after).set()

    worker = AsyncWorker(fresh_redis.url, queues=[q], idle_wait=0.05)

    async def scenario() -> None:
        with anyio.fail_after(20):
            with Client(fresh_redis.url) as c:
                c.queue(q).put("K", "before")
            await done_before.wait()
            await anyio.to_thread.run_sync(fresh_redis.restart)
            with Client(fresh_redis.url) as c:  # the restart lost everything
                c.queue(q).put("K", "after")
            await done_after.wait()

    finished = anyio.Event()
    async with anyio.create_task_group() as tg:
        async def drive() -> None:
            await scenario()
            finished.set()

        tg.start_soon(drive)
        await _run_until(worker, handler, finished)
    assert seen == ["before", "after"]
    assert worker.stats.reconnects >= 1 and worker.stats.completed == 2
    with Client(fresh_redis.url) as c:
        assert c.queue(q).length() == 0


# -- arguments -----------------------------------------------------------------------------------


def test_bad_arguments_raise_at_once(url: str) -> None:
    with pytest.raises(ValueError):
        AsyncWorker(url, queues=[])
    with pytest.raises(TypeError):
        AsyncWorker(url, queues="emails")
    with pytest.raises(LocalProtocolError):
        AsyncWorker(url, queues=["a", "a"])
    with pytest.raises(LocalProtocolError):
        AsyncWorker(url, queues=["a b "])
    with pytest.raises(ValueError):
        AsyncWorker(url, queues=["a"], mode="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AsyncWorker(url, queues=["a"], concurrency=0)
    with pytest.raises(LocalProtocolError):
        AsyncWorker(url, queues=["a"], idle_wait=-1)
    with pytest.raises(LocalProtocolError):
        Worker("redis://h:notaport", queues=["a"])
    with pytest.raises(TypeError):
        Worker(Client(url), queues=["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        AsyncWorker(AsyncClient(url), queues=["a"], worker_name="x")
    with pytest.raises(LocalProtocolError):
        Next("")
    with pytest.raises(LocalProtocolError):
        Next("q", delay=-1)
    with pytest.raises(LocalProtocolError):
        Next("q", delay=1, depends=["j"])
    with pytest.raises(TypeError):
        RetryPolicy(retry_on=ValueError)  # type: ignore[arg-type]
    assert failure_group(Boom()) == "tests.qless.test_worker.Boom"
    assert failure_group(json.JSONDecodeError("x", "", 0)) == "json.decoder.JSONDecodeError"


# -- threads that cannot be cancelled still take their slot -------------------------------------


def _run_sync_worker(worker: Worker, handler: Callable[[Job], object]) -> threading.Thread:
    runner = threading.Thread(target=worker.run, args=(handler,),
                              kwargs={"handle_signals": False}, daemon=True)
    runner.start()
    return runner


@pytest.mark.slow
@pytest.mark.parametrize("how", ["lost", "popped again"])
def test_a_thread_still_running_keeps_its_slot(url: str, client: Client, how: str) -> None:
    """The first job's handler thread goes on after the worker gave its job up: its lock
    was taken away ("lost"); or, with concurrency 2, the job was put back in the queue and this
    worker popped it again, so a second thread works on it too ("popped again"). A thread
    cannot be cancelled: it still fills its slot (the engine counts no slot free, and pops
    only into a free one) until the threads return. Then the next job is handled. (Over
    ``handler_timeout``: tests/workers/test_conformance.py.)"""
    q = _queue()
    client.config_set(f"{q}-heartbeat", 1)
    first = client.queue(q).put("K", "first")
    started, release = threading.Event(), threading.Event()
    seen: list[str] = []
    concurrency = 2 if how == "popped again" else 1
    worker = Worker(url, queues=[q], concurrency=concurrency, idle_wait=0.05,
                    worker_name=f"w-{uuid.uuid4().hex[:8]}")

    def handler(job: Job) -> None:
        seen.append(job.data)
        if job.data == "first":
            started.set()
            release.wait(20)  # blind to job.lost, as a blocking call is
        else:
            worker.stop()

    runner = _run_sync_worker(worker, handler)
    try:
        assert started.wait(10)
        if how == "lost":
            _take_away(client, url, first, "moved", q)
        elif how == "popped again":
            job = client.get(first)
            assert job is not None
            job.move(q)
        wait_until(lambda: worker.stats.lost and len(seen) >= concurrency,
                   10, f"the first job lost, seen {concurrency} times")
        second = client.queue(q).put("K", "second")
        assert worker._runner._async._engine.free == 0  # every slot filled by a thread
        waiting = client.get(second)
        assert waiting is not None and waiting.state == "waiting", waiting
        assert seen == ["first"] * concurrency
    finally:
        release.set()
    runner.join(15)
    assert not runner.is_alive()
    assert seen == ["first"] * concurrency + ["second"]
    job = client.get(second)
    assert job is not None and job.state == "complete"
