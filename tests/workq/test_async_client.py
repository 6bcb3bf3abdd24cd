"""The AsyncClient on asyncio and trio against the bundled server: sharing, cancellation."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import anyio
import pytest

from jobwire.errors import (
    ConnectionLost,
    LocalProtocolError,
    NotSent,
    OperationTimeout,
    RemoteProtocolError,
)
from workq_client import (
    AsyncClient,
    BulkError,
    ClientError,
    DuplicateJob,
    JobState,
    NotFound,
    TimedOut,
)
from workq_client.server import serve

from ..waiting import await_until
from .conftest import WorkqServer
from .helpers import realish_workq, replies, silent, tcp_server

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


async def test_add_many_lands_every_job_on_a_real_server_reader() -> None:
    # As in test_client.py: 241-byte adds put the real server's 4096-byte buffer end between
    # the 17th payload's CR and LF unless at most 4096 bytes are unanswered.
    with realish_workq() as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as client:
            ids = await client.add_many("q", [b"y" * 177] * 3000, ttl=8640)
            with pytest.raises(BulkError) as info:
                await client.add_many("r", [b"y" * 177] * 3000, ttl=8640, max_bytes=None)
        assert {job.job_id for job in peer.added("q")} == set(ids) and len(set(ids)) == 3000
        error = info.value
        assert error.index == 16 and [i for i, _ in error.done] == list(range(16))
        assert isinstance(error.error, (ClientError, ConnectionLost))
        assert all(isinstance(r, (ConnectionLost, NotSent)) for r in error.results[17:])
        assert [job_id for _, job_id in error.done] == [job.job_id for job in peer.added("r")]


async def test_add_many_with_a_duplicate_in_the_middle(
    workq_server: WorkqServer, qname: str
) -> None:
    async with AsyncClient(workq_server.host, workq_server.port) as client:
        taken = await client.add(qname, b"first")
        ids = [str(uuid.uuid4()), taken, str(uuid.uuid4())]
        with pytest.raises(BulkError) as info:
            await client.add_many(qname, [b"a", b"b", b"c"], job_ids=ids)
        error = info.value
        assert isinstance(error.error, DuplicateJob) and error.index == 1
        assert error.done == [(0, ids[0])] and isinstance(error.results[2], ConnectionLost)
        assert (await client.inspect_job(ids[0])).payload == b"a"
        assert client.connections == 2


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


async def test_cancelled_result_wait_does_not_stall_the_next_call(
    workq_server: WorkqServer, qname: str
) -> None:
    async with AsyncClient(workq_server.host, workq_server.port, timeout=5) as client:
        job_id = await client.add(qname, b"")
        with anyio.move_on_after(0.1) as scope:
            await client.result(job_id, wait=30)
        assert scope.cancelled_caught
        # An abandoned result holds no job: the client moves to a new connection rather than
        # wait 30 s behind it.
        with anyio.fail_after(3):
            assert (await client.lease(qname, wait=1)).job_id == job_id
        assert client.connections == 2


# -- a cancelled lease strands no job (against a peer that, like Workq 0.2.0, never notices a
# closed connection while a lease waits: tests/workq/helpers.py) ------------------------------


async def test_cancelled_lease_keeps_its_connection_so_the_next_add_strands_nothing() -> None:
    with realish_workq() as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as client:
            with anyio.move_on_after(0.3) as scope:
                await client.lease("x", wait=3)
            assert scope.cancelled_caught
            # Queued behind the abandoned lease on the same connection: the server takes the
            # add once that lease has timed out, so the lease cannot take the job.
            with anyio.fail_after(5):
                job_id = await client.add("x", b"p")
            assert client.connections == 1
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as other:
            with anyio.fail_after(3):
                job = await other.lease("x", wait=1)
        assert job.job_id == job_id
        assert peer.jobs[job_id].attempts == 1  # never leased to anyone before


async def test_a_job_taken_by_an_abandoned_lease_goes_to_the_next_lease_call() -> None:
    with realish_workq() as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as client, \
                AsyncClient("127.0.0.1", peer.port, timeout=5) as producer:
            with anyio.move_on_after(0.3):
                await client.lease(["x", "y"], wait=3)
            await await_until(peer.waiting_leases, 2, "a lease waiting at the peer")
            job_id = await producer.add("y", b"for the abandoned lease")
            # The server leased it to the abandoned lease (its connection is still open): the
            # client hands it to its next lease call that names "y".
            with anyio.fail_after(2):
                job = await client.lease("y", wait=1)
            assert (job.job_id, job.payload) == (job_id, b"for the abandoned lease")
            assert 0 < job.ttr <= 60
            await client.complete(job.job_id, b"done")
        assert peer.jobs[job_id].attempts == 1 and peer.jobs[job_id].state == "completed"


async def test_a_lease_answered_from_an_abandoned_lease_leaves_no_lease_of_its_own() -> None:
    """A lease call made while an abandoned lease is out takes that lease over instead of
    sending its own: once it has the abandoned lease's job, nothing of it waits on the server,
    so the next job stays ready (it used to go to the call's own lease, still out: to the dead
    connection once the client closed; and a ``complete`` queued behind that lease waited for
    it)."""
    with realish_workq() as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as client, \
                AsyncClient("127.0.0.1", peer.port, timeout=5) as producer:
            with anyio.move_on_after(0.3):
                await client.lease("x", wait=30)
            await await_until(peer.waiting_leases, 2, "a lease waiting at the peer")
            got: list[str] = []
            async with anyio.create_task_group() as tg:
                async def take() -> None:
                    got.append((await client.lease("x", wait=30)).job_id)

                tg.start_soon(take)
                await anyio.wait_all_tasks_blocked()
                first = await producer.add("x", b"A")
            assert got == [first]
            assert client._session.leases_out == 0
            second = await producer.add("x", b"B")
            await client.complete(first, b"done")
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as other:
            job = await other.lease("x", wait=2)
        assert job.job_id == second
        assert peer.jobs[second].attempts == 1  # never leased to the closed client
        assert peer.jobs[first].state == "completed"


async def test_a_lease_of_other_names_is_sent_once_the_abandoned_one_ends() -> None:
    """A lease call that the abandoned lease's job does not fit sends its own lease when that
    lease has ended; the job is kept for the next call naming its queue."""
    with realish_workq() as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as client, \
                AsyncClient("127.0.0.1", peer.port, timeout=5) as producer:
            with anyio.move_on_after(0.3):
                await client.lease(["x", "y"], wait=30)
            await await_until(peer.waiting_leases, 2, "a lease waiting at the peer")
            got: list[str] = []
            async with anyio.create_task_group() as tg:
                async def take() -> None:
                    got.append((await client.lease("z", wait=30)).job_id)

                tg.start_soon(take)
                await anyio.wait_all_tasks_blocked()
                for_y = await producer.add("y", b"")  # to the abandoned lease
                await await_until(peer.waiting_leases, 5, "the call's own lease, now sent")
                for_z = await producer.add("z", b"")
            assert got == [for_z]
            assert (await client.lease("y", wait=0)).job_id == for_y  # kept: nothing sent
            assert client._session.leases_out == 0
        assert peer.jobs[for_y].attempts == peer.jobs[for_z].attempts == 1


async def test_calls_behind_an_abandoned_lease_wait_for_it_without_timing_out() -> None:
    with realish_workq() as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=0.5) as client:
            with anyio.move_on_after(0.1):
                await client.lease("x", wait=1.5)
            # The add is answered only when the lease has ended (1.4 s on), beyond the 0.5 s
            # timeout: the timeout counts from the end of the waits ahead of it.
            with anyio.fail_after(4):
                job_id = await client.add("other", b"")
        assert peer.jobs[job_id].name == "other"


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
