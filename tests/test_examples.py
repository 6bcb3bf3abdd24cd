"""Every program in examples/ runs as a user runs it: a subprocess, the server's URL as its
argument (or in its environment variable), against a server of its own. Each test then reads
the server's state with the library's clients and checks it is what the example says it leaves.

examples/spark_pipeline.py is run by tests/spark/test_example_pipeline.py (on the test session's
Spark); every other example is run here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from beanstalk_client import Client as BeanstalkClient
from beanstalk_client import NotFound as BeanstalkNotFound
from gearman_client import Admin as GearmanAdmin
from gearman_client import Client as GearmanClient
from jobwire.testing import BeanstalkServer, GearmanServer, RedisServer, WorkqServer
from qless_client import Client as QlessClient
from tests.gearman.conftest import fresh_gearman
from tests.qless.conftest import fresh_redis
from tests.waiting import wait_until
from tests.workq.conftest import fresh_workq_server
from workq_client import Client as WorkqClient

# The packages' own fixtures (fresh_server comes from tests/conftest.py): a server per test.
__all__ = ["fresh_gearman", "fresh_redis", "fresh_workq_server"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: Each example and the test(s) that run it.
TESTED = {
    "demo.py": "test_demo",
    "producer.py": "test_producer_*",
    "async_worker_pool.py": "test_async_worker_pool_*",
    "sync_worker.py": "test_sync_worker_*",
    "gearman_fanout.py": "test_gearman_fanout",
    "workq_run_result.py": "test_workq_run_and_result",
    "qless_worker.py": "test_qless_worker",
    "spark_pipeline.py": "tests/spark/test_example_pipeline.py",
}
#: The servers' environment variables: cleared, so that only what a test gives counts.
URL_VARIABLES = ("BEANSTALK_URL", "GEARMAN_SERVERS", "WORKQ_URL", "QLESS_URL")


def example_env(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in URL_VARIABLES}
    return {**env, **variables}


def run_example(name: str, *args: str, env: dict[str, str] | None = None,
                timeout: float = 120) -> str:
    """Run ``examples/<name>`` to its end; its stdout. It must exit with status 0."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
        timeout=timeout, env=env or example_env(),
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def start_example(name: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / name), *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=example_env(),
    )


def test_every_example_is_run_by_a_test() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(TESTED)
    names = {name for name in globals() if name.startswith("test_")}
    for example, test in TESTED.items():
        if test.startswith("tests/"):
            assert example in (ROOT / test).read_text(), example
        else:
            assert any(re.fullmatch(test.replace("*", ".+"), n) for n in names), example


# -- beanstalk -----------------------------------------------------------------------------------


def test_producer_puts_the_sample_with_priorities_and_delays(
    fresh_server: BeanstalkServer,
) -> None:
    out = run_example("producer.py", fresh_server.url)
    assert "put_many: 20 jobs" in out

    with BeanstalkClient(fresh_server.url) as client:
        stats = client.stats_tube("emails")
        assert (stats["current-jobs-ready"], stats["current-jobs-urgent"],
                stats["current-jobs-delayed"], stats["current-jobs-reserved"]) == (21, 1, 1, 0)
        client.use("emails")  # the tube peek looks at
        delayed = client.peek_delayed()
        assert json.loads(delayed.body)["to"] == "ana@example.com"
        job_stats = client.stats_job(delayed)
        assert (job_stats["pri"], job_stats["delay"], job_stats["ttr"]) == (1024, 3600, 60)
        # Reserved in priority order: the alert (priority 0) first, then the newsletter in the
        # order put_many sent it; the options are not part of the bodies.
        client.watch("emails")
        client.ignore("default")
        reserved = [client.reserve(0) for _ in range(21)]
        bodies = [json.loads(job.body) for job in reserved]
        assert bodies[0] == {"to": "ops@example.com", "subject": "Disk 95% full on db-1"}
        assert [b["to"] for b in bodies[1:]] == [f"reader{n}@example.com" for n in range(20)]
        assert [client.stats_job(job)["pri"] for job in reserved] == [0] + [1024] * 20


def test_producer_reads_json_lines_and_the_url_from_beanstalk_url(
    fresh_server: BeanstalkServer, tmp_path: Path,
) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"to": "a@example.com", "priority": 5}\n\n'
                    '{"to": "b@example.com", "delay": 120}\n'
                    '{"to": "c@example.com"}\n')
    run_example("producer.py", "--jobs", str(jobs),
                env=example_env(BEANSTALK_URL=fresh_server.url))
    with BeanstalkClient(fresh_server.url) as client:
        client.use("emails")
        ready = client.peek_ready()
        assert json.loads(ready.body) == {"to": "a@example.com"}
        assert client.stats_job(ready)["pri"] == 5
        delayed = client.peek_delayed()
        assert json.loads(delayed.body) == {"to": "b@example.com"}
        assert client.stats_job(delayed)["delay"] == 120
        stats = client.stats_tube("emails")
        assert (stats["current-jobs-ready"], stats["current-jobs-delayed"]) == (2, 1)


def put_emails(url: str, count: int) -> list[int]:
    with BeanstalkClient(url) as client:
        client.use("emails")
        return client.put_many(
            json.dumps({"to": f"r{n}@example.com", "subject": f"s{n}"}).encode()
            for n in range(count))


def test_async_worker_pool_does_every_ready_job_and_stops(fresh_server: BeanstalkServer) -> None:
    ids = put_emails(fresh_server.url, 40)
    with BeanstalkClient(fresh_server.url) as client:
        client.use("emails")
        later = client.put(b'{"to": "x@example.com", "subject": "later"}', delay=3600)

    out = run_example("async_worker_pool.py", fresh_server.url)
    sent = [int(n) for n in re.findall(r"^job (\d+): sent ", out, re.M)]
    assert sorted(sent) == ids
    assert "done: 40 sent, 0 released, 0 buried" in out

    with BeanstalkClient(fresh_server.url) as client:
        stats = client.stats_tube("emails")
        assert (stats["current-jobs-ready"], stats["current-jobs-reserved"],
                stats["current-jobs-delayed"], stats["cmd-delete"]) == (0, 0, 1, 40)
        client.use("emails")
        assert client.peek_delayed().id == later  # a job for later is left for later


def test_async_worker_pool_with_nothing_to_do_stops_at_once(
    fresh_server: BeanstalkServer,
) -> None:
    out = run_example("async_worker_pool.py", fresh_server.url)
    assert "done: 0 sent" in out


def interrupt_mid_work(example: str, server: BeanstalkServer, jobs: int, sig: int) -> None:
    """Start ``example`` on ``jobs`` jobs, send it ``sig`` once it has done a few, and check it
    stopped gracefully: exit 0, nothing left reserved, every job either done or ready."""
    put_emails(server.url, jobs)
    proc = start_example(example, server.url)
    try:
        with BeanstalkClient(server.url) as client:

            def working() -> bool:
                assert proc.poll() is None, proc.communicate()
                return client.stats_tube("emails")["cmd-delete"] >= 10

            wait_until(working, 60, "ten deletes")
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
            stats = client.stats_tube("emails")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert stats["current-jobs-reserved"] == 0
    assert stats["current-jobs-ready"] > 0  # it stopped before the end...
    assert stats["current-jobs-ready"] + stats["cmd-delete"] == jobs  # ...and lost nothing
    done = re.search(r"^done: (\d+) sent", out, re.M)
    assert done is not None and int(done[1]) == stats["cmd-delete"], out


def test_async_worker_pool_stops_gracefully_on_ctrl_c(fresh_server: BeanstalkServer) -> None:
    interrupt_mid_work("async_worker_pool.py", fresh_server, 3000, signal.SIGINT)


@pytest.mark.slow  # each failed try costs the one connection ~2 s of blocking reserves
def test_sync_worker_does_the_jobs_and_buries_the_poison_one(
    fresh_server: BeanstalkServer,
) -> None:
    ids = put_emails(fresh_server.url, 12)
    with BeanstalkClient(fresh_server.url) as client:
        client.use("emails")
        poison = client.put(b"this is not JSON")

    out = run_example("sync_worker.py", fresh_server.url)
    assert sorted(int(n) for n in re.findall(r"\bjob (\d+): sent ", out)) == ids
    assert "done: 12 sent, 3 failures, 1 buried" in out

    with BeanstalkClient(fresh_server.url) as client:
        stats = client.stats_tube("emails")
        assert (stats["current-jobs-ready"], stats["current-jobs-reserved"],
                stats["current-jobs-buried"], stats["cmd-delete"]) == (0, 0, 1, 12)
        client.use("emails")
        buried = client.peek_buried()
        assert (buried.id, buried.body) == (poison, b"this is not JSON")
        assert client.stats_job(buried)["reserves"] == 3  # tried 3 times, then buried


def test_sync_worker_stops_gracefully_on_sigterm(fresh_server: BeanstalkServer) -> None:
    interrupt_mid_work("sync_worker.py", fresh_server, 1000, signal.SIGTERM)


def test_demo(fresh_server: BeanstalkServer) -> None:
    out = run_example("demo.py", "--url", fresh_server.url, "--jobs", "500",
                      "--concurrency", "16")
    assert out.rstrip().endswith("OK")
    with BeanstalkClient(fresh_server.url) as client:
        # The server's own counts (the tube itself is gone: empty and unused, so dropped).
        stats = client.stats()
        assert (stats["total-jobs"], stats["cmd-delete"], stats["current-jobs-ready"],
                stats["current-jobs-reserved"]) == (500, 500, 0, 0)
        with pytest.raises(BeanstalkNotFound):
            client.stats_tube("demo")


# -- Gearman, Workq, qless ---------------------------------------------------------------------


def test_gearman_fanout(fresh_gearman: GearmanServer) -> None:
    out = run_example("gearman_fanout.py", fresh_gearman.url, "--jobs", "5")
    handles = []
    for n in range(5):
        image = f"photo-{n}.jpg"
        lines = [line.removeprefix(f"{image}: ") for line in out.splitlines()
                 if line.startswith(f"{image}: ")]
        # Created, then every WORK_STATUS the worker sent, in order, then the result.
        assert re.fullmatch(r"job \S+ created", lines[0]), lines
        assert lines[1:] == ["1/4", "2/4", "3/4", "4/4", f"done: {image} (resized)"]
        handles.append(lines[0].split()[1].encode())
    assert len(set(handles)) == 5
    assert "5 jobs done" in out

    with GearmanClient(fresh_gearman.url) as client:
        for handle in handles:  # finished: the server holds none of them any more
            assert not client.get_status(handle).known
    with GearmanAdmin(fresh_gearman.url) as admin:
        # gearmand keeps a row (0 queued, 0 running) for every function it has seen; the
        # bundled server forgets a function nobody serves or queues (docs/gearman.md).
        rows = [(s.queued, s.running) for s in admin.status() if s.function == "resize"]
        assert rows in ([(0, 0)], [])


def test_workq_run_and_result(fresh_workq_server: WorkqServer) -> None:
    out = run_example("workq_run_result.py", fresh_workq_server.url)
    assert re.search(r"^run \S+: success=True data=b'desserts'$", out, re.M), out
    results = re.findall(r"^result (\S+): success=(\w+) data=", out, re.M)
    assert [success for _, success in results] == ["True", "False"], out

    # The results stay on the server for their TTL: another client reads them.
    with WorkqClient(fresh_workq_server.url) as client:
        (added, _), (refused, _) = results
        record = client.result(added)
        assert (record.job_id, record.success, record.data) == (added, True, b"reward")
        record = client.result(refused)
        assert not record.success
        assert record.data == b"ValueError: not a word: b'42'"
        queue = client.inspect_queue("reverse")
        assert (queue.ready_len, queue.scheduled_len) == (0, 0)


def test_qless_worker(fresh_redis: RedisServer) -> None:
    out = run_example("qless_worker.py", fresh_redis.url)
    found = re.search(r"^put 12 jobs; busy one (\w+), bad one (\w+)$", out, re.M)
    assert found is not None, out
    busy, bad = found[1], found[2]

    with QlessClient(fresh_redis.url) as client:
        queue = client.queue("emails")
        counts = queue.counts()
        assert (counts["waiting"], counts["running"], counts["scheduled"],
                counts["stalled"]) == (0, 0, 0, 0)
        assert client.failed() == {"ValueError": 1}
        failed = client.get(bad)
        assert failed is not None and failed.state == "failed"
        assert failed.failure is not None and failed.failure["group"] == "ValueError"
        retried = client.get(busy)
        assert retried is not None and retried.state == "complete"
        # popped twice (a retry in between); qless-core's complete restores ``remaining``
        assert [e["what"] for e in retried.history].count("popped") == 2
        assert len(client.completed()) == 11
        stats = queue.stats()
        # qless-core counts only expired locks as retries, and ``fail`` calls as failures
        assert (stats["retries"], stats["failures"], stats["run"]["count"]) == (0, 1, 11)
