"""SIGTERM and SIGINT stop a beanstalk worker process gracefully (tests/signal_worker.py, the
sync ``Worker`` and the ``AsyncWorker``, against the real beanstalkd): no new reserves, the
running handler finishes and its job is deleted, the process exits 0 without a traceback; a
handler still running at ``shutdown_timeout`` has its job released (ready again)."""

from __future__ import annotations

import signal

import pytest

from beanstalk_client import Client, NotFound
from tests.conftest import BeanstalkServer
from tests.signal_worker import spawn, started, stop_with

REAL = pytest.param("beanstalkd", marks=pytest.mark.real_server)
pytestmark = pytest.mark.parametrize("server", [REAL], indirect=True)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_lets_the_running_handler_finish(
    server: BeanstalkServer, tube: str, signum: signal.Signals, use_async: bool
) -> None:
    with Client(server.url) as client:
        client.use(tube)
        job_id = client.put(b"x")
        proc = spawn("beanstalk", server.url, tube, use_async=use_async, sleep=0.5)
        assert started(proc) == str(job_id)
        ended = stop_with(proc, signum)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {job_id}" in ended.stdout
        assert (ended.stats["reserved"], ended.stats["deleted"], ended.stats["released"],
                ended.stats["in_flight"]) == (1, 1, 0, 0)
        with pytest.raises(NotFound):
            client.stats_job(job_id)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_handler_over_the_shutdown_timeout_has_its_job_released(
    server: BeanstalkServer, tube: str, use_async: bool
) -> None:
    with Client(server.url) as client:
        client.use(tube)
        job_id = client.put(b"x", priority=7)
        proc = spawn("beanstalk", server.url, tube, use_async=use_async, sleep=60,
                     shutdown_timeout=0.5)
        assert started(proc) == str(job_id)
        ended = stop_with(proc, signal.SIGTERM)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {job_id}" not in ended.stdout
        assert (ended.stats["deleted"], ended.stats["released"]) == (0, 1)
        stats = client.stats_job(job_id)
        assert (stats["state"], stats["pri"]) == ("ready", 7)
