"""SIGTERM and SIGINT stop a Workq worker process gracefully (tests/signal_worker.py, the sync
``Worker`` and the ``AsyncWorker``, against the bundled server): no new leases, the running
handler finishes and its ``complete`` is taken, the process exits 0 without a traceback. A
handler still running at ``shutdown_timeout`` is given up with nothing reported (Workq has no
release, and a ``fail`` would end the job): the job's TTR runs out and the server leases it
again."""

from __future__ import annotations

import signal

import pytest

from tests.signal_worker import spawn, started, stop_with
from workq_client import Client

from .conftest import WorkqServer


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_lets_the_running_handler_finish(
    workq_server: WorkqServer, qname: str, signum: signal.Signals, use_async: bool
) -> None:
    with Client(workq_server.url) as client:
        job_id = client.add(qname, b"x", ttr=30)
        proc = spawn("workq", workq_server.url, qname, use_async=use_async, sleep=0.5)
        assert started(proc) == job_id
        ended = stop_with(proc, signum)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {job_id}" in ended.stdout
        assert (ended.stats["leased"], ended.stats["completed"], ended.stats["abandoned"],
                ended.stats["in_flight"]) == (1, 1, 0, 0)
        result = client.result(job_id, wait=5)
        assert result.success and result.data == b"done"


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_handler_over_the_shutdown_timeout_leaves_the_job_to_its_ttr(
    workq_server: WorkqServer, qname: str, use_async: bool
) -> None:
    with Client(workq_server.url) as client:
        job_id = client.add(qname, b"x", ttr=2)
        proc = spawn("workq", workq_server.url, qname, use_async=use_async, sleep=60,
                     shutdown_timeout=0.5)
        assert started(proc) == job_id
        ended = stop_with(proc, signal.SIGTERM)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {job_id}" not in ended.stdout
        assert (ended.stats["completed"], ended.stats["failed"], ended.stats["abandoned"],
                ended.stats["in_flight"]) == (0, 0, 1, 0)
        again = client.lease([qname], wait=10)  # once the 2 s TTR has run out
        assert (again.job_id, again.payload) == (job_id, b"x")
