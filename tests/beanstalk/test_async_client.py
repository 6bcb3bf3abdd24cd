"""AsyncClient on asyncio and trio, against the bundled server and the real beanstalkd."""

from __future__ import annotations

import signal
import socket
import time

import anyio
import pytest

from beanstalk_client import (
    AsyncClient,
    ConnectFailed,
    ConnectionLost,
    DeadlineSoon,
    Job,
    JobTooBig,
    LocalProtocolError,
    NotFound,
    OperationTimeout,
    Peek,
    RemoteProtocolError,
    TimedOut,
)

from ..conftest import BIG, BeanstalkServer, free_port, start_server
from ..waiting import await_until
from .fakes import scripted_server

pytestmark = pytest.mark.anyio


async def _client(server: BeanstalkServer, tube: str, **kwargs: object) -> AsyncClient:
    c = AsyncClient.from_url(server.url, **kwargs)
    await c.use(tube)
    await c.watch(tube)
    await c.ignore("default")
    return c


async def test_every_command_kind(server: BeanstalkServer, tube: str) -> None:
    async with await _client(server, tube) as c:
        job_id = await c.put(b"a\r\nb", priority=3, ttr=30)
        assert await c.peek(job_id) == Job(job_id, b"a\r\nb")
        assert await c.peek_ready() == Job(job_id, b"a\r\nb")
        job = await c.reserve(wait=0)
        await c.touch(job)
        await c.release(job, delay=50)
        assert (await c.peek_delayed()).id == job_id
        assert await c.kick(1) == 1
        job = await c.reserve_job(job_id)
        await c.bury(job)
        assert (await c.peek_buried()).id == job_id
        await c.kick_job(job)
        stats = await c.stats_job(job)
        assert (stats["state"], stats["buries"], stats["releases"]) == ("ready", 1, 1)
        assert (await c.stats_tube(tube))["current-jobs-ready"] == 1
        assert (await c.stats())["current-connections"] >= 1
        assert tube in await c.list_tubes()
        assert await c.list_tubes_watched() == [tube]
        assert await c.list_tube_used() == tube
        await c.pause_tube(tube, 0)
        await c.delete(job)
        with pytest.raises(NotFound):
            await c.delete(job)
        with pytest.raises(TimedOut):
            await c.reserve(wait=0)
        with pytest.raises(JobTooBig):
            await c.put(b"x" * (server.max_job_size + 1))
        assert await c.put(b"still usable") > job_id


async def test_many_tasks_share_one_connection(server: BeanstalkServer, tube: str) -> None:
    async with await _client(server, tube) as c:
        results: dict[int, bytes] = {}

        async def producer(i: int) -> None:
            job_id = await c.put(b"%d" % i)
            results[job_id] = b"%d" % i
            assert (await c.peek(job_id)).body == b"%d" % i  # each reply reaches its caller

        async with anyio.create_task_group() as tg:
            for i in range(300):
                tg.start_soon(producer, i)
        assert len(results) == 300
        seen: dict[int, bytes] = {}

        async def consumer() -> None:
            job = await c.reserve(wait=0)
            seen[job.id] = job.body
            await c.delete(job)

        async with anyio.create_task_group() as tg:
            for _ in range(300):
                tg.start_soon(consumer)
        assert seen == results


async def test_put_many_10000(server: BeanstalkServer, tube: str) -> None:
    async with await _client(server, tube) as c:
        ids = await c.put_many([b"%d" % i for i in range(10_000)], window=256)
        assert len(ids) == 10_000 and ids == sorted(ids)
        assert (await c.stats_tube(tube))["current-jobs-ready"] == 10_000
        await c.delete_many(ids)
        assert (await c.stats_tube(tube))["current-jobs-ready"] == 0


async def test_writes_the_kernel_takes_in_part_stay_whole_and_in_order(
    fresh_server: BeanstalkServer, tube: str
) -> None:
    """Nearly 1 MiB puts from tasks at once while the server is stopped (SIGSTOP): the kernel
    takes part of a write, the rest is kept and goes out before anything queued after it, so
    once the server runs again every body arrives whole and every reply in step."""
    assert fresh_server.proc is not None
    bodies = [bytes([65 + i]) * (BIG - 64 - i) for i in range(8)]
    async with await _client(fresh_server, tube) as c:
        ids: dict[int, bytes] = {}

        async def put(body: bytes) -> None:
            ids[await c.put(body)] = body

        fresh_server.proc.send_signal(signal.SIGSTOP)
        try:
            async with anyio.create_task_group() as tg:
                for body in bodies:
                    tg.start_soon(put, body)
                await await_until(lambda: c._session.in_flight == len(bodies),
                                  what="every task's put queued")
                fresh_server.proc.send_signal(signal.SIGCONT)
        finally:
            fresh_server.proc.send_signal(signal.SIGCONT)
        assert sorted(ids.values()) == sorted(bodies)
        for _ in bodies:
            job = await c.reserve(wait=0)
            assert job.body == ids.pop(job.id)
            await c.delete(job)
        assert not ids


async def test_a_reply_read_for_the_next_reader_still_leaves_a_reader(anyio_backend: str) -> None:
    """A reader hands its role to the oldest waiter (w1) before that waiter runs; a task then
    reads, without the role, replies that answer itself and w1. Both leave without reading, so
    the role must pass on to w2, or w2 waits for a reader that never comes (CI caught this as
    a 10 s put timeout). The order is forced: the first peek's reply fills one 64 KiB recv
    exactly, so the reader stops there and the second peek's wait reads the rest."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    async with AsyncClient("127.0.0.1", port, timeout=3) as c:
        server, _ = listener.accept()
        listener.close()
        with server:
            results: dict[str, object] = {}

            async def peeks() -> None:
                results["peeks"] = await c.call_many([Peek(1), Peek(2)])

            async def put(name: str) -> None:
                try:
                    results[name] = await c.put(name.encode())
                except OperationTimeout as exc:
                    results[name] = exc

            async with anyio.create_task_group() as tg:
                tg.start_soon(peeks)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(put, "w1")
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(put, "w2")
                await anyio.wait_all_tasks_blocked()
                body = b"b" * (65536 - len(b"FOUND 1 65519\r\n\r\n"))
                server.sendall(b"FOUND 1 %d\r\n%s\r\nFOUND 2 1\r\nx\r\nINSERTED 3\r\n"
                               % (len(body), body))
                await await_until(lambda: "w1" in results, 5, "w1's put answered")
                assert results["w1"] == 3
                server.sendall(b"INSERTED 4\r\n")
            assert results["w2"] == 4
            assert [getattr(r, "job_id", None) for r in results["peeks"]] == [1, 2]  # type: ignore[attr-defined]


async def test_cancelled_reserve_never_steals_a_reply(server: BeanstalkServer, tube: str) -> None:
    async with await _client(server, tube) as c, AsyncClient.from_url(server.url) as producer:
        await producer.use(tube)
        with anyio.move_on_after(0.3):
            await c.reserve()  # blocks: the tube is empty; then cancelled
        # The reserve is still outstanding on the wire; the next caller's reply must not be
        # the job that answers it.
        async with anyio.create_task_group() as tg:
            tg.start_soon(producer.put, b"orphan")
            assert await c.list_tube_used() == tube
        # The job reserved for the cancelled caller is given back to the server, priority kept.
        async def released() -> bool:
            stats = await c.stats_tube(tube)
            return (stats["current-jobs-ready"], stats["current-jobs-reserved"]) == (1, 0)

        await await_until(released, what="the orphaned job released (1 ready, 0 reserved)")
        job = await c.reserve(wait=0)
        assert job.body == b"orphan"
        assert (await c.stats_job(job))["pri"] == 2**16


async def test_cancel_waiting_caller_mid_pipeline(server: BeanstalkServer, tube: str) -> None:
    async with await _client(server, tube) as c:
        ids: list[int] = []

        async def put_one(i: int) -> None:
            ids.append(await c.put(b"%d" % i))

        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(put_one, i)
            await anyio.sleep(0)
            tg.cancel_scope.cancel()  # some puts are on the wire, some are not
        # Whatever was cancelled, the next replies go to the right callers.
        job_id = await c.put(b"after")
        assert await c.peek(job_id) == Job(job_id, b"after")
        assert (await c.stats_tube(tube))["current-jobs-ready"] >= len(ids) + 1


async def test_deadline_soon_async(server: BeanstalkServer, tube: str) -> None:
    """One caller, one reserve, a held job about to expire: DeadlineSoon is for this caller."""
    async with await _client(server, tube) as c:
        await c.put(b"x", ttr=2)
        job = await c.reserve(wait=0)
        with anyio.fail_after(5), pytest.raises(DeadlineSoon):
            await c.reserve()
        # inside the margin: at once, whatever the timeout (once the TTR has passed, the reply
        # would be RESERVED of the same job)
        with pytest.raises(DeadlineSoon):
            await c.reserve(wait=6)
        await c.delete(job)


async def waiting(client: AsyncClient, tube: str) -> bool:
    """A reserve waits at the server for a job of ``tube`` (its ``current-waiting``)."""
    return (await client.stats_tube(tube))["current-waiting"] > 0


async def _multiple_reserves(
    server: BeanstalkServer, tube: str, *, ttr: int, timeout: int, put_after_delete: bool
) -> tuple[object, float, float]:
    """beanstalk-multiple-reserves.txt on one shared AsyncClient: task 1 reserves a job, task 2
    waits in ``reserve(wait=...)``, task 1 deletes its job once the server counts that reserve
    waiting (the delete is held behind it until the server answers it DEADLINE_SOON); with
    ``put_after_delete``, a job is put once the reserve, sent again, waits again. Returns task
    2's outcome, when the delete was answered and when task 2's reserve ended (seconds from
    task 2's start)."""
    async with await _client(server, tube) as c, AsyncClient.from_url(server.url) as producer:
        await producer.use(tube)
        await c.put(b"held", ttr=ttr)
        job = await c.reserve(wait=0)
        outcome: list[object] = []
        ended = deleted = 0.0
        started = time.monotonic()

        async def task2() -> None:
            nonlocal ended
            try:
                outcome.append(await c.reserve(wait=timeout))
            except (DeadlineSoon, TimedOut) as exc:
                outcome.append(exc)
            ended = time.monotonic() - started

        with anyio.fail_after(timeout + 5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(task2)
                # task 2's reserve is on the wire before the delete: the server counts it
                await await_until(lambda: waiting(producer, tube),
                                  what="task 2's reserve waiting at the server")
                await c.delete(job)
                deleted = time.monotonic() - started
                if put_after_delete:  # once task 2's reserve, sent again, waits again
                    await await_until(lambda: waiting(producer, tube),
                                      what="task 2's reserve waiting again")
                    await producer.put(b"for task 2")
        return outcome[0], deleted, ended


@pytest.mark.slow
async def test_deadline_soon_is_not_raised_to_a_task_holding_nothing(
    server: BeanstalkServer, tube: str
) -> None:
    """The server's DEADLINE_SOON unblocks the connection for task 1's delete; task 2 held
    nothing, so its reserve goes on, with what is left of its 6 s."""
    outcome, deleted, ended = await _multiple_reserves(
        server, tube, ttr=3, timeout=6, put_after_delete=False
    )
    assert 1.5 < deleted < 3, deleted  # TTR 3 minus the 1 s margin
    assert isinstance(outcome, TimedOut), outcome
    assert 5.4 < ended < 7.5, ended  # the 6 s it asked for, not 2 s, nor 2 + 6


async def test_reserve_interrupted_for_another_task_still_gets_a_job(
    server: BeanstalkServer, tube: str
) -> None:
    outcome, deleted, ended = await _multiple_reserves(
        server, tube, ttr=2, timeout=10, put_after_delete=True
    )
    assert isinstance(outcome, Job) and outcome.body == b"for task 2", outcome
    assert deleted < ended < deleted + 3


async def test_deadline_soon_with_nothing_queued_to_unblock(
    server: BeanstalkServer, tube: str
) -> None:
    """On a shared connection, DEADLINE_SOON reaches the waiting reserve when nothing that
    could settle the held job is queued behind it (a ``stats`` cannot): the connection holds a
    job about to run out, and waiting on would only be answered DEADLINE_SOON again."""
    async with await _client(server, tube) as c:
        await c.put(b"held", ttr=2)
        job = await c.reserve(wait=0)
        outcome: list[BaseException] = []

        async def task2() -> None:
            with pytest.raises(DeadlineSoon) as info:
                await c.reserve(wait=6)
            outcome.append(info.value)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(task2)
                await await_until(lambda: c._session.in_flight == 1, what="task 2's reserve sent")
                assert (await c.stats())["current-jobs-reserved"] >= 1  # behind the reserve
        assert len(outcome) == 1
        await c.delete(job)


async def test_unix_socket_async(server: BeanstalkServer) -> None:
    srv = start_server(server.kind, unix=True)
    try:
        async with AsyncClient.from_url(srv.url) as c:
            job_id = await c.put(b"u")
            assert await c.reserve(wait=0) == Job(job_id, b"u")
    finally:
        srv.stop()


async def test_invalid_input_refused_before_sending(server: BeanstalkServer, tube: str) -> None:
    async with await _client(server, tube) as c:
        with pytest.raises(LocalProtocolError):
            await c.use("evil\r\nput 0 0 1 1")
        with pytest.raises(LocalProtocolError):
            await c.put("str")  # type: ignore[arg-type]
        assert await c.list_tube_used() == tube


async def test_connect_failed_async() -> None:
    with pytest.raises(ConnectFailed):
        async with AsyncClient("127.0.0.1", free_port(), timeout=1):
            pass


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"RESERVED 1 10\r\nabc", ConnectionLost),
        (b"", ConnectionLost),
        (b"DELETED\r\n", RemoteProtocolError),
        (b"\x00\xff garbage\r\n", RemoteProtocolError),
    ],
)
async def test_bad_server_async(reply: bytes, error: type[Exception]) -> None:
    with scripted_server(reply) as port:
        async with AsyncClient("127.0.0.1", port, timeout=2) as c:
            with pytest.raises(error):
                await c.reserve()
            with pytest.raises(ConnectionLost):
                await c.put(b"x")


async def test_silent_server_async_timeout() -> None:
    with scripted_server(b"", close=False) as port:
        async with AsyncClient("127.0.0.1", port, timeout=0.3) as c:
            with pytest.raises(OperationTimeout):
                await c.stats()


async def test_close_fails_waiting_callers(server: BeanstalkServer, tube: str) -> None:
    c = await _client(server, tube)
    failures: list[BaseException] = []

    async def wait_forever() -> None:
        try:
            await c.reserve()
        except ConnectionLost as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_forever)
        await await_until(lambda: c._session.in_flight == 1, what="the reserve sent")
        await c.aclose()
    assert len(failures) == 1
    with pytest.raises(ConnectionLost):
        await c.put(b"x")
