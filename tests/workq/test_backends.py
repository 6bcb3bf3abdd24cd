"""The Workq suite's fixtures follow the jobwire backend (``tests/workq/conftest.py``).

No real ``workq-server`` is packaged here, so a fake one is put on ``PATH``: a script that runs
the bundled server with the Go server's flag (``workq-server -listen HOST:PORT``). This suite's
own ``conftest.py`` and two tests run in a pytest subprocess (``pytester``): with
``--jobwire-backend=workq=binary`` both fixtures are that ``workq-server`` and the test marked
``bundled_workq`` is skipped with its reason; with the default backend, the bundled server.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from jobwire.testing import SYSTEMS

_SUITE = '''
import os

import pytest
from workq_client import Client


def test_fixtures_follow_the_backend(workq_server, fresh_workq_server):
    kind = os.environ["EXPECT_KIND"]
    assert (workq_server.kind, fresh_workq_server.kind) == (kind, kind)
    assert workq_server.port != fresh_workq_server.port
    for server in (workq_server, fresh_workq_server):
        with Client(server.url, timeout=5) as client:
            job_id = client.add("q", b"p")
            assert client.lease("q", wait=1).job_id == job_id


@pytest.mark.bundled_workq("it checks where the bundled server differs")
def test_bundled_only(workq_server):
    assert workq_server.kind == "bundled"
'''


@pytest.fixture
def fake_workq_server(tmp_path: Path) -> Path:
    """A directory holding ``workq-server``: the bundled server under the real one's name."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "workq-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m workq_client.server "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.mark.parametrize(("args", "kind"), [
    (("--jobwire-backend=workq=binary",), "workq-server"),
    ((), "bundled"),
])
def test_the_suite_runs_against_the_backends_server(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake_workq_server: Path,
    args: tuple[str, ...], kind: str,
) -> None:
    for system in SYSTEMS:
        for what in ("URL", "IMAGE"):
            monkeypatch.delenv(f"JOBWIRE_{system.upper()}_{what}", raising=False)
    monkeypatch.delenv("JOBWIRE_BACKEND", raising=False)
    monkeypatch.delenv("JOBWIRE_REQUIRE_REAL_SERVERS", raising=False)
    monkeypatch.setenv("PATH", f"{fake_workq_server}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EXPECT_KIND", kind)
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text())
    pytester.makepyfile(test_suite=_SUITE)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider", *args,
                                           timeout=120)
    if kind == "bundled":
        result.assert_outcomes(passed=2)
    else:
        result.assert_outcomes(passed=1, skipped=1)
        result.stdout.fnmatch_lines([
            "SKIPPED *bundled Workq server only (binary backend here): it checks where the "
            "bundled server differs"
        ])
