"""The bundled server over real sockets: the transcript byte for byte, framing, robustness."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import uuid

import anyio
import pytest

from workq_client.server import run_server, serve

from .conftest import WorkqServer, start_workq_server
from .test_core import EXCHANGES

TIME_RE = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def recv_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def exchange(sock: socket.socket, send: bytes, expect_len: int) -> bytes:
    sock.sendall(send)
    return recv_exactly(sock, expect_len)


def new_id() -> str:
    return str(uuid.uuid4())


def test_replays_the_transcript_byte_for_byte(fresh_workq_server: WorkqServer) -> None:
    sock = fresh_workq_server.connect()
    for ex in EXCHANGES:
        send, want = ex["send"].encode("latin-1"), ex["recv"].encode("latin-1")
        if ex["note"].startswith("wrong arg count"):
            # The deliberate difference: the payload is discarded, so only the first error.
            want = want.split(b"\r\n")[0] + b"\r\n"
        if want == b"<EOF>":
            sock.sendall(send)
            assert recv_until_closed(sock) == b""
            continue
        got = exchange(sock, send, len(want))
        # Timestamps are the server's own (created, started); the rest is byte-identical.
        assert TIME_RE.sub(b"T", got) == TIME_RE.sub(b"T", want), ex["note"]
    sock.close()


def test_pipelined_adds_in_one_write(workq_server: WorkqServer, qname: str) -> None:
    sock = workq_server.connect()
    n = 500
    batch = b"".join(b"add %s %s 1000 60000 1\r\nx\r\n" % (new_id().encode(), qname.encode())
                     for _ in range(n))
    want = b"+OK\r\n" * n + b"+OK 1\r\n%s 2\r\nready-len %d\r\nscheduled-len 0\r\n" % (
        qname.encode(), n)
    assert exchange(sock, batch + b"inspect queue %s\r\n" % qname.encode(), len(want)) == want


def test_rejected_payload_commands_never_desync(workq_server: WorkqServer, qname: str) -> None:
    sock = workq_server.connect()
    too_big = 1_048_577
    sock.sendall(b"add %s %s 1000 1000 %d\r\n" % (new_id().encode(), qname.encode(), too_big)
                 + b"i" * too_big + b"\r\ninspect server\r\n")
    reply = recv_exactly(sock, len(b"-CLIENT-ERROR Invalid payload size\r\n+OK 1\r\n"))
    assert reply.startswith(b"-CLIENT-ERROR Invalid payload size\r\n+OK 1\r\n")
    sock.close()
    sock = workq_server.connect()
    sock.sendall(b"complete %s 5\r\nhello\r\ninspect server\r\n" % new_id().encode())
    assert recv_exactly(sock, 20).startswith(b"-NOT-FOUND\r\n+OK 1\r\nse")
    sock.close()


def test_garbage_does_not_crash_the_server(workq_server: WorkqServer) -> None:
    for junk in [b"\x00\xff" * 500 + b"\r\n", b"\r\n" * 50, b"x" * 100_000,
                 b"add\r\n", b"lease\r\n", b"inspect jobs\r\n", b"-\r\n", b"- - -x= -=y\r\n"]:
        sock = workq_server.connect()
        sock.sendall(junk)
        sock.shutdown(socket.SHUT_WR)
        recv_until_closed(sock)
        sock.close()
    sock = workq_server.connect()
    assert exchange(sock, b"inspect server\r\n", 7).startswith(b"+OK 1\r\n")


def test_half_close_answers_a_waiting_lease_and_hands_it_no_job(
    workq_server: WorkqServer, qname: str
) -> None:
    sock = workq_server.connect()
    sock.sendall(b"lease %s 60000\r\n" % qname.encode())
    time.sleep(0.1)
    sock.shutdown(socket.SHUT_WR)
    assert recv_until_closed(sock) == b"-TIMEOUT\r\n"
    other = workq_server.connect()
    job_id = new_id().encode()
    assert exchange(other, b"add %s %s 1000 60000 0\r\n\r\n" % (job_id, qname.encode()),
                    5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s 2\r\nready-len 1\r\nscheduled-len 0\r\n" % qname.encode()
    assert exchange(other, b"inspect queue %s\r\n" % qname.encode(), len(want)) == want


def test_blocking_commands_after_a_half_close_are_answered_at_once(
    workq_server: WorkqServer, qname: str
) -> None:
    sock = workq_server.connect()
    job_id = new_id().encode()
    sock.sendall(b"lease %s 60000\r\nresult %s 60000\r\nrun %s %s 1000 60000 0\r\n\r\n"
                 % (qname.encode(), job_id, job_id, qname.encode()))
    sock.shutdown(socket.SHUT_WR)
    # (the socket's 10 s timeout would fail this if the server waited out the 60 s)
    assert recv_until_closed(sock) == b"-TIMEOUT\r\n-NOT-FOUND\r\n-TIMEOUT\r\n"


def test_blocking_lease_is_answered_by_another_connection(
    workq_server: WorkqServer, qname: str
) -> None:
    worker, producer = workq_server.connect(), workq_server.connect()
    worker.sendall(b"lease other %s 5000\r\n" % qname.encode())
    time.sleep(0.1)
    job_id = new_id().encode()
    assert exchange(producer, b"add %s %s 1000 60000 4\r\na\r\nb\r\n" % (job_id, qname.encode()),
                    5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s %s 1000 4\r\na\r\nb\r\n" % (job_id, qname.encode())
    assert recv_exactly(worker, len(want)) == want


def test_deleting_a_job_a_run_waits_on(workq_server: WorkqServer, qname: str) -> None:
    runner, admin = workq_server.connect(), workq_server.connect()
    job_id = new_id().encode()
    runner.sendall(b"run %s %s 1000 5000 1\r\nx\r\n" % (job_id, qname.encode()))
    time.sleep(0.1)
    assert exchange(admin, b"delete %s\r\n" % job_id, 5) == b"+OK\r\n"
    assert recv_exactly(runner, 12) == b"-NOT-FOUND\r\n"
    assert exchange(runner, b"inspect server\r\n", 7).startswith(b"+OK 1\r\n")


def test_run_with_a_worker_over_sockets(workq_server: WorkqServer, qname: str) -> None:
    runner, worker = workq_server.connect(), workq_server.connect()
    job_id = new_id().encode()
    runner.sendall(b"run %s %s 1000 5000 2\r\nin\r\n" % (job_id, qname.encode()))
    leased = exchange(worker, b"lease %s 5000\r\n" % qname.encode(), 9 + len(job_id) + 30)
    assert leased.startswith(b"+OK 1\r\n%s %s 1000 2\r\nin\r\n" % (job_id, qname.encode()))
    assert exchange(worker, b"complete %s 3\r\nout\r\n" % job_id, 5) == b"+OK\r\n"
    want = b"+OK 1\r\n%s 1 3\r\nout\r\n" % job_id
    assert recv_exactly(runner, len(want)) == want


def test_commands_behind_a_blocking_one_wait_their_turn(
    workq_server: WorkqServer, qname: str
) -> None:
    sock = workq_server.connect()
    sock.sendall(b"lease %s 200\r\ninspect queue %s\r\n" % (qname.encode(), qname.encode()))
    assert recv_exactly(sock, 10 + 12) == b"-TIMEOUT\r\n-NOT-FOUND\r\n"


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
    sock.sendall(b"lease a 60000\r\n")
    time.sleep(0.1)
    server.stop()
    assert server.proc.returncode == 0
    assert recv_until_closed(sock) == b""


def test_run_server_in_process() -> None:
    with run_server() as server:
        assert server.url.startswith("workq://127.0.0.1:")
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            sock.sendall(b"inspect queues 0 10\r\n")
            assert recv_exactly(sock, 7) == b"+OK 0\r\n"


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
