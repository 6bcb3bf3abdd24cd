"""The data pipeline end to end, on one machine: a file of rows → Spark fans them out to a
beanstalk server → a worker pool does the jobs and records their lifecycle events → Spark turns
the events into per-queue job metrics (qless's statistics) with a plot.

    .venv/bin/python examples/spark_pipeline.py                      # 20,000 generated rows
    .venv/bin/python examples/spark_pipeline.py --input orders.csv   # or a Parquet file / folder

(``scripts/test`` sets up ``.venv`` with the ``spark`` extra; otherwise
``pip install 'jobwire[spark]'``: PySpark 4 and Python >= 3.11, and Java 17.)

1. The input: ``--input`` (CSV with a header, or Parquet), else a generated Parquet file of
   ``--rows`` orders. Every row becomes one job whose body is the row as JSON.
2. The bundled beanstalk server starts on a free loopback port (``--url``, or
   ``$BEANSTALK_URL``, uses yours instead).
3. ``df.write.format("beanstalk")``: each Spark task puts its partition's rows, pipelined, on
   its own connection; priorities come from a column; with ``option("events", <dir>)`` each
   task records a ``put`` event per job (when its wait began).
4. An ``AsyncWorker`` (``--concurrency`` jobs at once on one connection) handles the jobs: it
   parses the order, sleeps a little as real work would, and fails about 1 in 50 on the first
   try (released with a delay of 0 and done again), with ``events=EventSink(<out>/events)``.
5. ``jobwire.spark.metrics`` reads the events: wait and run time (count, mean, variance and the
   qless's histogram), failures and retries per queue and day; it prints them, writes
   ``<out>/metrics/metrics.parquet`` and ``<out>/metrics/beanstalk-<tube>.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from beanstalk_client import AsyncWorker, Client, Job, RetryPolicy  # noqa: E402
from jobwire.events import EventSink  # noqa: E402

TUBE = "orders"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_bundled_server() -> tuple[subprocess.Popen[bytes], str]:
    """The bundled beanstalk server on a free loopback port; its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "beanstalk_client.server", "-l", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"beanstalk://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the bundled beanstalk server did not start") from None
            time.sleep(0.02)


def load_input(spark: Any, path: str | None, rows: int, folder: Path) -> Any:
    """The rows: the ``--input`` file, or ``rows`` generated orders written as Parquet first."""
    if path is not None:
        if path.endswith(".csv"):
            return spark.read.option("header", True).option("inferSchema", True).csv(path)
        return spark.read.parquet(path)
    from pyspark.sql import functions as F

    generated = str(folder / "orders.parquet")
    (spark.range(rows)
        .select(F.col("id").alias("order_id"),
                (F.col("id") % 97).alias("customer"),
                F.round(F.rand(seed=7) * 500, 2).alias("amount"),
                (F.col("id") % 3).cast("int").alias("urgency"))
        .write.mode("overwrite").parquet(generated))
    return spark.read.parquet(generated)


def fan_out(df: Any, url: str, events: Path) -> int:
    """Write every row as a job (body: the row as JSON; urgent orders first), each task
    recording a ``put`` event per job in ``events``. Returns the count of rows written."""
    from pyspark.sql import functions as F

    columns = [c for c in df.columns if c != "body"]
    jobs = df.select(
        F.to_json(F.struct(*columns)).alias("body"),
        # beanstalk: lower is more urgent
        ((F.lit(2) - F.col("urgency")) * 1000 if "urgency" in df.columns else F.lit(1024))
        .cast("long").alias("priority"),
    )
    jobs.write.format("beanstalk").option("url", url).option("tube", TUBE) \
        .option("events", str(events)).mode("append").save()
    return int(df.count())


async def work(url: str, expected: int, events: EventSink, concurrency: int) -> Any:
    """Handle jobs until ``expected`` have been completed; return the worker's counters."""
    completed = 0
    tried: set[int] = set()
    done = anyio.Event()

    async def handle(job: Job) -> None:
        nonlocal completed
        order = json.loads(job.body)
        await anyio.sleep(random.uniform(0, 0.004))  # the work itself
        if job.id not in tried and random.randrange(50) == 0:
            tried.add(job.id)
            raise RuntimeError(f"order {order.get('order_id')}: payment service busy")
        completed += 1
        if completed == expected:
            done.set()

    worker = AsyncWorker(url, tubes=[TUBE], concurrency=concurrency, events=events,
                         retry=RetryPolicy(base_delay=0, bury_after=None))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: worker.run(handle, handle_signals=False))
        with anyio.fail_after(600):
            await done.wait()
        worker.stop()
    return worker.stats


def report(spark: Any, events_dir: Path, out: Path) -> list[Any]:
    from jobwire.spark.metrics import job_metrics, plot_histograms, write_metrics

    metrics = job_metrics(spark, events_dir).cache()
    rows = metrics.orderBy("system", "queue", "day").collect()
    for row in rows:
        print(f"{row.system}/{row.queue} {row.day}: "
              f"wait n={row.wait.total} mean={row.wait.mean * 1e3:.1f} ms "
              f"sd={row.wait.variance ** 0.5 * 1e3:.1f} ms | "
              f"run n={row.run.total} mean={row.run.mean * 1e3:.2f} ms "
              f"sd={row.run.variance ** 0.5 * 1e3:.2f} ms | "
              f"failures {row.failures} retries {row.retries} failed now {row.failed}")
    print("metrics:", write_metrics(metrics, out / "metrics"))
    for png in plot_histograms(metrics, out / "metrics"):
        print("plot:", png)
    return rows


def run(spark: Any, *, url: str | None = None, input_path: str | None = None,
        rows: int = 20_000, concurrency: int = 32, out: Path | None = None) -> dict[str, Any]:
    """The whole pipeline on ``spark``; returns what it counted (tests call this)."""
    import jobwire.spark

    jobwire.spark.register(spark)
    out = out or Path(tempfile.mkdtemp(prefix="jobwire-pipeline-"))
    server = None
    if url is None:
        server, url = start_bundled_server()
    try:
        began = time.perf_counter()
        written = fan_out(load_input(spark, input_path, rows, out), url, out / "events")
        print(f"fan-out: {written} rows → {url} tube {TUBE!r} in "
              f"{time.perf_counter() - began:.1f} s")
        began = time.perf_counter()
        with EventSink(out / "events") as events:
            stats = anyio.run(work, url, written, events, concurrency)
        print(f"workers: {stats.deleted} done, {stats.failed} failed and retried, in "
              f"{time.perf_counter() - began:.1f} s ({events.dropped} events dropped)")
        with Client(url) as client:
            left = client.stats()["current-jobs-ready"]
        metrics = report(spark, out / "events", out)
        return {"written": written, "deleted": stats.deleted, "failed": stats.failed,
                "left": left, "metrics": metrics, "out": out}
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="a CSV (with header) or Parquet file of rows")
    parser.add_argument("--rows", type=int, default=20_000, help="rows to generate")
    parser.add_argument("--url", default=os.environ.get("BEANSTALK_URL"),
                        help="a beanstalk server (default: $BEANSTALK_URL, else start the "
                             "bundled one)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", type=Path, help="where events, metrics and plots go")
    args = parser.parse_args(argv)
    # The planned failures are the demo's point, not news: no traceback for each.
    logging.getLogger("beanstalk_client.worker").setLevel(logging.CRITICAL)
    from jobwire.spark import local_session

    spark = local_session("jobwire-pipeline")
    try:
        result = run(spark, url=args.url, input_path=args.input, rows=args.rows,
                     concurrency=args.concurrency, out=args.out)
    finally:
        spark.stop()
    print(f"output in {result['out']}")
    return 0 if result["deleted"] == result["written"] and result["left"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
