"""The job-metrics pipeline: a directory of job lifecycle events (``jobwire.events``) in,
qless's statistics for every system out, per (system, queue, UTC day).

    from jobwire.spark.metrics import job_metrics, write_metrics, plot_histograms
    metrics = job_metrics(spark, "/var/log/jobwire-events")
    write_metrics(metrics, "/data/job-metrics")            # <out>/metrics.parquet
    plot_histograms(metrics, "/data/job-metrics")          # <out>/<system>-<queue>.png

    python -m jobwire.spark.metrics /var/log/jobwire-events --out /data/job-metrics

The result has one row per (system, queue, day) and the schema :data:`METRICS_SCHEMA`, the
shape of qless's own ``stats`` answer (``qless_client.Stats``):

    system: string, queue: string, day: date (UTC),
    wait: struct<total: long, mean: double, variance: double, histogram: array<long>[148]>,
    run:  struct<total: long, mean: double, variance: double, histogram: array<long>[148]>,
    failures: long, retries: long, failed: long

How each number is made (the rules are those of docs/events.md; docs/spark.md, "Job metrics",
says the rest):

* Events of one job are ordered by ``time``; at the same instant a wait's start
  (``put``/``released``/``retried``) comes first, then ``reserved``, then the ends
  (``completed``/``failed``/``buried``/``lost``). The order is a Spark window over
  (system, job): nothing but the final table reaches the driver.
* **wait** = ``reserved.time - put_time``; without a ``put_time``, ``reserved.time -`` the
  latest wait start of the job before it. Counted on the day of the ``reserved`` event. A
  ``reserved`` event with neither is not counted.
* **run** = ``completed.time -`` the latest ``reserved`` of the job before it, on the day of
  the ``completed`` event.
* A negative duration (clocks of different machines) counts as 0 s, as qless's script does.
* **failures**, **retries**: ``failed``/``retried`` events on that day. **failed**: jobs whose
  latest event (over all queues) is a ``failed`` of that day, queue and system: qless's
  "currently failed".
* mean and sample variance (n - 1; 0 below 2 values) are numerically stable: per histogram
  bucket, Spark's ``avg``/``var_pop`` of the durations minus the bucket's smallest one (Spark
  updates them per row as Welford does and merges partitions with Chan's formulas), then
  Chan's parallel merge over the buckets: ``M2 = sum(M2_b + n_b * (mean_b - mean)^2)``. No
  sum of squares is ever formed.
* The histogram: qless-core's 148 buckets (``qless_client.script.BUCKETS``: ``s0``..``s59``,
  ``m1``..``m59``, ``h1``..``h23``, ``d1``..``d6``; half-open). A duration of 7 days or more
  counts in ``total`` and ``mean`` but in no bucket, as in qless-core's ``stats``; see
  :func:`bucket_index`. (qless-core's ``stats`` reports ``count`` and ``std``: ``total`` and
  ``variance`` here are the same count and ``std`` squared.)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from qless_client.script import BUCKETS

__all__ = [
    "BUCKETS",
    "DURATIONS_SCHEMA",
    "EVENTS_SCHEMA",
    "METRICS_SCHEMA",
    "bucket_index",
    "job_durations",
    "job_metrics",
    "main",
    "metrics_from_events",
    "plot_histograms",
    "read_events",
    "write_metrics",
]

#: The columns of an event file (docs/events.md), as the pipeline reads them.
EVENTS_SCHEMA = StructType([
    StructField("v", LongType()),
    StructField("event", StringType()),
    StructField("time", DoubleType()),
    StructField("system", StringType()),
    StructField("queue", StringType()),
    StructField("job", StringType()),
    StructField("worker", StringType()),
    StructField("put_time", DoubleType()),
    StructField("group", StringType()),
    StructField("attempt", LongType()),
])

_SUMMARY = StructType([
    StructField("total", LongType()),
    StructField("mean", DoubleType()),
    StructField("variance", DoubleType()),
    StructField("histogram", ArrayType(LongType())),
])

#: The schema of :func:`job_metrics`: one row per (system, queue, day). No value is ever null
#: (Spark marks some fields nullable all the same, and Parquet stores every one as nullable).
METRICS_SCHEMA = StructType([
    StructField("system", StringType()),
    StructField("queue", StringType()),
    StructField("day", DateType()),
    StructField("wait", _SUMMARY),
    StructField("run", _SUMMARY),
    StructField("failures", LongType()),
    StructField("retries", LongType()),
    StructField("failed", LongType()),
])

#: The schema of :func:`job_durations`: one row per counted wait or run (no null values).
DURATIONS_SCHEMA = StructType([
    StructField("system", StringType()),
    StructField("queue", StringType()),
    StructField("day", DateType()),
    StructField("kind", StringType()),
    StructField("job", StringType()),
    StructField("seconds", DoubleType()),
])

_DAY = 86400
_KEYS = ["system", "queue", "day"]
_WAIT_STARTS = ("put", "released", "retried")
_ENDS = ("completed", "failed", "buried", "lost")
_EVENTS = (*_WAIT_STARTS, "reserved", *_ENDS)
#: (first bucket index, duration below which it applies, seconds per bucket, first unit)
_RANGES = (
    (0, 60.0, 1, 0),  # s0..s59
    (60, 3600.0, 60, 1),  # m1..m59
    (119, float(_DAY), 3600, 1),  # h1..h23
)
_FIRST_DAY_BUCKET = 142  # d1; d7 and later (index 148 on) are in no bucket of the histogram
_NBUCKETS = len(BUCKETS)


def bucket_index(seconds: Column) -> Column:
    """The histogram bucket (0..147, the position in :data:`BUCKETS`) of a duration column in
    seconds, as qless-core's script picks it: negative counts as 0, ``floor`` per unit,
    half-open ranges; 148 and up for 7 days or more (``d7``...: in no bucket of the
    histogram). A null duration gives null."""
    x = F.greatest(seconds, F.lit(0.0))

    def index(first: int, unit: int, first_unit: int) -> Column:
        return F.floor(x / unit).cast("int") + (first - first_unit)

    first, below, unit, first_unit = _RANGES[0]
    out = F.when(x < below, index(first, unit, first_unit))
    for first, below, unit, first_unit in _RANGES[1:]:
        out = out.when(x < below, index(first, unit, first_unit))
    days = F.floor(x / _DAY).cast("int")
    return out.otherwise(days + (_FIRST_DAY_BUCKET - 1)).cast("int")


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def read_events(spark: SparkSession, events_dir: str | os.PathLike[str]) -> DataFrame:
    """The events of ``events_dir`` (every ``*.jsonl`` and ``*.parquet`` file in it, not in
    sub-folders; Parquet files still being written are hidden ``.part`` files and skipped) as
    a DataFrame of :data:`EVENTS_SCHEMA`.

    Lines that are not JSON objects of the schema (a line cut short by a crashed writer), rows
    without ``event``, ``time``, ``system``, ``queue`` or ``job``, with an unknown event, a
    non-finite time or a ``v`` other than 1, are left out. A non-finite ``put_time`` reads as
    null. Lazy: Spark reads the files when the result is used.

    Raises:
        FileNotFoundError: a local ``events_dir`` that does not exist.
        NotADirectoryError: a local ``events_dir`` that is not a directory.
        TypeError: ``spark`` is not a SparkSession.
    """
    if not callable(getattr(getattr(spark, "read", None), "json", None)):  # classic or Connect
        raise TypeError(f"spark is a SparkSession, not {type(spark).__name__}")
    path = os.fspath(events_dir)
    if _is_local(path):
        local = Path(path.removeprefix("file://"))
        if not local.exists():
            raise FileNotFoundError(f"no events directory at {path!r}")
        if not local.is_dir():
            raise NotADirectoryError(f"the events path {path!r} is not a directory")
    jsonl = (
        spark.read.schema(EVENTS_SCHEMA).option("mode", "PERMISSIVE")
        .option("pathGlobFilter", "*.jsonl").json(path)
    )
    parquet = spark.read.schema(EVENTS_SCHEMA).option("pathGlobFilter", "*.parquet").parquet(path)
    events = jsonl.unionByName(parquet)
    finite = F.col("time").isNotNull() & ~F.isnan("time") & (F.abs("time") < float("inf"))
    kept = events.where(
        finite
        & F.col("event").isin(*_EVENTS)
        & F.col("system").isNotNull()
        & F.col("queue").isNotNull()
        & F.col("job").isNotNull()
        & (F.col("v").isNull() | (F.col("v") == 1))
    )
    put_time = F.col("put_time")
    finite_put = put_time.isNotNull() & ~F.isnan(put_time) & (F.abs(put_time) < float("inf"))
    return kept.withColumn("put_time", F.when(finite_put, put_time))


def _day(time: Column) -> Column:
    """The UTC day of an epoch-seconds column, whatever the session's time zone."""
    return F.date_from_unix_date(F.floor(time / _DAY).cast("int"))


def _rank() -> Column:
    """Order of events at the same instant: wait starts, then reserved, then ends."""
    return (
        F.when(F.col("event").isin(*_WAIT_STARTS), 0)
        .when(F.col("event") == "reserved", 1)
        .otherwise(2)
    )


def _matched(events: DataFrame) -> DataFrame:
    """Every event with its ``day``, ``kind`` (``wait``/``run``/null), ``seconds`` (null when
    not a counted duration) and ``last`` (no later event of the job): one window over
    (system, job) ordered by time, then rank."""
    job = Window.partitionBy("system", "job").orderBy("time", "_rank", "event")
    before = job.rowsBetween(Window.unboundedPreceding, -1)
    event = F.col("event")
    matched = (
        events.select("system", "queue", "job", "event", "time", "put_time")
        .withColumn("_rank", _rank())
        .withColumn("_start", F.last(F.when(event.isin(*_WAIT_STARTS), F.col("time")), True)
                    .over(before))
        .withColumn("_reserved", F.last(F.when(event == "reserved", F.col("time")), True)
                    .over(before))
        .withColumn("last", F.lead(F.lit(1)).over(job).isNull())
    )
    since = (
        F.when(event == "reserved", F.coalesce("put_time", "_start"))
        .when(event == "completed", F.col("_reserved"))
    )
    counted = since.isNotNull()
    return matched.select(
        "system", "queue", _day(F.col("time")).alias("day"), "job", "event", "last",
        F.when(counted & (event == "reserved"), "wait")
        .when(counted & (event == "completed"), "run").alias("kind"),
        F.when(counted, F.greatest(F.col("time") - since, F.lit(0.0))).alias("seconds"),
    )


def job_durations(events: DataFrame) -> DataFrame:
    """Every wait and run the events show, as a DataFrame of :data:`DURATIONS_SCHEMA`
    (``kind`` is ``"wait"`` or ``"run"``; ``day`` is the UTC day of the ``reserved`` or
    ``completed`` event; ``seconds`` is at least 0). ``events`` has the columns of
    :data:`EVENTS_SCHEMA` (as :func:`read_events` gives them). Lazy."""
    return (
        _matched(events).where(F.col("kind").isNotNull())
        .select("system", "queue", "day", "kind", "job", "seconds")
    )


def _empty_summary() -> Column:
    return F.struct(
        F.lit(0).cast("long").alias("total"),
        F.lit(0.0).alias("mean"),
        F.lit(0.0).alias("variance"),
        F.array_repeat(F.lit(0).cast("long"), _NBUCKETS).alias("histogram"),
    )


def metrics_from_events(events: DataFrame) -> DataFrame:
    """:func:`job_metrics` of an events DataFrame (the columns of :data:`EVENTS_SCHEMA`). Lazy.

    Plan: the job window (:func:`_matched`), then moments and counts per (system, queue, day,
    kind, bucket), then Chan's merge per (system, queue, day, kind) and one row per
    (system, queue, day). Two shuffles: the job window's, on (system, job), and one on
    (system, queue, day) that every later step keeps."""
    event = F.col("event")
    facts = (
        _matched(events)
        .withColumn("failures", (event == "failed").cast("long"))
        .withColumn("retries", (event == "retried").cast("long"))
        .withColumn("failed", ((event == "failed") & F.col("last")).cast("long"))
        .where(F.col("kind").isNotNull() | event.isin("failed", "retried"))
        .withColumn("bucket", bucket_index(F.col("seconds")))
        .repartition(*_KEYS)  # every later step groups by (system, queue, day, ...)
    )
    # Moments per bucket of the durations shifted by the bucket's smallest one (so that the
    # running mean is small and keeps its precision): Spark's avg and var_pop (Welford per
    # row, Chan per partition).
    bucket = Window.partitionBy(*_KEYS, "kind", "bucket")
    shifted = F.col("seconds") - F.col("shift")
    per_bucket = facts.withColumn("shift", F.min("seconds").over(bucket)).groupBy(
        *_KEYS, "kind", "bucket"
    ).agg(
        F.count("seconds").alias("n"),
        (F.max("shift") + F.avg(shifted)).alias("mean_b"),
        F.var_pop(shifted).alias("var_b"),
        F.sum("failures").alias("failures"),
        F.sum("retries").alias("retries"),
        F.sum("failed").alias("failed"),
    )
    # Chan's merge over the buckets: mean = sum(n_b mean_b) / n,
    # M2 = sum(n_b var_b + n_b (mean_b - mean)^2).
    kind = Window.partitionBy(*_KEYS, "kind")
    n = F.col("n")
    per_bucket = per_bucket.withColumn(
        "mean", F.sum(n * F.col("mean_b")).over(kind) / F.sum(n).over(kind)
    )
    spread = n * F.col("var_b") + n * F.pow(F.col("mean_b") - F.col("mean"), 2)
    per_kind = per_bucket.groupBy(*_KEYS, "kind").agg(
        F.sum(n).alias("total"),
        F.max("mean").alias("mean"),
        F.sum(spread).alias("m2"),
        F.map_from_entries(
            F.collect_list(F.when(n > 0, F.struct("bucket", "n")))
        ).alias("counts"),
        F.sum("failures").alias("failures"),
        F.sum("retries").alias("retries"),
        F.sum("failed").alias("failed"),
    )
    total = F.col("total")
    summary = F.struct(
        total.cast("long").alias("total"),
        F.col("mean").alias("mean"),
        F.when(total > 1, F.col("m2") / (total - 1)).otherwise(0.0).alias("variance"),
        F.transform(
            F.sequence(F.lit(0), F.lit(_NBUCKETS - 1)),
            lambda i: F.coalesce(F.col("counts")[i], F.lit(0).cast("long")),
        ).alias("histogram"),
    )
    per_day = per_kind.groupBy(*_KEYS).agg(
        F.first(F.when(F.col("kind") == "wait", summary), True).alias("wait"),
        F.first(F.when(F.col("kind") == "run", summary), True).alias("run"),
        F.sum("failures").alias("failures"),
        F.sum("retries").alias("retries"),
        F.sum("failed").alias("failed"),
    )
    return per_day.select(
        *_KEYS,
        F.coalesce("wait", _empty_summary()).alias("wait"),
        F.coalesce("run", _empty_summary()).alias("run"),
        "failures",
        "retries",
        "failed",
    )


def job_metrics(spark: SparkSession, events_dir: str | os.PathLike[str]) -> DataFrame:
    """The qless statistics of every (system, queue, UTC day) that the events in
    ``events_dir`` show, as a DataFrame of :data:`METRICS_SCHEMA` (in no particular order;
    :func:`write_metrics` orders it). Lazy: the work is done when the result is used.

    Raises:
        FileNotFoundError, NotADirectoryError, TypeError: see :func:`read_events`.
    """
    return metrics_from_events(read_events(spark, events_dir))


def write_metrics(metrics: DataFrame, out_dir: str | os.PathLike[str]) -> str:
    """Write ``metrics`` as Parquet to ``<out_dir>/metrics.parquet`` (a Spark dataset folder,
    replaced if it exists; one file, ordered by system, queue and day: the table is small)
    and return that path."""
    path = os.path.join(os.fspath(out_dir), "metrics.parquet")
    metrics.repartition(1).sortWithinPartitions(*_KEYS).write.mode("overwrite").parquet(path)
    return path


def _file_stem(system: str, queue: str) -> str:
    """``<system>-<queue>``, with characters unsafe in a file name replaced (and then a short
    hash of the real name, so two queues never share a file)."""
    name = f"{system}-{queue}"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if safe != name:
        safe += "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return safe


#: What each bucket name's letter stands for (the axis label says it for the letters shown).
_UNITS = {"s": "seconds", "m": "minutes", "q": "quarter hours", "h": "hours", "d": "days"}


def plot_histograms(
    metrics: DataFrame, out_dir: str | os.PathLike[str], *, max_plots: int = 50
) -> list[Path]:
    """Draw the wait and run histograms of each (system, queue), summed over the days in
    ``metrics``, to ``<out_dir>/<system>-<queue>.png`` (one figure per queue: wait above, run
    below). Each shows only the buckets that hold jobs, in bucket order, named on the axis
    (a dashed line marks where empty buckets were left out), with each bar's count written on
    it and their sum in the title. Counts are on a log scale when they span more than a factor
    of 100. At most ``max_plots`` queues, those with the most waits and runs. One Spark job;
    only the summed histograms reach the driver.

    Returns:
        the PNG files written, in (system, queue) order.

    Raises:
        ValueError: ``max_plots`` is below 1.
        ImportError: matplotlib is not installed (it comes with ``jobwire[spark]``).
    """
    if isinstance(max_plots, bool) or not isinstance(max_plots, int) or max_plots < 1:
        raise ValueError(f"max_plots must be an int >= 1, not {max_plots!r}")
    from matplotlib.figure import Figure

    per_queue = metrics.groupBy("system", "queue").agg(
        F.sum(F.col("wait.total") + F.col("run.total")).alias("jobs"),
        F.min("day").alias("first"),
        F.max("day").alias("last"),
    )
    top = per_queue.orderBy(F.desc("jobs"), "system", "queue").limit(max_plots)
    sums = (
        metrics.join(top.select("system", "queue"), ["system", "queue"])
        .select("system", "queue",
                F.arrays_zip(F.col("wait.histogram").alias("w"),
                             F.col("run.histogram").alias("r")).alias("pairs"))
        .select("system", "queue", F.posexplode("pairs").alias("bucket", "pair"))
        .groupBy("system", "queue", "bucket")
        .agg(F.sum("pair.w").alias("wait"), F.sum("pair.r").alias("run"))
        .join(top, ["system", "queue"])
    )
    nbuckets = len(BUCKETS)
    heads: dict[tuple[str, str], Any] = {}
    counts: dict[tuple[str, str], dict[str, list[int]]] = {}
    for row in sums.collect():
        key = (row["system"], row["queue"])
        heads[key] = row
        slot = counts.setdefault(key, {"wait": [0] * nbuckets, "run": [0] * nbuckets})
        slot["wait"][row["bucket"]] = int(row["wait"] or 0)
        slot["run"][row["bucket"]] = int(row["run"] or 0)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for system, queue in sorted(counts):
        head = heads[(system, queue)]
        days = f"{head['first']}" + (f" .. {head['last']}" if head["last"] != head["first"] else "")
        kinds = counts[(system, queue)]
        widest = max(sum(1 for v in kinds[k] if v) for k in ("wait", "run"))
        fig = Figure(figsize=(max(9.0, min(24.0, 3.0 + 0.45 * widest)), 7), layout="constrained")
        axes = fig.subplots(2, 1)
        for ax, kind in zip(axes, ("wait", "run"), strict=True):
            _draw_histogram(ax, kinds[kind], f"{system} / {queue}: {kind} time", days)
        path = out / f"{_file_stem(system, queue)}.png"
        fig.savefig(path, format="png", dpi=90)
        written.append(path)
    return written


def _draw_histogram(ax: Any, values: Sequence[int], title: str, days: str) -> None:
    """One histogram on ``ax``: a bar per bucket that holds jobs (bucket order, named), its
    count on it, the total in the title."""
    from matplotlib.ticker import MaxNLocator

    shown = [i for i, v in enumerate(values) if v]
    total = sum(values)
    ax.set_title(f"{title}: {total:,} jobs in {len(shown)} bucket(s), {days} UTC", loc="left")
    ax.set_ylabel("jobs")
    if not shown:
        ax.text(0.5, 0.5, "none", transform=ax.transAxes, ha="center", va="center")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    heights = [values[i] for i in shown]
    bars = ax.bar(range(len(shown)), heights, width=0.8, color="#3b6ea8")
    if max(heights) > 100 * min(heights):
        ax.set_yscale("log")
        ax.set_ylim(0.5, max(heights) * 3)
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, max(heights) * 1.15)
    if len(shown) <= 60:
        ax.bar_label(bars, labels=[f"{h:,}" for h in heights], fontsize=8, padding=1)
    for k in range(1, len(shown)):
        if shown[k] - shown[k - 1] > 1:  # empty buckets left out here
            ax.axvline(k - 0.5, color="#999999", linewidth=0.8, linestyle="--")
    pad = max(0.0, (6 - len(shown)) / 2)  # a few buckets: bars of a sensible width
    ax.set_xlim(-0.6 - pad, len(shown) - 0.4 + pad)
    names = [BUCKETS[i] for i in shown]
    ax.set_xticks(range(len(shown)), names, rotation=90 if len(shown) > 24 else 0,
                  fontsize=8 if len(shown) > 24 else 9)
    units = sorted({n[0] for n in names}, key=lambda u: list(_UNITS).index(u)
                   if u in _UNITS else len(_UNITS))
    ax.set_xlabel("buckets holding jobs (" + ", ".join(
        f"{u}: {_UNITS.get(u, u)}" for u in units) + "); dashed line: empty buckets left out")


def _table(rows: Sequence[Any]) -> str:
    header = ("system", "queue", "day", "wait n", "wait mean s", "run n", "run mean s",
              "failures", "retries", "failed")
    lines = [header]
    for r in rows:
        lines.append((
            r["system"], r["queue"], str(r["day"]),
            str(r["wait"]["total"]), f"{r['wait']['mean']:.3f}",
            str(r["run"]["total"]), f"{r['run']['mean']:.3f}",
            str(r["failures"]), str(r["retries"]), str(r["failed"]),
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


def _session(master: str) -> SparkSession:
    from ._session import local_session

    return local_session("jobwire-metrics", master, partitions=max(2, os.cpu_count() or 2))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jobwire.spark.metrics EVENTS_DIR --out DIR``: compute the metrics with a
    SparkSession of its own, write ``DIR/metrics.parquet`` and a PNG per queue, and print a
    short table. Returns the exit status (2 for a bad argument or a missing directory)."""
    parser = argparse.ArgumentParser(
        prog="python -m jobwire.spark.metrics",
        description="qless-style job statistics (wait, run, failures, retries) per system, "
                    "queue and UTC day from a directory of jobwire event files.",
    )
    parser.add_argument("events_dir", help="directory of events-*.jsonl / *.parquet files")
    parser.add_argument("--out", required=True, help="output directory (created)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--max-plots", type=int, default=50,
                        help="PNGs for at most this many queues, the busiest (default 50)")
    parser.add_argument("--no-plots", action="store_true", help="write no PNG")
    parser.add_argument("--show", type=int, default=20, help="table rows printed (default 20)")
    args = parser.parse_args(argv)
    if args.max_plots < 1:
        parser.error("--max-plots must be >= 1")
    if args.show < 0:
        parser.error("--show must be >= 0")
    if _is_local(args.events_dir) and not Path(args.events_dir.removeprefix("file://")).is_dir():
        parser.error(f"no events directory at {args.events_dir!r}")
    spark = _session(args.master)
    try:
        path = write_metrics(job_metrics(spark, args.events_dir), args.out)
        metrics = spark.read.parquet(path)
        total = metrics.count()
        print(f"{total} row(s) (system, queue, day) written to {path}")
        if args.show:
            print(_table(metrics.orderBy(*_KEYS).limit(args.show).collect()))
            if total > args.show:
                print(f"... {total - args.show} more")
        if not args.no_plots:
            for png in plot_histograms(metrics, args.out, max_plots=args.max_plots):
                print(f"plot: {png}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
