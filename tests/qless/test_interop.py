"""Interop: qless-py 0.11.4 and jobwire on one Redis database.

qless-py runs through its own client API with the qless-core script it ships (patched in memory
for Redis 7, ``tests/qless/qlesspy.py``); jobwire runs through ``qless_client.Client`` with its
own script. For each command of the matrix a job is created by one binding and acted on by the
other (both directions), and afterwards **both bindings read every job** in the database
(``client.jobs[jid]`` in qless-py, ``Client.get`` in jobwire) and must see the same state,
queue, worker, priority, tags, history, failure, dependencies, retries and data; the queue
counts, the day's stats, failure groups, workers, tag counts (``tag top``) and tracked jobs
must agree too. Then the defects of issue 17 (a)-(g), each as the
issue tells it.

Both bindings share one clock (:class:`Clock`, set by the test; qless-py's ``now`` replaced
through ``QlessPy(clock=)``, jobwire's through ``Client(clock=)``), so times compare exactly.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from qless_client import Client, LostLock
from qless_client._scripts import SOURCE
from tests.qless.conftest import RedisServer
from tests.qless.qlesspy import QlessException, QlessPy

DB = 12
PY_WORKER = "py-worker"
JW_WORKER = "jw-worker"


class Clock:
    """One clock for both bindings: UTC seconds, millisecond steps, moved by the test. It
    starts at noon (UTC) today, so a test's stats all fall on one day."""

    def __init__(self) -> None:
        today = time.time() // 86400 * 86400
        self.now = today + 43200.125

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 1.0) -> float:
        self.now = round(self.now + seconds, 3)
        return self.now


# --------------------------------------------------------------------------------------------
# The two bindings behind one small interface (a jid in, plain values out)
# --------------------------------------------------------------------------------------------


class Binding:
    """What a test does with one binding; ``held`` keeps the jobs its worker popped."""

    name: str
    worker: str

    def __init__(self) -> None:
        self.held: dict[str, Any] = {}

    def __repr__(self) -> str:
        return self.name


class Py(Binding):
    name = "qless-py"
    worker = PY_WORKER

    def __init__(self, url: str, clock: Clock, source: str | None) -> None:
        super().__init__()
        self.client = QlessPy(url, PY_WORKER, clock, source)

    def close(self) -> None:
        self.client.close()

    def put(self, queue: str, jid: str, *, priority: int = 0, tags: list[str] | None = None,
            delay: float = 0, depends: list[str] | None = None, data: Any = None) -> str:
        return str(self.client.queues[queue].put(
            "app.Job", data if data is not None else {"jid": jid}, priority=priority,
            tags=tags, delay=delay, jid=jid, depends=depends))

    def pop(self, queue: str, count: int = 1) -> list[str]:
        jobs = self.client.queues[queue].pop(count)
        self.held.update({job.jid: job for job in jobs})
        return [job.jid for job in jobs]

    def pop_one(self, queue: str) -> str | None:
        job = self.client.queues[queue].pop()
        if job is None:
            return None
        self.held[job.jid] = job
        return str(job.jid)

    def peek(self, queue: str, count: int) -> list[str]:
        return [job.jid for job in self.client.queues[queue].peek(count)]

    def heartbeat(self, jid: str) -> float:
        return float(self.held[jid].heartbeat())

    def complete(self, jid: str, next: str | None = None) -> str:
        return str(self.held.pop(jid).complete(next))

    def fail(self, jid: str, group: str, message: str) -> None:
        self.held.pop(jid).fail(group, message)

    def retry(self, jid: str) -> int:
        return int(self.held.pop(jid).retry())

    def cancel(self, jid: str) -> None:
        self.client.jobs[jid].cancel()

    def depend(self, jid: str, *on: str) -> None:
        self.client.jobs[jid].depend(*on)

    def undepend(self, jid: str, *on: str) -> None:
        self.client.jobs[jid].undepend(*on)

    def set_priority(self, jid: str, priority: int) -> None:
        self.client.jobs[jid].priority = priority

    def tag(self, jid: str, *tags: str) -> None:
        self.client.jobs[jid].tag(*tags)

    def untag(self, jid: str, *tags: str) -> None:
        self.client.jobs[jid].untag(*tags)

    def tagged(self, tag: str) -> list[str]:
        return list(self.client.jobs.tagged(tag)["jobs"])

    def track(self, jid: str) -> None:
        self.client.jobs[jid].track()

    def untrack(self, jid: str) -> None:
        self.client.jobs[jid].untrack()

    def tracked(self) -> list[str]:
        return [job["jid"] if isinstance(job, dict) else job.jid
                for job in self.client.jobs.tracked()["jobs"]]

    def recur(self, queue: str, jid: str, interval: int, offset: int = 0) -> None:
        self.client.queues[queue].recur("app.Job", {"jid": jid}, interval, offset, jid=jid)

    def unfail(self, queue: str, group: str) -> int:
        return int(self.client.unfail(group, queue))

    def failed(self) -> dict[str, int]:
        return dict(self.client.jobs.failed())

    def counts(self) -> list[dict[str, Any]]:
        return list(self.client.queues.counts)

    def stats(self, queue: str, day: float) -> dict[str, Any]:
        stats = self.client.queues[queue].stats(repr(day))
        return {kind: {"count": stats[kind]["count"], "mean": stats[kind]["mean"],
                       "histogram": stats[kind]["histogram"]} for kind in ("wait", "run")} | {
            field: stats[field] for field in ("failed", "failures", "retries")}

    def view(self, jid: str) -> dict[str, Any] | None:
        job = self.client.jobs[jid]
        if job is None:
            return None
        return {
            "jid": job.jid, "klass": job.klass_name, "state": job.state,
            "queue": job.queue_name or None, "worker": job.worker_name,
            "priority": job.priority, "tags": list(job.tags), "tracked": job.tracked,
            "history": [dict(event) for event in job.history],
            "failure": dict(job.failure) or None,
            "dependents": sorted(job.dependents), "dependencies": sorted(job.dependencies),
            "retries": job.original_retries, "remaining": job.retries_left,
            "expires": round(float(job.expires_at or 0), 3), "data": job.data,
        }


class Jw(Binding):
    name = "jobwire"
    worker = JW_WORKER

    def __init__(self, url: str, clock: Clock) -> None:
        super().__init__()
        self.client: Client[Any] = Client(url, worker_name=JW_WORKER, clock=clock)

    def close(self) -> None:
        self.client.close()

    def put(self, queue: str, jid: str, *, priority: int = 0, tags: list[str] | None = None,
            delay: float = 0, depends: list[str] | None = None, data: Any = None) -> str:
        return self.client.queue(queue).put(
            "app.Job", data if data is not None else {"jid": jid}, jid=jid, priority=priority,
            tags=tags, delay=delay, depends=depends)

    def pop(self, queue: str, count: int = 1) -> list[str]:
        jobs = self.client.queue(queue).pop(count)
        self.held.update({job.jid: job for job in jobs})
        return [job.jid for job in jobs]

    def pop_one(self, queue: str) -> str | None:
        job = self.client.queue(queue).pop()
        if job is None:
            return None
        self.held[job.jid] = job
        return job.jid

    def peek(self, queue: str, count: int) -> list[str]:
        return [job.jid for job in self.client.queue(queue).peek(count)]

    def heartbeat(self, jid: str) -> float:
        return self.held[jid].heartbeat().timestamp()

    def complete(self, jid: str, next: str | None = None) -> str:
        return str(self.held.pop(jid).complete(next))

    def fail(self, jid: str, group: str, message: str) -> None:
        self.held.pop(jid).fail(group, message)

    def retry(self, jid: str) -> int:
        return int(self.held.pop(jid).retry())

    def _job(self, jid: str) -> Any:
        job = self.client.get(jid)
        assert job is not None, jid
        return job

    def cancel(self, jid: str) -> None:
        self.client.cancel(jid)

    def depend(self, jid: str, *on: str) -> None:
        self._job(jid).depend(*on)

    def undepend(self, jid: str, *on: str) -> None:
        self._job(jid).undepend(*on)

    def set_priority(self, jid: str, priority: int) -> None:
        self._job(jid).set_priority(priority)

    def tag(self, jid: str, *tags: str) -> None:
        self._job(jid).tag(*tags)

    def untag(self, jid: str, *tags: str) -> None:
        self._job(jid).untag(*tags)

    def tagged(self, tag: str) -> list[str]:
        return list(self.client.tagged(tag)["jobs"])

    def track(self, jid: str) -> None:
        self._job(jid).track()

    def untrack(self, jid: str) -> None:
        self._job(jid).untrack()

    def tracked(self) -> list[str]:
        jobs, _expired = self.client.tracked()
        return [job.jid for job in jobs]

    def recur(self, queue: str, jid: str, interval: int, offset: int = 0) -> None:
        self.client.queue(queue).recur("app.Job", {"jid": jid}, interval=interval,
                                       offset=offset, jid=jid)

    def unfail(self, queue: str, group: str) -> int:
        return self.client.unfail(queue, group)

    def failed(self) -> dict[str, int]:
        return dict(self.client.failed())

    def counts(self) -> list[dict[str, Any]]:
        return [dict(c) for c in self.client.queues()]

    def stats(self, queue: str, day: float) -> dict[str, Any]:
        stats: Any = self.client.queue(queue).stats(day)
        return {kind: {"count": stats[kind]["count"], "mean": stats[kind]["mean"],
                       "histogram": stats[kind]["histogram"]} for kind in ("wait", "run")} | {
            field: stats[field] for field in ("failed", "failures", "retries")}

    def view(self, jid: str) -> dict[str, Any] | None:
        job = self.client.get(jid)
        if job is None:
            return None
        return {
            "jid": job.jid, "klass": job.klass, "state": job.state, "queue": job.queue,
            "worker": job.worker, "priority": job.priority, "tags": list(job.tags),
            "tracked": job.tracked, "history": [dict(event) for event in job.history],
            "failure": dict(job.failure) if job.failure else None,
            "dependents": sorted(job.dependents), "dependencies": sorted(job.dependencies),
            "retries": job.retries, "remaining": job.remaining,
            "expires": round(job.expires.timestamp(), 3) if job.expires else 0.0,
            "data": job.data,
        }


class World:
    """Both bindings on one database, and the clock they share."""

    def __init__(self, url: str, py_source: str | None = None) -> None:
        self.url = url
        self.clock = Clock()
        self.start = self.clock.now
        self.py = Py(url, self.clock, py_source)
        self.jw = Jw(url, self.clock)
        self.redis = self.py.client.redis

    def binding(self, name: str) -> Binding:
        return self.py if name == "py" else self.jw

    def jids(self) -> list[str]:
        return sorted(key[len("ql:j:"):] for key in self.redis.keys("ql:j:*")
                      if self.redis.type(key) == "hash")

    def agree(self) -> dict[str, dict[str, Any]]:
        """Both bindings read every job, the queue counts and today's stats of every queue:
        they must see the same. Returns the jobs, by jid."""
        jobs: dict[str, dict[str, Any]] = {}
        for jid in self.jids():
            theirs, ours = self.py.view(jid), self.jw.view(jid)
            assert theirs is not None, f"qless-py cannot read {jid}"
            assert ours == theirs, jid
            jobs[jid] = theirs
        assert self.jw.counts() == self.py.counts()
        for counts in self.py.counts():
            queue = counts["name"]
            assert self.jw.stats(queue, self.clock.now) == self.py.stats(queue, self.clock.now)
        assert self.jw.failed() == self.py.failed()
        # cjson writes an empty list as {}: qless-py hands that on, jobwire reads it as [].
        assert [dict(w) for w in self.jw.client.workers()] == list(
            self.py.client.workers.counts or [])
        assert self.jw.client.tags() == list(self.py.client.tags() or [])
        assert self.jw.tracked() == self.py.tracked()
        return jobs


@pytest.fixture(params=["qless-py-on-qless-core", "qless-py-on-jobwire-lua"])
def world(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[World]:
    """Both bindings on one database. qless-py runs the qless-core script it ships (patched for
    Redis 7), or jobwire's script in its place: it must work unchanged on either."""
    url = f"{redis_server.url}/{DB}"
    w = World(url, None if request.param == "qless-py-on-qless-core" else SOURCE)
    w.redis.flushdb()
    try:
        yield w
    finally:
        w.redis.flushdb()
        w.py.close()
        w.jw.close()


def _whats(job: dict[str, Any]) -> list[str]:
    return [event["what"] for event in job["history"]]


# --------------------------------------------------------------------------------------------
# The matrix: created by one binding, acted on by the other
# --------------------------------------------------------------------------------------------


def m_put(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1", priority=1, tags=["t"], data={"n": 1})
    w.clock.tick()
    b.put("q", "j2", priority=2, data=[1, "two"])
    jobs = w.agree()
    assert (jobs["j1"]["state"], jobs["j1"]["tags"], jobs["j1"]["data"]) == (
        "waiting", ["t"], {"n": 1})
    assert jobs["j2"]["data"] == [1, "two"]
    assert a.peek("q", 2) == b.peek("q", 2) == ["j2", "j1"]


def m_pop(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    w.clock.tick(3)
    assert b.pop("q") == ["j1"]
    job = w.agree()["j1"]
    assert (job["state"], job["worker"], _whats(job)) == ("running", b.worker, ["put", "popped"])
    assert job["history"][1]["worker"] == b.worker


def m_heartbeat(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    b.pop("q")
    w.clock.tick(10)
    assert b.heartbeat("j1") == pytest.approx(w.clock.now + 60)
    assert w.agree()["j1"]["expires"] == pytest.approx(w.clock.now + 60)


def m_complete(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    b.pop("q")
    w.clock.tick(2)
    assert b.complete("j1", next="q2") == "waiting"
    assert w.agree()["j1"]["queue"] == "q2"
    assert a.pop("q2") == ["j1"]
    w.clock.tick(2)
    assert a.complete("j1") == "complete"
    job = w.agree()["j1"]
    assert (job["state"], job["queue"]) == ("complete", None)
    assert _whats(job) == ["put", "popped", "done", "put", "popped", "done"]


def m_fail(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    b.pop("q")
    b.fail("j1", "boom", "it broke")
    job = w.agree()["j1"]
    assert job["state"] == "failed" and job["failure"]["group"] == "boom"
    assert job["failure"]["worker"] == b.worker
    assert a.failed() == {"boom": 1}


def m_retry(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    b.pop("q")
    assert b.retry("j1") == 4
    job = w.agree()["j1"]
    assert (job["state"], job["remaining"]) == ("waiting", 4)
    assert a.pop("q") == ["j1"]
    w.agree()


def m_cancel(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1", tags=["t"])
    a.pop("q")
    b.cancel("j1")
    assert a.view("j1") is None and b.view("j1") is None
    assert w.redis.keys("ql:j:j1*") == []
    w.agree()


def m_depends(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    a.put("q", "j2", depends=["j1"])
    w.clock.tick()
    b.put("q", "j3")
    b.depend("j2", "j3")
    assert w.agree()["j2"]["dependencies"] == ["j1", "j3"]
    assert b.pop("q", 2) == ["j1", "j3"]
    b.complete("j1")
    assert w.agree()["j2"]["state"] == "depends"
    b.undepend("j2", "j3")
    job = w.agree()["j2"]
    assert (job["state"], job["dependencies"]) == ("waiting", [])


def m_delay(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1", delay=10)
    assert w.agree()["j1"]["state"] == "scheduled"
    assert b.pop("q") == []
    w.clock.tick(11)
    assert b.pop("q") == ["j1"]
    w.agree()


def m_priority(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    w.clock.tick()
    a.put("q", "j2")
    b.set_priority("j2", 5)
    assert w.agree()["j2"]["priority"] == 5
    assert a.peek("q", 2) == b.peek("q", 2) == ["j2", "j1"]
    assert a.pop("q") == ["j2"]


def m_tags(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1", tags=["t1"])
    b.tag("j1", "t2")
    b.untag("j1", "t1")
    assert w.agree()["j1"]["tags"] == ["t2"]
    assert a.tagged("t2") == b.tagged("t2") == ["j1"]
    assert a.tagged("t1") == b.tagged("t1") == []


def m_track(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    b.track("j1")
    assert w.agree()["j1"]["tracked"] is True
    assert a.tracked() == b.tracked() == ["j1"]
    a.untrack("j1")
    assert w.agree()["j1"]["tracked"] is False


def m_recur(w: World, a: Binding, b: Binding) -> None:
    a.recur("q", "r", 60)
    w.clock.tick()
    assert b.pop("q") == ["r-1"]
    b.complete("r-1")
    w.clock.tick(60)
    assert a.pop("q") == ["r-2"]
    jobs = w.agree()
    assert jobs["r-1"]["state"] == "complete" and jobs["r-2"]["state"] == "running"


def m_unfail(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    a.pop("q")
    a.fail("j1", "boom", "it broke")
    assert b.unfail("q", "boom") == 1
    job = w.agree()["j1"]
    assert (job["state"], job["queue"]) == ("waiting", "q")
    assert b.pop("q") == ["j1"]


def m_stats(w: World, a: Binding, b: Binding) -> None:
    a.put("q", "j1")
    w.clock.tick(5)
    b.pop("q")
    w.clock.tick(7)
    b.complete("j1")
    w.agree()
    for binding in (a, b):
        stats = binding.stats("q", w.clock.now)
        assert (stats["wait"]["count"], stats["wait"]["mean"]) == (1, pytest.approx(5))
        assert (stats["run"]["count"], stats["run"]["mean"]) == (1, pytest.approx(7))
        assert stats["wait"]["histogram"][5] == 1 and stats["run"]["histogram"][7] == 1


MATRIX: dict[str, Callable[[World, Binding, Binding], None]] = {
    "put": m_put, "pop": m_pop, "heartbeat": m_heartbeat, "complete": m_complete,
    "fail": m_fail, "retry": m_retry, "cancel": m_cancel, "depends": m_depends,
    "delay": m_delay, "priority": m_priority, "tags": m_tags, "track": m_track,
    "recur": m_recur, "unfail": m_unfail, "stats": m_stats,
}


@pytest.mark.parametrize("creator,actor", [("py", "jw"), ("jw", "py")],
                         ids=["qless-py-then-jobwire", "jobwire-then-qless-py"])
@pytest.mark.parametrize("command", list(MATRIX))
def test_matrix(world: World, command: str, creator: str, actor: str) -> None:
    MATRIX[command](world, world.binding(creator), world.binding(actor))
    world.agree()


# --------------------------------------------------------------------------------------------
# Issue 17's defects, as it tells them
# --------------------------------------------------------------------------------------------


def test_a_jobwire_retry_and_complete_leave_qless_py_working(world: World) -> None:
    py, jw = world.py, world.jw
    py.put("q", "p1")
    world.clock.tick()
    py.put("q", "p2")
    assert jw.pop_one("q") == "p1"
    world.clock.tick()
    jw.retry("p1")
    # Before: `user_script:871: bad argument #1 to 'floor' (number expected, got nil)`.
    assert py.view("p1") is not None
    assert py.pop_one("q") == "p2"
    assert py.pop_one("q") == "p1"
    # jobwire completes a job qless-py popped (for the worker that holds it).
    theirs = jw.client.get("p2")
    assert theirs is not None and theirs.worker == PY_WORKER
    assert theirs.complete() == "complete"
    assert py.view("p2")["state"] == "complete"  # type: ignore[index]
    py.complete("p1")
    assert py.pop_one("q") is None
    world.agree()


@pytest.mark.parametrize("first,second", [("py", "jw"), ("jw", "py")])
def test_b_re_recurring_keeps_the_counter(world: World, first: str, second: str) -> None:
    a, b = world.binding(first), world.binding(second)
    t0 = world.clock.now
    a.recur("rq", "rec", 60)
    assert b.pop("rq") == ["rec-1"]
    world.clock.now = t0 + 55
    a.recur("rq", "rec", 60)
    world.clock.now = t0 + 56
    assert a.pop("rq") == ["rec-2"]
    assert b.complete("rec-1") == "complete"
    jobs = world.agree()
    assert _whats(jobs["rec-1"]) == ["put", "popped", "done"]
    assert jobs["rec-2"]["worker"] == a.worker


@pytest.mark.parametrize("putter,popper", [("py", "jw"), ("jw", "py")])
def test_c_wait_time_across_bindings(world: World, putter: str, popper: str) -> None:
    world.binding(putter).put("q", "j1")
    world.clock.tick(5)
    assert world.binding(popper).pop("q") == ["j1"]
    world.agree()
    for binding in (world.py, world.jw):
        wait = binding.stats("q", world.clock.now)["wait"]
        assert (wait["count"], wait["mean"], wait["histogram"][5]) == (1, pytest.approx(5), 1)


def test_d_cancel_of_a_qless_py_job_leaves_no_history(world: World) -> None:
    world.py.put("q", "p1", tags=["t"])
    world.py.pop("q")
    world.py.complete("p1", next="q2")
    assert world.redis.exists("ql:j:p1-history")
    world.jw.cancel("p1")
    assert world.redis.keys("ql:j:p1*") == []
    assert world.redis.zscore("ql:tags", "t") in (None, 0)


def test_e_pop_order_interleaves_by_priority(world: World) -> None:
    py, jw = world.py, world.jw
    py.put("q", "py0", priority=0)
    world.clock.tick()
    jw.put("q", "jw5", priority=5)
    world.clock.tick()
    py.put("q", "py5", priority=5)
    world.clock.tick()
    jw.put("q", "jw0", priority=0)
    world.clock.tick()
    py.put("q", "py-1", priority=-1)
    order = ["jw5", "py5", "py0", "jw0", "py-1"]   # highest first; equals first put first
    assert py.peek("q", 5) == jw.peek("q", 5) == order
    popped = [jw.pop_one("q"), py.pop_one("q"), jw.pop_one("q"), py.pop_one("q"),
              jw.pop_one("q")]
    assert popped == order
    world.agree()


def test_f_tag_counts(world: World) -> None:
    py, jw = world.py, world.jw
    py.put("q", "a", tags=["x"])
    jw.put("q", "b", tags=["x", "y"])
    py.put("q", "c", tags=["y"])
    jw.tag("c", "x")

    def counts() -> dict[str, float]:
        return {tag: score for tag, score in world.redis.zrange("ql:tags", 0, -1,
                                                                 withscores=True)}

    assert counts() == {"x": 3, "y": 2}
    assert py.client.tags() == ["x", "y"]   # `tag top`: tags on 2 jobs or more, most first
    jw.cancel("a")
    py.untag("b", "y")
    assert counts() == {"x": 2, "y": 1}
    assert py.client.tags() == ["x"]
    world.agree()


@pytest.mark.parametrize("holder,taker", [("py", "jw"), ("jw", "py")])
def test_g_expired_lock_repop_after_grace(world: World, holder: str, taker: str) -> None:
    a, b = world.binding(holder), world.binding(taker)
    a.put("q", "j1")
    world.clock.tick(2)
    assert a.pop("q") == ["j1"]
    world.clock.tick(61)                       # the lock expired (heartbeat 60 s)
    assert b.pop("q") == []                    # first the grace period (10 s) ...
    job = world.agree()["j1"]
    assert (job["state"], job["worker"]) == ("running", a.worker)
    world.clock.tick(11)
    assert b.pop("q") == ["j1"]                # ... then the job goes to the other worker
    job = world.agree()["j1"]
    assert job["worker"] == b.worker and job["remaining"] == 4
    assert [(e["what"], e.get("worker")) for e in job["history"]] == [
        ("put", None), ("popped", a.worker), ("timed-out", None), ("popped", b.worker)]
    wait = world.py.stats("q", world.clock.now)["wait"]
    assert wait["count"] == 2                  # the re-pop is a wait sample too
    assert world.py.stats("q", world.clock.now)["retries"] == 1
    with pytest.raises((QlessException, LostLock)):
        a.complete("j1")


def test_history_times_are_whole_seconds(world: World) -> None:
    world.jw.put("q", "j1")
    world.clock.tick(0.5)
    world.py.pop("q")
    job = world.agree()["j1"]
    assert all(event["when"] == math.floor(event["when"]) for event in job["history"])
    assert json.loads(world.redis.lindex("ql:j:j1-history", 0))[1] == "put"
