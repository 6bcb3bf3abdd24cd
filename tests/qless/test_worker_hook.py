"""The client hooks a worker is built on, against a real Redis: ``observer=`` (every script call
a client sends, with its result) and ``AsyncClient.blocking()`` (a blocking client for other
threads, whose calls run on the async client's connection in its event loop)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from jobwire.events import EventSink
from qless_client import AsyncClient, AsyncJob, BulkError, Client, LostLock, script
from qless_client._redis import Redis
from qless_client.worker import AsyncWorker
from tests.qless.conftest import RedisServer
from tests.test_events import read_jsonl

DB = 14


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    with Redis.from_url(f"{redis_server.url}/{DB}") as r:
        r.execute("FLUSHDB")
    yield f"{redis_server.url}/{DB}"


class Boom(Exception):
    """An observer's own exception."""


def _queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


class Seen:
    """An observer that keeps ``(command, args, now, result)`` for every call, with the
    thread it was called in."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...], float, Any]] = []
        self.threads: set[int] = set()
        #: Set at the second ``complete`` (for observers called in an event loop).
        self.two_completes: anyio.Event | None = None

    def __call__(self, call: script.ScriptCall[Any], result: Any) -> None:
        self.calls.append((call.command, call.args, call.now, result))
        self.threads.add(threading.get_ident())
        if self.two_completes is not None and self.commands().count("complete") == 2:
            self.two_completes.set()

    def commands(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest.mark.anyio
async def test_the_observer_sees_each_call_with_its_result(url: str) -> None:
    q = _queue()
    seen = Seen()
    async with AsyncClient(url, worker_name="obs", observer=seen) as client:
        jid = await client.queue(q).put("K", {"n": 1})
        job = await client.queue(q).pop()
        assert job is not None
        await job.complete()
        with pytest.raises(LostLock):  # refused (the job is complete): not seen
            await job.heartbeat()
        jids = await client.queue(q).put_many([("K", i) for i in range(3)])
    assert seen.commands() == ["put", "pop", "complete", "put", "put", "put"]
    (_, put_args, now, put_result), (_, pop_args, _, popped), (*_, state) = seen.calls[:3]
    assert put_args[:4] == ("put", str(now), q, jid) and put_result == jid
    assert pop_args[2:] == (q, "obs", "1") and [raw["jid"] for raw in popped] == [jid]
    assert state == "complete"
    assert [c[3] for c in seen.calls[3:]] == jids


@pytest.mark.anyio
async def test_the_observer_sees_calls_in_the_order_they_were_sent(url: str) -> None:
    """Replies come in the order the calls went out; the observer sees them in that order,
    whichever of the callers' tasks wakes first (trio wakes a batch of tasks in random
    order): a worker's ``pop`` sent just after a ``retry`` of the same job is seen after it."""
    q = _queue()
    seen = Seen()
    sent: list[str] = []
    async with AsyncClient(url, worker_name="obs", observer=seen) as client:
        queue = client.queue(q)
        await queue.length()  # connected, the script loaded: nothing awaits before a send

        async def put(i: int) -> None:
            jid = f"{q}-{i:02d}"
            sent.append(jid)  # the send order: nothing is awaited between here and the send
            assert await queue.put("K", i, jid=jid) == jid

        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(put, i)
    assert [c[3] for c in seen.calls[1:]] == sent


@pytest.mark.anyio
async def test_what_the_observer_raises_reaches_its_callers_task(url: str) -> None:
    """The observer runs when the reply is read, maybe in another caller's task; what it
    raises is raised by the call it was shown (which ran), and by no other."""
    q = _queue()
    seen = Seen()

    def observer(call: script.ScriptCall[Any], result: Any) -> None:
        seen(call, result)
        if call.command == "put" and call.args[5] == "7":  # a put of the data 7
            raise Boom(call.args[3])

    raised: dict[str, BaseException] = {}
    async with AsyncClient(url, worker_name="obs", observer=observer) as client:
        queue = client.queue(q)

        async def put(i: int) -> None:
            jid = f"{q}-{i:02d}"
            try:
                await queue.put("K", i, jid=jid)
            except Boom as exc:
                raised[jid] = exc

        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(put, i)
        assert list(raised) == [f"{q}-07"]
        assert await queue.length() == 16  # the call ran
        with pytest.raises(Boom):  # a pipelined batch: every call seen, then the error raised
            await queue.put_many([("K", i) for i in range(3)] + [("K", 7)], window=2)
        put_many = seen.calls[17:]
        assert len(put_many) == 4 and await queue.length() == 20
        with pytest.raises(Boom):
            await queue.put("K", 7)  # raised again, the connection unharmed
        assert await queue.length() == 21
    assert seen.commands().count("put") == 16 + 4 + 1


@pytest.mark.anyio
async def test_the_observer_skips_a_call_whose_caller_left_and_a_noscript_attempt(
    url: str
) -> None:
    """A caller cancelled before its reply came is not shown its call (the reply is dropped,
    though the call ran); after ``SCRIPT FLUSH`` the refused first attempt is not seen, the
    retried one once."""
    q = _queue()
    seen = Seen()
    async with AsyncClient(url, worker_name="obs", observer=seen) as client:
        queue = client.queue(q)
        await queue.length()
        seen.calls.clear()
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.redis.execute, "DEBUG", "SLEEP", "0.2")  # holds the replies
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(queue.put, "K", 1)
            await anyio.wait_all_tasks_blocked()  # sent, waiting behind the sleep
            tg.cancel_scope.cancel()
        assert await queue.length() == 1  # the put ran; its reply came before this one
        assert seen.commands() == ["length"]
        await client.redis.execute("SCRIPT", "FLUSH")
        jid = await queue.put("K", 2)
    assert seen.commands() == ["length", "put"] and seen.calls[1][3] == jid


def test_a_pipelined_batch_shows_the_calls_that_succeeded(url: str) -> None:
    q = _queue()
    seen = Seen()
    with Client(url, worker_name="obs", observer=seen) as client:
        jid = client.queue(q).put("K", 1)
        seen.calls.clear()
        calls: list[script.ScriptCall[Any]] = [
            script.get(client.clock(), jid),
            script.heartbeat(client.clock(), jid, "obs"),  # not running: refused
            script.get(client.clock(), "no-such-jid"),
        ]
        with pytest.raises(BulkError):
            script.run_many(client, calls)
        client.observer = None  # may be cleared
        client.queue(q).length()
    assert [(c[0], c[3] is None) for c in seen.calls] == [("get", False), ("get", True)]
    assert seen.calls[0][3]["jid"] == jid


@pytest.mark.anyio
async def test_blocking_runs_a_threads_calls_on_the_async_clients_connection(url: str) -> None:
    q = _queue()
    seen = Seen()
    async with AsyncClient(url, worker_name="obs", observer=seen) as client:
        await client.queue(q).length()  # connected
        blocking = client.blocking()
        assert blocking.worker_name == "obs" and blocking.serializer is client.serializer
        assert "(relayed)" in repr(blocking)

        def in_thread() -> tuple[str, int]:
            with blocking:
                jid = blocking.queue(q).put("K", 1)
                [job] = blocking.queue(q).pop(1)
                job.complete()
                return jid, threading.get_ident()

        jid, thread = await anyio.to_thread.run_sync(in_thread)
        with pytest.raises(RuntimeError):  # the loop's own thread: it would wait for itself
            blocking.queue(q).length()
        assert client.redis.connections == 1  # no connection of its own
        job = await client.get(jid)
    assert job is not None and job.state == "complete"
    # Each call ran in the event loop, where the async client's observer saw it.
    assert seen.commands()[1:] == ["put", "pop", "complete", "get"]
    assert thread not in seen.threads


def test_blocking_needs_a_running_event_loop(url: str) -> None:
    async def make() -> tuple[AsyncClient, Client]:
        async with AsyncClient(url) as client:
            return client, client.blocking()

    client, blocking = anyio.run(make)
    with pytest.raises(RuntimeError):  # made outside an event loop
        client.blocking()
    raised: list[BaseException] = []

    def call() -> None:
        try:
            blocking.queue("q").length()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=call)  # not the loop's thread: the loop has ended
    thread.start()
    thread.join(10)
    assert len(raised) == 1 and isinstance(raised[0], RuntimeError), raised


@pytest.mark.anyio
async def test_a_worker_with_events_keeps_its_clients_observer(
    url: str, tmp_path: Path
) -> None:
    """The worker records events through an observer of its own, over the given client's
    connection; the client's own observer still sees every call the worker makes."""
    q = _queue()
    seen = Seen()
    with Client(url) as putter:
        jids = [putter.queue(q).put("K", i) for i in range(2)]
    seen.two_completes = anyio.Event()

    async def handler(job: AsyncJob) -> None:
        if job.data == 1:
            await job.complete()  # the handler's own call

    async with AsyncClient(url, worker_name="ev", observer=seen) as client:
        with EventSink(tmp_path) as sink:
            worker = AsyncWorker(client, queues=[q], concurrency=2, idle_wait=0.05, events=sink)

            async def stopper() -> None:
                assert seen.two_completes is not None
                await seen.two_completes.wait()
                worker.stop()

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stopper)
                    await worker.run(handler, handle_signals=False)
        assert client.observer is seen  # left as it was
    records = read_jsonl(tmp_path)
    assert sorted((r["job"], r["event"]) for r in records) == sorted(
        [(jid, "reserved") for jid in jids] + [(jid, "completed") for jid in jids])
    completes = [c for c in seen.calls if c[0] == "complete"]
    assert sorted(c[1][2] for c in completes) == sorted(jids)
    assert "pop" in seen.commands()
