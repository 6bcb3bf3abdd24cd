"""Redis fixtures: a real ``redis-server`` as a subprocess on a free loopback port (and a unix
socket), with no persistence (``--save "" --appendonly no``). With
JOBWIRE_REQUIRE_REAL_SERVERS=1 (CI) a missing ``redis-server`` fails the tests that need it
instead of skipping them.

There is no bundled Redis: qless is Lua scripts inside Redis, so the real server is the only one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import REQUIRE_REAL, _wait_listening, free_port, stop_process


def redis_binary() -> str:
    """The ``redis-server`` binary; skip (or fail under REQUIRE_REAL) when it is missing."""
    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    if binary is None:
        message = "redis-server is not installed (apt-get install -y redis-server)"
        if REQUIRE_REAL:
            pytest.fail(message + " and JOBWIRE_REQUIRE_REAL_SERVERS=1")
        pytest.skip(message)
    return binary


@dataclass
class RedisServer:
    """A running ``redis-server``: TCP on ``host:port`` and a unix socket at ``unix_path``."""

    proc: subprocess.Popen[bytes]
    port: int
    unix_path: str
    args: list[str]
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"

    @property
    def unix_url(self) -> str:
        return f"unix://{self.unix_path}"

    def stop(self) -> None:
        stop_process(self.proc)

    def kill(self) -> None:
        """Die at once (SIGKILL), as a crashed server does."""
        self.proc.kill()
        self.proc.wait()

    def restart(self) -> None:
        """Stop and start again on the same port and socket (a server restart: scripts and
        connections are gone)."""
        self.stop()
        self.proc = _spawn(self.args, self.port)


def _spawn(args: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_listening(proc, (socket.AF_INET, str(port)), "redis-server")
    return proc


def start_redis(*extra: str) -> RedisServer:
    """Start a ``redis-server`` with ``extra`` arguments (e.g. ``"--requirepass", "pw"``)."""
    binary = redis_binary()
    port = free_port()
    folder = tempfile.mkdtemp(prefix="jobwire-redis-")
    unix_path = os.path.join(folder, "redis.sock")
    args = [
        binary, "--bind", "127.0.0.1", "--port", str(port), "--unixsocket", unix_path,
        "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", folder,
        "--logfile", "", "--enable-debug-command", "yes", *extra,
    ]
    return RedisServer(_spawn(args, port), port, unix_path, args)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A server shared by the session (use a fresh ``key`` prefix per test)."""
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture(params=["tcp", "unix"])
def redis_url(request: pytest.FixtureRequest, redis_server: RedisServer) -> str:
    """The shared server's address, over TCP and over its unix socket."""
    return redis_server.url if request.param == "tcp" else redis_server.unix_url


@pytest.fixture
def fresh_redis() -> Iterator[RedisServer]:
    """A server of its own, for tests that kill it, restart it or flush its scripts."""
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def key() -> str:
    """A key prefix no other test uses."""
    return f"jobwire-test:{uuid.uuid4().hex[:16]}:"
