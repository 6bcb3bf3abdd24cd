"""What a user of docs/spark.md meets at the edges: a stream that ends (availableNow, stop)
settles every batch it committed, misspelt options fail, Workq's ``onDuplicate=skip`` sends
each add once, and the errors and totals that reach the driver."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from beanstalk_client import Client, NotFound
from tests.conftest import BeanstalkServer
from tests.qless.conftest import RedisServer
from tests.workq.conftest import WorkqServer
from workq_client import Client as WorkqClient
from workq_client import JobState

from ..waiting import wait_until
from .conftest import need_spark, spark_env
from .helpers import CountingProxy, drain_beanstalk

need_spark()
pytestmark = pytest.mark.spark


def available_now(spark: Any, fmt: str, options: dict[str, str], checkpoint: Path,
                  out: Path) -> int:
    """Run a query of ``fmt`` with ``trigger(availableNow=True)`` into Parquet at ``out`` until
    it ends; return the rows the Parquet folder then holds."""
    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert not query.isActive, "the availableNow query did not end"
    assert query.exception() is None, query.exception()
    return int(spark.read.parquet(str(out)).count())


def left(url: str, ids: list[int]) -> int:
    """How many of the jobs ``ids`` beanstalkd still has (in any state)."""
    count = 0
    with Client(url) as client:
        for job_id in ids:
            try:
                client.stats_job(job_id)
            except NotFound:
                continue
            count += 1
    return count


# -- streams that end ----------------------------------------------------------------------------


@pytest.mark.slow
def test_available_now_drains_the_tube_and_deletes_every_job(
    spark: Any, server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    n = 500
    with Client(server.url) as client:
        client.use(tube)
        ids = client.put_many([f"job-{i}".encode() for i in range(n)])
    options = {"url": server.url, "tube": tube, "maxJobsPerBatch": "200"}
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    assert available_now(spark, "beanstalk", options, checkpoint, out) == n  # 3 batches
    assert left(server.url, ids) == 0  # every job deleted, the last batch's too
    # A second run on the same checkpoint finds nothing to read: nothing came back.
    assert available_now(spark, "beanstalk", options, checkpoint, out) == n


@pytest.mark.slow
def test_available_now_drains_a_workq_queue_and_completes_every_job(
    spark: Any, workq_server: WorkqServer, qname: str, tmp_path: Path
) -> None:
    n = 250
    with WorkqClient(workq_server.url) as client:
        ids = client.add_many(qname, [f"job-{i}".encode() for i in range(n)])
    options = {"url": workq_server.url, "name": qname, "maxJobsPerBatch": "100"}
    assert available_now(spark, "workq", options, tmp_path / "ck", tmp_path / "out") == n
    with WorkqClient(workq_server.url) as client:
        assert {client.inspect_job(i).state for i in ids} == {JobState.COMPLETED}


@pytest.mark.slow
def test_available_now_drains_a_qless_queue_and_completes_every_job(
    spark: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    from qless_client import Client as QlessClient

    n, queue = 250, f"spark-{uuid.uuid4().hex[:10]}"
    with QlessClient(redis_server.url) as client:
        jids = client.queue(queue).put_many([("app.S", {"i": i}) for i in range(n)])
    options = {"url": redis_server.url, "queue": queue, "maxJobsPerBatch": "100"}
    assert available_now(spark, "qless", options, tmp_path / "ck", tmp_path / "out") == n
    with QlessClient(redis_server.url) as client:
        assert client.queue(queue).counts()["running"] == 0
        assert {j.state if j is not None else None for j in map(client.get, jids)} == {
            "complete"}


@pytest.mark.slow
def test_stop_deletes_the_jobs_of_the_batches_the_commit_log_shows(
    spark: Any, server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    n = 300
    with Client(server.url) as client:
        client.use(tube)
        ids = client.put_many([f"job-{i}".encode() for i in range(n)])
    checkpoint = tmp_path / "checkpoint"
    query = (spark.readStream.format("beanstalk").option("url", server.url)
             .option("tube", tube).option("checkpointLocation", str(checkpoint)).load()
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="1 hour").start())
    try:
        # The first trigger runs at once and takes every job; the next is an hour away.
        wait_until(lambda: (query.lastProgress or {}).get("numInputRows") == n, 120,
                   f"a first batch of {n} rows committed")
    finally:
        query.stop()
    # Spark never asked for a later batch: the stop settles the committed one.
    wait_until(lambda: left(server.url, ids) == 0, 30, f"{n} jobs deleted")
    assert spark.read.parquet(str(tmp_path / "out")).count() == n


def test_zero_max_jobs_per_batch_is_the_first_error_shown(
    spark: Any, server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    query = (spark.readStream.format("beanstalk").option("url", server.url)
             .option("tube", tube).option("maxJobsPerBatch", "0").load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start())
    with pytest.raises(Exception) as info:
        query.awaitTermination(120)
    text = str(info.value)
    assert "BadOption: format 'beanstalk', option 'maxJobsPerBatch': must be 1..10000000" in text
    assert "not implemented" not in text


# -- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["beanstalk", "gearman", "workq", "qless"])
def test_a_misspelt_option_fails_naming_the_known_ones_on_write(
    spark: Any, server: BeanstalkServer, fmt: str
) -> None:
    df = spark.createDataFrame([("a",)], "data string")
    writer = df.write.format(fmt).option("url", server.url).option("tubes", "emails")
    with pytest.raises(Exception, match="BadOption") as info:
        writer.mode("append").save()
    text = str(info.value)
    assert f"format '{fmt}': unknown option 'tubes'; the options of '{fmt}' are url, " in text


@pytest.mark.parametrize(("fmt", "table"), [("beanstalk", "stats"), ("gearman", "status"),
                                            ("workq", "queues"), ("qless", "queues")])
def test_a_misspelt_option_fails_on_read(spark: Any, fmt: str, table: str) -> None:
    reader = (spark.read.format(fmt).option("url", "127.0.0.1:1").option("table", table)
              .option("timout", "5"))
    with pytest.raises(Exception, match="unknown option 'timout'"):
        reader.load().collect()


def test_a_misspelt_stream_option_fails(spark: Any) -> None:
    reader = (spark.readStream.format("workq").option("url", "127.0.0.1:1").option("name", "q")
              .option("maxJobsPerBach", "5"))
    # Spark hands the names over in lower case.
    with pytest.raises(Exception, match="unknown option 'maxjobsperbach'; the options of"):
        reader.load()


# -- Workq duplicates ----------------------------------------------------------------------------


def test_rewriting_known_ids_sends_each_add_once(
    spark: Any, workq_server: WorkqServer, qname: str
) -> None:
    n, known = 1000, 600
    ids = [str(uuid.uuid4()) for _ in range(n)]
    with WorkqClient(workq_server.url) as client:
        client.add_many(qname, [f"p{i}".encode() for i in range(known)], job_ids=ids[:known])
    proxy = CountingProxy(workq_server.host, workq_server.port)
    try:
        df = spark.createDataFrame([(f"p{i}", job_id) for i, job_id in enumerate(ids)],
                                   "payload string, id string").coalesce(1)
        df.write.format("workq").option("url", f"workq://127.0.0.1:{proxy.port}") \
            .option("name", qname).mode("append").save()
        adds = sum(line.startswith(b"add ") for line in proxy.lines())
        connections = proxy.connections
    finally:
        proxy.close()
    with WorkqClient(workq_server.url) as client:
        assert client.inspect_queue(qname).ready_len == n
        assert {client.inspect_job(i).payload for i in ids} == {f"p{i}".encode()
                                                                for i in range(n)}
    # One pass, then each add the duplicate's reconnect left unanswered, at most once more
    # (before: the rest of the run again after every duplicate, about n * n / 2 adds).
    assert adds <= 2 * n - known
    assert connections <= 3


# -- what reaches the driver ---------------------------------------------------------------------


WRITE_DRIVER = """
import sys
from tests.spark.conftest import build_session
spark = build_session("jobwire-write")
df = spark.createDataFrame([(f"job-{i}",) for i in range(3)], "body string").coalesce(1)
df.write.format("beanstalk").option("url", sys.argv[1]).option("tube", sys.argv[2]) \\
    .mode("append").save()
spark.stop()
"""


@pytest.mark.slow
def test_the_sinks_totals_reach_the_drivers_output(server: BeanstalkServer, tube: str) -> None:
    need_spark()
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", WRITE_DRIVER, server.url, tube], cwd=root,
                          env={**os.environ, **spark_env()}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"beanstalk sink: 3 jobs put by 1 tasks: {{'{tube}': 3}}" in done.stderr
    assert drain_beanstalk(server.url, tube) == [b"job-0", b"job-1", b"job-2"]


# -- the metrics plot ----------------------------------------------------------------------------


def test_the_plot_shows_the_buckets_that_hold_jobs_with_counts_that_add_up(
    spark: Any, tmp_path: Path
) -> None:
    from datetime import date

    from matplotlib.figure import Figure

    from jobwire.spark.metrics import BUCKETS, METRICS_SCHEMA, _draw_histogram, plot_histograms

    wait = [0] * len(BUCKETS)
    for name, count in (("s0", 380), ("s1", 12), ("s2", 4), ("m2", 3), (BUCKETS[-1], 1)):
        wait[BUCKETS.index(name)] = count
    run = [0] * len(BUCKETS)
    run[0] = 400
    ax = Figure().subplots()
    _draw_histogram(ax, wait, "beanstalk / orders: wait time", "2026-01-02")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["s0", "s1", "s2", "m2", BUCKETS[-1]]
    assert [int(bar.get_height()) for bar in ax.containers[0]] == [380, 12, 4, 3, 1]
    assert [t.get_text() for t in ax.texts] == ["380", "12", "4", "3", "1"]  # on the bars
    assert "400 jobs in 5 bucket(s)" in ax.get_title(loc="left")
    # Two runs of empty buckets were left out: s2..m2 and m2..the last bucket.
    assert len(ax.get_lines()) == 2

    def summary(histogram: list[int]) -> tuple[int, float, float, list[int]]:
        return (sum(histogram), 1.0, 0.0, histogram)

    metrics = spark.createDataFrame(
        [("beanstalk", "orders", date(2026, 1, 2), summary(wait), summary(run), 0, 0, 0)],
        METRICS_SCHEMA)
    [png] = plot_histograms(metrics, tmp_path)
    assert png.name == "beanstalk-orders.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
