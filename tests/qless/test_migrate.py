"""``qless_client.migrate`` on a Redis filled by jobwire's first qless script.

The first script (``tests/qless/data/qless_v0.lua``: jobwire's own previous code, kept as a
fixture) wrote the qless-core *document*'s layout: a ``history`` hash field, no ``time`` field,
work scores ``priority + t/1e10`` popped lowest first, worker sets scored by activity, a 287-bucket
histogram, no ``ql:tags``, ``heartbeat-<queue>``. It is driven here the way it was called:
``EVALSHA sha <numkeys> <keys...> <command> <now> <args...>`` with exactly the KEYS it wants.
After ``migrate``, qless-py 0.11.4 (qless-core's script) and jobwire (our script) both read and
act on every job.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qless_client import Client
from qless_client._redis import Redis
from qless_client.migrate import MigrationReport, migrate
from tests.cli.conftest import ok, run_cli
from tests.qless.conftest import RedisServer
from tests.qless.qlesspy import QlessException, QlessPy

V0 = (Path(__file__).parent / "data" / "qless_v0.lua").read_bytes()
DAY = 86400
GLOBAL = ["ql:config", "ql:queues", "ql:workers", "ql:failures", "ql:completed", "ql:tracked"]


def J(jid: str) -> list[str]:
    return [f"ql:j:{jid}", f"ql:j:{jid}-dependencies", f"ql:j:{jid}-dependents"]


def Q(queue: str) -> list[str]:
    return [f"ql:q:{queue}-{part}" for part in ("work", "locks", "scheduled", "depends", "recur")]


def S(queue: str, t: float) -> list[str]:
    day = math.floor(t) - math.floor(t) % DAY
    return [f"ql:s:{kind}:{day}:{queue}" for kind in ("wait", "run", "stats")]


def W(worker: str) -> list[str]:
    return [f"ql:w:{worker}:jobs"]


class V0Script:
    """The first script, called as ``qless_client/_scripts.py`` called it (KEYS included)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.sha = redis.load_script(V0)

    def call(self, command: str, now: float, keys: list[str], *args: object) -> Any:
        return self.redis.evalsha(self.sha, [*GLOBAL, *keys],
                                  [command, f"{now:.3f}", *(str(a) for a in args)])

    def put(self, now: float, queue: str, jid: str, priority: int = 0,
            tags: tuple[str, ...] = ()) -> None:
        keys = [*J(jid), *Q(queue), *(f"ql:t:{t}" for t in tags)]
        self.call("put", now, keys, queue, jid, "app.Job", json.dumps({"jid": jid}), 0,
                  "priority", priority, "tags", json.dumps(list(tags)))

    def pop(self, now: float, queue: str, worker: str, count: int = 1) -> list[str]:
        reply = self.call("pop", now, [*Q(queue), *W(worker), *S(queue, now)], queue, worker,
                          count)
        return [job["jid"] for job in json.loads(reply)]

    def complete(self, now: float, jid: str, worker: str, queue: str,
                 next: str | None = None) -> None:
        keys = [*J(jid), *Q(queue), *W(worker), *S(queue, now)]
        args: list[object] = [jid, worker, queue, "{}"]
        if next:
            keys += Q(next)
            args += ["next", next]
        self.call("complete", now, keys, *args)

    def fail(self, now: float, jid: str, worker: str, group: str) -> None:
        self.call("fail", now, [*J(jid), f"ql:f:{group}"], jid, worker, group, "it broke")

    def retry(self, now: float, jid: str, queue: str, worker: str) -> None:
        keys = [*J(jid), *Q(queue), *W(worker), f"ql:f:failed-retries-{queue}", *S(queue, now)]
        self.call("retry", now, keys, jid, queue, worker)

    def heartbeat(self, now: float, jid: str, worker: str) -> None:
        self.call("heartbeat", now, [*J(jid), *W(worker)], jid, worker)

    def tag(self, now: float, jid: str, *tags: str) -> None:
        self.call("tag", now, [*J(jid), *(f"ql:t:{t}" for t in tags)], "add", jid, *tags)

    def recur(self, now: float, queue: str, jid: str, interval: float) -> None:
        self.call("recur", now, [*Q(queue), f"ql:r:{jid}"], queue, jid, "app.Recur", "{}",
                  "interval", interval, 0)

    def config_set(self, now: float, option: str, value: object) -> None:
        self.call("config.set", now, [], option, value)


# The old data's clock: yesterday 01:00 UTC (all of it on one day, whatever time the test runs).
NOW = time.time()
T0 = NOW - NOW % DAY - DAY + 3600
LONG = 2 * DAY + 3 * 3600  # a wait in the old `h51` bucket (qless-core: `d2`)
MEDIUM = 90 * 60 + 7  # a wait in the old `q6` bucket (qless-core: `h1`)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    from tests.qless.conftest import start_redis

    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def old(server: RedisServer) -> Iterator[Redis]:
    """A Redis filled by the first script (what each job is, in the comments)."""
    with Redis.from_url(server.url) as redis:
        v0 = V0Script(redis)
        v0.config_set(T0, "heartbeat-w", 4 * DAY)          # r1's lock outlives the test
        # q: waiting jobs; the old script pops c (-3), a, d (0, put order), b (5).
        v0.put(T0, "q", "a", 0, ("t1",))
        v0.put(T0 + 1, "q", "b", 5, ("t1", "t2"))
        v0.put(T0 + 2, "q", "c", -3)
        v0.put(T0 + 3, "q", "d", 0)
        v0.tag(T0 + 4, "c", "t2")
        # w: every state a worker leaves a job in.
        for i, jid in enumerate(("r1", "x1", "x2", "x3", "x4")):
            v0.put(T0 + 10 + i, "w", jid)
        assert v0.pop(T0 + 20, "w", "old-w", 5) == ["r1", "x1", "x2", "x3", "x4"]
        v0.fail(T0 + 30, "x1", "old-w", "boom")
        v0.complete(T0 + 40, "x2", "old-w", "w")
        v0.complete(T0 + 50, "x3", "old-w", "w", next="q2")
        v0.retry(T0 + 60, "x4", "w", "old-w")
        v0.heartbeat(T0 + 70, "r1", "old-w")
        # long: waits of 90 minutes and of 2 days 3 hours (old buckets q6 and h51).
        v0.put(T0 - MEDIUM, "long", "m")
        v0.put(T0 - LONG, "long", "l")
        assert v0.pop(T0, "long", "old-w", 2) == ["l", "m"]
        v0.complete(T0 + 1, "l", "old-w", "long")
        v0.complete(T0 + 1, "m", "old-w", "long")
        # rq: a recurring template, re-recurred after its first job (which reset its count).
        v0.recur(T0, "rq", "rec", 10 * DAY)
        assert v0.pop(T0 + 1, "rq", "old-w") == ["rec-1"]
        v0.complete(T0 + 2, "rec-1", "old-w", "rq")
        v0.recur(T0 + 55, "rq", "rec", 10 * DAY)
        # mixed: qless-py puts p1 and p2 (its clock); the old script pops one (p2: it reads
        # qless-core's scores backwards) and retries it.
        py = QlessPy(server.url, "py-w")
        try:
            py.queues["mixed"].put("app.Job", {}, jid="p1")
            py.queues["mixed"].put("app.Job", {}, jid="p2")
        finally:
            py.close()
        now = time.time() + 1
        assert v0.pop(now, "mixed", "old-w") == ["p2"]
        v0.retry(now + 1, "p2", "mixed", "old-w")
        yield redis


def _jobs(redis: Redis) -> list[str]:
    keys = redis.execute("KEYS", "ql:j:*")
    return sorted(k.decode()[5:] for k in keys if redis.execute("TYPE", k) == "hash")


def test_migrate_moves_every_old_structure(old: Redis, server: RedisServer) -> None:
    py = QlessPy(server.url, "py-w")
    try:
        # The old script's stage without `put` (a job qless-py put) breaks qless-core's reads.
        with pytest.raises(QlessException, match="bad argument #1 to 'floor'"):
            py.jobs["p2"]
    finally:
        py.close()
    before = _jobs(old)
    assert old.execute("HEXISTS", "ql:j:x2", "history") == 1
    assert old.execute("EXISTS", "ql:tags") == 0

    assert migrate(old, dry_run=True) == EXPECTED
    assert old.execute("HEXISTS", "ql:j:x2", "history") == 1  # a dry run writes nothing
    assert migrate(old) == EXPECTED
    assert migrate(old) == MigrationReport(jobs=len(before))  # idempotent
    assert _jobs(old) == before

    # The history list, as qless-core writes it.
    assert [json.loads(e) for e in old.execute("LRANGE", "ql:j:x1-history", 0, -1)] == [
        [math.floor(T0 + 11), "put", {"q": "w"}],
        [math.floor(T0 + 20), "popped", {"worker": "old-w"}],
        [math.floor(T0 + 30), "failed"],
    ]
    assert old.execute("HEXISTS", "ql:j:x1", "history") == 0
    assert float(old.execute("HGET", "ql:j:r1", "time")) == pytest.approx(T0 + 20)
    assert float(old.execute("HGET", "ql:j:x4", "time")) == pytest.approx(T0 + 60)
    assert old.execute("HGET", "ql:config", "w-heartbeat") == str(4 * DAY).encode()
    assert old.execute("HEXISTS", "ql:config", "heartbeat-w") == 0
    assert old.execute("HGET", "ql:r:rec", "count") == b"1"
    assert float(old.execute("ZSCORE", "ql:w:old-w:jobs", "r1")) == pytest.approx(
        T0 + 70 + 4 * DAY)
    day = T0 - T0 % DAY
    wait = {k.decode(): int(v) for k, v in zip(*[iter(old.execute(
        "HGETALL", f"ql:s:wait:{day:.0f}:long"))] * 2, strict=True)
        if k.decode() not in ("total", "mean", "vk")}
    assert wait == {"h1": 1, "d2": 1}


EXPECTED = MigrationReport(
    jobs=14,           # a b c d, r1 x1 x2 x3 x4, m l, rec-1, p1 p2
    histories=13,      # all but p1 (qless-py's own)
    times=13,
    work_scores=7,     # q: a b c d; w: x4; q2: x3; mixed: p2 (p1 is scored as qless-core does)
    worker_scores=1,   # r1
    tag_counts=2,      # t1, t2
    histograms=1,      # long's waits (every other wait and run is under a minute)
    recur_counts=1,
    config=1,
)


def _history(job: Any) -> list[dict[str, Any]]:
    return [dict(event) for event in job.history]


def test_qless_py_reads_and_acts_on_migrated_jobs(old: Redis, server: RedisServer) -> None:
    migrate(server.url)
    py = QlessPy(server.url, "old-w")
    try:
        for jid in _jobs(old):
            assert py.jobs[jid] is not None, jid   # qless-core's get converts no history
        assert _history(py.jobs["x3"]) == [
            {"what": "put", "when": math.floor(T0 + 13), "q": "w"},
            {"what": "popped", "when": math.floor(T0 + 20), "worker": "old-w"},
            {"what": "done", "when": math.floor(T0 + 50)},
            {"what": "put", "when": math.floor(T0 + 50), "q": "q2"},
        ]
        # Pop order: each job kept its priority number; qless-core pops the highest first.
        assert [j.jid for j in py.queues["q"].peek(4)] == ["b", "a", "d", "c"]
        assert sorted(py.tags()) == ["t1", "t2"]   # `tag top`: tags on 2 jobs or more
        # The job the old worker still holds: its lock and its run time carry over.
        assert py.jobs["r1"].worker_name == "old-w"
        assert py.jobs["r1"].complete() == "complete"
        run = py.queues["w"].stats(repr(time.time()))["run"]
        assert run["count"] == 1
        assert run["mean"] == pytest.approx(time.time() - T0 - 20, abs=60)
        # The old day's waits, in qless-core's buckets.
        wait = py.queues["long"].stats(repr(T0))["wait"]
        assert wait["count"] == 2
        histogram = wait["histogram"]
        assert histogram[60 + 59] == 1 and histogram[60 + 59 + 23 + 1] == 1   # h1, d2
        assert sum(histogram) == 2
        # A waiting job goes on.
        popped = py.queues["q"].pop()
        assert popped.jid == "b" and popped.complete() == "complete"
        # The recurring template goes on from its highest job: rec-2, not rec-1 again.
        assert [j.jid for j in py.queues["rq"].pop(1)] == ["rec-2"]
        assert py.jobs["rec-1"].state == "complete"
        assert py.unfail("boom", "w") == 1
        assert [j.jid for j in py.queues["w"].pop(2)] == ["x4", "x1"]
        # qless-py's own job the old script retried: readable, and behind p1 (retried later).
        assert [e["what"] for e in _history(py.jobs["p2"])] == ["put", "popped", "put"]
        assert [j.jid for j in py.queues["mixed"].pop(2)] == ["p1", "p2"]
    finally:
        py.close()


def test_jobwire_reads_and_acts_on_migrated_jobs(old: Redis, server: RedisServer) -> None:
    migrate(server.url)
    py = QlessPy(server.url, "old-w")
    ours: Client[Any] = Client(server.url, worker_name="jw")
    try:
        for jid in _jobs(old):
            mine, theirs = ours.get(jid), py.jobs[jid]
            assert mine is not None and theirs is not None, jid
            assert (mine.state, mine.priority, mine.tags) == (
                theirs.state, theirs.priority, theirs.tags), jid
            assert _history(mine) == _history(theirs), jid
        assert [j.jid for j in ours.queue("q").peek(4)] == ["b", "a", "d", "c"]
        # jobwire pops q's highest, qless-py the next; each completes its own.
        job = ours.queue("q").pop()
        assert job is not None and job.jid == "b"
        job.complete()
        popped = py.queues["q"].pop()
        assert popped.jid == "a" and popped.complete() == "complete"
        assert ours.get("r1").complete() == "complete"  # the old worker's lock, by name
        recurring = ours.queue("rq").pop()
        assert recurring is not None and recurring.jid == "rec-2"
        assert ours.unfail("w", "boom") == 1
        assert [j.jid for j in py.queues["w"].pop(2)] == ["x4", "x1"]
        [moved] = ours.queue("q2").pop(1)
        assert moved.jid == "x3"
        moved.complete()
        assert py.jobs["x3"].state == "complete"
        assert [j.jid for j in ours.queue("mixed").pop(2)] == ["p1", "p2"]
        stats = ours.queue("long").stats(T0)
        assert stats["wait"]["count"] == 2 and sum(stats["wait"]["histogram"]) == 2
    finally:
        py.close()
        ours.close()


def test_cli_migrate(old: Redis, server: RedisServer) -> None:
    dry = json.loads(ok(run_cli("qless", "migrate", "--url", server.url, "--dry-run", "--json")))
    assert dry["histories"] == EXPECTED.histories
    assert old.execute("HEXISTS", "ql:j:x2", "history") == 1
    assert "histories" in ok(run_cli("qless", "migrate", "--url", server.url))
    assert old.execute("HEXISTS", "ql:j:x2", "history") == 0
    again = json.loads(ok(run_cli("qless", "migrate", "--url", server.url, "--json")))
    assert again["histories"] == 0 and again["jobs"] == EXPECTED.jobs


def test_migrate_refuses_other_targets() -> None:
    from jobwire.errors import LocalProtocolError

    with pytest.raises(LocalProtocolError, match="Client, a Redis or a URL"):
        migrate(42)  # type: ignore[arg-type]
