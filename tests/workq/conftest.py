"""Workq fixtures: the server comes from :mod:`jobwire.testing`'s backend, as for any user of
the plugin (``--jobwire-backend``, ``JOBWIRE_BACKEND``; per system ``workq=binary``).

``workq_server`` is the plugin's own fixture (one server for the session); ``fresh_workq_server``
is one of the same backend for a single test. By default that is the bundled server, started as
the real one is (``-listen HOST:PORT``); with ``binary`` it is the ``workq-server`` on ``PATH``
(the Go server has no package: without one the tests skip, saying so).

A test that cannot run against the real Workq 0.2.0 server -- it crashes it, or checks where the
bundled server differs from it on purpose (docs/workq.md) -- carries
``@pytest.mark.bundled_workq("why")`` and is skipped, with that reason, on any other backend.
Tests that start a server of their own (``start_workq_server``, ``run_server``) test the
bundled server itself and run against it whatever the backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from jobwire.testing import Settings, WorkqServer
from jobwire.testing import start_workq as start_workq_server
from jobwire.testing._backends import provide_workq

__all__ = ["WorkqServer", "start_workq_server"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "bundled_workq(reason): runs against the bundled Workq server only (skipped, with the "
        "reason, when the jobwire backend gives another Workq server)",
    )


@pytest.fixture(autouse=True)
def _bundled_workq_only(request: pytest.FixtureRequest, jobwire_settings: Settings) -> None:
    marker = request.node.get_closest_marker("bundled_workq")
    backend = jobwire_settings.backend("workq")
    if marker is not None and backend != "bundled":
        pytest.skip(f"bundled Workq server only ({backend} backend here): {marker.args[0]}")


@pytest.fixture
def fresh_workq_server(jobwire_settings: Settings) -> Iterator[WorkqServer]:
    """A server of its own, from the session's backend, for tests that look at server-wide
    state (skipped on the external backend, which has one server)."""
    if jobwire_settings.backend("workq") == "external":
        pytest.skip("needs a Workq server of its own; the external backend gives one")
    server = provide_workq(jobwire_settings)
    yield server
    server.stop()


@pytest.fixture
def qname() -> str:
    """A queue name no other test uses."""
    return f"q-{uuid.uuid4().hex[:16]}"
