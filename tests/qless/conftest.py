"""Redis fixtures: a real ``redis-server`` as a subprocess on a free loopback port (and a unix
socket), started by :mod:`jobwire.testing` (whose ``redis_server`` fixture these override here),
with no persistence (``--save "" --appendonly no``). With
JOBWIRE_REQUIRE_REAL_SERVERS=1 (CI) a missing ``redis-server`` fails the tests that need it
instead of skipping them.

There is no bundled Redis: qless is Lua scripts inside Redis, so the real server is the only one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from jobwire.testing import RedisServer, redis_binary
from jobwire.testing import spawn_redis as _spawn
from jobwire.testing import start_redis as _start_redis

__all__ = ["RedisServer", "_spawn", "redis_binary", "start_redis"]


def start_redis(*extra: str) -> RedisServer:
    """:func:`jobwire.testing.start_redis` with the ``DEBUG`` command on (the suite's tests use
    it) and ``extra`` arguments (e.g. ``"--requirepass", "pw"``)."""
    return _start_redis("--enable-debug-command", "yes", *extra)


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
