"""``jobwire qless ...`` as a user runs it (a subprocess; ``top`` in a tmux pane), against a
real redis-server; what the commands did is checked with ``qless_client.Client``."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Callable

import pytest

from jobwire.testing import RedisServer
from qless_client import Client
from tests.cli.conftest import Terminal, failed, ok, run_cli, wait_row

# The fixtures redis_server, qless_client (on a flushed database) and qless_queue are jobwire's
# pytest plugin's.


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def client(qless_client: Client) -> Client:
    return qless_client


@pytest.fixture
def q(qless_queue: str) -> str:
    return qless_queue


def qless(url: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("qless", *args, "--url", url, input=input)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fail_jobs(client: Client, q: str, group: str, n: int) -> list[str]:
    """Put ``n`` jobs into ``q``, pop them and fail them in ``group``, in the order of their
    jids (the order they are failed in, the oldest failure first)."""
    jids = [client.queue(q).put("app.Job", {"n": i}, jid=f"{q}-{i}") for i in range(n)]
    for job in sorted(client.queue(q).pop(n), key=lambda job: job.jid):
        job.fail(group, f"boom {job.data['n']}\nTraceback: ...")
    return jids


# -- put, get -------------------------------------------------------------------------------


def test_put_with_every_option_then_get(url: str, client: Client, q: str) -> None:
    dep = client.queue(q).put("app.First")
    out = ok(qless(url, "put", q, "app.Hello", '{"to": "a@example.com", "n": [1, 2]}',
                   "--jid", f"{q}-job", "--priority", "-3", "--tag", "t1", "--tag", "t2",
                   "--retries", "2", "--depends", dep))
    assert out.strip() == f"{q}-job"
    job = client.get(f"{q}-job")
    assert job is not None
    assert (job.klass, job.queue, job.state, job.priority, job.retries) == (
        "app.Hello", q, "depends", -3, 2)
    assert job.data == {"to": "a@example.com", "n": [1, 2]}
    assert job.tags == ["t1", "t2"] and job.dependencies == [dep]

    data = json.loads(ok(qless(url, "get", f"{q}-job", "--json")))
    assert data["data"] == {"to": "a@example.com", "n": [1, 2]}
    assert (data["jid"], data["state"], data["queue"], data["tags"]) == (
        f"{q}-job", "depends", q, ["t1", "t2"])
    out = ok(qless(url, "get", f"{q}-job"))
    assert re.search(r"klass\s+app\.Hello", out) and re.search(r"state\s+depends", out)
    assert re.search(rf"dependencies\s+{dep}", out)


def test_put_delay_and_data_from_stdin(url: str, client: Client, q: str) -> None:
    jid = ok(qless(url, "put", q, "app.Later", "-", "--delay", "600", input='["x", 1]')).strip()
    job = client.get(jid)
    assert job is not None and (job.state, job.data) == ("scheduled", ["x", 1])


def test_put_json_output(url: str, client: Client, q: str) -> None:
    data = json.loads(ok(qless(url, "put", q, "app.K", "null", "--json")))
    assert data["queue"] == q and re.fullmatch(r"[0-9a-f]{32}", data["jid"])
    job = client.get(data["jid"])
    assert job is not None and job.data is None


def test_put_refuses_data_that_is_not_json(url: str, client: Client, q: str) -> None:
    result = qless(url, "put", q, "app.K", "{not json")
    assert result.returncode == 2 and "not JSON" in result.stderr
    assert "Traceback" not in result.stderr
    assert client.queues() == []  # a flushed database: nothing was put


def test_get_shows_data_safely(url: str, client: Client, q: str) -> None:
    jid = client.queue(q).put("app.[red]K[/]", {"s": "[/] \x1b[2J \x9b"})
    out = ok(qless(url, "get", jid))
    assert "\x1b" not in out and "\x9b" not in out
    assert "app.[red]K[/]" in out
    assert '{"s":"[/] \\u001b[2J \\u009b"}' in out  # still JSON, nothing a terminal acts on


def test_get_of_a_missing_job_exits_1(url: str) -> None:
    assert failed(qless(url, "get", "no-such-jid"), 1) == "jobwire: error: no job 'no-such-jid'"


# -- queues, jobs ---------------------------------------------------------------------------


def test_queues_counts_every_state(url: str, client: Client, q: str) -> None:
    queue = client.queue(q)
    for _ in range(3):
        queue.put("app.K")
    queue.put("app.K", delay=600)
    blocker = queue.put("app.K")
    queue.put("app.K", depends=[blocker])
    queue.recur("app.K", interval=3600, offset=3600)
    queue.pop()  # the oldest waiting job: running
    expected = {"name": q, "waiting": 3, "running": 1, "stalled": 0, "scheduled": 1,
                "depends": 1, "recurring": 1, "paused": False}
    rows = json.loads(ok(qless(url, "queues", "--json")))
    assert expected in rows
    line = next(x for x in ok(qless(url, "queues")).splitlines() if q in x)
    assert [c.strip() for c in line.split("│")[2:-1]] == ["3", "1", "0", "1", "1", "1", ""]
    client.queue(q).pause()
    line = next(x for x in ok(qless(url, "queues")).splitlines() if q in x)
    assert line.split("│")[-2].strip() == "yes"


def test_jobs_by_state(url: str, client: Client, q: str) -> None:
    queue = client.queue(q)
    waiting = [queue.put("app.K", jid=f"{q}-w{i}") for i in range(3)]
    scheduled = queue.put("app.K", delay=600)
    depends = queue.put("app.K", depends=[waiting[2]])
    recurring = queue.recur("app.K", interval=3600, offset=3600)
    running = queue.pop()
    assert running is not None and running.jid == waiting[0]
    # a worker whose clock is an hour behind took this one: its lock ran out long ago
    with Client(url, worker_name="late", clock=lambda: time.time() - 3600) as late:
        stalled = late.queue(q).pop()
        assert stalled is not None
    assert ok(qless(url, "jobs", "waiting", q)).split() == [waiting[2]]
    assert ok(qless(url, "jobs", "running", q)).split() == [running.jid]
    assert ok(qless(url, "jobs", "stalled", q)).split() == [stalled.jid]
    assert ok(qless(url, "jobs", "scheduled", q)).split() == [scheduled]
    assert ok(qless(url, "jobs", "depends", q)).split() == [depends]
    assert ok(qless(url, "jobs", "recurring", q)).split() == [recurring]
    assert json.loads(ok(qless(url, "jobs", "waiting", q, "--json"))) == [waiting[2]]
    running.complete()
    assert running.jid in json.loads(ok(qless(url, "jobs", "completed", "--count", "100",
                                              "--json")))
    assert running.jid in ok(qless(url, "jobs", "complete", "--count", "100")).split()


def test_jobs_pages(url: str, client: Client, q: str) -> None:
    jids = [client.queue(q).put("app.K", jid=f"{q}-{i}") for i in range(5)]
    assert ok(qless(url, "jobs", "waiting", q, "--offset", "1", "--count", "2")).split() == \
        jids[1:3]
    assert ok(qless(url, "jobs", "running", q)) == ""  # none: nothing printed
    assert json.loads(ok(qless(url, "jobs", "running", q, "--json"))) == []


@pytest.mark.parametrize("args", [["jobs", "waiting"], ["jobs", "complete", "QUEUE"],
                                  ["jobs", "lost", "QUEUE"], ["failed", "--count", "0"]])
def test_usage_errors_exit_2(url: str, q: str, args: list[str]) -> None:
    result = qless(url, *(q if a == "QUEUE" else a for a in args))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr


# -- failed, retry, unfail ------------------------------------------------------------------


def test_failed_counts_and_jobs_of_a_group(url: str, client: Client, q: str) -> None:
    group = f"{q}-group"
    jids = fail_jobs(client, q, group, 3)
    assert json.loads(ok(qless(url, "failed", "--json")))[group] == 3
    assert re.search(rf"{group}\s*│\s*3\s*│", ok(qless(url, "failed")))
    data = json.loads(ok(qless(url, "failed", group, "--count", "2", "--json")))
    assert data["total"] == 3 and data["group"] == group
    assert [j["jid"] for j in data["jobs"]] == [jids[2], jids[1]]  # newest first
    assert data["jobs"][0]["failure"]["message"] == "boom 2\nTraceback: ..."
    out = ok(qless(url, "failed", group))
    assert f"{group}: 3 failed" in out and "boom 2\\nTraceback: ..." in out
    assert all(jid in out for jid in jids)


def test_retry_puts_a_failed_job_back(url: str, client: Client, q: str) -> None:
    [jid] = fail_jobs(client, q, f"{q}-group", 1)
    assert ok(qless(url, "retry", jid)).strip() == f"{jid} -> {q}"
    job = client.get(jid)
    assert job is not None and (job.state, job.queue, job.data) == ("waiting", q, {"n": 0})
    assert f"{q}-group" not in client.failed()


def test_retry_into_another_queue_with_a_delay(url: str, client: Client, q: str) -> None:
    [jid] = fail_jobs(client, q, f"{q}-group", 1)
    data = json.loads(ok(qless(url, "retry", jid, "--queue", f"{q}-b", "--delay", "600",
                               "--json")))
    assert data == [{"jid": jid, "queue": f"{q}-b"}]
    job = client.get(jid)
    assert job is not None and (job.state, job.queue) == ("scheduled", f"{q}-b")


def test_retry_refuses_jobs_that_did_not_fail(url: str, client: Client, q: str) -> None:
    [failed_jid] = fail_jobs(client, q, f"{q}-group", 1)
    waiting = client.queue(q).put("app.K")
    line = failed(qless(url, "retry", failed_jid, waiting), 1)
    assert line == f"jobwire: error: job {waiting} is waiting, not failed"
    failed_job = client.get(failed_jid)
    assert failed_job is not None and failed_job.state == "failed"  # none moved
    assert failed(qless(url, "retry", "nope"), 1) == "jobwire: error: no job 'nope'"


def test_unfail_moves_the_oldest_failures(url: str, client: Client, q: str) -> None:
    group = f"{q}-group"
    jids = fail_jobs(client, q, group, 3)
    assert ok(qless(url, "unfail", group, q, "--count", "2")).strip() == \
        f"2 jobs moved from {group} to {q}"
    assert client.failed()[group] == 1
    assert sorted(job.jid for job in client.queue(q).peek(5)) == jids[:2]
    assert json.loads(ok(qless(url, "unfail", group, q, "--json"))) == {
        "group": group, "queue": q, "moved": 1}
    assert group not in client.failed()


# -- config ---------------------------------------------------------------------------------


def test_config_get_set_unset(url: str, client: Client, q: str) -> None:
    option = f"{q}-option"
    everything = json.loads(ok(qless(url, "config", "get", "--json")))
    assert everything["heartbeat"] == "60" and option not in everything
    assert re.search(r"jobs-history-count\s+50000", ok(qless(url, "config", "get")))
    assert ok(qless(url, "config", "get", "stats-history")).strip() == "30"
    assert failed(qless(url, "config", "get", option), 1) == \
        f"jobwire: error: option '{option}' is not set and has no default"
    ok(qless(url, "config", "set", option, "some value"))
    assert client.config_get(option) == "some value"
    assert json.loads(ok(qless(url, "config", "get", option, "--json"))) == {
        option: "some value"}
    ok(qless(url, "config", "set", f"{q}-heartbeat", "5"))
    assert client.queue(q).heartbeat() == 5
    ok(qless(url, "config", "unset", option))
    ok(qless(url, "config", "unset", f"{q}-heartbeat"))
    assert client.config_get(option) is None and client.queue(q).heartbeat() == 60


def test_config_set_of_text_to_a_number_option_exits_2(url: str, client: Client) -> None:
    # qless-core would store it, and every pop of every binding would then fail
    line = failed(qless(url, "config", "set", "heartbeat", "soon"), 2)
    assert "heartbeat is not a number" in line
    assert client.config_get("heartbeat") == "60"


# -- addresses and errors -------------------------------------------------------------------


def test_cannot_connect_exits_3() -> None:
    url = f"redis://127.0.0.1:{unused_port()}"
    assert "ConnectFailed" in failed(run_cli("qless", "queues", "--url", url), 3)


def test_a_bad_url_exits_2() -> None:
    assert "redis://" in failed(run_cli("qless", "queues", "--url", "http://127.0.0.1:1"), 2)


def test_the_url_comes_from_QLESS_URL_and_may_be_a_unix_socket(
    redis_server: RedisServer, client: Client, q: str
) -> None:
    if not redis_server.unix_path:
        pytest.skip("this Redis server has no unix socket of ours")
    unix = redis_server.unix_url
    jid = ok(run_cli("qless", "put", q, "app.K", "{}", env={"QLESS_URL": unix})).strip()
    job = client.get(jid)
    assert job is not None and job.queue == q


# -- top ------------------------------------------------------------------------------------


def test_top_shows_the_queues_live_and_ends_on_ctrl_c(
    url: str, client: Client, terminal: Callable[..., Terminal]
) -> None:
    q = f"top-{uuid.uuid4().hex[:8]}"  # short: a pane may be 80 columns wide
    queue = client.queue(q)
    for _ in range(4):
        queue.put("app.K")
    queue.put("app.K", delay=600)
    term: Terminal = terminal("qless", "top", "--url", url, "--interval", "0.2")
    # waiting running stalled scheduled depends recurring failed
    wait_row(term, q, ["4", "0", "0", "1", "0", "0", "0"])
    assert "popped/s" in term.screen() and "completed/s" in term.screen()
    job = queue.pop()
    assert job is not None
    queue.put("app.K")
    wait_row(term, q, ["4", "1", "0", "1", "0", "0", "0"])
    job.fail(f"{q}-group", "boom")
    wait_row(term, q, ["4", "0", "0", "1", "0", "0", "1"])
    term.keys("C-c")
    screen = term.wait_for("EXIT=")
    assert "EXIT=0" in screen and "Traceback" not in screen


def test_top_json_counts_what_was_popped_and_completed_today(
    url: str, client: Client, q: str
) -> None:
    queue = client.queue(q)
    for _ in range(3):
        queue.put("app.K")
    for job in queue.pop(2):
        job.complete()
    out = ok(qless(url, "top", "--json", "--count", "2", "--interval", "0.1"))
    polls = [json.loads(line) for line in out.splitlines()]
    assert len(polls) == 2
    for poll in polls:
        assert poll["rows"][q] == {"waiting": 1, "running": 0, "stalled": 0, "scheduled": 0,
                                   "depends": 0, "recurring": 0, "failed": 0, "popped": 2,
                                   "completed": 2}


def test_top_on_a_pipe_prints_tables_with_rates(url: str, client: Client, q: str) -> None:
    client.queue(q).put("app.K")
    out = ok(qless(url, "top", "--count", "2", "--interval", "0.1"))
    assert out.count(q) == 2
    first, second = (line for line in out.splitlines() if q in line)
    assert [c.strip() for c in first.split("│")[2:-1]] == ["1", "0", "0", "0", "0", "0", "0",
                                                            "-", "-"]
    assert [c.strip() for c in second.split("│")[2:-1]] == ["1", "0", "0", "0", "0", "0", "0",
                                                             "0.0", "0.0"]
