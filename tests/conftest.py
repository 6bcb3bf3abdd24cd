"""Server fixtures: every client test runs against the bundled server and the real one.

Both servers are started the same way, by :mod:`jobwire.testing` (the pytest plugin users get
too), as subprocesses with beanstalkd's own flags on a free loopback port, so one set of
assertions holds for both. With JOBWIRE_REQUIRE_REAL_SERVERS=1 (CI) a missing ``beanstalkd``
binary fails the tests that need it instead of skipping them.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

from jobwire.testing import (
    BeanstalkServer,
    beanstalk_command,
    free_port,
    require_real,
    start_beanstalk,
    stop_process,
    wait_listening,
)

__all__ = [
    "BEANSTALKD_TRANSCRIPT", "BIG", "REQUIRE_REAL", "TRANSCRIPTS", "BeanstalkServer",
    "free_port", "server_command", "start_server", "stop_process",
]

# jobwire.testing is loaded by its pytest11 entry point already; pytester is for tests/testing.
pytest_plugins = ["pytester"]

REQUIRE_REAL = require_real()

#: Hypothesis profiles, one count for every property test (none sets its own): ``dev``, the
#: default, for a quick local run; ``ci``, what ``.ci/run`` selects (``HYPOTHESIS_PROFILE=ci``,
#: or ``--hypothesis-profile=ci``, which wins), at least the count any test ran before the
#: profiles. No deadline: these tests are about what the cores parse, not how fast they parse
#: it on a loaded machine (a deadline is a timed assertion).
CI_EXAMPLES = 300
settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def fewer_examples(divisor: int) -> settings:
    """The loaded profile with ``divisor`` times fewer examples, for a property test whose
    every example is expensive (say bodies of 20-180 KB split at every point): a decorator."""
    return settings(max_examples=max(1, settings().max_examples // divisor))


def load_file(name: str, path: Path) -> ModuleType:
    """Import the Python file at ``path`` (a script, not in a package) as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
#: Byte-exact exchanges recorded from the real servers (tests/transcripts/README.md).
TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts"
BEANSTALKD_TRANSCRIPT = TRANSCRIPTS / "beanstalkd-1.12.jsonl"
BIG = 1024 * 1024  # max-job-size of the shared test servers

#: The suite's name for :func:`jobwire.testing.beanstalk_command`.
server_command = beanstalk_command


def _wait_listening(proc: subprocess.Popen[bytes], connect: tuple[int, str], what: str) -> None:
    """The suite's older form of :func:`jobwire.testing.wait_listening`: ``(family, target)``
    with a unix path or a port as text."""
    family, target = connect
    address = target if family == socket.AF_UNIX else ("127.0.0.1", int(target))
    wait_listening(proc, address, what)


def start_server(
    kind: str,
    *,
    max_job_size: int = BIG,
    unix: bool = False,
    port: int | None = None,
    args: Sequence[str] = (),
) -> BeanstalkServer:
    """:func:`jobwire.testing.start_beanstalk` with the suite's 1 MiB ``max_job_size``."""
    return start_beanstalk(kind, max_job_size=max_job_size, unix=unix, port=port, args=args)


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
