"""Gearman workers with an event sink, against the bundled server and the real gearmand: the
events written (kinds, handles, functions, times, worker id) for jobs that complete and fail."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio
import pytest

from gearman_client import AsyncClient, AsyncJob, Client, JobFailed, Worker
from gearman_client.aio import AsyncWorker
from jobwire.events import EventSink, default_worker_id
from tests.test_events import read_jsonl

from .conftest import GearmanServer


class Refused(Exception):
    """A handler's own exception."""


@pytest.mark.anyio
async def test_async_worker_events(
    gearman_server: GearmanServer, function: str, tmp_path: Path
) -> None:
    done = anyio.Event()
    handled = 0

    async def handler(job: AsyncJob) -> bytes:
        nonlocal handled
        handled += 1
        if handled == 6:
            done.set()
        if job.data == b"boom":
            raise Refused("no")
        return job.data

    sink = EventSink(tmp_path)
    worker = AsyncWorker(gearman_server.url, client_id="ev-worker", concurrency=2, events=sink)
    worker.register(function, handler)
    t0 = time.time()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            async with AsyncClient(gearman_server.url) as client:
                handles = await client.submit_background_many([(function, b"ok")] * 5)
                with pytest.raises(JobFailed) as failed:
                    await client.submit(function, b"boom")
            await done.wait()
            worker.stop()
    sink.close()
    t1 = time.time()
    records = read_jsonl(tmp_path)
    for r in records:
        assert (r["v"], r["system"], r["queue"], r["worker"]) == (
            1, "gearman", function, "ev-worker")
        assert t0 <= r["time"] <= t1
        assert r["put_time"] is None and r["attempt"] is None
    events: dict[str, list[tuple[str, str | None]]] = {}
    times: dict[str, list[float]] = {}
    for r in records:
        events.setdefault(r["job"], []).append((r["event"], r["group"]))
        times.setdefault(r["job"], []).append(r["time"])
    expected: dict[str, list[tuple[str, str | None]]] = {
        h.decode(): [("reserved", None), ("completed", None)] for h in handles}
    expected[failed.value.handle.decode()] = [
        ("reserved", None), ("failed", "tests.gearman.test_worker_events.Refused")]
    assert events == expected
    assert all(t == sorted(t) for t in times.values())


def test_sync_worker_events(gearman_server: GearmanServer, function: str, tmp_path: Path) -> None:
    with EventSink(tmp_path) as sink:
        worker = Worker(gearman_server.url, events=sink)
        worker.register(function, lambda job: job.data.upper())
        runner = threading.Thread(target=worker.run)
        runner.start()
        try:
            with Client(gearman_server.url, timeout=10) as client:
                assert [client.submit(function, b"a%d" % i) for i in range(3)] == [
                    b"A0", b"A1", b"A2"]
        finally:
            worker.stop()
            runner.join(10)
        assert not runner.is_alive()
    records = read_jsonl(tmp_path)
    assert len(records) == 6
    assert {r["worker"] for r in records} == {default_worker_id()}
    assert {r["queue"] for r in records} == {function}
    kinds: dict[str, list[str]] = {}
    for r in records:
        kinds.setdefault(r["job"], []).append(r["event"])
    assert list(kinds.values()) == [["reserved", "completed"]] * 3
