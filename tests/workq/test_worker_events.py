"""Workq workers with an event sink, against the bundled server: a job whose report the server
refuses is ``lost``, a result that is not bytes or text ``failed``. (The events of every worker
alike: tests/workers/test_conformance.py.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from jobwire.events import EventSink, default_worker_id
from tests.test_events import read_jsonl
from tests.waiting import await_until
from workq_client import AsyncClient, AsyncWorker, JobContext

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
async def test_a_refused_report_is_lost_and_a_bad_result_failed(
    workq_server: WorkqServer, qname: str, tmp_path: Path
) -> None:
    deleted = anyio.Event()

    async def handle(job: JobContext) -> object:
        if job.payload == b"int":
            return 42  # an int is no result: failed
        if job.payload == b"gone":
            await deleted.wait()
        return job.payload

    sink = EventSink(tmp_path)
    worker = AsyncWorker((workq_server.host, workq_server.port), [qname],
                         concurrency=2, wait=1, events=sink)
    t0 = time.time()
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        bad = await client.add(qname, b"int")
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run, handle)
                await client.result(bad, wait=5)
                gone = await client.add(qname, b"gone")
                await await_until(lambda: worker.stats.leased == 2, what="the job leased")
                await client.delete(gone)  # while its handler runs: the report is refused
                deleted.set()
                await await_until(lambda: worker.stats.lost, what="the report refused")
                worker.stop()
    sink.close()
    jobs = outcomes(read_jsonl(tmp_path), t0, time.time())
    assert jobs == {
        bad: [("reserved", qname, None), ("failed", qname, "TypeError")],
        gone: [("reserved", qname, None), ("lost", qname, None)],
    }
