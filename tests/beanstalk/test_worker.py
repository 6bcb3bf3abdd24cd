"""Workers against the bundled server and the real beanstalkd: pipelined reserves on one
connection, bounded ack delay, DEADLINE_SOON, auto-touch, retries, shutdown, reconnect."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

import jobwire
from beanstalk_client import Client, Job, NotFound
from beanstalk_client.worker import AsyncWorker, RetryPolicy, Worker
from jobwire.events import EventSink
from tests.test_events import read_jsonl
from tests.waiting import await_until

from ..conftest import BeanstalkServer

pytestmark = pytest.mark.anyio


def _producer(server: BeanstalkServer, tube: str) -> Client:
    c = Client.from_url(server.url)
    c.use(tube)
    return c


async def _run_until(worker: AsyncWorker, handler, done: anyio.Event, limit: float = 20) -> None:  # type: ignore[no-untyped-def]
    async def stopper() -> None:
        await done.wait()
        worker.stop()

    with anyio.fail_after(limit):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stopper)
            await worker.run(handler, handle_signals=False)
            tg.cancel_scope.cancel()


async def test_ack_delay_is_bounded_whatever_the_ttr(server: BeanstalkServer, tube: str) -> None:
    """TTR 120, two reserves in flight, empty tube: the delete is not held behind the other
    slot's blocking reserve until the TTR (it goes out within the worker's bounded wait, about
    a second). The bound below is against that 120 s, not a speed check."""
    with _producer(server, tube) as p:
        job_id = p.put(b"one", ttr=120)
        finished = deleted = 0.0
        done = anyio.Event()
        async with AsyncWorker(server.url, tubes=[tube], concurrency=2) as worker:

            async def handler(job: Job) -> None:
                nonlocal finished
                # until the other slot's blocking reserve is out (the server counts it)
                await await_until(lambda: p.stats_tube(tube)["current-waiting"] >= 1,
                                  what="a blocking reserve out")
                finished = time.monotonic()

            async def watch() -> None:
                nonlocal deleted
                await await_until(lambda: worker.stats.deleted, what="the delete answered")
                deleted = time.monotonic()
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await _run_until(worker, handler, done)
        assert 0 <= deleted - finished < 20.0, deleted - finished
        with pytest.raises(NotFound):
            p.stats_job(job_id)


async def test_deadline_soon_is_absorbed(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        job_id = p.put(b"x", ttr=2)
        done = anyio.Event()
        async with AsyncWorker(
            server.url, tubes=[tube], concurrency=2, auto_touch=False
        ) as worker:

            async def handler(job: Job) -> None:
                # into the 1 s safety margin, within the TTR: the server says DEADLINE_SOON
                await await_until(lambda: worker.stats.deadline_soon, what="DEADLINE_SOON")
                done.set()

            await _run_until(worker, handler, done)
        assert worker.stats.deadline_soon >= 1
        assert (worker.stats.failed, worker.stats.lost, worker.stats.deleted) == (0, 0, 1)
        with pytest.raises(NotFound):
            p.peek(job_id)


@pytest.mark.slow
async def test_auto_touch_keeps_a_slow_handlers_job(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        job_id = p.put(b"slow", ttr=2)
        done = anyio.Event()
        async with AsyncWorker(server.url, tubes=[tube], concurrency=1) as worker:

            async def handler(job: Job) -> None:
                await anyio.sleep(4)  # twice the TTR
                assert p.stats_job(job_id)["timeouts"] == 0
                done.set()

            await _run_until(worker, handler, done)
        assert worker.stats.touched >= 1
        assert (worker.stats.deleted, worker.stats.lost, worker.stats.reserved) == (1, 0, 1)


async def test_failures_release_with_backoff_then_bury(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        job_id = p.put(b"bad", priority=77)
        attempts = 0
        done = anyio.Event()
        retry = RetryPolicy(base_delay=0, bury_after=3)
        async with AsyncWorker(server.url, tubes=[tube], concurrency=2, retry=retry) as worker:

            async def handler(job: Job) -> None:
                nonlocal attempts
                attempts += 1
                raise RuntimeError(f"attempt {attempts}")

            async def watch() -> None:
                await await_until(lambda: worker.stats.buried, what="the job buried")
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await _run_until(worker, handler, done)
        stats = p.stats_job(job_id)
        assert (stats["state"], stats["reserves"], stats["releases"]) == ("buried", 3, 2)
        assert stats["pri"] == 77  # the job's own priority is kept
        assert (worker.stats.failed, worker.stats.released, worker.stats.buried) == (3, 2, 1)


async def test_the_shared_retry_policy_retries_what_it_lists_and_buries_the_rest(
    server: BeanstalkServer, tube: str
) -> None:
    """``jobwire.RetryPolicy`` on beanstalk: a failure in ``retry_on`` is released with the
    policy's delay, any other is buried at its first reserve (giving up is a bury here)."""
    with _producer(server, tube) as p:
        transient, fatal = p.put(b"transient"), p.put(b"fatal")
        policy = jobwire.RetryPolicy(retry_on=(TimeoutError,), base_delay=30)
        async with AsyncWorker(server.url, tubes=[tube], concurrency=2, retry=policy) as worker:

            async def handler(job: Job) -> None:
                raise (TimeoutError if job.body == b"transient" else KeyError)("boom")

            async def stop_once_settled() -> None:
                await await_until(lambda: worker.stats.released + worker.stats.buried == 2,
                                  what="both outcomes answered")
                worker.stop()

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stop_once_settled)
                    await worker.run(handler, handle_signals=False)
        assert (p.stats_job(transient)["state"], p.stats_job(transient)["delay"]) == (
            "delayed", 30)
        assert (p.stats_job(fatal)["state"], p.stats_job(fatal)["reserves"]) == ("buried", 1)
        assert (worker.stats.failed, worker.stats.released, worker.stats.buried) == (2, 1, 1)


def test_a_shared_policy_with_a_fractional_delay_is_refused_by_the_worker() -> None:
    """The wire carries whole seconds: the worker refuses a ``jobwire.RetryPolicy`` whose
    delays are not, where it is made (the error names the field), and keeps the policy's
    other settings; ``bury_after`` and ``max_attempts`` are one setting."""
    for field in ("base_delay", "max_delay"):
        policy = jobwire.RetryPolicy(**{field: 0.5})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=f"retry.{field} must be a whole number"):
            AsyncWorker("127.0.0.1", retry=policy)
        with pytest.raises(ValueError, match=f"retry.{field} must be a whole number"):
            Worker("127.0.0.1", retry=policy)
    worker = AsyncWorker("127.0.0.1", retry=jobwire.RetryPolicy(
        retry_on=(KeyError,), base_delay=2.0, max_attempts=4))
    assert (worker.retry.retry_on, worker.retry.base_delay, worker.retry.max_attempts) == (
        (KeyError,), 2, 4)
    assert RetryPolicy(bury_after=3) == RetryPolicy(max_attempts=3)
    assert RetryPolicy(bury_after=None).max_attempts is None
    assert RetryPolicy().bury_after == 5
    with pytest.raises(TypeError, match="same setting"):
        RetryPolicy(bury_after=3, max_attempts=4)


async def test_release_delay_grows(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        job_id = p.put(b"bad")
        done = anyio.Event()
        async with AsyncWorker(server.url, tubes=[tube], retry=RetryPolicy(base_delay=30)) as w:

            async def handler(job: Job) -> None:
                done.set()
                raise ValueError("boom")

            await _run_until(w, handler, done)
        stats = p.stats_job(job_id)
        assert (stats["state"], stats["delay"]) == ("delayed", 30)


async def test_a_job_reserved_again_while_its_first_handler_runs(
    server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    """Issue 10: the first handler overruns the TTR and the same worker reserves the job again.
    Each reservation is held on its own: the first (stale) one's result is dropped (counted as
    lost), in_flight comes back to 0, and stop waits for the second handler."""
    sink = EventSink(tmp_path)
    with _producer(server, tube) as p:
        job_id = p.put(b"x", ttr=1)
        calls = 0
        second_started = anyio.Event()
        first_done = anyio.Event()
        seen: dict[str, object] = {}
        async with AsyncWorker(
            server.url, tubes=[tube], concurrency=2, auto_touch=False, events=sink
        ) as worker:

            async def handler(job: Job) -> None:
                nonlocal calls
                calls += 1
                if calls == 1:
                    with anyio.fail_after(10):  # the TTR runs out; the job comes back to us
                        await second_started.wait()
                    first_done.set()
                    return
                second_started.set()
                try:
                    await first_done.wait()
                    # the first handler's outcome is handled: its reservation is stale
                    await await_until(lambda: worker.stats.lost, what="the stale result")
                    try:  # not deleted under our feet
                        seen["state"] = p.stats_job(job_id)["state"]
                    except NotFound:
                        seen["state"] = "deleted"
                    seen["in_flight"] = worker.stats.in_flight
                finally:
                    worker.stop()
                await anyio.sleep(0.5)  # work that stop() must wait for
                seen["second finished"] = True

            with anyio.fail_after(20):
                await worker.run(handler, handle_signals=False)
        assert seen == {"state": "reserved", "in_flight": 1, "second finished": True}
        assert worker.stats.in_flight == 0
        assert (worker.stats.reserved, worker.stats.deleted, worker.stats.lost) == (2, 1, 1)
        with pytest.raises(NotFound):
            p.stats_job(job_id)
    sink.close()
    assert [(r["event"], r["job"]) for r in read_jsonl(tmp_path)] == [
        ("reserved", str(job_id)), ("lost", str(job_id)), ("reserved", str(job_id)),
        ("completed", str(job_id))]


def test_retry_delays_are_whole_seconds_and_a_fraction_is_refused() -> None:
    """beanstalkd's release delay is whole seconds: 0.1 would have been sent as 1 (ten times
    what was asked); it is refused when the policy is made, as is anything the wire cannot
    carry."""
    for bad in ({"base_delay": 0.1}, {"max_delay": 1.5}, {"base_delay": float("inf")}):
        with pytest.raises(ValueError, match="whole number of seconds"):
            RetryPolicy(**bad)  # type: ignore[arg-type]
    for bad in ({"base_delay": -1}, {"max_delay": 2**32}, {"bury_after": 0},
                {"priority": 2**32}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)  # type: ignore[arg-type]
    for bad in ({"base_delay": "1"}, {"base_delay": True}, {"bury_after": 2.0}):
        with pytest.raises(TypeError):
            RetryPolicy(**bad)  # type: ignore[arg-type]
    policy = RetryPolicy(base_delay=2.0, max_delay=10)  # type: ignore[arg-type]
    assert (policy.base_delay, type(policy.base_delay)) == (2, int)
    assert [policy.delay(n) for n in (0, 1, 2, 3, 4, 10**9)] == [2, 2, 4, 8, 10, 10]
    assert RetryPolicy(base_delay=0).delay(50) == 0


def test_tls_options_are_checked_in_the_constructor(server: BeanstalkServer) -> None:
    """A bad ``ssl=`` fails where it was given; a client target brings its own TLS, so
    ``ssl``/``server_hostname`` with one is refused (the over-TLS runs are in test_tls.py)."""
    with pytest.raises(TypeError, match="ssl="):
        Worker(server.url, ssl="yes")
    with pytest.raises(TypeError, match="ssl="):
        AsyncWorker(server.url, ssl=1)  # type: ignore[arg-type]
    with Client(server.url) as client:
        with pytest.raises(TypeError, match="ssl and server_hostname"):
            Worker(client, ssl=True)
        with pytest.raises(TypeError, match="ssl and server_hostname"):
            AsyncWorker(client, server_hostname="localhost")




async def test_jobs_read_together_each_get_a_slot(server: BeanstalkServer, tube: str) -> None:
    """64 jobs waiting, 64 slots: jobs that arrive together (one read brings many) each get a
    slot of their own, however the slots are woken: all 64 handlers run at once (held at a
    gate until they are all in), then all 64 jobs are deleted."""
    slots = 64
    with _producer(server, tube) as p:
        for i in range(slots):
            p.put(b"%d" % i)
        gate, done = anyio.Event(), anyio.Event()
        running = peak = 0
        async with AsyncWorker(server.url, tubes=[tube], concurrency=slots) as worker:

            async def handler(job: Job) -> None:
                nonlocal running, peak
                running += 1
                peak = max(peak, running)
                if running == slots:
                    gate.set()
                await gate.wait()
                running -= 1

            async def watch() -> None:
                await await_until(lambda: worker.stats.deleted == slots, what="every delete")
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await _run_until(worker, handler, done)
        assert peak == slots
        assert p.stats_tube(tube)["current-jobs-ready"] == 0
