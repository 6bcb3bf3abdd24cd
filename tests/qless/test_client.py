"""The qless Client / AsyncClient (asyncio and trio) against a real redis-server.

Every call goes through the public API and, where it matters, the state is checked in Redis
with plain commands (qless-core's key layout: the job hash, ``ql:j:<jid>-history``,
``ql:tags``...). Time is the client's ``clock``: tests move it forward instead of sleeping, as
the script only knows the ``now`` it is given.
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
    AsyncJob,
    AsyncRecurringJob,
    BulkError,
    Client,
    HasDependents,
    Job,
    JobNotFound,
    LostLock,
    RecurringJob,
    RedisError,
    ScriptError,
    WrongQueue,
    WrongState,
)
from qless_client import _scripts as sc
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


@pytest.fixture
def other(url: str, clock: Clock) -> Iterator[Client]:
    """A second worker, ``w2``, on the same clock."""
    with Client(url, worker_name="w2", clock=clock) as c:
        yield c


def history(raw: Redis, jid: str) -> list[tuple[str, int]]:
    return [(json.loads(e)[1], json.loads(e)[0])
            for e in raw.execute("LRANGE", f"ql:j:{jid}-history", 0, -1)]


def test_lifecycle_put_pop_heartbeat_complete(client: Client, raw: Redis, clock: Clock) -> None:
    q = client.queue("emails")
    jid = q.put("app.Send", {"to": "a@example.com", "n": [1, 2.5, None, True]}, priority=3,
                tags=["mail"], retries=2)
    assert re.fullmatch(r"[0-9a-f]{32}", jid) and jid[12] == "4"
    assert raw.execute("HGET", f"ql:j:{jid}", "state") == b"waiting"
    assert float(raw.execute("HGET", f"ql:j:{jid}", "time")) == T0
    assert q.length() == 1
    clock.now += 2
    job = q.pop()
    assert isinstance(job, Job)
    assert (job.jid, job.klass, job.state, job.queue, job.worker) == (
        jid, "app.Send", "running", "emails", "w1")
    assert job.data == {"to": "a@example.com", "n": [1, 2.5, None, True]}
    assert job.priority == 3 and job.tags == ["mail"] and job.retries == 2
    assert job.expires is not None and job.expires.timestamp() == T0 + 62
    assert [(e["what"], e["when"]) for e in job.history] == [("put", T0), ("popped", T0 + 2)]
    assert job.history[1]["worker"] == "w1" and job.history[0]["q"] == "emails"
    clock.now += 30
    assert job.heartbeat().timestamp() == T0 + 92
    assert raw.execute("ZSCORE", "ql:q:emails-locks", jid) == b"1700000092"
    clock.now += 5
    assert job.complete() == "complete"
    got = client.get(jid)
    assert got is not None and got.state == "complete" and got.queue is None
    assert raw.execute("ZSCORE", "ql:completed", jid) is not None
    assert history(raw, jid) == [("put", T0), ("popped", T0 + 2), ("done", T0 + 37)]
    assert raw.execute("HEXISTS", f"ql:j:{jid}", "history") == 0
    stats = q.stats(T0)
    assert stats["wait"]["count"] == 1 and stats["run"]["count"] == 1
    assert stats["wait"]["mean"] == 2.0 and stats["run"]["mean"] == 35.0
    assert len(stats["wait"]["histogram"]) == len(sc.BUCKETS) == 148
    assert stats["wait"]["histogram"][sc.BUCKETS.index("s2")] == 1
    assert stats["run"]["histogram"][sc.BUCKETS.index("s35")] == 1


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
    with pytest.raises(LocalProtocolError):
        q.recur("K", 1)
    with pytest.raises(LocalProtocolError):
        client.queues.pause()
    assert raw.execute("DBSIZE") == 0


def test_errors_are_typed_from_qless_core_texts(
    client: Client, other: Client, clock: Clock, raw: Redis
) -> None:
    q = client.queue("q")
    q.put("K", 1, jid="j1")
    job = q.pop()
    assert job is not None
    clock.now += 61  # the lock ran out: the first pop after it only warns (grace period)
    assert other.queue("q").pop() is None
    assert history(raw, "j1")[-1] == ("timed-out", T0 + 61)
    clock.now += 10  # qless-core's grace-period: now the job goes to another worker
    again = other.queue("q").pop()
    assert again is not None and again.jid == "j1" and again.worker == "w2"
    assert again.remaining == 4  # the lost lock cost a retry
    with pytest.raises(LostLock) as info:
        job.complete()
    assert (info.value.command, info.value.reason, info.value.detail) == (
        "Complete", "Job has been handed out to another worker", "w2")
    assert info.value.text == "Complete(): Job has been handed out to another worker: w2"
    assert str(info.value).startswith("ERR user_script:")
    with pytest.raises(LostLock, match="given out to another worker"):
        job.heartbeat()
    with pytest.raises(LostLock, match="given to another worker"):
        job.retry()
    assert job.lost
    again.queue = "elsewhere"
    with pytest.raises(WrongQueue, match='Job is in queue "q", not "elsewhere"'):
        again.complete()
    again.queue = "q"
    assert again.complete() == "complete"
    with pytest.raises(LostLock, match="not currently running: complete"):
        again.heartbeat()
    with pytest.raises(WrongState, match=r"Fail\(\): Job not currently running"):
        again.fail("g", "m")
    q.put("K", 1, jid="j2")
    missing = client.get("j2")
    assert missing is not None
    client.cancel("j2")
    for call in (missing.heartbeat, missing.track, lambda: missing.log("hi"),
                 lambda: missing.tag("t")):
        with pytest.raises(JobNotFound):
            call()
    with pytest.raises(WrongState, match="Job j2 not running"):  # qless-core's own words
        missing.timeout()
    with pytest.raises(ScriptError, match="Unknown command"):
        client._run(sc.ScriptCall("nonsense", ("nonsense", "0"), sc._none))
    assert client.get("nope") is None


def test_retry_counts_and_exhausted_retries_fail(client: Client, raw: Redis) -> None:
    q = client.queue("q")
    jid = q.put("K", 1, retries=1)
    job = q.pop()
    assert job is not None and job.retry() == 0
    job = q.pop()
    assert job is not None and job.retry() < 0
    failed = client.get(jid)
    assert failed is not None and failed.state == "failed"
    assert failed.failure is not None
    assert failed.failure["message"] == 'Job exhausted retries in queue "q"'
    assert client.failed() == {"failed-retries-q": 1}
    total, jobs = client.failed_jobs("failed-retries-q")
    assert total == 1 and jobs[0].jid == jid
    assert raw.execute("LRANGE", "ql:f:failed-retries-q", 0, -1) == [jid.encode()]


def test_retry_with_group_and_message(client: Client) -> None:
    q = client.queue("q")
    jid = q.put("K", 1, retries=1)
    job = q.pop()
    assert job is not None
    assert job.retry(5, "IOError", "the disk went away") == 0
    kept = client.get(jid)
    assert kept is not None and kept.state == "scheduled"
    assert kept.failure is not None and kept.failure["group"] == "IOError"
    with pytest.raises(LocalProtocolError):
        kept.retry(group="only a group")
    client.clock = lambda: T0 + 10
    job = q.pop()
    assert job is not None and job.retry(0, "IOError", "again") == -1
    assert client.failed() == {"IOError": 1}
    failed = client.get(jid)
    assert failed is not None and failed.failure is not None
    assert (failed.failure["group"], failed.failure["message"]) == ("IOError", "again")


def test_fail_unfail_and_failure_groups(client: Client) -> None:
    q = client.queue("q")
    for i in range(3):
        q.put("K", i)
    failed_order = []
    for job in q.pop(3):
        assert job.fail("ValueError", f"traceback of {job.data}") == job.jid
        failed_order.append(job.jid)
    assert client.failed() == {"ValueError": 3}
    total, jobs = client.failed_jobs("ValueError", 0, 2)
    assert total == 3 and len(jobs) == 2
    assert [j.jid for j in jobs] == failed_order[:0:-1]  # the most recent first
    assert jobs[0].failure is not None and jobs[0].failure["group"] == "ValueError"
    assert jobs[0].failure["worker"] == "w1"
    total, rest = client.failed_jobs("ValueError", 2, 2)
    assert [j.jid for j in rest] == failed_order[:1]
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
    c = q.put("K", "c")
    job_b.depend(c)
    job_b.undepend(c)
    assert job_b.dependencies == [a]
    with pytest.raises(HasDependents, match="is a dependency of"):
        client.cancel(a)
    assert sorted(j.jid for j in q.pop(5)) == sorted([a, c])
    assert client.get(a).complete() == "complete"  # type: ignore[union-attr]
    popped = q.pop()
    assert popped is not None and popped.jid == b
    with pytest.raises(WrongState, match="not in the depends state"):
        popped.depend(a)


def test_complete_into_next_queue_with_delay(client: Client, clock: Clock) -> None:
    q = client.queue("first")
    q.put("K", 1)
    job = q.pop()
    assert job is not None
    assert job.complete("second", delay=10) == "scheduled"
    assert client.queue("second").pop() is None and client.queue("second").pop(3) == []
    clock.now += 11
    moved = client.queue("second").pop()
    assert moved is not None and moved.jid == job.jid and moved.queue == "second"
    assert [e["what"] for e in moved.history] == ["put", "popped", "done", "put", "popped"]


def test_highest_priority_first_then_put_order(client: Client, clock: Clock) -> None:
    q = client.queue("q")
    low = []
    for i in range(3):
        low.append(q.put("K", i, priority=-5))
        clock.now += 0.001
    high = q.put("K", "urgent", priority=10)
    mid = q.put("K", "normal")
    assert [j.jid for j in q.peek(5)] == [high, mid, *low]
    assert [j.jid for j in q.pop(5)] == [high, mid, *low]


def test_tags_tracking_queues_workers_config(client: Client, raw: Redis) -> None:
    q = client.queue("q")
    jid = q.put("K", 1, tags=["a"])
    job = client.get(jid)
    assert job is not None
    assert job.tag("b", "c") == ["a", "b", "c"]
    assert job.untag("a") == ["b", "c"]
    assert client.tagged("b") == {"total": 1, "jobs": [jid]}
    q.put("K", 2, tags=["b"])
    assert client.tags() == ["b"]  # only tags of two or more jobs count
    assert raw.execute("ZSCORE", "ql:tags", "b") == b"2"
    job.track()
    jobs, expired = client.tracked()
    assert [j.jid for j in jobs] == [jid] and expired == []
    job.untrack()
    assert client.tracked() == ([], [])
    assert job.set_priority(7) == 7
    assert q.pop().jid == jid  # type: ignore[union-attr]
    assert client.workers() == [{"name": "w1", "jobs": 1, "stalled": 0}]
    assert client.worker_jobs() == {"jobs": [jid], "stalled": []}
    assert [c["name"] for c in client.queues()] == ["q"]
    assert client.config_get("heartbeat") == "60"
    assert client.config_get("grace-period") == "10"
    assert client.config_get("nothing") is None
    q.set_heartbeat(5)
    assert raw.execute("HGET", "ql:config", "q-heartbeat") == b"5.0"
    assert q.heartbeat() == 5
    q.set_heartbeat(None)
    assert q.heartbeat() == 60
    assert client.config()["jobs-history-count"] == "50000"
    assert client.config()["application"] == "qless"


def test_put_many_pipelined_and_its_bulk_error(client: Client, raw: Redis) -> None:
    q = client.queue("bulk")
    jids = q.put_many([("K", i) for i in range(2000)], window=64)
    assert len(set(jids)) == 2000
    assert raw.execute("ZCARD", "ql:q:bulk-work") == 2000
    assert {j.data for j in q.pop(3)} <= set(range(2000))
    raw.execute("SET", "ql:q:broken-work", "not a zset")
    with pytest.raises(BulkError) as info:
        client.queue("broken").put_many([("K", 1), ("K", 2)])
    # a Redis error inside a script comes as "WRONGTYPE ... script: <sha>"
    assert isinstance(info.value.error, RedisError) and "WRONGTYPE" in str(info.value.error)
    assert info.value.index == 0


def test_noscript_after_script_flush_reloads(client: Client, raw: Redis) -> None:
    q = client.queue("q")
    q.put("K", 1)
    raw.execute("SCRIPT", "FLUSH")
    assert q.length() == 1
    assert [j.data for j in q.pop(1)] == [1]


def test_recurring_jobs(client: Client, clock: Clock, raw: Redis) -> None:
    q = client.queue("cron")
    assert q.recur("K", {"r": 1}, 60, jid="tick", tags=["t"]) == "tick"
    first = q.pop()
    assert first is not None and first.jid == "tick-1" and first.data == {"r": 1}
    assert first.tags == ["t"]
    # Its template is named in the job (newer qless-core writes the field too; 0.11.4's does not)
    assert first.spawned_from_jid == "tick"
    assert raw.execute("HGET", "ql:j:tick-1", "spawned_from_jid") == b"tick"
    first.complete()
    # recurring the template again keeps its count: the next job is tick-2, not tick-1 again
    clock.now += 55
    q.recur("K", {"r": 2}, 60, jid="tick")
    clock.now += 1
    second = q.pop()
    assert second is not None and second.jid == "tick-2" and second.data == {"r": 2}
    template = client.recurring("tick")
    assert isinstance(template, RecurringJob)
    assert (template.count, template.interval, template.queue) == (2, 60, "cron")
    template.update(priority=3, data={"r": 3}, interval=120, retries=2, backlog=1)
    assert template.tag("x", "y") == ["x", "y"]
    assert template.untag("x") == ["y"]
    again = client.recurring("tick")
    assert again is not None
    assert (again.priority, again.data, again.interval, again.retries, again.backlog,
            again.tags) == (3, {"r": 3}, 120, 2, 1, ["y"])
    again.move("cron2")
    assert raw.execute("ZSCORE", "ql:q:cron2-recur", "tick") is not None
    assert client.jobs["tick"] is not None
    again.cancel()
    assert client.recurring("tick") is None
    with pytest.raises(JobNotFound, match="No recurring job"):
        again.update(priority=1)
    clock.now += 600
    assert q.pop(5) == []


def test_pause_unpause_and_length(client: Client) -> None:
    q = client.queue("q")
    for i in range(3):
        q.put("K", i, delay=i * 10)
    assert q.length() == 3
    q.pause()
    assert q.counts()["paused"] is True
    assert q.pop(5) == []
    q.unpause()
    assert q.counts()["paused"] is False
    assert len(q.pop(5)) == 1
    assert q.length() == 3  # one running, two scheduled
    client.queues.pause("q", "other")
    assert [c["paused"] for c in client.queues()] == [True]
    client.queues.unpause("q", "other")


def test_timeout_makes_a_job_stalled_and_popped_again(
    client: Client, other: Client, raw: Redis
) -> None:
    q = client.queue("q")
    jid = q.put("K", 1)
    job = q.pop()
    assert job is not None
    job.timeout()
    assert client.get(jid).state == "stalled"  # type: ignore[union-attr]
    assert history(raw, jid)[-1][0] == "timed-out"
    with pytest.raises(LostLock):
        job.heartbeat()
    again = other.queue("q").pop()
    assert again is not None and again.jid == jid and again.worker == "w2"
    with pytest.raises(WrongState, match="not running"):
        client.timeout(q.put("K", 2))


def test_log_adds_to_the_history(client: Client) -> None:
    jid = client.queue("q").put("K", 1)
    job = client.get(jid)
    assert job is not None
    job.log("checked", {"by": "ops"})
    job.log("again")
    got = client.get(jid)
    assert got is not None
    assert [(e["what"], e.get("by")) for e in got.history] == [
        ("put", None), ("checked", "ops"), ("again", None)]
    with pytest.raises(LocalProtocolError):
        job.log("bad", {"x": float("nan")})


def test_move_and_requeue(client: Client) -> None:
    q = client.queue("q")
    jid = q.put("K", {"a": 1}, priority=4, tags=["t"])
    job = q.pop()
    assert job is not None
    assert job.move("elsewhere", delay=5) == jid
    moved = client.get(jid)
    assert moved is not None and (moved.queue, moved.state, moved.priority, moved.tags) == (
        "elsewhere", "scheduled", 4, ["t"])
    with pytest.raises(LostLock):
        job.complete()
    assert moved.requeue("q", priority=9) == jid
    back = client.get(jid)
    assert back is not None and (back.queue, back.state, back.priority) == ("q", "waiting", 9)
    client.cancel(jid)
    with pytest.raises(JobNotFound):
        back.requeue()
    assert client.get(jid) is None


def test_max_concurrency_throttles_pops(client: Client, other: Client) -> None:
    q = client.queue("q")
    for i in range(5):
        q.put("K", i)
    q.set_max_concurrency(2)
    assert q.max_concurrency() == 2
    assert client.config_get("q-max-concurrency") == "2"
    first = q.pop(5)
    assert len(first) == 2
    assert other.queue("q").pop(5) == []
    first[0].complete()
    assert len(other.queue("q").pop(5)) == 1
    q.set_max_concurrency(None)
    assert q.max_concurrency() == 0
    assert len(q.pop(5)) == 2


def test_workers_deregister_and_queue_forget(client: Client, other: Client) -> None:
    client.queue("q").put("K", 1)
    client.queue("q").pop()
    other.queue("q").pop()
    assert {w["name"] for w in client.workers()} == {"w1", "w2"}
    client.workers.deregister("w2")
    assert [w["name"] for w in client.workers()] == ["w1"]
    assert client.workers["w1"]["jobs"] != []
    client.queue("q").forget()
    assert client.queues() == []
    client.queue("q").put("K", 2)
    assert [c["name"] for c in client.queues.counts()] == ["q"]


def test_qless_py_style_api(client: Client) -> None:
    q = client.queues["q"]
    assert q.name == "q"
    a = q.put("app.A", {"k": 1}, tags=["t"])
    b = q.put("app.B", None, tags=["t"])
    job = client.jobs[a]
    assert isinstance(job, Job) and job.klass_name == "app.A" and job.queue_name == "q"
    assert client.jobs["missing"] is None
    assert [j.jid for j in client.jobs.get(a, "missing", b)] == [a, b]
    tagged = client.jobs.tagged("t")
    assert tagged["total"] == 2 and sorted(tagged["jobs"]) == sorted([a, b])
    popped = q.pop()
    assert popped is not None
    assert (popped.worker_name, popped.original_retries, popped.retries_left) == ("w1", 5, 5)
    assert popped.expires_at == T0 + 60 and popped.ttl == 60
    popped.fail("Oops", "it broke")
    assert client.jobs.failed() == {"Oops": 1}
    page = client.jobs.failed("Oops")
    assert isinstance(page, tuple)
    total, jobs = page
    assert total == 1 and [j.jid for j in jobs] == [popped.jid]
    other = q.pop()
    assert other is not None and other.complete() == "complete"
    assert client.jobs.complete() == [other.jid]
    assert client.track(popped.jid) is True
    tracked, expired = client.jobs.tracked()
    assert [j.jid for j in tracked] == [popped.jid] and expired == []
    assert client.untrack(popped.jid) is True


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


def test_calls_declare_no_keys(client: Client, raw: Redis) -> None:
    """qless-core's convention: ``EVALSHA <sha> 0 <command> <now> <args...>``."""
    call = sc.put(T0, "q", "j", "K", "{}")
    assert call.command_line()[:3] == ["EVALSHA", sc.SHA, 0]
    assert call.args[:2] == ("put", repr(T0))
    client.queue("q").put("K", 1, jid="j")  # loads the script
    assert raw.execute(*call.command_line()) == b"j"


# -- async (asyncio and trio) --------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_lifecycle(url: str, clock: Clock) -> None:
    async with AsyncClient(url, worker_name="aw", clock=clock) as client:
        q = client.queues["q"]
        jid = await q.put("K", {"x": 1})
        job = await q.pop()
        assert isinstance(job, AsyncJob) and job.jid == jid and job.worker == "aw"
        assert await q.pop() is None
        assert await job.complete(data={"x": 2}) == "complete"
        done = await client.jobs[jid]
        assert isinstance(done, AsyncJob) and done.data == {"x": 2}


@pytest.mark.anyio
async def test_async_new_commands(url: str, clock: Clock) -> None:
    async with AsyncClient(url, worker_name="aw", clock=clock) as client:
        q = client.queue("q")
        await q.recur("K", 1, 60, jid="r")
        template = await client.jobs["r"]
        assert isinstance(template, AsyncRecurringJob)
        await template.update(priority=2)
        assert await template.tag("a") == ["a"]
        await q.pause()
        assert await q.pop(3) == []
        await q.unpause()
        job = await q.pop()
        assert job is not None and job.jid == "r-1" and job.priority == 2
        await job.log("started")
        await job.timeout()
        with pytest.raises(LostLock):
            await job.heartbeat()
        again = await q.pop()
        assert again is not None and again.jid == "r-1"
        assert await again.retry(0, "E", "m") == 4  # a timeout costs no retry
        assert await q.length() == 1
        await q.set_max_concurrency(1)
        assert await q.max_concurrency() == 1
        assert await client.tags() == []
        assert (await client.workers())[0]["name"] == "aw"
        await client.workers.deregister("aw")
        assert await client.workers() == []
        await q.forget()
        assert await client.queues() == []


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
    raw.execute("HSET", "ql:config", "q-heartbeat", "1_0")  # int() and float() would take it
    with pytest.raises(RemoteProtocolError, match="heartbeat"):
        client.queue("q").heartbeat()
    raw.execute("HSET", "ql:config", "q-heartbeat", "2.5")
    assert client.queue("q").heartbeat() == 2.5


def test_bucket_of_matches_qless_core_histogram() -> None:
    assert sc.BUCKETS[:2] == ("s0", "s1") and sc.BUCKETS[-1] == "d6"
    cases = {0: "s0", 59.9: "s59", 60: "m1", 3599: "m59", 3600: "h1", 86399: "h23",
             86400: "d1", 6 * 86400 + 5: "d6", 7 * 86400: "d7", -3: "s0"}
    for seconds, name in cases.items():
        assert sc.bucket_of(seconds) == name
    assert sc.day_of(T0 + 0.5) == T0 - T0 % 86400


def test_error_texts_are_taken_apart() -> None:
    from qless_client.errors import error_for

    text = ("ERR user_script:786: Heartbeat(): Job given out to another worker: w1 script: "
            "72594f08e8ba5ea50463bf0a1236ef43fe453044, on @user_script:786.")
    error = error_for(text)
    assert isinstance(error, LostLock)
    assert (error.command, error.reason, error.detail) == (
        "Heartbeat", "Job given out to another worker", "w1")
    assert error.message == text
    cases = {
        "Complete(): Job does not exist": JobNotFound,
        "Retry(): Job is not currently running: waiting": LostLock,
        "Fail(): Job not currently running: waiting": WrongState,
        "Timeout(): Job j not running": WrongState,
        "Depends(): Job j not in the depends state: running": WrongState,
        "Cancel(): a is a dependency of b but is not mentioned to be canceled": HasDependents,
        "Recur(): No recurring job r": JobNotFound,
        'Retry(): Job is in queue "a", not "b"': WrongQueue,
        "Fail(): Job has been handed out to another worker: w2": LostLock,
        "Put(): Arg \"delay\" not a number: x": ScriptError,
    }
    for message, cls in cases.items():
        got = error_for(f"ERR user_script:1: {message} script: {'a' * 40}, on @user_script:1.")
        assert type(got) is cls and got.text == message
    assert type(error_for("WRONGTYPE Operation against a key")) is RedisError
