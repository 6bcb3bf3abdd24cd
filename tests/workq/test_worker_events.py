"""Workq workers with an event sink, against the bundled server: the events written (kinds, ids,
job names, times, worker id) for jobs that complete, fail, and whose report is refused."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from jobwire.events import EventSink, default_worker_id
from tests.test_events import read_jsonl
from workq_client import AsyncClient, AsyncWorker, Client, JobContext, Worker

from .conftest import WorkqServer


def outcomes(
    records: list[dict[str, Any]], t0: float, t1: float
) -> dict[str, list[tuple[Any, ...]]]:
    """Each job's ``(event, queue, group)`` in order, after the checks every record passes."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    times: dict[str, list[float]] = {}
    for r in records:
        assert (r["v"], r["system"], r["worker"]) == (1, "workq", default_worker_id())
        assert t0 <= r["time"] <= t1
        assert r["put_time"] is None and r["attempt"] is None
        out.setdefault(r["job"], []).append((r["event"], r["queue"], r["group"]))
        times.setdefault(r["job"], []).append(r["time"])
    assert all(t == sorted(t) for t in times.values())
    return out


@pytest.mark.anyio
async def test_async_worker_events(workq_server: WorkqServer, qname: str, tmp_path: Path) -> None:
    deleted = anyio.Event()

    async def handle(job: JobContext) -> bytes | None:
        if job.payload == b"boom":
            raise ZeroDivisionError("boom")
        if job.payload == b"gone":
            await deleted.wait()
        return job.payload

    sink = EventSink(tmp_path)
    other = qname + "-b"
    worker = AsyncWorker((workq_server.host, workq_server.port), [qname, other],
                         concurrency=2, wait=1, events=sink)
    t0 = time.time()
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        ok = [await client.add(qname, b"a"), await client.add(other, b"b")]
        boom = await client.add(qname, b"boom")
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run, handle)
                for job_id in [*ok, boom]:
                    await client.result(job_id, wait=5)
                gone = await client.add(other, b"gone")
                while worker.stats.leased < 4:
                    await anyio.sleep(0.02)
                await client.delete(gone)  # while its handler runs: the report is refused
                deleted.set()
                while worker.stats.lost < 1:
                    await anyio.sleep(0.02)
                worker.stop()
    sink.close()
    jobs = outcomes(read_jsonl(tmp_path), t0, time.time())
    assert jobs == {
        ok[0]: [("reserved", qname, None), ("completed", qname, None)],
        ok[1]: [("reserved", other, None), ("completed", other, None)],
        boom: [("reserved", qname, None), ("failed", qname, "ZeroDivisionError")],
        gone: [("reserved", other, None), ("lost", other, None)],
    }


def test_sync_worker_events(workq_server: WorkqServer, qname: str, tmp_path: Path) -> None:
    def handle(job: JobContext) -> object:
        return 42 if job.payload == b"int" else job.payload  # an int is no result: failed

    with Client(workq_server.host, workq_server.port) as client, EventSink(tmp_path) as sink:
        t0 = time.time()
        worker = Worker((workq_server.host, workq_server.port), qname,
                        concurrency=2, wait=0.5, events=sink)
        runner = threading.Thread(target=worker.run, args=(handle,))
        runner.start()
        try:
            ids = [client.add(qname, p) for p in (b"x", b"y", b"int")]
            results = [client.result(job_id, wait=5) for job_id in ids]
        finally:
            worker.stop()
            runner.join(10)
        assert not runner.is_alive()
        assert [r.success for r in results] == [True, True, False]
    jobs = outcomes(read_jsonl(tmp_path), t0, time.time())
    assert jobs == {
        ids[0]: [("reserved", qname, None), ("completed", qname, None)],
        ids[1]: [("reserved", qname, None), ("completed", qname, None)],
        ids[2]: [("reserved", qname, None), ("failed", qname, "TypeError")],
    }
