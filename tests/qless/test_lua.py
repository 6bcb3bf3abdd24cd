"""The qless Lua script (qless_client/lua/qless.lua) through a real redis-server.

The script is called as qless-core's is, ``EVALSHA <sha> 0 <command> <now> <args...>``, and
must behave as qless-core's (the script qless-py 0.11.4 ships, which deployments run). Each test
states that behaviour by hand: the replies and the keys left in Redis (read with plain commands).
Every test runs twice, on our script (``jobwire``) and on qless-core's (``qless-core``, its Redis 7
fix applied in memory), so an expectation written here is known to be qless-core's.
tests/qless/test_differential.py compares the two scripts step by step over many more cases.

Time is the ``now`` the caller passes: tests move it forward instead of sleeping.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from qless_client._redis import Redis
from qless_client.errors import RedisError
from tests.qless.conftest import RedisServer
from tests.qless.differential import decoded, error_message, our_source, their_source

#: A fixed clock for the tests: 2023-11-14 22:13:20 UTC (its stats day starts at T0 - 80000).
T0 = 1_700_000_000.0
DAY0 = 1_699_920_000

#: The database the qless script tests use on the shared server (flushed before each test).
DB = 7


def arg(value: object) -> str:
    """An argument as a binding sends it: numbers as decimals, lists and dicts as JSON."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


@dataclass
class Script:
    """One qless script loaded on a connection."""

    conn: Redis
    sha: str
    name: str

    def __call__(self, command: str, now: float, *args: object) -> Any:
        """Run ``command`` and return its reply, JSON objects and arrays decoded."""
        reply = self.conn.evalsha(self.sha, [], [command, arg(now), *map(arg, args)])
        return decoded(reply)

    def refused(self, command: str, now: float | str, *args: object) -> str:
        """Run a call that must fail; return the script's error message."""
        with pytest.raises(RedisError) as info:
            self.conn.evalsha(self.sha, [], [command, arg(now), *map(arg, args)])
        return error_message(str(info.value))


SCRIPTS = ["jobwire", "qless-core"]


@pytest.fixture(params=SCRIPTS)
def q(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Script]:
    """An empty database with one of the two scripts loaded."""
    if request.param == "qless-core":
        pytest.importorskip("qless", reason="qless-py (qless-core's carrier) is not installed")
    source = our_source() if request.param == "jobwire" else their_source()
    with Redis.from_url(f"{redis_server.url}/{DB}") as conn:
        conn.execute("FLUSHDB")
        yield Script(conn, conn.load_script(source), request.param)


def put(q: Script, jid: str, queue: str = "q", now: float = T0, delay: float = 0,
        data: str = "{}", **options: Any) -> Any:
    return q("put", now, queue, jid, "app.Job", data, delay,
             *[x for k, v in options.items() for x in (k, v)])


def pop_jids(q: Script, queue: str = "q", worker: str = "w1", count: int = 1,
             now: float = T0) -> list[str]:
    reply = q("pop", now, queue, worker, count)
    return [job["jid"] for job in reply] if reply else []   # qless-core: no jobs is `{}`


def text(value: Any) -> Any:
    """Redis replies with bytes decoded (recursively), JSON left as text."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [text(v) for v in value]
    return value


def hash_of(q: Script, key: str) -> dict[str, str]:
    flat = text(q.conn.execute("HGETALL", key))
    return dict(zip(flat[::2], flat[1::2], strict=True))


def zset(q: Script, key: str) -> dict[str, float]:
    flat = text(q.conn.execute("ZRANGE", key, 0, -1, "WITHSCORES"))
    return {m: float(v) for m, v in zip(flat[::2], flat[1::2], strict=True)}


def members(q: Script, key: str) -> list[str]:
    return sorted(text(q.conn.execute("SMEMBERS", key)))


def history(q: Script, jid: str) -> list[Any]:
    return [json.loads(e) for e in text(q.conn.execute("LRANGE", f"ql:j:{jid}-history", 0, -1))]


def keys(q: Script) -> list[str]:
    return sorted(text(q.conn.execute("KEYS", "*")))


def dump(q: Script) -> dict[str, bytes]:
    return {k: q.conn.execute("DUMP", k) for k in keys(q)}


def time_field(now: float) -> str:
    """How qless-core stores a job's ``time``: ``string.format("%.20f", now)``."""
    return f"{now:.20f}"


QUEUE_KEYS = ["work", "locks", "scheduled", "depends"]


def where(q: Script, jid: str, queue: str = "q") -> list[str]:
    """The queue sets of ``queue`` that hold ``jid``."""
    return [part for part in QUEUE_KEYS
            if q.conn.execute("ZSCORE", f"ql:q:{queue}-{part}", jid) is not None]


# ------------------------------------------------------------------------------------------
# put, get
# ------------------------------------------------------------------------------------------


def test_put_writes_qless_cores_layout(q: Script) -> None:
    assert put(q, "j1", data='{"x": 1}', priority=-2, tags=["a", "b"], retries=3) == "j1"
    job = hash_of(q, "ql:j:j1")
    assert {k: v for k, v in job.items() if k != "tags"} == {
        "jid": "j1", "klass": "app.Job", "data": '{"x": 1}', "priority": "-2",
        "state": "waiting", "worker": "", "expires": "0", "queue": "q", "retries": "3",
        "remaining": "3", "time": time_field(T0),
    }
    assert json.loads(job["tags"]) == ["a", "b"]
    assert history(q, "j1") == [[int(T0), "put", {"q": "q"}]]
    assert zset(q, "ql:q:q-work") == {"j1": -2 - T0 / 1e10}
    assert zset(q, "ql:queues") == {"q": T0}
    assert zset(q, "ql:t:a") == {"j1": T0} and zset(q, "ql:t:b") == {"j1": T0}
    assert zset(q, "ql:tags") == {"a": 1, "b": 1}
    assert where(q, "j1") == ["work"]


def test_get_describes_the_job_and_none_when_missing(q: Script) -> None:
    put(q, "j1", tags=["t"])
    # qless-core's JSON encoder writes an empty list as {}.
    assert q("get", T0, "j1") == {
        "jid": "j1", "klass": "app.Job", "state": "waiting", "queue": "q", "worker": "",
        "priority": 0, "expires": 0, "retries": 5, "remaining": 5, "data": "{}",
        "tags": ["t"], "tracked": False, "history": [{"when": int(T0), "what": "put", "q": "q"}],
        "failure": {}, "dependents": {}, "dependencies": {},
    }
    assert q("get", T0, "nope") is None
    assert [j["jid"] for j in q("multiget", T0, "j1", "nope")] == ["j1"]


def test_put_with_delay_schedules_then_pop_takes_it_when_due(q: Script) -> None:
    put(q, "j1", delay=10)
    assert hash_of(q, "ql:j:j1")["state"] == "scheduled"
    assert zset(q, "ql:q:q-scheduled") == {"j1": T0 + 10}
    assert pop_jids(q, now=T0 + 9.999) == []
    assert q("peek", T0 + 9.999, "q", 5) == {}
    assert pop_jids(q, now=T0 + 10) == ["j1"]
    assert where(q, "j1") == ["locks"]


def test_put_moves_an_existing_job_and_keeps_its_priority_and_retries(q: Script) -> None:
    put(q, "j1", priority=4, tags=["a"], retries=2)
    assert pop_jids(q) == ["j1"]
    put(q, "j1", queue="other", now=T0 + 1, tags=["b"])
    job = hash_of(q, "ql:j:j1")
    assert (job["queue"], job["state"], job["priority"], job["retries"], job["worker"]) == (
        "other", "waiting", "4", "2", "")
    assert where(q, "j1") == [] and where(q, "j1", "other") == ["work"]
    assert q.conn.execute("ZCARD", "ql:w:w1:jobs") == 0
    assert zset(q, "ql:t:a") == {} and zset(q, "ql:t:b") == {"j1": T0 + 1}
    assert [(e[1], e[2]) for e in history(q, "j1")] == [
        ("put", {"q": "q"}), ("popped", {"worker": "w1"}), ("put", {"q": "other"})]
    # The worker that held it can no longer touch it.
    assert q.refused("heartbeat", T0 + 2, "j1", "w1") == (
        "Heartbeat(): Job not currently running: waiting")
    assert q.refused("complete", T0 + 2, "j1", "w1", "q", "{}") == (
        "Complete(): Job is not currently running: waiting")


def test_put_refuses_delay_with_depends(q: Script) -> None:
    put(q, "b")
    assert q.refused("put", T0, "q", "a", "K", "{}", 5, "depends", ["b"]) == (
        'Put(): "delay" and "depends" are not allowed to be used together')
    assert q.conn.execute("EXISTS", "ql:j:a") == 0
    assert put(q, "a", delay=5, depends=[]) == "a"   # an empty depends is no dependency


# ------------------------------------------------------------------------------------------
# pop, peek, heartbeat, locks
# ------------------------------------------------------------------------------------------


def test_pop_order_is_highest_priority_first_then_oldest(q: Script) -> None:
    """qless-core scores waiting jobs ``priority - now/1e10`` and pops the highest score."""
    for i, (jid, prio) in enumerate([("a", 0), ("b", 5), ("c", 0), ("d", -3), ("e", 5)]):
        put(q, jid, priority=prio, now=T0 + i)
    assert [j["jid"] for j in q("peek", T0 + 10, "q", 10)] == ["b", "e", "a", "c", "d"]
    assert pop_jids(q, count=2, now=T0 + 10) == ["b", "e"]
    assert pop_jids(q, count=10, now=T0 + 10) == ["a", "c", "d"]
    assert pop_jids(q, count=10, now=T0 + 10) == []


def test_equal_scores_pop_in_reverse_jid_order(q: Script) -> None:
    for jid in ("a", "b", "c"):
        put(q, jid)
    assert pop_jids(q, count=3) == ["c", "b", "a"]


def test_pop_locks_the_jobs_for_the_worker_and_records_the_wait(q: Script) -> None:
    put(q, "j1")
    [job] = q("pop", T0 + 2, "q", "w1", 3)
    assert (job["state"], job["worker"], job["expires"]) == ("running", "w1", T0 + 62)
    assert job["history"] == [{"when": int(T0), "what": "put", "q": "q"},
                              {"when": int(T0) + 2, "what": "popped", "worker": "w1"}]
    stored = hash_of(q, "ql:j:j1")
    assert (stored["state"], stored["worker"], stored["expires"], stored["time"]) == (
        "running", "w1", str(int(T0 + 62)), time_field(T0 + 2))
    assert zset(q, "ql:q:q-locks") == {"j1": T0 + 62}
    assert zset(q, "ql:q:q-work") == {}
    assert zset(q, "ql:w:w1:jobs") == {"j1": T0 + 62}        # scored by the lock's expiry
    assert zset(q, "ql:workers") == {"w1": T0 + 2}
    assert hash_of(q, f"ql:s:wait:{DAY0}:q") == {"total": "1", "mean": "2", "vk": "0",
                                                 "s2": "1"}


def test_peek_changes_nothing(q: Script) -> None:
    put(q, "j1")
    before = dump(q)
    assert [j["jid"] for j in q("peek", T0, "q", 1)] == ["j1"]
    assert dump(q) == before


def test_a_paused_queue_pops_nothing(q: Script) -> None:
    put(q, "j1")
    assert q("pause", T0, "q") is None
    assert pop_jids(q) == []
    assert q("queues", T0, "q")["paused"] is True
    q("unpause", T0, "q")
    assert pop_jids(q) == ["j1"]


def test_heartbeat_renews_the_holders_lock(q: Script) -> None:
    put(q, "j1")
    q("config.set", T0, "q-heartbeat", 30)
    pop_jids(q)
    assert hash_of(q, "ql:j:j1")["expires"] == str(int(T0 + 30))
    assert q("heartbeat", T0 + 20, "j1", "w1", '{"p": 1}') == T0 + 50
    assert zset(q, "ql:q:q-locks") == {"j1": T0 + 50}
    assert zset(q, "ql:w:w1:jobs") == {"j1": T0 + 50}
    assert json.loads(hash_of(q, "ql:j:j1")["data"]) == {"p": 1}
    assert q.refused("heartbeat", T0 + 21, "j1", "w2") == (
        "Heartbeat(): Job given out to another worker: w1")
    assert q.refused("heartbeat", T0, "nope", "w1") == "Heartbeat(): Job does not exist"
    # An expired lock nobody took over yet can still be renewed.
    assert q("heartbeat", T0 + 100, "j1", "w1") == T0 + 130


def test_an_expired_lock_gets_a_grace_period_then_goes_to_another_worker(q: Script) -> None:
    put(q, "old")
    pop_jids(q, worker="w1")                                    # lock until T0+60
    put(q, "new", now=T0 + 1)
    # At expiry the holder is told (lock_lost) and given the grace period (10 s).
    assert pop_jids(q, worker="w2", count=2, now=T0 + 60) == ["new"]
    assert zset(q, "ql:q:q-locks")["old"] == T0 + 70
    assert hash_of(q, "ql:j:old")["grace"] == "1"
    assert zset(q, "ql:w:w1:jobs") == {}
    assert hash_of(q, f"ql:s:stats:{DAY0}:q")["retries"] == "1"
    # After it, the job is popped again, counting as a retry.
    assert pop_jids(q, worker="w2", now=T0 + 70) == ["old"]
    job = hash_of(q, "ql:j:old")
    assert (job["worker"], job["remaining"], job["expires"]) == ("w2", "4", str(int(T0 + 130)))
    assert "grace" not in job
    assert [e[1:] for e in history(q, "old")] == [
        ["put", {"q": "q"}], ["popped", {"worker": "w1"}], ["timed-out"],
        ["popped", {"worker": "w2"}]]
    assert q.refused("complete", T0 + 71, "old", "w1", "q", "{}") == (
        "Complete(): Job has been handed out to another worker: w2")
    assert q("complete", T0 + 71, "old", "w2", "q", "{}") == "complete"


def test_a_negative_heartbeat_expires_locks_at_once(q: Script) -> None:
    q("config.set", T0, "heartbeat", -10)
    put(q, "j1")
    [job] = q("pop", T0, "q", "w1", 1)
    assert job["expires"] == T0 - 10
    assert q("jobs", T0, "stalled", "q") == ["j1"]


def test_a_job_that_stalls_past_its_retries_fails(q: Script) -> None:
    put(q, "j1", retries=0)
    assert pop_jids(q, worker="w1") == ["j1"]
    assert pop_jids(q, worker="w2", now=T0 + 60) == []          # grace period
    assert pop_jids(q, worker="w3", now=T0 + 70) == []
    job = hash_of(q, "ql:j:j1")
    assert (job["state"], job["worker"], job["expires"]) == ("failed", "", "")
    assert json.loads(job["failure"]) == {
        "group": "failed-retries-q", "message": 'Job exhausted retries in queue "q"',
        "when": T0 + 70, "worker": ""}
    assert text(q.conn.execute("LRANGE", "ql:f:failed-retries-q", 0, -1)) == ["j1"]
    assert members(q, "ql:failures") == ["failed-retries-q"]
    assert zset(q, "ql:q:q-locks") == {}


def test_max_concurrency_caps_the_running_jobs_of_a_queue(q: Script) -> None:
    q("config.set", T0, "q-max-concurrency", 2)
    for i in range(4):
        put(q, f"j{i}", now=T0 + i)
    assert pop_jids(q, count=3, now=T0 + 5) == ["j0", "j1"]
    assert pop_jids(q, worker="w2", now=T0 + 5) == []
    q("complete", T0 + 6, "j0", "w1", "q", "{}")
    assert pop_jids(q, worker="w2", count=3, now=T0 + 6) == ["j2"]


def test_timeout_hands_a_running_job_back_first(q: Script) -> None:
    put(q, "a")
    put(q, "b", now=T0 + 1)
    assert pop_jids(q) == ["a"]
    assert q("timeout", T0 + 2, "a") is None
    assert hash_of(q, "ql:j:a")["state"] == "stalled"
    assert zset(q, "ql:q:q-work")["a"] == math.inf
    assert pop_jids(q, worker="w2", count=2, now=T0 + 3) == ["a", "b"]
    assert q.refused("timeout", T0, "nope") == "Timeout(): Job nope not running"


# ------------------------------------------------------------------------------------------
# complete
# ------------------------------------------------------------------------------------------


def test_complete_finishes_the_job(q: Script) -> None:
    put(q, "j1")
    pop_jids(q, now=T0 + 1)
    assert q("complete", T0 + 4, "j1", "w1", "q", '{"done": true}') == "complete"
    job = hash_of(q, "ql:j:j1")
    assert (job["state"], job["queue"], job["worker"], job["expires"], job["time"]) == (
        "complete", "", "", "0", time_field(T0 + 4))
    assert json.loads(job["data"]) == {"done": True}
    assert history(q, "j1")[-1] == [int(T0) + 4, "done"]
    assert zset(q, "ql:completed") == {"j1": T0 + 4}
    assert zset(q, "ql:q:q-locks") == {} and zset(q, "ql:w:w1:jobs") == {}
    assert hash_of(q, f"ql:s:run:{DAY0}:q") == {"total": "1", "mean": "3", "vk": "0",
                                                "s3": "1"}
    assert q("get", T0, "j1")["queue"] == ""
    assert q.refused("complete", T0 + 5, "j1", "w1", "q", "{}") == (
        "Complete(): Job is not currently running: complete")


def test_complete_checks_the_worker_and_the_job(q: Script) -> None:
    put(q, "j1")
    pop_jids(q)
    assert q.refused("complete", T0, "j1", "w2", "q", "{}") == (
        "Complete(): Job has been handed out to another worker: w1")
    assert q.refused("complete", T0, "nope", "w1", "q", "{}") == "Complete(): Job does not exist"
    assert q.refused("complete", T0, "j1", "w1", "q", "{}", "delay", 5) == (
        'Complete(): "delay" cannot be used without a "next".')
    assert hash_of(q, "ql:j:j1")["state"] == "running"


def test_complete_with_next_moves_the_job_on(q: Script) -> None:
    put(q, "j1", retries=2)
    pop_jids(q)
    q("retry", T0 + 1, "j1", "q", "w1")
    pop_jids(q, now=T0 + 2)
    assert q("complete", T0 + 3, "j1", "w1", "q", "{}", "next", "q2") == "waiting"
    job = hash_of(q, "ql:j:j1")
    assert (job["queue"], job["state"], job["remaining"]) == ("q2", "waiting", "2")
    assert history(q, "j1")[-1] == [int(T0) + 3, "put", {"q": "q2"}]
    assert where(q, "j1", "q2") == ["work"] and where(q, "j1") == []
    assert zset(q, "ql:completed") == {}
    assert list(zset(q, "ql:queues")) == ["q", "q2"]
    # With a delay, scheduled in the next queue (qless-core leaves the state "waiting").
    pop_jids(q, queue="q2", now=T0 + 4)
    assert q("complete", T0 + 5, "j1", "w1", "q2", "{}", "next", "q3", "delay", 7) == "scheduled"
    assert zset(q, "ql:q:q3-scheduled") == {"j1": T0 + 12}


def test_complete_with_next_and_depends(q: Script) -> None:
    put(q, "dep", queue="other")
    put(q, "j1")
    pop_jids(q)
    assert q("complete", T0 + 1, "j1", "w1", "q", "{}", "next", "q2", "depends",
             ["dep"]) == "depends"
    assert hash_of(q, "ql:j:j1")["state"] == "depends"
    assert members(q, "ql:j:j1-dependencies") == ["dep"]
    assert members(q, "ql:j:dep-dependents") == ["j1"]
    assert zset(q, "ql:q:q2-depends") == {"j1": T0 + 1}


# ------------------------------------------------------------------------------------------
# fail, failed, retry, unfail
# ------------------------------------------------------------------------------------------


def test_fail_records_the_failure(q: Script) -> None:
    put(q, "j1")
    pop_jids(q)
    assert q("fail", T0 + 5, "j1", "w1", "io error", "trace...", '{"n": 2}') == "j1"
    job = hash_of(q, "ql:j:j1")
    assert (job["state"], job["worker"], job["expires"], job["queue"]) == (
        "failed", "", "", "q")
    assert json.loads(job["data"]) == {"n": 2}
    assert json.loads(job["failure"]) == {"group": "io error", "message": "trace...",
                                          "when": T0 + 5, "worker": "w1"}
    assert history(q, "j1")[-1] == [int(T0) + 5, "failed", {"worker": "w1", "group": "io error"}]
    assert text(q.conn.execute("LRANGE", "ql:f:io error", 0, -1)) == ["j1"]
    assert members(q, "ql:failures") == ["io error"]
    assert zset(q, "ql:q:q-locks") == {} and zset(q, "ql:w:w1:jobs") == {}
    stats = hash_of(q, f"ql:s:stats:{DAY0}:q")
    assert (stats["failures"], stats["failed"]) == ("1", "1")
    assert q.refused("heartbeat", T0 + 6, "j1", "w1") == (
        "Heartbeat(): Job not currently running: failed")
    assert q.refused("fail", T0, "nope", "w1", "g", "m") == "Fail(): Job does not exist"


def test_only_a_running_job_can_fail(q: Script) -> None:
    put(q, "waiting")
    put(q, "scheduled", delay=100)
    for jid, state in [("waiting", "waiting"), ("scheduled", "scheduled")]:
        assert q.refused("fail", T0, jid, "w1", "g", "m") == (
            f"Fail(): Job not currently running: {state}")
    assert q("failed", T0) == {}


def test_failed_lists_groups_and_pages(q: Script) -> None:
    for i in range(5):
        put(q, f"j{i}", now=T0 + i)
        pop_jids(q, now=T0 + i)
        q("fail", T0 + i, f"j{i}", "w1", "g1" if i < 4 else "g2", f"message {i}")
    assert q("failed", T0) == {"g1": 4, "g2": 1}
    assert q("failed", T0, "g1") == {"total": 4, "jobs": ["j3", "j2", "j1", "j0"]}
    assert q("failed", T0, "g1", 1, 3) == {"total": 4, "jobs": ["j2", "j1"]}   # start, limit
    assert q("failed", T0, "nothing") == {"total": 0, "jobs": {}}


def test_retry_counts_against_retries_then_fails(q: Script) -> None:
    put(q, "j1", retries=1, priority=2)
    pop_jids(q)
    assert q("retry", T0 + 1, "j1", "q", "w1") == 0
    job = hash_of(q, "ql:j:j1")
    assert (job["state"], job["remaining"]) == ("waiting", "0")
    assert zset(q, "ql:q:q-work") == {"j1": 2 - (T0 + 1) / 1e10}
    assert zset(q, "ql:w:w1:jobs") == {} and zset(q, "ql:q:q-locks") == {}
    pop_jids(q, now=T0 + 2)
    assert q("retry", T0 + 3, "j1", "q", "w1", 30) == -1
    job = hash_of(q, "ql:j:j1")
    assert job["state"] == "failed"
    assert json.loads(job["failure"]) == {
        "group": "failed-retries-q", "message": 'Job exhausted retries in queue "q"',
        "when": T0 + 3, "worker": ""}
    assert zset(q, "ql:q:q-scheduled") == {}


def test_retry_with_a_group_and_message_records_them(q: Script) -> None:
    put(q, "j1", retries=0)
    pop_jids(q)
    assert q("retry", T0 + 1, "j1", "q", "w1", 0, "oops", "went wrong") == -1
    assert json.loads(hash_of(q, "ql:j:j1")["failure"]) == {
        "group": "oops", "message": "went wrong", "when": T0 + 1, "worker": "w1"}
    assert q("failed", T0) == {"oops": 1}


def test_retry_with_delay_schedules(q: Script) -> None:
    put(q, "j1")
    pop_jids(q)
    assert q("retry", T0 + 1, "j1", "q", "w1", 30) == 4
    assert zset(q, "ql:q:q-scheduled") == {"j1": T0 + 31}
    assert hash_of(q, "ql:j:j1")["state"] == "scheduled"


def test_retry_needs_the_lock(q: Script) -> None:
    put(q, "j1")
    assert q.refused("retry", T0, "j1", "q", "w1") == (
        "Retry(): Job is not currently running: waiting")
    pop_jids(q)
    assert q.refused("retry", T0, "j1", "q", "w2") == (
        "Retry(): Job has been given to another worker: w1")
    assert hash_of(q, "ql:j:j1")["remaining"] == "5"


def test_unfail_moves_the_oldest_failures_back(q: Script) -> None:
    for i in range(4):
        put(q, f"j{i}", retries=3, now=T0 + i)
        pop_jids(q, now=T0 + i)
        q("fail", T0 + i, f"j{i}", "w1", "g", "m")
    assert q("unfail", T0 + 10, "back", "g", 3) == 3
    assert text(q.conn.execute("LRANGE", "ql:f:g", 0, -1)) == ["j3"]
    assert sorted(pop_jids(q, queue="back", count=5, now=T0 + 11)) == ["j0", "j1", "j2"]
    job = hash_of(q, "ql:j:j0")
    assert (job["queue"], job["remaining"]) == ("back", "3")
    assert q("unfail", T0 + 10, "back", "g") == 1
    assert members(q, "ql:failures") == []
    assert q.conn.execute("EXISTS", "ql:f:g") == 0


def test_put_of_a_failed_job_takes_it_out_of_the_failures(q: Script) -> None:
    put(q, "j1")
    pop_jids(q)
    q("fail", T0, "j1", "w1", "g", "m")
    put(q, "j1", now=T0 + 1)
    assert hash_of(q, "ql:j:j1")["state"] == "waiting"
    assert q.conn.execute("EXISTS", "ql:f:g") == 0 and members(q, "ql:failures") == []
    assert hash_of(q, f"ql:s:stats:{DAY0}:q")["failed"] == "0"


# ------------------------------------------------------------------------------------------
# cancel
# ------------------------------------------------------------------------------------------


def test_cancel_removes_the_job_and_its_history(q: Script) -> None:
    put(q, "j1", tags=["t"])
    pop_jids(q)
    assert q("cancel", T0, "j1", "missing") == ["j1", "missing"]
    assert keys(q) == ["ql:queues", f"ql:s:wait:{DAY0}:q", "ql:tags", "ql:workers"]
    assert zset(q, "ql:tags") == {"t": 0}
    assert q.refused("heartbeat", T0, "j1", "w1") == "Heartbeat(): Job does not exist"
    assert q("get", T0, "j1") is None


def test_cancel_refuses_to_orphan_dependents(q: Script) -> None:
    put(q, "a")
    put(q, "b", depends=["a"])
    assert q.refused("cancel", T0, "a") == (
        "Cancel(): a is a dependency of b but is not mentioned to be canceled")
    assert hash_of(q, "ql:j:a")["state"] == "waiting"
    assert q("cancel", T0, "a", "b") == ["a", "b"]
    assert keys(q) == ["ql:queues"]


def test_cancel_of_failed_and_complete_jobs(q: Script) -> None:
    put(q, "f")
    pop_jids(q)
    q("fail", T0, "f", "w1", "g", "m")
    put(q, "c")
    pop_jids(q)
    q("complete", T0 + 1, "c", "w1", "q", "{}")
    assert q("cancel", T0 + 2, "f", "c") == ["f", "c"]
    assert q.conn.execute("EXISTS", "ql:f:g", "ql:failures", "ql:j:f") == 0
    assert q("get", T0, "c")["state"] == "complete"        # complete jobs are left alone


# ------------------------------------------------------------------------------------------
# dependencies
# ------------------------------------------------------------------------------------------


def test_dependencies_release_jobs_when_the_last_one_completes(q: Script) -> None:
    put(q, "a")
    put(q, "b", now=T0 + 1)
    put(q, "c", depends=["a", "b", "gone"], priority=-1, now=T0 + 2)
    assert hash_of(q, "ql:j:c")["state"] == "depends"
    assert members(q, "ql:j:c-dependencies") == ["a", "b"]   # "gone" does not exist
    assert members(q, "ql:j:a-dependents") == ["c"]
    assert zset(q, "ql:q:q-depends") == {"c": T0 + 2}
    assert q("get", T0, "a")["dependents"] == ["c"]
    assert pop_jids(q, count=2) == ["a", "b"]
    q("complete", T0 + 3, "a", "w1", "q", "{}")
    assert hash_of(q, "ql:j:c")["state"] == "depends"
    assert members(q, "ql:j:c-dependencies") == ["b"]
    assert q.conn.execute("EXISTS", "ql:j:a-dependents") == 0
    q("complete", T0 + 4, "b", "w1", "q", "{}")
    assert hash_of(q, "ql:j:c")["state"] == "waiting"
    assert where(q, "c") == ["work"]
    assert pop_jids(q, now=T0 + 5) == ["c"]


def test_depending_on_a_complete_job_does_not_wait(q: Script) -> None:
    put(q, "a")
    pop_jids(q)
    q("complete", T0, "a", "w1", "q", "{}")
    put(q, "b", depends=["a"])
    assert hash_of(q, "ql:j:b")["state"] == "waiting"


def test_depends_on_off_and_off_all(q: Script) -> None:
    for jid in ("a", "b", "c"):
        put(q, jid)
    put(q, "x", depends=["a"])
    assert q("depends", T0, "x", "on", "b", "c") == 1
    assert members(q, "ql:j:x-dependencies") == ["a", "b", "c"]
    assert members(q, "ql:j:c-dependents") == ["x"]
    assert q("depends", T0, "x", "off", "a", "b") == 1
    assert members(q, "ql:j:x-dependencies") == ["c"]
    assert members(q, "ql:j:a-dependents") == []
    assert hash_of(q, "ql:j:x")["state"] == "depends"
    assert q("depends", T0 + 1, "x", "off", "all") == 1
    assert hash_of(q, "ql:j:x")["state"] == "waiting"
    assert members(q, "ql:j:c-dependents") == []
    assert zset(q, "ql:q:q-work")["x"] == -(T0 + 1) / 1e10
    assert q.refused("depends", T0, "x", "on", "a") == (
        "Depends(): Job x not in the depends state: waiting")


# ------------------------------------------------------------------------------------------
# priority, tags, tracking, log
# ------------------------------------------------------------------------------------------


def test_priority_rescores_a_waiting_job_without_its_time(q: Script) -> None:
    """qless-core rescores with time 0, so the job goes before others of its priority."""
    put(q, "a")
    put(q, "b", now=T0 + 1)
    put(q, "c", now=T0 + 2)
    assert q("priority", T0 + 3, "c", 0) == 0
    assert zset(q, "ql:q:q-work")["c"] == 0
    assert q("priority", T0 + 3, "a", -1) == -1
    assert hash_of(q, "ql:j:a")["priority"] == "-1"
    assert [j["jid"] for j in q("peek", T0 + 3, "q", 3)] == ["c", "b", "a"]


def test_tags_add_remove_get_top(q: Script) -> None:
    put(q, "j1", tags=["a"])
    put(q, "j2", now=T0 + 1)
    # `tag add` replies with the JSON text of the tag list (encoded once more).
    assert json.loads(q("tag", T0 + 2, "add", "j1", "b", "a", "c")) == '["a","b","c"]'
    assert json.loads(q("tag", T0 + 3, "add", "j2", "b")) == '["b"]'
    assert zset(q, "ql:t:a") == {"j1": T0 + 2}                # tagging again re-scores
    assert zset(q, "ql:t:b") == {"j1": T0 + 2, "j2": T0 + 3}
    assert q("tag", T0, "remove", "j1", "a", "zzz") == ["b", "c"]
    assert json.loads(hash_of(q, "ql:j:j1")["tags"]) == ["b", "c"]
    assert q.conn.execute("EXISTS", "ql:t:a") == 0
    assert q("tag", T0, "get", "b") == {"total": 2, "jobs": ["j1", "j2"]}
    assert q("tag", T0, "get", "b", 1, 5) == {"total": 2, "jobs": ["j2"]}
    assert q("tag", T0, "get", "none") == {"total": 0, "jobs": {}}
    assert q("tag", T0, "top") == ["b"]                        # tags on 2 jobs or more
    assert q.refused("tag", T0, "add", "nope", "x") == "Tag(): Job nope does not exist"


def test_track_untrack_tracked_and_expired(q: Script) -> None:
    put(q, "j1")
    put(q, "j2")
    assert q("track", T0, "track", "j1") == "1"
    assert q("track", T0 + 1, "track", "j1") == "0"
    assert q("track", T0 + 2, "track", "j2") == "1"
    assert zset(q, "ql:tracked") == {"j1": T0 + 1, "j2": T0 + 2}
    assert q("get", T0, "j1")["tracked"] is True
    q("config.set", T0, "jobs-history-count", 0)
    pop_jids(q, count=2)
    q("complete", T0 + 3, "j2", "w1", "q", "{}")           # pruned at once (count 0)
    report = q("track", T0)
    assert [j["jid"] for j in report["jobs"]] == ["j1"] and report["expired"] == ["j2"]
    assert q("track", T0, "untrack", "j1") == "1"
    assert q("track", T0, "untrack", "j1") == "0"
    assert q.refused("track", T0, "track", "nope") == "Track(): Job does not exist"


def test_log_appends_to_the_history(q: Script) -> None:
    put(q, "j1")
    assert q("log", T0 + 1, "j1", "note", '{"k": [1]}') is None
    assert q("get", T0, "j1")["history"][-1] == {"when": int(T0) + 1, "what": "note", "k": [1]}
    assert q.refused("log", T0, "nope", "x") == "Log(): Job nope does not exist"


# ------------------------------------------------------------------------------------------
# jobs, queues, workers
# ------------------------------------------------------------------------------------------


def test_jobs_by_state(q: Script) -> None:
    for i in range(3):
        put(q, f"w{i}", now=T0 + i)
    put(q, "s", delay=100)
    put(q, "d", depends=["w2"])
    pop_jids(q, count=2, now=T0 + 10)                       # w0, w1 run until T0+70
    q("heartbeat", T0 + 20, "w1", "w1")                     # w1 now until T0+80
    assert q("jobs", T0 + 75, "running", "q") == ["w1"]
    assert q("jobs", T0 + 75, "stalled", "q") == ["w0"]
    assert q("jobs", T0 + 75, "scheduled", "q") == ["s"]
    assert q("jobs", T0 + 75, "depends", "q") == ["d"]
    assert q("jobs", T0 + 100, "scheduled", "q") == []        # s came due: now waiting
    q("complete", T0 + 21, "w1", "w1", "q", "{}")
    assert q("jobs", T0, "complete") == ["w1"]
    assert q.refused("jobs", T0, "waiting", "q") == 'Jobs(): Unknown type "waiting"'


def test_queues_counts(q: Script) -> None:
    put(q, "a")
    put(q, "b")
    put(q, "c", delay=50)
    put(q, "d", depends=["a"])
    put(q, "x", queue="other", now=T0 - 1)
    pop_jids(q)
    expected = {"name": "q", "waiting": 1, "running": 1, "stalled": 0, "scheduled": 1,
                "depends": 1, "recurring": 0, "paused": False}
    assert q("queues", T0 + 1, "q") == expected
    listing = q("queues", T0 + 1)
    assert [c["name"] for c in listing] == ["other", "q"] and listing[1] == expected
    later = q("queues", T0 + 60, "q")
    assert (later["running"], later["stalled"], later["waiting"], later["scheduled"]) == (
        0, 1, 2, 0)


def test_workers_list_jobs_and_stalls(q: Script) -> None:
    put(q, "a")
    put(q, "b", now=T0 + 1)
    pop_jids(q, worker="w1", now=T0)
    pop_jids(q, worker="w2", now=T0 + 30)
    assert q("workers", T0 + 61) == [
        {"name": "w2", "jobs": 1, "stalled": 0}, {"name": "w1", "jobs": 0, "stalled": 1}]
    assert q("workers", T0 + 61, "w1") == {"jobs": {}, "stalled": ["a"]}
    assert q("workers", T0 + 61, "w2") == {"jobs": ["b"], "stalled": {}}
    q("config.set", T0, "max-worker-age", 100)
    assert [w["name"] for w in q("workers", T0 + 120)] == ["w2"]
    assert zset(q, "ql:workers") == {"w2": T0 + 30}
    assert q("worker.deregister", T0, "w2") is None
    assert q("workers", T0 + 120) == {}


# ------------------------------------------------------------------------------------------
# config, pruning
# ------------------------------------------------------------------------------------------


def test_config_defaults_set_unset(q: Script) -> None:
    assert q("config.get", T0) == {
        "application": "qless", "heartbeat": 60, "grace-period": 10, "stats-history": 30,
        "histogram-history": 7, "jobs-history-count": 50000, "jobs-history": 604800}
    assert q("config.get", T0, "heartbeat") == 60
    assert q("config.get", T0, "unknown") is None
    assert q("config.set", T0, "heartbeat", 10) is None
    assert q("config.set", T0, "application", "mine") is None
    assert hash_of(q, "ql:config") == {"heartbeat": "10", "application": "mine"}
    assert q("config.get", T0, "heartbeat") == "10"
    assert q("config.get", T0)["application"] == "mine"
    put(q, "j1")
    assert q("pop", T0, "q", "w", 1)[0]["expires"] == T0 + 10
    q("config.unset", T0, "heartbeat")
    assert q("config.get", T0, "heartbeat") == 60


def _complete(q: Script, jid: str, now: float) -> None:
    put(q, jid, now=now)
    assert pop_jids(q, now=now) == [jid]
    q("complete", now, jid, "w1", "q", "{}")


def test_completed_jobs_are_pruned_by_age(q: Script) -> None:
    q("config.set", T0, "jobs-history", 100)
    _complete(q, "a", T0)
    _complete(q, "b", T0 + 50)
    q("tag", T0, "add", "a", "t")
    _complete(q, "c", T0 + 99)
    assert list(zset(q, "ql:completed")) == ["a", "b", "c"]
    _complete(q, "d", T0 + 100)                   # a is 100 s old: pruned
    assert list(zset(q, "ql:completed")) == ["b", "c", "d"]
    assert q.conn.execute("EXISTS", "ql:j:a", "ql:j:a-history", "ql:t:t") == 0
    assert q("get", T0, "a") is None


def test_completed_jobs_are_pruned_by_count(q: Script) -> None:
    q("config.set", T0, "jobs-history-count", 2)
    for i in range(5):
        _complete(q, f"j{i}", T0 + i)
    assert list(zset(q, "ql:completed")) == ["j3", "j4"]
    assert [k for k in keys(q) if k.startswith("ql:j:")] == [
        "ql:j:j3", "ql:j:j3-history", "ql:j:j4", "ql:j:j4-history"]


# ------------------------------------------------------------------------------------------
# Recurring jobs
# ------------------------------------------------------------------------------------------


def test_recurring_jobs_spawn_on_pop(q: Script) -> None:
    assert q("recur", T0, "q", "r1", "app.Tick", '{"n": 1}', "interval", 60, 10,
             "tags", ["cron"], "priority", -1, "retries", 2) == "r1"
    assert hash_of(q, "ql:r:r1")["interval"] == "60"
    assert zset(q, "ql:q:q-recur") == {"r1": T0 + 10}
    assert pop_jids(q, now=T0 + 9) == []
    assert pop_jids(q, count=5, now=T0 + 130) == ["r1-1", "r1-2", "r1-3"]
    job = hash_of(q, "ql:j:r1-2")
    assert (job["klass"], job["data"], job["priority"], job["retries"], job["time"]) == (
        "app.Tick", '{"n": 1}', "-1", "2", time_field(T0 + 130))   # time of the pop
    assert json.loads(job["tags"]) == ["cron"]
    assert history(q, "r1-2")[0] == [int(T0) + 70, "put", {"q": "q"}]
    assert zset(q, "ql:q:q-recur") == {"r1": T0 + 190}
    assert zset(q, "ql:t:cron") == {"r1-1": T0 + 130, "r1-2": T0 + 130, "r1-3": T0 + 130}
    assert q("recur.get", T0, "r1") == {
        "jid": "r1", "klass": "app.Tick", "state": "recur", "queue": "q", "priority": -1,
        "interval": 60, "retries": 2, "count": 3, "data": '{"n": 1}', "tags": ["cron"],
        "backlog": 0}
    assert q("queues", T0, "q")["recurring"] == 1
    assert q("jobs", T0, "recurring", "q") == ["r1"]
    assert q("unrecur", T0, "r1") == 1
    assert q.conn.execute("EXISTS", "ql:r:r1", "ql:q:q-recur") == 0
    assert q.conn.execute("EXISTS", "ql:j:r1-4") == 0


def test_recurring_again_keeps_the_count(q: Script) -> None:
    q("recur", T0, "q", "r", "K", "{}", "interval", 60, 0)
    assert pop_jids(q, now=T0 + 1) == ["r-1"]
    q("recur", T0 + 55, "q", "r", "K", '{"v": 2}', "interval", 60, 0)
    assert pop_jids(q, now=T0 + 56) == ["r-2"]
    assert q("complete", T0 + 57, "r-1", "w1", "q", "{}") == "complete"


def test_recurring_backlog_caps_missed_runs(q: Script) -> None:
    q("recur", T0, "q", "r1", "K", "{}", "interval", 10, 0, "backlog", 2)
    assert len(pop_jids(q, count=100, now=T0 + 1000)) == 3    # runs at T0+980, 990, 1000
    assert zset(q, "ql:q:q-recur") == {"r1": T0 + 1010}


def test_recur_update_tag_untag(q: Script) -> None:
    q("recur", T0, "q", "r", "K", "{}", "interval", 60, 0, "tags", ["a"])
    assert q("recur.update", T0, "r", "priority", 5, "interval", 90, "queue", "q2") == 1
    assert zset(q, "ql:q:q2-recur") == {"r": T0 + 30}         # re-scored by the change
    assert q("recur.tag", T0, "r", "b") == ["a", "b"]
    assert q("recur.untag", T0, "r", "a") == ["b"]
    template = q("recur.get", T0, "r")
    assert (template["priority"], template["interval"], template["queue"], template["tags"]) == (
        5, 90, "q2", ["b"])
    assert q.refused("recur.update", T0, "nope", "priority", 1) == "Recur(): No recurring job nope"


# ------------------------------------------------------------------------------------------
# The calling convention
# ------------------------------------------------------------------------------------------


BAD_CALLS: list[tuple[list[object], str]] = [
    ([], "Must provide a command"),
    (["frobnicate", T0], "Unknown command frobnicate"),
    (["put", T0, "q", "j", "K", "{}"], 'Put(): Arg "delay" not a number: nil'),
    (["put", T0, "q", "j", "K", "{}", "soon"], 'Put(): Arg "delay" not a number: soon'),
    (["put", T0, "q", "j", "K", "{}", 0, "retries", "x"],
     'Put(): Arg "retries" not a number: x'),
    (["pop", T0, "q", "w", "x"], 'Pop(): Arg "count" missing or not a number: x'),
    (["pop", T0, "q"], 'Pop(): Arg "worker" missing'),
    (["jobs", T0, "lost", "q"], 'Jobs(): Unknown type "lost"'),
    (["tag", T0, "paint", "j"], 'Tag(): First argument must be "add", "remove" or "get"'),
    (["depends", T0, "existing", "maybe", "x"],
     "Depends(): Job existing not in the depends state: waiting"),
    (["stats", T0, "q", "x"], 'Stats(): Arg "date" missing or not a number: x'),
    (["recur", T0, "q", "r", "K", "{}", "cron", 1, 0], 'Recur(): schedule type "cron" unknown'),
]


@pytest.mark.parametrize(("args", "message"), BAD_CALLS)
def test_bad_calls_are_refused_with_qless_cores_text_and_change_nothing(
    q: Script, args: list[object], message: str
) -> None:
    put(q, "existing")
    before = dump(q)
    with pytest.raises(RedisError) as info:
        q.conn.evalsha(q.sha, [], [arg(a) for a in args])
    assert error_message(str(info.value)) == message
    assert dump(q) == before


def test_a_bad_now_is_refused(q: Script) -> None:
    """qless-core names the value ``nil``, ours the text sent (an intended difference)."""
    assert q.refused("put", "x", "q", "j", "K", "{}", 0).startswith(
        'Arg "now" missing or not a number: ')
    assert keys(q) == []


def test_keys_are_refused(q: Script) -> None:
    """Bindings call with no KEYS; a call with keys is a mistake (qless-core fails on it too,
    on a misspelt ``erorr``)."""
    with pytest.raises(RedisError):
        q.conn.evalsha(q.sha, ["ql:config"], ["config.get", str(T0)])


def test_script_flush_is_recovered(fresh_redis: RedisServer) -> None:
    with Redis.from_url(fresh_redis.url) as conn:
        script = Script(conn, conn.load_script(our_source()), "jobwire")
        put(script, "j1")
        conn.execute("SCRIPT", "FLUSH")
        assert conn.execute("SCRIPT", "EXISTS", script.sha) == [0]
        assert pop_jids(script) == ["j1"]
        assert conn.execute("SCRIPT", "EXISTS", script.sha) == [1]


#: The only globals the script may read: Redis' script environment and Lua's standard library.
ALLOWED_GLOBALS = {
    "ARGV", "KEYS", "redis", "cjson", "error", "assert", "getmetatable", "setmetatable",
    "ipairs", "pairs", "next", "pcall", "select", "math", "string", "table", "tonumber",
    "tostring", "type", "unpack",
}


def test_the_script_writes_no_global_and_reads_only_known_ones(tmp_path: Any) -> None:
    """Redis 7 refuses global writes at run time, but only on the paths a call takes: the
    bytecode listing shows every path at once. Runs where ``luac5.1`` is installed."""
    import re
    import shutil
    import subprocess

    luac = shutil.which("luac5.1") or shutil.which("luac")
    if luac is None:
        pytest.skip("luac5.1 is not installed (apt-get install lua5.1)")
    path = tmp_path / "qless.lua"
    path.write_text(our_source())
    listing = subprocess.run([luac, "-p", "-l", str(path)], capture_output=True, text=True,
                             check=True).stdout
    assert "SETGLOBAL" not in listing
    read = set(re.findall(r"GETGLOBAL\s.*;\s*(\S+)", listing))
    assert read <= ALLOWED_GLOBALS, read - ALLOWED_GLOBALS
