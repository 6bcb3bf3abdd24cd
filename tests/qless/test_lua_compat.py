"""qless-py 0.11.4 (the last qless client for Python on PyPI) and our script on one Redis.

* Its own ``qless.lua`` (qless-core) does not run on Redis >= 6.2.7: it defines
  ``table.extend``, and Redis makes the standard tables read-only. With that one function made
  local (in memory, tests/qless/differential.py) it runs unchanged.
* Through qless-py's own API, with that script, it reads and finishes the jobs our script wrote,
  and our script reads and finishes what it wrote. (Like tests/qless/test_lua.py, each test
  also runs with qless-core in place of our script: the expectations are qless-core's.)
  tests/qless/test_interop.py goes through every command both ways;
  tests/qless/test_differential.py compares the two scripts call by call.

Skipped when ``qless-py`` is not installed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from qless_client._redis import Redis
from qless_client.errors import RedisError
from tests.qless.conftest import RedisServer
from tests.qless.differential import their_source
from tests.qless.test_lua import DB, Script, pop_jids, put, q

__all__ = ["q"]  # the fixture

qless: Any = pytest.importorskip("qless", reason="qless-py is not installed")


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[Any]:
    """qless-py on the same database as ``q``, running qless-core with its Redis 7 fix."""
    client = qless.Client(f"{redis_server.url}/{DB}", hostname="py-worker")
    client._lua = client.redis.register_script(their_source())
    yield client
    client.redis.close()


def test_qless_cores_own_script_fails_on_this_redis(redis_server: RedisServer) -> None:
    source = resources.files("qless").joinpath("qless-core/qless.lua").read_text()
    with Redis.from_url(f"{redis_server.url}/{DB}") as conn:
        sha = conn.load_script(source)
        with pytest.raises(RedisError, match="Attempt to modify a readonly table"):
            conn.evalsha(sha, [], ["config.get", str(now())])


def now() -> float:
    """qless-py calls its script with its own clock: so do the calls made here."""
    return round(time.time(), 3)


def test_qless_py_runs_the_jobs_the_script_put(q: Script, client: Any) -> None:
    put(q, "j1", data='{"a": 1}', tags=["t1"], priority=3, now=now())
    put(q, "j2", now=now())
    job = client.jobs["j1"]
    assert (job.klass_name, job.data, job.tags, job.state, job.queue_name, job.priority) == (
        "app.Job", {"a": 1}, ["t1"], "waiting", "q", 3)
    assert [h["what"] for h in job.history] == ["put"]
    assert [j.jid for j in client.queues["q"].peek(2)] == ["j1", "j2"]   # priority 3 first
    popped = client.queues["q"].pop()
    assert popped.jid == "j1" and popped.complete() == "complete"
    mine = q("get", now(), "j1")
    assert (mine["state"], mine["queue"]) == ("complete", "")
    assert [h["what"] for h in mine["history"]] == ["put", "popped", "done"]
    assert client.queues.counts[0]["waiting"] == 1


def test_the_script_runs_the_jobs_qless_py_put(q: Script, client: Any) -> None:
    jid = client.queues["q"].put("app.Job", {"b": 2}, jid="p1", tags=["t"], retries=2)
    assert pop_jids(q, now=now()) == [jid]
    assert q("retry", now(), jid, "q", "w1") == 1
    assert pop_jids(q, now=now()) == [jid]
    assert q("complete", now(), jid, "w1", "q", "{}") == "complete"
    job = client.jobs[jid]
    assert (job.state, job.retries_left, job.tags) == ("complete", 2, ["t"])   # reset
    assert [h["what"] for h in job.history] == ["put", "popped", "popped", "done"]
    assert client.queues["q"].pop() is None
