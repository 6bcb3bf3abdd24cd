"""The qless format against a real redis-server: the sink, the tables (checked against the
qless client's own answers on the same Redis), the stream (its heartbeats, and its replay after
a driver crash)."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from qless_client import Client, Job
from tests.qless.conftest import RedisServer

from ..waiting import wait_until
from .conftest import need_spark
from .helpers import Stream, crash_before_commit

need_spark()
pytestmark = pytest.mark.spark


@pytest.fixture
def queue() -> str:
    """A queue name no other test uses."""
    return f"spark-{uuid.uuid4().hex[:10]}"


def write(df: Any, server: RedisServer, **options: str) -> None:
    writer = df.write.format("qless").option("url", server.url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def table(spark: Any, server: RedisServer, which: str, **options: str) -> list[Any]:
    reader = spark.read.format("qless").option("url", server.url).option("table", which)
    for key, value in options.items():
        reader = reader.option(key, value)
    return list(reader.load().collect())


def waiting_jids(client: Client, queue: str) -> list[str]:
    """The waiting jobs of ``queue`` (qless-core's ``jobs`` lists none: ``peek``)."""
    return [job.jid for job in client.queue(queue).peek(1_000_000) if job.state == "waiting"]


def waiting_data(client: Client, queue: str) -> list[str]:
    """The data text of every waiting job of ``queue`` (read with plain HGETs)."""
    jids = waiting_jids(client, queue)
    if not jids:
        return []
    replies = client.redis.pipeline([("HGET", f"ql:j:{jid}", "data") for jid in jids])
    return [r.decode() for r in replies]


# -- sink ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_write_100k_rows_lands_exactly_those_rows(
    spark: Any, redis_server: RedisServer, queue: str
) -> None:
    n = 100_000
    qa, qb = f"{queue}-a", f"{queue}-b"
    df = spark.range(n).selectExpr(
        "to_json(named_struct('n', id)) as data",
        f"case when id % 3 = 0 then '{qa}' else null end as queue",
    ).repartition(2)
    write(df, redis_server, queue=qb, klass="app.Count")
    with Client(redis_server.url) as client:
        counts = {q: client.queue(q).counts() for q in (qa, qb)}
        data = waiting_data(client, qa) + waiting_data(client, qb)
        a_data = waiting_data(client, qa)
    assert [counts[q]["waiting"] for q in (qa, qb)] == [(n + 2) // 3, n - (n + 2) // 3]
    assert Counter(data) == Counter(json.dumps({"n": i}, separators=(",", ":"))
                                    for i in range(n))
    assert {json.loads(d)["n"] % 3 for d in a_data} == {0}


def test_row_columns_and_options_set_each_jobs_fields(
    spark: Any, redis_server: RedisServer, queue: str
) -> None:
    other = f"{queue}-other"
    rows = [
        ('{"a": 1}', "j-a", None, None, 7, ["x", "y"], None, 2, None),
        ('["b"]', "j-b", other, "app.B", None, None, 30.5, None, None),
        ("3", "j-c", None, None, None, [], None, None, ["j-a"]),
    ]
    schema = ("data string, jid string, queue string, klass string, priority int, "
              "tags array<string>, delay double, retries int, depends array<string>")
    df = spark.createDataFrame(rows, schema).coalesce(1)
    write(df, redis_server, queue=queue, klass="app.A", priority="-3", retries="9", tags="t1,t2")
    with Client(redis_server.url) as client:
        a, b, c = (client.get(jid) for jid in ("j-a", "j-b", "j-c"))
    assert a is not None and b is not None and c is not None
    assert (a.queue, a.klass, a.data, a.priority, a.tags, a.retries, a.state) == (
        queue, "app.A", {"a": 1}, 7, ["x", "y"], 2, "waiting")
    assert (b.queue, b.klass, b.data, b.priority, b.tags, b.retries, b.state) == (
        other, "app.B", ["b"], -3, ["t1", "t2"], 9, "scheduled")
    assert (c.queue, c.data, c.tags, c.state, c.dependencies) == (
        queue, 3, [], "depends", ["j-a"])


def test_struct_map_and_array_data_become_json(
    spark: Any, redis_server: RedisServer, queue: str
) -> None:
    df = spark.sql(
        "select named_struct('n', 1, 'm', map('k', 1.5D), 'l', array(1, 2), 'none', "
        "cast(null as string), 't', timestamp'2024-01-02 03:04:05', 'd', date'2024-01-01', "
        "'b', cast('hi' as binary), 'dec', cast(1.25 as decimal(5, 2)), 'mi', map(1, 'x')) "
        "as data, 'j-struct' as jid"
    ).coalesce(1)
    write(df, redis_server, queue=queue, klass="app.S")
    with Client(redis_server.url) as client:
        job = client.get("j-struct")
    assert job is not None
    t = datetime(2024, 1, 2, 3, 4, 5).astimezone(timezone.utc).isoformat()
    assert job.data == {"n": 1, "m": {"k": 1.5}, "l": [1, 2], "none": None, "t": t,
                        "d": "2024-01-01", "b": "aGk=", "dec": 1.25, "mi": {"1": "x"}}


@pytest.mark.parametrize(
    ("bad", "column", "reason"),
    [
        ((None, None, None), "data", "is null"),
        (("{x", None, None), "data", "is not JSON"),
        (("NaN", None, None), "data", "is not JSON"),
        (("{}", " padded", None), "queue", "printable, non-empty and unpadded"),
        (("{}", None, -1.0), "delay", "must be a finite number of seconds >= 0"),
    ],
    ids=["missing-data", "non-json", "nan", "invalid-queue", "negative-delay"],
)
def test_bad_row_fails_the_task_naming_it_and_sends_nothing_of_its_window(
    spark: Any, redis_server: RedisServer, queue: str, bad: tuple[Any, ...], column: str,
    reason: str,
) -> None:
    rows: list[tuple[Any, ...]] = [(f'{{"i": {i}}}', None, None) for i in range(10)]
    rows[6] = bad
    df = spark.createDataFrame(rows, "data string, queue string, delay double").coalesce(1)
    with pytest.raises(Exception) as info:
        write(df, redis_server, queue=queue, klass="app.K", window="4")
    text = str(info.value)
    assert f"BadRow: row 6 of partition 0, column '{column}'" in text
    assert reason in text
    # The first window (rows 0-3) was sent and answered; nothing of the second (rows 4-7).
    with Client(redis_server.url) as client:
        assert sorted(waiting_data(client, queue)) == [f'{{"i": {i}}}' for i in range(4)]
        assert all(q["name"] != " padded" for q in client.queues())


def test_wrong_schema_or_options_fail_on_the_driver(
    spark: Any, redis_server: RedisServer, queue: str
) -> None:
    from jobwire.spark import BadOption

    cases = [
        (spark.createDataFrame([(1,)], "data int"), {"klass": "K"}, "column 'data' must be"),
        (spark.createDataFrame([("{}", 1)], "data string, x int"), {"klass": "K"},
         "unknown column 'x'"),
        (spark.createDataFrame([("{}", 1)], "data string, tags int"), {"klass": "K"},
         "column 'tags' must be array<string>"),
        (spark.createDataFrame([("{}",)], "data string"), {}, "option 'klass': is required"),
        (spark.sql("select named_struct('i', interval 1 day) as data"), {"klass": "K"},
         "no JSON form"),
    ]
    for df, options, reason in cases:
        with pytest.raises(Exception) as info:
            write(df, redis_server, queue=queue, **options)
        assert reason in str(info.value), (reason, str(info.value)[:500])
    with pytest.raises(BadOption):  # the DataSource raises it itself on the driver
        from jobwire.spark._qless import QlessDataSource

        QlessDataSource({"url": redis_server.url, "klass": "K"}).writer(
            spark.createDataFrame([("{}",)], "data string").schema, False)
    with Client(redis_server.url) as client:
        assert client.queue(queue).counts()["waiting"] == 0


def test_rewriting_rows_with_jids_puts_each_job_once(
    spark: Any, redis_server: RedisServer, queue: str
) -> None:
    rows = [(f'{{"i": {i}}}', f"{queue}-{i}") for i in range(300)]
    df = spark.createDataFrame(rows, "data string, jid string").coalesce(1)
    write(df.limit(100), redis_server, queue=queue, klass="K")  # a task that failed midway
    write(df, redis_server, queue=queue, klass="K")  # ... and its retry
    with Client(redis_server.url) as client:
        jids = waiting_jids(client, queue)
    assert sorted(jids) == sorted(jid for _, jid in rows)


# -- tables --------------------------------------------------------------------------------------


def _utc(value: datetime | None) -> datetime | None:
    """A timestamp Spark collected (naive, session time zone) as an aware UTC datetime."""
    return None if value is None else value.astimezone(timezone.utc)


def row_fields(row: Any) -> tuple[Any, ...]:
    return (row["jid"], row["klass"], row["state"], row["queue"], row["worker"],
            row["priority"], _utc(row["expires"]), row["retries"], row["remaining"],
            json.loads(row["data"]), list(row["tags"]), row["tracked"], sorted(row["dependents"]),
            sorted(row["dependencies"]), row["failure_group"], row["failure_message"],
            _utc(row["failure_when"]), row["failure_worker"], json.loads(row["history"]))


def job_fields(job: Job) -> tuple[Any, ...]:
    failure: dict[str, Any] = dict(job.failure or {})
    when = failure.get("when")
    return (job.jid, job.klass, job.state, job.queue, job.worker or None, job.priority,
            job.expires, job.retries, job.remaining, job.data, job.tags, job.tracked,
            sorted(job.dependents), sorted(job.dependencies), failure.get("group"),
            failure.get("message"),
            None if when is None else datetime.fromtimestamp(when, timezone.utc),
            failure.get("worker"), job.history)


def test_tables_match_the_clients_answers(
    spark: Any, redis_server: RedisServer, queue: str
) -> None:
    group = f"{queue}.Error"
    with Client(redis_server.url, worker_name=f"{queue}-worker") as client:
        q = client.queue(queue)
        jids = [q.put("app.Job", {"i": i}, priority=i % 3, tags=[f"t{i % 2}"]) for i in range(8)]
        q.put("app.Later", {"later": True}, delay=300)
        q.put("app.After", None, depends=[jids[-1]])
        q.recur("app.Every", {"r": 1}, interval=3600, offset=3600, jid=f"{queue}-recur")
        popped = q.pop(4)
        popped[0].complete()
        popped[1].fail(group, "it broke")
        popped[2].track()
        gone = q.put("app.Gone", {})
        client.get(gone).track()  # type: ignore[union-attr]
        # What pruning does to an old complete job: its hash goes, its ql:tracked entry stays.
        client.redis.pipeline([("DEL", f"ql:j:{gone}"), ("ZREM", f"ql:q:{queue}-work", gone)])

        def jobs_of(jids: list[str]) -> list[tuple[Any, ...]]:
            found = [client.get(jid) for jid in jids]
            return [job_fields(j) for j in found if j is not None]

        expected = {
            state: jobs_of(q.jobs(state, 0, 1000))
            for state in ("running", "scheduled", "depends")
        }
        expected["waiting"] = jobs_of(waiting_jids(client, queue))  # in pop order
        expected["complete"] = [
            j for j in jobs_of(client.completed(0, 100_000))
            if [e for e in j[-1] if e.get("q")][-1]["q"] == queue]
        expected["failed"] = [
            job_fields(j) for g in client.failed() for j in client.failed_jobs(g, 0, 1000)[1]
            if j.queue == queue]
        own_queues = client.queues()
        own_failed = client.failed()
        own_group = [job_fields(j) for j in client.failed_jobs(group, 0, 1000)[1]]
        tracked_jobs, expired = client.tracked()
        own_tracked = [job_fields(j) for j in tracked_jobs]

    queues = table(spark, redis_server, "queues")
    # Every queue, in the client's order; the counts of this test's queue only (the shared
    # server holds other tests' queues, whose delayed jobs may come due between the reads).
    assert [r["name"] for r in queues] == [c["name"] for c in own_queues]
    assert [tuple(r) for r in queues if r["name"] == queue] == [
        tuple(c[k] for k in ("name", "waiting", "running", "stalled", "scheduled", "depends",
                             "recurring")) for c in own_queues if c["name"] == queue]
    assert (queue, 4, 2, 0, 1, 1, 1) in [tuple(r) for r in queues]
    for state, jobs in expected.items():
        rows = table(spark, redis_server, "jobs", queue=queue, state=state)
        assert [row_fields(r) for r in rows] == jobs, state
        assert jobs, state
    recurring = table(spark, redis_server, "jobs", queue=queue, state="recurring")
    assert [(r["jid"], r["klass"], r["queue"], json.loads(r["data"])) for r in recurring] == [
        (f"{queue}-recur", "app.Every", queue, {"r": 1})]
    assert {r["group"]: r["count"] for r in table(spark, redis_server, "failed")} == own_failed
    assert [row_fields(r) for r in table(spark, redis_server, "failed", group=group)] == own_group
    tracked = table(spark, redis_server, "tracked")
    assert [row_fields(r) for r in tracked if r["state"] is not None] == own_tracked
    assert [r["jid"] for r in tracked if r["state"] is None] == expired
    assert gone in expired and popped[2].jid in [t[0] for t in own_tracked]


def test_table_options_are_checked_on_the_driver(spark: Any, redis_server: RedisServer) -> None:
    for options, reason in [
        ({"table": "nope"}, "option 'table': must be one of"),
        ({"table": "jobs", "state": "lost"}, "option 'state': must be one of"),
        ({"table": "queues", "state": "waiting"}, "option 'state': goes with table 'jobs'"),
        ({"table": "jobs", "url": "redis://host:notaport"}, "option 'url'"),
    ]:
        reader = spark.read.format("qless").option("url", redis_server.url)
        for key, value in options.items():
            reader = reader.option(key, value)
        with pytest.raises(Exception) as info:
            reader.load().collect()
        assert reason in str(info.value), (reason, str(info.value)[:500])


# -- stream --------------------------------------------------------------------------------------


class SlowFirstBatch(Stream):
    """A stream whose first non-empty batch takes ``pause`` seconds in the sink: longer than
    the jobs' lock, so only heartbeats keep them."""

    pause = 2.5
    slept = False

    def _sink(self, batch: Any, batch_id: int) -> None:
        rows = batch.collect()
        if rows and not self.slept:
            self.slept = True
            time.sleep(self.pause)
        with self._lock:
            self.rows.extend(rows)


@pytest.mark.slow
def test_stream_delivers_every_job_once_heartbeating_it_until_commit(
    spark: Any, redis_server: RedisServer, queue: str, tmp_path: Path
) -> None:
    n = 300
    with Client(redis_server.url) as client:
        client.config_set(f"{queue}-heartbeat", 1)  # a 1 s lock: the first batch outlives it
        jids = client.queue(queue).put_many([("app.S", {"i": i}) for i in range(n)])
    options = {"url": redis_server.url, "queue": queue, "maxJobsPerBatch": "100"}
    with SlowFirstBatch(spark, "qless", options, tmp_path) as stream:
        wait_until(lambda: stream.count() >= n, 60, f"{n} rows")

        def completed() -> bool:
            with Client(redis_server.url) as client:
                return client.queue(queue).counts()["running"] == 0 and all(
                    j is not None and j.state == "complete"
                    for j in (client.get(jid) for jid in jids))

        wait_until(completed, 30, "every job completed")
        time.sleep(1)  # a duplicate would show up here
        rows = list(stream.rows)
    assert sorted(r["jid"] for r in rows) == sorted(jids)
    assert sorted(json.loads(r["data"])["i"] for r in rows) == list(range(n))
    assert {(r["queue"], r["klass"], r["remaining"]) for r in rows} == {(queue, "app.S", 5)}
    with Client(redis_server.url) as client:
        jobs = [client.get(jid) for jid in jids]
    # Popped once each (no lock ran out), completed by the stream's worker.
    assert {(j.remaining, tuple(e["what"] for e in j.history))
            for j in jobs if j is not None} == {(5, ("put", "popped", "done"))}


@pytest.mark.slow
def test_stream_gives_the_jobs_again_after_a_driver_crash_before_commit(
    spark: Any, redis_server: RedisServer, queue: str, tmp_path: Path
) -> None:
    n = 50
    with Client(redis_server.url) as client:
        client.config_set(f"{queue}-heartbeat", 1)
        jids = client.queue(queue).put_many([("app.C", {"i": i}) for i in range(n)])
    options = {"url": redis_server.url, "queue": queue}
    checkpoint = tmp_path / "checkpoint"
    held = crash_before_commit("qless", options, checkpoint, tmp_path)
    assert sorted(held) == sorted(jids)
    # The dead driver's heartbeats stopped: the locks run out after 1 s, the next pop takes the
    # jobs again (one retry each).
    with Stream(spark, "qless", options, checkpoint) as stream:
        wait_until(lambda: stream.count() >= n, 60, f"{n} rows again")

        def completed() -> bool:
            with Client(redis_server.url) as client:
                return all(j is not None and j.state == "complete"
                           for j in (client.get(jid) for jid in jids))

        wait_until(completed, 30, "every job completed")
        time.sleep(1)  # a duplicate would show up here
        rows = list(stream.rows)
    assert sorted(r["jid"] for r in rows) == sorted(jids)
    assert {r["remaining"] for r in rows} == {4}
    with Client(redis_server.url) as client:
        jobs = [client.get(jid) for jid in jids]
    # qless-core's complete gives a job its retries back; its history shows the lost lock
    assert {(j.state, j.remaining, tuple(e["what"] for e in j.history))
            for j in jobs if j is not None} == {
        ("complete", 5, ("put", "popped", "timed-out", "popped", "done"))}
