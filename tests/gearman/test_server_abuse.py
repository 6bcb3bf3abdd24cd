"""The bundled Gearman server under abuse, as a subprocess over raw sockets: clients that never
read (their own replies, or the WORK_* a worker sends them), many connections, slow senders,
endless lines, garbage, half-closed sockets. After each, a normal client is answered within
2 s, the server's memory stayed bounded and SIGTERM still stops it. Then its options (``-c``,
``--idle-timeout``, ``--line-timeout``, ``--allow-shutdown``), TLS, and how fast it listens.

gearmand has none of the limits; their defaults (none) are the bundled server's too.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gearman_client import _packets as pk
from gearman_client.server import run_server

from ..conftest import free_port, stop_process
from ..server_abuse import (
    ANSWER_WITHIN,
    RSS_BOUND_MB,
    closed_by_server,
    flood_unread,
    open_sockets,
    raise_fd_limit,
    rss_mb,
    stops_on_sigterm,
    tls_connect,
    wait_rss_settles,
    wait_until,
)
from ..tlsrelay import make_certs
from .conftest import GearmanServer, start_gearman

ECHO = pk.encode_packet(pk.EchoReq(b"ping"), pk.REQ)
ECHOED = pk.encode_packet(pk.EchoRes(b"ping"), pk.RES)


def answered(server: GearmanServer) -> bool:
    """A normal client connects and gets its ECHO_RES within 2 s."""
    try:
        with socket.create_connection(server.address, timeout=ANSWER_WITHIN) as sock:
            sock.sendall(ECHO)
            return recv_exactly(sock, len(ECHOED)) == ECHOED
    except OSError:
        return False


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def recv_packet(sock: socket.socket) -> pk.Packet:
    header = recv_exactly(sock, 12)
    assert len(header) == 12, header
    body = recv_exactly(sock, int.from_bytes(header[8:12], "big"))
    return pk.decode_body(int.from_bytes(header[4:8], "big"), body)


def admin(server: GearmanServer, line: bytes) -> bytes:
    with socket.create_connection(server.address, timeout=5) as sock:
        sock.sendall(line)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def connections(server: GearmanServer) -> int:
    """Connections the ``workers`` command lists, not counting the one that asks."""
    with socket.create_connection(server.address, timeout=5) as sock:
        sock.sendall(b"workers\n")
        data = b""
        while not (data == b".\n" or data.endswith(b"\n.\n")):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    return data.count(b"\n") - 2


@pytest.fixture
def bundled() -> Iterator[GearmanServer]:
    server = start_gearman("bundled")
    assert answered(server)  # serving (not only listening) before the abuse starts
    yield server
    server.stop()


# -- abuse, with gearmand's defaults ------------------------------------------------------------

def test_a_client_that_never_reads_its_echoes_cannot_grow_the_server(
    bundled: GearmanServer,
) -> None:
    """Without back-pressure the replies piled up in the connection's buffer (2.2 GB)."""
    request = pk.encode_packet(pk.EchoReq(b"e" * 4096), pk.REQ)
    flood, peak = flood_unread(bundled.address, request, bundled.proc.pid)
    with flood:
        assert peak < RSS_BOUND_MB
        assert answered(bundled)
    assert stops_on_sigterm(bundled.proc)


def test_a_client_that_never_reads_its_job_updates_cannot_grow_the_server(
    bundled: GearmanServer, function: str
) -> None:
    """A worker's WORK_DATA go out at the pace the client reads them: the worker's
    connection is not read meanwhile, so neither buffer grows."""
    name = function.encode()
    with socket.create_connection(bundled.address, timeout=5) as client, \
            socket.create_connection(bundled.address, timeout=5) as worker:
        client.sendall(pk.encode_packet(pk.SubmitJob(name, b"", b"x"), pk.REQ))
        created = recv_packet(client)
        assert isinstance(created, pk.JobCreated)
        worker.sendall(pk.encode_packet(pk.CanDo(name), pk.REQ)
                       + pk.encode_packet(pk.GrabJob(), pk.REQ))
        assigned = recv_packet(worker)
        assert isinstance(assigned, pk.JobAssign)
        update = pk.encode_packet(pk.WorkData(created.handle, b"d" * 65536), pk.REQ)
        flood, peak = flood_unread(worker, update, bundled.proc.pid)
        with flood:  # the client never reads its WORK_DATA
            assert peak < RSS_BOUND_MB
            assert answered(bundled)
    assert stops_on_sigterm(bundled.proc)


def test_a_thousand_concurrent_connections(bundled: GearmanServer) -> None:
    raise_fd_limit(4096)
    with open_sockets(bundled.address, 1000, send=ECHO) as socks:
        for sock in socks[::50]:
            assert recv_exactly(sock, len(ECHOED)) == ECHOED
        assert answered(bundled)
        assert wait_until(lambda: connections(bundled) == 1000)
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert wait_until(lambda: connections(bundled) == 0)
    assert stops_on_sigterm(bundled.proc)


@pytest.mark.slow
def test_ten_thousand_connects_in_a_row(bundled: GearmanServer) -> None:
    with socket.create_connection(bundled.address, timeout=ANSWER_WITHIN) as client:
        for i in range(10_000):
            with socket.create_connection(bundled.address, timeout=5) as sock:
                if i % 2:
                    sock.sendall(ECHO)
        client.sendall(ECHO)  # a connected client is answered at once
        assert recv_exactly(client, len(ECHOED)) == ECHOED
    # a new one waits its turn in the accept queue, behind what is left of the 10,000
    assert wait_until(lambda: answered(bundled), 10)
    assert wait_until(lambda: connections(bundled) == 0)
    assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_slowloris_does_not_starve_a_normal_client(bundled: GearmanServer) -> None:
    with open_sockets(bundled.address, 200) as socks:
        for byte in ECHO[:3]:  # one byte a second on every connection, never a whole packet
            for sock in socks:
                sock.send(bytes([byte]))
            assert answered(bundled)
            time.sleep(1)
        assert connections(bundled) == 200  # no timeout by default, as gearmand
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_a_hundred_megabytes_without_a_newline(bundled: GearmanServer) -> None:
    """An admin line is at most 64 KiB: a longer one closes the connection."""
    chunk = b"x" * (1 << 20)
    with socket.create_connection(bundled.address, timeout=10) as sock, \
            pytest.raises(OSError):  # reset once the server closed
        for _ in range(100):
            sock.sendall(chunk)
    assert answered(bundled)
    assert wait_rss_settles(bundled.proc.pid, 0.2) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_garbage_and_half_closed_sockets(bundled: GearmanServer) -> None:
    rng = random.Random(7)
    for _ in range(50):
        with socket.create_connection(bundled.address, timeout=5) as sock:
            sock.sendall(b"\0" + rng.randbytes(rng.randrange(1, 5000)))
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_server(sock, 5)
    with open_sockets(bundled.address, 100, send=ECHO) as socks:
        for sock in socks:  # half-closed after a request: answered, then closed
            sock.shutdown(socket.SHUT_WR)
        for sock in socks:
            assert recv_exactly(sock, len(ECHOED) + 1) == ECHOED
    assert answered(bundled)
    assert wait_until(lambda: connections(bundled) == 0)
    assert stops_on_sigterm(bundled.proc)


# -- the options --------------------------------------------------------------------------------

def test_max_connections_closes_one_more_at_once() -> None:
    server = start_gearman("bundled", extra=["-c", "3"])
    try:
        held = [served(server) for _ in range(3)]
        try:
            with socket.create_connection(server.address, timeout=5) as fourth:
                assert closed_by_server(fourth, 2)  # over the limit: closed at once
            held[0].sendall(ECHO)  # the three are still served
            assert recv_exactly(held[0], len(ECHOED)) == ECHOED
        finally:
            for sock in held:
                sock.close()
        assert wait_until(lambda: answered(server))  # the slots came back
    finally:
        server.stop()


def served(server: GearmanServer) -> socket.socket:
    """A connection the server serves (retried while a connection that just closed still
    holds its slot)."""
    deadline = time.monotonic() + 5
    while True:
        sock = socket.create_connection(server.address, timeout=5)
        try:
            sock.sendall(ECHO)
            if recv_exactly(sock, len(ECHOED)) == ECHOED:
                return sock
        except OSError:
            pass
        sock.close()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_idle_timeout_closes_idle_connections_only(function: str) -> None:
    server = start_gearman("bundled", extra=["--idle-timeout", "0.5"])
    name = function.encode()
    try:
        idle = socket.create_connection(server.address, timeout=5)
        sleeper = socket.create_connection(server.address, timeout=5)
        with idle, sleeper:
            sleeper.sendall(pk.encode_packet(pk.CanDo(name), pk.REQ)
                            + pk.encode_packet(pk.PreSleep(), pk.REQ))
            assert closed_by_server(idle, 3)
            time.sleep(1)  # twice the timeout: a sleeping worker is not idle
            with socket.create_connection(server.address, timeout=5) as client:
                client.sendall(pk.encode_packet(pk.SubmitJobBg(name, b"", b"x"), pk.REQ))
                assert isinstance(recv_packet(client), pk.JobCreated)
            assert recv_packet(sleeper) == pk.Noop()
    finally:
        server.stop()


def test_line_timeout_closes_slow_senders() -> None:
    server = start_gearman("bundled", extra=["--line-timeout", "0.5"])
    try:
        with open_sockets(server.address, 20) as slow, \
                socket.create_connection(server.address, timeout=5) as quiet:
            for sock in slow:
                sock.sendall(ECHO[:5])
            time.sleep(0.3)
            for sock in slow:
                sock.sendall(ECHO[5:6])  # a byte now and then does not help
            assert all(closed_by_server(sock, 3) for sock in slow)
            quiet.sendall(ECHO)  # silent between requests: never closed
            assert recv_exactly(quiet, len(ECHOED)) == ECHOED
        assert answered(server)
    finally:
        server.stop()


def test_limits_must_be_positive() -> None:
    for flags in (["-c", "0"], ["--idle-timeout", "0"], ["--line-timeout", "-1"],
                  ["--tls-key", "k.pem"]):
        proc = subprocess.run(
            [sys.executable, "-m", "gearman_client.server", "-p", "0", *flags],
            capture_output=True, timeout=30,
        )
        assert proc.returncode == 2, flags
        assert b"error" in proc.stderr
    for bad in ({"max_connections": 0}, {"idle_timeout": 0.0}, {"line_timeout": float("nan")}):
        with pytest.raises(ValueError), run_server(**bad):  # type: ignore[arg-type]
            pass


def test_shutdown_is_off_by_default() -> None:
    server = start_gearman("bundled")
    try:
        assert admin(server, b"shutdown\n") == (
            b"ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n")  # gearmand 1.1.20's
        assert admin(server, b"shutdown graceful\n").startswith(b"ERR UNKNOWN_COMMAND")
        assert answered(server)
        assert server.proc.poll() is None
    finally:
        server.stop()


def test_allow_shutdown() -> None:
    server = start_gearman("bundled", allow_shutdown=True)
    try:
        assert admin(server, b"shutdown\n") == b"OK\n"
        assert server.proc.wait(5) == 0
    finally:
        server.stop()


# -- TLS ------------------------------------------------------------------------------------------

def test_tls() -> None:
    certs = make_certs()
    server = start_gearman("bundled", extra=certs.server_args)
    try:
        with tls_connect(certs, server.address) as sock:
            sock.sendall(ECHO)
            assert recv_exactly(sock, len(ECHOED)) == ECHOED
        with socket.create_connection(server.address, timeout=5) as plain:
            plain.sendall(ECHO)  # plaintext on the TLS port: disconnected
            assert closed_by_server(plain, 3)
        # gearmand's spelling of the same flags
        port = free_port()
        gearmand_style = subprocess.Popen(
            [sys.executable, "-m", "gearman_client.server", "-L", "127.0.0.1", "-p", str(port),
             "--ssl", "--ssl-certificate", certs.cert_file, "--ssl-key", certs.key_file],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            def echoed() -> bool:
                try:
                    with tls_connect(certs, ("127.0.0.1", port)) as sock:
                        sock.sendall(ECHO)
                        return recv_exactly(sock, len(ECHOED)) == ECHOED
                except OSError:
                    return False

            assert wait_until(echoed, 10)
        finally:
            stop_process(gearmand_style)
    finally:
        server.stop()
