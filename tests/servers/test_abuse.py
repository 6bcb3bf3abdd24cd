"""The bundled servers under abuse, each as a subprocess over raw sockets: clients that never
read, many connections, connect storms, slowloris, endless lines, garbage, half-closed sockets,
running out of file descriptors. After each, a normal client is answered within 2 s, the server's
memory stayed bounded and SIGTERM still stops it. Then the options the real servers lack (a
connection limit, ``--idle-timeout``, ``--line-timeout``) and TLS (``--tls-cert``/``--tls-key``).

Each shared test runs once per server (``conftest.py`` describes them); the tests for one
protocol only follow, after them.
"""

from __future__ import annotations

import os
import random
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gearman_client import _packets as pk
from jobwire.testing import free_port, start_beanstalk, start_gearman, stop_process

from ..tlsrelay import Certs
from ..waiting import wait_until
from .conftest import (
    GEARMAN,
    Server,
    ServerProtocol,
    add,
    address,
    answered,
    recv_exactly,
    recv_packet,
)
from .sockets import (
    ANSWER_WITHIN,
    RSS_BOUND_MB,
    closed_by_server,
    flood_unread,
    open_sockets,
    peak_rss_over,
    raise_fd_limit,
    recv_all,
    recv_at_least,
    rss_mb,
    stops_on_sigterm,
    tls_connect,
)


def pinged(protocol: ServerProtocol, sock: socket.socket) -> bool:
    """``sock`` is answered its ping with the exact reply."""
    sock.sendall(protocol.ping())
    return recv_at_least(sock, len(protocol.pong)) == protocol.pong


def served(protocol: ServerProtocol, server: Server) -> socket.socket:
    """A connection the server serves (retried while a connection that just closed still
    holds its slot)."""

    def attempt() -> socket.socket | None:
        sock = socket.create_connection(address(server), timeout=5)
        try:
            if pinged(protocol, sock):
                return sock
        except OSError:
            pass
        sock.close()
        return None

    sock = wait_until(attempt, 5, "a connection the server serves")
    assert sock is not None
    return sock


def assert_woken(protocol: ServerProtocol, waiter: socket.socket, payload: bytes) -> None:
    """``waiter``, waiting for a job, gets the server's first job, of ``payload``."""
    head, tail = protocol.woken(payload)
    data = b""
    while len(data) < len(head) + len(tail) or not data.endswith(tail):
        chunk = waiter.recv(65536)
        assert chunk, data
        data += chunk
    assert data.startswith(head), data


def idle_timeouts_pass(server: Server, count: int = 2) -> None:
    """``count`` idle timeouts pass on the server's own clock: a connection that says nothing
    is closed, ``count`` times in a row."""
    for _ in range(count):
        with socket.create_connection(address(server), timeout=5) as idle:
            assert closed_by_server(idle, 3)


def open_files(pid: int) -> int:
    """The files process ``pid`` has open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


# -- abuse, with the real servers' defaults -----------------------------------------------------

def test_a_client_that_never_reads_its_replies_cannot_grow_the_server(
    protocol: ServerProtocol, bundled: Server, queue: str
) -> None:
    """Small requests with large replies (``prepare_flood`` says which), never read."""
    with socket.create_connection(address(bundled), timeout=5) as sock:
        request, bound = protocol.prepare_flood(sock, bundled, queue)
    flood, peak = flood_unread(address(bundled), request, bundled.proc.pid, bound_mb=bound)
    with flood:
        assert peak < bound
        assert answered(protocol, bundled)
    assert stops_on_sigterm(bundled.proc)


def test_a_thousand_concurrent_connections(protocol: ServerProtocol, bundled: Server) -> None:
    raise_fd_limit(4096)
    with open_sockets(address(bundled), 1000, send=protocol.ping()) as socks:
        for sock in socks[::50]:
            assert recv_at_least(sock, len(protocol.pong)) == protocol.pong
        assert answered(protocol, bundled)
        wait_until(lambda: protocol.connections(bundled) == 1000, what="1000 connections")
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    wait_until(lambda: protocol.connections(bundled) == 0, what="every connection closed")
    assert stops_on_sigterm(bundled.proc)


def test_out_of_file_descriptors_the_server_waits_and_serves_on(
    protocol: ServerProtocol,
) -> None:
    """At its limit of open files (EMFILE) the server keeps serving its connections and accepts
    the others once some close; nothing crashes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))  # the server inherits it
    try:
        server = protocol.start(())
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        with open_sockets(address(server), 100, send=protocol.ping()) as socks:
            socks[0].settimeout(5)
            assert recv_at_least(socks[0], len(protocol.pong)) == protocol.pong  # served
            wait_until(lambda: open_files(server.proc.pid) >= 64,
                       what="the server at its limit of open files")
            assert server.proc.poll() is None
            waiting = socks[-1]  # accepted only once file descriptors are free
            for sock in socks[1:-1]:
                sock.close()
            waiting.settimeout(5)
            assert recv_at_least(waiting, len(protocol.pong)) == protocol.pong
            assert pinged(protocol, socks[0])
        wait_until(lambda: answered(protocol, server), what="a new client answered")
        assert stops_on_sigterm(server.proc)
    finally:
        server.stop()


@pytest.mark.slow
def test_ten_thousand_connects_in_a_row(protocol: ServerProtocol, bundled: Server) -> None:
    request = protocol.ping()
    with socket.create_connection(address(bundled), timeout=ANSWER_WITHIN) as client:
        for i in range(10_000):
            with socket.create_connection(address(bundled), timeout=5) as sock:
                if i % 2:
                    sock.sendall(request)
        assert pinged(protocol, client)  # a connected client is answered at once
    # a new one waits its turn in the accept queue, behind what is left of the 10,000
    wait_until(lambda: answered(protocol, bundled), 10, "a new client answered")
    wait_until(lambda: protocol.connections(bundled) == 0, what="every connection closed")
    assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_slowloris_does_not_starve_a_normal_client(
    protocol: ServerProtocol, bundled: Server
) -> None:
    with open_sockets(address(bundled), 200) as socks:
        for byte in protocol.slow_bytes:  # one byte a second on every connection, never a
            for sock in socks:            # whole request
                sock.send(bytes([byte]))
            assert answered(protocol, bundled)
            time.sleep(1)  # the abuse's pace, not a wait
        assert protocol.connections(bundled) == 200  # no timeout by default, as the real ones
        assert rss_mb(bundled.proc.pid) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_a_hundred_megabytes_without_a_newline(protocol: ServerProtocol, bundled: Server) -> None:
    chunk = b"x" * (1 << 20)
    with socket.create_connection(address(bundled), timeout=10) as sock:
        if protocol.too_long is None:  # the line is over 64 KiB: the server closes
            with pytest.raises(OSError):  # reset once the server closed
                for _ in range(100):
                    sock.sendall(chunk)
        else:  # one reply for the long line, then the connection is in step
            for _ in range(100):
                sock.sendall(chunk)
            sock.sendall(b"\r\n" + protocol.ping())
            reply = b""
            while not reply.endswith(protocol.pong):
                data = sock.recv(65536)
                assert data, reply
                reply += data
            assert reply == protocol.too_long + protocol.pong
    assert answered(protocol, bundled)
    assert peak_rss_over(bundled.proc.pid, 0.2) < RSS_BOUND_MB
    assert stops_on_sigterm(bundled.proc)


def test_garbage_and_half_closed_sockets(protocol: ServerProtocol, bundled: Server) -> None:
    rng = random.Random(7)
    for _ in range(50):
        with socket.create_connection(address(bundled), timeout=5) as sock:
            sock.sendall(protocol.garbage_prefix + rng.randbytes(rng.randrange(1, 5000)))
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_server(sock, 5)  # answered, then closed: nothing left to serve
    with open_sockets(address(bundled), 100, send=protocol.half_closed) as socks:
        for sock in socks:  # half-closed after a request: answered, then closed
            sock.shutdown(socket.SHUT_WR)
        for sock in socks:
            sock.settimeout(5)
            assert recv_all(sock) == protocol.half_closed_reply
    assert answered(protocol, bundled)
    wait_until(lambda: protocol.connections(bundled) == 0, what="every connection closed")
    assert stops_on_sigterm(bundled.proc)


# -- the options --------------------------------------------------------------------------------

def test_max_connections_closes_one_more_at_once(protocol: ServerProtocol) -> None:
    server = protocol.start(protocol.max_connections_3)
    try:
        held = [served(protocol, server) for _ in range(3)]
        try:
            with socket.create_connection(address(server), timeout=5) as fourth:
                assert closed_by_server(fourth, 2)  # over the limit: closed at once
            assert pinged(protocol, held[0])  # the three are still served
        finally:
            for sock in held:
                sock.close()
        wait_until(lambda: answered(protocol, server), what="the slots came back")
    finally:
        server.stop()


def test_idle_timeout_closes_idle_connections_only(protocol: ServerProtocol, queue: str) -> None:
    """A connection waiting for a job (beanstalk's ``reserve``, a Gearman worker's
    ``PRE_SLEEP``, Workq's ``lease``) is not idle: it keeps its wait."""
    server = protocol.start(("--idle-timeout", "0.5"))
    try:
        idle = socket.create_connection(address(server), timeout=5)
        waiter = socket.create_connection(address(server), timeout=5)
        with idle, waiter:
            waiter.sendall(protocol.job_waiter(queue))  # waits
            assert closed_by_server(idle, 3)
            idle_timeouts_pass(server)  # twice the timeout, on the server's clock
            with socket.create_connection(address(server), timeout=5) as sock:
                add(protocol, sock, queue, b"job")
            assert_woken(protocol, waiter, b"job")  # its wait was kept
    finally:
        server.stop()


def test_line_timeout_closes_slow_senders(protocol: ServerProtocol, queue: str) -> None:
    server = protocol.start(("--line-timeout", "0.5"))
    try:
        with open_sockets(address(server), 20) as slow, \
                socket.create_connection(address(server), timeout=5) as quiet, \
                socket.create_connection(address(server), timeout=5) as storer:
            storer.sendall(protocol.job_head(queue, 5) + b"ab")  # a body that never comes
            for sock in slow:
                sock.sendall(protocol.partial[:-1])
            time.sleep(0.3)  # the abuse's pace, not a wait
            for sock in slow:
                sock.sendall(protocol.partial[-1:])  # a byte now and then does not help
            assert all(closed_by_server(sock, 3) for sock in slow)
            assert closed_by_server(storer, 3)
            assert pinged(protocol, quiet)  # silent between requests: never closed
        assert answered(protocol, server)
    finally:
        server.stop()


def test_limits_must_be_positive(protocol: ServerProtocol) -> None:
    for flags in protocol.bad_flags:
        proc = subprocess.run(
            [sys.executable, "-m", protocol.module, *protocol.listen_any, *flags],
            capture_output=True, timeout=30,
        )
        assert proc.returncode == 2, flags
        assert b"error" in proc.stderr
    for bad in ({"max_connections": 0}, {"idle_timeout": 0.0}, {"line_timeout": float("nan")}):
        with pytest.raises(ValueError), protocol.run_server(**bad):
            pass


# -- TLS ------------------------------------------------------------------------------------------

def test_tls(protocol: ServerProtocol, certs: Certs, queue: str) -> None:
    server = protocol.start(certs.server_args)
    try:
        with tls_connect(certs, address(server)) as waiter:
            waiter.sendall(protocol.job_waiter(queue))
            with tls_connect(certs, address(server)) as sock:
                add(protocol, sock, queue, b"hello")
            assert_woken(protocol, waiter, b"hello")
        with socket.create_connection(address(server), timeout=5) as plain:
            plain.sendall(protocol.ping())  # plaintext on the TLS port: disconnected
            assert closed_by_server(plain, 3)
        with tls_connect(certs, address(server)) as sock:  # and the server serves on
            assert pinged(protocol, sock)
    finally:
        server.stop()


def test_tls_client_that_never_reads_cannot_grow_the_server(
    protocol: ServerProtocol, certs: Certs, queue: str
) -> None:
    server = protocol.start(certs.server_args)
    try:
        with tls_connect(certs, address(server)) as sock:
            request, bound = protocol.prepare_flood(sock, server, queue)
        flood, peak = flood_unread(
            address(server), request, server.proc.pid, bound_mb=bound,
            wrap=lambda s: certs.client_context().wrap_socket(s, server_hostname="localhost"),
        )
        with flood:
            assert peak < bound
            with tls_connect(certs, address(server)) as sock:
                assert pinged(protocol, sock)
        assert stops_on_sigterm(server.proc)
    finally:
        server.stop()


def test_tls_handshake_has_a_deadline(protocol: ServerProtocol, certs: Certs) -> None:
    server = protocol.start((*certs.server_args, "--line-timeout", "0.5"))
    try:
        with socket.create_connection(address(server), timeout=5) as silent:
            assert closed_by_server(silent, 3)  # never began the handshake
    finally:
        server.stop()


def test_tls_certificate_that_cannot_be_loaded(protocol: ServerProtocol, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    proc = subprocess.run(
        [sys.executable, "-m", protocol.module, *protocol.listen_any, "--tls-cert", str(bad)],
        capture_output=True, timeout=30,
    )
    assert proc.returncode == 1
    assert b"TLS certificate" in proc.stderr


# -- beanstalk only -------------------------------------------------------------------------------

def test_beanstalk_idle_timeout_spares_a_connection_holding_jobs() -> None:
    """A connection holding reserved jobs is not idle, even when it says nothing."""
    server = start_beanstalk("bundled", args=["--idle-timeout", "0.5"])
    try:
        with socket.create_connection(address(server), timeout=5) as sock:
            sock.sendall(b"put 0 0 60 1\r\nx\r\nput 0 0 60 1\r\ny\r\n")
            inserted = b"INSERTED 1\r\nINSERTED 2\r\n"
            assert recv_at_least(sock, len(inserted)) == inserted
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
            idle_timeouts_pass(server)  # twice the timeout, on the server's clock
            holder.sendall(b"list-tube-used\r\n")  # holds jobs: not idle
            assert holder.recv(64) == b"USING default\r\n"
            with socket.create_connection(address(server), timeout=5) as sock:
                sock.sendall(b"put 0 0 60 1\r\nz\r\n")
                assert sock.recv(64) == b"INSERTED 3\r\n"
            reserved = b"RESERVED 3 1\r\nz\r\n"
            assert recv_at_least(waiter, len(reserved)) == reserved  # its reserve was kept
    finally:
        server.stop()


# -- Gearman only ---------------------------------------------------------------------------------

def admin(server: Server, line: bytes) -> bytes:
    """The reply to one Gearman admin ``line`` (up to its newline, or until closed)."""
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(line)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def test_gearman_client_that_never_reads_its_job_updates_cannot_grow_the_server(
    queue: str,
) -> None:
    """A worker's WORK_DATA go out at the pace the client reads them: the worker's
    connection is not read meanwhile, so neither buffer grows."""
    server: Server = start_gearman("bundled")
    name = queue.encode()
    try:
        with socket.create_connection(address(server), timeout=5) as client, \
                socket.create_connection(address(server), timeout=5) as worker:
            client.sendall(pk.encode_packet(pk.SubmitJob(name, b"", b"x"), pk.REQ))
            created = recv_packet(client)
            assert isinstance(created, pk.JobCreated)
            worker.sendall(pk.encode_packet(pk.CanDo(name), pk.REQ)
                           + pk.encode_packet(pk.GrabJob(), pk.REQ))
            assigned = recv_packet(worker)
            assert isinstance(assigned, pk.JobAssign)
            update = pk.encode_packet(pk.WorkData(created.handle, b"d" * 65536), pk.REQ)
            flood, peak = flood_unread(worker, update, server.proc.pid)
            with flood:  # the client never reads its WORK_DATA
                assert peak < RSS_BOUND_MB
                assert answered(GEARMAN, server)
        assert stops_on_sigterm(server.proc)
    finally:
        server.stop()


def test_gearman_shutdown_is_off_by_default() -> None:
    server = start_gearman("bundled")
    try:
        assert admin(server, b"shutdown\n") == (
            b"ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n")  # gearmand 1.1.20's
        assert admin(server, b"shutdown graceful\n").startswith(b"ERR UNKNOWN_COMMAND")
        assert answered(GEARMAN, server)
        assert server.proc is not None and server.proc.poll() is None
    finally:
        server.stop()


def test_gearman_allow_shutdown() -> None:
    server = start_gearman("bundled", allow_shutdown=True)
    try:
        assert admin(server, b"shutdown\n") == b"OK\n"
        assert server.proc is not None and server.proc.wait(5) == 0
    finally:
        server.stop()


def test_gearman_tls_with_gearmand_flags(certs: Certs) -> None:
    """gearmand's spelling of the TLS flags (``--ssl``, ``--ssl-certificate``, ``--ssl-key``)."""
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
                    sock.sendall(GEARMAN.ping())
                    return recv_exactly(sock, len(GEARMAN.pong)) == GEARMAN.pong
            except OSError:
                return False

        wait_until(echoed, 10, "an echo over TLS")
    finally:
        stop_process(gearmand_style)
