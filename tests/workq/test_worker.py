"""Workq workers against the bundled server: results, TTR overruns and late results, a stop
that strands no job, bad results and faulty callbacks, TLS refusals. (What every worker does
alike is in tests/workers/test_conformance.py, the signals in tests/workers/test_signals.py.)"""

from __future__ import annotations

import logging
import threading

import anyio
import pytest

from tests.waiting import await_until, wait_until
from workq_client import AsyncClient, AsyncWorker, Client, JobContext, Worker
from workq_client.worker import LateResult

from .conftest import WorkqServer, start_workq_server
from .helpers import realish_workq

# -- async -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_what_a_handler_returns_is_the_jobs_result(
    workq_server: WorkqServer, qname: str
) -> None:
    """Bytes as they are, text in UTF-8, ``None`` as no bytes; a raise fails the job with the
    error's type and text. (Slots, stats and logging: tests/workers/test_conformance.py.)"""

    async def handle(job: JobContext) -> bytes | str | None:
        if job.payload == b"boom":
            raise ValueError("boom")
        if job.payload == b"text":
            return "tëxt"
        if job.payload == b"none":
            return None
        return job.payload.upper()

    worker = AsyncWorker((workq_server.host, workq_server.port), [qname, qname + "-b"],
                         concurrency=4, wait=1)
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        payloads = [b"a%d" % i for i in range(2)] + [b"boom", b"text", b"none"]
        ids = [await client.add(qname if i % 2 else qname + "-b", p)
               for i, p in enumerate(payloads)]
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handle)
            results = [await client.result(job_id, wait=5) for job_id in ids]
            worker.stop()
    assert [(r.success, r.data) for r in results] == [
        (True, b"A0"), (True, b"A1"), (False, b"ValueError: boom"), (True, "tëxt".encode()),
        (True, b"")]


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
        await await_until(lambda: job.overrun, what="the TTR (0.2 s) run out")
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
            await await_until(lambda: gone in overruns, what="the second job's overrun")
            await client.delete(gone)
            deleted.set()
            await await_until(lambda: len(lates) == 2, what="both late results")
            worker.stop()
    # The late result of a requeued job is still accepted by the server, and reported.
    assert record.success and record.data == b"late kept"
    assert overruns[:1] == [kept] and seen_overrun_flag[:2] == [True, True]
    assert lates[0].job_id == kept and lates[0].accepted and lates[0].late_by > 0
    assert lates[1].job_id == gone and not lates[1].accepted and "NOT-FOUND" in lates[1].error
    assert worker.stats.late_accepted == 1 and worker.stats.late_rejected == 1
    assert (worker.stats.lost, worker.stats.in_flight) == (1, 0)  # the refused late report


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
                    await await_until(lambda: peer.waiting_leases() == 4,
                                      what="four leases waiting")
                    worker.stop()
                    ids = [await producer.add("x", b"%d" % i) for i in range(4)]
        # Every job went to a lease of the worker that was still open, ran and was completed.
        assert sorted(ran) == sorted(ids)
        assert [peer.jobs[i].state for i in ids] == ["completed"] * 4
        assert worker.stats.completed == 4


def test_sync_worker_overrun(workq_server: WorkqServer, qname: str) -> None:
    """A blocking handler past its job's TTR: ``on_overrun`` is told (in the worker's loop) and
    the handler sees ``job.overrun``; its late result is accepted and reported. (Reconnects:
    tests/workers/test_conformance.py.)"""
    lates: list[LateResult] = []
    overruns: list[JobContext] = []

    def handle(job: JobContext) -> bytes:
        wait_until(lambda: job.overrun, 10, "the TTR (0.1 s) run out")
        return b"slow"

    worker = Worker(workq_server.url, qname, wait=0.2, on_overrun=overruns.append,
                    on_late_result=lates.append)
    thread = threading.Thread(target=worker.run, args=(handle,))
    thread.start()
    try:
        with Client(workq_server.url) as client:
            job_id = client.add(qname, b"", ttr=0.1)
            assert client.result(job_id, wait=5).data == b"slow"
        wait_until(lambda: lates, 10, "the late result reported")
    finally:
        worker.stop()
        thread.join(5)
    assert not thread.is_alive()
    assert [o.job_id for o in overruns] == [job_id] and overruns[0].overrun
    assert [(late.job_id, late.accepted) for late in lates] == [(job_id, True)]


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
            await await_until(lambda: job.overrun, what="the TTR (0.1 s) run out")
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
                # refused, and refused again after the back-off
                await await_until(lambda: len(refusals()) >= 2, what="two refusals")
                worker.stop()
    finally:
        server.stop()
    assert all("TLSError" in r.getMessage() for r in refusals()), refusals()
    with pytest.raises(TypeError, match="ssl="):
        Worker("127.0.0.1", qname, ssl="yes")  # type: ignore[arg-type]


