"""Gearman server fixtures: every test that takes ``gearman_server`` runs against the bundled
server and the real gearmand, both started as subprocesses with gearmand-style flags on a free
loopback port. With JOBWIRE_REQUIRE_REAL_SERVERS=1 a missing gearmand fails instead of skipping."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import REQUIRE_REAL, free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class GearmanServer:
    """A running server process: ``kind`` is "bundled" or "gearmand"."""

    kind: str
    proc: subprocess.Popen[bytes]
    port: int
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"gearman://{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def stop(self) -> None:
        stop_process(self.proc)


def gearmand_binary() -> str | None:
    return shutil.which("gearmand") or (
        "/usr/sbin/gearmand" if os.path.exists("/usr/sbin/gearmand") else None
    )


def need(binary: str | None, what: str) -> str:
    if binary is None:
        message = f"{what} is not installed (apt-get install -y gearman-job-server gearman-tools)"
        if REQUIRE_REAL:
            pytest.fail(message + " and JOBWIRE_REQUIRE_REAL_SERVERS=1")
        pytest.skip(message)
    return binary


def start_gearman(
    kind: str, port: int | None = None, *, allow_shutdown: bool = False, extra: Sequence[str] = ()
) -> GearmanServer:
    """Start a server of ``kind``. For the bundled one, ``allow_shutdown`` turns the admin
    ``shutdown`` command on and ``extra`` adds command-line flags."""
    port = port or free_port()
    if kind == "bundled":
        args = [sys.executable, "-m", "gearman_client.server", "-L", "127.0.0.1", "-p", str(port),
                "--job-handle-prefix=H:vm", *(["--allow-shutdown"] if allow_shutdown else []),
                *extra]
    else:
        binary = need(gearmand_binary(), "gearmand")
        args = [binary, "--listen=127.0.0.1", f"--port={port}", "--log-file=none",
                "--threads=0", "--job-handle-prefix=H:vm"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{kind} exited with {proc.returncode}: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return GearmanServer(kind, proc, port)
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"{kind} did not start listening")


GEARMAN_KINDS = ["bundled", pytest.param("gearmand", marks=pytest.mark.real_server)]


@pytest.fixture(scope="session", params=GEARMAN_KINDS)
def gearman_server(request: pytest.FixtureRequest) -> Iterator[GearmanServer]:
    """A server shared by the session (use a fresh ``function`` name per test)."""
    srv = start_gearman(request.param)
    yield srv
    srv.stop()


@pytest.fixture(params=GEARMAN_KINDS)
def fresh_gearman(request: pytest.FixtureRequest) -> Iterator[GearmanServer]:
    """A server of its own (for tests that look at server-wide lists); the bundled one takes
    the admin ``shutdown`` command (``--allow-shutdown``)."""
    srv = start_gearman(request.param, allow_shutdown=True)
    yield srv
    srv.stop()


@pytest.fixture
def function() -> str:
    """A function name no other test uses."""
    return f"f-{uuid.uuid4().hex[:12]}"
