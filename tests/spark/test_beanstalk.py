"""The beanstalk format against the bundled server and the real beanstalkd: the sink, the
tables, the stream (and its replay after a driver crash)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from beanstalk_client import Client
from tests.conftest import BeanstalkServer

from ..waiting import wait_until
from .conftest import need_spark
from .helpers import Stream, crash_before_commit, drain_beanstalk

need_spark()
pytestmark = pytest.mark.spark


def write(df: Any, url: str, tube: str, **options: str) -> None:
    writer = df.write.format("beanstalk").option("url", url).option("tube", tube)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


@pytest.mark.slow
def test_write_100k_rows_lands_exactly_those_jobs(
    spark: Any, server: BeanstalkServer, tube: str
) -> None:
    n = 100_000
    df = spark.range(n).selectExpr("cast(id as string) as body").repartition(2)
    write(df, server.url, tube)
    with Client(server.url) as client:
        stats = client.stats_tube(tube)
    assert stats["current-jobs-ready"] == n
    assert stats["total-jobs"] == n
    bodies = drain_beanstalk(server.url, tube)
    assert Counter(bodies) == Counter(str(i).encode() for i in range(n))


def test_row_columns_set_each_jobs_knobs(spark: Any, server: BeanstalkServer, tube: str) -> None:
    t1, t2 = f"{tube}-1", f"{tube}-2"
    rows = [("a", 5, None, 30, t1), ("b", None, 100, None, t2), ("c", 7, None, None, None)]
    df = spark.createDataFrame(rows, "body string, priority int, delay int, ttr int, tube string")
    write(df.coalesce(1), server.url, tube, priority="99", ttr="40")
    with Client(server.url) as client:
        client.use(t1)
        a = client.peek_ready()
        client.use(t2)
        b = client.peek_delayed()
        client.use(tube)
        c = client.peek_ready()
        sa, sb, sc = client.stats_job(a), client.stats_job(b), client.stats_job(c)
    assert (a.body, sa["tube"], sa["pri"], sa["ttr"]) == (b"a", t1, 5, 30)
    assert (b.body, sb["tube"], sb["pri"], sb["ttr"], sb["delay"]) == (b"b", t2, 99, 40, 100)
    assert (c.body, sc["tube"], sc["pri"], sc["ttr"]) == (b"c", tube, 7, 40)


@pytest.mark.parametrize(
    ("rows", "column", "reason"),
    [
        ([b"a", b"b", None, b"d"], "body", "is null"),
        ([b"a", b"b", b"x" * (1024 * 1024 + 1), b"d"], "body", "over the server's limit"),
    ],
    ids=["missing-body", "oversized-body"],
)
def test_bad_body_fails_the_task_naming_the_row_before_sending_its_chunk(
    spark: Any, server: BeanstalkServer, tube: str, rows: list[bytes | None], column: str,
    reason: str,
) -> None:
    df = spark.createDataFrame([(r,) for r in rows], "body binary").coalesce(1)
    with pytest.raises(Exception) as info:
        write(df, server.url, tube)
    text = str(info.value)
    assert f"BadRow: row 2 of partition 0, column '{column}'" in text
    assert reason in text
    assert "had put 0 jobs" in text
    assert drain_beanstalk(server.url, tube) == []  # nothing of the row's chunk was sent


def test_invalid_tube_in_a_row_is_named(spark: Any, server: BeanstalkServer, tube: str) -> None:
    df = spark.createDataFrame([("a", tube), ("b", "bad tube")], "body string, tube string")
    with pytest.raises(Exception) as info:
        write(df.coalesce(1), server.url, tube)
    assert "BadRow: row 1 of partition 0, column 'tube'" in str(info.value)
    assert drain_beanstalk(server.url, tube) == []


def test_a_bad_row_sends_the_chunks_before_its_own_and_its_error_counts_them(
    spark: Any, server: BeanstalkServer, tube: str
) -> None:
    from jobwire.spark._common import CHUNK_ROWS

    n, bad = CHUNK_ROWS + 2000, CHUNK_ROWS + 1000  # the bad row is in the second chunk
    df = spark.range(n).selectExpr(f"if(id = {bad}, null, cast(id as string)) as body")
    with pytest.raises(Exception) as info:
        write(df.coalesce(1), server.url, tube)
    text = str(info.value)
    assert f"BadRow: row {bad} of partition 0, column 'body'" in text
    assert f"attempt 0 of the task for partition 0 had put {CHUNK_ROWS} jobs" in text
    bodies = drain_beanstalk(server.url, tube)
    assert sorted(bodies) == sorted(str(i).encode() for i in range(CHUNK_ROWS))


@pytest.mark.parametrize(
    ("columns", "mode", "options", "message"),
    [
        ("x string", "append", {}, "exactly one job body column"),
        ("body string, data string", "append", {}, "exactly one job body column"),
        ("body int", "append", {}, "column 'body' must be binary or string"),
        ("body string, priorty int", "append", {}, "unknown column 'priorty'"),
        ("body string, priority string", "append", {}, "column 'priority' must be an integer"),
        ("body string", "overwrite", {}, "mode 'overwrite' is not supported"),
        ("body string", "append", {"url": "beanstalk://h:notaport"}, "option 'url'"),
        ("body string", "append", {"priority": "-1"}, "option 'priority'"),
        ("body string", "append", {"tube": "bad tube"}, "option 'tube'"),
    ],
)
def test_a_wrong_schema_or_option_fails_on_the_driver_before_sending(
    spark: Any, server: BeanstalkServer, tube: str, columns: str, mode: str,
    options: dict[str, str], message: str,
) -> None:
    df = spark.createDataFrame([], columns)
    writer = df.write.format("beanstalk").option("url", server.url).option("tube", tube)
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception, match="BadOption") as info:
        writer.mode(mode).save()
    assert message in str(info.value)


def _setup_states(url: str, tube: str) -> dict[str, int]:
    with Client(url) as client:
        client.use(tube)
        ready = client.put(b"ready-1")
        client.put(b"ready-2")
        delayed = client.put(b"delayed", delay=300)
        buried = client.put(b"buried", priority=1)
        client.watch(tube)
        job = client.reserve(wait=1)
        assert job.id == buried  # most urgent first
        client.bury(job)
    return {"ready": ready, "delayed": delayed, "buried": buried}


def test_tables_match_the_servers_own_answers(
    spark: Any, fresh_server: BeanstalkServer, tube: str
) -> None:
    """Server-wide counters are compared, so the server is this test's own: on the shared one
    a job an earlier test left delayed or reserved can turn ready between the two reads."""
    server = fresh_server
    ids = _setup_states(server.url, tube)

    def table(name: str, **options: str) -> list[Any]:
        reader = spark.read.format("beanstalk").option("url", server.url).option("table", name)
        for key, value in options.items():
            reader = reader.option(key, value)
        return list(reader.load().collect())

    stats, tubes, peeked = table("stats"), table("stats-tube"), table("peek", tube=tube)
    with Client(server.url) as client:
        own = client.stats()
        own_tubes = {name: client.stats_tube(name) for name in client.list_tubes()}
    assert len(stats) == 1
    for key in ("version", "pid", "max-job-size", "current-jobs-ready", "current-jobs-delayed",
                "current-jobs-buried", "total-jobs", "current-tubes"):
        assert stats[0][key.replace("-", "_")] == own[key], key
    assert {r["name"] for r in tubes} == set(own_tubes)
    mine = next(r.asDict() for r in tubes if r["name"] == tube)
    for key, value in own_tubes[tube].items():
        if not key.startswith("current-w") and key != "current-using":  # our connections
            assert mine[key.replace("-", "_")] == value, key
    assert {r["state"]: (r["id"], r["body"]) for r in peeked} == {
        "ready": (ids["ready"], b"ready-1"), "delayed": (ids["delayed"], b"delayed"),
        "buried": (ids["buried"], b"buried"),
    }
    assert all(r["tube"] == tube for r in peeked)


@pytest.mark.slow
def test_stream_delivers_every_job_once_and_deletes_it_on_commit(
    spark: Any, server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    n = 500
    with Client(server.url) as client:
        client.use(tube)
        client.put_many([f"job-{i}".encode() for i in range(n)])
    options = {"url": server.url, "tube": tube, "maxJobsPerBatch": "200"}
    with Stream(spark, "beanstalk", options, tmp_path) as stream:
        wait_until(lambda: stream.count() >= n, 60, f"{n} rows")

        def settled() -> bool:
            with Client(server.url) as client:
                stats = client.stats_tube(tube)
            return stats["current-jobs-ready"] == 0 and stats["current-jobs-reserved"] == 0

        wait_until(settled, 30, "every job deleted")
        rows = list(stream.rows)
    assert sorted(r["body"] for r in rows) == sorted(f"job-{i}".encode() for i in range(n))
    assert len({r["id"] for r in rows}) == n
    assert {r["tube"] for r in rows} == {tube}


@pytest.mark.slow
def test_stream_gives_the_jobs_again_after_a_driver_crash_before_commit(
    spark: Any, server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    n = 50
    with Client(server.url) as client:
        client.use(tube)
        ids = client.put_many([f"job-{i}".encode() for i in range(n)])
    options = {"url": server.url, "tube": tube}
    checkpoint = tmp_path / "checkpoint"
    held = crash_before_commit("beanstalk", options, checkpoint, tmp_path)
    assert sorted(int(i) for i in held) == sorted(ids)
    # The crashed driver's connection closed: beanstalkd gave every job back at once.
    with Stream(spark, "beanstalk", options, checkpoint) as stream:
        wait_until(lambda: stream.count() >= n, 60, f"{n} rows again")
        time.sleep(1)  # a duplicate would show up here
        rows = list(stream.rows)
    assert sorted(r["id"] for r in rows) == sorted(ids)
