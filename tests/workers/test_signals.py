"""SIGTERM and SIGINT stop a worker process gracefully (``tests/signal_worker.py``, the sync
``Worker`` and the ``AsyncWorker`` of each package): no new jobs are fetched, the running handler
finishes and its job is settled, the process exits 0 without a traceback. A handler still running
at ``shutdown_timeout`` has its job handed back, each system's way (beanstalk: released, ready
again; Gearman: the connection closed, the server gives the job to the next worker; Workq: left to
its TTR, then leased again; qless: retried, waiting again)."""

from __future__ import annotations

import signal

import pytest

from tests.signal_worker import spawn, started, stop_with

from .conftest import WorkerSystem


def stats_of(stats: dict[str, int], expected: dict[str, int]) -> dict[str, int]:
    """The counts of ``stats`` that ``expected`` names."""
    return {name: stats[name] for name in expected}


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_lets_the_running_handler_finish(
    system: WorkerSystem, url: str, queue: str, signum: signal.Signals, use_async: bool
) -> None:
    with system.put(url, queue, False) as trial:
        proc = spawn(system.name, url, queue, use_async=use_async, sleep=0.5)
        try:
            job_id = started(proc)
            ended = stop_with(proc, signum)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert trial.job_id in (None, job_id)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {job_id}" in ended.stdout
        assert stats_of(ended.stats, system.done_stats) == system.done_stats
        trial.done(job_id)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_handler_over_the_shutdown_timeout_has_its_job_handed_back(
    system: WorkerSystem, url: str, queue: str, use_async: bool
) -> None:
    with system.put(url, queue, True) as trial:
        proc = spawn(system.name, url, queue, use_async=use_async, sleep=60,
                     shutdown_timeout=0.5)
        try:
            job_id = started(proc)
            ended = stop_with(proc, signal.SIGTERM)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert trial.job_id in (None, job_id)
        assert ended.returncode == 0, ended.stderr
        assert "Traceback" not in ended.stderr, ended.stderr
        assert f"end {job_id}" not in ended.stdout
        assert stats_of(ended.stats, system.handed_back_stats) == system.handed_back_stats
        trial.handed_back(job_id)
