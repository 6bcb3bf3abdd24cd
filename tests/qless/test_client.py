"""The qless Client / AsyncClient (asyncio and trio) against a real redis-server.

Every call goes through the public API and, where it matters, the state is checked in Redis
with plain commands (the document's key layout). Time is the client's ``clock``: tests move it
forward instead of sleeping, as the script only knows the ``now`` it is given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from jobwire import LocalProtocolError, RemoteProtocolError
from qless_client import (
    AsyncClient,
    BulkError,
    Client,
    HasDependents,
    JobNotFound,
    LostLock,
    RedisError,
    WrongQueue,
    WrongState,
)
from qless_client._redis import Redis
from tests.qless.conftest import RedisServer

DB = 8
T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    with Redis.from_url(f"{redis_server.url}/{DB}") as r:
        r.execute("FLUSHDB")
    yield f"{redis_server.url}/{DB}"


@pytest.fixture
def raw(url: str) -> Iterator[Redis]:
    """A plain connection to look at what the client left in Redis."""
    with Redis.from_url(url) as r:
        yield r


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(url: str, clock: Clock) -> Iterator[Client]:
    with Client(url, worker_name="w1", clock=clock) as c:
        yield c


def test_lifecycle_put_pop_heartbeat_complete(client: Client, raw: Redis, clock: Clock) -> None:
    q = client.queue("emails")
    jid = q.put("app.Send", {"to": "a@example.com", "n": [1, 2.5, None, True]}, priority=3,
                tags=["mail"], retries=2)
    assert re.fullmatch(r"[0-9a-f]{32}", jid) and jid[12] == "4"
    assert raw.execute("HGET", f"ql:j:{jid}", "state") == b"waiting"
    assert q.length() == 1
    [job] = q.pop()
    assert (job.jid, job.klass, job.state, job.queue, job.worker) == (
        jid, "app.Send", "running", "emails", "w1")
    assert job.data == {"to": "a@example.com", "n": [1, 2.5, None, True]}
    assert job.priority == 3 and job.tags == ["mail"] and job.retries == 2
    assert job.expires is not None and job.expires.timestamp() == T0 + 60
    clock.now += 30
    assert job.heartbeat().timestamp() == T0 + 90
    assert raw.execute("ZSCORE", "ql:q:emails-locks", jid) == b"1700000090"
    clock.now += 5
    assert job.complete() == "complete"
    got = client.get(jid)
    assert got is not None and got.state == "complete" and got.queue is None
    assert raw.execute("ZSCORE", "ql:completed", jid) is not None
    stats = q.stats(T0)
    assert stats["wait"]["total"] == 1 and stats["run"]["total"] == 1
    assert stats["run"]["mean"] == 35.0


@pytest.mark.parametrize("data", [None, 0, -1.5, "text", [], {}, [{"a": [None]}], "é ☃"])
def test_any_json_value_round_trips(client: Client, data: Any) -> None:
    jid = client.queue("q").put("K", data)
    job = client.get(jid)
    assert job is not None and job.data == data


def test_bad_input_is_refused_before_anything_is_sent(client: Client, raw: Redis) -> None:
    q = client.queue("q")
    with pytest.raises(LocalProtocolError):
        client.queue("")
    with pytest.raises(LocalProtocolError):
        client.queue("a\r\nb")
    with pytest.raises(LocalProtocolError):
        q.put("K", {"x": float("nan")})
    with pytest.raises(LocalProtocolError):
        q.put("K", {1, 2})
    with pytest.raises(LocalProtocolError):
        q.put("K", 1, delay=-1)
    with pytest.raises(LocalProtocolError):
        q.put("", 1)
    with pytest.raises(LocalProtocolError):
        q.put("K", 1, delay=5, depends=["x"])
    with pytest.raises(TypeError):
        q.put("K", 1, priority="high")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        q.pop(0)
    with pytest.raises(LocalProtocolError):
        q.put_many([("K", 1), ("K", object())])
    assert raw.execute("DBSIZE") == 0


def test_errors_are_typed_and_keep_the_script_text(client: Client, url: str, clock: Clock
                                                   ) -> None:
    q = client.queue("q")
    q.put("K", 1, jid="j1")
    [job] = q.pop()
    with Client(url, worker_name="w2", clock=clock) as other:
        clock.now += 61  # the lock expired: another worker pops it again
        [again] = other.queue("q").pop()
        assert again.jid == "j1" and again.worker == "w2"
        with pytest.raises(LostLock) as info:
            job.complete()
        assert info.value.reason == "Lost lock" and "j1" in str(info.value)
        assert info.value.command == "complete"
        with pytest.raises(LostLock):
            job.heartbeat()
        with pytest.raises(WrongQueue):
            again.queue = "elsewhere"
            again.complete()
        again.queue = "q"
        assert again.complete() == "complete"
    with pytest.raises(JobNotFound):
        client.queue("q").put("K", 1, jid="j2")  # exists now
        missing = client.get("j2")
        assert missing is not None
        client.cancel("j2")
        missing.heartbeat()
    assert client.get("nope") is None


def test_retry_counts_and_exhausted_retries_fail(client: Client, raw: Redis) -> None:
    q = client.queue("q")
    jid = q.put("K", 1, retries=1)
    [job] = q.pop()
    assert job.retry() == 0
    [job] = q.pop()
    assert job.retry() < 0
    failed = client.get(jid)
    assert failed is not None and failed.state == "failed"
    assert client.failed() == {"failed-retries-q": 1}
    total, jobs = client.failed_jobs("failed-retries-q")
    assert total == 1 and jobs[0].jid == jid
    assert raw.execute("LRANGE", "ql:f:failed-retries-q", 0, -1) == [jid.encode()]


def test_fail_unfail_and_failure_groups(client: Client) -> None:
    q = client.queue("q")
    for i in range(3):
        q.put("K", i)
    failed_order = []
    for job in q.pop(3):
        job.fail("ValueError", f"traceback of {job.data}")
        failed_order.append(job.jid)
    assert client.failed() == {"ValueError": 3}
    total, jobs = client.failed_jobs("ValueError", 0, 2)
    assert total == 3 and len(jobs) == 2
    assert jobs[0].failure is not None and jobs[0].failure["group"] == "ValueError"
    assert client.unfail("q2", "ValueError", 2) == 2
    assert client.failed() == {"ValueError": 1}
    # the oldest failures move first
    assert sorted(j.jid for j in client.queue("q2").peek(5)) == sorted(failed_order[:2])


def test_dependencies_release_jobs(client: Client) -> None:
    q = client.queue("q")
    a = q.put("K", "a")
    b = q.put("K", "b", depends=[a])
    job_b = client.get(b)
    assert job_b is not None and job_b.state == "depends" and job_b.dependencies == [a]
    with pytest.raises(HasDependents):
        client.cancel(a)
    [job_a] = q.pop(5)
    assert job_a.jid == a
    job_a.complete()
    [popped] = q.pop(5)
    assert popped.jid == b
    with pytest.raises(WrongState):
        popped.depend(a)


def test_complete_into_next_queue_with_delay(client: Client, clock: Clock) -> None:
    q = client.queue("first")
    q.put("K", 1)
    [job] = q.pop()
    assert job.complete("second", delay=10) == "scheduled"
    assert client.queue("second").pop() == []
    clock.now += 11
    [moved] = client.queue("second").pop()
    assert moved.jid == job.jid and moved.queue == "second"


def test_priority_then_insertion_order(client: Client, clock: Clock) -> None:
    q = client.queue("q")
    low = []
    for i in range(3):
        low.append(q.put("K", i, priority=5))
        clock.now += 0.001  # a millisecond apart: the script keeps their order
    high = q.put("K", "urgent", priority=-1)
    assert [j.jid for j in q.pop(4)] == [high, *low]


def test_tags_tracking_queues_workers_config(client: Client) -> None:
    q = client.queue("q")
    jid = q.put("K", 1, tags=["a"])
    job = client.get(jid)
    assert job is not None
    assert job.tag("b", "c") == ["a", "b", "c"]
    assert job.untag("a") == ["b", "c"]
    assert client.tagged("b") == {"total": 1, "jobs": [jid]}
    job.track()
    jobs, expired = client.tracked()
    assert [j.jid for j in jobs] == [jid] and expired == []
    job.untrack()
    assert client.tracked() == ([], [])
    assert job.set_priority(7) == 7
    q.pop()
    assert client.workers() == [{"name": "w1", "jobs": 1, "stalled": 0}]
    assert client.worker_jobs() == {"jobs": [jid], "stalled": []}
    assert [c["name"] for c in client.queues()] == ["q"]
    assert client.config_get("heartbeat") == "60"
    client.config_set("heartbeat-q", 5)
    assert q.heartbeat() == 5
    client.config_unset("heartbeat-q")
    assert q.heartbeat() == 60
    assert client.config()["jobs-history-count"] == "50000"


def test_put_many_pipelined_and_its_bulk_error(client: Client, raw: Redis) -> None:
    q = client.queue("bulk")
    jids = q.put_many([("K", i) for i in range(2000)], window=64)
    assert len(set(jids)) == 2000
    assert raw.execute("ZCARD", "ql:q:bulk-work") == 2000
    # one clock reading for every put: equal priorities then pop in jid order, not put order
    assert {j.data for j in q.pop(3)} <= set(range(2000))
    raw.execute("SET", "ql:q:broken-work", "not a zset")
    with pytest.raises(BulkError) as info:
        client.queue("broken").put_many([("K", 1), ("K", 2)])
    # a Redis error inside a script comes as "ERR WRONGTYPE ... script: <sha>"
    assert isinstance(info.value.error, RedisError) and "WRONGTYPE" in str(info.value.error)
    assert info.value.index == 0


def test_noscript_after_script_flush_reloads(client: Client, raw: Redis) -> None:
    q = client.queue("q")
    q.put("K", 1)
    raw.execute("SCRIPT", "FLUSH")
    assert q.length() == 1
    assert [j.data for j in q.pop()] == [1]


def test_recurring_jobs(client: Client, clock: Clock) -> None:
    q = client.queue("cron")
    template = q.recur("K", {"r": 1}, interval=60, jid="tick")
    assert template == "tick"
    [first] = q.pop(5)
    assert first.jid == "tick-1" and first.data == {"r": 1}
    first.complete()
    clock.now += 60
    [second] = q.pop(5)
    assert second.jid == "tick-2"
    second.complete()
    assert q.unrecur("tick") is True
    clock.now += 600
    assert q.pop(5) == []


def test_address_forms(redis_url: str) -> None:
    with Client(redis_url, db=DB) as client:
        jid = client.queue("q").put("K", None)
        assert client.get(jid) is not None
        client.cancel(jid)


def test_client_on_a_given_connection_is_not_closed(url: str) -> None:
    with Redis.from_url(url) as redis:
        with Client(redis) as client:
            client.queue("q").put("K", 1)
        assert redis.execute("PING") == "PONG"
    with pytest.raises(TypeError):
        Client(redis, 6379)


# -- async (asyncio and trio) --------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_lifecycle(url: str, clock: Clock) -> None:
    async with AsyncClient(url, worker_name="aw", clock=clock) as client:
        q = client.queue("q")
        jid = await q.put("K", {"x": 1})
        [job] = await q.pop()
        assert job.jid == jid and job.worker == "aw"
        assert await job.complete(data={"x": 2}) == "complete"
        done = await client.get(jid)
        assert done is not None and done.data == {"x": 2}


@pytest.mark.anyio
async def test_many_tasks_pop_each_job_once_on_one_connection(url: str) -> None:
    async with AsyncClient(url) as client:
        q = client.queue("q")
        jids = await q.put_many([("K", i) for i in range(300)])
        seen: list[str] = []

        async def worker() -> None:
            while jobs := await q.pop(3):
                for job in jobs:
                    seen.append(job.jid)
                    await job.complete()

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(worker)
        assert sorted(seen) == sorted(jids)
        assert client.redis.connections == 1


@pytest.mark.anyio
async def test_cancelled_callers_never_get_another_callers_reply(url: str) -> None:
    async with AsyncClient(url) as client:
        q = client.queue("q")
        jids = [await q.put("K", i) for i in range(50)]
        got: dict[str, Any] = {}

        async def get(jid: str, cancel: bool) -> None:
            with anyio.CancelScope() as scope:
                if cancel:
                    scope.cancel()
                job = await client.get(jid)
                assert job is not None
                got[jid] = job.jid

        async with anyio.create_task_group() as tg:
            for i, jid in enumerate(jids):
                tg.start_soon(get, jid, i % 3 == 0)
        assert got and all(k == v for k, v in got.items())
        job = await client.get(jids[1])
        assert job is not None and job.data == 1


@pytest.mark.anyio
async def test_async_bad_input_is_refused(url: str) -> None:
    async with AsyncClient(url) as client:
        with pytest.raises(LocalProtocolError):
            await client.queue("q").put("K", float("inf"))
        assert await client.redis.execute("DBSIZE") == 0


def test_job_data_is_stored_as_json_text(client: Client, raw: Redis) -> None:
    jid = client.queue("q").put("K", {"b": [1, "two"]})
    assert json.loads(raw.execute("HGET", f"ql:j:{jid}", "data")) == {"b": [1, "two"]}


def test_a_lock_length_another_binding_wrote_badly_is_a_protocol_error(
    client: Client, raw: Redis
) -> None:
    raw.execute("HSET", "ql:config", "heartbeat-q", "1_0")  # int() and float() would take it
    with pytest.raises(RemoteProtocolError, match="heartbeat"):
        client.queue("q").heartbeat()
    raw.execute("HSET", "ql:config", "heartbeat-q", "2.5")
    assert client.queue("q").heartbeat() == 2
