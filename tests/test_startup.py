"""A bundled server answers a client that connects the moment its port accepts, correctly,
on its first command and on a pipelined opening burst; and ``import jobwire`` imports only its
table of names (every package loads its names lazily, so a server imports no client, worker,
serializer or back-off code). The servers listen before they import anyio and the server
(``tests/beanstalk/test_start.py`` checks that); ``benchmarks/startup.py`` measures
spawn-to-first-reply. Nothing here is timed.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
from dataclasses import dataclass

import pytest

from tests.waiting import wait_until

#: Generous bound on any single wait, so that a broken server fails the test instead of
#: hanging it (not a timing assertion: nothing checks how long a start takes).
HANG = 60.0


@dataclass(frozen=True)
class Server:
    module: str
    flags: tuple[str, ...]  #: the flags for port {port}
    first: bytes  #: the first command a client sends
    reply: bytes  #: its whole reply on a fresh server
    burst: bytes  #: a first connection's usual opening, pipelined
    burst_reply: bytes

    def command(self, port: int) -> list[str]:
        return ["-m", self.module, *(f.format(port=port) for f in self.flags)]


_ECHO = b"\0REQ" + struct.pack(">II", 16, 4) + b"ping"
_ECHOED = b"\0RES" + struct.pack(">II", 17, 4) + b"ping"
_JOB_ID = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"

SERVERS = {
    "beanstalk": Server(
        "beanstalk_client.server", ("-l", "127.0.0.1", "-p", "{port}"),
        b"list-tube-used\r\n", b"USING default\r\n",
        b"use t\r\nput 0 0 60 5\r\nhello\r\nwatch t\r\nreserve-with-timeout 0\r\ndelete 1\r\n",
        b"USING t\r\nINSERTED 1\r\nWATCHING 2\r\nRESERVED 1 5\r\nhello\r\nDELETED\r\n",
    ),
    "gearman": Server(
        "gearman_client.server",
        ("-L", "127.0.0.1", "-p", "{port}", "--job-handle-prefix", "H:t"),
        _ECHO, _ECHOED,
        _ECHO + b"\0REQ" + struct.pack(">II", 18, 11) + b"fn\0u1\0hello",  # SUBMIT_JOB_BG
        _ECHOED + b"\0RES" + struct.pack(">II", 8, 5) + b"H:t:1",  # JOB_CREATED
    ),
    "workq": Server(
        "workq_client.server", ("-listen", "127.0.0.1:{port}"),
        f"add {_JOB_ID} q 60000 3600000 5\r\nhello\r\n".encode(), b"+OK\r\n",
        f"add {_JOB_ID} q 60000 3600000 5\r\nhello\r\ndelete {_JOB_ID}\r\n".encode(),
        b"+OK\r\n+OK\r\n",
    ),
}
PARAMS = pytest.mark.parametrize("name", list(SERVERS))


def _receive(sock: socket.socket, size: int) -> bytes:
    """Read until ``size`` bytes came or the server closed the connection."""
    sock.settimeout(HANG)
    got = b""
    while len(got) < size:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@PARAMS
def test_a_client_that_connects_as_the_port_opens_gets_correct_replies(name: str) -> None:
    """The unmodified entry point, as a test suite spawns it: connect as soon as the port
    accepts (retrying only while it refuses), send a first connection's usual opening
    pipelined, and get every reply right. Correctness only: nothing here is timed."""
    server = SERVERS[name]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, *server.command(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def connected() -> socket.socket:
            assert proc.poll() is None, proc.communicate()[1]
            return socket.create_connection(("127.0.0.1", port), timeout=HANG)

        # a 1 ms poll interval while the port refuses, to connect as it opens; nothing is timed
        sock = wait_until(connected, HANG, "the server to listen",
                          ignoring=(ConnectionRefusedError,), interval=0.001)
        with sock:
            sock.sendall(server.burst)
            got = _receive(sock, len(server.burst_reply))
        assert got == server.burst_reply
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)
    assert proc.returncode == 0


def test_importing_jobwire_imports_only_its_table_of_names() -> None:
    """``import jobwire`` (which every protocol package and every bundled server does first)
    loads none of what its names need: before the fix it imported the back-off, address,
    serializer and error modules, and dataclasses, inspect and json with them."""
    code = (
        "import sys; before = set(sys.modules); import jobwire; "
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('jobwire')), "
        "sorted(m for m in ('dataclasses', 'inspect', 'json', 'random', 'urllib.parse') "
        "if m in set(sys.modules) - before))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=HANG)
    assert out.stdout.strip() == "['jobwire', 'jobwire._lazy', 'jobwire._version'] []"


def test_jobwire_names_load_on_use_and_submodules_stay_reachable() -> None:
    """The public names still import from ``jobwire`` (the same objects as in their modules),
    and ``import jobwire`` still reaches its submodules as attributes, as it did when it
    imported them."""
    code = (
        "import jobwire, jobwire.errors as e, jobwire.serializers as s, jobwire._url as u; "
        "from jobwire import *; "
        "assert JobwireError is e.JobwireError and SerializationError is s.SerializationError; "
        "assert TCPAddress is u.TCPAddress and set(jobwire.__all__) <= set(dir(jobwire)); "
        "import subprocess; "
        "code = 'import jobwire; print(jobwire.errors.__name__, jobwire.serializers.__name__)'; "
        "print(subprocess.run([__import__('sys').executable, '-c', code], "
        "capture_output=True, text=True, check=True).stdout.strip())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=HANG)
    assert out.stdout.strip() == "jobwire.errors jobwire.serializers"
