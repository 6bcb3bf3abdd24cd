"""Client, worker and admin against live servers: the bundled one and the real gearmand."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
import time
from typing import Any

import anyio
import pytest

from gearman_client import (
    Admin,
    AsyncAdmin,
    AsyncClient,
    AsyncJob,
    AsyncWorker,
    BulkSubmitError,
    Client,
    Job,
    JobException,
    JobFailed,
    Priority,
    QueueFull,
    ServerError,
    Worker,
)
from gearman_client import _packets as pk
from gearman_client._events import NEED_DATA, Answer
from gearman_client._protocol import Connection
from jobwire.errors import (
    ConnectFailed,
    ConnectionLost,
    JobwireConnectionError,
    LocalProtocolError,
    OperationTimeout,
    RemoteProtocolError,
)

from ..conftest import free_port
from ..waiting import wait_until
from .conftest import GEARMAN_KINDS, GearmanServer, need, start_gearman

# -- sync client and worker ---------------------------------------------------------------------


def test_submit_result_updates_and_exception(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    def handler(job: Job) -> bytes:
        if job.data == b"boom":
            raise ValueError("boom!")
        job.send_data(b"partial")
        job.send_warning(b"careful")
        job.send_status(1, 2)
        return job.data[::-1]

    worker = Worker(gearman_server.url, client_id="w-1")
    worker.register(function, handler)
    worker.register(function + "-x", handler, exceptions=True)
    running_worker(worker)
    updates: list[Any] = []
    with Client(gearman_server.url, timeout=10) as client:
        assert client.submit(function, b"hello", on_update=updates.append) == b"olleh"
        assert updates == [pk.WorkData(updates[0].handle, b"partial"),
                           pk.WorkWarning(updates[0].handle, b"careful"),
                           pk.WorkStatus(updates[0].handle, 1, 2)]
        # a raising handler: WORK_WARNING with the exception, then WORK_FAIL, reported once
        updates.clear()
        with pytest.raises(JobFailed) as failed:
            client.submit(function, b"boom", on_update=updates.append)
        assert failed.value.warning == b"ValueError: boom!"
        assert updates == [pk.WorkWarning(failed.value.handle, b"ValueError: boom!")]
        # registered with exceptions=True: WORK_EXCEPTION goes only to clients that asked for
        # it; this one did not, so the server sends WORK_FAIL
        with pytest.raises(JobFailed):
            client.submit(function + "-x", b"boom")
        assert client.submit(function, b"x" * 100_000, unique="big") == b"x" * 100_000
    with Client(gearman_server.url, timeout=10, exceptions=True) as client:
        with pytest.raises(JobException) as info:
            client.submit(function + "-x", b"boom")
        assert info.value.data == b"ValueError: boom!"


def read_packets(sock: socket.socket, until: Any) -> bytes:
    """Raw bytes from ``sock`` until ``until(data)`` holds."""
    data = b""
    while not until(data):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_work_fail_for_clients_without_exceptions(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    """A raw client without the exceptions option gets the handler's exception as WORK_WARNING,
    then a WORK_FAIL whose body is the handle alone, on both servers (gearmand would add a NUL
    to a WORK_FAIL it made from a WORK_EXCEPTION)."""
    async def handler(job: AsyncJob) -> bytes:
        raise RuntimeError("nope")

    worker = Worker(gearman_server.url)
    worker._async.register(function, handler)
    running_worker(worker)
    with socket.create_connection(gearman_server.address, timeout=10) as sock:
        sock.sendall(pk.encode_packet(pk.SubmitJob(function.encode(), b"", b"x"), pk.REQ))
        data = read_packets(sock, lambda d: len(d) >= 12 and len(d) >= 12 + d[11])
        handle = data[12 : 12 + data[11]]
        expected = (pk.encode_packet(pk.JobCreated(handle), pk.RES)
                    + pk.encode_packet(pk.WorkWarning(handle, b"RuntimeError: nope"), pk.RES)
                    + pk.encode_packet(pk.WorkFail(handle), pk.RES))
        data += read_packets(sock, lambda d: len(data) + len(d) >= len(expected))
    assert data == expected


def test_background_status_coalescing_and_priorities(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    with Client(gearman_server.url) as client:
        low = client.submit_background(function, b"low", priority=Priority.LOW)
        normal = client.submit_background(function, b"normal")
        high = client.submit_background(function, b"high", priority=Priority.HIGH)
        first = client.submit_background(function, b"same", unique="u-" + function)
        second = client.submit_background(function, b"other", unique="u-" + function)
        assert first == second
        status = client.get_status(normal)
        assert status.known and not status.running
        by_unique = client.get_status_unique("u-" + function)
        assert by_unique.known and by_unique.unique == ("u-" + function).encode()
        assert not client.get_status(b"H:nope:1").known
        assert not client.get_status_unique("never-" + function).known
        seen: list[bytes] = []
        worker = Worker(gearman_server.url)
        worker.register(function, lambda job: seen.append(job.data))
        running_worker(worker)
        wait_until(lambda: len(seen) == 4, what="four jobs run")
        assert seen == [b"high", b"normal", b"same", b"low"]
        wait_until(lambda: not client.get_status(low).known, what="the low job done")
        assert not client.get_status(high).known


def test_priority_and_validation_errors(gearman_server: GearmanServer, function: str) -> None:
    with Client(gearman_server.url) as client:
        with pytest.raises(LocalProtocolError):
            client.submit_background(function, b"x", priority="high")  # type: ignore[arg-type]
        with pytest.raises(LocalProtocolError):
            client.submit_background(function, b"x", unique="u" * 64)
        with pytest.raises(LocalProtocolError):
            client.submit_background("", b"x")
        with pytest.raises(LocalProtocolError):
            client.submit_background("a\0b", b"x")
        assert client.echo(b"still fine") == b"still fine"


def test_epoch_job_runs_when_due(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    ran: list[float] = []
    worker = Worker(gearman_server.url, regrab_interval=0.2)
    worker.register(function, lambda job: ran.append(time.time()))
    running_worker(worker)
    wait_until(lambda: worker.sleeping, what="the worker asleep (PRE_SLEEP sent)")
    with Client(gearman_server.url) as client:
        at = int(time.time()) + 2
        client.submit_background(function, b"later", at=at)
        wait_until(lambda: ran, timeout=6, what="the scheduled job run")
        assert ran[0] >= at - 0.01


def test_worker_concurrency_never_over_grabs(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0, "done": 0}

    def handler(job: Job) -> bytes:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.2)
        with lock:
            state["now"] -= 1
            state["done"] += 1
        return b"ok"

    worker = Worker(gearman_server.url, concurrency=3)
    worker.register(function, handler)
    running_worker(worker)
    with Client(gearman_server.url) as client, Admin(gearman_server.url) as admin:
        client.submit_background_many([(function, b"x")] * 9)

        def all_done() -> bool:  # the server's count, checked at every poll until the end
            rows = [s for s in admin.status() if s.function == function]
            assert not rows or rows[0].running <= 3, rows
            return state["done"] == 9

        wait_until(all_done, what="nine jobs done, never more than three running")
    assert state["max"] == 3


def test_worker_dying_mid_job_requeues(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    with Client(gearman_server.url) as client:
        results: list[bytes] = []
        t = threading.Thread(target=lambda: results.append(client.submit(function, b"job")))
        t.start()
        with Admin(gearman_server.url) as admin:
            wait_until(lambda: any(s.queued for s in admin.status() if s.function == function),
                       what="the foreground job queued")
        conn = Connection()
        with socket.create_connection(gearman_server.address, timeout=10) as sock:
            sock.sendall(conn.send(pk.CanDo(function.encode())) + conn.send(pk.GrabJobUniq()))
            reply = None
            while reply is None:
                conn.receive_data(sock.recv(65536))
                while (e := conn.next_event()) is not NEED_DATA:
                    if isinstance(e, Answer):
                        reply = e.reply
            assert isinstance(reply, pk.JobAssignUniq), reply
        # the worker died holding the job; another one finishes it
        worker = Worker(gearman_server.url)
        worker.register(function, lambda job: b"second worker")
        running_worker(worker)
        t.join(10)
        assert results == [b"second worker"]


def test_several_servers_with_one_down(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    dead = f"gearman://127.0.0.1:{free_port()}"
    worker = Worker([dead, gearman_server.url])
    worker.register(function, lambda job: job.data.upper())
    running_worker(worker)
    with Client([dead, gearman_server.url], connect_timeout=2) as client:
        for i in range(4):  # round-robin and unique routing both fail over
            assert client.submit(function, b"abc", unique=f"r{i}-{function}") == b"ABC"
            assert client.submit(function, b"def") == b"DEF"
    with Client(dead, connect_timeout=2) as client, pytest.raises(ConnectFailed):
        client.submit_background(function, b"x")


def test_timeout_on_foreground_job(gearman_server: GearmanServer, function: str) -> None:
    with Client(gearman_server.url) as client, pytest.raises(OperationTimeout):
        client.submit(function, b"nobody runs this", timeout=0.3)


def test_queue_full_and_admin(fresh_gearman: GearmanServer, function: str) -> None:
    with Admin(fresh_gearman.url) as admin, Client(fresh_gearman.url) as client:
        assert admin.version()
        assert admin.getpid() > 0
        assert admin.verbose()
        # gearmand 1.1.20 ignores maxqueue for a function it does not know yet: submit first
        handle = client.submit_background(function, b"one", unique="only")
        admin.maxqueue(function, 1)
        with pytest.raises(QueueFull):
            client.submit_background(function, b"two")
        [row] = [s for s in admin.status() if s.function == function]
        assert (row.queued, row.running, row.workers) == (1, 0, 0)
        [prio] = [s for s in admin.priority_status() if s.function == function]
        assert (prio.high, prio.normal, prio.low) == (0, 1, 0)
        assert handle in [j.handle for j in admin.show_jobs()]
        assert b"only" in admin.show_unique_jobs()
        assert any(w.client_id == "-" for w in admin.workers())
        admin.cancel_job(handle)  # the job stays known until a worker would get it
        assert client.get_status(handle).known  # (test_admin_parity.py has the details)
        with pytest.raises(ServerError) as info:
            admin.cancel_job("H:nope:1")
        assert info.value.code == "UNKNOWN_JOB"
        if fresh_gearman.kind == "gearmand":
            with pytest.raises(ServerError):  # not in 1.1.20
                admin.shutdown()
        else:
            admin.shutdown()
            fresh_gearman.proc.wait(5)


def test_workers_list_shows_client_id_and_functions(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    worker = Worker(gearman_server.url, client_id=f"id-{function}")
    worker.register(function, lambda job: b"")
    running_worker(worker)
    with Admin(gearman_server.url) as admin:
        wait_until(lambda: any(w.client_id == f"id-{function}" for w in admin.workers()),
                   what="the worker listed with its id")
        [mine] = [w for w in admin.workers() if w.client_id == f"id-{function}"]
        assert mine.functions == (function,)


def test_server_survives_garbage(gearman_server: GearmanServer) -> None:
    for junk in (b"\0BAD" + bytes(8), b"\0REQ\0\0\0\x63\0\0\0\0"):
        with socket.create_connection(gearman_server.address, timeout=5) as sock:
            sock.sendall(junk)
            assert sock.recv(100) == b""  # closed without a reply, as gearmand does
    with Client(gearman_server.url) as client:
        assert client.echo(b"alive") == b"alive"


# -- async --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_client_and_worker(gearman_server: GearmanServer, function: str) -> None:
    async def handler(job: AsyncJob) -> bytes:
        await job.send_status(1, 1)
        await anyio.sleep(0.05)
        return b"async:" + job.data

    worker = AsyncWorker(gearman_server.url, concurrency=4)
    worker.register(function, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        async with AsyncClient(gearman_server.url) as client:
            results: dict[int, bytes] = {}

            async def one(i: int) -> None:
                results[i] = await client.submit(function, str(i).encode())

            async with anyio.create_task_group() as calls:
                for i in range(20):
                    calls.start_soon(one, i)
            assert results == {i: b"async:%d" % i for i in range(20)}
            handles = await client.submit_background_many([(function, b"bg")] * 50, window=8)
            assert len(set(handles)) == 50
            status = await client.get_status_unique("none-" + function)
            assert not status.known
        async with AsyncAdmin(gearman_server.url) as admin:
            assert any(s.function == function for s in await admin.status())
        worker.stop()


# -- interop with libgearman's `gearman` tool -------------------------------------------------


def gearman_tool() -> str:
    return need(shutil.which("gearman"), "gearman (gearman-tools)")


def test_our_worker_serves_the_gearman_tool(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    tool = gearman_tool()
    worker = Worker(gearman_server.url)
    worker.register(function, lambda job: job.data.upper())
    running_worker(worker)
    out = subprocess.run(
        [tool, "-h", "127.0.0.1", "-p", str(gearman_server.port), "-f", function, "hello"],
        capture_output=True, timeout=20, check=True,
    )
    assert out.stdout.strip() == b"HELLO"


def test_our_client_calls_a_gearman_tool_worker(
    gearman_server: GearmanServer, function: str
) -> None:
    tool = gearman_tool()
    proc = subprocess.Popen(
        [tool, "-h", "127.0.0.1", "-p", str(gearman_server.port), "-w", "-f", function, "--",
         "tr", "a-z", "A-Z"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        with Client(gearman_server.url, timeout=20) as client:
            assert client.submit(function, b"from jobwire") == b"FROM JOBWIRE"
    finally:
        proc.terminate()
        proc.wait(5)


def test_gearman_tool_client_ends_when_our_handler_raises(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    """libgearman's ``gearman`` client does not ask for exceptions: it must still see the job
    fail and exit (it used to wait forever on gearmand's WORK_FAIL made from WORK_EXCEPTION)."""
    tool = gearman_tool()

    def handler(job: Job) -> bytes:
        raise ValueError("boom")

    worker = Worker(gearman_server.url)
    worker.register(function, handler)
    running_worker(worker)
    out = subprocess.run(  # the timeout is the hang guard: TimeoutExpired fails the test
        [tool, "-h", "127.0.0.1", "-p", str(gearman_server.port), "-f", function, "data"],
        capture_output=True, timeout=20, check=False,
    )
    assert out.returncode == 1
    assert out.stdout == b""
    assert out.stderr == b"ValueError: boomJob failed\n"  # the warning, then the failure


def test_work_exception_then_work_fail_from_a_foreign_worker(
    gearman_server: GearmanServer, function: str
) -> None:
    """Older libgearman workers followed WORK_EXCEPTION with WORK_FAIL. Both servers end the job
    at the exception: the client that asked for exceptions gets it once, the other one WORK_FAIL
    once, and the worker's WORK_FAIL is refused (JOB_NOT_FOUND)."""
    fn = function.encode()
    with Client(gearman_server.url, exceptions=True) as client, \
            socket.create_connection(gearman_server.address, timeout=10) as plain_sock, \
            socket.create_connection(gearman_server.address, timeout=10) as worker_sock:
        plain, worker = Connection(), Connection()
        plain_sock.sendall(plain.send(pk.SubmitJob(fn, b"u", b"x")))
        outcome: list[BaseException] = []

        def submit() -> None:
            try:
                client.submit(function, b"x", unique="u")
            except BaseException as exc:  # asserted below
                outcome.append(exc)

        thread = threading.Thread(target=submit)
        thread.start()
        with Client(gearman_server.url) as watcher:  # a sync client is one thread's
            wait_until(lambda: watcher.get_status_unique("u").client_count == 2,
                       what="two clients waiting on the unique id")
        worker_sock.sendall(worker.send(pk.CanDo(fn)) + worker.send(pk.GrabJobUniq()))
        events: list[Any] = []
        while not events:
            worker.receive_data(worker_sock.recv(65536))
            while (event := worker.next_event()) is not NEED_DATA:
                events.append(event)
        handle = events[0].reply.handle
        worker_sock.sendall(worker.send(pk.WorkException(handle, b"boom"))
                            + worker.send(pk.WorkFail(handle)) + worker.send(pk.EchoReq(b"s")))
        events.clear()
        while not any(isinstance(e, Answer) for e in events):
            worker.receive_data(worker_sock.recv(65536))
            while (event := worker.next_event()) is not NEED_DATA:
                events.append(event)
        assert events[0] == pk.Error(b"JOB_NOT_FOUND", b"Job given in work result not found")
        thread.join(10)
        [error] = outcome
        assert isinstance(error, JobException) and error.data == b"boom"
        got: list[Any] = []
        plain_sock.settimeout(0.5)
        with contextlib.suppress(TimeoutError):
            while True:
                plain.receive_data(plain_sock.recv(65536))
                while (event := plain.next_event()) is not NEED_DATA:
                    got.append(event)
        assert [e for e in got if not isinstance(e, Answer)] == [pk.WorkFail(handle)]


@pytest.mark.slow
def test_work_exception_strands_the_gearman_tool_on_gearmand_only(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    """Why ``exceptions=True`` is opt-in (docs/gearman.md): gearmand 1.1.20 hands WORK_EXCEPTION
    to a client without the exceptions option as a WORK_FAIL with a NUL after the handle, and
    the ``gearman`` tool never finishes; the bundled server sends it a clean WORK_FAIL."""
    tool = gearman_tool()

    def handler(job: Job) -> bytes:
        raise ValueError("boom")

    worker = Worker(gearman_server.url)
    worker.register(function, handler, exceptions=True)
    running_worker(worker)
    args = [tool, "-h", "127.0.0.1", "-p", str(gearman_server.port), "-f", function, "data"]
    if gearman_server.kind == "gearmand":
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run(args, capture_output=True, timeout=3, check=False)
    else:
        out = subprocess.run(args, capture_output=True, timeout=20, check=False)
        assert (out.returncode, out.stderr) == (1, b"Job failed\n")
    with Client(gearman_server.url, exceptions=True) as client, pytest.raises(JobException):
        client.submit(function, b"data")  # a client that asks for exceptions gets the text
    with Client(gearman_server.url, timeout=10) as client, pytest.raises(JobFailed):
        client.submit(function, b"data")  # ours without the option ends on either WORK_FAIL


# -- more worker and client behaviour ------------------------------------------------------------


@pytest.mark.anyio
async def test_async_update_iterator(gearman_server: GearmanServer, function: str) -> None:
    async def handler(job: AsyncJob) -> bytes:
        for i in range(3):
            await job.send_data(b"chunk%d" % i)
        await job.send_warning(b"w")
        await job.send_status(3, 3)
        return b"end"

    worker = AsyncWorker(gearman_server.url)
    worker.register(function, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        async with AsyncClient(gearman_server.url) as client:
            run = await client.start(function, b"go")
            updates = [u async for u in run]
            assert [type(u).__name__ for u in updates] == [
                "WorkData", "WorkData", "WorkData", "WorkWarning", "WorkStatus"]
            assert [u.data for u in updates[:3]] == [b"chunk0", b"chunk1", b"chunk2"]
            assert all(u.handle == run.handle for u in updates)
            assert await run.result() == b"end"
        worker.stop()


def test_can_do_timeout_requeues_silently(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    steps: list[str] = []

    def handler(job: Job) -> bytes:
        if steps:
            steps.append("second attempt")
            return b"second try"
        steps.append("first attempt")
        # Past the 1 s CAN_DO_TIMEOUT the server takes the job back: its count of running jobs
        # drops to 0 while this handler still holds it (an admin connection of its own: the
        # worker's stays silent).
        with Admin(gearman_server.url) as admin:
            wait_until(lambda: [s.running for s in admin.status()
                                if s.function == function] == [0],
                       what="the server taking the job back")
        steps.append("first returned late")
        return b"too late"

    # One slot: the connection is silent while the job runs, which gearmand 1.1.20 needs for its
    # timer to fire (docs/gearman.md). The late WORK_COMPLETE is refused (JOB_NOT_FOUND), the
    # worker grabs the requeued job again, and the client only ever sees the second result.
    worker = Worker(gearman_server.url, concurrency=1)
    worker.register(function, handler, timeout=1)
    running_worker(worker)
    with Client(gearman_server.url, timeout=10) as client:
        assert client.submit(function, b"x") == b"second try"
    assert steps == ["first attempt", "first returned late", "second attempt"]


def test_reduce_jobs(gearman_server: GearmanServer, function: str, running_worker: Any) -> None:
    worker = Worker(gearman_server.url, grab_all=True)
    worker.register(function, lambda job: b"%s|%s" % (job.reducer or b"-", job.data))
    running_worker(worker)
    with Client(gearman_server.url) as client:
        assert client.submit_reduce(function, b"data", reducer="sum") == b"sum|data"
        handle = client.submit_reduce(function, b"bg", reducer="sum", background=True)
        wait_until(lambda: not client.get_status(handle).known, what="the job done")


def test_unique_routing_coalesces_across_servers(
    gearman_server: GearmanServer, function: str
) -> None:
    other = start_gearman(gearman_server.kind)
    try:
        urls = [gearman_server.url, other.url]
        with Client(urls) as a, Client(urls[::-1]) as b:  # the order of the list does not matter
            # 40 ids: the hash weights depend on the ports, so 8 (as before) all landed on one
            # server once in 128 runs; 40 do so once in 5e11
            for i in range(40):
                unique = f"u{i}-{function}"
                assert a.submit_background(function, b"x", unique=unique) == (
                    b.submit_background(function, b"y", unique=unique)
                )
        counts = []
        for url in urls:
            with Admin(url) as admin:
                counts += [s.queued for s in admin.status() if s.function == function]
        assert sum(counts) == 40 and len(counts) == 2  # coalesced, and spread over both servers
    finally:
        other.stop()


def where(servers: list[GearmanServer], function: str) -> dict[bytes, str]:
    """Which server (URL) holds each unique id queued for ``function``."""
    found: dict[bytes, str] = {}
    for server in servers:
        with Admin(server.url) as admin:
            for unique in admin.show_unique_jobs():
                if unique:
                    found[unique] = server.url
    return found


@pytest.mark.slow
def test_unique_routing_is_rendezvous_hashing(function: str) -> None:
    """Each unique id goes to the server with the highest hash weight for it: the same server
    for every client, whatever the order of its list; a fourth server takes about a quarter
    of the ids and no id moves between the first three; a dead server's ids fail over to
    their second choice, the server a client without the dead one picks."""
    servers = [start_gearman("bundled") for _ in range(4)]
    urls = [s.url for s in servers]
    try:
        keys = [f"{function}-{i}" for i in range(60)]
        with Client(urls[:3]) as a, Client(urls[2::-1]) as b:
            for key in keys:
                assert a.submit_background(function, b"a", unique=key) == (
                    b.submit_background(function, b"b", unique=key))
        placed = where(servers, function)
        assert set(placed) == {k.encode() for k in keys}
        assert set(placed.values()) == set(urls[:3])  # every one of the three got some
        # a fourth server: ids either stay where they were (and coalesce there) or move to it
        with Client(urls) as d:
            for key in keys:
                d.submit_background(function, b"d", unique=key)
        after = where(servers, function)
        moved = [k for k in keys if after[k.encode()] == urls[3]]
        assert all(placed[k.encode()] == after[k.encode()] for k in keys if k not in moved)
        for server in servers[:3]:
            with Admin(server.url) as admin:
                [row] = [r for r in admin.status() if r.function == function]
                assert row.queued == sum(1 for k in keys if placed[k.encode()] == server.url)
        # the routing function itself over many ids: about a quarter move, all to the new one
        three, four = Client(urls[:3]), Client(urls)
        many = [f"key-{i}".encode() for i in range(2000)]
        first3 = [str(three._pool.order(k)[0].address) for k in many]
        first4 = [str(four._pool.order(k)[0].address) for k in many]
        changed = [(x, y) for x, y in zip(first3, first4, strict=True) if x != y]
        new = str(four._pool.servers[3].address)
        assert all(y == new for _, y in changed)
        assert 0.15 * len(many) < len(changed) < 0.40 * len(many)
        assert all(len(three._pool.order(k)) == 3 for k in many[:10])  # the whole fail-over list
        # fail-over follows the weights: with the first choice dead, the second one
        dead = f"gearman://127.0.0.1:{free_port()}"
        with Client([dead, *urls[:3]], connect_timeout=2) as e, Client(urls[:3]) as f:
            for key in keys[:20]:
                unique = key + "-f"
                assert e.submit_background(function, b"e", unique=unique) == (
                    f.submit_background(function, b"f", unique=unique))
        three.close()
        four.close()
    finally:
        for server in servers:
            server.stop()


@pytest.mark.parametrize("kind", GEARMAN_KINDS)
def test_client_and_worker_reconnect_after_server_restart(
    kind: str, function: str, running_worker: Any
) -> None:
    server = start_gearman(kind)
    try:
        worker = Worker(server.url, client_id="phoenix")
        worker.register(function, lambda job: b"ok:" + job.data)
        running_worker(worker)
        with Client(server.url, timeout=5, connect_timeout=1) as client:
            assert client.submit(function, b"1") == b"ok:1"
            server.stop()
            with pytest.raises(JobwireConnectionError):
                client.submit(function, b"2")
            server = start_gearman(kind, port=server.port)
            # the client backs off, then reconnects; the worker re-registers
            assert wait_until(lambda: client.submit(function, b"3", timeout=2), 10,
                              "a submit after the restart",
                              ignoring=(JobwireConnectionError, OperationTimeout),
                              interval=0.1) == b"ok:3"
        with Admin(server.url) as admin:
            assert any(w.client_id == "phoenix" and w.functions == (function,)
                       for w in admin.workers())
    finally:
        server.stop()


def test_graceful_stop_finishes_running_jobs(
    gearman_server: GearmanServer, function: str
) -> None:
    started, release = threading.Event(), threading.Event()

    def handler(job: Job) -> bytes:
        started.set()
        assert release.wait(10), "the test never released the job"
        return b"finished"

    worker = Worker(gearman_server.url)
    worker.register(function, handler)
    thread = threading.Thread(target=worker.run)
    thread.start()
    with Client(gearman_server.url) as client:
        results: list[bytes] = []
        t = threading.Thread(target=lambda: results.append(client.submit(function, b"x")))
        t.start()
        assert started.wait(5)
        worker.stop()  # returns once the worker's event loop has taken it in
        assert worker.stats.in_flight == 1  # the job still runs: stop() waits for it
        release.set()
        thread.join(5)
        assert not thread.is_alive()
        t.join(5)
        assert results == [b"finished"]
        # stopped: its connection is gone, so no worker is left to grab anything
        with Admin(gearman_server.url) as admin:
            wait_until(lambda: not any(s.workers for s in admin.status()
                                       if s.function == function),
                       what="the stopped worker gone from the server")
        handle = client.submit_background(function, b"left alone")
        status = client.get_status(handle)
        assert status.known and not status.running


def test_submit_many_and_bulk_errors(
    fresh_gearman: GearmanServer, function: str, running_worker: Any
) -> None:
    def handler(job: Job) -> bytes:
        if job.data.startswith(b"bad"):
            raise ValueError(job.data.decode())
        return job.data.upper()

    worker = Worker(fresh_gearman.url, concurrency=4)
    worker.register(function, handler)
    running_worker(worker)
    with Client(fresh_gearman.url) as client:
        jobs = [(function, b"job%d" % i) for i in range(300)]
        assert client.submit_many(jobs, window=50) == [b"JOB%d" % i for i in range(300)]
        with pytest.raises(BulkSubmitError) as info:
            client.submit_many([(function, b"a"), (function, b"bad1"), (function, b"c")])
        results = info.value.results
        assert results[0] == b"A" and results[2] == b"C"
        assert isinstance(results[1], JobFailed) and results[1].warning == b"ValueError: bad1"
    # background bulk against a full queue: the refused ones are errors, the others queued
    other = function + "-bg"
    with Client(fresh_gearman.url) as client, Admin(fresh_gearman.url) as admin:
        client.submit_background(other, b"first")  # gearmand needs the function to exist
        admin.maxqueue(other, 3)
        with pytest.raises(BulkSubmitError) as bulk:
            client.submit_background_many([(other, b"x")] * 5, window=2)
        outcome = bulk.value.results
        assert [isinstance(r, bytes) for r in outcome] == [True, True, False, False, False]
        assert all(isinstance(r, QueueFull) for r in outcome[2:])
        [row] = [s for s in admin.status() if s.function == other]
        assert row.queued == 3


def test_get_status_goes_to_the_server_that_made_the_handle(
    gearman_server: GearmanServer, function: str
) -> None:
    other = start_gearman(gearman_server.kind)
    try:
        with Client([gearman_server.url, other.url]) as client:
            handles = [client.submit_background(function, b"x") for _ in range(4)]
            assert all(client.get_status(h).known for h in handles)
        with Client([other.url, gearman_server.url]) as fresh:  # never saw these handles
            assert all(fresh.get_status(h).known for h in handles)
            assert not fresh.get_status(b"H:vm:999999").known
    finally:
        other.stop()


def test_bundled_epoch_job_wakes_a_sleeping_worker(function: str, running_worker: Any) -> None:
    server = start_gearman("bundled")
    try:
        ran: list[float] = []
        worker = Worker(server.url)  # no regrab_interval: only a NOOP can wake it
        worker.register(function, lambda job: ran.append(time.time()))
        running_worker(worker)
        wait_until(lambda: worker.sleeping, what="the worker asleep (PRE_SLEEP sent)")
        with Client(server.url) as client:
            at = time.time() + 1
            client.submit_background(function, b"later", at=at)
            wait_until(lambda: ran, timeout=5, what="the scheduled job run")
            assert ran[0] >= int(at) - 0.01
    finally:
        server.stop()


def test_bundled_graceful_shutdown() -> None:
    server = start_gearman("bundled", allow_shutdown=True)
    try:
        with Client(server.url) as client, Admin(server.url) as admin:
            assert client.echo(b"before") == b"before"
            admin.shutdown(graceful=True)

            def refused() -> bool:
                try:
                    socket.create_connection(server.address, timeout=1).close()
                except OSError:
                    return True
                return False

            wait_until(refused, what="the listener closed (a new connection refused)")
            assert client.echo(b"still served") == b"still served"
            assert server.proc.poll() is None
        server.proc.wait(5)  # the last connection went: the server exits
        assert server.proc.returncode == 0
    finally:
        server.stop()


@pytest.mark.anyio
async def test_async_admin_every_command(fresh_gearman: GearmanServer, function: str) -> None:
    async with AsyncAdmin(fresh_gearman.url) as admin, AsyncClient(fresh_gearman.url) as client:
        handle = await client.submit_background(function, b"x", unique="au")
        assert await admin.version()
        assert await admin.getpid() > 0
        assert await admin.verbose()
        assert [s.queued for s in await admin.status() if s.function == function] == [1]
        assert [p.normal for p in await admin.priority_status() if p.function == function] == [1]
        assert handle in [j.handle for j in await admin.show_jobs()]
        assert b"au" in await admin.show_unique_jobs()
        assert await admin.workers()
        await admin.maxqueue(function, 5, 5, 5)
        await admin.maxqueue(function)
        await admin.create_function("made-" + function)
        assert "made-" + function in [s.function for s in await admin.status()]
        await admin.drop_function("made-" + function)
        with pytest.raises(ServerError) as info:
            await admin.drop_function("made-" + function)
        assert (info.value.code, info.value.text) == ("", "function not found")
        await admin.cancel_job(handle)
        with pytest.raises(LocalProtocolError):
            await admin.cancel_job("H:1 shutdown")


def test_register_and_unregister_while_working(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    worker = Worker(gearman_server.url)
    worker.register(function, lambda job: b"one")
    running_worker(worker)
    with Client(gearman_server.url, timeout=10) as client:
        assert client.submit(function, b"x") == b"one"
        # the worker sleeps now: the changes must reach the server anyway
        wait_until(lambda: worker.sleeping, what="the worker asleep (PRE_SLEEP sent)")
        worker.register(function + "-2", lambda job: b"two")
        assert client.submit(function + "-2", b"x") == b"two"
        worker.unregister(function)
        with Admin(gearman_server.url) as admin:
            wait_until(lambda: not any(
                function in w.functions for w in admin.workers()
            ), what="the function unregistered")
        handle = client.submit_background(function, b"nobody")
        # woken for the next job, the worker grabs again: it is never given the first one
        assert client.submit(function + "-2", b"y") == b"two"
        status = client.get_status(handle)
        assert status.known and not status.running


@pytest.mark.anyio
async def test_coalesced_foreground_jobs_reach_every_client(
    gearman_server: GearmanServer, function: str
) -> None:
    release = anyio.Event()

    async def handler(job: AsyncJob) -> bytes:
        await job.send_data(b"progress")
        await release.wait()
        return b"shared result"

    worker = AsyncWorker(gearman_server.url)
    worker.register(function, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        async with AsyncClient(gearman_server.url) as a, AsyncClient(gearman_server.url) as b:
            first = await a.start(function, b"x", unique="same-" + function)
            second = await b.start(function, b"y", unique="same-" + function)
            assert first.handle == second.handle
            status = await a.get_status_unique("same-" + function)
            assert status.known and status.client_count == 2
            release.set()
            assert await first.result() == await second.result() == b"shared result"
        worker.stop()


class MisbehavingServer:
    """A TCP peer that answers the first request of each connection with the next canned reply
    (garbage, half a packet then EOF, ...): the real servers never do that."""

    def __init__(self, replies: list[bytes]) -> None:
        self.replies = replies
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        for reply in self.replies:
            sock, _ = self.listener.accept()
            with sock:
                data = b""
                while len(data) < 12 or len(data) < 12 + int.from_bytes(data[8:12], "big"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    if data.startswith(pk.encode_packet(pk.OptionReq(b"exceptions"), pk.REQ)):
                        sock.sendall(pk.encode_packet(pk.OptionRes(b"exceptions"), pk.RES))
                        data = data[22:]
                sock.sendall(reply)
        self.listener.close()


def test_garbage_and_a_server_dying_mid_reply() -> None:
    good = pk.encode_packet(pk.EchoRes(b"fine"), pk.RES)
    fake = MisbehavingServer([b"HTTP/1.1 400 Bad Request\r\n\r\n", good[:15], good])
    with Client(f"gearman://127.0.0.1:{fake.port}", timeout=5) as client:
        with pytest.raises(RemoteProtocolError):
            client.echo(b"fine")
        # a fresh connection at once (the back-off is for connections that fail to open)
        with pytest.raises(ConnectionLost):
            client.echo(b"fine")
        # a fresh connection, never the bad one
        assert wait_until(lambda: client.echo(b"fine"), 5, "an echo on a fresh connection",
                          ignoring=(ConnectFailed,), interval=0.05) == b"fine"


def test_large_job_bodies(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    worker = Worker(gearman_server.url)
    worker.register(function, lambda job: job.data[::-1])
    running_worker(worker)
    body = bytes(range(256)) * (5 * 4096)  # 5 MiB
    with Client(gearman_server.url, timeout=30) as client:
        assert client.submit(function, body) == body[::-1]
    small = Client(gearman_server.url, max_body_size=1024)
    with small, pytest.raises(RemoteProtocolError):
        small.submit(function, b"x" * 2048)  # the answer is over the client's limit


def test_bad_callbacks_and_client_ids(
    gearman_server: GearmanServer, function: str, running_worker: Any
) -> None:
    with pytest.raises(LocalProtocolError):
        Worker(gearman_server.url, client_id="evil\nline")

    def handler(job: Job) -> bytes:
        job.send_data(b"tick")
        return b"done"

    def broken_callback(update: Any) -> None:
        raise RuntimeError("caller bug")

    worker = Worker(gearman_server.url)
    worker.register(function, handler)
    running_worker(worker)
    with Client(gearman_server.url) as client:
        assert client.submit(function, b"x", on_update=broken_callback) == b"done"
        assert client.echo(b"connection intact") == b"connection intact"


def test_run_server_in_process(function: str) -> None:
    from gearman_client.server import run_server

    with run_server(handle_prefix="H:inproc") as server, Client(server.url) as client:
        handle = client.submit_background(function, b"x")
        assert handle.startswith(b"H:inproc:")
        assert client.get_status(handle).known


@pytest.mark.anyio
async def test_serve_in_the_same_event_loop(function: str) -> None:
    from gearman_client.server import serve

    async with serve() as server:
        worker = AsyncWorker(server.url)

        async def handler(job: AsyncJob) -> bytes:
            return job.data * 2

        worker.register(function, handler)
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            async with AsyncClient(server.url) as client:
                assert await client.submit(function, b"ab") == b"abab"
            worker.stop()
