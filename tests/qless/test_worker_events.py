"""qless workers with an event sink, against a real redis-server: the events written (kinds,
jids, queues, worker name) carry the times the script recorded in the job's history (which
qless-core keeps in whole seconds), so that wait and run times computed from them are the
script's own statistics."""

from __future__ import annotations

import math
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jobwire.events import EventSink
from qless_client import AsyncClient, AsyncJob, Client, Job, RetryPolicy
from qless_client._redis import Redis
from qless_client.worker import AsyncWorker, Worker
from tests.qless.conftest import RedisServer
from tests.test_events import read_jsonl
from tests.waiting import await_until, wait_until

DB = 13


class Boom(Exception):
    """A handler's own exception."""


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    with Redis.from_url(f"{redis_server.url}/{DB}") as r:
        r.execute("FLUSHDB")
    yield f"{redis_server.url}/{DB}"


@pytest.fixture
def client(url: str) -> Iterator[Client]:
    with Client(url, worker_name="other") as c:
        yield c


def by_job(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["job"], []).append(r)
    return out


def kinds(events: list[dict[str, Any]]) -> list[tuple[str, int | None, str | None]]:
    return [(e["event"], e["attempt"], e["group"]) for e in events]


def whole_seconds() -> float:
    """A clock in whole seconds: qless-core's history keeps only whole seconds, so with it every
    time in a job's history is the exact ``now`` of its call."""
    return float(math.floor(time.time()))


@pytest.mark.anyio
async def test_async_worker_events_match_the_scripts_records(
    url: str, client: Client, tmp_path: Path
) -> None:
    q = f"q-{uuid.uuid4().hex[:12]}"
    name = f"ev-{uuid.uuid4().hex[:8]}"
    client.clock = whole_seconds
    jids = [client.queue(q).put("K", i) for i in range(4)]
    jids.append(client.queue(q).put("K", 4, retries=0))  # its retry fails it
    tries = 0
    done = anyio.Event()
    settled = 0

    async def handler(job: AsyncJob) -> None:
        nonlocal tries, settled
        settled += 1
        if settled == 6:
            done.set()
        if job.data == 1:
            raise Boom("no")
        if job.data == 2:
            tries += 1
            if tries == 1:
                raise TimeoutError("try again")
        if job.data == 3:
            await job.complete()  # settled by the handler itself: seen all the same
        if job.data == 4:
            raise TimeoutError("no retries left")

    sink = EventSink(tmp_path)
    async with AsyncClient(url, worker_name=name, clock=whole_seconds) as popper:
        worker = AsyncWorker(popper, queues=[q], concurrency=2, idle_wait=0.05,
                             retry=RetryPolicy(retry_on=(TimeoutError,), base_delay=0),
                             events=sink)

        async def stopper() -> None:
            await done.wait()
            await await_until(lambda: worker.stats.in_flight == 0, what="no job in flight")
            worker.stop()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stopper)
                await worker.run(handler, handle_signals=False)
    sink.close()
    # The second pop of jids[2] may be sent just after its retry (two slots): it is seen after
    # the retry, whichever task wakes first, and nothing is counted lost.
    counts = worker.stats
    assert (counts.popped, counts.completed, counts.failed, counts.retried, counts.lost) == (
        6, 2, 2, 1, 0)
    records = read_jsonl(tmp_path)
    assert {(r["v"], r["system"], r["queue"], r["worker"]) for r in records} == {
        (1, "qless", q, name)}
    jobs = by_job(records)
    assert kinds(jobs[jids[0]]) == [("reserved", 1, None), ("completed", 1, None)]
    assert kinds(jobs[jids[1]]) == [
        ("reserved", 1, None), ("failed", 1, "tests.qless.test_worker_events.Boom")]
    assert kinds(jobs[jids[2]]) == [("reserved", 1, None), ("retried", 1, None),
                                    ("reserved", 2, None), ("completed", 2, None)]
    assert kinds(jobs[jids[3]]) == [("reserved", 1, None), ("completed", 1, None)]
    assert kinds(jobs[jids[4]]) == [("reserved", 1, None), ("retried", 1, None),
                                    ("failed", 1, f"failed-retries-{q}")]
    exhausted = client.get(jids[4])
    assert exhausted is not None and exhausted.failure is not None
    assert [e["time"] for e in jobs[jids[4]][1:]] == [exhausted.failure["when"]] * 2

    def whens(jid: str) -> list[tuple[str, int]]:
        job = client.get(jid)
        assert job is not None
        return [(e["what"], e["when"]) for e in job.history]

    # Every time is the one the script wrote into the job's history.
    for i in (0, 3):
        reserved, completed = jobs[jids[i]]
        assert whens(jids[i]) == [("put", reserved["put_time"]), ("popped", reserved["time"]),
                                  ("done", completed["time"])]
    failed_job = client.get(jids[1])
    assert failed_job is not None and failed_job.failure is not None
    reserved, failed = jobs[jids[1]]
    assert whens(jids[1]) == [("put", reserved["put_time"]), ("popped", reserved["time"]),
                              ("failed", failed["time"])]
    assert failed["time"] == failed_job.failure["when"]
    # retry writes no history; qless-core counts the next wait from the previous pop
    r1, retried, r2, completed = jobs[jids[2]]
    assert whens(jids[2]) == [("put", r1["put_time"]), ("popped", r1["time"]),
                              ("popped", r2["time"]), ("done", completed["time"])]
    assert r2["put_time"] == r1["time"] <= retried["time"] <= r2["time"]

    # So the wait and run times from the events are the script's statistics of the queue.
    stats = client.queue(q).stats()
    waits = [r["time"] - r["put_time"] for r in records if r["event"] == "reserved"]
    last_reserved: dict[str, float] = {}
    runs = []
    for r in records:
        if r["event"] == "reserved":
            last_reserved[r["job"]] = r["time"]
        elif r["event"] == "completed":
            runs.append(r["time"] - last_reserved[r["job"]])
    assert stats["wait"]["count"] == len(waits) == 6
    assert stats["wait"]["mean"] == pytest.approx(statistics.fmean(waits), rel=1e-9, abs=1e-9)
    assert stats["run"]["count"] == len(runs) == 3
    assert stats["run"]["mean"] == pytest.approx(statistics.fmean(runs), rel=1e-9, abs=1e-9)
    # qless-core counts ``fail`` calls as failures; a retry (even one out of retries) is not
    # counted, nor is a retry a "retry" (only an expired lock is)
    assert (stats["failures"], stats["retries"], stats["failed"]) == (1, 0, 1)


@pytest.mark.anyio
async def test_a_job_popped_again_while_held_is_lost_once(
    url: str, client: Client, tmp_path: Path
) -> None:
    """Another client puts a job this worker holds back into its queue (the lock goes with
    it) and the worker pops it again: the first pop is lost when the second pop's reply comes
    (its handler cancelled), counted and recorded once."""
    q = f"q-{uuid.uuid4().hex[:12]}"
    name = f"ev-{uuid.uuid4().hex[:8]}"
    jid = client.queue(q).put("K", 1)
    started, cancelled, completed = anyio.Event(), anyio.Event(), anyio.Event()

    async def handler(job: AsyncJob) -> None:
        if not started.is_set():
            started.set()
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.set()
        completed.set()

    def move_back() -> None:
        job = client.get(jid)
        assert job is not None and job.state == "running"
        job.move(q)

    sink = EventSink(tmp_path)
    worker = AsyncWorker(url, queues=[q], concurrency=2, idle_wait=0.05, worker_name=name,
                         events=sink)

    async def scenario() -> None:
        await started.wait()
        await anyio.to_thread.run_sync(move_back)
        await cancelled.wait()
        await completed.wait()
        await await_until(lambda: worker.stats.in_flight == 0, what="no job in flight")
        worker.stop()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(scenario)
            await worker.run(handler, handle_signals=False)
    sink.close()
    stats = worker.stats
    assert (stats.popped, stats.lost, stats.completed, stats.failed) == (2, 1, 1, 0)
    events = by_job(read_jsonl(tmp_path))[jid]
    assert kinds(events) == [("reserved", 1, None), ("lost", 1, None), ("reserved", 1, None),
                             ("completed", 1, None)]
    assert events[1]["time"] == events[2]["time"]  # lost at the second pop's ``now``


def test_sync_worker_events(url: str, client: Client, tmp_path: Path) -> None:
    q = f"q-{uuid.uuid4().hex[:12]}"
    jids = [client.queue(q).put("K", i) for i in range(3)]
    handled = threading.Event()
    count = 0
    lock = threading.Lock()

    def handler(job: Job) -> None:
        nonlocal count
        if job.data == 1:
            job.retry(60)  # from the handler's thread, on the worker's connection
        with lock:
            count += 1
            if count == 3:
                handled.set()

    with EventSink(tmp_path) as sink:
        worker = Worker(url, queues=[q], concurrency=3, idle_wait=0.05, worker_name="sync-ev",
                        events=sink)
        runner = threading.Thread(target=worker.run, args=(handler,),
                                  kwargs={"handle_signals": False})
        runner.start()
        try:
            assert handled.wait(20)
            wait_until(lambda: not worker.stats.in_flight, 10, "no job in flight")
        finally:
            worker.stop()
            runner.join(20)
        assert not runner.is_alive()
    jobs = by_job(read_jsonl(tmp_path))
    assert {r["worker"] for events in jobs.values() for r in events} == {"sync-ev"}
    assert kinds(jobs[jids[0]]) == kinds(jobs[jids[2]]) == [
        ("reserved", 1, None), ("completed", 1, None)]
    assert kinds(jobs[jids[1]]) == [("reserved", 1, None), ("retried", 1, None)]
    put, popped = client.get(jids[1]).history  # type: ignore[union-attr]
    reserved, retried = jobs[jids[1]]
    assert (put["what"], popped["what"]) == ("put", "popped")  # a retry writes no history
    assert math.floor(reserved["time"]) == popped["when"]
    assert reserved["put_time"] == put["when"] and retried["time"] >= reserved["time"]
