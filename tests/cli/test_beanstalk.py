"""``jobwire beanstalk ...`` run as a user runs it (a subprocess, or a tmux pane for ``top``),
against the bundled server and the real beanstalkd; the server's state afterwards is read
back with the library's client."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from beanstalk_client import DEFAULT_PRIORITY, DEFAULT_TTR, Client, NotFound, TimedOut

from ..conftest import BeanstalkServer
from .conftest import Terminal, cli_env, row, run_cli, wait_row


def bs(server: BeanstalkServer, *args: str, input: bytes | str | None = None,
       ) -> subprocess.CompletedProcess[str]:
    return run_cli("beanstalk", *args, "--url", server.url, input=input)


def ready_bodies(server: BeanstalkServer, tube: str) -> list[bytes]:
    """The bodies of ``tube``'s ready jobs in the order a worker gets them (reserved, then
    given back when the connection closes)."""
    bodies = []
    with Client(server.url) as client:
        client.watch(tube)
        client.ignore("default")
        while True:
            try:
                bodies.append(client.reserve(0).body)
            except TimedOut:
                return bodies


def counts(server: BeanstalkServer, tube: str) -> dict[str, int]:
    """ready/reserved/delayed/buried of ``tube`` (all 0 once the server dropped it)."""
    with Client(server.url) as client:
        try:
            stats = client.stats_tube(tube)
        except NotFound:
            return {"ready": 0, "reserved": 0, "delayed": 0, "buried": 0}
    return {k: int(stats[f"current-jobs-{k}"])  # type: ignore[literal-required]
            for k in ("ready", "reserved", "delayed", "buried")}


# -- put --------------------------------------------------------------------------------------


def test_put_one_job_per_line_of_stdin(server: BeanstalkServer, tube: str) -> None:
    lines = [f"job {i} é" for i in range(1000)]
    done = bs(server, "put", "-", "--tube", tube, input="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"put 1000 jobs into tube {tube}")
    assert done.stderr == ""  # no progress bar on a pipe
    assert ready_bodies(server, tube) == [line.encode() for line in lines]


def test_put_skips_empty_lines_and_strips_crlf(server: BeanstalkServer, tube: str) -> None:
    done = bs(server, "put", "-", "--tube", tube, "--json", input=b"a\r\n\n\nb\nc")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["count"] == 3 and len(out["ids"]) == 3 and out["tube"] == tube
    assert ready_bodies(server, tube) == [b"a", b"b", b"c"]


def test_put_body_and_options(server: BeanstalkServer, tube: str) -> None:
    done = bs(server, "put", "hello", "--tube", tube, "--priority", "7", "--delay", "100",
              "--ttr", "33", "--json")
    assert done.returncode == 0, done.stderr
    (job_id,) = json.loads(done.stdout)["ids"]
    with Client(server.url) as client:
        stats = client.stats_job(job_id)
        assert client.peek(job_id).body == b"hello"
    assert (stats["tube"], stats["pri"], stats["delay"], stats["ttr"], stats["state"]) == (
        tube, 7, 100, 33, "delayed")


def test_put_defaults_are_the_clients(server: BeanstalkServer, tube: str) -> None:
    done = bs(server, "put", "x", "--tube", tube, "--json")
    (job_id,) = json.loads(done.stdout)["ids"]
    with Client(server.url) as client:
        stats = client.stats_job(job_id)
    assert (stats["pri"], stats["ttr"], stats["delay"]) == (DEFAULT_PRIORITY, DEFAULT_TTR, 0)
    helped = bs(server, "put", "--help").stdout
    assert f"default: {DEFAULT_PRIORITY}," in helped and f"default: {DEFAULT_TTR}," in helped


def test_put_file_is_one_binary_job(server: BeanstalkServer, tube: str, tmp_path: Path) -> None:
    body = bytes(range(256)) * 4 + b"\r\n\x00end"
    path = tmp_path / "job.bin"
    path.write_bytes(body)
    done = bs(server, "put", "--file", str(path), "--tube", tube)
    assert done.returncode == 0, done.stderr
    assert ready_bodies(server, tube) == [body]


def test_put_refused_line_exits_1_and_counts(server: BeanstalkServer, tube: str) -> None:
    big = b"x" * (server.max_job_size + 1)
    done = bs(server, "put", "-", "--tube", tube, input=b"a\n\nb\n" + big + b"\nc\n")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "line 4: " in done.stderr and "JOB_TOO_BIG" in done.stderr  # blank lines count
    assert "3 jobs put" in done.stderr
    assert ready_bodies(server, tube) == [b"a", b"b", b"c"]


def test_put_needs_exactly_one_source(server: BeanstalkServer, tmp_path: Path) -> None:
    assert bs(server, "put").returncode == 2
    (tmp_path / "f").write_bytes(b"x")
    both = bs(server, "put", "body", "--file", str(tmp_path / "f"))
    assert both.returncode == 2 and "Usage" in both.stderr


@pytest.mark.parametrize("args", [["--priority", "-1"], ["--ttr", "4294967296"],
                                  ["--tube", "bad tube"]])
def test_put_bad_values_exit_2(server: BeanstalkServer, args: list[str]) -> None:
    done = bs(server, "put", "x", *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr


def test_put_in_a_terminal_shows_the_count(
    server: BeanstalkServer, tube: str, terminal: Callable[..., Terminal]
) -> None:
    """With stdin and stderr a terminal, lines are put as they are typed, under a progress
    bar; Ctrl-D ends the input and the count is printed."""
    pane = terminal("beanstalk", "put", "-", "--tube", tube, "--url", server.url)
    pane.keys("one", "Enter", "two", "Enter")
    pane.wait_for("put 2 jobs")  # the progress bar's count, before the input ends
    pane.keys("C-d")
    screen = pane.wait_for("EXIT=")
    assert "EXIT=0" in screen and f"put 2 jobs into tube {tube}" in screen
    assert ready_bodies(server, tube) == [b"one", b"two"]


# -- stats, tubes -----------------------------------------------------------------------------


def test_stats_and_stats_tube(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        client.put(b"a")
        client.put(b"b", priority=1)
    stats = json.loads(bs(server, "stats", "--json").stdout)
    assert stats["current-jobs-ready"] >= 2 and isinstance(stats["version"], str)
    text = bs(server, "stats")
    assert text.returncode == 0 and "current-connections" in text.stdout
    one = json.loads(bs(server, "stats-tube", tube, "--json").stdout)
    assert (one["name"], one["current-jobs-ready"], one["current-jobs-urgent"]) == (tube, 2, 1)
    shown = bs(server, "stats-tube", tube).stdout
    assert "current-jobs-ready" in shown and tube in shown


def test_stats_tube_not_found_exits_1(server: BeanstalkServer, tube: str) -> None:
    done = bs(server, "stats-tube", tube)
    assert done.returncode == 1
    assert done.stderr == f"jobwire: error: NOT_FOUND: no tube {tube}\n"


def test_tubes_lists_counts(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        client.put(b"r")
        client.put(b"d", delay=100)
    rows = json.loads(bs(server, "tubes", "--json").stdout)
    (mine,) = [r for r in rows if r["name"] == tube]
    assert (mine["current-jobs-ready"], mine["current-jobs-delayed"]) == (1, 1)
    table = bs(server, "tubes").stdout
    cells = row(table, tube)
    assert cells[1:5] == ["1", "0", "1", "0"]  # ready, reserved, delayed, buried


# -- peek, kick, delete, pause ----------------------------------------------------------------


def test_peek_each_state_and_id(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        ready = client.put(b"ready job")
        delayed = client.put(b"later", delay=100)
        client.put(b"to bury")
        client.watch(tube)
        client.ignore("default")
        client.reserve(0)  # "ready job"
        buried = client.reserve(0)
        client.bury(buried)
        client.release(ready)
    for which, job_id, body in [("ready", ready, "ready job"), ("delayed", delayed, "later"),
                                ("buried", buried.id, "to bury"), (str(delayed), delayed,
                                                                   "later")]:
        out = json.loads(bs(server, "peek", which, "--tube", tube, "--json").stdout)
        assert (out["id"], out["body"], out["stats"]["tube"]) == (job_id, body, tube)
        text = bs(server, "peek", which, "--tube", tube)
        assert text.returncode == 0 and f"body: {body}\n" in text.stdout
    assert json.loads(bs(server, "peek", "buried", "--tube", tube, "--json").stdout)[
        "stats"]["state"] == "buried"


def test_peek_binary_and_control_bodies_are_shown_safely(
    server: BeanstalkServer, tube: str
) -> None:
    with Client(server.url) as client:
        client.use(tube)
        binary = client.put(b"\xff\xfe\x00bin")
        control = client.put(b"clear\x1b[2J[/]\nnext")
    out = json.loads(bs(server, "peek", str(binary), "--json").stdout)
    assert out["body_base64"] == "//4AYmlu" and "body" not in out
    text = bs(server, "peek", str(binary)).stdout
    assert "body: b'\\xff\\xfe\\x00bin'" in text
    shown = bs(server, "peek", str(control))
    assert shown.returncode == 0
    assert "\x1b" not in shown.stdout
    assert "body: clear\\x1b[2J[/]\\nnext\n" in shown.stdout
    assert json.loads(bs(server, "peek", str(control), "--json").stdout)["body"] == (
        "clear\x1b[2J[/]\nnext")


def test_peek_nothing_exits_1(server: BeanstalkServer, tube: str) -> None:
    done = bs(server, "peek", "buried", "--tube", tube)
    assert done.returncode == 1
    assert done.stderr == f"jobwire: error: NOT_FOUND: no buried job in tube {tube}\n"
    assert bs(server, "peek", "999999999").returncode == 1
    assert bs(server, "peek", "soon").returncode == 2


def test_kick_and_kick_job(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        ids = [client.put(b"%d" % i, delay=100) for i in range(3)]
    done = bs(server, "kick", "2", "--tube", tube, "--json")
    assert json.loads(done.stdout) == {"tube": tube, "kicked": 2}
    assert counts(server, tube) == {"ready": 2, "reserved": 0, "delayed": 1, "buried": 0}
    assert bs(server, "kick-job", str(ids[2])).stdout == f"kicked job {ids[2]}\n"
    assert counts(server, tube)["ready"] == 3
    again = bs(server, "kick-job", str(ids[2]))  # ready now: neither buried nor delayed
    assert again.returncode == 1 and "NOT_FOUND" in again.stderr


def test_delete_ids(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        a, b, c = (client.put(x) for x in (b"a", b"b", b"c"))
    done = bs(server, "delete", str(a), str(c))
    assert done.returncode == 0 and done.stdout == f"deleted 2 jobs: {a} {c}\n"
    assert ready_bodies(server, tube) == [b"b"]
    partial = bs(server, "delete", str(a), str(b), "--json")
    assert partial.returncode == 1
    assert json.loads(partial.stdout) == {"deleted": [b], "not_found": [a]}
    assert partial.stderr.startswith(f"jobwire: error: NOT_FOUND: {a} ")
    assert counts(server, tube)["ready"] == 0


def test_pause(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        client.put(b"x")
        done = bs(server, "pause", tube, "60")
        assert done.returncode == 0, done.stderr
        stats = client.stats_tube(tube)
        assert stats["pause"] == 60 and stats["pause-time-left"] > 0
        assert bs(server, "pause", tube, "0").returncode == 0
        assert client.stats_tube(tube)["pause"] == 0
    assert bs(server, "pause", tube + "-none", "5").returncode == 1


# -- drain ------------------------------------------------------------------------------------


def fill(server: BeanstalkServer, tube: str) -> Client:
    """Ready, delayed, buried and one reserved job in ``tube``; the returned client holds the
    reserved one."""
    client = Client(server.url)
    client.use(tube)
    client.put_many([b"r%d" % i for i in range(600)])  # more than one round of reserves
    client.put_many([b"d%d" % i for i in range(20)], delay=100)
    client.watch(tube)
    client.ignore("default")
    for _ in range(10):
        client.bury(client.reserve(0))
    client.reserve(0)  # held: a drain cannot delete it
    return client


def test_drain_deletes_ready_delayed_and_buried(server: BeanstalkServer, tube: str) -> None:
    holder = fill(server, tube)
    try:
        assert counts(server, tube) == {"ready": 589, "reserved": 1, "delayed": 20,
                                        "buried": 10}
        done = bs(server, "drain", tube, "--yes")
        assert done.returncode == 0, done.stderr
        assert done.stdout == (f"deleted 619 jobs from tube {tube}; 1 reserved jobs left with "
                               "their workers\n")
        assert counts(server, tube) == {"ready": 0, "reserved": 1, "delayed": 0, "buried": 0}
    finally:
        holder.close()
    assert counts(server, tube)["ready"] == 1  # the reserved one came back
    assert json.loads(bs(server, "drain", tube, "-y", "--json").stdout) == {
        "tube": tube, "deleted": 1, "reserved": 0}
    assert counts(server, tube) == {"ready": 0, "reserved": 0, "delayed": 0, "buried": 0}


@pytest.mark.parametrize("case", ["paused", "ttr 1"])
def test_drain_jobs_a_reserve_cannot_take(server: BeanstalkServer, tube: str, case: str) -> None:
    """A paused tube hands out no jobs, and a connection holding a job whose TTR is 1 s gets
    DEADLINE_SOON instead of more: the peeks delete those."""
    with Client(server.url) as client:
        client.use(tube)
        client.put_many([b"x"] * 30, ttr=1 if case == "ttr 1" else 60)
        if case == "paused":
            client.pause_tube(tube, 100)
        done = bs(server, "drain", tube, "--yes")
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"deleted 30 jobs from tube {tube}\n"
    assert counts(server, tube)["ready"] == 0


def terminal_output(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    """Run ``python -m jobwire ARGS`` with stderr on a pseudo-terminal (stdout a pipe, stdin
    empty): its exit status, stdout, and every byte it wrote to the terminal (redraws
    included, escape sequences removed)."""
    master, slave = pty.openpty()
    env = cli_env({"TERM": "xterm-256color"})
    proc = subprocess.Popen([sys.executable, "-m", "jobwire", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    written = bytearray()
    try:
        while select.select([master], [], [], timeout)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal (it exited)
                break
            if not chunk:
                break
            written += chunk
        out, _ = proc.communicate(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "",
                  written.decode("utf-8", "replace"))
    return proc.returncode, out.decode(), text


def test_drain_in_a_terminal_shows_its_progress(server: BeanstalkServer, tube: str) -> None:
    """On a terminal a drain draws a progress bar that counts the deleted jobs round by round
    (a drain of 300k jobs takes tens of seconds); on a pipe it draws nothing."""
    with Client(server.url) as client:
        client.use(tube)
        client.put_many([b"x"] * 600)
        client.put_many([b"d"] * 5, delay=100)
    code, out, drawn = terminal_output("beanstalk", "drain", tube, "--yes", "--url", server.url)
    assert code == 0, drawn
    assert out == f"deleted 605 jobs from tube {tube}\n"
    # Each round of reserves (256 at a time) and each round of peeks redraws the count.
    for count in (256, 512, 600, 605):
        assert f"deleted {count} of 605 jobs" in drawn, drawn
    assert counts(server, tube)["ready"] == 0


def test_drain_asks_first(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        client.put_many([b"a", b"b"])
    declined = bs(server, "drain", tube, input="n\n")
    assert declined.returncode == 1
    assert f"Delete every job of tube {tube} (ready 2, delayed 0, buried 0)?" in declined.stderr
    no_answer = bs(server, "drain", tube, input="")
    assert no_answer.returncode == 1
    assert counts(server, tube)["ready"] == 2
    accepted = bs(server, "drain", tube, input="y\n")
    assert accepted.returncode == 0 and f"deleted 2 jobs from tube {tube}" in accepted.stdout
    assert counts(server, tube)["ready"] == 0


def test_drain_of_no_tube_deletes_nothing(server: BeanstalkServer, tube: str) -> None:
    done = bs(server, "drain", tube)  # no prompt: nothing to delete
    assert done.returncode == 0 and done.stdout == f"deleted 0 jobs (there is no tube {tube})\n"


# -- top --------------------------------------------------------------------------------------


def test_top_json_and_pipe(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url) as client:
        client.use(tube)
        client.put_many([b"1", b"2", b"3"])
        done = bs(server, "top", "--json", "-n", "2", "-i", "0.1")
        assert done.returncode == 0, done.stderr
        polls = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(polls) == 2
        assert polls[1]["rows"][tube]["current-jobs-ready"] == 3
        piped = bs(server, "top", "-n", "2", "-i", "0.1")
        assert piped.returncode == 0
        assert piped.stdout.count(f"beanstalkd {server.url.split('//')[1]}") == 2
        assert row(piped.stdout, tube)[1] == "3"


def test_top_in_a_terminal(
    fresh_server: BeanstalkServer, tube: str, terminal: Callable[..., Terminal]
) -> None:
    """The live table shows the tubes with their counts, follows changes, and Ctrl-C ends
    it with status 0 and no traceback."""
    with Client(fresh_server.url) as client:
        client.use(tube)
        client.put_many([b"a", b"b", b"c"])
        client.put(b"later", delay=100)
        pane = terminal("beanstalk", "top", "-i", "0.2", env={"BEANSTALK_URL": fresh_server.url})
        wait_row(pane, tube, ["3", "0", "1", "0"])  # ready, reserved, delayed, buried
        assert row(pane.screen(), "default")[1] == "0"
        client.put_many([b"d", b"e"])
        client.watch(tube)
        client.bury(client.reserve(0))
        wait_row(pane, tube, ["4", "0", "1", "1"])
        pane.keys("C-c")
        screen = pane.wait_for("EXIT=")
    assert "EXIT=0" in screen and "Traceback" not in screen and "KeyboardInterrupt" not in screen
