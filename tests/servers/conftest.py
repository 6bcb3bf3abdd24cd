"""What the abuse suite needs to know of each bundled server (:class:`ServerProtocol`): how to
start it with flags, a cheap request and its exact reply, how to store a job of N bytes and wait
for one, what it answers a line that is too long, how it counts its connections. The tests in
``test_abuse.py`` take the ``protocol`` fixture and run once per server.

Each server is a subprocess of its own, started as the real server is (beanstalkd's, gearmand's
and the Go Workq server's flags); none of the three real servers has the limits tested here, and
their defaults (no connection limit, no timeouts) are the bundled servers' too.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from beanstalk_client.server import run_server as run_beanstalk
from gearman_client import _packets as pk
from gearman_client.server import run_server as run_gearman
from jobwire.testing import start_beanstalk, start_gearman, start_workq
from workq_client.server import run_server as run_workq

from ..tlsrelay import Certs, make_certs
from .sockets import ANSWER_WITHIN, RSS_BOUND_MB, recv_at_least, rss_mb


class Server(Protocol):
    """A bundled server the suite started: its address and its process."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def proc(self) -> Any: ...
    def stop(self) -> None: ...


def address(server: Server) -> tuple[str, int]:
    return (server.host, server.port)


@dataclass(frozen=True)
class ServerProtocol:
    """One bundled server, as the abuse suite drives it over raw sockets."""

    #: The package name: ``beanstalk``, ``gearman`` or ``workq``.
    name: str
    #: Start the bundled server on a free loopback port with these extra flags.
    start: Callable[[Sequence[str]], Server]
    #: ``python -m MODULE`` runs the server; with ``listen_any`` it listens on a free port.
    module: str
    listen_any: tuple[str, ...]
    #: The in-process server (``with run_server(**options) as server``).
    run_server: Callable[..., AbstractContextManager[Any]]
    #: A cheap request (a new one per call) and its exact reply.
    ping: Callable[[], bytes]
    pong: bytes
    #: Connections the server is serving, not counting the one that asks.
    connections: Callable[[Server], int]
    #: The command that stores a job of N bytes in a queue, before its N bytes; what follows
    #: them; how the server's reply begins.
    job_head: Callable[[str, int], bytes]
    job_tail: bytes
    stored: bytes
    #: A command that waits for a job in a queue; how its reply begins and ends once the
    #: server's first job (of these bytes) arrives.
    job_waiter: Callable[[str], bytes]
    woken: Callable[[bytes], tuple[bytes, bytes]]
    #: Store what the flood asks for in a queue (over a connection to the server); return the
    #: request whose reply is large and the memory the server may reach while the flood is
    #: never read.
    prepare_flood: Callable[[socket.socket, Server, str], tuple[bytes, float]]
    #: Three bytes of a request, for a slowloris sending one a second.
    slow_bytes: bytes
    #: A request cut short: slow senders send all but its last byte, then that byte.
    partial: bytes
    #: The reply to a line over the limit, in step afterwards; ``None``: the server closes.
    too_long: bytes | None
    #: What garbage starts with (so it is taken for this protocol's framing).
    garbage_prefix: bytes
    #: A request sent on a connection then half-closed, and everything the server sends on it
    #: before closing it.
    half_closed: bytes
    half_closed_reply: bytes
    #: The flags that limit the server to 3 connections.
    max_connections_3: tuple[str, ...]
    #: Flags the server's command line refuses (exit status 2).
    bad_flags: tuple[tuple[str, ...], ...]

    def job(self, queue: str, payload: bytes) -> bytes:
        """The command that stores ``payload`` in ``queue``."""
        return self.job_head(queue, len(payload)) + payload + self.job_tail

    def __str__(self) -> str:
        return self.name


def add(protocol: ServerProtocol, sock: socket.socket, queue: str, payload: bytes) -> None:
    """Store a job of ``payload`` in ``queue`` on ``sock``, the reply read and checked."""
    sock.sendall(protocol.job(queue, payload))
    assert recv_at_least(sock, len(protocol.stored)).startswith(protocol.stored)


def answered(protocol: ServerProtocol, server: Server) -> bool:
    """A normal client connects and gets its exact reply within 2 s."""
    try:
        with socket.create_connection(address(server), timeout=ANSWER_WITHIN) as sock:
            sock.sendall(protocol.ping())
            return recv_at_least(sock, len(protocol.pong)) == protocol.pong
    except OSError:
        return False


def _read_until(sock: socket.socket, done: Callable[[bytes], bool]) -> bytes:
    data = b""
    while not done(data):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


# -- beanstalk ----------------------------------------------------------------------------------

def _beanstalk_connections(server: Server) -> int:
    """``current-connections`` from ``stats``."""
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(b"stats\r\n")
        data = _read_until(sock, lambda d: d.count(b"\r\n") >= 2 and d.endswith(b"\r\n"))
    for line in data.decode().splitlines():
        if line.startswith("current-connections:"):
            return int(line.split(":")[1]) - 1
    raise AssertionError(data)


def _beanstalk_flood(sock: socket.socket, server: Server, queue: str) -> tuple[bytes, float]:
    """Each ``peek 1`` is answered with a 65,535-byte job: 8 bytes in, 64 KiB out. Without
    back-pressure one 256 KiB read made 2 GB of replies."""
    add(BEANSTALK, sock, queue, b"x" * 65535)
    return b"peek 1\r\n", RSS_BOUND_MB


BEANSTALK = ServerProtocol(
    name="beanstalk",
    # 64 KiB jobs at most (beanstalkd's default): the flood's job is the largest there is
    start=lambda args: start_beanstalk("bundled", max_job_size=65535, args=args),
    module="beanstalk_client.server",
    listen_any=("-p", "0"),
    run_server=run_beanstalk,
    ping=lambda: b"list-tube-used\r\n",
    pong=b"USING default\r\n",
    connections=_beanstalk_connections,
    # each test has a server of its own: its jobs go to the default tube
    job_head=lambda queue, n: b"put 0 0 60 %d\r\n" % n,
    job_tail=b"\r\n",
    stored=b"INSERTED ",
    job_waiter=lambda queue: b"reserve\r\n",
    woken=lambda payload: (b"RESERVED 1 %d\r\n%s\r\n" % (len(payload), payload), b""),
    prepare_flood=_beanstalk_flood,
    slow_bytes=b"ppp",
    partial=b"list-tub",
    too_long=b"BAD_FORMAT\r\n",  # as beanstalkd: one for the long line, then in step
    garbage_prefix=b"",
    half_closed=b"reserve\r\n",  # a waiting reserve on a half-closed socket ends at once
    half_closed_reply=b"TIMED_OUT\r\n",
    max_connections_3=("-c", "3"),
    bad_flags=(("-c", "0"), ("--idle-timeout", "0"), ("--line-timeout", "-1"),
               ("--tls-key", "k.pem")),
)


# -- Gearman ------------------------------------------------------------------------------------

ECHO = pk.encode_packet(pk.EchoReq(b"ping"), pk.REQ)
ECHOED = pk.encode_packet(pk.EchoRes(b"ping"), pk.RES)


def recv_packet(sock: socket.socket) -> pk.Packet:
    """One Gearman packet from ``sock``."""
    header = recv_exactly(sock, 12)
    assert len(header) == 12, header
    body = recv_exactly(sock, int.from_bytes(header[8:12], "big"))
    return pk.decode_body(int.from_bytes(header[4:8], "big"), body)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock`` (fewer if the peer closes)."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _gearman_connections(server: Server) -> int:
    """Connections the admin ``workers`` command lists."""
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(b"workers\n")
        data = _read_until(sock, lambda d: d == b".\n" or d.endswith(b"\n.\n"))
    return data.count(b"\n") - 2


def _gearman_job_head(function: str, n: int) -> bytes:
    """A background SUBMIT_JOB's packet, before its last ``n`` bytes (the job's data)."""
    packet = pk.encode_packet(pk.SubmitJobBg(function.encode(), b"", b"x" * n), pk.REQ)
    return packet[:len(packet) - n]


def _gearman_waiter(function: str) -> bytes:
    """A worker that can do ``function`` and sleeps: woken with a NOOP when a job comes."""
    return (pk.encode_packet(pk.CanDo(function.encode()), pk.REQ)
            + pk.encode_packet(pk.PreSleep(), pk.REQ))


def _gearman_flood(sock: socket.socket, server: Server, function: str) -> tuple[bytes, float]:
    """Echoes of 4 KiB; without back-pressure the replies piled up in the connection's buffer
    (2.2 GB)."""
    return pk.encode_packet(pk.EchoReq(b"e" * 4096), pk.REQ), RSS_BOUND_MB


GEARMAN = ServerProtocol(
    name="gearman",
    start=lambda args: start_gearman("bundled", extra=args),
    module="gearman_client.server",
    listen_any=("-p", "0"),
    run_server=run_gearman,
    ping=lambda: ECHO,
    pong=ECHOED,
    connections=_gearman_connections,
    job_head=_gearman_job_head,
    job_tail=b"",
    stored=pk.RES + int(pk.PacketType.JOB_CREATED).to_bytes(4, "big"),
    job_waiter=_gearman_waiter,
    woken=lambda payload: (pk.encode_packet(pk.Noop(), pk.RES), b""),
    prepare_flood=_gearman_flood,
    slow_bytes=ECHO[:3],
    partial=ECHO[:6],
    too_long=None,  # an admin line is at most 64 KiB: a longer one closes the connection
    garbage_prefix=b"\0",  # binary packets, not admin lines
    half_closed=ECHO,  # answered, then closed
    half_closed_reply=ECHOED,
    max_connections_3=("-c", "3"),
    bad_flags=(("-c", "0"), ("--idle-timeout", "0"), ("--line-timeout", "-1"),
               ("--tls-key", "k.pem")),
)


# -- Workq --------------------------------------------------------------------------------------

def _workq_ping() -> bytes:
    """A ``delete`` of a job that does not exist: ``-NOT-FOUND``."""
    return b"delete %s\r\n" % str(uuid.uuid4()).encode()


def _workq_connections(server: Server) -> int:
    """``active-clients`` from ``inspect server``."""
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(b"inspect server\r\n")
        data = _read_until(sock, lambda d: b"\r\nstarted " in d and d.endswith(b"\r\n"))
    for line in data.decode().splitlines():
        if line.startswith("active-clients "):
            return int(line.split()[1]) - 1
    raise AssertionError(data)


def _workq_job_head(queue: str, n: int) -> bytes:
    return b"add %s %s 60000 60000 %d\r\n" % (str(uuid.uuid4()).encode(), queue.encode(), n)


def _workq_flood(sock: socket.socket, server: Server, queue: str) -> tuple[bytes, float]:
    """``inspect jobs`` over 20 jobs of 1 MiB: 28 bytes in, 20 MiB out. Without back-pressure
    the server grew to 5.4 GB and then ignored SIGTERM. The jobs themselves hold 20 MiB and
    more: the bound is over what the server holds with them."""
    for _ in range(20):
        add(WORKQ, sock, queue, b"p" * (1 << 20))
    return b"inspect jobs %s 0 20\r\n" % queue.encode(), rss_mb(server.proc.pid) + RSS_BOUND_MB


WORKQ = ServerProtocol(
    name="workq",
    start=lambda args: start_workq(args=args),
    module="workq_client.server",
    listen_any=("-listen", "127.0.0.1:0"),
    run_server=run_workq,
    ping=_workq_ping,
    pong=b"-NOT-FOUND\r\n",
    connections=_workq_connections,
    job_head=_workq_job_head,
    job_tail=b"\r\n",
    stored=b"+OK\r\n",
    job_waiter=lambda queue: b"lease %s 60000\r\n" % queue.encode(),
    woken=lambda payload: (b"+OK 1\r\n", payload + b"\r\n"),
    prepare_flood=_workq_flood,
    slow_bytes=b"iii",
    partial=b"inspe",
    too_long=None,  # a command line is at most 64 KiB: a longer one closes the connection
    garbage_prefix=b"",
    half_closed=b"lease nothing-here 60000\r\n",  # a waiting lease ends at once
    half_closed_reply=b"-TIMEOUT\r\n",
    max_connections_3=("-max-connections", "3"),  # Go-style, as -listen
    bad_flags=(("-c", "0"), ("-idle-timeout", "0"), ("--line-timeout", "-1"),
               ("-tls-key", "k.pem")),
)

PROTOCOLS = [BEANSTALK, GEARMAN, WORKQ]


@pytest.fixture(params=PROTOCOLS, ids=str)
def protocol(request: pytest.FixtureRequest) -> ServerProtocol:
    """Each bundled server's description in turn."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def bundled(protocol: ServerProtocol) -> Iterator[Server]:
    """The protocol's bundled server with its defaults, serving (not only listening)."""
    server = protocol.start(())
    assert answered(protocol, server)
    yield server
    server.stop()


@pytest.fixture
def queue() -> str:
    """A queue (Gearman: function) name no other test uses."""
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def certs() -> Certs:
    return make_certs()
