"""Workq fixtures: the bundled server as a subprocess on a free loopback port.

The real Workq server is a Go program not packaged for Debian, so the suite runs against the
bundled one, started exactly as the real one would be (``-listen HOST:PORT``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from tests.conftest import free_port, stop_process


@dataclass
class WorkqServer:
    proc: subprocess.Popen[bytes]
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"workq://{self.host}:{self.port}"

    def connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def stop(self) -> None:
        stop_process(self.proc)


def start_workq_server(port: int | None = None, *, args: Sequence[str] = ()) -> WorkqServer:
    """Start the bundled server; ``args`` are more command-line flags (``-c`` ...)."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "workq_client.server", "-listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return WorkqServer(proc, "127.0.0.1", port)
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError("bundled Workq server did not start listening")


@pytest.fixture(scope="session")
def workq_server() -> Iterator[WorkqServer]:
    """A server shared by the session (use a fresh ``qname`` per test)."""
    server = start_workq_server()
    yield server
    server.stop()


@pytest.fixture
def fresh_workq_server() -> Iterator[WorkqServer]:
    """A server of its own, for tests that look at server-wide state."""
    server = start_workq_server()
    yield server
    server.stop()


@pytest.fixture
def qname() -> str:
    """A queue name no other test uses."""
    return f"q-{uuid.uuid4().hex[:16]}"
