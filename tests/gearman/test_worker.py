"""Gearman workers against the bundled server and the real gearmand: what ``stats`` counts, a
handler's failure logged with its traceback, a job abandoned at the shutdown deadline. (The
protocol-level worker tests are in test_clients.py, the signals in
tests/workers/test_signals.py.)"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import anyio
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
