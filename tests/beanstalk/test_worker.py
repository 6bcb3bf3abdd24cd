"""Workers against the bundled server and the real beanstalkd: pipelined reserves on one
connection, bounded ack delay, DEADLINE_SOON, auto-touch, retries, shutdown, reconnect."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import anyio
import pytest

import jobwire
from beanstalk_client import Client, Job, NotFound
from beanstalk_client.worker import AsyncWorker, RetryPolicy, Worker
from jobwire.events import EventSink
from tests.test_events import read_jsonl
from tests.waiting import await_until, wait_until

from ..conftest import BeanstalkServer, start_server

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


async def test_pool_handles_every_job_on_one_connection(
    server: BeanstalkServer, tube: str
) -> None:
    with _producer(server, tube) as p:
        ids = p.put_many([b"%d" % i for i in range(500)])
        seen: list[int] = []
        done = anyio.Event()
        peak = 0
        running = 0
        async with AsyncWorker(server.url, tubes=[tube], concurrency=16) as worker:

            async def handler(job: Job) -> None:
                nonlocal running, peak
                running += 1
                peak = max(peak, running)
                await anyio.sleep(0.005)
                running -= 1
                seen.append(job.id)
                if len(seen) == len(ids):
                    done.set()

            await _run_until(worker, handler, done)
        assert sorted(seen) == ids
        assert 1 < peak <= 16
        assert (worker.stats.reserved, worker.stats.deleted) == (500, 500)
        assert worker.stats.in_flight == 0 and worker.stats.lost == 0
        stats = p.stats_tube(tube)
        assert stats["current-jobs-ready"] == 0 and stats["current-jobs-reserved"] == 0
        assert stats["cmd-delete"] == 500
        for _ in range(100):  # the server notices the close a moment later
            if p.stats_tube(tube)["current-watching"] == 0:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the worker's connection is still open")


async def test_ack_delay_is_bounded_whatever_the_ttr(server: BeanstalkServer, tube: str) -> None:
    """TTR 120, two reserves in flight, empty tube: the delete is answered in about a second."""
    with _producer(server, tube) as p:
        job_id = p.put(b"one", ttr=120)
        finished = deleted = 0.0
        done = anyio.Event()
        async with AsyncWorker(server.url, tubes=[tube], concurrency=2) as worker:

            async def handler(job: Job) -> None:
                nonlocal finished
                await anyio.sleep(0.3)  # long enough for a blocking reserve to be out
                finished = time.monotonic()

            async def watch() -> None:
                nonlocal deleted
                while worker.stats.deleted == 0:
                    await anyio.sleep(0.01)
                deleted = time.monotonic()
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await _run_until(worker, handler, done)
        assert 0 <= deleted - finished < 2.0, deleted - finished
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
                await anyio.sleep(1.5)  # into the 1 s safety margin, but within the TTR
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
                while worker.stats.buried == 0:
                    await anyio.sleep(0.02)
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


async def test_handler_timeout_is_a_failure(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        job_id = p.put(b"hang")
        done = anyio.Event()
        retry = RetryPolicy(base_delay=0)
        async with AsyncWorker(
            server.url, tubes=[tube], handler_timeout=0.3, retry=retry
        ) as worker:

            async def handler(job: Job) -> None:
                await anyio.sleep(60)

            async def watch() -> None:
                while worker.stats.released == 0:
                    await anyio.sleep(0.02)
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await _run_until(worker, handler, done)
        assert worker.stats.failed >= 1
        assert p.stats_job(job_id)["releases"] >= 1


async def test_stop_lets_handlers_finish(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        p.put_many([b"a", b"b", b"c"])
        started = anyio.Event()
        finished: list[int] = []
        async with AsyncWorker(server.url, tubes=[tube], concurrency=3) as worker:

            async def handler(job: Job) -> None:
                started.set()
                await anyio.sleep(0.5)
                finished.append(job.id)

            await _run_until(worker, handler, started)
        assert len(finished) == worker.stats.deleted >= 1
        assert worker.stats.in_flight == 0
        stats = p.stats_tube(tube)
        assert stats["current-jobs-reserved"] == 0
        assert stats["current-jobs-ready"] == 3 - len(finished)


async def test_stop_deadline_releases_what_is_left(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        job_id = p.put(b"stuck", priority=9)
        started = anyio.Event()
        async with AsyncWorker(server.url, tubes=[tube], shutdown_timeout=0.2) as worker:

            async def handler(job: Job) -> None:
                started.set()
                await anyio.sleep(30)

            await _run_until(worker, handler, started)
        # released, not deleted: the stop did not wait for the handler's 30 s
        assert worker.stats.released == 1 and worker.stats.deleted == 0
        stats = p.stats_job(job_id)
        assert (stats["state"], stats["pri"]) == ("ready", 9)


@pytest.mark.slow
async def test_reconnect_restores_watch_list(tube: str, anyio_backend: str) -> None:
    srv = start_server("bundled")
    port = srv.port
    try:
        seen: list[bytes] = []
        done = anyio.Event()
        async with AsyncWorker(srv.url, tubes=[tube], concurrency=4) as worker:

            async def handler(job: Job) -> None:
                seen.append(job.body)
                if job.body == b"after":
                    done.set()

            async def operate() -> None:
                nonlocal srv
                with _producer(srv, tube) as p:
                    p.put(b"before")
                while not seen:
                    await anyio.sleep(0.02)
                srv.stop()  # the server dies under the worker
                await anyio.sleep(0.3)
                srv = start_server("bundled", port=port)
                with _producer(srv, tube) as p:
                    p.put(b"after")

            async with anyio.create_task_group() as tg:
                tg.start_soon(operate)
                await _run_until(worker, handler, done, limit=30)
        assert seen[0] == b"before" and seen[-1] == b"after"
        assert worker.stats.reconnects >= 1
    finally:
        srv.stop()


def test_sync_worker_thread_pool(server: BeanstalkServer, tube: str) -> None:
    with _producer(server, tube) as p:
        ids = p.put_many([b"%d" % i for i in range(200)])
        lock = threading.Lock()
        seen: list[int] = []
        threads: set[int] = set()
        worker = Worker(server.url, tubes=[tube], concurrency=8)

        def handler(job: Job) -> None:
            time.sleep(0.002)
            with lock:
                seen.append(job.id)
                threads.add(threading.get_ident())
                if len(seen) == len(ids):
                    worker.stop()  # from a handler thread

        runner = threading.Thread(target=worker.run, args=(handler,), daemon=True)
        runner.start()
        runner.join(30)
        assert not runner.is_alive()
        assert sorted(seen) == ids and len(threads) > 1
        assert worker.stats.deleted == 200
        assert p.stats_tube(tube)["current-jobs-ready"] == 0


def test_sigterm_stops_gracefully(server: BeanstalkServer, tube: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from beanstalk_client.worker import Worker
        worker = Worker({server.url!r}, tubes=[{tube!r}], concurrency=2)
        def handler(job):
            print("start", job.id, flush=True)
            time.sleep(0.5)
            print("end", job.id, flush=True)
        worker.run(handler)
        print("deleted", worker.stats.deleted, "released", worker.stats.released, flush=True)
    """))
    with _producer(server, tube) as p:
        job_id = p.put(b"x")
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["start", str(job_id)]
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert f"end {job_id}" in out and "deleted 1 released 0" in out
        with pytest.raises(NotFound):
            p.peek(job_id)


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
                    await anyio.sleep(0.2)  # the first handler's outcome is handled by now
                    try:  # not deleted under our feet
                        seen["state"] = p.stats_job(job_id)["state"]
                    except NotFound:
                        seen["state"] = "deleted"
                    seen["in_flight"] = worker.stats.in_flight
                finally:
                    worker.stop()
                await anyio.sleep(0.5)
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


@pytest.mark.slow
def test_a_thread_over_handler_timeout_keeps_its_slot(server: BeanstalkServer, tube: str) -> None:
    """Concurrency 1: the first handler's thread runs past ``handler_timeout``; its job is
    released, but a thread cannot be stopped, so it still fills the one slot: the next job is
    not reserved until the thread returns."""
    started, release = threading.Event(), threading.Event()
    seen: list[bytes] = []
    worker = Worker(server.url, tubes=[tube], concurrency=1, handler_timeout=0.5,
                    retry=RetryPolicy(base_delay=30), max_ack_delay=0.2, idle_wait=0.2)

    def handler(job: Job) -> None:
        seen.append(job.body)
        if job.body == b"first":
            started.set()
            release.wait(20)
        else:
            worker.stop()

    with _producer(server, tube) as p:
        p.put(b"first")
        runner = threading.Thread(target=worker.run, args=(handler,),
                                  kwargs={"handle_signals": False}, daemon=True)
        runner.start()
        try:
            assert started.wait(10)
            # given up on: released with a delay
            wait_until(lambda: worker.stats.released, 10, "the job released")
            second = p.put(b"second")
            time.sleep(1.0)  # five blocking reserves' worth, were the slot free
            assert p.stats_job(second)["state"] == "ready"
            assert seen == [b"first"]
        finally:
            release.set()
        runner.join(15)
        assert not runner.is_alive()
        assert seen == [b"first", b"second"]
        with pytest.raises(NotFound):
            p.stats_job(second)
