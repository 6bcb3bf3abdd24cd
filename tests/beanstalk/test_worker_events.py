"""Beanstalk workers with an event sink, against the bundled server and the real beanstalkd: the
events written (kinds, ids, tubes, times, worker id) for jobs that complete, fail, are released
and buried."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest

from beanstalk_client import Client, Job
from beanstalk_client.worker import AsyncWorker, RetryPolicy, Worker
from jobwire.events import EventSink, default_worker_id
from tests.test_events import read_jsonl

from ..conftest import BeanstalkServer

pytestmark = pytest.mark.anyio


def by_job(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[r["job"]].append(r)
    return out


def check_common(records: list[dict[str, Any]], t0: float, t1: float) -> None:
    for r in records:
        assert (r["v"], r["system"], r["worker"]) == (1, "beanstalk", default_worker_id())
        assert t0 <= r["time"] <= t1
        assert r["put_time"] is None
    for events in by_job(records).values():
        times = [r["time"] for r in events]
        assert times == sorted(times)


async def test_async_worker_events(server: BeanstalkServer, tube: str, tmp_path: Path) -> None:
    with Client.from_url(server.url) as p:
        p.use(tube)
        t0 = time.time()
        ok1, ok2, bad = p.put(b"ok"), p.put(b"ok"), p.put(b"bad")
        sink = EventSink(tmp_path)
        retry = RetryPolicy(base_delay=0, bury_after=2)
        async with AsyncWorker(server.url, tubes=[tube], concurrency=2, retry=retry,
                               events=sink) as worker:

            async def handler(job: Job) -> None:
                if job.body == b"bad":
                    raise KeyError("nope")

            async def watch() -> None:
                while worker.stats.deleted < 2 or worker.stats.buried < 1:
                    await anyio.sleep(0.02)
                worker.stop()

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(watch)
                    await worker.run(handler, handle_signals=False)
        sink.close()
        t1 = time.time()
    records = read_jsonl(tmp_path)
    check_common(records, t0, t1)
    jobs = by_job(records)
    assert set(jobs) == {str(ok1), str(ok2), str(bad)}
    for ok in (ok1, ok2):
        assert [(r["event"], r["queue"]) for r in jobs[str(ok)]] == [
            ("reserved", tube), ("completed", tube)]
    assert [(r["event"], r["queue"], r["group"], r["attempt"]) for r in jobs[str(bad)]] == [
        ("reserved", tube, None, None), ("failed", tube, "KeyError", 1),
        ("released", tube, None, None),
        ("reserved", tube, None, None), ("failed", tube, "KeyError", 2),
        ("buried", tube, None, None),
    ]
    assert (sink.written, sink.dropped) == (10, 0)


def test_sync_worker_on_two_tubes_names_each_jobs_tube(
    server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    other = tube + "-b"
    with Client.from_url(server.url) as p:
        t0 = time.time()
        ids: dict[str, list[int]] = {}
        for name in (tube, other):
            p.use(name)
            ids[name] = p.put_many([b"x"] * 5)
        done = threading.Event()
        with EventSink(tmp_path, format="jsonl") as sink:
            worker = Worker(server.url, tubes=[tube, other], concurrency=3, events=sink)
            lock = threading.Lock()
            seen = 0

            def handler(job: Job) -> None:
                nonlocal seen
                with lock:
                    seen += 1
                    if seen == 10:
                        done.set()

            runner = threading.Thread(target=worker.run, args=(handler,),
                                      kwargs={"handle_signals": False})
            runner.start()
            assert done.wait(20)
            worker.stop()
            runner.join(20)
            assert not runner.is_alive()
        t1 = time.time()
    records = read_jsonl(tmp_path)
    check_common(records, t0, t1)
    jobs = by_job(records)
    for name, job_ids in ids.items():
        for job_id in job_ids:
            assert [(r["event"], r["queue"]) for r in jobs[str(job_id)]] == [
                ("reserved", name), ("completed", name)]
    assert len(records) == 20
