"""Gearman workers against the bundled server and the real gearmand: what ``stats`` counts, a
handler's failure logged with its traceback, a job abandoned at the shutdown deadline, slots
shared by several servers, running again after a stop (and after giving up a thread). (The
protocol-level worker tests are in test_clients.py, the signals in
tests/workers/test_signals.py.)"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from gearman_client import AsyncClient, AsyncJob, Client, Job, JobFailed, Worker
from gearman_client.aio import AsyncWorker
from jobwire.events import EventSink
from tests.test_events import read_jsonl

from .conftest import GearmanServer, start_gearman


class Refused(Exception):
    """A handler's own exception."""


@pytest.mark.anyio
async def test_stats_count_grabs_outcomes_and_jobs_in_flight(
    gearman_server: GearmanServer, function: str
) -> None:
    release = anyio.Event()
    holding = anyio.Event()

    async def handler(job: AsyncJob) -> bytes:
        if job.data == b"boom":
            raise Refused("no")
        if job.data == b"hold":
            holding.set()
            await release.wait()
        return job.data

    worker = AsyncWorker(gearman_server.url, concurrency=2)
    worker.register(function, handler)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: worker.run(handle_signals=False))
            async with AsyncClient(gearman_server.url) as client:
                assert [await client.submit(function, b"%d" % i) for i in range(3)] == [
                    b"0", b"1", b"2"]
                with pytest.raises(JobFailed):
                    await client.submit(function, b"boom")
                tg.start_soon(client.submit, function, b"hold")
                await holding.wait()
                assert worker.stats.in_flight == 1
                release.set()
                while worker.stats.completed < 4:
                    await anyio.sleep(0.01)
            worker.stop()
    stats = worker.stats
    assert (stats.grabbed, stats.completed, stats.failed, stats.lost, stats.abandoned,
            stats.in_flight, stats.reconnects) == (5, 4, 1, 0, 0, 0, 0)


def test_sync_stats_and_reconnects_after_a_server_restart(function: str) -> None:
    server = start_gearman("bundled")
    worker = Worker(server.url)
    worker.register(function, lambda job: job.data.upper())
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        with Client(server.url, timeout=10) as client:
            assert client.submit(function, b"a") == b"A"
        server.stop()
        server = start_gearman("bundled", port=server.port)
        with Client(server.url, timeout=10) as client:
            assert client.submit(function, b"b") == b"B"  # the worker came back
    finally:
        worker.stop()
        runner.join(10)
        server.stop()
    assert not runner.is_alive()
    assert (worker.stats.grabbed, worker.stats.completed, worker.stats.in_flight) == (2, 2, 0)
    assert worker.stats.reconnects >= 1


def _one_error_with_traceback(caplog: pytest.LogCaptureFixture, handle: bytes,
                              function: str) -> None:
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[0] is Refused
    assert handle.decode() in record.getMessage() and function in record.getMessage()
    assert "out of paper" in caplog.text and "Traceback" in caplog.text


def test_a_sync_handler_failure_is_logged_with_its_traceback(
    gearman_server: GearmanServer, function: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gearman_client.worker")

    def fail(job: Job) -> bytes:
        raise Refused("out of paper")

    worker = Worker(gearman_server.url)
    worker.register(function, fail)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        with Client(gearman_server.url, timeout=10) as client, pytest.raises(JobFailed) as failed:
            client.submit(function, b"x")
    finally:
        worker.stop()
        runner.join(10)
    assert not runner.is_alive()
    _one_error_with_traceback(caplog, failed.value.handle, function)


@pytest.mark.anyio
async def test_an_async_handler_failure_is_logged_with_its_traceback(
    gearman_server: GearmanServer, function: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gearman_client.worker")

    async def fail(job: AsyncJob) -> bytes:
        raise Refused("out of paper")

    worker = AsyncWorker(gearman_server.url)
    worker.register(function, fail)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: worker.run(handle_signals=False))
            async with AsyncClient(gearman_server.url) as client:
                with pytest.raises(JobFailed) as failed:
                    await client.submit(function, b"x")
            worker.stop()
    _one_error_with_traceback(caplog, failed.value.handle, function)


@pytest.mark.anyio
async def test_a_job_abandoned_at_the_shutdown_deadline_is_released_to_the_server(
    gearman_server: GearmanServer, function: str, tmp_path: Path
) -> None:
    """Gearman cannot hand a job back: past ``shutdown_timeout`` the handler is cancelled and
    the connection closed, and the server has the job again (a ``released`` event)."""
    cancelled = anyio.Event()

    async def stuck(job: AsyncJob) -> bytes:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return b""  # pragma: no cover

    sink = EventSink(tmp_path)
    worker = AsyncWorker(gearman_server.url, shutdown_timeout=0.2, events=sink)
    worker.register(function, stuck)
    with anyio.fail_after(20):
        async with AsyncClient(gearman_server.url) as client:
            handle = await client.submit_background(function, b"x")
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: worker.run(handle_signals=False))
                while worker.stats.in_flight == 0:
                    await anyio.sleep(0.01)
                worker.stop()
            assert cancelled.is_set()
            # The server requeues it once it has read the close: queued again, not running.
            while (status := await client.get_status(handle)).running:
                await anyio.sleep(0.02)
            assert status.known
    sink.close()
    assert (worker.stats.abandoned, worker.stats.completed, worker.stats.in_flight) == (1, 0, 0)
    assert [(r["event"], r["job"]) for r in read_jsonl(tmp_path)] == [
        ("reserved", handle.decode()), ("released", handle.decode())]


@pytest.mark.anyio
async def test_two_servers_share_the_slots(function: str) -> None:
    """One slot for two live servers: each server's jobs are grabbed in turn as the slot comes
    free, never two at once, and neither server is left waiting."""
    servers = [start_gearman("bundled"), start_gearman("bundled")]
    running = peak = 0

    async def handler(job: AsyncJob) -> bytes:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        running -= 1
        return job.data

    worker = AsyncWorker([s.url for s in servers], concurrency=1)
    worker.register(function, handler)
    results: list[bytes] = []

    async def submit(url: str, data: bytes) -> None:
        async with AsyncClient(url) as client:
            results.append(await client.submit(function, data))

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: worker.run(handle_signals=False))
                async with anyio.create_task_group() as jobs:
                    for i in range(4):
                        jobs.start_soon(submit, servers[0].url, b"one-%d" % i)
                        jobs.start_soon(submit, servers[1].url, b"two-%d" % i)
                worker.stop()
    finally:
        for server in servers:
            server.stop()
    assert sorted(results) == sorted([b"one-%d" % i for i in range(4)]
                                     + [b"two-%d" % i for i in range(4)])
    assert peak == 1
    assert (worker.stats.grabbed, worker.stats.completed, worker.stats.in_flight) == (8, 8, 0)


def test_a_stopped_worker_runs_again(gearman_server: GearmanServer, function: str) -> None:
    """``stop`` ends one run (or, before it, the next one); the worker can run after."""
    worker = Worker(gearman_server.url)
    worker.register(function, lambda job: job.data.upper())
    worker.stop()
    worker.run(handle_signals=False)  # returns at once: stopped before it began
    with Client(gearman_server.url, timeout=10) as client:
        for data in (b"a", b"b"):
            runner = threading.Thread(target=worker.run, kwargs={"handle_signals": False},
                                      daemon=True)
            runner.start()
            try:
                assert client.submit(function, data) == data.upper()
            finally:
                worker.stop()
                runner.join(10)
            assert not runner.is_alive()
    assert (worker.stats.grabbed, worker.stats.completed) == (2, 2)


def test_a_thread_given_up_holds_no_slot_in_the_next_run(
    gearman_server: GearmanServer, function: str
) -> None:
    """A handler thread still running at the shutdown deadline is given up; it runs on, but
    the worker's next run has all its slots."""
    entered, gate = threading.Event(), threading.Event()
    calls = 0

    def handler(job: Job) -> bytes:
        nonlocal calls
        calls += 1
        if calls == 1:
            entered.set()
            gate.wait(30)
        return job.data.upper()

    worker = Worker(gearman_server.url, shutdown_timeout=0.1)
    worker.register(function, handler)
    with Client(gearman_server.url, timeout=10) as client:
        client.submit_background(function, b"first")
        runner = threading.Thread(target=worker.run, kwargs={"handle_signals": False},
                                  daemon=True)
        runner.start()
        try:
            assert entered.wait(10)
            worker.stop()
            runner.join(10)
            assert worker.stats.abandoned == 1
            runner = threading.Thread(target=worker.run, kwargs={"handle_signals": False},
                                      daemon=True)
            runner.start()
            assert client.submit(function, b"second") == b"SECOND"  # the first still waits
        finally:
            gate.set()
            worker.stop()
            runner.join(10)
    assert not runner.is_alive()
