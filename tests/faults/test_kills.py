"""Processes killed with SIGKILL: the server under a running worker (beanstalkd with a binlog,
twice), and a worker process in the middle of a job (its job comes back and another worker
does it). Every job is handled at least once; duplicates are counted and reported.
"""

from __future__ import annotations

import collections
import select
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

import beanstalk_client
import gearman_client
import workq_client
from tests.conftest import (
    BeanstalkServer,
    _wait_listening,
    free_port,
    server_command,
)
from tests.gearman.conftest import GearmanServer
from tests.waiting import await_until
from tests.workq.conftest import WorkqServer

ROOT = Path(__file__).resolve().parents[2]
JOBS = 10_000


def _beanstalkd(port: int, binlog: Path) -> subprocess.Popen[bytes]:
    command = server_command("beanstalkd")
    if command is None:
        pytest.fail("beanstalkd is not installed")  # the real server is what this test is about
    proc = subprocess.Popen([*command, "-l", "127.0.0.1", "-p", str(port), "-b", str(binlog)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_listening(proc, (socket.AF_INET, str(port)), "beanstalkd")
    return proc


@pytest.mark.slow
@pytest.mark.real_server
@pytest.mark.anyio
async def test_beanstalkd_killed_twice_under_a_worker(tmp_path: Path) -> None:
    port, tube = free_port(), f"t-{uuid.uuid4().hex[:12]}"
    procs = [_beanstalkd(port, tmp_path)]
    try:
        with beanstalk_client.Client(("127.0.0.1", port)) as client:
            client.use(tube)
            client.put_many([b"%d" % i for i in range(JOBS)])
        seen: collections.Counter[int] = collections.Counter()
        everything = anyio.Event()

        async def handle(job: beanstalk_client.Job) -> None:
            seen[int(job.body)] += 1
            if len(seen) == JOBS:
                everything.set()
            await anyio.sleep(0.001)

        async def kill_at(handled: int) -> None:
            await await_until(lambda: len(seen) >= handled, 120, f"{handled} jobs handled")
            procs[-1].kill()
            procs[-1].wait()
            procs.append(await anyio.to_thread.run_sync(_beanstalkd, port, tmp_path))

        worker = beanstalk_client.AsyncWorker(("127.0.0.1", port), tubes=[tube], concurrency=64,
                                              timeout=5)
        with anyio.fail_after(180):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: worker.run(handle, handle_signals=False))
                await kill_at(JOBS // 5)
                await kill_at(JOBS * 3 // 5)
                await everything.wait()
                worker.stop()
        duplicates = sum(seen.values()) - JOBS
        print(f"\n{JOBS} jobs, beanstalkd SIGKILLed twice: {duplicates} handled twice or more, "
              f"worker {worker.stats}")
        assert set(seen) == set(range(JOBS))
        assert worker.stats.reconnects >= 2
        # What the binlog kept: every job acknowledged before the kills is gone, the rest was
        # handled since; nothing is left, so the tube no longer exists.
        with beanstalk_client.Client(("127.0.0.1", port)) as client:
            assert tube not in client.list_tubes()
            assert client.stats()["current-jobs-ready"] == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _spawn_worker(body: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(body)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)


def _started(proc: subprocess.Popen[str], limit: float = 20) -> list[str]:
    """The worker process's first line ("start <job>"), waiting at most ``limit`` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], limit)
    assert ready, "the worker process started no job"
    line = proc.stdout.readline()
    assert line, "the worker process ended before it started a job"
    return line.split()


@pytest.mark.slow
def test_beanstalk_worker_killed_mid_job(server: BeanstalkServer, tube: str) -> None:
    with beanstalk_client.Client(server.url) as client:
        client.use(tube)
        job_id = client.put(b"work", ttr=2)
    proc = _spawn_worker(f"""
        import time
        from beanstalk_client import Worker
        def handle(job):
            print("start", job.id, flush=True)
            time.sleep(60)
        Worker({server.url!r}, tubes=[{tube!r}]).run(handle)
    """)
    try:
        assert _started(proc) == ["start", str(job_id)]
        proc.kill()
        proc.wait()
        done: list[int] = []

        def handle(job: beanstalk_client.Job) -> None:
            done.append(job.id)
            worker.stop()

        worker = beanstalk_client.Worker(server.url, tubes=[tube], idle_wait=1)
        worker.run(handle, handle_signals=False)
        assert done == [job_id] and worker.stats.deleted == 1
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_gearman_worker_killed_mid_job(gearman_server: GearmanServer) -> None:
    """gearmand hands the job of a worker that died to another: the client waiting in the
    foreground gets that worker's result."""
    function = f"f-{uuid.uuid4().hex[:12]}"
    proc = _spawn_worker(f"""
        import time
        from gearman_client import Worker
        worker = Worker({gearman_server.url!r})
        def handle(job):
            print("start", job.handle, flush=True)
            time.sleep(60)
        worker.register({function!r}, handle)
        worker.run()
    """)
    result: list[Any] = []
    try:
        with gearman_client.Client(gearman_server.url, timeout=30) as client:
            import threading

            caller = threading.Thread(
                target=lambda: result.append(client.submit(function, b"payload")), daemon=True
            )
            caller.start()
            _started(proc)
            proc.kill()
            proc.wait()

            def handle(job: gearman_client.Job) -> bytes:
                worker.stop()
                return b"done by the second worker: " + job.data

            worker = gearman_client.Worker(gearman_server.url)
            worker.register(function, handle)
            worker.run()
            caller.join(30)
        assert result == [b"done by the second worker: payload"]
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_workq_worker_killed_mid_job(workq_server: WorkqServer, qname: str) -> None:
    with workq_client.Client(workq_server.url) as client:
        job_id = client.add(qname, b"payload", ttr=1)
    proc = _spawn_worker(f"""
        import time
        from workq_client import Worker
        def handle(job):
            print("start", job.job_id, flush=True)
            time.sleep(60)
        Worker({workq_server.url!r}, {qname!r}).run(handle)
    """)
    try:
        assert _started(proc) == ["start", job_id]
        proc.kill()
        proc.wait()
        done: list[str] = []

        def handle(job: workq_client.JobContext) -> bytes:
            done.append(job.job_id)
            worker.stop()
            return b"second"

        worker = workq_client.Worker(workq_server.url, qname, wait=1)
        worker.run(handle)
        assert done == [job_id]
        with workq_client.Client(workq_server.url) as client:
            assert client.result(job_id, wait=5).data == b"second"
    finally:
        if proc.poll() is None:
            proc.kill()
