"""Worker and AsyncWorker against the bundled server: concurrency, errors (logged with their
tracebacks), TTR, reconnects, stats, the shutdown deadline."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import anyio
import pytest

from jobwire import Backoff
from jobwire.events import EventSink
from tests.conftest import free_port
from tests.test_events import read_jsonl
from tests.waiting import wait_until
from workq_client import AsyncClient, AsyncWorker, Client, JobContext, Worker
from workq_client.server import run_server
from workq_client.worker import LateResult

from .conftest import WorkqServer, start_workq_server
from .helpers import realish_workq


class Tracker:
    """Counts handlers running at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def enter(self) -> None:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


# -- async -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_worker_concurrency_results_and_errors(
    workq_server: WorkqServer, qname: str
) -> None:
    tracker = Tracker()

    async def handle(job: JobContext) -> bytes | str | None:
        tracker.enter()
        try:
            await anyio.sleep(0.1)
            if job.payload == b"boom":
                raise ValueError("boom")
            if job.payload == b"text":
                return "tëxt"
            if job.payload == b"none":
                return None
            return job.payload.upper()
        finally:
            tracker.leave()

    worker = AsyncWorker((workq_server.host, workq_server.port), [qname, qname + "-b"],
                         concurrency=4, wait=1)
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        payloads = [b"a%d" % i for i in range(8)] + [b"boom", b"text", b"none"]
        ids = [await client.add(qname if i % 2 else qname + "-b", p)
               for i, p in enumerate(payloads)]
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handle)
            results = [await client.result(job_id, wait=5) for job_id in ids]
            worker.stop()
    assert tracker.peak == 4
    assert [r.data for r in results[:8]] == [p.upper() for p in payloads[:8]]
    assert all(r.success for r in results[:8])
    assert (results[8].success, results[8].data) == (False, b"ValueError: boom")
    assert results[9].data == "tëxt".encode() and results[10].data == b""
    assert (worker.stats.completed, worker.stats.failed, worker.stats.leased) == (10, 1, 11)
    assert (worker.stats.lost, worker.stats.abandoned, worker.stats.in_flight) == (0, 0, 0)


@pytest.mark.anyio
async def test_a_result_of_4043_bytes_is_reported(workq_server: WorkqServer, qname: str) -> None:
    """``complete <id> 4043`` and its result make 4097 bytes, a size Workq 0.2.0 refuses (the
    bundled server too): the worker's report still gets through, at the first try."""
    async def handle(job: JobContext) -> bytes:
        return b"r" * 4043

    worker = AsyncWorker((workq_server.host, workq_server.port), qname, wait=1)
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        job_id = await client.add(qname, b"")
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handle)
            result = await client.result(job_id, wait=5)
            worker.stop()
        info = await client.inspect_job(job_id)
    assert (result.success, result.data) == (True, b"r" * 4043)
    assert info.attempts == 1
    assert (worker.stats.completed, worker.stats.lost) == (1, 0)


@pytest.mark.anyio
async def test_async_worker_reports_overruns_and_late_results(
    workq_server: WorkqServer, qname: str
) -> None:
    overruns: list[str] = []
    lates: list[LateResult] = []
    deleted = anyio.Event()
    seen_overrun_flag: list[bool] = []

    async def handle(job: JobContext) -> bytes:
        await anyio.sleep(0.5)  # TTR is 0.2 s
        seen_overrun_flag.append(job.overrun)
        if job.payload == b"gone":
            await deleted.wait()
        return b"late " + job.payload

    worker = AsyncWorker((workq_server.host, workq_server.port), qname, concurrency=1,
                         wait=1, on_overrun=lambda job: overruns.append(job.job_id),
                         on_late_result=lates.append)
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        kept = await client.add(qname, b"kept", ttr=0.2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handle)
            record = await client.result(kept, wait=5)
            gone = await client.add(qname, b"gone", ttr=0.2)
            while gone not in overruns:
                await anyio.sleep(0.02)
            await client.delete(gone)
            deleted.set()
            while len(lates) < 2:
                await anyio.sleep(0.02)
            worker.stop()
    # The late result of a requeued job is still accepted by the server, and reported.
    assert record.success and record.data == b"late kept"
    assert overruns[:1] == [kept] and seen_overrun_flag[:2] == [True, True]
    assert lates[0].job_id == kept and lates[0].accepted and lates[0].late_by > 0.2
    assert lates[1].job_id == gone and not lates[1].accepted and "NOT-FOUND" in lates[1].error
    assert worker.stats.late_accepted == 1 and worker.stats.late_rejected == 1
    assert (worker.stats.lost, worker.stats.in_flight) == (1, 0)  # the refused late report


@pytest.mark.anyio
async def test_async_worker_stop_lets_the_running_handler_finish(
    workq_server: WorkqServer, qname: str
) -> None:
    started = anyio.Event()

    async def handle(job: JobContext) -> bytes:
        started.set()
        await anyio.sleep(0.3)
        return b"finished"

    worker = AsyncWorker((workq_server.host, workq_server.port), qname, concurrency=2,
                         wait=1)
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        job_id = await client.add(qname, b"")
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run, handle)
                await started.wait()
                worker.stop()  # the idle slot's lease runs out within its 1 s wait
        assert (await client.result(job_id)).data == b"finished"


@pytest.mark.anyio
async def test_async_worker_stop_strands_no_job() -> None:
    # Against a peer that, like Workq 0.2.0, gives a job to a waiting lease even when its
    # connection has closed (tests/workq/helpers.py): stop() must not close under a lease.
    ran: list[str] = []

    async def handle(job: JobContext) -> bytes:
        ran.append(job.job_id)
        return b"ok"

    with realish_workq() as peer:
        worker = AsyncWorker(("127.0.0.1", peer.port), "x", concurrency=4, wait=2)
        async with AsyncClient("127.0.0.1", peer.port) as producer:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(worker.run, handle)
                    while peer.waiting_leases() < 4:
                        await anyio.sleep(0.01)
                    worker.stop()
                    ids = [await producer.add("x", b"%d" % i) for i in range(4)]
        # Every job went to a lease of the worker that was still open, ran and was completed.
        assert sorted(ran) == sorted(ids)
        assert [peer.jobs[i].state for i in ids] == ["completed"] * 4
        assert worker.stats.completed == 4


@pytest.mark.anyio
async def test_async_worker_reconnects_with_backoff(qname: str) -> None:
    server = start_workq_server()
    port = server.port
    done = anyio.Event()

    async def handle(job: JobContext) -> bytes:
        done.set()
        return b"ok"

    worker = AsyncWorker(("127.0.0.1", port), qname, wait=0.5,
                         backoff=lambda: Backoff(base=0.05, cap=0.2))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handle)
            await anyio.sleep(0.3)
            server.stop()
            await anyio.sleep(0.3)
            server = start_workq_server(port)
            async with AsyncClient("127.0.0.1", port) as client:
                job_id = await client.add(qname, b"")
                with anyio.fail_after(5):
                    await done.wait()
                    assert (await client.result(job_id, wait=2)).data == b"ok"
            worker.stop()
    finally:
        server.stop()
    assert worker.stats.reconnects >= 1


# -- sync --------------------------------------------------------------------------------------


def test_sync_worker_threads_results_errors_and_stop(
    workq_server: WorkqServer, qname: str
) -> None:
    tracker = Tracker()

    def handle(job: JobContext) -> bytes:
        tracker.enter()
        try:
            time.sleep(0.1)
            if job.payload == b"boom":
                raise RuntimeError("kaput")
            return job.payload[::-1]
        finally:
            tracker.leave()

    worker = Worker((workq_server.host, workq_server.port), qname, concurrency=3,
                    wait=0.2)
    thread = threading.Thread(target=worker.run, args=(handle,))
    thread.start()
    with Client(workq_server.host, workq_server.port) as client:
        ids = [client.add(qname, b"ab%d" % i) for i in range(6)] + [client.add(qname, b"boom")]
        results = [client.result(job_id, wait=5) for job_id in ids]
    worker.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert tracker.peak == 3
    assert [r.data for r in results[:6]] == [b"%dba" % i for i in range(6)]
    assert (results[6].success, results[6].data) == (False, b"RuntimeError: kaput")
    assert worker.stats.completed == 6 and worker.stats.failed == 1


def test_sync_worker_overrun_and_reconnect(qname: str) -> None:
    lates: list[LateResult] = []
    overruns: list[JobContext] = []

    def handle(job: JobContext) -> bytes:
        time.sleep(0.4)
        return b"slow"

    port = free_port()
    with run_server(port=port):
        worker = Worker(("127.0.0.1", port), qname, wait=0.2,
                        on_overrun=overruns.append, on_late_result=lates.append,
                        backoff=lambda: Backoff(base=0.05, cap=0.2))
        thread = threading.Thread(target=worker.run, args=(handle,))
        thread.start()
        with Client("127.0.0.1", port) as client:
            job_id = client.add(qname, b"", ttr=0.1)
            assert client.result(job_id, wait=5).data == b"slow"
    time.sleep(0.4)  # the server is gone: the worker retries with back-off
    with run_server(port=port), Client("127.0.0.1", port) as client:
        job_id = client.add(qname, b"", ttr=5)
        assert client.result(job_id, wait=5).data == b"slow"
    worker.stop()
    thread.join(5)
    assert overruns and overruns[0].overrun and lates[0].accepted
    assert worker.stats.reconnects >= 1


def test_worker_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        AsyncWorker(("127.0.0.1", 1), [])
    with pytest.raises(ValueError):
        AsyncWorker(("127.0.0.1", 1), "q", concurrency=0)
    with pytest.raises(ValueError):
        Worker(("127.0.0.1", 1), "bad name")


@pytest.mark.anyio
async def test_async_worker_survives_bad_results_and_faulty_callbacks(
    workq_server: WorkqServer, qname: str
) -> None:
    def explode(_: object) -> None:
        raise RuntimeError("callback bug")

    async def handle(job: JobContext) -> bytes:
        if job.payload == b"big":
            return b"x" * (1024 * 1024 + 1)
        if job.payload == b"int":
            return 5  # type: ignore[return-value]
        if job.payload == b"slow":
            await anyio.sleep(0.3)
        return b"fine"

    worker = AsyncWorker((workq_server.host, workq_server.port), qname, wait=1,
                         on_overrun=explode, on_late_result=explode)
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        big = await client.add(qname, b"big")
        bad = await client.add(qname, b"int")
        slow = await client.add(qname, b"slow", ttr=0.1)
        fine = await client.add(qname, b"ok")
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handle)
            results = [await client.result(j, wait=5) for j in (big, bad, slow, fine)]
            worker.stop()
    assert not results[0].success and results[0].data.startswith(b"ResultTooLarge")
    assert not results[1].success and results[1].data.startswith(b"TypeError")
    assert results[2].data == b"fine" and results[3].data == b"fine"
    assert worker.stats.overruns == 1 and worker.stats.late_accepted == 1


def test_sync_worker_stop_lets_the_running_handler_finish(
    workq_server: WorkqServer, qname: str
) -> None:
    started = threading.Event()

    def handle(job: JobContext) -> bytes:
        started.set()
        time.sleep(0.3)
        return b"finished"

    worker = Worker((workq_server.host, workq_server.port), qname, concurrency=2,
                    wait=0.2)
    thread = threading.Thread(target=worker.run, args=(handle,))
    thread.start()
    with Client(workq_server.host, workq_server.port) as client:
        job_id = client.add(qname, b"")
        assert started.wait(5)
        worker.stop()
        thread.join(5)
        assert not thread.is_alive()
        assert client.result(job_id).data == b"finished"
    assert worker.stats.completed == 1


@pytest.mark.anyio
async def test_untrusted_certificate_is_a_warning_and_retried(
    qname: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker with ``ssl=`` whose certificate check fails says so at warning level and tries
    again with back-off (never in plaintext); a bad ``ssl=`` fails in the constructor. The
    runs over TLS are in test_tls.py."""
    import logging

    from ..tlsrelay import make_certs, untrusted_context

    certs = make_certs()
    server = start_workq_server(args=certs.server_args)
    caplog.set_level(logging.INFO, logger="workq_client.worker")

    async def handle(job: JobContext) -> bytes:
        return b"never"

    def refusals() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.WARNING]

    worker = AsyncWorker(("localhost", server.port), qname, ssl=untrusted_context(),
                         wait=0.5)
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run, handle)
                while len(refusals()) < 2:  # refused, and refused again after the back-off
                    await anyio.sleep(0.05)
                worker.stop()
    finally:
        server.stop()
    assert all("TLSError" in r.getMessage() for r in refusals()), refusals()
    with pytest.raises(TypeError, match="ssl="):
        Worker("127.0.0.1", qname, ssl="yes")  # type: ignore[arg-type]


def _one_error_with_traceback(caplog: pytest.LogCaptureFixture, job_id: str, name: str) -> None:
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError
    assert job_id in record.getMessage() and name in record.getMessage()
    assert "Traceback" in caplog.text


def test_a_sync_handler_failure_is_logged_with_its_traceback(
    workq_server: WorkqServer, qname: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="workq_client.worker")
    held = threading.Event()

    def handle(job: JobContext) -> bytes:
        if job.payload == b"hold":
            held.wait(10)
            return b""
        return b"%d" % (1 // 0)

    worker = Worker(workq_server.url, qname, wait=0.2)
    thread = threading.Thread(target=worker.run, args=(handle,))
    thread.start()
    with Client(workq_server.url) as client:
        job_id = client.add(qname, b"x")
        result = client.result(job_id, wait=5)
        # The result can reach us before the worker has read the server's answer to its fail:
        # wait until the worker has counted it, so the in-flight job below is the held one.
        wait_until(lambda: (worker.stats.failed, worker.stats.in_flight) == (1, 0), 10,
                   "the worker to count the fail")
        client.add(qname, b"hold")
        wait_until(lambda: worker.stats.in_flight, 10, "the held job in flight")
        held.set()
    worker.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert (result.success, result.data) == (False, b"ZeroDivisionError: integer division or "
                                                    b"modulo by zero")
    assert (worker.stats.failed, worker.stats.completed, worker.stats.in_flight) == (1, 1, 0)
    _one_error_with_traceback(caplog, job_id, qname)


@pytest.mark.anyio
async def test_an_async_handler_failure_is_logged_with_its_traceback(
    workq_server: WorkqServer, qname: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="workq_client.worker")

    async def handle(job: JobContext) -> bytes:
        return b"%d" % (1 // 0)

    worker = AsyncWorker(workq_server.url, qname, wait=0.2)
    async with AsyncClient(workq_server.url) as client:
        job_id = await client.add(qname, b"x")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: worker.run(handle, handle_signals=False))
                result = await client.result(job_id, wait=5)
                worker.stop()
    assert not result.success and worker.stats.failed == 1
    _one_error_with_traceback(caplog, job_id, qname)


@pytest.mark.anyio
async def test_a_handler_past_the_shutdown_deadline_is_cancelled_and_its_job_left_to_its_ttr(
    workq_server: WorkqServer, qname: str, tmp_path: Path
) -> None:
    cancelled = anyio.Event()

    async def stuck(job: JobContext) -> bytes:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return b""  # pragma: no cover

    sink = EventSink(tmp_path)
    worker = AsyncWorker(workq_server.url, qname, wait=0.2, shutdown_timeout=0.2, events=sink)
    async with AsyncClient(workq_server.url) as client:
        job_id = await client.add(qname, b"x", ttr=1)
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: worker.run(stuck, handle_signals=False))
                while worker.stats.in_flight == 0:
                    await anyio.sleep(0.01)
                worker.stop()
            assert cancelled.is_set()
            again = await client.lease([qname], wait=10)  # the TTR ran out: leased again
        assert again.job_id == job_id
    sink.close()
    stats = worker.stats
    assert (stats.abandoned, stats.completed, stats.failed, stats.in_flight) == (1, 0, 0, 0)
    assert [(r["event"], r["job"]) for r in read_jsonl(tmp_path)] == [
        ("reserved", job_id), ("lost", job_id)]
