"""The AsyncClient on asyncio and trio against the bundled server: sharing, cancellation."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import anyio
import pytest

from jobwire.errors import LocalProtocolError, OperationTimeout, RemoteProtocolError
from workq_client import AsyncClient, DuplicateJob, JobState, NotFound, TimedOut
from workq_client.server import serve

from .conftest import WorkqServer
from .helpers import replies, silent, tcp_server

pytestmark = pytest.mark.anyio


async def test_round_trip_and_inspect(workq_server: WorkqServer, qname: str) -> None:
    async with AsyncClient(workq_server.host, workq_server.port, timeout=5) as client:
        job_id = await client.add(qname, b"x\r\ny", ttr=3, priority=2)
        info = await client.inspect_job(job_id)
        assert info.payload == b"x\r\ny" and info.priority == 2
        job = await client.lease([qname], wait=1)
        assert job.job_id == job_id and job.ttr == 3.0
        await client.complete(job_id, b"ok")
        assert (await client.result(job_id)).data == b"ok"
        later = await client.schedule(qname, b"", datetime.now(timezone.utc) + timedelta(hours=1))
        assert [j.job_id for j in await client.inspect_scheduled_jobs(qname)] == [later]
        assert (await client.inspect_queue(qname)).scheduled_len == 1
        assert any(q.name == qname for q in await client.inspect_queues(0, 100))
        assert (await client.inspect_server()).active_clients >= 1
        await client.delete(later)
        with pytest.raises(NotFound):
            await client.inspect_job(later)
        assert (await client.inspect_jobs(qname)) == []


async def test_many_tasks_share_one_connection(workq_server: WorkqServer, qname: str) -> None:
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        ids: list[str] = []

        async def add(i: int) -> None:
            ids.append(await client.add(qname, b"%d" % i))

        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(add, i)
        assert len(set(ids)) == 100 and client.connections == 1
        assert (await client.inspect_queue(qname)).ready_len == 100
        assert len(await client.add_many(qname, [b""] * 300, window=64)) == 300
        assert (await client.inspect_queue(qname)).ready_len == 400


async def test_run_with_an_async_worker_task(workq_server: WorkqServer, qname: str) -> None:
    async with AsyncClient(workq_server.host, workq_server.port) as client, \
            AsyncClient(workq_server.host, workq_server.port) as worker:

        async def work() -> None:
            job = await worker.lease(qname, wait=5)
            await worker.complete(job.job_id, job.payload + b"!")

        async with anyio.create_task_group() as tg:
            tg.start_soon(work)
            record = await client.run(qname, b"hi", ttr=5, wait=5)
        assert record.success and record.data == b"hi!"
        with pytest.raises(TimedOut):
            await client.run(qname, b"", wait=0.1)


async def test_cancelled_blocking_call_does_not_stall_the_next_one(
    workq_server: WorkqServer, qname: str
) -> None:
    async with AsyncClient(workq_server.host, workq_server.port, timeout=5) as client:
        with anyio.move_on_after(0.1) as scope:
            await client.lease(qname, wait=30)
        assert scope.cancelled_caught
        # Without the reconnect this would wait 30 s behind the abandoned lease.
        with anyio.fail_after(3):
            job_id = await client.add(qname, b"after")
            job = await client.lease(qname, wait=1)
        assert job.job_id == job_id and client.connections == 2


async def test_cancelled_quick_call_keeps_the_connection_and_drops_its_reply(
    workq_server: WorkqServer, qname: str
) -> None:
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        first = await client.add(qname, b"1")
        with anyio.CancelScope() as scope:
            scope.cancel()
            await client.inspect_job(first)
        # The abandoned reply is dropped, never handed to the next caller.
        assert (await client.inspect_queue(qname)).ready_len == 1
        assert client.connections == 1


async def test_duplicate_job_then_reconnect(workq_server: WorkqServer, qname: str) -> None:
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        job_id = await client.add(qname, b"")
        with pytest.raises(DuplicateJob):
            await client.add(qname, b"", job_id=job_id)
        assert (await client.inspect_job(job_id)).state is JobState.NEW
        assert client.connections == 2


async def test_timeouts_and_garbage() -> None:
    with tcp_server(silent) as port:
        async with AsyncClient("127.0.0.1", port, timeout=0.2) as client:
            with pytest.raises(OperationTimeout):
                await client.inspect_server()
            assert client.connections == 1  # a quick call's late reply will just be dropped
            with pytest.raises(OperationTimeout):
                await client.result(str(uuid.uuid4()), wait=0.1)
            with pytest.raises(OperationTimeout):  # a blocking one closed the connection
                await client.inspect_server()
            assert client.connections == 2
    with tcp_server(replies(b"+OK 1\r\n\x00garbage\r\n")) as port:
        async with AsyncClient("127.0.0.1", port, timeout=2) as client:
            with pytest.raises(RemoteProtocolError):
                await client.inspect_queues()


async def test_in_process_server_and_validation() -> None:
    async with serve() as server, AsyncClient.from_url(server.url) as client:
        with pytest.raises(LocalProtocolError):
            await client.add("a b", b"")
        job_id = await client.add("a", b"")
        assert (await client.inspect_job(job_id)).name == "a"
