"""The bundled server over real sockets: the transcript byte for byte, framing, robustness."""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import sys
import time
import uuid

import anyio
import pytest

from jobwire.errors import ConnectionLost
from tests.servers.sockets import recv_all, recv_at_least
from tests.waiting import wait_until
from workq_client import AsyncClient, Client
from workq_client.server import run_server, serve

from .conftest import WorkqServer, start_workq_server
from .helpers import tcp_server
from .test_core import EXCHANGES

TIME_RE = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def inspect_job(sock: socket.socket, job_id: bytes) -> bytes:
    """The ``inspect job`` record of a job (its last line is ``created``)."""
    sock.sendall(b"inspect job %s\r\n" % job_id)
    data = b""
    while not re.search(rb"\r\ncreated [^\r]*\r\n", data):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def exchange(sock: socket.socket, send: bytes, expect_len: int) -> bytes:
    sock.sendall(send)
    return recv_at_least(sock, expect_len)


def new_id() -> str:
    return str(uuid.uuid4())


#: ``inspect server`` keys of the bundled server: connections blocked now in each command.
LEASES, RUNS, RESULTS = "waiting-leases", "waiting-runs", "waiting-results"


def with_waiting_keys(recv: bytes) -> bytes:
    """A transcript reply as the bundled server sends it: in a server record, its own keys
    (the counts of waiting commands: none, in the transcript) come before ``started``."""
    return re.sub(rb"(\r\nserver 2\r\n(?:[a-z-]+ [^\r]*\r\n)*?)(started )",
                  rb"\1waiting-leases 0\r\nwaiting-runs 0\r\nwaiting-results 0\r\n\2", recv)


def waiting(client: Client, key: str) -> int:
    """How many connections the server shows blocked in one command: ``key`` (:data:`LEASES`,
    :data:`RUNS` or :data:`RESULTS`) of its ``inspect server`` record.

    Only the bundled server sends these keys. Workq 0.2.0 shows nothing of a blocked command,
    so the tests that read it are marked ``bundled_workq`` (skipped there, saying why); should
    one run against a server without the key, it fails at once, saying why, rather than falling
    back to a sleep that would pass or fail with the machine's load.
    """
    value = client.inspect_server().extra.get(key)
    if value is None:
        pytest.fail(f"this server's inspect server has no {key!r} key: only the bundled Workq "
                    "server shows its waiting commands, and this test must see one waiting")
    return int(value)


def send_waiting(server: WorkqServer, sock: socket.socket, command: bytes, key: str,
                 outstanding: int = 0) -> int:
    """Send ``command`` (a ``lease``, ``run`` or ``result`` that will block) on ``sock`` and
    return once the server shows it waiting: the count ``key`` then, ``outstanding + 1``.

    ``outstanding``: how many commands of that kind this test already has waiting. The count
    is server-wide and the session's server is shared, so first it waits until the count is
    that many: what an earlier test left waiting (its connections closed) has ended, and can
    only end, never begin, since tests run one at a time. Then the count says exactly when
    this command waits.
    """
    with Client(server.host, server.port, timeout=10) as client:
        wait_until(lambda: waiting(client, key) == outstanding,
                   what=f"{key} at {outstanding}: earlier tests' waits ended")
        sock.sendall(command)
        wait_until(lambda: waiting(client, key) == outstanding + 1,
                   what=f"{key} at {outstanding + 1}: the command waiting")
        return outstanding + 1


def test_replays_the_transcript_byte_for_byte(fresh_workq_server: WorkqServer) -> None:
    sock = fresh_workq_server.connect()
    for ex in EXCHANGES:
        send, want = ex["send"].encode("latin-1"), ex["recv"].encode("latin-1")
        if ex["note"].startswith("wrong arg count") and fresh_workq_server.kind == "bundled":
            # The deliberate difference: the payload is discarded, so only the first error.
            want = want.split(b"\r\n")[0] + b"\r\n"
        if want == b"<EOF>":
            sock.sendall(send)
            assert recv_all(sock) == b""
            continue
        if fresh_workq_server.kind == "bundled":
            want = with_waiting_keys(want)
        got = exchange(sock, send, len(want))
        # Timestamps are the server's own (created, started); the rest is byte-identical.
        assert TIME_RE.sub(b"T", got) == TIME_RE.sub(b"T", want), ex["note"]
    sock.close()


@pytest.mark.bundled_workq(
    "Workq 0.2.0 refuses pipelined data whose CR and LF straddle its 4096-byte read buffer"
)
def test_pipelined_adds_in_one_write(workq_server: WorkqServer, qname: str) -> None:
    sock = workq_server.connect()
    n = 500
    batch = b"".join(b"add %s %s 1000 60000 1\r\nx\r\n" % (new_id().encode(), qname.encode())
                     for _ in range(n))
    want = b"+OK\r\n" * n + b"+OK 1\r\n%s 2\r\nready-len %d\r\nscheduled-len 0\r\n" % (
        qname.encode(), n)
    assert exchange(sock, batch + b"inspect queue %s\r\n" % qname.encode(), len(want)) == want


@pytest.mark.bundled_workq(
    "a deliberate difference: Workq 0.2.0 reads a data block it rejected as a command"
)
def test_rejected_payload_commands_never_desync(workq_server: WorkqServer, qname: str) -> None:
    sock = workq_server.connect()
    too_big = 1_048_577
    sock.sendall(b"add %s %s 1000 1000 %d\r\n" % (new_id().encode(), qname.encode(), too_big)
                 + b"i" * too_big + b"\r\ninspect server\r\n")
    reply = recv_at_least(sock, len(b"-CLIENT-ERROR Invalid payload size\r\n+OK 1\r\n"))
    assert reply.startswith(b"-CLIENT-ERROR Invalid payload size\r\n+OK 1\r\n")
    sock.close()
    sock = workq_server.connect()
    sock.sendall(b"complete %s 5\r\nhello\r\ninspect server\r\n" % new_id().encode())
    assert recv_at_least(sock, 20).startswith(b"-NOT-FOUND\r\n+OK 1\r\nse")
    sock.close()


_PAYLOAD_LINES = {  # a command line of each payload command, its size left as %d
    "add": b"add %s q 60000 3600000 %%d\r\n",
    "schedule": b"schedule %s q 60000 3600000 2099-01-01T00:00:00Z %%d\r\n",
    "run": b"run %s q 60000 1 %%d\r\n",
    "complete": b"complete %s %%d\r\n",
    "fail": b"fail %s %%d\r\n",
}
_ACCEPTED = {"add": b"+OK\r\n", "schedule": b"+OK\r\n", "run": b"-TIMEOUT\r\n",
             "complete": b"-NOT-FOUND\r\n", "fail": b"-NOT-FOUND\r\n"}


@pytest.mark.parametrize("verb", list(_PAYLOAD_LINES))
def test_payload_commands_of_4097_or_8193_bytes_are_refused(
    workq_server: WorkqServer, verb: str
) -> None:
    """As Workq 0.2.0 measured: a command with a data block whose encoded total is 4097 or 8193
    bytes is refused even alone on its connection (its 4096-byte read buffer ends between the
    CR and LF; the LF left over then closes the connection), 4096, 4098 and 12289 bytes are
    not, and one more space after the verb (4098 bytes) is taken as one."""
    for total in (4096, 4097, 4098, 8193, 12289):
        line = _PAYLOAD_LINES[verb] % new_id().encode()
        n = next(n for n in range(total) if len(line % n) + n + 2 == total)
        command = line % n + b"x" * n + b"\r\n"
        sock = workq_server.connect()
        if total in (4097, 8193):
            sock.sendall(command)
            text = b"Invalid result size" if verb == "fail" else b"Invalid payload size"
            assert recv_all(sock) == b"-CLIENT-ERROR %s\r\n" % text, total
            sock.close()
            sock = workq_server.connect()
            spaced = verb.encode() + b" " + command[len(verb):]
            assert exchange(sock, spaced, len(_ACCEPTED[verb])) == _ACCEPTED[verb], total
        else:
            assert exchange(sock, command, len(_ACCEPTED[verb])) == _ACCEPTED[verb], total
        sock.close()


def test_inspect_server_counts_the_commands_waiting_now() -> None:
    """The bundled server's own keys: the connections blocked now in ``lease``, ``run`` and
    ``result``, each counted until it is answered, its connection closes or half-closes."""
    with run_server() as server, Client(server.host, server.port, timeout=10) as client:

        def counts() -> tuple[int, ...]:
            return tuple(waiting(client, key) for key in (LEASES, RUNS, RESULTS))

        assert counts() == (0, 0, 0)
        leaser, runner, waiter, producer = (
            socket.create_connection((server.host, server.port), timeout=10) for _ in range(4))
        job_id = new_id().encode()
        leaser.sendall(b"lease b 60000\r\n")
        runner.sendall(b"run %s c 1000 60000 0\r\n\r\n" % job_id)
        wait_until(lambda: counts() == (1, 1, 0), what="a lease and a run waiting")
        waiter.sendall(b"result %s 60000\r\n" % job_id)
        wait_until(lambda: counts() == (1, 1, 1), what="a result waiting too")
        waiter.close()
        wait_until(lambda: counts() == (1, 1, 0), what="the closed result no longer counted")
        assert exchange(producer, b"add %s b 1000 60000 0\r\n\r\n" % new_id().encode(),
                        5) == b"+OK\r\n"
        assert recv_at_least(leaser, 7).startswith(b"+OK 1\r\n")
        assert counts() == (0, 1, 0)
        runner.shutdown(socket.SHUT_WR)
        assert recv_all(runner) == b"-TIMEOUT\r\n"
        assert counts() == (0, 0, 0)
        for sock in (leaser, runner, producer):
            sock.close()


def test_garbage_does_not_crash_the_server(workq_server: WorkqServer) -> None:
    for junk in [b"\x00\xff" * 500 + b"\r\n", b"\r\n" * 50, b"x" * 100_000,
                 b"add\r\n", b"lease\r\n", b"inspect jobs\r\n", b"-\r\n", b"- - -x= -=y\r\n"]:
        sock = workq_server.connect()
        sock.sendall(junk)
        sock.shutdown(socket.SHUT_WR)
        recv_all(sock)
        sock.close()
    sock = workq_server.connect()
    assert exchange(sock, b"inspect server\r\n", 7).startswith(b"+OK 1\r\n")


@pytest.mark.bundled_workq(
    "a deliberate difference: Workq 0.2.0 does not notice a closed connection while a lease waits"
)
def test_half_close_answers_a_waiting_lease_and_hands_it_no_job(
    workq_server: WorkqServer, qname: str
) -> None:
    sock = workq_server.connect()
    send_waiting(workq_server, sock, b"lease %s 60000\r\n" % qname.encode(), LEASES)
    sock.shutdown(socket.SHUT_WR)
    assert recv_all(sock) == b"-TIMEOUT\r\n"
    other = workq_server.connect()
    job_id = new_id().encode()
    assert exchange(other, b"add %s %s 1000 60000 0\r\n\r\n" % (job_id, qname.encode()),
                    5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s 2\r\nready-len 1\r\nscheduled-len 0\r\n" % qname.encode()
    assert exchange(other, b"inspect queue %s\r\n" % qname.encode(), len(want)) == want


@pytest.mark.bundled_workq(
    "a deliberate difference: Workq 0.2.0 does not notice a closed connection while one waits"
)
def test_blocking_commands_after_a_half_close_are_answered_at_once(
    workq_server: WorkqServer, qname: str
) -> None:
    sock = workq_server.connect()
    job_id = new_id().encode()
    sock.sendall(b"lease %s 60000\r\nresult %s 60000\r\nrun %s %s 1000 60000 0\r\n\r\n"
                 % (qname.encode(), job_id, job_id, qname.encode()))
    sock.shutdown(socket.SHUT_WR)
    # (the socket's 10 s timeout would fail this if the server waited out the 60 s)
    assert recv_all(sock) == b"-TIMEOUT\r\n-NOT-FOUND\r\n-TIMEOUT\r\n"


@pytest.mark.bundled_workq(
    "orders two connections by the bundled server's waiting counts (Workq 0.2.0 shows none)"
)
def test_blocking_lease_is_answered_by_another_connection(
    workq_server: WorkqServer, qname: str
) -> None:
    worker, producer = workq_server.connect(), workq_server.connect()
    send_waiting(workq_server, worker, b"lease other %s 5000\r\n" % qname.encode(), LEASES)
    job_id = new_id().encode()
    assert exchange(producer, b"add %s %s 1000 60000 4\r\na\r\nb\r\n" % (job_id, qname.encode()),
                    5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s %s 1000 4\r\na\r\nb\r\n" % (job_id, qname.encode())
    assert recv_at_least(worker, len(want)) == want


@pytest.mark.bundled_workq(
    "crashes Workq 0.2.0 (nil pointer in Controller.Run when the run's wait ends)"
)
def test_deleting_a_job_a_run_waits_on_keeps_the_server_up(
    workq_server: WorkqServer, qname: str
) -> None:
    """Workq 0.2.0 crashes when that run's wait ends; this server answers the run ``-TIMEOUT``
    then and keeps serving every connection, the run's included."""
    runner, admin = workq_server.connect(), workq_server.connect()
    job_id = new_id().encode()
    send_waiting(workq_server, runner, b"run %s %s 1000 500 1\r\nx\r\n" % (job_id, qname.encode()),
                 RUNS)
    assert exchange(admin, b"delete %s\r\n" % job_id, 5) == b"+OK\r\n"
    start = time.monotonic()
    assert recv_at_least(runner, 10) == b"-TIMEOUT\r\n"
    assert time.monotonic() - start >= 0.3  # at the end of the wait, not at the delete
    assert exchange(runner, b"inspect server\r\n", 7).startswith(b"+OK 1\r\n")
    assert exchange(admin, b"inspect server\r\n", 7).startswith(b"+OK 1\r\n")


@pytest.mark.bundled_workq(
    "orders two connections by the bundled server's waiting counts (Workq 0.2.0 shows none)"
)
def test_deleting_a_job_a_result_waits_on_times_out_at_the_end_of_the_wait(
    workq_server: WorkqServer, qname: str
) -> None:
    waiter, admin = workq_server.connect(), workq_server.connect()
    job_id = new_id().encode()
    assert exchange(admin, b"add %s %s 1000 60000 0\r\n\r\n" % (job_id, qname.encode()),
                    5) == b"+OK\r\n"
    send_waiting(workq_server, waiter, b"result %s 500\r\n" % job_id, RESULTS)
    assert exchange(admin, b"delete %s\r\n" % job_id, 5) == b"+OK\r\n"
    start = time.monotonic()
    assert recv_at_least(waiter, 10) == b"-TIMEOUT\r\n"
    assert time.monotonic() - start >= 0.3


@pytest.mark.bundled_workq(
    "orders two connections by the bundled server's waiting counts (Workq 0.2.0 shows none)"
)
def test_two_result_waits_one_gets_the_result_the_other_times_out(
    workq_server: WorkqServer, qname: str
) -> None:
    first, second, worker = (workq_server.connect() for _ in range(3))
    job_id = new_id().encode()
    assert exchange(worker, b"add %s %s 1000 60000 0\r\n\r\n" % (job_id, qname.encode()),
                    5) == b"+OK\r\n"
    send_waiting(workq_server, first, b"result %s 5000\r\n" % job_id, RESULTS)
    send_waiting(workq_server, second, b"result %s 500\r\n" % job_id, RESULTS, outstanding=1)
    assert exchange(worker, b"complete %s 2\r\nok\r\n" % job_id, 5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s 1 2\r\nok\r\n" % job_id
    assert recv_at_least(first, len(want)) == want
    assert recv_at_least(second, 10) == b"-TIMEOUT\r\n"


def test_run_outlives_a_ttr_overrun_and_succeeds_with_the_late_complete(
    workq_server: WorkqServer, qname: str
) -> None:
    runner, worker = workq_server.connect(), workq_server.connect()
    job_id = new_id().encode()
    runner.sendall(b"run %s %s 200 10000 2\r\nin\r\n" % (job_id, qname.encode()))
    leased = exchange(worker, b"lease %s 5000\r\n" % qname.encode(), 9 + len(job_id) + 29)
    assert leased.startswith(b"+OK 1\r\n%s %s 200 2\r\nin\r\n" % (job_id, qname.encode()))
    # The TTR (200 ms) runs out on the server's clock: the job is requeued (PENDING).
    wait_until(lambda: b"\r\nstate 3\r\n" in inspect_job(worker, job_id),
               what="the job requeued (state 3) when its TTR ran out")
    assert exchange(worker, b"complete %s 4\r\nlate\r\n" % job_id, 5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s 1 4\r\nlate\r\n" % job_id
    assert recv_at_least(runner, len(want)) == want
    assert exchange(worker, b"result %s 0\r\n" % job_id, 12) == b"-NOT-FOUND\r\n"


@pytest.mark.bundled_workq(
    "a deliberate difference: Workq 0.2.0 leases the next job to a lease whose connection closed"
)
def test_a_closed_waiting_lease_is_never_handed_a_job(
    workq_server: WorkqServer, qname: str
) -> None:
    """The deliberate difference: Workq 0.2.0 leases the next job to a waiting lease whose
    connection closed (it stays leased until its TTR); this server never does."""
    for abort in (False, True):
        gone = workq_server.connect()
        send_waiting(workq_server, gone, b"lease %s 60000\r\n" % qname.encode(), LEASES)
        if abort:  # a reset rather than an orderly close
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        gone.close()
        with Client(workq_server.host, workq_server.port, timeout=10) as client:
            wait_until(lambda: waiting(client, LEASES) == 0,
                       what="the server seeing the waiting lease's connection close")
        producer = workq_server.connect()
        job_id = new_id().encode()
        assert exchange(producer, b"add %s %s 1000 60000 0\r\n\r\n" % (job_id, qname.encode()),
                        5) == b"+OK\r\n"
        want = b"+OK 1\r\n%s %s 1000 0\r\n\r\n" % (job_id, qname.encode())
        assert exchange(producer, b"lease %s 1\r\n" % qname.encode(), len(want)) == want
        assert b"\r\nattempts 1\r\n" in inspect_job(producer, job_id)
        producer.close()


@pytest.mark.anyio
async def test_a_server_that_dies_during_a_run_is_reported_as_connection_lost(
    qname: str,
) -> None:
    """What a client sees of Workq 0.2.0's crash (a run whose job was deleted): the connection
    closes under the run. The client says so (ConnectionLost), and the next call reconnects."""

    def crash_on_run(conn: socket.socket) -> None:
        data = b""
        while b"\r\n" not in data:
            data += conn.recv(65536)
        if data.startswith(b"run "):
            conn.close()
            return
        conn.sendall(b"+OK 1\r\n%s 2\r\nready-len 0\r\nscheduled-len 0\r\n" % qname.encode())
        while conn.recv(65536):
            pass

    with tcp_server(crash_on_run) as port:
        async with AsyncClient("127.0.0.1", port, timeout=5) as client:
            with anyio.fail_after(5), pytest.raises(ConnectionLost):
                await client.run(qname, b"x", ttr=1, wait=1)
            assert (await client.inspect_queue(qname)).ready_len == 0
            assert client.connections == 2


def test_run_with_a_worker_over_sockets(workq_server: WorkqServer, qname: str) -> None:
    runner, worker = workq_server.connect(), workq_server.connect()
    job_id = new_id().encode()
    runner.sendall(b"run %s %s 1000 5000 2\r\nin\r\n" % (job_id, qname.encode()))
    leased = exchange(worker, b"lease %s 5000\r\n" % qname.encode(), 9 + len(job_id) + 30)
    assert leased.startswith(b"+OK 1\r\n%s %s 1000 2\r\nin\r\n" % (job_id, qname.encode()))
    assert exchange(worker, b"complete %s 3\r\nout\r\n" % job_id, 5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s 1 3\r\nout\r\n" % job_id
    assert recv_at_least(runner, len(want)) == want


def test_commands_behind_a_blocking_one_wait_their_turn(
    workq_server: WorkqServer, qname: str
) -> None:
    sock = workq_server.connect()
    sock.sendall(b"lease %s 200\r\ninspect queue %s\r\n" % (qname.encode(), qname.encode()))
    # (the lease created the queue, as on Workq 0.2.0)
    want = b"-TIMEOUT\r\n+OK 1\r\n%s 2\r\nready-len 0\r\nscheduled-len 0\r\n" % qname.encode()
    assert recv_at_least(sock, len(want)) == want


def test_cli_rejects_a_bad_listen_flag() -> None:
    for bad in ["nope", "127.0.0.1:99999", "127.0.0.1:x"]:
        proc = subprocess.run([sys.executable, "-m", "workq_client.server", "-listen", bad],
                              capture_output=True, timeout=30)
        assert proc.returncode == 2 and b"-listen" in proc.stderr


def test_cli_reports_a_port_in_use(workq_server: WorkqServer) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "workq_client.server", "-listen", f"127.0.0.1:{workq_server.port}"],
        capture_output=True, timeout=30)
    assert proc.returncode == 1 and b"cannot listen" in proc.stderr


def test_sigterm_stops_the_server_cleanly() -> None:
    server = start_workq_server()
    sock = server.connect()
    assert exchange(sock, b"inspect queues 0 1\r\n", 7) == b"+OK 0\r\n"  # served, not queued
    send_waiting(server, sock, b"lease a 60000\r\n", LEASES)
    server.stop()
    assert server.proc is not None and server.proc.returncode == 0
    assert recv_all(sock) == b""


def test_run_server_in_process() -> None:
    with run_server() as server:
        assert server.url.startswith("workq://127.0.0.1:")
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            sock.sendall(b"inspect queues 0 10\r\n")
            assert recv_at_least(sock, 7) == b"+OK 0\r\n"


@pytest.mark.anyio
async def test_serve_on_each_backend() -> None:
    async with serve() as server:
        stream = await anyio.connect_tcp(server.host, server.port)
        job_id = new_id().encode()
        await stream.send(b"add %s a 1000 1000 0\r\n\r\nresult %s 0\r\n" % (job_id, job_id))
        data = b""
        with anyio.fail_after(5):
            while len(data) < 15:
                data += await stream.receive()
        assert data == b"+OK\r\n-TIMEOUT\r\n"
        await stream.aclose()


def test_listen_flag_parsing() -> None:
    from workq_client.server.__main__ import parse_listen

    assert parse_listen("127.0.0.1:9922") == ("127.0.0.1", 9922)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen(":9922") == ("0.0.0.0", 9922)
    for bad in ("9922", "host:", "host:65536", "host:-1"):
        with pytest.raises(ValueError):
            parse_listen(bad)
