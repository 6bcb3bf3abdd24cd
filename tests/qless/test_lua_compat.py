"""Compatibility with qless-py 0.11.4 (the last qless client for Python on PyPI).

* Its own ``qless.lua`` does not run on Redis >= 6.2.7: it defines ``table.extend``, and Redis
  makes the standard tables read-only.
* With that one definition made local (done here, in memory, to its packaged file), its read
  paths see the jobs our script wrote: class, data, tags, state, queue, priority, history,
  queue counts, failures, scheduled jobs.

Skipped when ``qless-py`` is not installed.
"""

from __future__ import annotations

import pkgutil
import time
from typing import Any

import pytest

from qless_client import _scripts as s
from qless_client._redis import Redis
from qless_client.errors import RedisError
from tests.qless.conftest import RedisServer
from tests.qless.test_lua import DB, T0, pop_jids, put, r, run

__all__ = ["r"]  # the fixture

qless: Any = pytest.importorskip("qless", reason="qless-py is not installed")


def _their_lua() -> str:
    data = pkgutil.get_data("qless", "qless-core/qless.lua")
    assert data is not None
    return data.decode()


def test_qless_py_lua_fails_on_this_redis(r: Redis) -> None:
    sha = r.load_script(_their_lua())
    with pytest.raises(RedisError, match="Attempt to modify a readonly table"):
        r.evalsha(sha, [], ["config.get", str(T0)])


def test_qless_py_reads_the_jobs_our_script_wrote(r: Redis, redis_server: RedisServer) -> None:
    now = round(time.time(), 3)                    # qless-py calls its script with its clock
    put(r, "j1", data='{"a": 1}', tags=["t1"], priority=3, now=now)
    put(r, "j2", delay=3600, now=now)
    put(r, "j3", now=now)
    assert pop_jids(r, now=now) == ["j3"]           # priority 0 before 3
    run(r, s.fail(now, "j3", "w1", "boom", "it broke"))

    patched = _their_lua().replace(
        "function table.extend(self, other)", "local function table_extend(self, other)"
    ).replace("table.extend(", "table_extend(")
    client = qless.Client(f"{redis_server.url}/{DB}")
    client._lua = client.redis.register_script(patched)
    try:
        job = client.jobs["j1"]
        assert (job.klass_name, job.data, job.tags, job.state, job.queue_name, job.priority) == (
            "app.Job", {"a": 1}, ["t1"], "waiting", "q", 3)
        assert job.original_retries == 5 and job.retries_left == 5
        # Its history reader converts the document's history format to its own events.
        assert job.history == [{"what": "put", "when": int(now), "q": "q"}]
        [counts] = client.queues.counts
        assert (counts["name"], counts["waiting"], counts["scheduled"], counts["running"]) == (
            "q", 1, 1, 0)
        assert client.jobs.failed() == {"boom": 1}
        failed = client.jobs.failed("boom")
        assert failed["total"] == 1 and failed["jobs"][0].jid == "j3"
        assert client.queues["q"].jobs.scheduled() == ["j2"]
        # A job its get() has read has lost its `history` field: qless-core moved it to its
        # own list ql:j:<jid>-history, which this script does not read.
        assert run(r, s.get(now, "j1"))["history"] == []  # type: ignore[index]
        assert r.execute("LLEN", "ql:j:j1-history") == 1
    finally:
        client.redis.close()


def test_qless_py_pops_in_the_opposite_priority_order(r: Redis, redis_server: RedisServer) -> None:
    """qless-core (0.10 on) pops the *highest* priority first, and among equals the last put;
    the document (and this script) pops the lowest first, equals in the order put."""
    now = round(time.time(), 3)
    put(r, "lo", priority=0, now=now)
    put(r, "hi", priority=3, now=now + 0.001)
    put(r, "lo2", priority=0, now=now + 0.002)
    assert [j["jid"] for j in run(r, s.peek(now, "q", 3))] == ["lo", "lo2", "hi"]
    patched = _their_lua().replace(
        "function table.extend(self, other)", "local function table_extend(self, other)"
    ).replace("table.extend(", "table_extend(")
    client = qless.Client(f"{redis_server.url}/{DB}")
    client._lua = client.redis.register_script(patched)
    client.worker_name = "py-worker"
    try:
        assert [j.jid for j in client.queues["q"].peek(3)] == ["hi", "lo2", "lo"]
        job = client.queues["q"].pop()
        assert job.complete() == "complete"
        # What it wrote, this script reads.
        mine = run(r, s.get(now, job.jid))
        assert mine is not None and (mine["state"], mine["queue"]) == ("complete", None)
    finally:
        client.redis.close()
