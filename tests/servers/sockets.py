"""Raw-socket and process probes for the server abuse suite: the server's resident memory,
clients that never read, many connections, and the checks that follow each abuse (a connection
closed by the server, SIGTERM still stops it).

Every server here is a subprocess; its memory is the process's ``VmRSS`` from
``/proc/<pid>/status``.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..tlsrelay import Certs

#: The memory a bundled server may reach under any of the abuses (it idles at 30-40 MB).
RSS_BOUND_MB = 200.0
#: How long a normal client may wait for its answer while the server is abused.
ANSWER_WITHIN = 2.0


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def raise_fd_limit(wanted: int) -> None:
    """Raise this process's soft limit on open files to ``wanted`` (at most the hard limit);
    the servers it spawns afterwards inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def recv_at_least(sock: socket.socket, n: int) -> bytes:
    """What ``sock`` receives until it holds ``n`` bytes or more (fewer if the peer closes)."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def recv_all(sock: socket.socket) -> bytes:
    """Everything ``sock`` receives until the peer closes it."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def flood_unread(
    address: tuple[str, int] | socket.socket,
    request: bytes,
    pid: int,
    *,
    seconds: float = 6.0,
    settle: float = 1.0,
    bound_mb: float = RSS_BOUND_MB,
    wrap: Callable[[socket.socket], socket.socket] | None = None,
) -> tuple[socket.socket, float]:
    """Send ``request`` over and over on one connection (to ``address``, or on a connected
    socket) and never read a reply.

    Stops once the server has taken nothing for ``settle`` seconds (it stopped reading: back
    pressure), after ``seconds``, or as soon as the server's memory passes ``bound_mb`` (so a
    server without back-pressure is caught before it eats the machine). Returns the socket,
    still open and unread (close it when done), and the highest RSS seen in MB.
    """
    if isinstance(address, socket.socket):
        sock = address
    else:
        sock = socket.create_connection(address, timeout=5)
        if wrap is not None:
            sock = wrap(sock)
    sock.setblocking(False)
    data = request * max(1, (1 << 16) // len(request))
    view = memoryview(data)
    peak = rss_mb(pid)
    start = last_progress = time.monotonic()
    while True:
        now = time.monotonic()
        peak = max(peak, rss_mb(pid))
        if peak > bound_mb or now - start > seconds or now - last_progress > settle:
            return sock, peak
        try:
            sent = sock.send(view)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            time.sleep(0.02)  # the pace of the abuse: the send buffer is full
            continue
        except OSError:  # the server closed the connection: nothing more to send
            return sock, max(peak, rss_mb(pid))
        view = view[sent:] or memoryview(data)
        last_progress = now


def peak_rss_over(pid: int, seconds: float) -> float:
    """The server's highest RSS over the next ``seconds``."""
    peak = rss_mb(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)  # a sampling interval: the peak over a span is what is measured
        peak = max(peak, rss_mb(pid))
    return peak


def stops_on_sigterm(proc: subprocess.Popen[bytes] | None, within: float = 5.0) -> bool:
    """Send SIGTERM; True if the process exited with status 0 within ``within`` seconds (it is
    killed otherwise)."""
    assert proc is not None, "a server started by the suite has a process"
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(within) == 0
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


@contextlib.contextmanager
def open_sockets(
    address: tuple[str, int], count: int, *, send: bytes = b""
) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``address``, each having sent ``send``; closed on exit."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(address, timeout=10)
            if send:
                sock.sendall(send)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True if the server closes ``sock`` (end of stream or reset) within ``within`` seconds;
    whatever it sends first is read and dropped."""
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if not sock.recv(1 << 16):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (TimeoutError, BlockingIOError):
        return False
    return False


def tls_connect(
    certs: Certs, address: tuple[str, int], timeout: float = 5.0
) -> ssl.SSLSocket:
    """A TLS connection to a bundled server serving ``certs`` (``tests/tlsrelay.py``: a
    certificate for ``localhost``, checked)."""
    sock = socket.create_connection(address, timeout=timeout)
    return certs.client_context().wrap_socket(sock, server_hostname="localhost")
