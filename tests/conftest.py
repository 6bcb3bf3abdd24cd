"""Server fixtures: every client test runs against the bundled server and the real one.

Both servers are started the same way, as subprocesses with beanstalkd's own flags on a free
loopback port, so one set of assertions holds for both. With JOBWIRE_REQUIRE_REAL_SERVERS=1
(CI) a missing ``beanstalkd`` binary fails the tests that need it instead of skipping them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REQUIRE_REAL = os.environ.get("JOBWIRE_REQUIRE_REAL_SERVERS") == "1"
#: Byte-exact exchanges recorded from the real servers (tests/transcripts/README.md).
TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts"
BEANSTALKD_TRANSCRIPT = TRANSCRIPTS / "beanstalkd-1.12.jsonl"
BIG = 1024 * 1024  # max-job-size of the shared test servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server process as an operator would (SIGTERM), killing it after 5 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_listening(proc: subprocess.Popen[bytes], connect: tuple[int, str], what: str) -> None:
    family, target = connect
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.connect(target if family == socket.AF_UNIX else ("127.0.0.1", int(target)))
            return
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"{what} did not start listening")


@dataclass
class BeanstalkServer:
    """A running server process: ``kind`` is "bundled" or "beanstalkd"."""

    kind: str
    proc: subprocess.Popen[bytes]
    host: str = "127.0.0.1"
    port: int = 0
    unix_path: str | None = None
    max_job_size: int = 65535
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"unix://{self.unix_path}" if self.unix_path else f"beanstalk://{self.host}:{self.port}"

    def drain(self) -> None:
        """Drain mode, as an operator does it: SIGUSR1."""
        self.proc.send_signal(signal.SIGUSR1)
        time.sleep(0.2)

    def stop(self) -> None:
        stop_process(self.proc)


def server_command(kind: str) -> list[str] | None:
    if kind == "bundled":
        return [sys.executable, "-m", "beanstalk_client.server"]
    binary = shutil.which("beanstalkd") or (
        "/usr/bin/beanstalkd" if os.path.exists("/usr/bin/beanstalkd") else None
    )
    return [binary] if binary else None


def start_server(
    kind: str,
    *,
    max_job_size: int = BIG,
    unix: bool = False,
    port: int | None = None,
    args: Sequence[str] = (),
) -> BeanstalkServer:
    """Start a server of ``kind``; skip (or fail under REQUIRE_REAL) if beanstalkd is missing.
    ``args`` are more command-line flags (the bundled server's own, such as ``-c``)."""
    command = server_command(kind)
    if command is None:
        message = "beanstalkd is not installed (apt-get install -y beanstalkd)"
        if REQUIRE_REAL:
            pytest.fail(message + " and JOBWIRE_REQUIRE_REAL_SERVERS=1")
        pytest.skip(message)
    if unix:
        path = os.path.join(tempfile.mkdtemp(prefix="jobwire-"), "beanstalk.sock")
        argv = [*command, "-l", f"unix:{path}", "-z", str(max_job_size), *args]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_listening(proc, (socket.AF_UNIX, path), kind)
        return BeanstalkServer(kind, proc, unix_path=path, max_job_size=max_job_size)
    port = port or free_port()
    argv = [*command, "-l", "127.0.0.1", "-p", str(port), "-z", str(max_job_size), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_listening(proc, (socket.AF_INET, str(port)), kind)
    return BeanstalkServer(kind, proc, port=port, max_job_size=max_job_size)


SERVER_KINDS = ["bundled", pytest.param("beanstalkd", marks=pytest.mark.real_server)]


@pytest.fixture(scope="session", params=SERVER_KINDS)
def server(request: pytest.FixtureRequest) -> Iterator[BeanstalkServer]:
    """A server shared by the session (use a fresh ``tube`` per test)."""
    srv = start_server(request.param)
    yield srv
    srv.stop()


@pytest.fixture(params=SERVER_KINDS)
def fresh_server(request: pytest.FixtureRequest) -> Iterator[BeanstalkServer]:
    """A server of its own, for tests that change server-wide state (drain mode)."""
    srv = start_server(request.param)
    yield srv
    srv.stop()


@pytest.fixture
def tube() -> str:
    """A tube name no other test uses."""
    return f"t-{uuid.uuid4().hex[:16]}"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
