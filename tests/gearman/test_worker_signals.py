"""SIGTERM and SIGINT stop a Gearman worker process gracefully (tests/signal_worker.py, the sync
``Worker`` and the ``AsyncWorker``, against the real gearmand): no more grabs, the running
handler finishes and its WORK_COMPLETE reaches the waiting client, the process exits 0 without
a traceback. A handler still running at ``shutdown_timeout`` cannot hand its job back (Gearman
has no such packet): the worker closes its connection and gearmand gives the job to the next
worker, whose result the same client then gets."""

from __future__ import annotations

import signal
import threading

import pytest

from gearman_client import Client, Job, Worker
from tests.signal_worker import spawn, started, stop_with

from .conftest import GearmanServer

REAL = pytest.param("gearmand", marks=pytest.mark.real_server)
pytestmark = pytest.mark.parametrize("gearman_server", [REAL], indirect=True)


def _submit_in_background(server: GearmanServer, function: str) -> tuple[threading.Thread,
                                                                          list[object]]:
    """A foreground submit in a thread of its own: its result (or error) lands in the list."""
    results: list[object] = []

    def submit() -> None:
        with Client(server.url, timeout=60) as client:
            try:
                results.append(client.submit(function, b"payload"))
            except Exception as exc:  # the assertion below shows it
                results.append(exc)

    thread = threading.Thread(target=submit, daemon=True)
    thread.start()
    return thread, results


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_lets_the_running_handler_finish(
    gearman_server: GearmanServer, function: str, signum: signal.Signals, use_async: bool
) -> None:
    proc = spawn("gearman", gearman_server.url, function, use_async=use_async, sleep=0.5)
    try:
        caller, results = _submit_in_background(gearman_server, function)
        handle = started(proc)
        ended = stop_with(proc, signum)
        caller.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert ended.returncode == 0, ended.stderr
    assert "Traceback" not in ended.stderr, ended.stderr
    assert f"end {handle}" in ended.stdout
    assert results == [b"done"]
    assert (ended.stats["grabbed"], ended.stats["completed"], ended.stats["failed"],
            ended.stats["abandoned"], ended.stats["in_flight"]) == (1, 1, 0, 0, 0)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_handler_over_the_shutdown_timeout_is_requeued_by_the_server(
    gearman_server: GearmanServer, function: str, use_async: bool
) -> None:
    proc = spawn("gearman", gearman_server.url, function, use_async=use_async, sleep=60,
                 shutdown_timeout=0.5)
    try:
        caller, results = _submit_in_background(gearman_server, function)
        handle = started(proc)
        ended = stop_with(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert ended.returncode == 0, ended.stderr
    assert "Traceback" not in ended.stderr, ended.stderr
    assert f"end {handle}" not in ended.stdout
    assert (ended.stats["completed"], ended.stats["abandoned"], ended.stats["in_flight"]) == (
        0, 1, 0)
    assert results == []  # the client still waits: gearmand has requeued the job

    def second(job: Job) -> bytes:
        worker.stop()
        return b"second: " + job.data

    worker = Worker(gearman_server.url)
    worker.register(function, second)
    worker.run(handle_signals=False)
    caller.join(10)
    assert results == [b"second: payload"]
