"""Gearman workers on several servers: the slots shared by all of them. (What every worker does
alike is in tests/workers/test_conformance.py, the signals in tests/workers/test_signals.py; the
protocol-level worker tests are in test_clients.py.)"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from gearman_client import AsyncClient, AsyncJob
from gearman_client.aio import AsyncWorker

from .conftest import start_gearman


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


