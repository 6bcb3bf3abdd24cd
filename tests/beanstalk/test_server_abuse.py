"""The bundled beanstalk server under abuse, as a subprocess over raw sockets: clients that
never read, many connections, slow senders, endless lines, garbage, half-closed sockets. After
each, a normal client is answered within 2 s, the server's memory stayed bounded and SIGTERM
still stops it. Then its options (``-c``, ``--idle-timeout``, ``--line-timeout``) and TLS
(``--tls-cert``/``--tls-key``).

beanstalkd has none of these options; its defaults (no connection limit, no timeouts) are the
bundled server's too, so the first tests run without any.
"""

from __future__ import annotations

import random
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from beanstalk_client.server import run_server

from ..conftest import BeanstalkServer, start_server
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
from ..tlsrelay import Certs, make_certs


def address(server: BeanstalkServer) -> tuple[str, int]:
    return (server.host, server.port)


def answered(server: BeanstalkServer) -> bool:
    """A normal client connects and gets its answer within 2 s."""
    try:
        with socket.create_connection(address(server), timeout=ANSWER_WITHIN) as sock:
            sock.sendall(b"list-tube-used\r\n")
            return sock.recv(64) == b"USING default\r\n"
    except OSError:
        return False


def connections(server: BeanstalkServer) -> int:
    """``current-connections`` from ``stats``, not counting the connection that asks."""
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(b"stats\r\n")
        data = b""
        while data.count(b"\r\n") < 2 or not data.endswith(b"\r\n"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    for line in data.decode().splitlines():
        if line.startswith("current-connections:"):
            return int(line.split(":")[1]) - 1
    raise AssertionError(data)


@pytest.fixture
def bundled() -> Iterator[BeanstalkServer]:
    server = start_server("bundled", max_job_size=65535)
    assert answered(server)  # serving (not only listening) before the abuse starts
    yield server
    server.stop()


def put_big_job(server: BeanstalkServer) -> None:
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(b"put 0 0 60 65535\r\n" + b"x" * 65535 + b"\r\n")
        assert sock.recv(64) == b"INSERTED 1\r\n"


# -- abuse, with beanstalkd's defaults ----------------------------------------------------------

def test_a_client_that_never_reads_its_replies_cannot_grow_the_server(
    bundled: BeanstalkServer,
) -> None:
    """Each ``peek 1`` is answered with the 65,535-byte job: 8 bytes in, 64 KiB out. Without
    back-pressure one 256 KiB read made 2 GB of replies."""
    put_big_job(bundled)
    flood, peak = flood_unread(address(bundled), b"peek 1\r\n", bundled.proc.pid)
    with flood:
        assert peak < RSS_BOUND_MB
        assert answered(bundled)
    assert stops_on_sigterm(bundled.proc)


def test_a_thousand_concurrent_connections(bundled: BeanstalkServer) -> None:
    raise_fd_limit(4096)
    with open_sockets(address(bundled), 1000, send=b"use t\r\n") as socks:
        for sock in socks[::50]:
            assert sock.recv(64) == b"USING t\r\n"
        assert answered(bundled)
        assert wait_until(lambda: connections(bundled) == 1000)
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert wait_until(lambda: connections(bundled) == 0)
    assert stops_on_sigterm(bundled.proc)


def test_out_of_file_descriptors_the_server_waits_and_serves_on() -> None:
    """At its limit of open files (EMFILE) the server keeps serving its connections and accepts
    the others once some close; nothing crashes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))  # the server inherits it
    try:
        server = start_server("bundled")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        with open_sockets(address(server), 100, send=b"use t\r\n") as socks:
            socks[0].settimeout(5)
            assert socks[0].recv(64) == b"USING t\r\n"  # among the first: served
            time.sleep(0.3)
            assert server.proc.poll() is None
            waiting = socks[-1]  # accepted only once file descriptors are free
            for sock in socks[1:-1]:
                sock.close()
            waiting.settimeout(5)
            assert waiting.recv(64) == b"USING t\r\n"
            socks[0].sendall(b"list-tube-used\r\n")
            assert socks[0].recv(64) == b"USING t\r\n"
        assert wait_until(lambda: answered(server))
        assert stops_on_sigterm(server.proc)
    finally:
        server.stop()


@pytest.mark.slow
def test_ten_thousand_connects_in_a_row(bundled: BeanstalkServer) -> None:
    with socket.create_connection(address(bundled), timeout=ANSWER_WITHIN) as client:
        for i in range(10_000):
            with socket.create_connection(address(bundled), timeout=5) as sock:
                if i % 2:
                    sock.sendall(b"use t\r\n")
        client.sendall(b"list-tube-used\r\n")  # a connected client is answered at once
        assert client.recv(64) == b"USING default\r\n"
    # a new one waits its turn in the accept queue, behind what is left of the 10,000
    assert wait_until(lambda: answered(bundled), 10)
    assert wait_until(lambda: connections(bundled) == 0)
    assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_slowloris_does_not_starve_a_normal_client(bundled: BeanstalkServer) -> None:
    with open_sockets(address(bundled), 200) as socks:
        for _ in range(3):  # one byte a second on every connection, never a whole line
            for sock in socks:
                sock.send(b"p")
            assert answered(bundled)
            time.sleep(1)
        assert connections(bundled) == 200  # no timeout by default, as beanstalkd
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_a_hundred_megabytes_without_a_newline(bundled: BeanstalkServer) -> None:
    chunk = b"x" * (1 << 20)
    with socket.create_connection(address(bundled), timeout=10) as sock:
        for _ in range(100):
            sock.sendall(chunk)
        sock.sendall(b"\r\nlist-tube-used\r\n")
        # one BAD_FORMAT for the long line (as beanstalkd), then the connection is in step
        reply = b""
        while not reply.endswith(b"USING default\r\n"):
            data = sock.recv(65536)
            assert data, reply
            reply += data
        assert reply == b"BAD_FORMAT\r\nUSING default\r\n"
    assert answered(bundled)
    assert wait_rss_settles(bundled.proc.pid, 0.2) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_garbage_and_half_closed_sockets(bundled: BeanstalkServer) -> None:
    rng = random.Random(7)
    for _ in range(50):
        with socket.create_connection(address(bundled), timeout=5) as sock:
            sock.sendall(rng.randbytes(rng.randrange(1, 5000)))
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_server(sock, 5)  # answered, then closed: nothing left to serve
    with open_sockets(address(bundled), 100, send=b"reserve\r\n") as socks:
        for sock in socks:  # a waiting reserve on a half-closed socket: TIMED_OUT, closed
            sock.shutdown(socket.SHUT_WR)
        for sock in socks:
            sock.settimeout(5)
            assert sock.recv(64) == b"TIMED_OUT\r\n"
    assert answered(bundled)
    assert wait_until(lambda: connections(bundled) == 0)
    assert stops_on_sigterm(bundled.proc)


# -- the options --------------------------------------------------------------------------------

def test_max_connections_closes_one_more_at_once() -> None:
    server = start_server("bundled", args=["-c", "3"])
    try:
        held = [served(server) for _ in range(3)]
        try:
            with socket.create_connection(address(server), timeout=5) as fourth:
                assert closed_by_server(fourth, 2)  # over the limit: closed at once
            held[0].sendall(b"list-tube-used\r\n")  # the three are still served
            assert held[0].recv(64) == b"USING default\r\n"
        finally:
            for sock in held:
                sock.close()
        assert wait_until(lambda: answered(server))  # the slots came back
    finally:
        server.stop()


def served(server: BeanstalkServer) -> socket.socket:
    """A connection the server serves (retried while a connection that just closed still
    holds its slot)."""
    deadline = time.monotonic() + 5
    while True:
        sock = socket.create_connection(address(server), timeout=5)
        try:
            sock.sendall(b"list-tube-used\r\n")
            if sock.recv(64) == b"USING default\r\n":
                return sock
        except OSError:
            pass
        sock.close()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_idle_timeout_closes_idle_connections_only() -> None:
    server = start_server("bundled", args=["--idle-timeout", "0.5"])
    try:
        with socket.create_connection(address(server), timeout=5) as sock:
            sock.sendall(b"put 0 0 60 1\r\nx\r\nput 0 0 60 1\r\ny\r\n")
            assert sock.recv(64) == b"INSERTED 1\r\nINSERTED 2\r\n"
        idle = socket.create_connection(address(server), timeout=5)
        holder = socket.create_connection(address(server), timeout=5)
        waiter = socket.create_connection(address(server), timeout=5)
        with idle, holder, waiter:
            holder.sendall(b"reserve\r\n")
            assert holder.recv(64).startswith(b"RESERVED ")
            holder.sendall(b"reserve\r\n")  # takes the second job: the tube is now empty
            assert holder.recv(64).startswith(b"RESERVED ")
            waiter.sendall(b"reserve\r\n")  # waits
            assert closed_by_server(idle, 3)
            time.sleep(1)  # twice the timeout
            holder.sendall(b"list-tube-used\r\n")  # holds jobs: not idle
            assert holder.recv(64) == b"USING default\r\n"
            with socket.create_connection(address(server), timeout=5) as sock:
                sock.sendall(b"put 0 0 60 1\r\nz\r\n")
                assert sock.recv(64) == b"INSERTED 3\r\n"
            assert waiter.recv(64) == b"RESERVED 3 1\r\nz\r\n"  # its reserve was kept
    finally:
        server.stop()


def test_line_timeout_closes_slow_senders() -> None:
    server = start_server("bundled", args=["--line-timeout", "0.5"])
    try:
        with open_sockets(address(server), 20) as slow, \
                socket.create_connection(address(server), timeout=5) as quiet, \
                socket.create_connection(address(server), timeout=5) as putter:
            putter.sendall(b"put 0 0 60 5\r\nab")  # a body that never comes
            for sock in slow:
                sock.sendall(b"list-tu")
            time.sleep(0.3)
            for sock in slow:
                sock.sendall(b"b")  # a byte now and then does not help
            assert all(closed_by_server(sock, 3) for sock in slow)
            assert closed_by_server(putter, 3)
            quiet.sendall(b"list-tube-used\r\n")  # silent between commands: never closed
            assert quiet.recv(64) == b"USING default\r\n"
        assert answered(server)
    finally:
        server.stop()


def test_limits_must_be_positive() -> None:
    for flags in (["-c", "0"], ["--idle-timeout", "0"], ["--line-timeout", "-1"],
                  ["--tls-key", "k.pem"]):
        proc = subprocess.run(
            [sys.executable, "-m", "beanstalk_client.server", "-p", "0", *flags],
            capture_output=True, timeout=30,
        )
        assert proc.returncode == 2, flags
        assert b"error" in proc.stderr
    for bad in ({"max_connections": 0}, {"idle_timeout": 0.0}, {"line_timeout": float("nan")}):
        with pytest.raises(ValueError), run_server(**bad):  # type: ignore[arg-type]
            pass


# -- TLS ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certs() -> Certs:
    return make_certs()


def test_tls(certs: Certs) -> None:
    server = start_server("bundled", args=certs.server_args)
    try:
        with tls_connect(certs, address(server)) as sock:
            sock.sendall(b"put 0 0 60 5\r\nhello\r\nreserve\r\n")
            data = b""
            while not data.endswith(b"hello\r\n"):
                data += sock.recv(4096)
            assert data == b"INSERTED 1\r\nRESERVED 1 5\r\nhello\r\n"
        with socket.create_connection(address(server), timeout=5) as plain:
            plain.sendall(b"list-tube-used\r\n")  # plaintext on the TLS port: disconnected
            assert closed_by_server(plain, 3)
        with tls_connect(certs, address(server)) as sock:  # and the server serves on
            sock.sendall(b"list-tube-used\r\n")
            assert sock.recv(64) == b"USING default\r\n"
    finally:
        server.stop()


def test_tls_client_that_never_reads_cannot_grow_the_server(certs: Certs) -> None:
    server = start_server("bundled", max_job_size=65535, args=certs.server_args)
    try:
        with tls_connect(certs, address(server)) as sock:
            sock.sendall(b"put 0 0 60 65535\r\n" + b"x" * 65535 + b"\r\n")
            assert sock.recv(64) == b"INSERTED 1\r\n"
        flood, peak = flood_unread(
            address(server), b"peek 1\r\n", server.proc.pid,
            wrap=lambda s: certs.client_context().wrap_socket(s, server_hostname="localhost"),
        )
        with flood:
            assert peak < RSS_BOUND_MB
            with tls_connect(certs, address(server)) as sock:
                sock.sendall(b"list-tube-used\r\n")
                assert sock.recv(64) == b"USING default\r\n"
        assert stops_on_sigterm(server.proc)
    finally:
        server.stop()


def test_tls_handshake_has_a_deadline(certs: Certs) -> None:
    server = start_server("bundled", args=[*certs.server_args, "--line-timeout", "0.5"])
    try:
        with socket.create_connection(address(server), timeout=5) as silent:
            assert closed_by_server(silent, 3)  # never began the handshake
    finally:
        server.stop()


def test_tls_certificate_that_cannot_be_loaded(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    proc = subprocess.run(
        [sys.executable, "-m", "beanstalk_client.server", "-p", "0", "--tls-cert", str(bad)],
        capture_output=True, timeout=30,
    )
    assert proc.returncode == 1
    assert b"TLS certificate" in proc.stderr
