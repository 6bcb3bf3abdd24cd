"""OpenStack's ``gear`` as a peer, both ways (docs/gearman.md, "Peers: OpenStack gear").

* Our client and worker against ``gear.Server``: it never answers OPTION_REQ (so the client
  asks for no option unless told to, and copes when a told one goes unanswered), and it
  ignores a few other requests (ECHO_REQ, GET_STATUS_UNIQUE, SUBMIT_JOB_EPOCH, CAN_DO_TIMEOUT,
  GRAB_JOB_ALL): a call that waits on one ends with ``OperationTimeout``, never a hang, and
  the connection keeps working.
* gear's ``Client`` and ``Worker`` against the bundled server and gearmand: each side reads
  what the other made (results, updates, failures, exceptions).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from gearman_client import Admin, AsyncClient, AsyncWorker, Client, Job, Worker
from gearman_client import _packets as pk
from gearman_client._events import NEED_DATA
from gearman_client._protocol import Connection
from gearman_client.errors import JobException, JobFailed
from jobwire.errors import OperationTimeout
from jobwire.testing import free_port, spawn, stop_process, unavailable, wait_listening

from ..waiting import wait_until
from .conftest import GearmanServer

pytestmark = pytest.mark.filterwarnings("ignore:notifyAll:DeprecationWarning")

try:
    import gear
except ImportError:  # a test dependency (the ``test`` extra)
    gear = None

#: gear.Server on a port, until SIGTERM.
GEAR_SERVER = (
    "import signal, sys, gear\n"
    "gear.Server(port=int(sys.argv[1]), host='127.0.0.1')\n"
    "signal.pause()\n"
)


def need_gear() -> Any:
    if gear is None:
        unavailable("gear is not installed (pip install gear: the test extra)")
    return gear


@pytest.fixture(scope="module")
def gear_server() -> Iterator[GearmanServer]:
    """OpenStack gear's ``gear.Server`` in a process of its own."""
    need_gear()
    port = free_port()
    proc = spawn([sys.executable, "-c", GEAR_SERVER, str(port)])
    try:
        wait_listening(proc, ("127.0.0.1", port), "gear.Server")
    except BaseException:
        stop_process(proc)
        raise
    srv = GearmanServer("gear", proc, port)
    yield srv
    srv.stop()


def queued(server: GearmanServer, function: str) -> tuple[int, int, int] | None:
    """``(queued, running, workers)`` of ``function`` in the server's admin ``status``."""
    with Admin(server.url, timeout=10) as admin:
        for row in admin.status():
            if row.function == function:
                return (row.queued, row.running, row.workers)
    return None


def handler(job: Job) -> bytes:
    if job.data == b"boom":
        raise ValueError("boom!")
    job.send_data(b"partial")
    job.send_status(1, 2)
    return job.data[::-1]


# -- our client and worker on gear.Server --------------------------------------------------------


def test_client_submits_to_gear_server(gear_server: GearmanServer, function: str) -> None:
    """gear.Server never answers OPTION_REQ: the client used to send one on every connection
    and raise ``RemoteProtocolError`` at the JOB_CREATED that followed, the job created."""
    with Client(gear_server.url, timeout=10) as client:
        handle = client.submit_background(function, b"one")
        assert handle.startswith(b"H:")
        assert queued(gear_server, function) == (1, 0, 0)  # exactly one job: no duplicate
        status = client.get_status(handle)
        assert (status.handle, status.known, status.running) == (handle, True, False)
        handles = client.submit_background_many([(function, b"%d" % i) for i in range(20)])
        assert len(set(handles)) == 20
        assert queued(gear_server, function) == (21, 0, 0)
        unknown = client.get_status(b"H:127.0.0.1:999999")
        assert not unknown.known


def test_client_and_worker_on_gear_server(
    gear_server: GearmanServer, function: str, running_worker: Any
) -> None:
    worker = Worker(gear_server.url, client_id="jw-on-gear")
    worker.register(function, handler)
    worker.register(function + "-x", handler, exceptions=True)
    running_worker(worker)
    with Client(gear_server.url, timeout=10) as client:
        handle = client.submit_background(function, b"background")
        updates: list[Any] = []
        assert client.submit(function, b"hello", on_update=updates.append) == b"olleh"
        assert [type(u) for u in updates] == [pk.WorkData, pk.WorkStatus]
        assert updates[1].numerator == 1 and updates[1].denominator == 2
        wait_until(lambda: not client.get_status(handle).known, what="the background job ran")
        with pytest.raises(JobFailed) as failed:
            client.submit(function, b"boom")
        assert failed.value.warning == b"ValueError: boom!"
        # gear.Server passes WORK_EXCEPTION to every client, option or not
        with pytest.raises(JobException) as info:
            client.submit(function + "-x", b"boom")
        assert info.value.data == b"ValueError: boom!"
        assert client.submit_many([(function, b"ab"), (function, b"cd")]) == [b"ba", b"dc"]
    with Client(gear_server.url, timeout=10, exceptions=True) as client:
        with pytest.raises(JobException):
            client.submit(function + "-x", b"boom")
        assert client.submit(function, b"xyz") == b"zyx"


def test_asking_for_exceptions_on_gear_server(gear_server: GearmanServer, function: str) -> None:
    """Asked for, the option goes unanswered: the next reply answers the next request, and the
    JOB_CREATED reaches the submit that made the job."""
    with Client(gear_server.url, timeout=10, exceptions=True) as client:
        handle = client.submit_background(function, b"one")
        assert queued(gear_server, function) == (1, 0, 0)
        assert client.get_status(handle).known
        assert len(client.submit_background_many([(function, b"x")] * 5)) == 5
        assert queued(gear_server, function) == (6, 0, 0)


@pytest.mark.anyio
async def test_async_client_and_worker_on_gear_server(
    gear_server: GearmanServer, function: str
) -> None:
    async def reverse(job: Any) -> bytes:
        if job.data == b"boom":
            raise ValueError("boom!")
        return bytes(job.data[::-1])

    worker = AsyncWorker(gear_server.url)
    worker.register(function, reverse)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        for exceptions in (False, True):
            async with AsyncClient(gear_server.url, timeout=10, exceptions=exceptions) as client:
                handle = await client.submit_background(function, b"bg")
                assert (await client.get_status(handle)).handle == handle
                assert await client.submit(function, b"abc") == b"cba"
                with pytest.raises(JobFailed):
                    await client.submit(function, b"boom")
                job = await client.start(function, b"started")
                assert await job.result() == b"detrats"
        worker.stop()


def test_requests_gear_server_ignores_time_out_and_the_client_goes_on(
    gear_server: GearmanServer, function: str
) -> None:
    """ECHO_REQ, GET_STATUS_UNIQUE and SUBMIT_JOB_EPOCH get no answer from gear.Server: the
    call times out (it never hangs) and the next call works."""
    with Client(gear_server.url, timeout=0.5) as client:
        with pytest.raises(OperationTimeout):
            client.echo(b"ping")
        assert client.submit_background(function, b"a").startswith(b"H:")
        with pytest.raises(OperationTimeout):
            client.get_status_unique("u-1")
        assert client.submit_background(function, b"b").startswith(b"H:")
        with pytest.raises(OperationTimeout):
            client.submit_background(function, b"later", at=time.time() + 3600)
        assert client.submit_background(function, b"c").startswith(b"H:")
    assert queued(gear_server, function) == (3, 0, 0)  # the epoch job was never made


@pytest.mark.anyio
async def test_async_client_goes_on_after_a_request_gear_server_ignores(
    gear_server: GearmanServer, function: str
) -> None:
    """The async client keeps a timed-out request's place in the connection's FIFO (its late
    answer is dropped); gear.Server never sends that answer, so the next one was taken for it:
    ``RemoteProtocolError`` on the next submit, whose job the server had made. Now a timed-out
    request that some servers ignore closes the connection."""
    async with AsyncClient(gear_server.url, timeout=0.5) as client:
        with pytest.raises(OperationTimeout):
            await client.echo(b"ping")
        assert (await client.submit_background(function, b"a")).startswith(b"H:")
        with pytest.raises(OperationTimeout):
            await client.submit_background(function, b"later", at=time.time() + 3600)
        assert (await client.submit_background(function, b"b")).startswith(b"H:")
        with pytest.raises(OperationTimeout):
            await client.get_status_unique("u-1")
        assert (await client.submit_background(function, b"c")).startswith(b"H:")
    assert queued(gear_server, function) == (3, 0, 0)


@pytest.mark.anyio
async def test_a_worker_lost_mid_job_on_gear_server_fails_the_job(
    gear_server: GearmanServer, function: str
) -> None:
    """gear.Server tells the client with a WORK_FAIL that has request magic (``\\0REQ``): it
    used to poison the client's connection (``bad magic``) and every job on it."""
    async with AsyncClient(gear_server.url, timeout=10) as client:
        job = await client.start(function, b"z")
        other = await client.start(function + "-other", b"y")
        with socket.create_connection(gear_server.address, timeout=10) as sock:
            worker = Connection()
            sock.sendall(worker.send(pk.CanDo(function.encode()))
                         + worker.send(pk.GrabJobUniq()))
            events: list[Any] = []
            while not events:
                worker.receive_data(sock.recv(65536))
                events += iter(worker.next_event, NEED_DATA)
            assert isinstance(events[0].reply, pk.JobAssignUniq)
        with pytest.raises(JobFailed):  # the worker is gone: gear fails the job
            await job.result()
        assert (await client.get_status(other.handle)).known  # the connection still works


def test_worker_timeout_registration_is_ignored_by_gear_server(
    gear_server: GearmanServer, function: str, running_worker: Any
) -> None:
    """gear.Server ignores CAN_DO_TIMEOUT: a function registered with ``timeout=`` gets no
    jobs there (docs/gearman.md); one registered without it does."""
    worker = Worker(gear_server.url, client_id="jw-timeouts")
    worker.register(function + "-t", handler, timeout=60)
    worker.register(function, handler)  # after the other: once it is listed, both were read
    running_worker(worker)
    with Admin(gear_server.url, timeout=10) as admin:
        def listed() -> list[str] | None:
            for row in admin.workers():
                if row.client_id == "jw-timeouts" and function in row.functions:
                    return list(row.functions)
            return None

        wait_until(listed, what="the worker's CAN_DO is listed")
        assert listed() == [function]


def test_grab_all_worker_stops_on_gear_server(
    gear_server: GearmanServer, function: str, running_worker: Any
) -> None:
    """gear.Server never answers GRAB_JOB_ALL: the worker waits for that answer, and stop()
    used to leave ``run()`` waiting forever."""
    worker = Worker(gear_server.url, client_id="jw-grab-all", grab_all=True)
    worker.register(function, handler)
    running_worker(worker)  # the fixture stops it and checks that run() returned
    with Admin(gear_server.url, timeout=10) as admin:
        wait_until(lambda: any(row.client_id == "jw-grab-all" and function in row.functions
                               for row in admin.workers()), what="the worker registered")
    with Client(gear_server.url, timeout=10) as client:
        client.submit_background(function, b"never grabbed")
    assert worker.stats.grabbed == 0


# -- gear's client and worker on the bundled server and gearmand ---------------------------------


@pytest.fixture
def gear_client(gearman_server: GearmanServer) -> Iterator[Any]:
    client = need_gear().Client("gear-client")
    client.addServer("127.0.0.1", gearman_server.port)
    client.waitForServer(10)
    yield client
    client.shutdown()


def gear_job(client: Any, function: str, data: bytes, *, background: bool = False) -> Any:
    job = gear.Job(function.encode(), data)
    client.submitJob(job, background=background, timeout=10)
    if not background:
        wait_until(lambda: job.complete, what=f"gear's job {data!r} completed")
    return job


def test_gear_client_with_our_worker(
    gearman_server: GearmanServer, function: str, gear_client: Any, running_worker: Any
) -> None:
    seen: list[bytes] = []

    def record(job: Job) -> bytes:
        seen.append(job.data)
        return handler(job)

    worker = Worker(gearman_server.url, client_id="jw-for-gear")
    worker.register(function, record)
    worker.register(function + "-x", handler, exceptions=True)
    running_worker(worker)
    job = gear_job(gear_client, function, b"hello")
    assert (job.failure, job.data) == (False, [b"partial", b"olleh"])
    assert (job.numerator, job.denominator) == (b"1", b"2")
    job = gear_job(gear_client, function, b"boom")  # WORK_WARNING, then WORK_FAIL
    assert (job.complete, job.failure, job.warning) == (True, True, True)
    background = gear_job(gear_client, function, b"in the background", background=True)
    assert background.handle
    wait_until(lambda: b"in the background" in seen, what="our worker ran gear's background job")
    assert gear_client.setOption("exceptions")  # gear asks, as our client may
    job = gear_job(gear_client, function + "-x", b"boom")
    assert (job.failure, job.exception) == (True, b"ValueError: boom!")


@pytest.fixture
def gear_worker(gearman_server: GearmanServer, function: str) -> Iterator[Any]:
    """gear's ``Worker`` for ``function``: ``ok`` data is reversed (after WORK_DATA and
    WORK_STATUS), ``fail`` fails, ``exc`` sends WORK_EXCEPTION ``boom``."""
    worker = need_gear().Worker("gear-worker")
    worker.addServer("127.0.0.1", gearman_server.port)
    worker.waitForServer(10)
    worker.registerFunction(function)

    def serve() -> None:
        while True:
            try:
                job = worker.getJob()
            except gear.InterruptedError:  # shutdown()
                return
            if job.arguments == b"fail":
                job.sendWorkFail()
            elif job.arguments == b"exc":
                job.sendWorkException(b"boom")
            else:
                job.sendWorkData(b"partial")
                job.sendWorkStatus(3, 4)
                job.sendWorkComplete(job.arguments[::-1])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield worker
    worker.shutdown()
    thread.join(10)
    assert not thread.is_alive()


def test_our_client_with_gear_worker(
    gearman_server: GearmanServer, function: str, gear_worker: Any
) -> None:
    with Client(gearman_server.url, timeout=10) as client:
        updates: list[Any] = []
        assert client.submit(function, b"hello", on_update=updates.append) == b"olleh"
        assert [type(u) for u in updates] == [pk.WorkData, pk.WorkStatus]
        with pytest.raises(JobFailed):
            client.submit(function, b"fail")
        # no option asked: gearmand turns WORK_EXCEPTION into a WORK_FAIL (with a NUL after
        # the handle), the bundled server into a clean one: a failure either way
        with pytest.raises(JobFailed):
            client.submit(function, b"exc")
        handle = client.submit_background(function, b"bg")
        wait_until(lambda: not client.get_status(handle).known, what="gear's worker ran it")
    with Client(gearman_server.url, timeout=10, exceptions=True) as client:
        with pytest.raises(JobException) as info:
            client.submit(function, b"exc")
        assert info.value.data == b"boom"
        assert client.submit(function, b"abc") == b"cba"
