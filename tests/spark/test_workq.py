"""The workq format against the bundled server (the real one is not packaged): the sink, the
inspect tables, the stream (and its replay after a driver crash), workq_run."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.workq.conftest import WorkqServer
from workq_client import AsyncClient, Client, JobContext, JobState, LeasedJob, TimedOut
from workq_client import Worker as WorkqWorker

from ..waiting import wait_until
from .conftest import need_spark
from .helpers import Stream, crash_before_commit

need_spark()
pytestmark = pytest.mark.spark


def write(df: Any, server: WorkqServer, **options: str) -> None:
    writer = df.write.format("workq").option("url", server.url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def drain(server: WorkqServer, name: str) -> list[LeasedJob]:
    """Lease every ready job of ``name`` and complete it."""
    out: list[LeasedJob] = []
    with Client(server.url, timeout=30) as client:
        while True:
            try:
                job = client.lease(name, wait=0)
            except TimedOut:
                return out
            out.append(job)
            client.complete(job.job_id)


async def drain_pipelined(server: WorkqServer, name: str) -> Counter[bytes]:
    """Lease and complete every ready job of ``name`` with 64 callers on one async connection
    (their commands pipelined); return the payloads."""
    payloads: Counter[bytes] = Counter()
    async with AsyncClient(server.url, timeout=30) as client:

        async def lane() -> None:
            while True:
                try:
                    job = await client.lease(name, wait=0)
                except TimedOut:
                    return
                payloads[job.payload] += 1
                await client.complete(job.job_id)

        async with anyio.create_task_group() as tg:
            for _ in range(64):
                tg.start_soon(lane)
    return payloads


@pytest.mark.slow
def test_write_lands_exactly_the_rows_written(
    spark: Any, workq_server: WorkqServer, qname: str
) -> None:
    n = 100_000
    df = spark.range(n).selectExpr("cast(id as string) as payload").repartition(2)
    write(df, workq_server, name=qname)
    with Client(workq_server.url) as client:
        assert client.inspect_queue(qname).ready_len == n
    assert anyio.run(drain_pipelined, workq_server, qname) == Counter(
        str(i).encode() for i in range(n))


def test_row_columns_set_each_jobs_fields(
    spark: Any, workq_server: WorkqServer, qname: str
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(2)]
    rows = [(b"a", ids[0], 5.5, 120.0, 7, 3, None), (b"b", ids[1], None, None, None, None,
                                                      f"{qname}-2")]
    schema = ("payload binary, id string, ttr double, ttl double, priority int, "
              "max_attempts int, name string")
    write(spark.createDataFrame(rows, schema).coalesce(1), workq_server, name=qname, ttr="9")
    with Client(workq_server.url) as client:
        a, b = client.inspect_job(ids[0]), client.inspect_job(ids[1])
    assert (a.name, a.payload, a.ttr, a.ttl, a.priority, a.max_attempts) == (
        qname, b"a", 5.5, 120.0, 7, 3)
    assert (b.name, b.payload, b.ttr, b.priority, b.max_attempts) == (
        f"{qname}-2", b"b", 9.0, 0, 0)


@pytest.mark.parametrize(
    ("row", "column", "reason"),
    [
        ((b"x", "bad name", None), "name", "outside a-zA-Z0-9_.-"),
        ((b"x", None, "not-a-uuid"), "id", "not a UUID"),
        ((b"x" * (1024 * 1024 + 1), None, None), "payload", "over the server's limit"),
    ],
    ids=["invalid-name", "invalid-id", "oversized-payload"],
)
def test_bad_row_fails_the_task_naming_it(
    spark: Any, workq_server: WorkqServer, qname: str, row: tuple[Any, ...], column: str,
    reason: str,
) -> None:
    rows = [(b"a", None, None), (b"b", None, None), row]
    df = spark.createDataFrame(rows, "payload binary, name string, id string").coalesce(1)
    with pytest.raises(Exception) as info:
        write(df, workq_server, name=qname)
    assert f"BadRow: row 2 of partition 0, column '{column}'" in str(info.value)
    assert reason in str(info.value)
    assert drain(workq_server, qname) == []  # nothing of the row's chunk was sent


def test_rewriting_rows_with_ids_adds_each_job_once(
    spark: Any, workq_server: WorkqServer, qname: str
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(300)]
    df = spark.createDataFrame([(f"p{i}", job_id) for i, job_id in enumerate(ids)],
                               "payload string, id string").coalesce(1)
    write(df.limit(100), workq_server, name=qname)  # a task that failed after 100 rows
    write(df, workq_server, name=qname)  # ... retried: the first 100 are there already
    jobs = drain(workq_server, qname)
    assert sorted(j.job_id for j in jobs) == sorted(ids)


def test_duplicate_id_is_refused_naming_the_row_with_on_duplicate_fail(
    spark: Any, workq_server: WorkqServer, qname: str
) -> None:
    dup = str(uuid.uuid4())
    df = spark.createDataFrame([(b"a", dup), (b"b", dup)], "payload binary, id string")
    with pytest.raises(Exception) as info:
        write(df.coalesce(1), workq_server, name=qname, onDuplicate="fail")
    assert "RowRefused: row 1 of partition 0: the server refused it: DuplicateJob" in str(
        info.value)
    assert [j.payload for j in drain(workq_server, qname)] == [b"a"]


def test_tables_match_the_servers_own_answers(
    spark: Any, workq_server: WorkqServer, qname: str
) -> None:
    df = spark.createDataFrame([(f"p{i}", i) for i in range(150)], "payload string, priority int")
    write(df.coalesce(1), workq_server, name=qname)

    def table(which: str, **options: str) -> list[Any]:
        reader = spark.read.format("workq").option("url", workq_server.url).option("table", which)
        for key, value in options.items():
            reader = reader.option(key, value)
        return list(reader.load().collect())

    queues, jobs = table("queues"), table("jobs", name=qname)
    with Client(workq_server.url) as client:
        own_queues = client.inspect_queues(0, 100)
        own_jobs = client.inspect_jobs(qname, 0, 100) + client.inspect_jobs(qname, 100, 100)
    assert {(q["name"], q["ready_len"], q["scheduled_len"]) for q in queues} >= {
        (q.name, q.ready_len, q.scheduled_len) for q in own_queues}
    assert (qname, 150, 0) in {(q["name"], q["ready_len"], q["scheduled_len"]) for q in queues}
    assert [(j["id"], j["payload"], j["priority"], j["state"]) for j in jobs] == [
        (j.job_id, j.payload, j.priority, JobState(j.state).name.lower()) for j in own_jobs]
    assert len(jobs) == 150


def test_workq_run_puts_results_and_per_row_errors_in_columns(
    spark: Any, workq_server: WorkqServer, qname: str
) -> None:
    from jobwire.spark import workq_run

    def handle(job: JobContext) -> bytes:
        if job.payload == b"boom":
            raise ValueError("no boom")
        return job.payload.upper()

    worker = WorkqWorker(workq_server.url, [qname], concurrency=8)
    thread = threading.Thread(target=worker.run, args=(handle,), daemon=True)
    thread.start()
    inputs = [f"v{i}" for i in range(100)] + ["boom", None]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(inputs)], "n int, v string")
    try:
        rows = workq_run(df.repartition(2), qname, "v", url=workq_server.url, concurrency=4,
                         ttr=10, wait=10).collect()
    finally:
        worker.stop()
        thread.join(10)
    by_n = {r["n"]: r for r in rows}
    assert len(by_n) == len(inputs)
    for i in range(100):
        assert (by_n[i]["result"], by_n[i]["error"]) == (f"V{i}".encode(), None)
    assert by_n[100]["result"] is None and by_n[100]["error"].startswith("RunFailed")
    assert "no boom" in by_n[100]["error"]
    assert (by_n[101]["result"], by_n[101]["error"]) == (None, "input is null")


@pytest.mark.slow
def test_stream_delivers_every_job_once_and_completes_it_on_commit(
    spark: Any, workq_server: WorkqServer, qname: str, tmp_path: Path
) -> None:
    n = 300
    with Client(workq_server.url) as client:
        ids = client.add_many(qname, [f"job-{i}".encode() for i in range(n)])
    options = {"url": workq_server.url, "name": qname, "maxJobsPerBatch": "100"}
    with Stream(spark, "workq", options, tmp_path) as stream:
        wait_until(lambda: stream.count() >= n, 60, f"{n} rows")

        def completed() -> bool:
            with Client(workq_server.url) as client:
                return all(client.inspect_job(i).state == JobState.COMPLETED for i in ids)

        wait_until(completed, 30, "every job completed")
        rows = list(stream.rows)
    assert sorted(r["id"] for r in rows) == sorted(ids)
    assert {r["name"] for r in rows} == {qname}
    assert sorted(r["payload"] for r in rows) == sorted(f"job-{i}".encode() for i in range(n))


@pytest.mark.slow
def test_stream_gives_the_jobs_again_after_a_driver_crash_before_commit(
    spark: Any, workq_server: WorkqServer, qname: str, tmp_path: Path
) -> None:
    n = 50
    with Client(workq_server.url) as client:
        ids = client.add_many(qname, [f"job-{i}".encode() for i in range(n)], ttr=2)
    options = {"url": workq_server.url, "name": qname}
    checkpoint = tmp_path / "checkpoint"
    held = crash_before_commit("workq", options, checkpoint, tmp_path)
    assert sorted(held) == sorted(ids)
    # The crashed driver's leases run out after the TTR (2 s); then the new query leases again.
    with Stream(spark, "workq", options, checkpoint) as stream:
        wait_until(lambda: stream.count() >= n, 60, f"{n} rows again")
        time.sleep(1)  # a duplicate would show up here
        rows = list(stream.rows)
    assert sorted(r["id"] for r in rows) == sorted(ids)
    with Client(workq_server.url) as client:
        jobs = [client.inspect_job(i) for i in ids]
    assert {(j.attempts, j.state) for j in jobs} == {(2, JobState.COMPLETED)}
