"""The blocking Client against the bundled server (a subprocess) and misbehaving servers."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from jobwire.errors import (
    ConnectFailed,
    ConnectionLost,
    LocalProtocolError,
    OperationTimeout,
    RemoteProtocolError,
)
from tests.conftest import free_port
from workq_client import (
    Client,
    ClientError,
    DuplicateJob,
    JobState,
    NotFound,
    ServerError,
    TimedOut,
    WorkqError,
)
from workq_client.server import run_server

from .conftest import WorkqServer
from .helpers import replies, silent, tcp_server


@pytest.fixture
def client(workq_server: WorkqServer) -> Client:
    with Client(workq_server.host, workq_server.port, timeout=5) as c:
        yield c  # type: ignore[misc]


def test_add_lease_complete_result(client: Client, qname: str) -> None:
    job_id = client.add(qname, b"a\r\nb\r\n", ttr=5, ttl=60, priority=3)
    assert uuid.UUID(job_id).version == 4
    job = client.lease([qname, "other"], wait=1)
    assert (job.job_id, job.name, job.ttr, job.payload) == (job_id, qname, 5.0, b"a\r\nb\r\n")
    client.complete(job_id, b"done\r\n")
    record = client.result(job_id)
    assert (record.job_id, record.success, record.data) == (job_id, True, b"done\r\n")
    with pytest.raises(ClientError, match="Duplicate result"):
        client.fail(job_id, b"again")


def test_given_ids_and_fail(client: Client, qname: str) -> None:
    job_id = str(uuid.uuid4())
    assert client.add(qname, b"", job_id=job_id.upper()) == job_id
    client.lease(qname, wait=1)
    client.fail(job_id, b"it broke")
    record = client.result(job_id, wait=1)
    assert not record.success and record.data == b"it broke"
    client.delete(job_id)
    with pytest.raises(NotFound):
        client.delete(job_id)
    with pytest.raises(NotFound):
        client.result(job_id)


def test_blocking_waits_time_out(client: Client, qname: str) -> None:
    start = time.monotonic()
    with pytest.raises(TimedOut):
        client.lease(qname, wait=0.2)
    assert time.monotonic() - start >= 0.19
    job_id = client.add(qname, b"")
    with pytest.raises(TimedOut):
        client.result(job_id, wait=timedelta(milliseconds=150))
    with pytest.raises(TimedOut):
        client.run(qname + "-nobody", b"", wait=0.1)
    assert client.inspect_queue(qname).ready_len == 1  # the connection is still in step


def test_run_with_a_worker_thread(workq_server: WorkqServer, client: Client, qname: str) -> None:
    def work() -> None:
        with Client(workq_server.host, workq_server.port) as worker:
            for _ in range(2):
                job = worker.lease(qname, wait=5)
                if job.payload == b"bad":
                    worker.fail(job.job_id, b"no")
                else:
                    worker.complete(job.job_id, job.payload[::-1])

    thread = threading.Thread(target=work)
    thread.start()
    record = client.run(qname, b"abc", ttr=5, wait=5)
    assert record.success and record.data == b"cba"
    record = client.run(qname, b"bad", ttr=5, wait=5)
    assert not record.success and record.data == b"no"
    thread.join()


def test_run_times_out_when_the_worker_overruns_its_ttr(
    workq_server: WorkqServer, client: Client, qname: str
) -> None:
    leased = threading.Event()

    def slow_worker() -> None:
        with Client(workq_server.host, workq_server.port) as worker:
            worker.lease(qname, wait=5)
            leased.set()

    thread = threading.Thread(target=slow_worker)
    thread.start()
    with pytest.raises(TimedOut):
        client.run(qname, b"", ttr=0.3, wait=5)
    assert leased.is_set()
    thread.join()


def test_duplicate_job_reconnects_instead_of_reading_a_stray_error(
    client: Client, qname: str
) -> None:
    job_id = client.add(qname, b"x")
    assert client.connections == 1
    with pytest.raises(DuplicateJob) as info:
        client.add(qname, b"x", job_id=job_id)
    assert info.value.text == "Duplicate job" and isinstance(info.value, WorkqError)
    # The next call runs on a new connection and gets its own reply.
    assert client.inspect_job(job_id).state is JobState.NEW
    assert client.connections == 2


def test_inspect_calls_return_typed_records(client: Client, qname: str) -> None:
    payload = b"+OK 1\r\nname x\r\n"
    first = client.add(qname, payload, ttr=2, ttl=30, priority=-4, max_attempts=3, max_fails=2)
    second = client.add(qname, b"", priority=9)
    when = datetime.now(timezone.utc) + timedelta(hours=1)
    later = client.schedule(qname, b"later", when, ttl=60)
    info = client.inspect_job(first)
    assert (info.payload, info.ttr, info.ttl, info.priority) == (payload, 2.0, 30.0, -4)
    assert (info.max_attempts, info.max_fails, info.state) == (3, 2, JobState.NEW)
    assert abs((info.created - datetime.now(timezone.utc)).total_seconds()) < 5
    assert [j.job_id for j in client.inspect_jobs(qname)] == [second, first]
    assert [j.job_id for j in client.inspect_jobs(qname, 1, 1)] == [first]
    scheduled = client.inspect_scheduled_jobs(qname)
    assert [j.job_id for j in scheduled] == [later]
    assert scheduled[0].time == when.replace(microsecond=0) + timedelta(seconds=1)
    queue = client.inspect_queue(qname)
    assert (queue.name, queue.ready_len, queue.scheduled_len) == (qname, 2, 1)
    server = client.inspect_server()
    assert server.active_clients >= 1 and server.evicted_jobs >= 0
    with pytest.raises(NotFound):
        client.inspect_queue(qname + "-none")


def test_inspect_queues_pages_alphabetically(fresh_workq_server: WorkqServer) -> None:
    with Client(fresh_workq_server.host, fresh_workq_server.port) as client:
        for name in ["b", "c", "a"]:
            client.add(name, b"")
        assert [q.name for q in client.inspect_queues()] == ["a", "b", "c"]
        assert [q.name for q in client.inspect_queues(1, 1)] == ["b"]
        assert client.inspect_server().active_clients == 1


def test_scheduled_job_becomes_ready(client: Client, qname: str) -> None:
    when = datetime.now(timezone.utc) + timedelta(seconds=1)
    job_id = client.schedule(qname, b"s", when, ttr=5)
    with pytest.raises(TimedOut):
        client.lease(qname, wait=0)
    job = client.lease(qname, wait=3)
    assert job.job_id == job_id and datetime.now(timezone.utc) >= when.replace(microsecond=0)


def test_ttr_expiry_requeues_and_max_attempts_fails(client: Client, qname: str) -> None:
    job_id = client.add(qname, b"", ttr=0.2, max_attempts=2)
    client.lease(qname, wait=1)
    again = client.lease(qname, wait=2)  # requeued once the first lease's TTR ran out
    assert again.job_id == job_id
    assert client.inspect_job(job_id).attempts == 2
    record = client.result(job_id, wait=2)
    assert not record.success and client.inspect_job(job_id).state is JobState.FAILED


def test_pipelined_add_many(client: Client, qname: str) -> None:
    ids = client.add_many(qname, (b"%d" % i for i in range(1000)), window=128)
    assert len(set(ids)) == 1000
    assert client.inspect_queue(qname).ready_len == 1000
    assert client.lease(qname, wait=0).job_id == ids[0]


def test_invalid_input_is_refused_before_sending(client: Client, qname: str) -> None:
    for call in [
        lambda: client.add("bad name", b""),
        lambda: client.add(qname + "\r\ndelete x", b""),
        lambda: client.add(qname, b"x" * (1024 * 1024 + 1)),
        lambda: client.add(qname, b"", ttr=0),
        lambda: client.add(qname, b"", ttl=timedelta(days=31)),
        lambda: client.add(qname, b"", priority=2**31),
        lambda: client.schedule(qname, b"", datetime(2030, 1, 1)),
        lambda: client.lease([], wait=1),
        lambda: client.result("not-a-uuid"),
        lambda: client.run(qname, b"", wait=-1),
    ]:
        with pytest.raises(LocalProtocolError):
            call()
    assert client.connections == 1
    assert client.add(qname, b"x" * (1024 * 1024))  # exactly 1 MiB is fine


def test_caller_timeout_closes_and_the_next_call_reconnects() -> None:
    with tcp_server(silent) as port, Client("127.0.0.1", port, timeout=0.2) as client:
        with pytest.raises(OperationTimeout):
            client.inspect_server()
        with pytest.raises(OperationTimeout):
            client.lease("q", wait=0.1)
        assert client.connections == 2


@pytest.mark.parametrize(
    ("data", "close", "error"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", False, RemoteProtocolError),
        (b"+OK 1\r\nserver 3\r\nactive-cli", True, ConnectionLost),
        (b"", True, ConnectionLost),
        (b"-SERVER-ERROR disk on fire\r\n", False, ServerError),
        (b"-BOGUS\r\n", False, RemoteProtocolError),
        (b"+OK 1\r\nserver 1\r\nactive-clients 1\r\nevicted-jobs 0\r\nstarted 20", True,
         ConnectionLost),
    ],
)
def test_garbage_and_dying_servers(data: bytes, close: bool, error: type[Exception]) -> None:
    with (
        tcp_server(replies(data, close)) as port,
        Client("127.0.0.1", port, timeout=2) as c,
        pytest.raises(error),
    ):
        c.inspect_server()


def test_connect_failures_and_urls() -> None:
    with pytest.raises(ConnectFailed):
        Client("127.0.0.1", free_port(), timeout=1)
    with run_server() as server, Client.from_url(server.url) as client:
        assert client.inspect_server().active_clients == 1
    with pytest.raises(LocalProtocolError):
        Client.from_url("beanstalk://127.0.0.1:1")


def test_server_restart_reconnects_on_the_next_call() -> None:
    port = free_port()
    with run_server(port=port) as server:
        client = Client(server.host, port, timeout=2)
        client.add("r", b"")
    with pytest.raises(ConnectionLost):
        client.inspect_server()
    with run_server(port=port):
        assert client.inspect_server().active_clients == 1
    client.close()
    with pytest.raises(ConnectionLost):
        client.inspect_server()


def test_sync_and_async_clients_offer_the_same_methods() -> None:
    from workq_client import AsyncClient

    def public(cls: type) -> set[str]:
        return {name for name in dir(cls) if not name.startswith("_")}

    assert public(Client) - {"close"} == public(AsyncClient) - {"aclose", "connect"}
