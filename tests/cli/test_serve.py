"""``jobwire serve beanstalk|gearman|workq FLAGS``: the bundled servers with their own flags,
started as an operator starts them; a library client uses them; SIGTERM (and Ctrl-C's SIGINT)
stops them with status 0."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from jobwire.testing import free_port, wait_listening

from .conftest import cli_env, run_cli


@pytest.fixture
def serve() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started by a test, killed at teardown if the test left them running."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start(procs: list[subprocess.Popen[bytes]], *args: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "jobwire", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
    procs.append(proc)
    return proc


def stopped(proc: subprocess.Popen[bytes], signum: int = signal.SIGTERM) -> tuple[int, bytes]:
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=10)
    return proc.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_beanstalk(serve: list[subprocess.Popen[bytes]], signum: int) -> None:
    from beanstalk_client import Client

    port = free_port()
    proc = start(serve, "beanstalk", "-l", "127.0.0.1", "-p", str(port), "-z", "100")
    wait_listening(proc, ("127.0.0.1", port), "jobwire serve beanstalk")
    with Client(f"127.0.0.1:{port}") as client:
        job_id = client.put(b"hello")
        assert client.reserve(0).body == b"hello"
        client.delete(job_id)
        assert client.stats()["max-job-size"] == 100  # the -z flag reached the server
    code, err = stopped(proc, signum)
    assert code == 0 and b"Traceback" not in err


def test_serve_gearman(serve: list[subprocess.Popen[bytes]]) -> None:
    from gearman_client import Admin, Client

    port = free_port()
    proc = start(serve, "gearman", "-L", "127.0.0.1", "-p", str(port),
                 "--job-handle-prefix=H:cli")
    wait_listening(proc, ("127.0.0.1", port), "jobwire serve gearman")
    with Client(f"127.0.0.1:{port}") as client:
        handle = client.submit_background("f", b"x")
    assert handle.startswith(b"H:cli:")
    with Admin(("127.0.0.1", port)) as admin:
        assert [(s.function, s.queued) for s in admin.status()] == [("f", 1)]
    code, err = stopped(proc)
    assert code == 0 and b"Traceback" not in err


def test_serve_workq(serve: list[subprocess.Popen[bytes]]) -> None:
    from workq_client import Client

    port = free_port()
    proc = start(serve, "workq", "-listen", f"127.0.0.1:{port}")
    wait_listening(proc, ("127.0.0.1", port), "jobwire serve workq")
    with Client(f"127.0.0.1:{port}") as client:
        job_id = client.add("q", b"hello", ttr=5, ttl=60)
        assert client.lease("q", wait=5).job_id == job_id
    code, err = stopped(proc)
    assert code == 0 and b"Traceback" not in err


def test_serve_passes_help_and_version_to_the_server() -> None:
    helped = run_cli("serve", "beanstalk", "-h")
    assert helped.returncode == 0 and "-z BYTES" in helped.stdout
    version = run_cli("serve", "beanstalk", "-v")
    assert version.returncode == 0 and version.stdout.startswith("beanstalkd 1.12")
    assert run_cli("serve", "gearman", "--help").returncode == 0


def test_serve_bad_flag_exits_2() -> None:
    done = run_cli("serve", "beanstalk", "-p", "port")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert run_cli("serve", "redis").returncode == 2  # no such bundled server


def test_serve_port_in_use_exits_1(serve: list[subprocess.Popen[bytes]]) -> None:
    port = free_port()
    first = start(serve, "beanstalk", "-l", "127.0.0.1", "-p", str(port))
    wait_listening(first, ("127.0.0.1", port), "jobwire serve beanstalk")
    second = run_cli("serve", "beanstalk", "-l", "127.0.0.1", "-p", str(port))
    assert second.returncode == 1 and "cannot listen" in second.stderr
    assert stopped(first)[0] == 0
