"""``jobwire worker [URL] TARGET`` run as a user runs it: a subprocess (``python -m jobwire``, or
the console script) against the real servers (beanstalkd, gearmand, redis-server for qless) and
the plugin's Workq server, running the handlers of ``tests/cli/handlers.py``. What became of
the jobs is read back from the server with the library's clients; the handlers leave a file per
job they finished (``$JOBWIRE_TEST_OUT``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire.testing import (
    BeanstalkServer,
    GearmanServer,
    RedisServer,
    WorkqServer,
    free_port,
    start_beanstalk,
    start_gearman,
)

from ..waiting import wait_until
from .conftest import cli_env, failed, run_cli

# -- the servers and what a test needs of each system -------------------------------------------


@pytest.fixture(scope="module")
def beanstalkd() -> Iterator[BeanstalkServer]:
    server = start_beanstalk("beanstalkd")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gearmand() -> Iterator[GearmanServer]:
    server = start_gearman("gearmand")
    yield server
    server.stop()


@dataclass
class System:
    """One system as the tests drive it: the URL and options of ``jobwire worker``, how to put
    jobs, and how to read back what became of them."""

    name: str
    url: str
    queue: str
    option: str
    #: Put jobs (payloads) with the library's client; the ids the events will name.
    put: Callable[[list[str]], list[str]]
    #: Jobs of the queue not done yet, as the server tells (waiting, reserved, delayed...).
    left: Callable[[], int]

    def args(self) -> list[str]:
        return [self.url, self.option, self.queue]


def _beanstalk(server: BeanstalkServer) -> System:
    tube = f"t-{uuid.uuid4().hex[:12]}"

    def put(payloads: list[str]) -> list[str]:
        with beanstalk_client.Client(server.url) as client:
            client.use(tube)
            return [str(client.put(p.encode(), ttr=30)) for p in payloads]

    def left() -> int:
        with beanstalk_client.Client(server.url) as client:
            try:
                stats = client.stats_tube(tube)
            except beanstalk_client.NotFound:
                return 0
        return sum(int(stats[k]) for k in (
            "current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
            "current-jobs-buried"))

    return System("beanstalk", server.url, tube, "--tube", put, left)


def _gearman(server: GearmanServer) -> System:
    function = f"f-{uuid.uuid4().hex[:12]}"
    url = f"gearman://127.0.0.1:{server.port}"

    def put(payloads: list[str]) -> list[str]:
        with gearman_client.Client(url) as client:
            return [client.submit_background(function, p.encode()).decode() for p in payloads]

    def left() -> int:
        with gearman_client.Admin(url) as admin:
            return sum(row.queued for row in admin.status() if row.function == function)

    return System("gearman", url, function, "--function", put, left)


def _workq(server: WorkqServer) -> System:
    name = f"w-{uuid.uuid4().hex[:12]}"
    ids: list[str] = []

    def put(payloads: list[str]) -> list[str]:
        with workq_client.Client(server.url) as client:
            # A short TTR: a job left leased at shutdown comes back within a test.
            ids.extend(client.add(name, p.encode(), ttr=1) for p in payloads)
        return ids[-len(payloads):]

    def left() -> int:
        finished = (workq_client.JobState.COMPLETED, workq_client.JobState.FAILED)
        with workq_client.Client(server.url) as client:
            return sum(client.inspect_job(i).state not in finished for i in ids)

    return System("workq", server.url, name, "--name", put, left)


def _qless(server: RedisServer) -> System:
    queue = f"q-{uuid.uuid4().hex[:12]}"

    def put(payloads: list[str]) -> list[str]:
        with qless_client.Client(server.url) as client:
            return [client.queue(queue).put("app.Job", {"p": p}) for p in payloads]

    def left() -> int:
        with qless_client.Client(server.url) as client:
            counts = client.queue(queue).counts()
        return sum(int(counts[k]) for k in ("waiting", "running", "scheduled", "stalled"))

    return System("qless", server.url, queue, "--queue", put, left)


SYSTEMS = ["beanstalk", "gearman", "workq", "qless"]


@pytest.fixture(params=SYSTEMS)
def system(request: pytest.FixtureRequest) -> System:
    return make_system(request, str(request.param))


def make_system(request: pytest.FixtureRequest, name: str) -> System:
    if name == "beanstalk":
        return _beanstalk(request.getfixturevalue("beanstalkd"))
    if name == "gearman":
        return _gearman(request.getfixturevalue("gearmand"))
    if name == "workq":
        return _workq(request.getfixturevalue("workq_server"))
    return _qless(request.getfixturevalue("redis_server"))


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where the handlers leave their files."""
    directory = tmp_path / "out"
    directory.mkdir()
    return directory


def done(out: Path) -> list[str]:
    """The payloads of the jobs a handler finished."""
    return sorted(p.name[len("done-"):] for p in out.glob("done-*"))


# -- the command, as a subprocess -----------------------------------------------------------------


def worker(out: Path, *args: str, cwd: Path | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m jobwire worker ARGS`` to its end."""
    done = subprocess.run(
        [sys.executable, "-m", "jobwire", "worker", *args], capture_output=True, text=True,
        env=cli_env({"JOBWIRE_TEST_OUT": str(out), **(env or {})}), timeout=120, cwd=cwd,
    )
    return done


class Running:
    """``python -m jobwire worker ARGS`` in the background, its stdout and stderr read line by
    line as they come."""

    def __init__(self, out: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobwire", "worker", *args], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=cli_env({"JOBWIRE_TEST_OUT": str(out)}),
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout),
                             daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr),
                             daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def line(self, text: str, stream: str = "stderr") -> str:
        """The first line of ``stream`` holding ``text``, once there is one."""
        lines = self.stderr if stream == "stderr" else self.stdout

        def found() -> str:
            return next((line for line in list(lines) if text in line), "")

        return wait_until(found, 30, f"{text!r} on the worker's {stream} "
                                     f"(stderr: {self.stderr[-5:]})")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self) -> int:
        """Its exit code, once it ended (and its output was read)."""
        code = self.proc.wait(timeout=60)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def running(out: Path) -> Iterator[Callable[..., Running]]:
    """``running(*args)`` starts a background worker; any still running is killed at the
    end."""
    started: list[Running] = []

    def start(*args: str) -> Running:
        proc = Running(out, *args)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


def outcome_lines(stdout: str | list[str]) -> list[dict[str, Any]]:
    """The job lines of ``--log-format json`` (every stdout line must be one)."""
    lines = stdout.splitlines() if isinstance(stdout, str) else stdout
    return [json.loads(line) for line in lines if line.strip()]


# -- jobs done -------------------------------------------------------------------------------------


#: Each handler kind and the job class its worker hands it (sync: the threaded Worker's).
HANDLERS = {
    "tests.cli.handlers:record": {"beanstalk": "Job", "gearman": "Job", "workq": "JobContext",
                                  "qless": "Job"},
    "tests.cli.handlers:arecord": {"beanstalk": "Job", "gearman": "AsyncJob",
                                   "workq": "JobContext", "qless": "AsyncJob"},
}


@pytest.mark.parametrize("target", list(HANDLERS))
def test_jobs_put_are_done_by_the_handler_and_logged(
    system: System, out: Path, target: str,
) -> None:
    payloads = [f"p{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    ids = system.put(payloads)
    result = worker(out, *system.args(), target, "--burst", "--log-format", "json",
                    "--concurrency", "2")
    assert result.returncode == 0, result.stderr
    assert done(out) == sorted(payloads)
    kinds = {json.loads((out / f"done-{p}").read_text())["type"] for p in payloads}
    assert kinds == {HANDLERS[target][system.name]}
    lines = outcome_lines(result.stdout)
    assert sorted(line["job"] for line in lines) == sorted(ids)
    for line in lines:
        assert (line["system"], line["queue"], line["outcome"]) == (
            system.name, system.queue, "done")
        assert line["duration"] >= 0 and line["time"].endswith("Z")
    assert "--burst" in result.stderr
    assert system.left() == 0


def test_an_object_with_an_async_call_runs_on_the_async_worker(
    request: pytest.FixtureRequest, out: Path,
) -> None:
    qless = make_system(request, "qless")
    qless.put(["x"])
    result = worker(out, *qless.args(), "tests.cli.handlers:arecorder", "--burst")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "done-x").read_text())["type"] == "AsyncJob"
    assert "(async)" in result.stderr


def test_burst_with_nothing_to_do_exits_0(system: System, out: Path) -> None:
    result = worker(out, *system.args(), "tests.cli.handlers:record", "--burst")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "stopped (--burst" in result.stderr


def test_max_jobs_stops_after_that_many(system: System, out: Path) -> None:
    payloads = [f"m{i}" for i in range(5)]
    system.put(payloads)
    result = worker(out, *system.args(), "tests.cli.handlers:record", "--max-jobs", "2")
    assert result.returncode == 0, result.stderr
    assert len(done(out)) == 2
    assert "stopped (--max-jobs 2" in result.stderr
    assert system.left() == 3  # handed nothing else out: still on the server


def test_max_seconds_stops_gracefully(request: pytest.FixtureRequest, out: Path) -> None:
    beanstalk = make_system(request, "beanstalk")
    result = worker(out, *beanstalk.args(), "tests.cli.handlers:record", "--max-seconds",
                    "0.3")
    assert result.returncode == 0, result.stderr
    assert "stopped (--max-seconds 0.3)" in result.stderr


def test_failures_are_retried_then_buried_on_beanstalkd(
    request: pytest.FixtureRequest, out: Path,
) -> None:
    beanstalk = make_system(request, "beanstalk")
    [job] = beanstalk.put(["bad"])
    result = worker(out, *beanstalk.args(), "tests.cli.handlers:boom", "--burst",
                    "--max-attempts", "2", "--retry-delay", "0", "--json")
    assert result.returncode == 0, result.stderr
    lines = outcome_lines(result.stdout)
    assert [(x["job"], x["outcome"], x["group"], x["attempt"]) for x in lines] == [
        (job, "retried", "ValueError", 1), (job, "buried", "ValueError", 2)]
    with beanstalk_client.Client(beanstalk.url) as client:
        assert client.stats_job(int(job))["state"] == "buried"
    # --json logs as JSON too: the handler's traceback is in one record.
    records = [json.loads(line) for line in result.stderr.splitlines()]
    assert any("ValueError: boom bad" in r.get("exception", "") for r in records)


def test_failures_are_retried_then_failed_on_qless(
    request: pytest.FixtureRequest, out: Path,
) -> None:
    qless = make_system(request, "qless")
    [jid] = qless.put(["bad"])
    result = worker(out, *qless.args(), "tests.cli.handlers:boom", "--burst",
                    "--max-attempts", "2", "--retry-delay", "0", "--log-format", "json")
    assert result.returncode == 0, result.stderr
    lines = outcome_lines(result.stdout)
    assert [(x["job"], x["outcome"]) for x in lines] == [(jid, "retried"), (jid, "failed")]
    assert lines[1]["group"] == "ValueError"
    with qless_client.Client(qless.url) as client:
        job = client.get(jid)
        assert job is not None and job.state == "failed"


def test_text_lines_name_each_job(request: pytest.FixtureRequest, out: Path) -> None:
    workq = make_system(request, "workq")
    [job] = workq.put(["t"])
    result = worker(out, *workq.args(), "tests.cli.handlers:record", "--burst")
    assert result.returncode == 0, result.stderr
    [line] = result.stdout.splitlines()
    when, system, queue, job_id, outcome, duration = line.split(" ")
    assert (system, queue, job_id, outcome) == ("workq", workq.queue, job, "done")
    assert when.endswith("Z") and duration.endswith("s")


# -- health ---------------------------------------------------------------------------------------


def test_sigusr1_prints_a_health_line(
    request: pytest.FixtureRequest, out: Path, running: Callable[..., Running],
) -> None:
    beanstalk = make_system(request, "beanstalk")
    beanstalk.put(["h1"])
    proc = running(*beanstalk.args(), "tests.cli.handlers:record")
    proc.line("done", stream="stdout")
    proc.signal(signal.SIGUSR1)
    line = proc.line("health:")
    assert "connected" in line and "NOT connected" not in line
    assert "in flight 0" in line and "done 1" in line and "failed 0" in line
    assert "up " in line
    proc.signal(signal.SIGTERM)
    assert proc.finish() == 0


def test_health_port_answers_with_json(
    request: pytest.FixtureRequest, out: Path, running: Callable[..., Running],
) -> None:
    qless = make_system(request, "qless")
    qless.put(["h2"])
    proc = running(*qless.args(), "tests.cli.handlers:arecord", "--health-port", "0")
    port = int(proc.line("health on http://127.0.0.1:").rsplit(":", 1)[1].strip("/"))
    proc.line("done", stream="stdout")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as reply:
        assert reply.status == 200
        data = json.loads(reply.read())
    assert (data["system"], data["queues"], data["connected"]) == ("qless", [qless.queue], True)
    assert (data["done"], data["failed"], data["in_flight"], data["stopping"]) == (1, 0, 0, False)
    assert data["uptime"] > 0 and data["ready"] == 0
    proc.signal(signal.SIGTERM)
    assert proc.finish() == 0


# -- SIGTERM mid-job -------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["tests.cli.handlers:gate", "tests.cli.handlers:agate"])
def test_sigterm_mid_job_lets_the_job_finish(
    system: System, out: Path, running: Callable[..., Running], target: str,
) -> None:
    [job] = system.put(["slow"])
    proc = running(*system.args(), target, "--log-format", "json")
    wait_until(lambda: (out / "started-slow").exists(), 30, "the handler started")
    proc.signal(signal.SIGTERM)
    proc.line("SIGTERM")  # the worker took it: stopping after the running job
    (out / "go").touch()
    assert proc.finish() == 0, proc.stderr
    assert done(out) == ["slow"]
    assert [(x["job"], x["outcome"]) for x in outcome_lines(proc.stdout)] == [(job, "done")]
    assert system.left() == 0


def test_sigterm_past_the_shutdown_timeout_hands_the_job_back(
    system: System, out: Path, running: Callable[..., Running],
) -> None:
    [job] = system.put(["stuck"])
    proc = running(*system.args(), "tests.cli.handlers:agate", "--shutdown-timeout", "0.2",
                   "--log-format", "json")
    wait_until(lambda: (out / "started-stuck").exists(), 30, "the handler started")
    proc.signal(signal.SIGTERM)
    assert proc.finish() == 0, proc.stderr
    assert done(out) == []
    # Handed back (Workq has no release: the job is left to its TTR, and reported lost).
    expected = "lost" if system.name == "workq" else "handed_back"
    assert [(x["job"], x["outcome"]) for x in outcome_lines(proc.stdout)] == [(job, expected)]
    assert system.left() == 1
    if system.name == "workq":  # its 1 s TTR runs out: ready again
        with workq_client.Client(system.url) as client:
            wait_until(lambda: client.inspect_queue(system.queue).ready_len == 1, 30,
                       "the job back in its queue after its TTR")
    again = worker(out, *system.args(), "tests.cli.handlers:record", "--burst")
    assert again.returncode == 0, again.stderr
    assert done(out) == ["stuck"]
    assert system.left() == 0


# -- usage and connection errors -------------------------------------------------------------------


@pytest.mark.parametrize(("target", "message"), [
    ("nocolon", "TARGET is module:attribute or module.attribute"),
    ("tests.cli.nosuch:f", "cannot import 'tests.cli.nosuch'"),
    ("tests.cli.handlers:nosuch", "module 'tests.cli.handlers' has no attribute 'nosuch'"),
    ("tests.cli.handlers:not_callable", "is a int, not a callable"),
])
def test_a_bad_target_exits_2_before_connecting(target: str, message: str) -> None:
    nowhere = f"beanstalk://127.0.0.1:{free_port()}"
    line = failed(run_cli("worker", nowhere, target), 2)
    assert message in line


@pytest.mark.parametrize(("args", "message"), [
    (["beanstalk://127.0.0.1:1", "--bogus", "m:f"], "No such option '--bogus'"),
    (["--tube", "a", "--queue", "b", "m:f"], "--tube and --queue belong to different systems"),
    (["gearman://127.0.0.1:1", "--function", "f", "--handler-timeout", "1",
      "tests.cli.handlers:record"], "--handler-timeout: not for gearman"),
    (["127.0.0.1:1", "tests.cli.handlers:record"], "say which system it is"),
    (["beanstalk://127.0.0.1:1", "--retry-delay", "0.5", "tests.cli.handlers:record"],
     "beanstalkd delays are whole seconds"),
    ([], "expected [URL] TARGET"),
])
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = run_cli("worker", *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


@pytest.mark.parametrize("url", [
    "beanstalk://127.0.0.1:{port}", "gearman://127.0.0.1:{port}", "workq://127.0.0.1:{port}",
    "redis://127.0.0.1:{port}/0",
])
def test_no_server_at_start_exits_3(url: str) -> None:
    option = {"beanstalk": "--tube", "gearman": "--function", "workq": "--name",
              "redis": "--queue"}[url.partition(":")[0]]
    line = failed(run_cli("worker", url.format(port=free_port()), option, "q",
                          "tests.cli.handlers:record"), 3)
    assert "ConnectFailed" in line or "Connection" in line


def test_target_from_the_current_directory_and_url_from_the_environment(
    request: pytest.FixtureRequest, out: Path, tmp_path: Path,
) -> None:
    """The console script (whose sys.path does not hold the current directory by itself)
    imports ``tasks.handle`` from where it runs; BEANSTALK_URL says where the server is."""
    beanstalk = make_system(request, "beanstalk")
    beanstalk.put(["env"])
    app = tmp_path / "app"
    app.mkdir()
    (app / "tasks.py").write_text(
        "import os, pathlib\n"
        "def handle(job):\n"
        "    pathlib.Path(os.environ['JOBWIRE_TEST_OUT'], 'done-' + job.body.decode())"
        ".touch()\n")
    script = Path(sys.executable).with_name("jobwire")
    result = subprocess.run(
        [str(script), "worker", "--tube", beanstalk.queue, "tasks.handle", "--burst"],
        capture_output=True, text=True, cwd=app, timeout=120,
        env=cli_env({"JOBWIRE_TEST_OUT": str(out), "BEANSTALK_URL": beanstalk.url}),
    )
    assert result.returncode == 0, result.stderr
    assert done(out) == ["env"]
