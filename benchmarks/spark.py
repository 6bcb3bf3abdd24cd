"""jobwire.spark at scale (issue 11): Spark against one plain Python process doing the same work,
on a real ``beanstalkd`` and on files, in one run.

    scripts/bench spark                    # the full run: 5 interleaved runs per row (about 12
                                           # minutes on 2 idle cores; at most 20)
    scripts/bench spark --quick            # small counts, 3 runs per row (results/quick/)
    .venv/bin/python benchmarks/spark.py --scenarios write --rows 200000 --runs 3
    .venv/bin/python benchmarks/spark.py --json /tmp/s.json    # default results/spark.json

Scenarios (Spark: one ``local[2]`` session, quiet, on loopback, workers on this interpreter):

* ``write``: N rows (500,000; quick 50,000) with bodies of 64-100 bytes
  (``<id, 10 digits>:`` and 53-89 ``x``), made by ``spark.range`` in ``--partitions``
  partitions, written with ``df.write.format("beanstalk")`` (window 256, one connection per
  task), timed from the call to its return; the jobs are counted with ``stats-tube``. Against:
  one process sending the same bodies (made in memory first, untimed) with
  ``Client.put_many`` (window 256, one connection). Each timed run gets a fresh ``beanstalkd``.
  Where Spark's time goes, from writes of the same DataFrame: a 10-row beanstalk write (the
  fixed cost of a Spark job: planning, tasks, Python workers, connections), ``format("noop")``
  (the JVM making the rows), a Python sink that only counts the Arrow batches it gets (+ rows
  to Arrow and over to the Python workers), one that also turns every row into a ``Put`` and
  encodes it with jobwire's own row code (+ jobwire's per-row work before the socket); the
  beanstalk write adds the pipelined socket I/O, the replies and beanstalkd itself.
* ``stream``: a tube pre-filled with M jobs (100,000; quick 10,000) read by
  ``spark.readStream.format("beanstalk")`` (trigger: as fast as possible; ``foreachBatch``
  counts each batch's rows) until ``stats-tube`` shows all M deleted, for each
  ``maxJobsPerBatch`` of ``--max-jobs-per-batch`` (1000, the option's default; 5000; 20000);
  against one process reserving and deleting with ``call_many`` (1024
  ``reserve-with-timeout 0`` per call, then their deletes). Spark pays a fixed cost per
  micro-batch (planning, the driver's Python reader, a job for ``foreachBatch``), so larger
  batches go faster; but the stream holds a whole batch reserved on one connection, and
  beanstalkd's CPU per reserve grows with the jobs a connection holds, which caps what large
  batches gain.
* ``metrics``: E synthetic job lifecycle events (4,000,000; quick 400,000) in JSON lines
  written by ``jobwire.events.EventSink`` (the real writer, 64 MiB files): four systems, nine
  queues, puts over two months, with waits and runs from milliseconds to 45 days so every
  histogram resolution is hit, failures, releases, retries, burials and lost jobs.
  ``job_metrics(spark, dir).collect()`` is timed against a pure-Python single pass over the
  same files in a fresh process (``json.loads`` per line, per-job bookkeeping, Welford per
  (system, queue, day, kind), qless's 148-bucket histogram via ``qless_client._scripts``
  ``bucket_of``), whose peak RSS is reported; and reading alone: ``read_events`` with an
  aggregate against a fresh process's ``json.loads`` of every line. The two results are
  checked to agree: every count exactly, means and variances to 1e-9 relative. The single
  pass needs the events in time order, which one sink writing as things happen gives (file
  order, then line order); Spark does not (it sorts each job's events).

How it measures: wall time with ``time.perf_counter``. CPU: ``time.process_time`` of this
process (or of the fresh process) for the plain-Python rows; for Spark rows, the CPU of this
process and of every process under it that is alive at the end (the JVM and Spark's Python
workers, which Spark reuses, from ``/proc``), the server's apart. Each kind of Spark
measurement follows an untimed warm-up of the same kind (the JVM compiles its hot code during
the first runs). Each row is timed ``--runs`` times (5; 3 with ``--quick``), interleaved
within its scenario (``_harness.Bench``: run 1 of every row, then run 2, ...), so drift on a
shared machine spreads over all rows alike; each figure is the median of the runs with the
lowest and highest, and a figure whose runs spread by more than 20% of its median is marked
unstable, with why (``report.summarize``, from the load average and the other processes'
share of the CPU recorded with every run). Ratios are ratios of medians. Nothing is pinned:
``local[2]`` uses both CPUs. ``benchmarks/report.py`` writes docs/spark.md's table from the
JSON.

When a streaming query stops, PySpark's Python stream reader process may print a
``ConnectionResetError`` traceback (the JVM closed its socket first): it is harmless.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import heapq
import json
import math
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import report  # this folder
from _harness import (
    HOST,
    ROOT,
    Bench,
    Process,
    Result,
    Sample,
    arguments,
    choose,
    environment,
    find_binary,
    free_port,
    machine_busy,
    machine_during,
    print_result,
    proc_stat,
    server_version,
    spawn,
    terminate,
    write_document,
)
from _harness import Spec as _Spec

sys.path.insert(0, str(ROOT))

from beanstalk_client import (
    Client,
    Delete,
    Put,
    Reserved,
    ReserveWithTimeout,
)
from jobwire.events import EventSink
from qless_client._scripts import BUCKETS, bucket_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PROTOCOL = "spark"
TUBE = "bench"
PRI, DELAY, TTR = 1024, 0, 60  #: the put arguments of both sides (the sink's defaults)
WINDOW = 256  #: puts in flight: the sink's default and put_many's
MAX_JOB_SIZE = 1024  #: beanstalkd -z: bodies here are at most 100 bytes
DEFAULT_MAX_JOBS = 1000  #: the stream's default maxJobsPerBatch
#: The full run's sizes (``--quick``: a tenth): 5 interleaved runs of every row take about
#: 12 minutes on 2 idle cores (20 at most), event generation and warm-ups included.
ROWS, JOBS, EVENTS = 500_000, 100_000, 4_000_000
DAY = 86400
EPOCH_DATE = datetime.date(1970, 1, 1)
BUCKET_INDEX = {name: i for i, name in enumerate(BUCKETS)}
#: Where ``d7`` and later (a week or more) are counted: past the histogram's end, as in
#: qless-core (in n and mean, in no bucket).
PAST_BUCKETS = len(BUCKETS)
SCENARIOS = {
    "write": "Spark write into beanstalkd vs one process's put_many",
    "stream": "Spark streaming read (reserve, delete on commit) vs a reserve+delete loop",
    "metrics": "job_metrics on synthetic events vs a pure-Python single pass",
}
STATISTIC = (
    "median of the interleaved timed runs (round-robin over the rows of a scenario; every "
    "beanstalk run on a fresh beanstalkd), with the lowest and highest run: items (rows, jobs, "
    "events) per second, client CPU µs per item (Spark rows: the process tree, the JVM and "
    "Spark's Python workers; plain-Python rows: that process) and server CPU µs per item "
    f"(/proc); ratios are ratios of medians; a figure whose runs spread by more than "
    f"{report.UNSTABLE:.0%} of its median ((max - min) / median) is unstable"
)

#: One timed run of a row: the script's own measurement, returning its sample.
Measure = Callable[[], Sample]
Spec = _Spec[Measure]


def body_of(i: int) -> bytes:
    """Row ``i``'s job body: 64-100 bytes (the Spark side builds the same with SQL)."""
    return b"%010d:" % i + b"x" * (53 + i % 37)


# -- beanstalkd --------------------------------------------------------------------------------


def url(server: Process) -> str:
    return f"beanstalk://{HOST}:{server.port}"


@contextlib.contextmanager
def running() -> Iterator[Process]:
    """A fresh ``beanstalkd`` on a free loopback port, stopped afterwards."""
    port = free_port()
    server = spawn("beanstalkd", [find_binary("beanstalkd"), "-l", HOST, "-p", str(port), "-z",
                                  str(MAX_JOB_SIZE)], port)
    try:
        yield server
    finally:
        server.stop()


def tube_stats(server: Process | Client) -> dict[str, Any]:
    """``stats-tube`` of TUBE (on a new connection to ``server``, or on a client)."""
    if isinstance(server, Client):
        return dict(server.stats_tube(TUBE))
    with Client(HOST, server.port) as client:
        return dict(client.stats_tube(TUBE))


def prefill(server: Process, n: int) -> None:
    """Put ``n`` jobs into TUBE with put_many (untimed)."""
    with Client(HOST, server.port, timeout=60) as client:
        client.use(TUBE)
        for start in range(0, n, 100_000):
            client.put_many([body_of(i) for i in range(start, min(n, start + 100_000))],
                            priority=PRI, delay=DELAY, ttr=TTR, window=WINDOW)


# -- CPU of this process tree ------------------------------------------------------------------


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_cpu(exclude: Sequence[int] = ()) -> dict[tuple[int, bytes], float]:
    """CPU seconds so far of this process and of every live process under it (the Spark JVM
    and its Python workers) but ``exclude`` (servers), by (pid, start time)."""
    out = {(0, b""): time.process_time()}
    if not Path("/proc/self/stat").exists():
        return out
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in _descendants(os.getpid()):
        fields = None if pid in exclude else proc_stat(pid)
        if fields is not None:
            out[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def cpu_used(before: dict[tuple[int, bytes], float],
             after: dict[tuple[int, bytes], float]) -> float:
    """CPU seconds the processes alive at the end used between two :func:`tree_cpu`
    snapshots (all of it for those started meanwhile). A process that ended meanwhile is not
    counted: its CPU is not readable any more, and adding what its parent reaped would count
    its whole life (Spark's Python workers are reused: they live on)."""
    return sum(cpu - before.get(key, 0.0) for key, cpu in after.items())


class Clock:
    """Wall time, CPU of the process tree (``spark=True``) or of this process, and the
    server's, over one timed window, and what the machine was doing meanwhile
    (``_harness.machine_during``: load average, the other processes' share of the CPU)."""

    def __init__(self, server: Process | None = None, *, spark: bool) -> None:
        self.server = server
        self.spark = spark
        self.wall = self.cpu = 0.0
        self.server_cpu: float | None = None
        self.started = 0.0  #: ``time.perf_counter()`` at the start
        self.stopped = False
        self.machine: dict[str, Any] = {}

    def _cpu(self) -> dict[tuple[int, bytes], float]:
        if self.spark:
            return tree_cpu([self.server.proc.pid] if self.server else [])
        return {(0, b""): time.process_time()}

    def _srv(self) -> float | None:
        return None if self.server is None else self.server.cpu_seconds()

    def __enter__(self) -> Clock:
        self._busy0 = machine_busy()
        self._srv0 = self._srv()
        self._cpu0 = self._cpu()
        self.started = time.perf_counter()
        return self

    def stop(self) -> None:
        """End the window (leaving the ``with`` block does it too, unless done already)."""
        if self.stopped:
            return
        self.stopped = True
        self.wall = time.perf_counter() - self.started
        self.cpu = cpu_used(self._cpu0, self._cpu())
        end = self._srv()
        if self._srv0 is not None and end is not None:
            self.server_cpu = end - self._srv0
        self.machine = machine_during(self._busy0, self.cpu + (self.server_cpu or 0.0),
                                      self.wall, self.server)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sample(self, n: int, **extra: float) -> Sample:
        """The window as one timed run of ``n`` items."""
        return Sample(n, self.wall, self.cpu, self.server_cpu, dict(extra), dict(self.machine))


# -- Spark -------------------------------------------------------------------------------------

def spark_session(driver_memory: str, scratch: Path) -> SparkSession:
    """A quiet ``local[2]`` session on loopback, workers on this interpreter, with jobwire's
    formats and the probe sinks registered."""
    from jobwire.spark import local_session

    spark = local_session("jobwire-bench", conf={
        "spark.driver.memory": driver_memory,
        "spark.local.dir": str(scratch / "spark-local"),
        "spark.sql.streaming.stopTimeout": "30s",
    })
    for source in probe_sources():
        spark.dataSource.register(source)
    return spark


def probe_sources() -> list[type[Any]]:
    """Two write-only Python formats for the breakdown of a beanstalk write:
    ``bench_arrow`` counts the rows of the Arrow batches each task gets; ``bench_puts`` also
    runs jobwire's row code on them (``iter_rows``: validation, bytes) and makes and encodes
    each row's ``Put``, as the beanstalk sink does, then sends nothing."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    from jobwire.spark._common import chunks, iter_rows, partition_id

    @dataclass
    class Count(WriterCommitMessage):
        rows: int
        encoded_bytes: int = 0

    class ArrowCount(DataSourceArrowWriter):
        def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
            return Count(sum(batch.num_rows for batch in iterator))

    class Puts(DataSourceArrowWriter):
        def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
            rows = size = 0
            for chunk in chunks(iter_rows(iterator, partition_id(), "body", (), MAX_JOB_SIZE)):
                size += len(b"".join([Put(r.body, PRI, DELAY, TTR).encode() for r in chunk]))
                rows += len(chunk)
            return Count(rows, size)

    class ArrowSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_arrow"

        def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
            return ArrowCount()

    class PutsSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_puts"

        def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
            return Puts()

    return [ArrowSource, PutsSource]


def rows_df(spark: SparkSession, n: int, partitions: int) -> DataFrame:
    """``n`` rows with one string column ``body``: :func:`body_of` of 0..n-1."""
    from pyspark.sql import functions as F

    return spark.range(0, n, 1, partitions).select(
        F.concat(F.lpad(F.col("id").cast("string"), 10, "0"), F.lit(":"),
                 F.expr("repeat('x', 53 + cast(id % 37 as int))")).alias("body"))


# -- scenario 1: write -------------------------------------------------------------------------


def spark_write(spark: SparkSession, n: int, partitions: int, fmt: str) -> Sample:
    """Write ``n`` rows to ``fmt``; for ``beanstalk``, on a fresh server, checking the jobs."""
    df = rows_df(spark, n, partitions)
    if fmt != "beanstalk":
        with Clock(spark=True) as clock:
            df.write.format(fmt).mode("append").save()
        return clock.sample(n)
    with running() as server:
        with Clock(server, spark=True) as clock:
            (df.write.format("beanstalk").option("url", url(server)).option("tube", TUBE)
             .option("priority", str(PRI)).option("ttr", str(TTR)).mode("append").save())
        stats = tube_stats(server)
    if stats["current-jobs-ready"] != n or stats["total-jobs"] != n:
        raise RuntimeError(f"Spark wrote {n} rows; stats-tube says {stats['total-jobs']} jobs, "
                           f"{stats['current-jobs-ready']} ready")
    return clock.sample(n, jobs_counted=n)


def put_many_write(n: int) -> Sample:
    bodies = [body_of(i) for i in range(n)]
    with running() as server:
        with Client(HOST, server.port, timeout=60) as client:
            client.use(TUBE)
            with Clock(server, spark=False) as clock:
                ids = client.put_many(bodies, priority=PRI, delay=DELAY, ttr=TTR, window=WINDOW)
        stats = tube_stats(server)
    if len(ids) != n or stats["current-jobs-ready"] != n:
        raise RuntimeError(f"put_many: {len(ids)} ids, {stats['current-jobs-ready']} ready")
    return clock.sample(n, jobs_counted=n)


def check_bodies(spark: SparkSession, n: int, partitions: int) -> None:
    """The Spark rows are the bodies put_many sends (a few rows, untimed)."""
    from pyspark.sql import functions as F

    ids = sorted({0, 1, 36, n // 2, n - 1})
    df = rows_df(spark, n, partitions)
    got = {int(r["body"][:10]): r["body"].encode()
           for r in df.where(F.substring("body", 1, 10).cast("long").isin(ids)).collect()}
    want = {i: body_of(i) for i in ids}
    if got != want:
        raise RuntimeError(f"Spark's bodies differ from put_many's: {got} != {want}")


def write_plan(spark: SparkSession, n: int, p: int) -> list[Spec]:
    """The write scenario's rows, in the order each round runs them."""
    base = ("write", "put_many")

    def write(fmt: str, rows: int = n) -> Measure:
        return lambda: spark_write(spark, rows, p, fmt)

    return [
        Spec("spark-overhead", "Spark beanstalk write of 10 rows (fixed cost)",
             write("beanstalk", 10), 10),
        Spec("spark-noop", 'Spark write to format("noop")', write("noop"), n),
        Spec("spark-arrow", "Spark write to a Python sink counting Arrow rows",
             write("bench_arrow"), n),
        Spec("spark-puts", "... that also makes and encodes each row's Put", write("bench_puts"),
             n),
        Spec("spark", 'Spark df.write.format("beanstalk")', write("beanstalk"), n,
             baseline=base),
        Spec("put_many", "one process: Client.put_many", lambda: put_many_write(n), n),
    ]


def run_write(spark: SparkSession, args: argparse.Namespace, bench: Bench[Measure],
              keep: Callable[[list[Spec]], list[Spec]]) -> list[Result]:
    n, p = args.rows, args.partitions
    print(f"## write: {n:,} rows of 64-100 B, {p} partitions, local[2], window {WINDOW}",
          flush=True)
    check_bodies(spark, n, p)
    # Warm-up (untimed): the JVM's code paths, the Python workers, the formats' lookups.
    for fmt in ("noop", "bench_arrow", "bench_puts", "beanstalk"):
        spark_write(spark, min(n, 20_000), p, fmt)
    put_many_write(min(n, 20_000))
    return run_rows(bench, "write", keep(write_plan(spark, n, p)))


# -- scenario 2: stream ------------------------------------------------------------------------


def spark_stream(spark: SparkSession, m: int, max_jobs: int, scratch: Path) -> Sample:
    """Read ``m`` pre-filled jobs with a streaming query until all are deleted."""
    batches: list[tuple[float, int]] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        batches.append((time.perf_counter(), batch.count()))

    with running() as server:
        prefill(server, m)
        checkpoint = scratch / f"checkpoint-{uuid.uuid4().hex[:8]}"
        reader = (spark.readStream.format("beanstalk").option("url", url(server))
                  .option("tube", TUBE).option("maxJobsPerBatch", str(max_jobs)))
        deadline = time.monotonic() + max(120.0, m / 200)
        with Clock(server, spark=True) as clock:
            query = (reader.load().writeStream.foreachBatch(sink)
                     .option("checkpointLocation", str(checkpoint))
                     .trigger(processingTime="0 seconds").start())
            try:
                with Client(HOST, server.port) as client:
                    # (the query watches the tube, so it exists until the query stops)
                    while (stats := tube_stats(client))["cmd-delete"] < m:
                        error = query.exception()
                        if error is not None:
                            raise RuntimeError(f"the streaming query failed: {error}")
                        if time.monotonic() > deadline:
                            raise RuntimeError("the stream did not delete every job in time")
                        time.sleep(0.02)
                # Before query.stop(): its Python reader process ends with the query.
                clock.stop()
            finally:
                began = time.perf_counter()
                query.stop()
                stop_s = time.perf_counter() - began
    shutil.rmtree(checkpoint, ignore_errors=True)
    rows = sum(count for _, count in batches)
    if rows != m or stats["current-jobs-ready"] or stats["current-jobs-reserved"]:
        raise RuntimeError(f"stream: {rows} rows of {m}; {stats['current-jobs-ready']} ready, "
                           f"{stats['current-jobs-reserved']} reserved")
    data = [(t, c) for t, c in batches if c]
    extra: dict[str, float] = {"batches_with_rows": len(data), "batches": len(batches),
                               "max_jobs_per_batch": max_jobs,
                               "stop_s_untimed": round(stop_s, 3)}
    if data:
        extra["first_batch_s"] = round(data[0][0] - clock.started, 3)
        if len(data) > 1:
            steady = sum(c for _, c in data[1:]) / (data[-1][0] - data[0][0])
            extra["steady_jobs_per_s"] = round(steady, 1)
    return clock.sample(m, **extra)


def python_drain(m: int) -> Sample:
    with running() as server:
        prefill(server, m)
        with Client(HOST, server.port, timeout=60) as client:
            client.watch(TUBE)
            client.ignore("default")
            with Clock(server, spark=False) as clock:
                done = 0
                while done < m:
                    replies = client.call_many([ReserveWithTimeout(0)] * min(1024, m - done))
                    ids = [r.job_id for r in replies if isinstance(r, Reserved)]
                    if not ids:
                        raise RuntimeError(f"the tube ran dry after {done} of {m} jobs")
                    client.call_many([Delete(i) for i in ids])
                    done += len(ids)
            stats = tube_stats(client)  # (the tube goes when its last watcher leaves)
    if stats["cmd-delete"] != m or stats["current-jobs-ready"]:
        raise RuntimeError(f"drain: {stats['cmd-delete']} deleted of {m}")
    return clock.sample(m)


def stream_plan(spark: SparkSession, m: int, sizes: Sequence[int], scratch: Path
                ) -> list[Spec]:
    """The stream scenario's rows, in the order each round runs them."""
    base = ("stream", "python")

    def stream(size: int) -> Measure:
        return lambda: spark_stream(spark, m, size, scratch)

    return [*(Spec(f"spark-{size}", f"Spark readStream, maxJobsPerBatch={size}", stream(size),
                   m, baseline=base) for size in sizes),
            Spec("python", "one process: reserve+delete, call_many x1024",
                 lambda: python_drain(m), m)]


def run_stream(spark: SparkSession, args: argparse.Namespace, scratch: Path,
               bench: Bench[Measure], keep: Callable[[list[Spec]], list[Spec]]) -> list[Result]:
    m = args.jobs
    sizes = args.batch_sizes
    print(f"## stream: {m:,} pre-filled jobs, maxJobsPerBatch {' and '.join(map(str, sizes))}",
          flush=True)
    spark_stream(spark, min(m, 5_000), max(sizes), scratch)  # warm-up (untimed)
    return run_rows(bench, "stream", keep(stream_plan(spark, m, sizes, scratch)))


# -- scenario 3: metrics -----------------------------------------------------------------------

#: (share, shortest, longest) seconds: durations are log-uniform within a class.
WAITS = ((0.55, 0.001, 2.0), (0.25, 2.0, 120.0), (0.12, 120.0, 4 * 3600.0),
         (0.06, 4 * 3600.0, DAY), (0.015, DAY, 3 * DAY), (0.005, 3 * DAY, 45 * DAY))
RUNS = ((0.70, 0.001, 1.0), (0.22, 1.0, 60.0), (0.06, 60.0, 3600.0),
        (0.018, 3600.0, DAY), (0.002, DAY, 10 * DAY))
QUEUES = {"beanstalk": ("emails", "resize", "reports"), "gearman": ("thumbnail", "ocr"),
          "workq": ("index",), "qless": ("billing", "export", "ml")}
START = 1_709_251_200.0  #: 2024-03-01 00:00 UTC
SPAN = 60 * DAY  #: puts spread over two months (waits of 30+ days complete)
EVENTS_PER_JOB = 2.5  #: about what the lifecycles below make (sets the put rate)
_RANK = {"put": 0, "released": 0, "retried": 0, "reserved": 1}


class Durations:
    def __init__(self, rng: random.Random, classes: Sequence[tuple[float, float, float]]) -> None:
        self.rng = rng
        total = sum(c[0] for c in classes)
        acc = 0.0
        self.table: list[tuple[float, float, float]] = []
        for share, low, high in classes:
            acc += share / total
            self.table.append((acc, math.log(low), math.log(high / low)))

    def __call__(self) -> float:
        r = self.rng.random()
        chosen = next((c for c in self.table if r <= c[0]), self.table[-1])
        return max(0.001, round(math.exp(chosen[1] + chosen[2] * self.rng.random()), 3))


def generate_events(directory: Path, total: int, seed: int = 11) -> dict[str, Any]:
    """Write ``total`` events in time order with an :class:`EventSink` (JSON lines).

    Lifecycles: beanstalk (a ``put`` for 90% of jobs, ``reserved``, ``completed``; 4% fail,
    then ``released`` and again, ``buried`` at the third failure; 0.5% ``lost``, reserved again
    later); gearman (``reserved``, ``completed`` or a final ``failed``: no waits); workq
    (``put``, ``reserved``, ``completed``; a failure is reserved again, final at the third);
    qless (``reserved`` with ``put_time``, ``completed``; 5% ``retried``, the third retry
    followed by ``failed``; 1.5% a final ``failed``). Events of one job are 1 ms apart at
    least, so no two share an instant."""
    rng = random.Random(seed)
    wait, run = Durations(rng, WAITS), Durations(rng, RUNS)
    queues = [(system, queue) for system, names in QUEUES.items() for queue in names]
    workers = {s: [f"{s}-worker-{k}" for k in range(4)] for s in QUEUES}
    rate = total / EVENTS_PER_JOB / SPAN
    heap: list[tuple[float, int, int, str, list[Any]]] = []
    seq = 0
    next_put = START
    counters = dict.fromkeys(QUEUES, 0)
    emitted = 0
    began = time.perf_counter()
    random_ = rng.random

    def push(t: float, event: str, job: list[Any]) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, _RANK.get(event, 2), seq, event, job))

    with EventSink(directory, max_buffered=400_000, flush_interval=5.0) as sink:
        emit = sink.emit
        while emitted < total:
            if not heap or next_put <= heap[0][0]:
                system, queue = queues[int(random_() * len(queues))]
                counters[system] += 1
                number = counters[system]
                jid = (f"{number:032x}" if system == "qless" else
                       f"H:worker-host:{number}" if system == "gearman" else str(number))
                t = round(next_put, 3)
                # job: system, queue, id, worker, attempt, put_time (qless)
                job: list[Any] = [system, queue, jid, workers[system][number & 3], 1, t]
                if system == "workq" or (system == "beanstalk" and random_() >= 0.1):
                    push(t, "put", job)
                else:
                    push(round(t + wait(), 3), "reserved", job)
                next_put += rng.expovariate(rate)
                continue
            t, _, _, event, job = heapq.heappop(heap)
            system, queue, jid, worker, attempt, put_time = job
            if event == "reserved":
                emit(event, t, system, queue, jid, worker,
                     put_time if system == "qless" else None, None,
                     attempt if system in ("qless", "beanstalk") else None)
            elif event == "failed":
                group = (f"failed-retries-{queue}" if system == "qless" and attempt > 3
                         else "ValueError")
                emit(event, t, system, queue, jid, worker, None, group,
                     attempt if system in ("qless", "beanstalk") else None)
            else:
                emit(event, t, system, queue, jid, worker)
            emitted += 1
            if emitted % 100_000 == 0:
                sink.flush()
            # what happens next to this job
            if event in ("put", "released", "lost"):
                push(round(t + wait(), 3), "reserved", job)
            elif event == "retried":
                job[4] += 1
                if job[4] > 3:
                    push(round(t + 0.001, 3), "failed", job)
                else:
                    job[5] = t
                    push(round(t + wait(), 3), "reserved", job)
            elif event == "reserved":
                r = random_()
                done_at = round(t + run(), 3)
                if r < 0.005:
                    push(done_at, "lost", job)
                elif system == "qless" and r < 0.055:
                    push(done_at, "retried", job)
                elif r < (0.02 if system == "qless" else 0.045):
                    push(done_at, "failed", job)
                else:
                    push(done_at, "completed", job)
            elif event == "failed":
                if system == "beanstalk":
                    job[4] += 1
                    push(round(t + 0.001, 3), "released" if job[4] <= 3 else "buried", job)
                elif system == "workq" and job[4] < 3:
                    job[4] += 1
                    push(round(t + wait(), 3), "reserved", job)
    if sink.dropped or sink.written != total:
        raise RuntimeError(f"the event sink wrote {sink.written} of {total} "
                           f"({sink.dropped} dropped)")
    files = event_files(directory)
    return {"seconds": round(time.perf_counter() - began, 2), "files": len(files),
            "bytes": sum(f.stat().st_size for f in files),
            "jobs": sum(counters.values()), "writer": "jobwire.events.EventSink (jsonl)"}


def event_files(directory: Path) -> list[Path]:
    """The sink's JSON-lines files in the order they were written (by the milliseconds and the
    sequence number in their names)."""
    def key(path: Path) -> tuple[int, int]:
        parts = path.stem.split("-")  # events-<ms>-<pid>-<seq>
        return int(parts[1]), int(parts[3])

    return sorted(directory.glob("events-*.jsonl"), key=key)


# The pure-Python pass (runs in a fresh process, so that its peak RSS is its own).

_STARTS = frozenset({"put", "released", "retried"})
_KINDS = frozenset({"put", "released", "retried", "reserved", "completed", "failed",
                    "buried", "lost"})

# per (system, queue, day): [wait n, mean, M2, histogram, run n, mean, M2, histogram,
#                            failures, retries, failed]
Stats = list[Any]


def _new_stats() -> Stats:
    # one slot past the histogram: durations of a week or more (dropped when compared)
    return [0, 0.0, 0.0, [0] * (len(BUCKETS) + 1), 0, 0.0, 0.0, [0] * (len(BUCKETS) + 1),
            0, 0, 0]


def python_metrics(files: Sequence[str]) -> tuple[dict[tuple[str, str, int], Stats], int, int]:
    """The metrics of ``files`` (events in time order) in one pass: returns the stats per
    (system, queue, day number), the lines read and the jobs tracked. The rules are those of
    ``jobwire.spark.metrics`` (docs/events.md); lines it would drop are dropped here too."""
    loads = json.loads
    jobs: dict[str, dict[str, list[Any]]] = {}  # system -> job -> [start, reserved, failed key]
    out: dict[tuple[str, str, int], Stats] = {}
    lines = 0
    isfinite = math.isfinite
    floor = math.floor
    bucket = BUCKET_INDEX
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                lines += 1
                try:
                    e = loads(line)
                except ValueError:
                    continue
                if not isinstance(e, dict):
                    continue
                event: Any = e.get("event")
                t: Any = e.get("time")
                system: Any = e.get("system")
                queue: Any = e.get("queue")
                job: Any = e.get("job")
                if (event not in _KINDS or type(t) not in (float, int) or not isfinite(t)
                        or type(system) is not str or type(queue) is not str
                        or type(job) is not str or e.get("v") not in (None, 1)):
                    continue
                per_system = jobs.get(system)
                if per_system is None:
                    per_system = jobs[system] = {}
                state = per_system.get(job)
                if state is None:
                    state = per_system[job] = [None, None, None]
                key = None
                if event in _STARTS:
                    state[0] = t
                    if event == "retried":
                        key = (system, queue, floor(t / DAY))
                        stats = out.get(key) or out.setdefault(key, _new_stats())
                        stats[9] += 1
                elif event == "reserved":
                    since: Any = e.get("put_time")
                    if type(since) not in (float, int) or not isfinite(since):
                        since = state[0]
                    state[1] = t
                    if since is not None:
                        key = (system, queue, floor(t / DAY))
                        stats = out.get(key) or out.setdefault(key, _new_stats())
                        x = max(t - since, 0.0)
                        n = stats[0] = stats[0] + 1
                        delta = x - stats[1]
                        stats[1] += delta / n
                        stats[2] += delta * (x - stats[1])
                        stats[3][bucket.get(bucket_of(x), PAST_BUCKETS)] += 1
                elif event == "completed":
                    since = state[1]
                    if since is not None:
                        key = (system, queue, floor(t / DAY))
                        stats = out.get(key) or out.setdefault(key, _new_stats())
                        x = max(t - since, 0.0)
                        n = stats[4] = stats[4] + 1
                        delta = x - stats[5]
                        stats[5] += delta / n
                        stats[6] += delta * (x - stats[5])
                        stats[7][bucket.get(bucket_of(x), PAST_BUCKETS)] += 1
                elif event == "failed":
                    key = (system, queue, floor(t / DAY))
                    stats = out.get(key) or out.setdefault(key, _new_stats())
                    stats[8] += 1
                    state[2] = key
                    continue
                state[2] = None  # the job's latest event is not a failure
    tracked = 0
    for per_system in jobs.values():
        tracked += len(per_system)
        for state in per_system.values():
            if state[2] is not None:
                out[state[2]][10] += 1
    return out, lines, tracked


def _status_kib(field: str) -> int:
    """A memory figure of this process from ``/proc/self/status`` (``VmRSS``: now; ``VmHWM``:
    the peak, of this program alone: ``getrusage``'s ``ru_maxrss`` would also count the
    parent that forked it), or 0 off Linux."""
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def python_parse_child(files: Sequence[str]) -> dict[str, Any]:
    """In a fresh process: ``json.loads`` of every line of ``files``; its time, CPU and the
    lines read."""
    loads = json.loads
    lines = 0
    began, cpu = time.perf_counter(), time.process_time()
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                loads(line)
                lines += 1
    return {"seconds": time.perf_counter() - began, "cpu_s": time.process_time() - cpu,
            "lines": lines}


def python_metrics_child(files: Sequence[str]) -> dict[str, Any]:
    """In a fresh process: the metrics pass; its time, CPU, RSS before and peak RSS, and the
    metrics."""
    start_rss = _status_kib("VmRSS")
    began, cpu = time.perf_counter(), time.process_time()
    stats, lines, tracked = python_metrics(files)
    seconds, cpu_s = time.perf_counter() - began, time.process_time() - cpu
    return {
        "seconds": seconds, "cpu_s": cpu_s, "lines": lines, "jobs_tracked": tracked,
        "start_rss_kib": start_rss, "peak_rss_kib": _status_kib("VmHWM"), "stats": stats,
    }


def in_fresh_process(child: Callable[[Sequence[str]], dict[str, Any]], files: Sequence[str]
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``child(files)`` in a fresh (spawned) process, so that its peak RSS is its own: what it
    returns, and what the machine was doing meanwhile (the child measures its own time)."""
    context = multiprocessing.get_context("spawn")
    # (the child is under this process until the pool's end, after the clock's)
    with (concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool,
          Clock(spark=True) as clock):
        out = pool.submit(child, files).result()
    return out, clock.machine


def compare(spark_rows: Sequence[Any], python: dict[tuple[str, str, int], Stats]
            ) -> dict[str, Any]:
    """Spark's metrics rows against the pure-Python pass: counts exactly, means and
    variances to 1e-9 relative."""
    problems: list[str] = []
    worst = {"mean": 0.0, "variance": 0.0}
    mine = {(s, q, EPOCH_DATE + datetime.timedelta(days=d)): v
            for (s, q, d), v in python.items()}
    theirs = {(r["system"], r["queue"], r["day"]): r for r in spark_rows}
    if set(mine) != set(theirs):
        problems.append(f"keys differ: only Spark {sorted(set(theirs) - set(mine))[:3]}, "
                        f"only Python {sorted(set(mine) - set(theirs))[:3]}")

    def rel(a: float, b: float) -> float:
        scale = max(abs(a), abs(b))
        return 0.0 if scale == 0 else abs(a - b) / scale

    for key in sorted(set(mine) & set(theirs)):
        v, r = mine[key], theirs[key]
        for kind, at in (("wait", 0), ("run", 4)):
            summary = r[kind]
            n, mean, m2, histogram = v[at : at + 4]
            variance = m2 / (n - 1) if n > 1 else 0.0
            if summary["total"] != n or list(summary["histogram"]) != histogram[:-1]:
                problems.append(f"{key} {kind}: counts differ ({summary['total']} vs {n})")
            for name, value in (("mean", mean), ("variance", variance)):
                diff = rel(summary[name], value)
                worst[name] = max(worst[name], diff)
                if diff > 1e-9:
                    problems.append(f"{key} {kind} {name}: {summary[name]!r} vs {value!r}")
        if (r["failures"], r["retries"], r["failed"]) != tuple(v[8:11]):
            problems.append(f"{key}: failures/retries/failed "
                            f"{(r['failures'], r['retries'], r['failed'])} vs {tuple(v[8:11])}")
    counted = sum(v[0] + v[4] for v in python.values())
    return {"agree": not problems, "rows": len(theirs), "durations": counted,
            "max_rel_diff_mean": worst["mean"], "max_rel_diff_variance": worst["variance"],
            "problems": problems[:10]}


def read_summary(spark: SparkSession, directory: Path) -> int:
    """``read_events`` with an aggregate over the columns the pipeline uses (so that Spark
    reads and parses them all): the cost of reading alone. Returns the events kept."""
    from pyspark.sql import functions as F

    from jobwire.spark.metrics import read_events

    row = read_events(spark, directory).agg(
        F.count("*").alias("n"), F.sum(F.length("job")), F.sum("put_time"),
        F.max("queue"), F.max("system"), F.max("event")).collect()[0]
    return int(row["n"])


def metrics_plan(spark: SparkSession, directory: Path, files: Sequence[str], n: int,
                 last: dict[str, Any]) -> list[Spec]:
    """The metrics scenario's rows, in the order each round runs them; ``last`` keeps the
    latest Spark rows and pure-Python stats, to check that they agree."""

    def spark_read() -> Sample:
        with Clock(spark=True) as clock:
            kept = read_summary(spark, directory)
        return clock.sample(kept)

    def spark_metrics() -> Sample:
        from jobwire.spark.metrics import job_metrics

        with Clock(spark=True) as clock:
            rows = job_metrics(spark, directory).collect()
        last["spark"] = rows
        return clock.sample(n, rows=len(rows))

    def python_parse() -> Sample:
        out, machine = in_fresh_process(python_parse_child, files)
        return Sample(out["lines"], out["seconds"], out["cpu_s"], None, {}, machine)

    def python_pass() -> Sample:
        out, machine = in_fresh_process(python_metrics_child, files)
        last["python"] = out
        return Sample(out["lines"], out["seconds"], out["cpu_s"], None, {
            "peak_rss_mib": round(out["peak_rss_kib"] / 1024, 1),
            "start_rss_mib": round(out["start_rss_kib"] / 1024, 1),
            "jobs_tracked": out["jobs_tracked"]}, machine)

    return [
        Spec("spark-read", "Spark read_events: read, parse, filter (agg)", spark_read, n,
             baseline=("metrics", "python-parse")),
        Spec("spark", "Spark job_metrics(...).collect()", spark_metrics, n,
             baseline=("metrics", "python")),
        Spec("python-parse", "one process: json.loads of every line only", python_parse, n),
        Spec("python", "one process: the same metrics in one pass", python_pass, n),
    ]


def run_metrics(spark: SparkSession, args: argparse.Namespace, scratch: Path,
                bench: Bench[Measure], keep: Callable[[list[Spec]], list[Spec]]
                ) -> tuple[list[Result], dict[str, Any]]:
    """The metrics rows, and what the page says beside them: how the events were made and
    whether Spark and the pure-Python pass agree (their last runs)."""
    from jobwire.spark.metrics import job_metrics

    total = args.events
    directory = Path(args.events_dir) if args.events_dir else scratch / "events"
    print(f"## metrics: {total:,} events, shuffle partitions {args.shuffle_partitions}, "
          f"driver memory {args.driver_memory}", flush=True)
    if directory.is_dir() and event_files(directory):
        generated: dict[str, Any] = {"reused": str(directory)}
        print(f"  reusing the events in {directory}", flush=True)
    else:
        generated = generate_events(directory, total)
        print(f"  generated {total:,} events for {generated['jobs']:,} jobs in "
              f"{generated['files']} files ({generated['bytes'] / 2**20:,.0f} MiB) with "
              f"EventSink in {generated['seconds']:.0f} s (untimed)", flush=True)
    files = [str(f) for f in event_files(directory)]
    if "reused" in generated:
        total = 0
        for path in files:
            with open(path, "rb") as f:
                total += sum(1 for _ in f)
    spark.conf.set("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
    # Warm-up (untimed): both Spark jobs on the first 200,000 events, so that the JVM has
    # compiled the JSON reader's and the pipeline's code paths (the very first run is often
    # twice as slow).
    warm = scratch / "warm-events"
    warm.mkdir(exist_ok=True)
    with open(files[0], "rb") as source, open(warm / Path(files[0]).name, "wb") as copy:
        copy.writelines(line for _, line in zip(range(200_000), source, strict=False))
    read_summary(spark, warm)
    job_metrics(spark, warm).collect()
    shutil.rmtree(warm, ignore_errors=True)
    last: dict[str, Any] = {}
    out = run_rows(bench, "metrics", keep(metrics_plan(spark, directory, files, total, last)))
    notes: dict[str, Any] = {"events": generated}
    if "spark" in last and "python" in last:
        check = compare(last["spark"], last["python"]["stats"])
        notes["check"] = check
        print(f"  check: {'the two agree' if check['agree'] else 'THEY DISAGREE'} on "
              f"{check['rows']} (system, queue, day) rows, {check['durations']:,} durations; "
              f"max relative difference: mean {check['max_rel_diff_mean']:.1e}, variance "
              f"{check['max_rel_diff_variance']:.1e}", flush=True)
        for problem in check["problems"]:
            print(f"    {problem}")
    if not args.events_dir:
        shutil.rmtree(directory, ignore_errors=True)
    return out, notes


# -- running the rows ----------------------------------------------------------------------------


def once(spec: Spec) -> Sample:
    """One timed run of a row (its measurement starts and stops any server), printed."""
    s = spec.measure()
    server = "" if s.server_cpu is None else f", server CPU {s.server_cpu:.2f} s"
    print(f"  {spec.label:<58} {s.n:>10,} in {s.seconds:8.2f} s  {s.ops:>11,.0f}/s  "
          f"(CPU {s.client_cpu:.2f} s{server})", flush=True)
    return s


def run_rows(bench: Bench[Measure], scenario: str, specs: Sequence[Spec]) -> list[Result]:
    """Every row of ``scenario`` ``bench.runs`` times, interleaved (``Bench.run_specs``: run 1
    of every row, then run 2, ...); their results, in the rows' order, printed."""
    bench.run_specs(scenario, specs)
    results = [bench.results[(scenario, spec.client)] for spec in specs]
    print(f"  median (min-max) of {bench.runs} interleaved runs:", flush=True)
    for result in results:
        print_result(result)
    return results


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arguments(
        PROTOCOL, "Benchmark jobwire.spark against one plain Python process: a beanstalk "
        "write, a streaming read, and the job-metrics pipeline; ratios of medians and where "
        "the time goes.", SCENARIOS)
    parser.add_argument("--rows", type=int, help=f"write: rows (default {ROWS:,}; quick "
                        f"{ROWS // 10:,})")
    parser.add_argument("--partitions", type=int, default=2,
                        help="write: partitions of the DataFrame = tasks = connections "
                        "(default 2, one per core of local[2])")
    parser.add_argument("--jobs", type=int, help=f"stream: pre-filled jobs (default {JOBS:,}; "
                        f"quick {JOBS // 10:,})")
    parser.add_argument("--max-jobs-per-batch", default=f"{DEFAULT_MAX_JOBS},5000,20000",
                        metavar="SIZES",
                        help="stream: the maxJobsPerBatch values to run, comma-separated "
                        f"(default {DEFAULT_MAX_JOBS} (the option's default),5000,20000)")
    parser.add_argument("--events", type=int, help=f"metrics: events (default {EVENTS:,}; "
                        f"quick {EVENTS // 10:,})")
    parser.add_argument("--events-dir",
                        help="metrics: keep the generated events here (kept afterwards); if it "
                        "holds event files already, use them instead of generating")
    parser.add_argument("--shuffle-partitions", type=int, default=8,
                        help="metrics: spark.sql.shuffle.partitions (default 8)")
    parser.add_argument("--driver-memory", default="3g",
                        help="spark.driver.memory, the local[2] heap (default 3g)")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    args.rows = args.rows or ROWS // scale
    args.jobs = args.jobs or JOBS // scale
    args.events = args.events or EVENTS // scale
    for name in ("rows", "jobs", "events", "partitions", "shuffle_partitions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    try:
        args.batch_sizes = sorted({int(x) for x in args.max_jobs_per_batch.split(",") if x})
    except ValueError:
        parser.error(f"--max-jobs-per-batch: integers, not {args.max_jobs_per_batch!r}")
    if not args.batch_sizes or not all(1 <= x <= 10_000_000 for x in args.batch_sizes):
        parser.error("--max-jobs-per-batch: values of 1..10000000")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scenarios, clients, runs, out = choose(args, PROTOCOL, SCENARIOS)
    signal.signal(signal.SIGTERM, terminate)
    wall = time.perf_counter()
    env = environment({"beanstalkd": server_version([find_binary("beanstalkd"), "-v"]),
                       "java": server_version(["java", "-version"])}, ["pyspark", "pyarrow"])
    print(f"# Spark benchmark{' (quick)' if args.quick else ''}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), Python {env['python']}, PySpark "
          f"{env['packages']['pyspark']}, {env['java']}, {env['beanstalkd']}")
    print(f"Spark local[2]; median of {runs} interleaved timed runs per row; CPU s = the whole "
          "process tree (JVM + Python workers) for Spark rows, this process for plain-Python "
          "rows\n", flush=True)

    def keep(specs: list[Spec]) -> list[Spec]:
        return [spec for spec in specs if not clients or spec.client in clients]

    scratch = Path(tempfile.mkdtemp(prefix="jobwire-bench-spark-"))
    bench = Bench(runs, once, pin=False)  # local[2] wants both CPUs: nothing is pinned
    order: list[Result] = []
    metrics: dict[str, Any] | None = None
    session = None
    try:
        began = time.perf_counter()
        session = spark = spark_session(args.driver_memory, scratch)
        print(f"SparkSession started in {time.perf_counter() - began:.1f} s\n", flush=True)
        for scenario in scenarios:
            if scenario == "write":
                order += run_write(spark, args, bench, keep)
            elif scenario == "stream":
                order += run_stream(spark, args, scratch, bench, keep)
            else:
                rows, metrics = run_metrics(spark, args, scratch, bench, keep)
                order += rows
    finally:
        if session is not None:
            session.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.perf_counter() - wall
    document = write_document(out, PROTOCOL, env, {
        "statistic": STATISTIC, "quick": args.quick, "runs": runs,
        "scenarios": {s: SCENARIOS[s] for s in scenarios}, "clients": sorted(clients) or "all",
        "master": "local[2]", "driver_memory": args.driver_memory,
        "rows": args.rows, "partitions": args.partitions, "window": WINDOW,
        "body_bytes": "64-100", "put_args": {"priority": PRI, "delay": DELAY, "ttr": TTR},
        "jobs": args.jobs, "max_jobs_per_batch": args.batch_sizes,
        "events": args.events, "shuffle_partitions": args.shuffle_partitions,
        "wall_time_s": round(elapsed, 1),
    }, order, metrics=metrics)
    print()
    print("\n".join(report.spark_lines(document, report.source_name(out.parent))))
    print(f"\nwall time {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
