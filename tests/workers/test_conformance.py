"""What every package's worker does alike, written once and run for each system (``conftest.py``
describes them) in each mode: the sync ``Worker``, the ``AsyncWorker`` on asyncio and on trio.

Each test waits on what it can observe (the worker's stats, its handlers' own records, the
server's answers, the relay's connections), never on time: handlers that must be running at
once wait at a gate the test opens.

The tests for one protocol stay with it: beanstalk's DEADLINE_SOON, touches and burying, qless's
heartbeats, lost locks, ``Next`` and retry policy, Workq's TTR and late results, Gearman's
several servers and the protocol-level worker tests.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobwire.events import EventSink, default_worker_id, failure_group
from tests.test_events import read_jsonl
from tests.waiting import wait_until

from .conftest import (
    WITH_BUNDLED,
    WITH_HANDLER_TIMEOUT,
    Boom,
    Handlers,
    Jobs,
    Relay,
    Running,
    WorkerSystem,
    free_slots,
)

Start = Callable[..., Running]
GROUP = failure_group(Boom())


def settled(running: Running, expected: dict[str, int]) -> Callable[[], bool]:
    """A predicate: the worker's stats show ``expected``."""
    return lambda: running.stats_of(expected) == expected


@pytest.mark.parametrize("system", WITH_BUNDLED, indirect=True)
def test_every_job_is_settled_by_its_handler_n_at_once(
    system: WorkerSystem, mode: str, url: str, relay: Relay, jobs: Jobs, queue: str,
    start: Start, caplog: pytest.LogCaptureFixture,
) -> None:
    """Twelve jobs, three slots: three handlers run at once (held at a gate until all three
    are in, and never more), ``in_flight`` counts them; a handler's result completes its job
    on the server and a raise fails it, logged with its traceback; the last job's handler stops
    the worker, which lets every held job finish. The stats count it all; the worker kept the
    connections it needs open (one for N slots, Workq one per slot) and closed them when
    ``run`` returned."""
    caplog.set_level(logging.WARNING)
    slots = 3
    payloads = [f"job-{i}" for i in range(12)]
    gate = threading.Event()
    running: Running

    def stop_on_the_last(payload: str) -> None:
        if len(handlers.started) == len(payloads):
            running.stop()  # from a handler

    handlers = Handlers(system, gate=gate, fail=("job-1",), on_start=stop_on_the_last)
    jobs.put(queue, payloads)
    running = start(relay.url(url), [queue], handlers, concurrency=slots, **system.fail_options)
    wait_until(lambda: handlers.running == slots, what=f"{slots} handlers running at once")
    assert running.stats.in_flight == slots
    gate.set()
    running.join()
    expected = system.counts(done=len(payloads) - 1, failed=1)
    assert running.stats_of(expected) == expected
    assert sorted(handlers.started) == sorted(payloads)
    assert handlers.peak == slots
    if mode == "sync":
        assert len(handlers.threads) >= slots  # a thread per running handler
    for payload in payloads:
        if payload == "job-1":
            jobs.assert_failed(payload, GROUP)
        else:
            jobs.assert_done(payload)
    assert relay.peak == system.connections(slots)
    wait_until(lambda: relay.live == 0, 10, "the worker's connections closed")
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.ERROR and record.name.startswith(system.name)
    assert record.exc_info is not None and record.exc_info[0] is Boom
    assert handlers.ids["job-1"] in record.getMessage()
    if system.logs_queue:
        assert queue in record.getMessage()
    assert "Traceback" in caplog.text and "out of paper" in caplog.text


def test_stop_lets_the_running_handlers_finish_and_takes_no_new_job(
    system: WorkerSystem, mode: str, url: str, jobs: Jobs, queue: str, start: Start
) -> None:
    """Four jobs, two slots, both handlers running when ``stop()`` comes: they finish and
    their jobs are done; the other two wait on the server as they were put."""
    payloads = ["a", "b", "c", "d"]
    gate = threading.Event()
    handlers = Handlers(system, gate=gate)
    jobs.put(queue, payloads)
    running = start(url, [queue], handlers, concurrency=2)
    wait_until(lambda: handlers.running == 2, what="both handlers running")
    running.stop()
    gate.set()
    running.join()
    taken = handlers.started
    assert len(taken) == 2 and sorted(handlers.finished) == sorted(taken)
    for payload in taken:
        jobs.assert_done(payload)
    jobs.assert_waiting(queue, [p for p in payloads if p not in taken])
    expected = {system.fetched: 2, system.completed: 2, "in_flight": 0}
    assert running.stats_of(expected) == expected


def test_a_handler_past_the_shutdown_timeout_has_its_job_handed_back(
    system: WorkerSystem, mode: str, url: str, jobs: Jobs, queue: str, start: Start,
    tmp_path: Path,
) -> None:
    """A handler still running ``shutdown_timeout`` after the stop is cancelled (a thread
    cannot be: it is given up, and runs on) and its job handed back, each system's way
    (beanstalk: released; Gearman: the connection closed, the server requeues it; Workq: left
    to its TTR, then pending again; qless: retried); the events say so."""
    gate = threading.Event()  # opened after the test only
    handlers = Handlers(system, gate=gate)
    sink = EventSink(tmp_path)
    jobs.put(queue, ["stuck"], lingering=True)
    running = start(url, [queue], handlers, shutdown_timeout=0.2, events=sink)
    wait_until(lambda: handlers.running == 1 and running.stats.in_flight == 1,
               what="the handler running")
    running.stop()
    running.join()
    if mode == "sync":
        assert handlers.running == 1 and not gate.is_set()  # the thread still runs
    else:
        assert handlers.cancelled == ["stuck"]
    assert handlers.finished == []
    assert running.stats_of(system.handed_back_stats) == system.handed_back_stats
    jobs.assert_handed_back(queue, "stuck")
    sink.close()
    job = handlers.ids["stuck"]
    assert [(r["event"], r["job"]) for r in read_jsonl(tmp_path)] == [
        ("reserved", job), (system.handed_back_event, job)]


@pytest.mark.parametrize("mode", ["sync"], indirect=True)
def test_a_stopped_sync_worker_runs_again_with_all_its_slots(
    system: WorkerSystem, mode: str, url: str, jobs: Jobs, queue: str
) -> None:
    """``stop()`` before ``run()`` makes that run return at once; a stopped worker runs again
    (its stats: the last run's, or every run's for Gearman and Workq); and a handler thread
    given up at the shutdown deadline of one run holds no slot in the next."""
    worker = system.make("sync", url, [queue], shutdown_timeout=0.1)

    def run(handlers: Handlers) -> Running:
        return Running(system, "sync", worker, [queue], handlers)

    worker.stop()
    run(Handlers(system)).join()  # returns at once
    for n, payload in enumerate(["first", "second"], 1):
        jobs.put(queue, [payload])
        handlers = Handlers(system)
        running = run(handlers)

        def done(h: Handlers = handlers, p: str = payload) -> bool:
            return h.finished == [p]

        wait_until(done, what=f"{payload} done")
        running.stop()
        running.join()
        jobs.assert_done(payload)
        count = n if system.stats_across_runs else 1
        expected = {system.fetched: count, system.completed: count, "in_flight": 0}
        assert running.stats_of(expected) == expected
    gate = threading.Event()
    stuck = Handlers(system, gate=gate)
    jobs.put(queue, ["stuck"], lingering=True)
    running = run(stuck)
    try:
        wait_until(lambda: stuck.running == 1, what="the handler running")
        running.stop()
        running.join()  # the thread is given up
        jobs.put(queue, ["after"])
        handlers = Handlers(system)
        running = run(handlers)  # concurrency 1: the given-up thread must not hold the slot
        wait_until(lambda: "after" in handlers.finished, what="the next run's job done")
        assert stuck.running == 1  # the given-up thread still runs
        running.stop()
        running.join()
        jobs.assert_done("after")
    finally:
        gate.set()
        running.stop()
        running.thread.join(30)


@pytest.mark.parametrize("system", WITH_HANDLER_TIMEOUT, indirect=True)
def test_handler_timeout_fails_the_job(
    system: WorkerSystem, mode: str, url: str, jobs: Jobs, queue: str, start: Start
) -> None:
    """Past ``handler_timeout`` the handler is cancelled and ``TimeoutError`` is its outcome
    (the job failed: beanstalk buries it with ``fail_options``). A thread cannot be cancelled:
    it is given up, and fills its slot until it returns, so with one slot the next job waits
    until then."""
    gate = threading.Event()
    handlers = Handlers(system, gate=gate, hold=("hang",))
    jobs.put(queue, ["hang"])
    running = start(url, [queue], handlers, concurrency=1, handler_timeout=0.3,
                    **system.fail_options)
    wait_until(settled(running, {"failed": 1, "in_flight": 0}), what="the job failed")
    jobs.assert_failed("hang", "TimeoutError")
    jobs.put(queue, ["next"])
    if mode == "sync":
        assert handlers.running == 1  # the thread runs on
        assert free_slots(running.worker) == 0  # and fills the one slot: nothing is fetched
        jobs.assert_waiting(queue, ["next"])
        gate.set()
    else:
        assert handlers.cancelled == ["hang"]
    wait_until(lambda: "next" in handlers.finished, what="the next job handled")
    running.stop()
    running.join()
    jobs.assert_done("next")
    assert handlers.started == ["hang", "next"]


def test_the_worker_reconnects_after_its_connection_is_cut(
    system: WorkerSystem, mode: str, url: str, relay: Relay, jobs: Jobs, queue: str,
    start: Start,
) -> None:
    """The relay between worker and server closes the worker's connections and refuses new
    ones for a while: the worker backs off and tries again (``reconnects`` counts each), and
    once the server can be reached it takes jobs from the same queue again."""
    handlers = Handlers(system)
    jobs.put(queue, ["before"])
    running = start(relay.url(url), [queue], handlers)
    wait_until(settled(running, {system.completed: 1, "in_flight": 0}), what="the first job")
    relay.cut()
    wait_until(lambda: running.stats.reconnects >= 2, what="the loss and a refused attempt")
    relay.restore()
    jobs.put(queue, ["after"])
    wait_until(settled(running, {system.completed: 2, "in_flight": 0}), what="the next job")
    running.stop()
    running.join()
    assert handlers.finished == ["before", "after"]
    jobs.assert_done("before")
    jobs.assert_done("after")


def test_events_name_each_jobs_queue_and_outcome(
    system: WorkerSystem, mode: str, url: str, jobs: Jobs, queue: str, start: Start,
    tmp_path: Path,
) -> None:
    """A worker on two queues with an event sink: each job's events, in order (reserved, then
    completed; a failing one's as the system settles it), name its queue and the worker (its
    default id, or Gearman's client id), carry the failure's group, and their times fall within
    the run."""
    other = queue + "-b"
    options: dict[str, Any] = dict(system.event_options)
    worker_id = default_worker_id()
    if system.name == "gearman" and mode != "sync":
        options["client_id"] = worker_id = "ev-worker"
    handlers = Handlers(system, fail=("boom",))
    sink = EventSink(tmp_path)
    t0 = time.time()
    jobs.put(queue, ["ok-1", "boom"])
    jobs.put(other, ["ok-2"])
    running = start(url, [queue, other], handlers, concurrency=2, events=sink, **options)
    failures = sum(1 for e in system.fail_events(queue, GROUP) if e[0] == "failed")
    wait_until(settled(running, {system.completed: 2, "failed": failures, "in_flight": 0}),
               what="every job settled")
    running.stop()
    running.join()
    sink.close()
    t1 = time.time()
    records = read_jsonl(tmp_path)
    assert (sink.written, sink.dropped) == (len(records), 0)
    events: dict[str, list[tuple[Any, ...]]] = {}
    for r in records:
        assert (r["v"], r["system"], r["worker"]) == (1, system.name, worker_id)
        # qless's times are the script's, kept in whole seconds, and it knows the put time
        assert (math.floor(t0) if system.name == "qless" else t0) <= r["time"] <= t1
        assert r["put_time"] is None or system.name == "qless"
        events.setdefault(r["job"], []).append(system.event(r))
    ids = handlers.ids
    done = [("reserved", None), ("completed", None)]
    assert events == {
        ids["ok-1"]: [system.event({"event": e, "queue": queue, "group": g, "attempt": None})
                      for e, g in done],
        ids["ok-2"]: [system.event({"event": e, "queue": other, "group": g, "attempt": None})
                      for e, g in done],
        ids["boom"]: system.fail_events(queue, GROUP),
    }
    by_job: dict[str, list[float]] = {}
    for r in records:
        by_job.setdefault(r["job"], []).append(r["time"])
    assert all(t == sorted(t) for t in by_job.values())
