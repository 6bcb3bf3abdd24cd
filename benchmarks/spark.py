"""jobwire.spark at scale (issue 11): Spark against one plain Python process doing the same work,
on a real ``beanstalkd`` and on files, in one run.

    scripts/bench spark                    # the full run (7 minutes on 2 idle cores, 15 loaded)
    scripts/bench spark --quick            # a smoke run with small counts (2-3 minutes)
    .venv/bin/python benchmarks/spark.py --scenarios write --rows 200000
    .venv/bin/python benchmarks/spark.py --json /tmp/s.json    # default results/spark.json

Scenarios (Spark: one ``local[2]`` session, quiet, on loopback, workers on this interpreter):

* ``write``: N rows (1,000,000; quick 100,000) with bodies of 64-100 bytes
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
* ``stream``: a tube pre-filled with M jobs (200,000; quick 20,000) read by
  ``spark.readStream.format("beanstalk")`` (trigger: as fast as possible; ``foreachBatch``
  counts each batch's rows) until ``stats-tube`` shows all M deleted, for each
  ``maxJobsPerBatch`` of ``--max-jobs-per-batch`` (1000, the option's default; 5000; 20000);
  against one process reserving and deleting with ``call_many`` (1024
  ``reserve-with-timeout 0`` per call, then their deletes). Spark pays a fixed cost per
  micro-batch (planning, the driver's Python reader, a job for ``foreachBatch``), so larger
  batches go faster; but the stream holds a whole batch reserved on one connection, and
  beanstalkd's CPU per reserve grows with the jobs a connection holds (measured here: about
  0.01 ms per job at 1,000 held, 0.13 ms at 20,000), which caps what large batches gain.
* ``metrics``: E synthetic job lifecycle events (10,000,000; quick 1,000,000) in JSON lines
  written by ``jobwire.events.EventSink`` (the real writer, 64 MiB files): four systems, nine
  queues, puts over two months, with waits and runs from milliseconds to 45 days so every
  histogram resolution is hit, failures, releases, retries, burials and lost jobs.
  ``job_metrics(spark, dir).collect()`` is timed against a pure-Python single pass over the
  same files in a fresh process (``json.loads`` per line, per-job bookkeeping, Welford per
  (system, queue, day, kind), qless's 148-bucket histogram via ``qless_client._scripts``
  ``bucket_of``), whose peak RSS is reported. The two results are checked to agree: every
  count exactly, means and variances to 1e-9 relative. The single pass needs the events in
  time order, which one sink writing as things happen gives (file order, then line order);
  Spark does not (it sorts each job's events).

How it measures: wall time with ``time.perf_counter``. CPU: ``time.process_time`` of this
process for the plain-Python rows; for Spark rows, the CPU of this process and of every process
under it that is alive at the end (the JVM and Spark's Python workers, which Spark reuses, from
``/proc``), the server's apart. Each Spark measurement follows an untimed warm-up of the same
kind (the JVM compiles its hot code during the first runs). The box this was written on is a
loaded 2-core VM shared with other jobs: wall times move from run to run, CPU seconds less.
``--repeats`` (1) timed runs per row; the table shows the best and the median.

When a streaming query stops, PySpark's Python stream reader process may print a
``ConnectionResetError`` traceback (the JVM closed its socket first): it is harmless.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import heapq
import importlib.metadata
import json
import math
import multiprocessing
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _harness import (
    HOST,
    die_with_parent,
    find_binary,
    free_port,
    proc_cpu,
    proc_stat,
    stop_process,
    terminate,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from beanstalk_client import (  # noqa: E402
    Client,
    Delete,
    Put,
    Reserved,
    ReserveWithTimeout,
)
from jobwire.events import EventSink  # noqa: E402
from qless_client._scripts import BUCKETS, bucket_of  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_JSON = ROOT / "benchmarks" / "results" / "spark.json"
TUBE = "bench"
PRI, DELAY, TTR = 1024, 0, 60  #: the put arguments of both sides (the sink's defaults)
WINDOW = 256  #: puts in flight: the sink's default and put_many's
MAX_JOB_SIZE = 1024  #: beanstalkd -z: bodies here are at most 100 bytes
DEFAULT_MAX_JOBS = 1000  #: the stream's default maxJobsPerBatch
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


def body_of(i: int) -> bytes:
    """Row ``i``'s job body: 64-100 bytes (the Spark side builds the same with SQL)."""
    return b"%010d:" % i + b"x" * (53 + i % 37)


# -- beanstalkd --------------------------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"beanstalk://{HOST}:{self.port}"

    def cpu_seconds(self) -> float | None:
        return proc_cpu(self.proc.pid)

    def stop(self) -> None:
        stop_process(self.proc)


def start_server() -> Server:
    """A fresh ``beanstalkd`` on a free loopback port, accepting connections."""
    port = free_port()
    single = sys.platform == "linux" and threading.active_count() == 1
    proc = subprocess.Popen(
        [find_binary("beanstalkd"), "-l", HOST, "-p", str(port), "-z", str(MAX_JOB_SIZE)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=die_with_parent if single else None,
    )
    server = Server(proc, port)
    deadline = time.monotonic() + 15
    while True:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else b""
            raise RuntimeError(f"beanstalkd exited with {proc.returncode}: {err!r}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"beanstalkd did not listen on {HOST}:{port}") from None
            time.sleep(0.02)


@contextlib.contextmanager
def running() -> Iterator[Server]:
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


def tube_stats(server: Server | Client) -> dict[str, Any]:
    """``stats-tube`` of TUBE (on a new connection to ``server``, or on a client)."""
    if isinstance(server, Client):
        return dict(server.stats_tube(TUBE))
    with Client(HOST, server.port) as client:
        return dict(client.stats_tube(TUBE))


def prefill(server: Server, n: int) -> None:
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
    server's, over one timed window."""

    def __init__(self, server: Server | None = None, *, spark: bool) -> None:
        self.server = server
        self.spark = spark
        self.wall = self.cpu = 0.0
        self.server_cpu: float | None = None
        self.started = 0.0  #: ``time.perf_counter()`` at the start
        self.stopped = False

    def _cpu(self) -> dict[tuple[int, bytes], float]:
        if self.spark:
            return tree_cpu([self.server.proc.pid] if self.server else [])
        return {(0, b""): time.process_time()}

    def _srv(self) -> float | None:
        return None if self.server is None else self.server.cpu_seconds()

    def __enter__(self) -> Clock:
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

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- results -----------------------------------------------------------------------------------


@dataclass
class Sample:
    n: int  #: rows, jobs or events
    seconds: float
    cpu: float  #: client-side CPU seconds (the Spark process tree, or this process)
    server_cpu: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n, "seconds": round(self.seconds, 4), "per_s": round(self.rate, 1),
            "cpu_s": round(self.cpu, 3),
            "server_cpu_s": None if self.server_cpu is None else round(self.server_cpu, 3),
            **self.extra,
        }


@dataclass
class Row:
    """Every timed run of one thing."""

    scenario: str
    key: str
    label: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def best(self) -> Sample:
        return min(self.samples, key=lambda s: s.seconds)

    @property
    def median_seconds(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "key": self.key, "label": self.label,
            "n": self.best.n, "best_seconds": round(self.best.seconds, 4),
            "median_seconds": round(self.median_seconds, 4),
            "best_per_s": round(self.best.rate, 1),
            "samples": [s.to_json() for s in self.samples],
        }


class Results:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Row] = {}
        self.order: list[Row] = []
        self.notes: dict[str, Any] = {}

    def add(self, scenario: str, key: str, label: str, sample: Sample) -> None:
        row = self.rows.get((scenario, key))
        if row is None:
            row = self.rows[(scenario, key)] = Row(scenario, key, label)
            self.order.append(row)
        row.samples.append(sample)
        s = sample
        server = "" if s.server_cpu is None else f", server CPU {s.server_cpu:.2f} s"
        print(f"  {label:<58} {s.n:>10,} in {s.seconds:8.2f} s  {s.rate:>11,.0f}/s  "
              f"(CPU {s.cpu:.2f} s{server})", flush=True)

    def get(self, scenario: str, key: str) -> Row | None:
        return self.rows.get((scenario, key))


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
        return Sample(n, clock.wall, clock.cpu)
    with running() as server:
        with Clock(server, spark=True) as clock:
            (df.write.format("beanstalk").option("url", server.url).option("tube", TUBE)
             .option("priority", str(PRI)).option("ttr", str(TTR)).mode("append").save())
        stats = tube_stats(server)
    if stats["current-jobs-ready"] != n or stats["total-jobs"] != n:
        raise RuntimeError(f"Spark wrote {n} rows; stats-tube says {stats['total-jobs']} jobs, "
                           f"{stats['current-jobs-ready']} ready")
    return Sample(n, clock.wall, clock.cpu, clock.server_cpu, {"jobs_counted": n})


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
    return Sample(n, clock.wall, clock.cpu, clock.server_cpu, {"jobs_counted": n})


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


def run_write(spark: SparkSession, args: argparse.Namespace, results: Results) -> None:
    n, p = args.rows, args.partitions
    print(f"## write: {n:,} rows of 64-100 B, {p} partitions, local[2], window {WINDOW}",
          flush=True)
    check_bodies(spark, n, p)
    # Warm-up (untimed): the JVM's code paths, the Python workers, the formats' lookups.
    for fmt in ("noop", "bench_arrow", "bench_puts", "beanstalk"):
        spark_write(spark, min(n, 20_000), p, fmt)
    put_many_write(min(n, 20_000))
    for _ in range(args.repeats):
        for _ in range(3):
            results.add("write", "spark-overhead", "Spark beanstalk write of 10 rows (fixed cost)",
                        spark_write(spark, 10, p, "beanstalk"))
        results.add("write", "spark-noop", 'Spark write to format("noop")',
                    spark_write(spark, n, p, "noop"))
        results.add("write", "spark-arrow", "Spark write to a Python sink counting Arrow rows",
                    spark_write(spark, n, p, "bench_arrow"))
        results.add("write", "spark-puts", "... that also makes and encodes each row's Put",
                    spark_write(spark, n, p, "bench_puts"))
        results.add("write", "spark", 'Spark df.write.format("beanstalk")',
                    spark_write(spark, n, p, "beanstalk"))
        results.add("write", "put_many", "one process: Client.put_many",
                    put_many_write(n))


# -- scenario 2: stream ------------------------------------------------------------------------


def spark_stream(spark: SparkSession, m: int, max_jobs: int, scratch: Path) -> Sample:
    """Read ``m`` pre-filled jobs with a streaming query until all are deleted."""
    batches: list[tuple[float, int]] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        batches.append((time.perf_counter(), batch.count()))

    with running() as server:
        prefill(server, m)
        checkpoint = scratch / f"checkpoint-{uuid.uuid4().hex[:8]}"
        reader = (spark.readStream.format("beanstalk").option("url", server.url)
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
    extra: dict[str, Any] = {"batches_with_rows": len(data), "batches": len(batches),
                             "max_jobs_per_batch": max_jobs,
                             "stop_s_untimed": round(stop_s, 3)}
    if data:
        extra["first_batch_s"] = round(data[0][0] - clock.started, 3)
        if len(data) > 1:
            steady = sum(c for _, c in data[1:]) / (data[-1][0] - data[0][0])
            extra["steady_jobs_per_s"] = round(steady, 1)
    return Sample(m, clock.wall, clock.cpu, clock.server_cpu, extra)


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
    return Sample(m, clock.wall, clock.cpu, clock.server_cpu)


def run_stream(spark: SparkSession, args: argparse.Namespace, scratch: Path,
               results: Results) -> None:
    m = args.jobs
    sizes = args.batch_sizes
    print(f"## stream: {m:,} pre-filled jobs, maxJobsPerBatch {' and '.join(map(str, sizes))}",
          flush=True)
    spark_stream(spark, min(m, 5_000), max(sizes), scratch)  # warm-up
    for _ in range(args.repeats):
        for size in sizes:
            results.add("stream", f"spark-{size}",
                        f"Spark readStream, maxJobsPerBatch={size}",
                        spark_stream(spark, m, size, scratch))
        results.add("stream", "python", "one process: reserve+delete, call_many x1024",
                    python_drain(m))


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


def python_metrics_child(files: Sequence[str]) -> dict[str, Any]:
    """In a fresh process: a parse-only pass (``json.loads`` of every line), then the metrics
    pass; times, CPU, RSS before and peak RSS, and the metrics."""
    loads = json.loads
    start_rss = _status_kib("VmRSS")
    began, cpu = time.perf_counter(), time.process_time()
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                loads(line)
    parse_s, parse_cpu = time.perf_counter() - began, time.process_time() - cpu
    began, cpu = time.perf_counter(), time.process_time()
    stats, lines, tracked = python_metrics(files)
    seconds, cpu_s = time.perf_counter() - began, time.process_time() - cpu
    return {
        "parse_s": parse_s, "parse_cpu_s": parse_cpu, "seconds": seconds, "cpu_s": cpu_s,
        "lines": lines, "jobs_tracked": tracked, "start_rss_kib": start_rss,
        "peak_rss_kib": _status_kib("VmHWM"),
        "stats": stats,
    }


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


def run_metrics(spark: SparkSession, args: argparse.Namespace, scratch: Path,
                results: Results) -> None:
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
    python: dict[str, Any] = {}
    spark_rows: list[Any] = []
    for _ in range(args.repeats):
        with Clock(spark=True) as clock:
            counted = read_summary(spark, directory)
        results.add("metrics", "spark-read", "Spark read_events: read, parse, filter (agg)",
                    Sample(int(counted), clock.wall, clock.cpu))
        with Clock(spark=True) as clock:
            spark_rows = job_metrics(spark, directory).collect()
        results.add("metrics", "spark", "Spark job_metrics(...).collect()",
                    Sample(total if "reused" not in generated else int(counted),
                           clock.wall, clock.cpu, None, {"rows": len(spark_rows)}))
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            python = pool.submit(python_metrics_child, files).result()
        lines = python["lines"]
        results.add("metrics", "python-parse", "one process: json.loads of every line only",
                    Sample(lines, python["parse_s"], python["parse_cpu_s"]))
        results.add("metrics", "python", "one process: the same metrics in one pass",
                    Sample(lines, python["seconds"], python["cpu_s"], None, {
                        "peak_rss_mib": round(python["peak_rss_kib"] / 1024, 1),
                        "start_rss_mib": round(python["start_rss_kib"] / 1024, 1),
                        "jobs_tracked": python["jobs_tracked"]}))
    check = compare(spark_rows, python["stats"])
    results.notes["metrics"] = {
        "events": generated, "check": check,
        "peak_rss_mib": round(python["peak_rss_kib"] / 1024, 1),
        "start_rss_mib": round(python["start_rss_kib"] / 1024, 1),
        "jobs_tracked": python["jobs_tracked"],
    }
    print(f"  check: {'the two agree' if check['agree'] else 'THEY DISAGREE'} on "
          f"{check['rows']} (system, queue, day) rows, {check['durations']:,} durations; "
          f"max relative difference: mean {check['max_rel_diff_mean']:.1e}, variance "
          f"{check['max_rel_diff_variance']:.1e}", flush=True)
    for problem in check["problems"]:
        print(f"    {problem}")
    if not args.events_dir:
        shutil.rmtree(directory, ignore_errors=True)


# -- reporting ---------------------------------------------------------------------------------


def ratio(results: Results, a: tuple[str, str], b: tuple[str, str]) -> float | None:
    """How many times faster ``a`` is than ``b`` (best runs, same n)."""
    x, y = results.get(*a), results.get(*b)
    if x is None or y is None:
        return None
    return (x.best.n / x.best.seconds) / (y.best.n / y.best.seconds)


def cpu_ratio(results: Results, a: tuple[str, str], b: tuple[str, str]) -> float | None:
    """How many times ``b``'s CPU per item ``a`` spends (best runs; for Spark, the whole
    process tree)."""
    x, y = results.get(*a), results.get(*b)
    if x is None or y is None or y.best.cpu <= 0:
        return None
    return (x.best.cpu / x.best.n) / (y.best.cpu / y.best.n)


def breakdown(results: Results) -> list[dict[str, Any]]:
    """Where a Spark beanstalk write's time goes: each stage's increment over the previous
    one, in wall time and CPU of the process tree, per row."""
    stages = [("spark-noop", "the JVM makes the rows (noop)"),
              ("spark-arrow", "+ rows to Arrow, over to the Python workers"),
              ("spark-puts", "+ jobwire's row code, Put objects, encoding"),
              ("spark", "+ pipelined socket I/O, replies, beanstalkd")]
    overhead = results.get("write", "spark-overhead")
    out: list[dict[str, Any]] = []
    if overhead is not None:
        s = min(overhead.samples, key=lambda x: x.seconds)
        out.append({"stage": "a Spark job of 10 rows (fixed cost)", "wall_s": s.seconds,
                    "cpu_s": s.cpu, "wall_us_per_row": None, "cpu_us_per_row": None})
    previous: Sample | None = None
    for key, label in stages:
        row = results.get("write", key)
        if row is None:
            continue
        s = row.best
        wall = s.seconds - (previous.seconds if previous else 0.0)
        cpu = s.cpu - (previous.cpu if previous else 0.0)
        out.append({"stage": label, "wall_s": wall, "cpu_s": cpu,
                    "wall_us_per_row": wall / s.n * 1e6, "cpu_us_per_row": cpu / s.n * 1e6})
        previous = s
    return out


def markdown_table(results: Results) -> str:
    lines = ["| scenario | what | n | best s | median s | per s | CPU s | server CPU s |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for row in results.order:
        s = row.best
        server = "" if s.server_cpu is None else f"{s.server_cpu:.2f}"
        lines.append(f"| {row.scenario} | {row.label} | {s.n:,} | {s.seconds:.2f} "
                     f"| {row.median_seconds:.2f} | {s.rate:,.0f} | {s.cpu:.2f} | {server} |")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    cpu_model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    try:
        bs_version = subprocess.run([find_binary("beanstalkd"), "-v"], capture_output=True,
                                    text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError, SystemExit):
        bs_version = "?"
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True,
                              timeout=10).stderr.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        java = "?"
    load: tuple[float, ...] = ()
    with contextlib.suppress(OSError):
        load = os.getloadavg()
    return {
        "cpu_count": os.cpu_count(), "cpu_model": cpu_model,
        "load_average_at_start": [round(x, 2) for x in load],
        "python": platform.python_version(), "platform": platform.platform(),
        "beanstalkd": bs_version, "java": java,
        "packages": {d: version(d) for d in ("jobwire", "pyspark", "pyarrow")},
    }


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark jobwire.spark against one plain Python process: a beanstalk "
        "write, a streaming read, and the job-metrics pipeline; ratios and where the time "
        "goes.")
    parser.add_argument("--quick", action="store_true",
                        help="a tenth of the counts (100,000 rows, 20,000 jobs, 1,000,000 "
                        "events): a smoke run of 2-3 minutes")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help="comma-separated subset of: " + ", ".join(SCENARIOS))
    parser.add_argument("--rows", type=int, help="write: rows (default 1,000,000)")
    parser.add_argument("--partitions", type=int, default=2,
                        help="write: partitions of the DataFrame = tasks = connections "
                        "(default 2, one per core of local[2])")
    parser.add_argument("--jobs", type=int, help="stream: pre-filled jobs (default 200,000)")
    parser.add_argument("--max-jobs-per-batch", default=f"{DEFAULT_MAX_JOBS},5000,20000",
                        metavar="SIZES",
                        help="stream: the maxJobsPerBatch values to run, comma-separated "
                        f"(default {DEFAULT_MAX_JOBS} (the option's default),5000,20000)")
    parser.add_argument("--events", type=int, help="metrics: events (default 10,000,000)")
    parser.add_argument("--events-dir",
                        help="metrics: keep the generated events here (kept afterwards); if it "
                        "holds event files already, use them instead of generating")
    parser.add_argument("--shuffle-partitions", type=int, default=8,
                        help="metrics: spark.sql.shuffle.partitions (default 8)")
    parser.add_argument("--driver-memory", default="3g",
                        help="spark.driver.memory, the local[2] heap (default 3g)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed runs per row (default 1)")
    parser.add_argument("--json", "--out", dest="json", type=Path, default=DEFAULT_JSON,
                        metavar="PATH",
                        help=f"JSON results file (default {DEFAULT_JSON.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    args.rows = args.rows or 1_000_000 // scale
    args.jobs = args.jobs or 200_000 // scale
    args.events = args.events or 10_000_000 // scale
    for name in ("rows", "jobs", "events", "partitions", "shuffle_partitions", "repeats"):
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
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}",
              file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, terminate)
    wall = time.perf_counter()
    env = environment()
    print(f"# Spark benchmark{' (quick)' if args.quick else ''}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), load average at start "
          f"{env['load_average_at_start']}, Python {env['python']}, PySpark "
          f"{env['packages']['pyspark']}, {env['java']}, {env['beanstalkd']}")
    print("Spark local[2]; CPU s = the whole process tree (JVM + Python workers) for Spark "
          "rows, this process for plain-Python rows\n", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="jobwire-bench-spark-"))
    results = Results()
    session = None
    try:
        began = time.perf_counter()
        session = spark = spark_session(args.driver_memory, scratch)
        print(f"SparkSession started in {time.perf_counter() - began:.1f} s\n", flush=True)
        runners: dict[str, Callable[[], None]] = {
            "write": lambda: run_write(spark, args, results),
            "stream": lambda: run_stream(spark, args, scratch, results),
            "metrics": lambda: run_metrics(spark, args, scratch, results),
        }
        for scenario in scenarios:
            runners[scenario]()
    finally:
        if session is not None:
            session.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    pairs = [("write: Spark write / put_many", ("write", "spark"), ("write", "put_many"))]
    pairs += [(f"stream: Spark maxJobsPerBatch={size} / reserve+delete loop",
               ("stream", f"spark-{size}"), ("stream", "python")) for size in args.batch_sizes]
    pairs += [("metrics: Spark job_metrics / pure-Python pass",
               ("metrics", "spark"), ("metrics", "python")),
              ("metrics, reading only: Spark read_events / json.loads per line",
               ("metrics", "spark-read"), ("metrics", "python-parse"))]
    ratios = {name: (ratio(results, a, b), cpu_ratio(results, a, b)) for name, a, b in pairs}
    elapsed = time.perf_counter() - wall
    print()
    print(markdown_table(results))
    print("\nratios (best runs): speed (> 1: Spark is faster), CPU per item (> 1: Spark "
          "spends more)")
    for name, (speed, cpu) in ratios.items():
        if speed is not None and cpu is not None:
            print(f"  {name:<62} speed {speed:5.2f}x   CPU {cpu:5.2f}x")
    stages = breakdown(results)
    if stages:
        print("\nwhere a Spark beanstalk write's time goes (increments; CPU of the whole tree)")
        for stage in stages:
            per_row = ("" if stage["wall_us_per_row"] is None else
                       f"  {stage['wall_us_per_row']:6.2f} µs/row wall, "
                       f"{stage['cpu_us_per_row']:6.2f} µs/row CPU")
            print(f"  {stage['stage']:<48} {stage['wall_s']:7.2f} s wall {stage['cpu_s']:7.2f} "
                  f"s CPU{per_row}")
    if results.get("stream", "python") is not None:
        print()
    for size in args.batch_sizes:
        stream = results.get("stream", f"spark-{size}")
        if stream is None:
            continue
        extra = stream.best.extra
        steady = extra.get("steady_jobs_per_s")
        after = "" if steady is None else f", then {steady:,.0f} jobs/s"
        print(f"stream, maxJobsPerBatch={size}: {extra['batches_with_rows']} batches with rows "
              f"({extra['batches']} in all); the first after {extra.get('first_batch_s', '?')} "
              f"s{after}; beanstalkd CPU {stream.best.server_cpu or 0:.2f} s")
    metrics = results.notes.get("metrics")
    if metrics is not None:
        print(f"\nmetrics: pure-Python pass peak RSS {metrics['peak_rss_mib']:,.0f} MiB "
              f"(RSS {metrics['start_rss_mib']:,.0f} MiB before it; "
              f"{metrics['jobs_tracked']:,} jobs tracked); Spark and Python "
              f"{'agree' if metrics['check']['agree'] else 'DISAGREE'}")
    print(f"\nwall time {elapsed:.0f} s")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "environment": env,
        "config": {
            "quick": args.quick, "repeats": args.repeats, "scenarios": scenarios,
            "master": "local[2]", "driver_memory": args.driver_memory,
            "rows": args.rows, "partitions": args.partitions, "window": WINDOW,
            "body_bytes": "64-100", "put_args": {"priority": PRI, "delay": DELAY, "ttr": TTR},
            "jobs": args.jobs,
            "max_jobs_per_batch": args.batch_sizes,
            "events": args.events, "shuffle_partitions": args.shuffle_partitions,
            "statistic": "best of the timed runs (shortest); median also given",
            "wall_time_s": round(elapsed, 1),
        },
        "results": [row.to_json() for row in results.order],
        "ratios": {name: {"speed": None if speed is None else round(speed, 4),
                          "cpu_per_item": None if cpu is None else round(cpu, 4)}
                   for name, (speed, cpu) in ratios.items()},
        "write_breakdown": [{k: (round(v, 4) if isinstance(v, float) else v)
                             for k, v in stage.items()} for stage in stages],
        "metrics": metrics,
    }, indent=2, ensure_ascii=False, default=str) + "\n")
    print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
