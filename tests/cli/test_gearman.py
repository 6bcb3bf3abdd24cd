"""``jobwire gearman ...`` run as a user runs it (a subprocess, or a tmux pane for ``top``),
against the bundled server and the real gearmand; what the servers hold afterwards is read back
with the library's ``Admin``, and workers are the library's ``Worker``."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gearman_client import Admin, Client, Priority, Worker
from gearman_client.worker import Job
from jobwire.testing import GearmanServer, free_port

from ..gearman.conftest import fresh_gearman, function, gearman_server, start_gearman
from ..waiting import wait_until
from .conftest import Terminal, cli_env, failed, ok, row, run_cli, wait_row

__all__ = ["fresh_gearman", "function", "gearman_server"]  # the fixtures, shared


def gm(srv: GearmanServer | str, *args: str, input: bytes | str | None = None,
       ) -> subprocess.CompletedProcess[str]:
    url = srv if isinstance(srv, str) else srv.url
    return run_cli("gearman", *args, "--url", url, input=input)


@pytest.fixture
def worker() -> Iterator[Callable[..., Worker]]:
    """``worker(url, function, handler, **kwargs)``: a library worker in a thread, stopped at
    teardown."""
    running: list[tuple[Worker, threading.Thread]] = []

    def start(url: str, function: str, handler: Callable[[Job], Any], **kwargs: Any) -> Worker:
        w = Worker(url, **kwargs)
        w.register(function, handler)
        thread = threading.Thread(target=w.run, daemon=True)
        thread.start()
        running.append((w, thread))
        return w

    yield start
    for w, thread in running:
        w.stop()
        thread.join(10)


def status_of(srv: GearmanServer, function: str) -> tuple[int, int, int]:
    with Admin(srv.address) as admin:
        for s in admin.status():
            if s.function == function:
                return s.queued, s.running, s.workers
    return 0, 0, 0


# -- submit -------------------------------------------------------------------------------------


def test_submit_foreground_prints_result_and_updates(
    gearman_server: GearmanServer, function: str, worker: Callable[..., Worker]
) -> None:
    def handler(job: Job) -> bytes:
        job.send_status(1, 2)
        job.send_data(b"part \x1b[2J")
        job.send_warning("careful")
        return job.data[::-1] + b"\x00\xff"

    worker(gearman_server.url, function, handler)
    done = subprocess.run(  # stdout as bytes: not a terminal, it is the result exactly
        [sys.executable, "-m", "jobwire", "gearman", "submit", function, "hello", "--url",
         gearman_server.url], capture_output=True, env=cli_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"olleh\x00\xff"
    assert done.stderr.decode().splitlines() == [
        "status 1/2", "data: part \\x1b[2J", "warning: careful"]
    out = json.loads(gm(gearman_server, "submit", function, "ab", "--json").stdout)
    assert out["result"] == {"body_base64": "YmEA/w=="}
    assert out["updates"] == [{"type": "status", "numerator": 1, "denominator": 2},
                              {"type": "data", "body": "part \x1b[2J"},
                              {"type": "warning", "body": "careful"}]


def test_submit_data_from_file_and_stdin(
    gearman_server: GearmanServer, function: str, worker: Callable[..., Worker],
    tmp_path: Path,
) -> None:
    seen: list[bytes] = []

    def handler(job: Job) -> bytes:
        seen.append(job.data)
        return b"ok"

    worker(gearman_server.url, function, handler)
    data = bytes(range(256)) + b"\nline two\n"
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    assert gm(gearman_server, "submit", function, "--file", str(path)).returncode == 0
    assert gm(gearman_server, "submit", function, "-", input=data).returncode == 0
    assert gm(gearman_server, "submit", function).returncode == 0  # no data: empty
    assert seen == [data, data, b""]
    both = gm(gearman_server, "submit", function, "x", "--file", str(path))
    assert both.returncode == 2


def test_submit_failed_job_exits_1(
    gearman_server: GearmanServer, function: str, worker: Callable[..., Worker]
) -> None:
    def handler(job: Job) -> bytes:
        raise ValueError("no good")

    worker(gearman_server.url, function, handler)
    done = gm(gearman_server, "submit", function, "x")
    assert done.returncode == 1
    # the worker's WORK_WARNING comes first, then the one-line error of the WORK_FAIL
    assert done.stderr.splitlines()[0] == "warning: ValueError: no good"
    assert done.stderr.splitlines()[1].startswith("jobwire: error: JobFailed: ")
    assert "Traceback" not in done.stderr


def test_submit_with_no_worker_times_out_with_exit_1(
    gearman_server: GearmanServer, function: str
) -> None:
    """--wait running out is a timeout (exit 1, "timed out"), not a connection failure (3);
    --timeout, its old name, still works and is no longer shown."""
    line = failed(gm(gearman_server, "submit", function, "x", "--wait", "0.3"), 1)
    assert line.startswith("jobwire: error: timed out: no result for ")
    assert "within --wait 0.3 s" in line
    assert status_of(gearman_server, function)[0] >= 1  # the job stays queued on the server
    line = failed(gm(gearman_server, "submit", function, "x", "--timeout", "0.3"), 1)
    assert "within --wait 0.3 s" in line
    both = gm(gearman_server, "submit", function, "x", "--timeout", "1", "--wait", "2")
    assert both.returncode == 2 and "--timeout is the old name of --wait" in both.stderr
    help_text = ok(run_cli("gearman", "submit", "--help"))
    assert "--wait" in help_text and "submit(timeout=)" in help_text
    assert "--timeout" not in help_text


def test_submit_background_priority_unique(
    gearman_server: GearmanServer, function: str
) -> None:
    unique = f"u-{function}"
    done = gm(gearman_server, "submit", function, "data", "--background", "--priority", "high",
              "--unique", unique, "--json")
    assert done.returncode == 0, done.stderr
    handle = json.loads(done.stdout)["handle"]
    plain = gm(gearman_server, "submit", function, "other", "-b", "-p", "low")
    assert plain.returncode == 0 and plain.stdout.startswith("H:")
    with Admin(gearman_server.address) as admin:
        (mine,) = [p for p in admin.priority_status() if p.function == function]
        assert (mine.high, mine.normal, mine.low) == (1, 0, 1)
        assert unique.encode() in admin.show_unique_jobs()
        assert handle.encode() in [j.handle for j in admin.show_jobs()]
    with Client(gearman_server.url) as client:
        assert client.get_status(handle.encode()).known


def test_submit_bad_function_exits_2(gearman_server: GearmanServer) -> None:
    assert gm(gearman_server, "submit", "", "x", "-b").returncode == 2
    assert gm(gearman_server, "submit", "f", "x", "-p", "urgent").returncode == 2


# -- admin --------------------------------------------------------------------------------------


def test_status_workers_jobs(
    gearman_server: GearmanServer, function: str, worker: Callable[..., Worker]
) -> None:
    with Client(gearman_server.url) as client:
        handles = [client.submit_background(function, b"x", unique=f"{function}-{i}")
                   for i in range(3)]
    idle = f"{function}-idle"
    worker(gearman_server.url, idle, lambda job: b"", client_id=f"cid-{function}")
    wait_until(lambda: status_of(gearman_server, idle)[2] == 1, what="the idle worker listed")

    rows = json.loads(gm(gearman_server, "status", "--json").stdout)
    assert {"server": str(gearman_server.address[0]) + f":{gearman_server.port}",
            "function": function, "queued": 3, "running": 0, "workers": 0} in rows
    table = gm(gearman_server, "status").stdout
    assert row(table, function)[1:] == ["3", "0", "0"]
    assert row(table, idle)[1:] == ["0", "0", "1"]

    workers = json.loads(gm(gearman_server, "workers", "--json").stdout)
    (mine,) = [w for w in workers if w["client_id"] == f"cid-{function}"]
    assert mine["functions"] == [idle]
    assert f"cid-{function}" in gm(gearman_server, "workers").stdout

    (jobs,) = json.loads(gm(gearman_server, "jobs", "--json").stdout)
    listed = {j["handle"]: j for j in jobs["jobs"]}
    for handle in handles:
        assert listed[handle.decode()]["queued"] is True
        assert listed[handle.decode()]["ignored"] is False
    assert {f"{function}-{i}" for i in range(3)} <= set(jobs["unique"])
    text = gm(gearman_server, "jobs").stdout
    assert row(text, handles[0].decode())[1:] == ["0", "no", "yes"]
    assert row(text, f"{function}-2") == [f"{function}-2"]


def test_names_with_markup_show_as_they_are(
    gearman_server: GearmanServer,
) -> None:
    """rich would read ``[/]`` in a function name as markup (and crash: nothing to close)."""
    name = f"[/]x[bold]{time.monotonic_ns()}"
    with Client(gearman_server.url) as client:
        client.submit_background(name, b"x", unique=f"[red]u é {name}")
    done = gm(gearman_server, "status")
    assert done.returncode == 0, done.stderr
    assert row(done.stdout, name)[1] == "1"
    jobs = gm(gearman_server, "jobs")
    assert jobs.returncode == 0, jobs.stderr
    assert row(jobs.stdout, f"[red]u é {name}")


def test_cancel(gearman_server: GearmanServer, function: str) -> None:
    with Client(gearman_server.url) as client:
        handle = client.submit_background(function, b"x").decode()
    done = gm(gearman_server, "cancel", handle)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"cancelled job {handle}\n"
    with Admin(gearman_server.address) as admin:
        (job,) = [j for j in admin.show_jobs() if j.handle == handle.encode()]
    assert job.ignore_job  # gearmand keeps a cancelled job, marked ignored


def test_cancel_unknown_job_exits_1_with_the_servers_message(
    gearman_server: GearmanServer,
) -> None:
    done = gm(gearman_server, "cancel", "H:vm:999999999")
    assert done.returncode == 1
    assert done.stderr == "jobwire: error: cannot cancel job H:vm:999999999: UNKNOWN_JOB\n"


def test_cancel_fails_the_waiting_foreground_submit(
    fresh_gearman: GearmanServer, function: str
) -> None:
    submit = subprocess.Popen(
        [sys.executable, "-m", "jobwire", "gearman", "submit", function, "x", "--url",
         fresh_gearman.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env())
    try:
        with Admin(fresh_gearman.address) as admin:
            wait_until(admin.show_jobs, what="the submitted job listed")
            (job,) = admin.show_jobs()
        done = gm(fresh_gearman, "cancel", job.handle.decode(), "--json")
        assert json.loads(done.stdout)["cancelled"] == job.handle.decode()
        out, err = submit.communicate(timeout=20)
        assert out == ""
    finally:
        submit.kill()
    assert submit.returncode == 1
    assert err.startswith("jobwire: error: JobFailed: ") and err.count("\n") == 1


class OldServer:
    """A Gearman server of an older kind, on a thread: its admin port knows ``status`` only
    and answers every other command ``ERR UNKNOWN_COMMAND`` (no jobwire or gearmand server
    here lacks ``show jobs`` or ``cancel job``, so this is the only way to see that answer)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.listener.accept()
                with conn, conn.makefile("rb") as lines:
                    for line in lines:
                        answer = (b"f\t1\t0\t0\n.\n" if line.strip() == b"status"
                                  else b"ERR UNKNOWN_COMMAND Unknown+server+command\r\n")
                        conn.sendall(answer)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def old_server() -> Iterator[OldServer]:
    srv = OldServer()
    yield srv
    srv.close()


def test_a_server_without_the_commands(old_server: OldServer) -> None:
    url = f"127.0.0.1:{old_server.port}"
    assert json.loads(gm(url, "status", "--json").stdout)[0]["queued"] == 1
    cancel = gm(url, "cancel", "H:x:1")
    assert cancel.returncode == 1
    assert cancel.stderr == ("jobwire: error: cannot cancel job H:x:1: UNKNOWN_COMMAND: Unknown "
                             "server command\n")
    jobs = gm(url, "jobs")
    assert jobs.returncode == 1 and jobs.stdout == ""
    assert jobs.stderr.splitlines() == [
        "jobwire: error: show jobs: UNKNOWN_COMMAND: Unknown server command",
        "jobwire: error: show unique jobs: UNKNOWN_COMMAND: Unknown server command"]
    out = json.loads(gm(url, "jobs", "--json").stdout)
    assert out[0]["jobs_error"] == "UNKNOWN_COMMAND: Unknown server command"


# -- several servers ----------------------------------------------------------------------------


def test_a_comma_separated_server_list(gearman_server: GearmanServer, function: str) -> None:
    other = start_gearman("bundled")
    try:
        for srv in (gearman_server, other):
            with Client(srv.url) as client:
                client.submit_background(function, b"x")
        both = f"{gearman_server.host}:{gearman_server.port},gearman://127.0.0.1:{other.port}"
        rows = json.loads(gm(both, "status", "--json").stdout)
        mine = sorted((r["server"], r["queued"]) for r in rows if r["function"] == function)
        assert mine == sorted([(f"127.0.0.1:{gearman_server.port}", 1),
                               (f"127.0.0.1:{other.port}", 1)])
        table = gm(both, "status").stdout
        assert table.splitlines()[1].split("┃")[1].strip() == "server"
        down = f"{gearman_server.host}:{gearman_server.port},127.0.0.1:{free_port()}"
        partial = gm(down, "status")
        assert partial.returncode == 3
        assert function in partial.stdout  # what the reachable server said is shown
        assert partial.stderr.count("\n") == 1 and "ConnectFailed" in partial.stderr
    finally:
        other.stop()


# -- top ----------------------------------------------------------------------------------------


def test_top_json(gearman_server: GearmanServer, function: str) -> None:
    with Client(gearman_server.url) as client:
        client.submit_background(function, b"x")
    done = gm(gearman_server, "top", "--json", "-n", "2", "-i", "0.1")
    assert done.returncode == 0, done.stderr
    polls = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(polls) == 2
    assert polls[-1]["rows"][function] == {"queued": 1, "running": 0, "workers": 0}


def test_top_in_a_terminal(
    fresh_gearman: GearmanServer, function: str, terminal: Callable[..., Terminal],
    worker: Callable[..., Worker],
) -> None:
    with Client(fresh_gearman.url) as client:
        for _ in range(3):
            client.submit_background(function, b"x")
        pane = terminal("gearman", "top", "-i", "0.2",
                        env={"GEARMAN_SERVERS": f"{fresh_gearman.host}:{fresh_gearman.port}"})
        wait_row(pane, function, ["3", "0", "0"])  # queued, running, workers
        client.submit_background(function, b"x", priority=Priority.HIGH)
        wait_row(pane, function, ["4", "0", "0"])
    idle = f"{function}-idle"
    worker(fresh_gearman.url, idle, lambda job: b"")
    wait_row(pane, idle, ["0", "0", "1"])
    pane.keys("C-c")
    screen = pane.wait_for("EXIT=")
    assert "EXIT=0" in screen and "Traceback" not in screen
