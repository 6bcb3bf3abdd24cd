"""SIGTERM and SIGINT stop a qless worker process gracefully (tests/signal_worker.py, the sync
``Worker`` and the ``AsyncWorker``, against redis-server): no new pops, the running handler
finishes and its job is completed, the process exits 0 without a traceback; a handler still
running at ``shutdown_timeout`` has its job handed back (``retry``: waiting again)."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator

import pytest

from qless_client import Client
from qless_client._redis import Redis
from tests.signal_worker import spawn, started, stop_with

from .conftest import RedisServer

DB = 13


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    with Redis.from_url(f"{redis_server.url}/{DB}") as r:
        r.execute("FLUSHDB")
    yield f"{redis_server.url}/{DB}"


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_lets_the_running_handler_finish(
    url: str, signum: signal.Signals, use_async: bool
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with Client(url, worker_name="other") as client:
        jid = client.queue(queue).put("K", {})
        proc = spawn("qless", url, queue, use_async=use_async, sleep=0.5)
        assert started(proc) == jid
        ended = stop_with(proc, signum)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {jid}" in ended.stdout
        assert (ended.stats["popped"], ended.stats["completed"], ended.stats["retried"],
                ended.stats["in_flight"]) == (1, 1, 0, 0)
        job = client.get(jid)
        assert job is not None and job.state == "complete"


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_handler_over_the_shutdown_timeout_has_its_job_handed_back(
    url: str, use_async: bool
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with Client(url, worker_name="other") as client:
        jid = client.queue(queue).put("K", {})
        proc = spawn("qless", url, queue, use_async=use_async, sleep=60, shutdown_timeout=0.5)
        assert started(proc) == jid
        ended = stop_with(proc, signal.SIGTERM)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {jid}" not in ended.stdout
        assert (ended.stats["completed"], ended.stats["retried"], ended.stats["in_flight"]) == (
            0, 1, 0)
        job = client.get(jid)
        assert job is not None and (job.state, job.remaining) == ("waiting", job.retries - 1)
