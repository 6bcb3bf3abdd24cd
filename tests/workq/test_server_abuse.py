"""The bundled Workq server under abuse, as a subprocess over raw sockets: clients that never
read, many connections, slow senders, endless lines, garbage, half-closed sockets. After each,
a normal client is answered within 2 s, the server's memory stayed bounded and SIGTERM still
stops it. Then its options (``-c``, ``--idle-timeout``, ``--line-timeout``), TLS, and how fast
it listens.

The Go server has none of the limits; their defaults (none) are the bundled server's too.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from workq_client.server import run_server

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
from .conftest import WorkqServer, start_workq_server

NOT_FOUND = b"-NOT-FOUND\r\n"


def address(server: WorkqServer) -> tuple[str, int]:
    return (server.host, server.port)


def ping() -> bytes:
    return b"delete %s\r\n" % str(uuid.uuid4()).encode()


def answered(server: WorkqServer) -> bool:
    """A normal client connects and gets its answer within 2 s."""
    try:
        with socket.create_connection(address(server), timeout=ANSWER_WITHIN) as sock:
            sock.sendall(ping())
            return sock.recv(64) == NOT_FOUND
    except OSError:
        return False


def connections(server: WorkqServer) -> int:
    """``active-clients`` from ``inspect server``, not counting the connection that asks."""
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(b"inspect server\r\n")
        data = b""
        while b"\r\nstarted " not in data or not data.endswith(b"\r\n"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    for line in data.decode().splitlines():
        if line.startswith("active-clients "):
            return int(line.split()[1]) - 1
    raise AssertionError(data)


def add(sock: socket.socket, queue: str, payload: bytes) -> None:
    job_id = str(uuid.uuid4()).encode()
    sock.sendall(b"add %s %s 60000 60000 %d\r\n%s\r\n" % (job_id, queue.encode(), len(payload),
                                                         payload))
    assert sock.recv(64) == b"+OK\r\n"


@pytest.fixture
def bundled() -> Iterator[WorkqServer]:
    server = start_workq_server()
    assert answered(server)  # serving (not only listening) before the abuse starts
    yield server
    server.stop()


# -- abuse, with the Go server's defaults -------------------------------------------------------

def test_a_client_that_never_reads_its_replies_cannot_grow_the_server(
    bundled: WorkqServer, qname: str
) -> None:
    """``inspect jobs`` over 20 jobs of 1 MiB: 28 bytes in, 20 MiB out. Without back-pressure
    the server grew to 5.4 GB and then ignored SIGTERM."""
    with socket.create_connection(address(bundled), timeout=5) as sock:
        for _ in range(20):
            add(sock, qname, b"p" * (1 << 20))
    before = rss_mb(bundled.proc.pid)
    request = b"inspect jobs %s 0 20\r\n" % qname.encode()
    flood, peak = flood_unread(address(bundled), request, bundled.proc.pid,
                               bound_mb=before + RSS_BOUND_MB)
    with flood:
        assert peak < before + RSS_BOUND_MB  # the jobs themselves hold 20 MiB and more
        assert answered(bundled)
    assert stops_on_sigterm(bundled.proc)


def test_a_thousand_concurrent_connections(bundled: WorkqServer) -> None:
    raise_fd_limit(4096)
    with open_sockets(address(bundled), 1000, send=ping()) as socks:
        for sock in socks[::50]:
            assert sock.recv(64) == NOT_FOUND
        assert answered(bundled)
        assert wait_until(lambda: connections(bundled) == 1000)
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert wait_until(lambda: connections(bundled) == 0)
    assert stops_on_sigterm(bundled.proc)


@pytest.mark.slow
def test_ten_thousand_connects_in_a_row(bundled: WorkqServer) -> None:
    request = ping()
    with socket.create_connection(address(bundled), timeout=ANSWER_WITHIN) as client:
        for i in range(10_000):
            with socket.create_connection(address(bundled), timeout=5) as sock:
                if i % 2:
                    sock.sendall(request)
        client.sendall(ping())  # a connected client is answered at once
        assert client.recv(64) == NOT_FOUND
    # a new one waits its turn in the accept queue, behind what is left of the 10,000
    assert wait_until(lambda: answered(bundled), 10)
    assert wait_until(lambda: connections(bundled) == 0)
    assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_slowloris_does_not_starve_a_normal_client(bundled: WorkqServer) -> None:
    with open_sockets(address(bundled), 200) as socks:
        for _ in range(3):  # one byte a second on every connection, never a whole line
            for sock in socks:
                sock.send(b"i")
            assert answered(bundled)
            time.sleep(1)
        assert connections(bundled) == 200  # no timeout by default, as the Go server
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_a_hundred_megabytes_without_a_newline(bundled: WorkqServer) -> None:
    """A command line is at most 64 KiB: a longer one closes the connection."""
    chunk = b"x" * (1 << 20)
    with socket.create_connection(address(bundled), timeout=10) as sock, \
            pytest.raises(OSError):  # reset once the server closed
        for _ in range(100):
            sock.sendall(chunk)
    assert answered(bundled)
    assert wait_rss_settles(bundled.proc.pid, 0.2) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_garbage_and_half_closed_sockets(bundled: WorkqServer) -> None:
    rng = random.Random(7)
    for _ in range(50):
        with socket.create_connection(address(bundled), timeout=5) as sock:
            sock.sendall(rng.randbytes(rng.randrange(1, 5000)))
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_server(sock, 5)  # answered, then closed
    with open_sockets(address(bundled), 100, send=b"lease nothing-here 60000\r\n") as socks:
        for sock in socks:  # a waiting lease on a half-closed socket: -TIMEOUT, closed
            sock.shutdown(socket.SHUT_WR)
        for sock in socks:
            sock.settimeout(5)
            assert sock.recv(64) == b"-TIMEOUT\r\n"
    assert answered(bundled)
    assert wait_until(lambda: connections(bundled) == 0)
    assert stops_on_sigterm(bundled.proc)


# -- the options --------------------------------------------------------------------------------

def served(server: WorkqServer) -> socket.socket:
    """A connection the server serves (retried while a connection that just closed still
    holds its slot)."""
    deadline = time.monotonic() + 5
    while True:
        sock = socket.create_connection(address(server), timeout=5)
        try:
            sock.sendall(ping())
            if sock.recv(64) == NOT_FOUND:
                return sock
        except OSError:
            pass
        sock.close()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_max_connections_closes_one_more_at_once() -> None:
    server = start_workq_server(args=["-max-connections", "3"])  # Go-style, as -listen
    try:
        held = [served(server) for _ in range(3)]
        try:
            with socket.create_connection(address(server), timeout=5) as fourth:
                assert closed_by_server(fourth, 2)  # over the limit: closed at once
            held[0].sendall(ping())  # the three are still served
            assert held[0].recv(64) == NOT_FOUND
        finally:
            for sock in held:
                sock.close()
        assert wait_until(lambda: answered(server))  # the slots came back
    finally:
        server.stop()


def test_idle_timeout_closes_idle_connections_only(qname: str) -> None:
    server = start_workq_server(args=["--idle-timeout", "0.5"])
    try:
        idle = socket.create_connection(address(server), timeout=5)
        waiter = socket.create_connection(address(server), timeout=5)
        with idle, waiter:
            waiter.sendall(b"lease %s 60000\r\n" % qname.encode())  # waits
            assert closed_by_server(idle, 3)
            time.sleep(1)  # twice the timeout
            with socket.create_connection(address(server), timeout=5) as sock:
                add(sock, qname, b"job")
            assert waiter.recv(256).startswith(b"+OK 1\r\n")  # its lease was kept
    finally:
        server.stop()


def test_line_timeout_closes_slow_senders() -> None:
    server = start_workq_server(args=["--line-timeout", "0.5"])
    try:
        with open_sockets(address(server), 20) as slow, \
                socket.create_connection(address(server), timeout=5) as quiet, \
                socket.create_connection(address(server), timeout=5) as adder:
            adder.sendall(b"add %s q 1000 1000 5\r\nab" % str(uuid.uuid4()).encode())
            for sock in slow:
                sock.sendall(b"insp")
            time.sleep(0.3)
            for sock in slow:
                sock.sendall(b"e")  # a byte now and then does not help
            assert all(closed_by_server(sock, 3) for sock in slow)
            assert closed_by_server(adder, 3)  # a payload that never comes
            quiet.sendall(ping())  # silent between commands: never closed
            assert quiet.recv(64) == NOT_FOUND
        assert answered(server)
    finally:
        server.stop()


def test_limits_must_be_positive() -> None:
    for flags in (["-c", "0"], ["-idle-timeout", "0"], ["--line-timeout", "-1"],
                  ["-tls-key", "k.pem"]):
        proc = subprocess.run(
            [sys.executable, "-m", "workq_client.server", "-listen", "127.0.0.1:0", *flags],
            capture_output=True, timeout=30,
        )
        assert proc.returncode == 2, flags
        assert b"error" in proc.stderr
    for bad in ({"max_connections": 0}, {"idle_timeout": 0.0}, {"line_timeout": float("nan")}):
        with pytest.raises(ValueError), run_server(**bad):  # type: ignore[arg-type]
            pass


# -- TLS ------------------------------------------------------------------------------------------

def test_tls(qname: str) -> None:
    certs = make_certs()
    server = start_workq_server(args=certs.server_args)
    try:
        with tls_connect(certs, address(server)) as sock:
            add(sock, qname, b"over tls")
            sock.sendall(b"lease %s 1000\r\n" % qname.encode())
            data = b""
            while not data.endswith(b"over tls\r\n"):
                data += sock.recv(4096)
            assert data.startswith(b"+OK 1\r\n")
        with socket.create_connection(address(server), timeout=5) as plain:
            plain.sendall(ping())  # plaintext on the TLS port: disconnected
            assert closed_by_server(plain, 3)
    finally:
        server.stop()
