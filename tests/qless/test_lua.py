"""The qless Lua script (qless_client/lua/qless.lua) through a real redis-server.

Every test drives the script through ``qless_client._scripts`` on a ``Redis`` connection and
checks the state left in Redis with plain commands (the key layout of docs/qless.md), not only
the replies. Time is the ``now`` the caller passes: tests move it forward instead of sleeping.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from qless_client import _scripts as s
from qless_client._redis import Redis
from qless_client.errors import RedisError
from tests.qless.conftest import RedisServer

T = TypeVar("T")

#: A fixed clock for the tests: 2023-11-14 22:13:20 UTC (the day starts at T0 - 80000).
T0 = 1_700_000_000.0
DAY0 = 1_699_920_000

#: The database the qless tests use on the shared server (flushed before each test).
DB = 7


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator[Redis]:
    """A connection to an empty database with the script loaded."""
    with Redis.from_url(f"{redis_server.url}/{DB}") as conn:
        conn.execute("FLUSHDB")
        assert s.load(conn) == s.SHA
        yield conn


def run(conn: Redis, call: s.ScriptCall[T]) -> T:
    return call.run(conn)


def refused(conn: Redis, call: s.ScriptCall[Any]) -> s.ScriptError:
    """Run a call that must be refused; return its split error."""
    with pytest.raises(RedisError) as info:
        call.run(conn)
    error = s.script_error(str(info.value))
    assert error is not None, str(info.value)
    assert error.reason in s.REASONS
    return error


def text(value: Any) -> Any:
    """Redis replies with bytes decoded (recursively)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [text(v) for v in value]
    return value


def hash_of(conn: Redis, key: str) -> dict[str, str]:
    flat = text(conn.execute("HGETALL", key))
    return dict(zip(flat[::2], flat[1::2], strict=True))


def zset(conn: Redis, key: str) -> dict[str, float]:
    flat = text(conn.execute("ZRANGE", key, 0, -1, "WITHSCORES"))
    return {m: float(v) for m, v in zip(flat[::2], flat[1::2], strict=True)}


def members(conn: Redis, key: str) -> list[str]:
    return sorted(text(conn.execute("SMEMBERS", key)))


def keys(conn: Redis) -> list[str]:
    return sorted(text(conn.execute("KEYS", "*")))


def put(conn: Redis, jid: str, queue: str = "q", now: float = T0, **kw: Any) -> str:
    return run(conn, s.put(now, queue, jid, "app.Job", kw.pop("data", "{}"), **kw))


def pop_jids(conn: Redis, queue: str = "q", worker: str = "w1", count: int = 1,
             now: float = T0) -> list[str]:
    return [job["jid"] for job in run(conn, s.pop(now, queue, worker, count))]


QUEUE_KEYS = ["work", "locks", "scheduled", "depends"]


def where(conn: Redis, jid: str, queue: str = "q") -> list[str]:
    """The queue sets of ``queue`` that hold ``jid``."""
    return [part for part in QUEUE_KEYS
            if conn.execute("ZSCORE", f"ql:q:{queue}-{part}", jid) is not None]


# ------------------------------------------------------------------------------------------
# put, get
# ------------------------------------------------------------------------------------------


def test_put_writes_the_documented_layout(r: Redis) -> None:
    assert put(r, "j1", data='{"x": 1}', priority=-2, tags=["a", "b", "a"], retries=3) == "j1"
    job = hash_of(r, "ql:j:j1")
    assert job == {
        "jid": "j1", "klass": "app.Job", "data": '{"x": 1}', "priority": "-2",
        "tags": '["a","b"]', "state": "waiting", "worker": "", "expires": "0", "queue": "q",
        "retries": "3", "remaining": "3", "history": '[{"put":1700000000,"q":"q"}]',
    }
    assert zset(r, "ql:q:q-work") == {"j1": pytest.approx(-2 + T0 / 1e10)}
    assert zset(r, "ql:queues") == {"q": T0}
    assert zset(r, "ql:t:a") == {"j1": T0} and zset(r, "ql:t:b") == {"j1": T0}
    assert where(r, "j1") == ["work"]


def test_get_describes_the_job_and_none_when_missing(r: Redis) -> None:
    put(r, "j1", tags=["t"])
    job = run(r, s.get(T0, "j1"))
    assert job == {
        "jid": "j1", "klass": "app.Job", "state": "waiting", "queue": "q", "worker": "",
        "priority": 0, "expires": 0, "retries": 5, "remaining": 5, "data": "{}",
        "tags": ["t"], "tracked": False, "history": [{"q": "q", "put": T0}], "failure": None,
        "dependents": [], "dependencies": [],
    }
    assert run(r, s.get(T0, "nope")) is None


def test_put_with_delay_schedules_then_pop_takes_it_when_due(r: Redis) -> None:
    put(r, "j1", delay=10)
    assert hash_of(r, "ql:j:j1")["state"] == "scheduled"
    assert zset(r, "ql:q:q-scheduled") == {"j1": T0 + 10}
    assert pop_jids(r, now=T0 + 9.999) == []
    assert run(r, s.peek(T0 + 9.999, "q", 5)) == []
    assert pop_jids(r, now=T0 + 10) == ["j1"]
    assert where(r, "j1") == ["locks"]


def test_scheduled_jobs_that_came_due_keep_their_due_time_order(r: Redis) -> None:
    put(r, "late", now=T0 + 5)                    # waiting since T0+5
    put(r, "early", delay=3)                      # due at T0+3: put "before" late
    assert pop_jids(r, count=2, now=T0 + 6) == ["early", "late"]


def test_put_moves_an_existing_job_and_keeps_its_priority_tags_retries(r: Redis) -> None:
    put(r, "j1", priority=4, tags=["a"], retries=2)
    assert pop_jids(r) == ["j1"]
    put(r, "j1", queue="other", now=T0 + 1, tags=["b"])
    job = hash_of(r, "ql:j:j1")
    assert (job["queue"], job["state"], job["priority"], job["retries"], job["worker"]) == (
        "other", "waiting", "4", "2", "")
    assert where(r, "j1") == [] and where(r, "j1", "other") == ["work"]
    assert r.execute("ZCARD", "ql:w:w1:jobs") == 0
    assert zset(r, "ql:t:a") == {} and zset(r, "ql:t:b") == {"j1": T0 + 1}
    assert [h["q"] for h in json.loads(job["history"])] == ["q", "other"]
    # The worker that held it lost its lock.
    assert refused(r, s.heartbeat(T0 + 2, "j1", "w1")).reason == "Lost lock"
    assert refused(r, s.complete(T0 + 2, "j1", "w1", "q", "{}")).reason == "Lost lock"


# ------------------------------------------------------------------------------------------
# pop, peek, heartbeat, locks
# ------------------------------------------------------------------------------------------


def test_pop_order_is_priority_then_time_put_to_the_millisecond(r: Redis) -> None:
    for i, (jid, prio) in enumerate([("a", 0), ("b", 5), ("c", 0), ("d", -3), ("e", 0)]):
        put(r, jid, priority=prio, now=T0 + i / 1000)
    assert [j["jid"] for j in run(r, s.peek(T0, "q", 10))] == ["d", "a", "c", "e", "b"]
    assert pop_jids(r, count=2) == ["d", "a"]
    assert pop_jids(r, count=10) == ["c", "e", "b"]
    assert pop_jids(r, count=10) == []


def test_pop_locks_the_jobs_for_the_worker(r: Redis) -> None:
    put(r, "j1")
    [job] = run(r, s.pop(T0 + 2, "q", "w1", 3))
    assert job["state"] == "running" and job["worker"] == "w1" and job["expires"] == T0 + 62
    assert job["history"] == [{"q": "q", "put": T0, "popped": T0 + 2, "worker": "w1"}]
    stored = hash_of(r, "ql:j:j1")
    assert (stored["state"], stored["worker"], float(stored["expires"])) == (
        "running", "w1", T0 + 62)
    assert zset(r, "ql:q:q-locks") == {"j1": T0 + 62}
    assert zset(r, "ql:q:q-work") == {}
    assert zset(r, "ql:w:w1:jobs") == {"j1": T0 + 2}
    assert zset(r, "ql:workers") == {"w1": T0 + 2}


def test_peek_changes_nothing(r: Redis) -> None:
    put(r, "j1")
    before = {k: r.execute("DUMP", k) for k in keys(r)}
    assert [j["jid"] for j in run(r, s.peek(T0, "q", 1))] == ["j1"]
    assert {k: r.execute("DUMP", k) for k in keys(r)} == before


def test_heartbeat_renews_only_the_holders_live_lock(r: Redis) -> None:
    put(r, "j1")
    run(r, s.config_set(T0, "heartbeat-q", 30))
    pop_jids(r)
    assert hash_of(r, "ql:j:j1")["expires"] == str(int(T0 + 30))
    assert run(r, s.heartbeat(T0 + 20, "j1", "w1", '{"p": 1}')) == T0 + 50
    assert zset(r, "ql:q:q-locks") == {"j1": T0 + 50}
    assert zset(r, "ql:w:w1:jobs") == {"j1": T0 + 20}
    assert hash_of(r, "ql:j:j1")["data"] == '{"p": 1}'
    other = refused(r, s.heartbeat(T0 + 21, "j1", "w2"))
    assert (other.command, other.reason, other.detail) == (
        "heartbeat", "Lost lock", "job j1 is held by w1")
    late = refused(r, s.heartbeat(T0 + 50, "j1", "w1"))
    assert late.reason == "Lost lock" and "expired" in late.detail
    assert refused(r, s.heartbeat(T0, "nope", "w1")).reason == "Job does not exist"
    assert refused(r, s.heartbeat(T0 + 21, "j1", "w1", "{bad")).reason == "Bad argument"


def test_an_expired_lock_is_popped_first_by_another_worker_and_counts_as_a_retry(
    r: Redis,
) -> None:
    put(r, "old")
    pop_jids(r, worker="w1")
    put(r, "new", now=T0 + 1, priority=-10)
    assert pop_jids(r, worker="w2", count=2, now=T0 + 60) == ["old", "new"]
    job = hash_of(r, "ql:j:old")
    assert (job["worker"], job["remaining"], float(job["expires"])) == ("w2", "4", T0 + 120)
    assert zset(r, "ql:w:w1:jobs") == {}
    assert zset(r, "ql:w:w2:jobs") == {"old": T0 + 60, "new": T0 + 60}
    assert json.loads(job["history"])[-1] == {"q": "q", "put": T0, "popped": T0 + 60,
                                              "worker": "w2"}
    assert hash_of(r, f"ql:s:stats:{DAY0}:q")["retries"] == "1"
    assert refused(r, s.complete(T0 + 61, "old", "w1", "q", "{}")).reason == "Lost lock"
    assert run(r, s.complete(T0 + 61, "old", "w2", "q", "{}")) == "complete"


def test_a_job_that_stalls_past_its_retries_fails(r: Redis) -> None:
    put(r, "j1", retries=1)
    now = T0
    for worker in ("w1", "w2"):
        assert pop_jids(r, worker=worker, now=now) == ["j1"]
        now += 60
    assert pop_jids(r, worker="w3", now=now) == []
    job = hash_of(r, "ql:j:j1")
    assert job["state"] == "failed"
    assert json.loads(job["failure"]) == {
        "group": "failed-retries-q", "message": 'Job exhausted retries in queue "q"',
        "when": now, "worker": "w2"}
    assert text(r.execute("LRANGE", "ql:f:failed-retries-q", 0, -1)) == ["j1"]
    assert members(r, "ql:failures") == ["failed-retries-q"]
    assert zset(r, "ql:q:q-locks") == {} and zset(r, "ql:w:w2:jobs") == {}


# ------------------------------------------------------------------------------------------
# complete
# ------------------------------------------------------------------------------------------


def test_complete_finishes_the_job(r: Redis) -> None:
    put(r, "j1")
    pop_jids(r, now=T0 + 1)
    assert run(r, s.complete(T0 + 4, "j1", "w1", "q", '{"done": true}')) == "complete"
    job = hash_of(r, "ql:j:j1")
    assert (job["state"], job["queue"], job["worker"], job["expires"], job["data"]) == (
        "complete", "", "", "0", '{"done": true}')
    assert json.loads(job["history"]) == [
        {"q": "q", "put": T0, "popped": T0 + 1, "done": T0 + 4, "worker": "w1"}]
    assert zset(r, "ql:completed") == {"j1": T0 + 4}
    assert zset(r, "ql:q:q-locks") == {} and zset(r, "ql:w:w1:jobs") == {}
    assert run(r, s.get(T0, "j1"))["queue"] is None  # type: ignore[index]
    again = refused(r, s.complete(T0 + 5, "j1", "w1", "q", "{}"))
    assert again.detail == "job j1 is complete, not running"


def test_complete_checks_the_queue_worker_and_lock(r: Redis) -> None:
    put(r, "j1")
    pop_jids(r)
    assert refused(r, s.complete(T0, "j1", "w1", "other", "{}")).reason == "Wrong queue"
    assert refused(r, s.complete(T0, "j1", "w2", "q", "{}")).reason == "Lost lock"
    assert refused(r, s.complete(T0 + 60, "j1", "w1", "q", "{}")).reason == "Lost lock"
    assert refused(r, s.complete(T0, "nope", "w1", "q", "{}")).reason == "Job does not exist"
    assert refused(r, s.complete(T0, "j1", "w1", "q", "not json")).reason == "Bad argument"
    assert hash_of(r, "ql:j:j1")["state"] == "running"


def test_complete_with_next_moves_the_job_on(r: Redis) -> None:
    put(r, "j1", retries=2)
    pop_jids(r)
    run(r, s.retry(T0 + 1, "j1", "q", "w1"))
    pop_jids(r, now=T0 + 2)
    assert run(r, s.complete(T0 + 3, "j1", "w1", "q", "{}", next="q2")) == "waiting"
    job = hash_of(r, "ql:j:j1")
    assert (job["queue"], job["state"], job["remaining"]) == ("q2", "waiting", "2")
    assert json.loads(job["history"])[-1] == {"q": "q2", "put": T0 + 3}
    assert where(r, "j1", "q2") == ["work"] and where(r, "j1") == []
    assert zset(r, "ql:completed") == {}
    assert list(zset(r, "ql:queues")) == ["q", "q2"]
    # With a delay, scheduled in the next queue.
    pop_jids(r, queue="q2", now=T0 + 4)
    assert run(r, s.complete(T0 + 5, "j1", "w1", "q2", "{}", next="q3", delay=7)) == "scheduled"
    assert zset(r, "ql:q:q3-scheduled") == {"j1": T0 + 12}


def test_complete_with_next_and_depends(r: Redis) -> None:
    put(r, "dep", queue="other")
    put(r, "j1")
    pop_jids(r)
    state = run(r, s.complete(T0 + 1, "j1", "w1", "q", "{}", next="q2", depends=["dep"]))
    assert state == "depends"
    assert members(r, "ql:j:j1-dependencies") == ["dep"]
    assert members(r, "ql:j:dep-dependents") == ["j1"]
    assert zset(r, "ql:q:q2-depends") == {"j1": T0 + 1}
    err = refused(r, s.complete(T0, "j1", "w1", "q", "{}", depends=["dep"]))
    assert err.detail == "delay and depends need next"


# ------------------------------------------------------------------------------------------
# fail, failed, retry, unfail
# ------------------------------------------------------------------------------------------


def test_fail_records_the_failure(r: Redis) -> None:
    put(r, "j1")
    pop_jids(r)
    assert run(r, s.fail(T0 + 5, "j1", "w1", "io error", "trace...", '{"n": 2}')) == "j1"
    job = hash_of(r, "ql:j:j1")
    assert (job["state"], job["worker"], job["queue"], job["data"]) == (
        "failed", "", "q", '{"n": 2}')
    assert json.loads(job["failure"]) == {"group": "io error", "message": "trace...",
                                          "when": T0 + 5, "worker": "w1"}
    assert json.loads(job["history"])[-1]["failed"] == T0 + 5
    assert text(r.execute("LRANGE", "ql:f:io error", 0, -1)) == ["j1"]
    assert members(r, "ql:failures") == ["io error"]
    assert zset(r, "ql:q:q-locks") == {} and zset(r, "ql:w:w1:jobs") == {}
    stats = hash_of(r, f"ql:s:stats:{DAY0}:q")
    assert (stats["failures"], stats["failed"]) == ("1", "1")
    assert refused(r, s.heartbeat(T0 + 6, "j1", "w1")).reason == "Lost lock"
    assert refused(r, s.fail(T0, "nope", "w1", "g", "m")).reason == "Job does not exist"


def test_any_state_can_fail(r: Redis) -> None:
    put(r, "waiting")
    put(r, "scheduled", delay=100)
    put(r, "done")
    pop_jids(r, count=1, now=T0 + 1)                  # pops "waiting"
    put(r, "waiting2")
    for jid in ("scheduled", "waiting2"):
        run(r, s.fail(T0 + 2, jid, "w9", "g", "m"))
        assert hash_of(r, f"ql:j:{jid}")["state"] == "failed" and where(r, jid) == []
    assert run(r, s.failed_counts(T0)) == {"g": 2}


def test_failed_lists_groups_and_pages(r: Redis) -> None:
    for i in range(5):
        put(r, f"j{i}")
        run(r, s.fail(T0 + i, f"j{i}", "w", "g1" if i < 4 else "g2", f"message {i}"))
    assert run(r, s.failed_counts(T0)) == {"g1": 4, "g2": 1}
    page = run(r, s.failed(T0, "g1", 1, 2))
    assert page["total"] == 4
    assert [(j["jid"], j["message"], j["type"]) for j in page["jobs"]] == [
        ("j2", "message 2", "g1"), ("j1", "message 1", "g1")]
    assert run(r, s.failed(T0, "nothing")) == {"total": 0, "jobs": []}


def test_retry_counts_against_retries_then_fails(r: Redis) -> None:
    put(r, "j1", retries=1, priority=2)
    pop_jids(r)
    assert run(r, s.retry(T0 + 1, "j1", "q", "w1")) == 0
    job = hash_of(r, "ql:j:j1")
    assert (job["state"], job["remaining"], job["worker"]) == ("waiting", "0", "")
    assert zset(r, "ql:q:q-work") == {"j1": pytest.approx(2 + (T0 + 1) / 1e10)}
    assert zset(r, "ql:w:w1:jobs") == {} and zset(r, "ql:q:q-locks") == {}
    pop_jids(r, now=T0 + 2)
    assert run(r, s.retry(T0 + 3, "j1", "q", "w1", delay=30)) == -1
    job = hash_of(r, "ql:j:j1")
    assert job["state"] == "failed"
    assert json.loads(job["failure"])["group"] == "failed-retries-q"
    assert hash_of(r, f"ql:s:stats:{DAY0}:q")["retries"] == "2"
    assert zset(r, "ql:q:q-scheduled") == {}


def test_retry_with_delay_schedules(r: Redis) -> None:
    put(r, "j1")
    pop_jids(r)
    assert run(r, s.retry(T0 + 1, "j1", "q", "w1", delay=30)) == 4
    assert zset(r, "ql:q:q-scheduled") == {"j1": T0 + 31}
    assert hash_of(r, "ql:j:j1")["state"] == "scheduled"


def test_retry_needs_the_lock(r: Redis) -> None:
    put(r, "j1")
    assert refused(r, s.retry(T0, "j1", "q", "w1")).reason == "Lost lock"
    pop_jids(r)
    assert refused(r, s.retry(T0, "j1", "q", "w2")).reason == "Lost lock"
    assert refused(r, s.retry(T0, "j1", "q2", "w1")).reason == "Wrong queue"
    assert hash_of(r, "ql:j:j1")["remaining"] == "5"


def test_unfail_moves_the_oldest_failures_back(r: Redis) -> None:
    for i in range(4):
        put(r, f"j{i}", retries=3)
        run(r, s.fail(T0 + i, f"j{i}", "w", "g", "m"))
    assert hash_of(r, f"ql:s:stats:{DAY0}:q")["failed"] == "4"
    assert run(r, s.unfail(T0 + 10, "back", "g", 3)) == 3
    assert text(r.execute("LRANGE", "ql:f:g", 0, -1)) == ["j3"]
    assert pop_jids(r, queue="back", count=5, now=T0 + 11) == ["j0", "j1", "j2"]
    job = hash_of(r, "ql:j:j0")
    assert (job["queue"], job["remaining"]) == ("back", "3") and "failure" not in job
    assert hash_of(r, f"ql:s:stats:{DAY0}:q")["failed"] == "1"
    assert run(r, s.unfail(T0 + 10, "back", "g")) == 1
    assert members(r, "ql:failures") == []
    assert r.execute("EXISTS", "ql:f:g") == 0


def test_put_of_a_failed_job_clears_the_failure(r: Redis) -> None:
    put(r, "j1")
    run(r, s.fail(T0, "j1", "w", "g", "m"))
    put(r, "j1", now=T0 + 1)
    job = hash_of(r, "ql:j:j1")
    assert job["state"] == "waiting" and "failure" not in job
    assert r.execute("EXISTS", "ql:f:g") == 0 and members(r, "ql:failures") == []
    assert hash_of(r, f"ql:s:stats:{DAY0}:q")["failed"] == "0"


# ------------------------------------------------------------------------------------------
# cancel
# ------------------------------------------------------------------------------------------


def test_cancel_removes_every_trace(r: Redis) -> None:
    put(r, "j1", tags=["t"])
    run(r, s.track(T0, "j1"))
    pop_jids(r)
    assert run(r, s.cancel(T0, "j1", "missing")) == ["j1"]
    assert keys(r) == ["ql:queues", f"ql:s:wait:{DAY0}:q", "ql:workers"]   # stats stay
    assert refused(r, s.heartbeat(T0, "j1", "w1")).reason == "Job does not exist"
    assert refused(r, s.complete(T0, "j1", "w1", "q", "{}")).reason == "Job does not exist"
    assert run(r, s.get(T0, "j1")) is None


def test_cancel_refuses_to_orphan_dependents(r: Redis) -> None:
    put(r, "a")
    put(r, "b", depends=["a"])
    err = refused(r, s.cancel(T0, "a"))
    assert (err.reason, err.detail) == ("Has dependents", "job b depends on a")
    assert hash_of(r, "ql:j:a")["state"] == "waiting"
    assert run(r, s.cancel(T0, "a", "b")) == ["a", "b"]
    assert keys(r) == ["ql:queues"]


def test_cancel_of_failed_and_complete_jobs(r: Redis) -> None:
    put(r, "f")
    run(r, s.fail(T0, "f", "w", "g", "m"))
    put(r, "c")
    pop_jids(r)
    run(r, s.complete(T0 + 1, "c", "w1", "q", "{}"))
    assert run(r, s.cancel(T0 + 2, "f", "c")) == ["f", "c"]
    assert r.execute("EXISTS", "ql:f:g", "ql:completed", "ql:failures") == 0


# ------------------------------------------------------------------------------------------
# dependencies
# ------------------------------------------------------------------------------------------


def test_dependencies_release_jobs_when_the_last_one_completes(r: Redis) -> None:
    put(r, "a")
    put(r, "b", now=T0 + 0.001)
    put(r, "c", depends=["a", "b", "gone"], priority=-1, now=T0 + 0.002)
    assert hash_of(r, "ql:j:c")["state"] == "depends"
    assert members(r, "ql:j:c-dependencies") == ["a", "b"]   # "gone" does not exist
    assert members(r, "ql:j:a-dependents") == ["c"]
    assert zset(r, "ql:q:q-depends") == {"c": T0 + 0.002}
    assert run(r, s.get(T0, "a"))["dependents"] == ["c"]  # type: ignore[index]
    assert pop_jids(r, count=2) == ["a", "b"]
    run(r, s.complete(T0 + 1, "a", "w1", "q", "{}"))
    assert hash_of(r, "ql:j:c")["state"] == "depends"
    assert members(r, "ql:j:c-dependencies") == ["b"]
    assert r.execute("EXISTS", "ql:j:a-dependents") == 0
    run(r, s.complete(T0 + 2, "b", "w1", "q", "{}"))
    assert hash_of(r, "ql:j:c")["state"] == "waiting"
    assert where(r, "c") == ["work"]
    assert pop_jids(r, now=T0 + 3) == ["c"]


def test_depending_on_a_complete_job_does_not_wait(r: Redis) -> None:
    put(r, "a")
    pop_jids(r)
    run(r, s.complete(T0, "a", "w1", "q", "{}"))
    put(r, "b", depends=["a"])
    assert hash_of(r, "ql:j:b")["state"] == "waiting"


def test_depends_on_off_and_off_all(r: Redis) -> None:
    for jid in ("a", "b", "c"):
        put(r, jid)
    put(r, "x", depends=["a"])
    assert run(r, s.depends_on(T0, "x", "b", "c")) == 1
    assert members(r, "ql:j:x-dependencies") == ["a", "b", "c"]
    assert members(r, "ql:j:c-dependents") == ["x"]
    assert run(r, s.depends_off(T0, "x", "a", "b")) == 1
    assert members(r, "ql:j:x-dependencies") == ["c"]
    assert members(r, "ql:j:a-dependents") == []
    assert hash_of(r, "ql:j:x")["state"] == "depends"
    assert run(r, s.depends_off_all(T0 + 1, "x")) == 1
    assert hash_of(r, "ql:j:x")["state"] == "waiting"
    assert members(r, "ql:j:c-dependents") == []
    assert zset(r, "ql:q:q-work")["x"] == pytest.approx((T0 + 1) / 1e10)
    err = refused(r, s.depends_on(T0, "x", "a"))
    assert (err.reason, err.detail) == ("Wrong state", "job x is waiting, not depends")
    assert refused(r, s.depends_on(T0, "x", "x")).reason == "Bad argument"


def test_put_refuses_self_dependency_and_delay_with_depends(r: Redis) -> None:
    assert refused(r, s.put(T0, "q", "a", "K", "{}", depends=["a"])).reason == "Bad argument"
    put(r, "b")
    err = refused(r, s.put(T0, "q", "a", "K", "{}", depends=["b"], delay=5))
    assert err.detail == "delay and depends cannot be used together"
    assert r.execute("EXISTS", "ql:j:a") == 0


# ------------------------------------------------------------------------------------------
# priority, tags, tracking
# ------------------------------------------------------------------------------------------


def test_priority_reorders_a_waiting_job_keeping_its_time(r: Redis) -> None:
    put(r, "a", priority=1)
    put(r, "b", priority=1, now=T0 + 0.001)
    put(r, "c", priority=0, now=T0 + 0.002)
    assert run(r, s.priority(T0, "b", 0)) == 0
    assert hash_of(r, "ql:j:b")["priority"] == "0"
    assert [j["jid"] for j in run(r, s.peek(T0, "q", 3))] == ["b", "c", "a"]
    assert refused(r, s.priority(T0, "nope", 1)).reason == "Job does not exist"
    with pytest.raises(TypeError):
        s.priority(T0, "a", 1.5)  # type: ignore[arg-type]
    with pytest.raises(RedisError, match=r"^QLESS priority: Bad argument: priority is not an "):
        r.evalsha(s.SHA, s.priority(T0, "a", 1).keys, ["priority", str(T0), "a", "1.5"])


def test_tags_add_remove_get(r: Redis) -> None:
    put(r, "j1", tags=["a"])
    put(r, "j2", now=T0 + 1)
    assert run(r, s.tag_add(T0 + 2, "j1", "b", "a", "c")) == ["a", "b", "c"]
    assert run(r, s.tag_add(T0 + 3, "j2", "b")) == ["b"]
    assert zset(r, "ql:t:a") == {"j1": T0}                 # tagging again is a no-op
    assert zset(r, "ql:t:b") == {"j1": T0 + 2, "j2": T0 + 3}
    assert run(r, s.tag_remove(T0, "j1", "a", "zzz")) == ["b", "c"]
    assert json.loads(hash_of(r, "ql:j:j1")["tags"]) == ["b", "c"]
    assert r.execute("EXISTS", "ql:t:a") == 0
    assert run(r, s.tag_get(T0, "b")) == {"total": 2, "jobs": ["j1", "j2"]}
    assert run(r, s.tag_get(T0, "b", 1, 5)) == {"total": 2, "jobs": ["j2"]}
    assert run(r, s.tag_get(T0, "none")) == {"total": 0, "jobs": []}
    assert refused(r, s.tag_add(T0, "nope", "x")).reason == "Job does not exist"


def test_track_untrack_tracked_and_expired(r: Redis) -> None:
    put(r, "j1")
    put(r, "j2")
    assert run(r, s.track(T0, "j1")) == 1
    assert run(r, s.track(T0 + 1, "j1")) == 0
    assert run(r, s.track(T0 + 2, "j2")) == 1
    assert zset(r, "ql:tracked") == {"j1": T0, "j2": T0 + 2}
    assert run(r, s.get(T0, "j1"))["tracked"] is True  # type: ignore[index]
    run(r, s.config_set(T0, "jobs-history-count", 0))
    pop_jids(r)
    run(r, s.complete(T0 + 3, "j1", "w1", "q", "{}"))     # pruned at once (count 0)
    report = run(r, s.tracked(T0))
    assert [j["jid"] for j in report["jobs"]] == ["j2"] and report["expired"] == ["j1"]
    assert run(r, s.untrack(T0, "j1")) == 1 and run(r, s.untrack(T0, "j1")) == 0
    assert refused(r, s.track(T0, "nope")).reason == "Job does not exist"


# ------------------------------------------------------------------------------------------
# jobs, queues, workers
# ------------------------------------------------------------------------------------------


def test_jobs_by_state(r: Redis) -> None:
    for i in range(3):
        put(r, f"w{i}", now=T0 + i)
    put(r, "s", delay=100)
    put(r, "d", depends=["w2"])
    pop_jids(r, count=2, now=T0 + 10)                       # w0, w1 run until T0+70
    run(r, s.heartbeat(T0 + 20, "w1", "w1"))                # w1 now until T0+80
    assert run(r, s.jobs(T0 + 75, "running", "q")) == ["w1"]
    assert run(r, s.jobs(T0 + 75, "stalled", "q")) == ["w0"]
    assert run(r, s.jobs(T0 + 75, "waiting", "q")) == ["w2"]
    assert run(r, s.jobs(T0 + 75, "scheduled", "q")) == ["s"]
    assert run(r, s.jobs(T0 + 75, "depends", "q")) == ["d"]
    assert run(r, s.jobs(T0 + 100, "waiting", "q")) == ["w2", "s"]   # s came due at T0+100
    assert run(r, s.jobs(T0, "waiting", "q", 1, 1)) == ["s"]
    run(r, s.complete(T0 + 21, "w1", "w1", "q", "{}"))
    assert run(r, s.jobs(T0, "complete")) == ["w1"]
    with pytest.raises(ValueError):
        s.jobs(T0, "nonsense", "q")


def test_queues_counts(r: Redis) -> None:
    put(r, "a")
    put(r, "b")
    put(r, "c", delay=50)
    put(r, "d", depends=["a"])
    put(r, "x", queue="other", now=T0 - 1)
    pop_jids(r)
    expected = {"name": "q", "waiting": 1, "running": 1, "stalled": 0, "scheduled": 1,
                "depends": 1, "recurring": 0}
    assert run(r, s.queue(T0 + 1, "q")) == expected
    listing = run(r, s.queues(T0 + 1))
    assert [q["name"] for q in listing] == ["other", "q"] and listing[1] == expected
    later = run(r, s.queue(T0 + 60, "q"))
    assert (later["running"], later["stalled"], later["waiting"], later["scheduled"]) == (
        0, 1, 2, 0)


def test_workers_list_jobs_and_stalls(r: Redis) -> None:
    put(r, "a")
    put(r, "b")
    pop_jids(r, worker="w1", now=T0)
    pop_jids(r, worker="w2", now=T0 + 30)
    assert run(r, s.workers(T0 + 61)) == [
        {"name": "w2", "jobs": 1, "stalled": 0}, {"name": "w1", "jobs": 0, "stalled": 1}]
    assert run(r, s.worker(T0 + 61, "w1")) == {"jobs": [], "stalled": ["a"]}
    assert run(r, s.worker(T0 + 61, "w2")) == {"jobs": ["b"], "stalled": []}
    run(r, s.config_set(T0, "max-worker-age", 100))
    assert [w["name"] for w in run(r, s.workers(T0 + 120))] == ["w2"]
    assert zset(r, "ql:workers") == {"w2": T0 + 30}


# ------------------------------------------------------------------------------------------
# config, pruning
# ------------------------------------------------------------------------------------------


def test_config_defaults_set_unset(r: Redis) -> None:
    assert run(r, s.config_get_all(T0)) == {k: str(v) for k, v in s.DEFAULTS.items()}
    assert run(r, s.config_get(T0, "heartbeat")) == "60"
    assert run(r, s.config_get(T0, "unknown")) is None
    assert run(r, s.config_set(T0, "heartbeat", 10)) is None
    assert run(r, s.config_set(T0, "application", "mine")) is None
    assert hash_of(r, "ql:config") == {"heartbeat": "10", "application": "mine"}
    assert run(r, s.config_get(T0, "heartbeat")) == "10"
    assert run(r, s.config_get_all(T0))["application"] == "mine"
    put(r, "j1")
    assert run(r, s.pop(T0, "q", "w", 1))[0]["expires"] == T0 + 10
    run(r, s.config_unset(T0, "heartbeat"))
    assert run(r, s.config_get(T0, "heartbeat")) == "60"
    for option, value in [("heartbeat", "soon"), ("jobs-history", "-1"),
                          ("heartbeat-q", "nan"), ("stats-history", "inf")]:
        err = refused(r, s.config_set(T0, option, value))
        assert err.reason == "Bad argument", option
    assert hash_of(r, "ql:config") == {"application": "mine"}


def _complete(r: Redis, jid: str, now: float) -> None:
    put(r, jid, now=now)
    assert pop_jids(r, now=now) == [jid]
    run(r, s.complete(now, jid, "w1", "q", "{}"))


def test_completed_jobs_are_pruned_by_age(r: Redis) -> None:
    run(r, s.config_set(T0, "jobs-history", 100))
    put(r, "dependent", queue="later")
    _complete(r, "a", T0)
    _complete(r, "b", T0 + 50)
    run(r, s.tag_add(T0, "a", "t"))
    _complete(r, "c", T0 + 100)                   # a is exactly 100 s old: kept
    assert list(zset(r, "ql:completed")) == ["a", "b", "c"]
    _complete(r, "d", T0 + 100.001)               # now a is older than 100 s
    assert list(zset(r, "ql:completed")) == ["b", "c", "d"]
    assert r.execute("EXISTS", "ql:j:a", "ql:t:t") == 0
    assert run(r, s.get(T0, "a")) is None


def test_completed_jobs_are_pruned_by_count(r: Redis) -> None:
    run(r, s.config_set(T0, "jobs-history-count", 2))
    for i in range(5):
        _complete(r, f"j{i}", T0 + i)
    assert list(zset(r, "ql:completed")) == ["j3", "j4"]
    assert [k for k in keys(r) if k.startswith("ql:j:")] == ["ql:j:j3", "ql:j:j4"]


# ------------------------------------------------------------------------------------------
# Recurring jobs
# ------------------------------------------------------------------------------------------


def test_recurring_jobs_spawn_on_pop(r: Redis) -> None:
    assert run(r, s.recur(T0, "q", "r1", "app.Tick", '{"n": 1}', 60, offset=10,
                          tags=["cron"], priority=-1, retries=2)) == "r1"
    assert hash_of(r, "ql:r:r1")["interval"] == "60"
    assert zset(r, "ql:q:q-recur") == {"r1": T0 + 10}
    assert pop_jids(r, now=T0 + 9) == []
    assert pop_jids(r, count=5, now=T0 + 130) == ["r1-1", "r1-2", "r1-3"]
    job = hash_of(r, "ql:j:r1-2")
    assert (job["klass"], job["data"], job["priority"], job["retries"], job["tags"]) == (
        "app.Tick", '{"n": 1}', "-1", "2", '["cron"]')
    assert json.loads(job["history"])[0]["put"] == T0 + 70
    assert zset(r, "ql:q:q-recur") == {"r1": T0 + 190}
    assert zset(r, "ql:t:cron") == {"r1-1": T0 + 10, "r1-2": T0 + 70, "r1-3": T0 + 130}
    template = run(r, s.recur_get(T0, "r1"))
    assert template is not None and (template["count"], template["next"]) == (3, T0 + 190)
    assert run(r, s.queue(T0, "q"))["recurring"] == 1
    assert run(r, s.jobs(T0, "recurring", "q")) == ["r1"]
    assert run(r, s.unrecur(T0, "r1")) == 1 and run(r, s.unrecur(T0, "r1")) == 0
    assert r.execute("EXISTS", "ql:r:r1", "ql:q:q-recur") == 0
    assert sorted(pop_jids(r, count=10, now=T0 + 1000)) == ["r1-1", "r1-2", "r1-3"]  # stalled
    assert r.execute("EXISTS", "ql:j:r1-4") == 0


def test_recurring_backlog_caps_missed_runs(r: Redis) -> None:
    run(r, s.recur(T0, "q", "r1", "K", "{}", 10, backlog=2))
    assert len(pop_jids(r, count=100, now=T0 + 1000)) == 3    # runs at T0+980, 990, 1000
    assert zset(r, "ql:q:q-recur") == {"r1": T0 + 1010}


# ------------------------------------------------------------------------------------------
# The calling convention: errors, KEYS, NOSCRIPT
# ------------------------------------------------------------------------------------------


BAD_CALLS: list[tuple[list[str], str]] = [
    (["put", "x"], "QLESS put: Bad argument: now is not a number: x"),
    (["put", "-1"], "QLESS put: Bad argument: now must be >= 0: -1"),
    (["put", str(T0), "q", "j", "K", "{}"], "QLESS put: Bad argument: delay is missing"),
    (["put", str(T0), "q", "j", "K", "{x", "0"], "QLESS put: Bad argument: data is not JSON: {x"),
    (["put", str(T0), "", "j", "K", "{}", "0"], "QLESS put: Bad argument: queue is missing"),
    (["put", str(T0), "q", "j", "K", "{}", "0", "priority", "1.5"],
     "QLESS put: Bad argument: priority is not an integer: 1.5"),
    (["put", str(T0), "q", "j", "K", "{}", "0", "retries", "-1"],
     "QLESS put: Bad argument: retries must be >= 0: -1"),
    (["put", str(T0), "q", "j", "K", "{}", "0", "tags", '{"a": 1}'],
     'QLESS put: Bad argument: tags is not a JSON list: {"a": 1}'),
    (["put", str(T0), "q", "j", "K", "{}", "0", "tags", "[1]"],
     "QLESS put: Bad argument: tags holds a value that is not a non-empty string"),
    (["put", str(T0), "q", "j", "K", "{}", "0", "colour", "red"],
     "QLESS put: Bad argument: unknown option: colour"),
    (["put", str(T0), "q", "j", "K", "{}", "0", "priority"],
     "QLESS put: Bad argument: option priority has no value"),
    (["put", str(T0), "q", "j", "K", "{}", "nan"],
     "QLESS put: Bad argument: delay is not a number: nan"),
    (["pop", str(T0), "q", "w", "0"], "QLESS pop: Bad argument: count must be >= 1: 0"),
    (["pop", str(T0), "q", "w", "1", "extra"],
     "QLESS pop: Bad argument: unexpected argument: extra"),
    (["jobs", str(T0), "lost", "q"], "QLESS jobs: Bad argument: unknown state: lost"),
    (["tag", str(T0), "paint", "j"],
     "QLESS tag: Bad argument: tag takes add, remove or get, not paint"),
    (["depends", str(T0), "j", "maybe", "x"],
     "QLESS depends: Bad argument: depends takes on or off, not maybe"),
    (["frobnicate", str(T0)], "QLESS frobnicate: Unknown command: frobnicate"),
    ([], "QLESS nil: Unknown command: nil"),
]


@pytest.mark.parametrize(("args", "message"), BAD_CALLS)
def test_bad_arguments_are_refused_with_clear_text_and_change_nothing(
    r: Redis, args: list[str], message: str
) -> None:
    put(r, "existing")
    before = keys(r)
    with pytest.raises(RedisError) as info:
        r.evalsha(s.SHA, [], args)
    assert str(info.value) == message
    assert keys(r) == before


def test_python_side_refuses_bad_types_before_sending(r: Redis) -> None:
    with pytest.raises(TypeError):
        s.put("now", "q", "j", "K", "{}")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        s.put(float("nan"), "q", "j", "K", "{}")
    with pytest.raises(ValueError):
        s.put(T0, "q", "j", "K", "{}", tags=[""])
    with pytest.raises(TypeError):
        s.pop(T0, "q", "w", True)
    with pytest.raises(ValueError):
        s.jobs(T0, "waiting")


def test_undeclared_keys_are_refused(r: Redis) -> None:
    call = s.put(T0, "q", "j1", "K", "{}", tags=["t"])
    with pytest.raises(RedisError) as info:
        r.evalsha(s.SHA, [], call.args)
    assert str(info.value) == (
        "QLESS put: Undeclared keys: expected 15 keys, KEYS[1] should be ql:config, not nil")
    with pytest.raises(RedisError) as info:
        r.evalsha(s.SHA, call.keys[:-1], call.args)
    assert "KEYS[15] should be ql:t:t, not nil" in str(info.value)
    with pytest.raises(RedisError) as info:
        r.evalsha(s.SHA, [*call.keys, "extra"], call.args)
    assert "KEYS[16] should be nil, not extra" in str(info.value)
    assert keys(r) == []
    assert call.run(r) == "j1"


def test_script_error_splits_messages() -> None:
    assert s.script_error("QLESS complete: Lost lock: job j is held by w") == s.ScriptError(
        "complete", "Lost lock", "job j is held by w")
    assert s.script_error("QLESS get: Unknown command") == s.ScriptError(
        "get", "Unknown command", "")
    assert s.script_error("ERR something else") is None
    assert s.script_error("QLESS nonsense") is None


def test_script_flush_is_recovered(fresh_redis: RedisServer) -> None:
    with Redis.from_url(fresh_redis.url) as conn:
        s.load(conn)
        put(conn, "j1")
        conn.execute("SCRIPT", "FLUSH")
        assert conn.execute("SCRIPT", "EXISTS", s.SHA) == [0]
        assert pop_jids(conn) == ["j1"]
        assert conn.execute("SCRIPT", "EXISTS", s.SHA) == [1]


def test_the_script_is_loaded_by_its_sha(r: Redis) -> None:
    import hashlib

    assert hashlib.sha1(s.SOURCE).hexdigest() == s.SHA
    assert r.execute("SCRIPT", "EXISTS", s.SHA) == [1]


#: The only globals the script may read: Redis' script environment and Lua's standard library.
ALLOWED_GLOBALS = {
    "ARGV", "KEYS", "redis", "cjson", "error", "getmetatable", "setmetatable", "ipairs",
    "pairs", "next", "pcall", "math", "string", "table", "tonumber", "tostring", "type", "unpack",
}


def test_the_script_writes_no_global_and_reads_only_known_ones() -> None:
    """Redis 7 refuses global writes at run time, but only on the paths a call takes: the
    bytecode listing shows every path at once. Runs where ``luac5.1`` is installed."""
    import re
    import shutil
    import subprocess
    from importlib import resources

    luac = shutil.which("luac5.1") or shutil.which("luac")
    if luac is None:
        pytest.skip("luac5.1 is not installed (apt-get install lua5.1)")
    path = str(resources.files("qless_client").joinpath("lua/qless.lua"))
    listing = subprocess.run([luac, "-p", "-l", path], capture_output=True, text=True,
                             check=True).stdout
    assert "SETGLOBAL" not in listing
    read = set(re.findall(r"GETGLOBAL\s.*;\s*(\S+)", listing))
    assert read <= ALLOWED_GLOBALS, read - ALLOWED_GLOBALS
