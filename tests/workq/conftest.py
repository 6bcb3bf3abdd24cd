"""Workq fixtures: the bundled server as a subprocess on a free loopback port, started by
:mod:`jobwire.testing` (whose ``workq_server`` fixture these override here).

The real Workq server is a Go program not packaged for Debian, so the suite runs against the
bundled one, started exactly as the real one would be (``-listen HOST:PORT``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from jobwire.testing import WorkqServer
from jobwire.testing import start_workq as start_workq_server

__all__ = ["WorkqServer", "start_workq_server"]


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
