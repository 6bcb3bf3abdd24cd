"""Gearman server fixtures: every test that takes ``gearman_server`` runs against the bundled
server and the real gearmand, both started by :mod:`jobwire.testing` as subprocesses with
gearmand-style flags on a free loopback port. With JOBWIRE_REQUIRE_REAL_SERVERS=1 a missing
gearmand fails instead of skipping. (These fixtures override the plugin's ``gearman_server``,
which gives one server, here.)"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gearman_client import Worker
from jobwire.testing import GearmanServer, gearmand_binary, start_gearman, unavailable

__all__ = ["GEARMAN_KINDS", "ROOT", "GearmanServer", "gearmand_binary", "need", "start_gearman"]

ROOT = Path(__file__).resolve().parents[2]


def need(binary: str | None, what: str) -> str:
    """``binary``, or skip (fail under JOBWIRE_REQUIRE_REAL_SERVERS=1) saying ``what`` is not
    installed."""
    if binary is None:
        unavailable(f"{what} is not installed "
                    "(apt-get install -y gearman-job-server gearman-tools)")
    return binary


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


@pytest.fixture
def running_worker() -> Iterator[Callable[[Worker], Worker]]:
    """Start a :class:`Worker`'s ``run()`` in a thread; stopped and joined after the test."""
    workers: list[tuple[Worker, threading.Thread]] = []

    def start(worker: Worker) -> Worker:
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        workers.append((worker, thread))
        return worker

    yield start
    for worker, thread in workers:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive()
