"""What every ``jobwire`` command shares: exit codes (0 ok, 1 the server said no, 2 usage, 3
cannot connect), one-line errors and ``--debug`` tracebacks, ``--json``, the environment
defaults of ``--url``, every address form, ``python -m jobwire`` and the console script."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from beanstalk_client import Client

from ..conftest import BeanstalkServer, free_port, start_server
from ..gearman.conftest import GearmanServer, gearman_server
from .conftest import Terminal, cli_env, run_cli

__all__ = ["gearman_server"]  # the fixture, shared


def one_error_line(stderr: str) -> str:
    """The single ``jobwire: error: ...`` line of ``stderr`` (fails on anything else)."""
    assert stderr.count("\n") == 1 and stderr.startswith("jobwire: error: "), stderr
    assert "Traceback" not in stderr
    return stderr


# -- the command itself -----------------------------------------------------------------------


def test_python_m_jobwire() -> None:
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("jobwire, version ")
    helped = run_cli("--help")
    assert helped.returncode == 0
    for command in ("beanstalk", "gearman", "serve", "workq", "qless"):
        assert f"  {command} " in helped.stdout
    for group, command in (("beanstalk", "drain"), ("gearman", "submit")):
        listed = run_cli(group, "--help")
        assert listed.returncode == 0 and command in listed.stdout
        assert "--url" in run_cli(group, command, "--help").stdout


def test_the_console_script(server: BeanstalkServer) -> None:
    script = Path(sys.executable).parent / "jobwire"
    assert script.exists(), "pip install -e '.[cli]' installs the jobwire script"
    done = subprocess.run([str(script), "beanstalk", "stats", "--json", "--url", server.url],
                          capture_output=True, text=True, env=cli_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "current-connections" in json.loads(done.stdout)


# -- exit codes and errors --------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["beanstalk", "stats"], ["beanstalk", "put", "x"], ["beanstalk", "top", "-n", "1"],
    ["gearman", "status"], ["gearman", "submit", "f", "x"], ["gearman", "cancel", "H:x:1"],
    ["gearman", "top", "-n", "1"],
])
def test_cannot_connect_exits_3_with_one_line(args: list[str]) -> None:
    done = run_cli(*args, "--url", f"127.0.0.1:{free_port()}")
    assert done.returncode == 3, done.stderr
    assert "ConnectFailed" in one_error_line(done.stderr)
    assert done.stdout == ""


@pytest.mark.parametrize(("group", "url"), [
    ("beanstalk", "http://127.0.0.1:11300"), ("beanstalk", "beanstalk://127.0.0.1:99999"),
    ("beanstalk", "127.0.0.1:port"), ("beanstalk", " 127.0.0.1"),
    ("gearman", "gearman://127.0.0.1:0"), ("gearman", "127.0.0.1:4730,,"),
    ("gearman", "beanstalk://127.0.0.1"),
])
def test_a_bad_url_exits_2(group: str, url: str) -> None:
    command = "stats" if group == "beanstalk" else "status"
    done = run_cli(group, command, "--url", url)
    assert done.returncode == 2, done.stderr
    assert "InvalidAddress" in one_error_line(done.stderr)


def test_usage_errors_exit_2() -> None:
    assert run_cli("beanstalk", "nosuchcommand").returncode == 2
    assert run_cli("beanstalk", "stats", "--nosuchoption").returncode == 2
    assert run_cli("beanstalk", "kick", "0").returncode == 2  # BOUND is 1 or more
    assert run_cli("nosuchsystem").returncode == 2
    nowhere = f"127.0.0.1:{free_port()}"  # usage is checked before connecting
    assert run_cli("beanstalk", "peek", "soon", "--url", nowhere).returncode == 2
    assert run_cli("beanstalk", "put", "--url", nowhere).returncode == 2
    assert run_cli("gearman", "submit", "f", "x", "--file", "/", "--url", nowhere).returncode == 2


def test_server_said_no_exits_1(server: BeanstalkServer) -> None:
    done = run_cli("beanstalk", "kick-job", "4000000000", "--url", server.url)
    assert done.returncode == 1
    assert "NOT_FOUND" in one_error_line(done.stderr)


@pytest.mark.parametrize("where", ["root", "command"])
def test_debug_shows_the_traceback(where: str) -> None:
    url = f"127.0.0.1:{free_port()}"
    args = (["--debug", "beanstalk", "stats", "--url", url] if where == "root"
            else ["beanstalk", "stats", "--url", url, "--debug"])
    done = run_cli(*args)
    assert done.returncode == 3
    assert done.stderr.startswith("Traceback (most recent call last):")
    assert done.stderr.splitlines()[-1].startswith("jobwire: error: ConnectFailed: ")


def test_json_anywhere_on_the_line(server: BeanstalkServer) -> None:
    for args in (["--json", "beanstalk", "stats"], ["beanstalk", "--json", "stats"],
                 ["beanstalk", "stats", "--json"]):
        done = run_cli(*args, "--url", server.url)
        assert done.returncode == 0, (args, done.stderr)
        assert isinstance(json.loads(done.stdout)["total-jobs"], int)


# -- --url: environment defaults and address forms --------------------------------------------


def test_beanstalk_url_from_the_environment(server: BeanstalkServer) -> None:
    tube = f"t-{uuid.uuid4().hex[:12]}"
    done = run_cli("beanstalk", "put", "x", "--tube", tube, env={"BEANSTALK_URL": server.url})
    assert done.returncode == 0, done.stderr
    with Client(server.url) as client:
        assert client.stats_tube(tube)["current-jobs-ready"] == 1
    elsewhere = run_cli("beanstalk", "stats", env={"BEANSTALK_URL": f"127.0.0.1:{free_port()}"})
    assert elsewhere.returncode == 3  # the variable, not the default, was used
    assert run_cli("beanstalk", "stats", "--url", server.url,
                   env={"BEANSTALK_URL": "http://x"}).returncode == 0  # --url wins


def test_gearman_servers_from_the_environment(gearman_server: GearmanServer) -> None:
    hostport = f"{gearman_server.host}:{gearman_server.port}"
    for value in (hostport, f"gearman://{hostport}", f"{hostport},{hostport}"):
        done = run_cli("gearman", "status", "--json", env={"GEARMAN_SERVERS": value})
        assert done.returncode == 0, (value, done.stderr)
        assert isinstance(json.loads(done.stdout), list)
    elsewhere = run_cli("gearman", "status", env={"GEARMAN_SERVERS": f"127.0.0.1:{free_port()}"})
    assert elsewhere.returncode == 3


def test_beanstalk_address_forms(server: BeanstalkServer) -> None:
    unix_server = start_server(server.kind, unix=True)
    try:
        path = unix_server.unix_path
        assert path is not None
        for url in (server.url, f"127.0.0.1:{server.port}", f"unix://{path}", path):
            done = run_cli("beanstalk", "stats", "--json", "--url", url)
            assert done.returncode == 0, (url, done.stderr)
            assert json.loads(done.stdout)["current-connections"] >= 1
    finally:
        unix_server.stop()


# -- output -----------------------------------------------------------------------------------


def test_tables_on_a_pipe_are_not_cut(server: BeanstalkServer) -> None:
    """Not a terminal: no width limit, whatever $COLUMNS says (rich would make a long tube
    name ``t-aaaa…`` at 80 columns)."""
    tube = "t-" + uuid.uuid4().hex * 4
    with Client(server.url) as client:
        client.use(tube)
        client.put(b"x")
    done = run_cli("beanstalk", "tubes", "--url", server.url, env={"COLUMNS": "80"})
    assert done.returncode == 0
    assert f"│ {tube} │" in done.stdout


def test_top_json_ends_quietly_on_ctrl_c(
    fresh_server: BeanstalkServer, terminal: Callable[..., Terminal]
) -> None:
    # A server of its own: on the shared one, a JSON line of every tube of the session is
    # longer than the pane, and its start scrolls away before it is read.
    pane = terminal("beanstalk", "top", "--json", "-i", "0.2", "--url", fresh_server.url)
    pane.wait_for('"rows"')
    pane.keys("C-c")
    screen = pane.wait_for("EXIT=")
    assert "EXIT=0" in screen and "Traceback" not in screen
