"""``jobwire workq ...`` as a user runs it (a subprocess; ``top`` in a tmux pane), against the
bundled Workq server; what the commands did is checked with ``workq_client.Client``."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from jobwire.testing import WorkqServer, wait_listening
from tests.cli.conftest import Terminal, cli_env, failed, ok, row, run_cli, wait_row
from tests.waiting import wait_until
from workq_client import Client, JobState

# The fixtures workq_server, workq_client and workq_name are jobwire's pytest plugin's.


@pytest.fixture
def url(workq_server: WorkqServer) -> str:
    return workq_server.url


@pytest.fixture
def client(workq_client: Client) -> Client:
    return workq_client


@pytest.fixture
def q(workq_name: str) -> str:
    return workq_name


def workq(url: str, *args: str, input: str | bytes | None = None,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cli("workq", *args, "--url", url, input=input, timeout=timeout)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- add ------------------------------------------------------------------------------------


def test_add_one_job_with_every_option(url: str, client: Client, q: str) -> None:
    job_id = str(uuid.uuid4())
    out = ok(workq(url, "add", q, "héllo", "--ttr", "5", "--ttl", "100", "--priority", "7",
                   "--max-attempts", "3", "--max-fails", "2", "--id", job_id))
    assert out.strip() == job_id
    job = client.inspect_job(job_id)
    assert (job.name, job.payload, job.ttr, job.ttl, job.priority) == (
        q, "héllo".encode(), 5.0, 100.0, 7)
    assert (job.max_attempts, job.max_fails, job.state) == (3, 2, JobState.NEW)


def test_add_makes_a_uuid4_and_prints_json(url: str, client: Client, q: str) -> None:
    data = json.loads(ok(workq(url, "add", q, "x", "--json")))
    assert data["name"] == q
    assert uuid.UUID(data["job_id"]).version == 4
    assert client.inspect_job(data["job_id"]).payload == b"x"


def test_add_one_job_per_line_of_stdin(url: str, client: Client, q: str) -> None:
    out = ok(workq(url, "add", q, "-", input=b"a\nb\n\nc \r\nd"))
    assert out.strip() == f"added 4 jobs to {q}"
    assert [j.payload for j in client.inspect_jobs(q)] == [b"a", b"b", b"c ", b"d"]


def test_add_many_lines_in_order(url: str, client: Client, q: str) -> None:
    lines = b"".join(b"job %d\n" % i for i in range(2500))  # three add_many calls
    data = json.loads(ok(workq(url, "add", q, "-", "--ttr", "7", "--json", input=lines)))
    assert data["added"] == 2500 and len(set(data["job_ids"])) == 2500
    assert client.inspect_queue(q).ready_len == 2500
    first = client.inspect_jobs(q, 0, 100)
    assert [j.payload for j in first] == [b"job %d" % i for i in range(100)]
    assert [j.job_id for j in first] == data["job_ids"][:100]
    assert {j.ttr for j in first} == {7.0}


def test_add_a_whole_file_as_one_job(url: str, client: Client, q: str, tmp_path: Path) -> None:
    path = tmp_path / "payload.bin"
    path.write_bytes(b"two\nlines\x00\xff")
    job_id = ok(workq(url, "add", q, "--file", str(path))).strip()
    assert client.inspect_job(job_id).payload == b"two\nlines\x00\xff"
    job_id = ok(workq(url, "add", q, "--file", "-", input=b"all\nof stdin")).strip()
    assert client.inspect_job(job_id).payload == b"all\nof stdin"


def test_a_line_too_long_stops_the_file_and_says_what_was_added(
    url: str, client: Client, q: str
) -> None:
    lines = b"one\ntwo\n" + b"x" * (1024 * 1024 + 1) + b"\nfour\n"
    line = failed(workq(url, "add", q, "-", input=lines), 2)
    assert "line 3:" in line and "2 jobs added before it" in line
    assert [j.payload for j in client.inspect_jobs(q)] == [b"one", b"two"]


def test_a_server_gone_mid_file_exits_3_and_says_what_was_added(q: str) -> None:
    port = unused_port()
    server = subprocess.Popen([sys.executable, "-m", "workq_client.server", "-listen",
                               f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    try:
        wait_listening(server, ("127.0.0.1", port), "the workq server", timeout=10)
        url = f"workq://127.0.0.1:{port}"
        cli = subprocess.Popen(
            [sys.executable, "-m", "jobwire", "workq", "add", q, "-", "--url", url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=cli_env(),
        )
        assert cli.stdin is not None
        cli.stdin.write(b"".join(b"%d\n" % i for i in range(1000)))  # one whole chunk
        cli.stdin.flush()
        with Client(url) as c:
            wait_until(lambda: c.inspect_queues() != [] and c.inspect_queue(q).ready_len >= 1000,
                       20, "the first chunk of 1000 jobs", interval=0.05)
    finally:
        server.terminate()
        server.wait()
    out, err = cli.communicate(b"more\n", timeout=30)
    assert cli.returncode == 3, (out, err)
    assert b"Traceback" not in err
    assert err.decode().strip().splitlines()[-1].endswith("(1000 jobs added before it)")


@pytest.mark.parametrize("args", [
    ["add", "QUEUE"],  # no payload
    ["add", "QUEUE", "x", "--file", "-"],  # both
    ["add", "QUEUE", "-", "--id", "f47ac10b-58cc-4372-a567-0e02b2c3d479"],
    ["add", "QUEUE", "-", "--max-attempts", "2"],
    ["add", "QUEUE", "x", "--ttr", "soon"],
])
def test_add_usage_errors_exit_2(url: str, q: str, args: list[str]) -> None:
    result = workq(url, *(q if a == "QUEUE" else a for a in args), input="")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr


def test_bad_arguments_the_client_refuses_exit_2(url: str, q: str) -> None:
    assert "job id" in failed(workq(url, "add", q, "x", "--id", "not-a-uuid"), 2)
    assert "name" in failed(workq(url, "add", "bad name", "x"), 2).lower()
    failed(workq(url, "add", q, "x", "--ttr", "0"), 2)


def test_a_duplicate_id_is_the_server_saying_no(url: str, q: str) -> None:
    job_id = str(uuid.uuid4())
    ok(workq(url, "add", q, "x", "--id", job_id))
    assert "Duplicate job" in failed(workq(url, "add", q, "x", "--id", job_id), 1)


# -- run ------------------------------------------------------------------------------------


def _answer(url: str, q: str, result: bytes, succeed: bool) -> threading.Thread:
    """A worker that leases one job of ``q`` and completes (or fails) it with ``result``."""

    def work() -> None:
        with Client(url) as c:
            job = c.lease(q, wait=30)
            (c.complete if succeed else c.fail)(job.job_id, result + b" for " + job.payload)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_run_prints_the_result_safely(url: str, q: str) -> None:
    worker = _answer(url, q, b"done [red]\x1b[2J", succeed=True)
    out = ok(workq(url, "run", q, "ping", "--timeout", "30"))
    worker.join(10)
    assert out == "done [red]\\x1b[2J for ping\n"
    assert "\x1b" not in out


def test_run_of_a_failed_job_exits_1_with_the_error(url: str, q: str) -> None:
    worker = _answer(url, q, b"boom", succeed=False)
    line = failed(workq(url, "run", q, "ping", "--timeout", "30"), 1)
    worker.join(10)
    assert re.fullmatch(r"jobwire: error: job [0-9a-f-]{36} failed: boom for ping", line)


def test_run_json_and_stdin(url: str, q: str) -> None:
    worker = _answer(url, q, b"\xff", succeed=False)
    result = workq(url, "run", q, "-", "--json", "--timeout", "30", input=b"from stdin")
    worker.join(10)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["success"] is False
    assert data["body_base64"] == "/yBmb3IgZnJvbSBzdGRpbg=="  # b"\xff for from stdin"


def test_run_with_no_worker_times_out_with_exit_1(url: str, client: Client, q: str) -> None:
    line = failed(workq(url, "run", q, "lonely", "--wait", "0.2"), 1)
    assert line.startswith("jobwire: error: timed out: ")
    assert "no worker took the job within --wait 0.2 s" in line
    assert client.inspect_queue(q).ready_len == 0  # the server dropped the job
    # --timeout, the old name of --wait, still works; it is no longer shown.
    line = failed(workq(url, "run", q, "lonely", "--timeout", "0.2"), 1)
    assert "within --wait 0.2 s" in line
    both = workq(url, "run", q, "lonely", "--timeout", "1", "--wait", "2")
    assert both.returncode == 2 and "--timeout is the old name of --wait" in both.stderr
    help_text = ok(run_cli("workq", "run", "--help"))
    assert "--wait" in help_text and "run(wait=)" in help_text
    assert "--timeout" not in help_text


# -- inspect --------------------------------------------------------------------------------


def test_inspect_job_shows_a_payload_safely(url: str, client: Client, q: str) -> None:
    payload = b"[bold]hi[/bold] [/] \x1b[31mred\x07 \\"
    job_id = client.add(q, payload, ttr=3, priority=-4)
    out = ok(workq(url, "inspect", "job", job_id))
    assert "\x1b" not in out and "\x07" not in out
    assert "[bold]hi[/bold] [/] \\x1b[31mred\\x07 \\\\" in out
    assert re.search(r"priority\s+-4\b", out) and re.search(r"ttr\s+3s\b", out)
    data = json.loads(ok(workq(url, "inspect", "job", job_id, "--json")))
    assert data["body"] == payload.decode() and data["payload_size"] == len(payload)
    assert (data["job_id"], data["name"], data["state"], data["ttr"]) == (job_id, q, "NEW", 3.0)


def test_inspect_job_with_a_binary_payload(url: str, client: Client, q: str) -> None:
    job_id = client.add(q, b"\x00\xfe\xff")
    assert "b'\\x00\\xfe\\xff'" in ok(workq(url, "inspect", "job", job_id))
    data = json.loads(ok(workq(url, "inspect", "job", job_id, "--json")))
    assert data["body_base64"] == "AP7/" and "body" not in data


def test_inspect_jobs_pages_with_cursor_and_limit(url: str, client: Client, q: str) -> None:
    ids = [client.add(q, b"job %d" % i) for i in range(5)]
    data = json.loads(ok(workq(url, "inspect", "jobs", q, "--cursor", "2", "--limit", "2",
                               "--json")))
    assert [j["job_id"] for j in data] == ids[2:4]
    assert [j["body"] for j in data] == ["job 2", "job 3"]
    out = ok(workq(url, "inspect", "jobs", q, "--cursor", "2", "--limit", "2"))
    assert ids[2] in out and ids[3] in out and ids[1] not in out and ids[4] not in out
    assert "more: --cursor 4" in out
    assert "more:" not in ok(workq(url, "inspect", "jobs", q))
    assert workq(url, "inspect", "jobs", q, "--limit", "101").returncode == 2


def test_inspect_scheduled_jobs(url: str, client: Client, q: str) -> None:
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    job_id = client.schedule(q, b"later", later)
    data = json.loads(ok(workq(url, "inspect", "scheduled-jobs", q, "--json")))
    assert [j["job_id"] for j in data] == [job_id]
    due = (later + timedelta(microseconds=999_999)).replace(microsecond=0)  # rounded up
    assert data[0]["time"] == due.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert job_id in ok(workq(url, "inspect", "scheduled-jobs", q))


def test_inspect_queue_and_queues(url: str, client: Client, q: str) -> None:
    client.add(q, b"a")
    client.add(q, b"b")
    client.schedule(q, b"c", datetime.now(timezone.utc) + timedelta(hours=1))
    assert json.loads(ok(workq(url, "inspect", "queue", q, "--json"))) == {
        "name": q, "ready": 2, "scheduled": 1}
    assert re.search(r"ready\s+2\b", ok(workq(url, "inspect", "queue", q)))
    # The session's server holds every other test's queues too: page (100 a page) to ours.
    cursor, rows = 0, []
    while page := json.loads(ok(workq(url, "inspect", "queues", "--cursor", str(cursor),
                                      "--json"))):
        if any(row["name"] == q for row in page):
            rows = page
            break
        cursor += len(page)
    assert {"name": q, "ready": 2, "scheduled": 1} in rows
    assert re.search(rf"{q}\s*│\s*2\s*│\s*1\s*│",
                     ok(workq(url, "inspect", "queues", "--cursor", str(cursor))))


def test_inspect_server(url: str) -> None:
    data = json.loads(ok(workq(url, "inspect", "server", "--json")))
    assert data["active_clients"] >= 1 and data["evicted_jobs"] >= 0
    assert datetime.strptime(data["started"], "%Y-%m-%dT%H:%M:%SZ")
    assert re.search(r"active-clients\s+\d+", ok(workq(url, "inspect", "server")))


def test_not_found_exits_1(url: str, q: str) -> None:
    missing = str(uuid.uuid4())
    assert failed(workq(url, "inspect", "job", missing), 1) == \
        f"jobwire: error: no job '{missing}'"
    assert failed(workq(url, "inspect", "queue", q), 1) == f"jobwire: error: no queue '{q}'"
    failed(workq(url, "inspect", "jobs", q), 1)


# -- addresses and errors -------------------------------------------------------------------


def test_cannot_connect_exits_3() -> None:
    url = f"workq://127.0.0.1:{unused_port()}"
    assert "ConnectFailed" in failed(run_cli("workq", "inspect", "server", "--url", url), 3)


def test_a_bad_url_exits_2() -> None:
    line = failed(run_cli("workq", "inspect", "server", "--url", "http://127.0.0.1:1"), 2)
    assert "workq://" in line


def test_the_url_comes_from_WORKQ_URL(url: str, q: str, client: Client) -> None:
    result = run_cli("workq", "add", q, "from env", env={"WORKQ_URL": url})
    assert client.inspect_job(ok(result).strip()).payload == b"from env"


def test_debug_shows_the_traceback() -> None:
    url = f"workq://127.0.0.1:{unused_port()}"
    result = run_cli("workq", "inspect", "server", "--url", url, "--debug")
    assert result.returncode == 3 and "Traceback" in result.stderr


# -- top ------------------------------------------------------------------------------------


def test_top_shows_the_queues_live_and_ends_on_ctrl_c(
    url: str, client: Client, terminal: Callable[..., Terminal]
) -> None:
    q = f"top-{uuid.uuid4().hex[:8]}"  # short: a pane may be 80 columns wide
    for i in range(3):
        client.add(q, b"%d" % i)
    client.schedule(q, b"later", datetime.now(timezone.utc) + timedelta(hours=1))
    term: Terminal = terminal("workq", "top", "--url", url, "--interval", "0.2")
    wait_row(term, q, ["3", "1"])
    assert f"workq {url}" in term.screen()
    client.add(q, b"3")
    client.add(q, b"4")
    wait_row(term, q, ["5", "1"])
    client.lease(q, wait=1)
    wait_row(term, q, ["4", "1"])
    term.keys("C-c")
    screen = term.wait_for("EXIT=")
    assert "EXIT=0" in screen and "Traceback" not in screen


def test_top_json_prints_one_line_per_poll(url: str, client: Client, q: str) -> None:
    client.add(q, b"x")
    out = ok(workq(url, "top", "--json", "--count", "2", "--interval", "0.1"))
    polls = [json.loads(line) for line in out.splitlines()]
    assert len(polls) == 2
    assert all(p["rows"][q] == {"ready": 1, "scheduled": 0} for p in polls)


def test_top_on_a_pipe_prints_tables(url: str, client: Client, q: str) -> None:
    client.add(q, b"x")
    out = ok(workq(url, "top", "--count", "2", "--interval", "0.1"))
    assert out.count(q) == 2
    assert row(out, q)[1:3] == ["1", "0"]


def test_add_typed_on_a_terminal_goes_out_line_by_line_under_a_progress_bar(
    url: str, client: Client, q: str, terminal: Callable[..., Terminal]
) -> None:
    term: Terminal = terminal("workq", "add", q, "-", "--url", url)
    term.keys("first", "Enter", "second", "Enter")
    term.wait_for(" 2 jobs")  # the progress bar counts them before the input ends
    assert [j.payload for j in client.inspect_jobs(q)] == [b"first", b"second"]
    term.keys("C-d")
    screen = term.wait_for("EXIT=")
    assert f"added 2 jobs to {q}" in screen and "EXIT=0" in screen
