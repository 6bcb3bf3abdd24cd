"""The job-metrics pipeline (jobwire.spark.metrics): hand-computed statistics of a small event
directory, qless's bucket edges, a variance a sum of squares would get wrong, the CLI end to
end, and the same numbers as qless's own ``stats`` for a real worker over a real Redis."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qless_client._scripts import BUCKETS, bucket_of

from .conftest import need_spark, spark_env

need_spark()
pytestmark = pytest.mark.spark

from pyspark.sql import types as T  # noqa: E402

from jobwire.spark.metrics import (  # noqa: E402
    EVENTS_SCHEMA,
    METRICS_SCHEMA,
    bucket_index,
    job_durations,
    job_metrics,
    read_events,
    write_metrics,
)

DAY = 86400
D0 = 19800 * DAY  # 2024-03-18 00:00 UTC
T0 = D0 + 3600.0  # 01:00 UTC
DAY0 = dt.date(2024, 3, 18)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def ev(event: str, time: float, job: str, *, system: str = "beanstalk", queue: str = "emails",
       put_time: float | None = None, group: str | None = None) -> dict[str, Any]:
    return {"v": 1, "event": event, "time": time, "system": system, "queue": queue, "job": job,
            "worker": "w1", "put_time": put_time, "group": group, "attempt": None}


def write_jsonl(path: Path, events: Iterable[dict[str, Any]], tail: str = "") -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + tail)


def write_parquet(path: Path, events: list[dict[str, Any]]) -> None:
    """The sink's Parquet layout (jobwire.events): int64, float64 and string columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        ("v", pa.int64()), ("event", pa.string()), ("time", pa.float64()),
        ("system", pa.string()), ("queue", pa.string()), ("job", pa.string()),
        ("worker", pa.string()), ("put_time", pa.float64()), ("group", pa.string()),
        ("attempt", pa.int64()),
    ])
    pq.write_table(pa.Table.from_pylist(events, schema=schema), str(path))


def histogram(seconds: Iterable[float]) -> list[int]:
    """qless's histogram, from qless_client's own bucket_of."""
    counts = Counter(bucket_of(s) for s in seconds)
    return [counts.get(name, 0) for name in BUCKETS]


def summary(seconds: list[float]) -> dict[str, Any]:
    """What the pipeline must answer, from Python's statistics module."""
    return {
        "total": len(seconds),
        "mean": statistics.fmean(seconds) if seconds else 0.0,
        "variance": statistics.variance(seconds) if len(seconds) > 1 else 0.0,
        "histogram": histogram(max(s, 0.0) for s in seconds),
    }


def check_summary(got: Any, want: dict[str, Any]) -> None:
    assert got["total"] == want["total"]
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-12, abs=1e-9)
    assert got["variance"] == pytest.approx(want["variance"], rel=1e-9, abs=1e-9)
    assert list(got["histogram"]) == want["histogram"]


def rows_by_key(df: Any) -> dict[tuple[str, str, dt.date], Any]:
    return {(r["system"], r["queue"], r["day"]): r for r in df.collect()}


def strip_nullability(t: T.DataType) -> T.DataType:
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, strip_nullability(f.dataType))
                             for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(strip_nullability(t.elementType))
    return t


# -- the hand-computed case ---------------------------------------------------------------------

# beanstalk "emails": no put_time, so waits come from put/released events.
b1_res = T0 + 59.999
b2_res2 = T0 + 3615
BEANSTALK = [
    ev("put", T0, "b1"), ev("reserved", b1_res, "b1"), ev("completed", b1_res + 60, "b1"),
    ev("put", T0, "b2"), ev("reserved", T0 + 3600, "b2"), ev("released", T0 + 3610, "b2"),
    ev("reserved", b2_res2, "b2"), ev("completed", b2_res2 + DAY, "b2"),  # run on day 1
    ev("put", T0 - 3 * DAY, "b3"), ev("reserved", T0, "b3"),
    ev("failed", T0 + 1, "b3", group="ValueError"),
    ev("put", T0 - 40 * DAY, "b4"), ev("reserved", T0 + 2, "b4"), ev("completed", T0 + 2.5, "b4"),
    # put_time wins over the put event; reserved and completed at the same instant: run 0
    ev("put", T0 + 1, "b5"), ev("reserved", T0 + 10, "b5", put_time=T0 + 4),
    ev("completed", T0 + 10, "b5"),
    # put and reserved at the same instant: wait 0; buried ends the run uncounted
    ev("put", T0 + 20, "b6"), ev("reserved", T0 + 20, "b6"), ev("buried", T0 + 21, "b6"),
]
BEANSTALK_WAITS = [b1_res - T0, 3600.0, b2_res2 - (T0 + 3610), 3 * DAY, 40 * DAY + 2, 6.0, 0.0]
BEANSTALK_RUNS_DAY0 = [(b1_res + 60) - b1_res, 0.5, 0.0]
BEANSTALK_RUNS_DAY1 = [(b2_res2 + DAY) - b2_res2]

# qless "q": reserved events carry put_time (the job history's last put).
QLESS = [
    ev("reserved", T0 + 100, "j1", system="qless", queue="q", put_time=T0 + 50),
    ev("retried", T0 + 101, "j1", system="qless", queue="q"),
    ev("reserved", T0 + 130, "j1", system="qless", queue="q", put_time=T0 + 101),
    ev("failed", T0 + 131, "j1", system="qless", queue="q", group="ValueError"),
    ev("reserved", T0 + 200, "j2", system="qless", queue="q", put_time=T0 + 200),
    ev("failed", T0 + 201, "j2", system="qless", queue="q", group="ValueError"),
    ev("put", T0 + 300, "j2", system="qless", queue="q"),  # moved back: no longer failed
    # no put_time and nothing before it: the wait is unknown and not counted
    ev("reserved", T0 + 400, "j3", system="qless", queue="q"),
    ev("completed", T0 + 401, "j3", system="qless", queue="q"),
    # the last retry fails the job: retried and failed at the same instant
    ev("reserved", T0 + 500, "j4", system="qless", queue="q", put_time=T0 + 500),
    ev("retried", T0 + 501, "j4", system="qless", queue="q"),
    ev("failed", T0 + 501, "j4", system="qless", queue="q", group="failed-retries-q"),
    # a put_time after the reserve (another machine's clock): counted as 0 s
    ev("reserved", T0 + 600, "j5", system="qless", queue="q", put_time=T0 + 605),
]
QLESS_WAITS = [50.0, 29.0, 0.0, 0.0, 0.0]
QLESS_RUNS = [1.0]

JUNK = "\n".join([
    json.dumps({**ev("completed", T0 + 700, "b1"), "v": 2}),  # another schema version
    json.dumps(ev("kicked", T0 + 700, "b1")),  # no such event
    json.dumps({**ev("completed", T0 + 700, "b1"), "job": None}),  # no job
    json.dumps({**ev("completed", T0 + 700, "b1"), "time": "soon"}),  # not a number
    "[1, 2]",
    '{"v": 1, "event": "completed", "time": 17',  # cut short by a crashed writer
])


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("metrics") / "events"
    folder.mkdir()
    write_jsonl(folder / "events-1-1-0.jsonl", BEANSTALK[:9])
    write_jsonl(folder / "events-2-1-1.jsonl", BEANSTALK[9:], tail=JUNK)
    write_parquet(folder / "events-3-2-0.parquet", QLESS)
    (folder / ".events-4-2-1.parquet.part").write_bytes(b"PAR1 half written")
    (folder / "notes.txt").write_text("not events\n")
    return folder


@pytest.fixture(scope="module")
def written(spark: Any, events_dir: Path) -> str:
    """The metrics of ``events_dir``, computed once and written with write_metrics."""
    metrics = job_metrics(spark, events_dir)
    assert strip_nullability(metrics.schema) == strip_nullability(METRICS_SCHEMA)
    return write_metrics(metrics, events_dir.parent / "out")


@pytest.fixture(scope="module")
def small(spark: Any, written: str) -> dict[tuple[str, str, dt.date], Any]:
    """The rows of ``written``, read back from the Parquet."""
    back = spark.read.parquet(written)
    assert strip_nullability(back.schema) == strip_nullability(METRICS_SCHEMA)
    return rows_by_key(back)


def test_hand_computed_metrics_of_a_small_directory(
    small: dict[tuple[str, str, dt.date], Any]
) -> None:
    rows = small
    day1 = DAY0 + dt.timedelta(days=1)
    assert set(rows) == {("beanstalk", "emails", DAY0), ("beanstalk", "emails", day1),
                         ("qless", "q", DAY0)}

    b0 = rows[("beanstalk", "emails", DAY0)]
    check_summary(b0["wait"], summary(BEANSTALK_WAITS))
    check_summary(b0["run"], summary(BEANSTALK_RUNS_DAY0))
    assert (b0["failures"], b0["retries"], b0["failed"]) == (1, 0, 1)

    b1 = rows[("beanstalk", "emails", day1)]
    check_summary(b1["wait"], summary([]))
    check_summary(b1["run"], summary(BEANSTALK_RUNS_DAY1))
    assert (b1["failures"], b1["retries"], b1["failed"]) == (0, 0, 0)

    q = rows[("qless", "q", DAY0)]
    check_summary(q["wait"], summary(QLESS_WAITS))
    check_summary(q["run"], summary(QLESS_RUNS))
    assert (q["failures"], q["retries"], q["failed"]) == (3, 2, 2)


def test_the_bucket_edges_are_qless_edges(small: dict[tuple[str, str, dt.date], Any]) -> None:
    # 59.999 s -> s59, 60 s -> m1, 3600 s -> h1, 86400 s -> d1, 3 days -> d3, 40 days -> in
    # no bucket (qless-core's histogram ends with d6)
    wait = small[("beanstalk", "emails", DAY0)]["wait"]["histogram"]
    run0 = small[("beanstalk", "emails", DAY0)]["run"]["histogram"]
    run1 = small[("beanstalk", "emails", DAY0 + dt.timedelta(days=1))]["run"]["histogram"]
    assert len(wait) == len(run0) == len(run1) == 148
    named = {BUCKETS[i]: n for i, n in enumerate(wait) if n}
    assert named == {"s59": 1, "h1": 1, "s5": 1, "d3": 1, "s6": 1, "s0": 1}
    assert small[("beanstalk", "emails", DAY0)]["wait"]["total"] == 7  # the 40 days counted
    assert {BUCKETS[i]: n for i, n in enumerate(run0) if n} == {"m1": 1, "s0": 2}
    assert {BUCKETS[i]: n for i, n in enumerate(run1) if n} == {"d1": 1}


def test_write_metrics_replaces_what_was_there(spark: Any, written: str, tmp_path: Path) -> None:
    metrics = spark.read.parquet(written)
    path = write_metrics(metrics, tmp_path)
    assert path == str(tmp_path / "metrics.parquet")
    assert spark.read.parquet(path).count() == 3
    assert write_metrics(metrics.limit(0), tmp_path) == path
    assert spark.read.parquet(path).count() == 0


def test_bucket_index_agrees_with_qless_bucket_of(spark: Any) -> None:
    values = [0.0, 0.999, 1.0, 59.999, 60.0, 119.999, 3599.999, 3600.0, 4499.999, 4500.0,
              86399.999, 86400.0, 90000.0, 259199.999, 259200.0, 29 * DAY + 5, 30 * DAY,
              40 * DAY, 1e9, -5.0]
    values += [i * 1371.7 for i in range(300)]  # through every range
    df = spark.createDataFrame([(float(v),) for v in values], "seconds double")
    got = [r[0] for r in df.select(bucket_index(df["seconds"])).collect()]

    def index_of(seconds: float) -> int:  # d7 and later: past the histogram's end, in order
        name = bucket_of(seconds)
        return BUCKETS.index(name) if name in BUCKETS else len(BUCKETS) + int(name[1:]) - 7

    assert got == [index_of(v) for v in values]


def test_durations_follow_the_matching_rules(spark: Any, events_dir: Path) -> None:
    durations = job_durations(read_events(spark, events_dir))
    got = sorted((r["job"], r["kind"], r["seconds"]) for r in durations.collect())
    assert [(j, k) for j, k, _ in got] == sorted([
        ("b1", "wait"), ("b1", "run"), ("b2", "wait"), ("b2", "wait"), ("b2", "run"),
        ("b3", "wait"), ("b4", "wait"), ("b4", "run"), ("b5", "wait"), ("b5", "run"),
        ("b6", "wait"), ("j1", "wait"), ("j1", "wait"), ("j2", "wait"), ("j3", "run"),
        ("j4", "wait"), ("j5", "wait"),
    ])
    assert ("b2", "wait", b2_res2 - (T0 + 3610)) in got  # the release, not the put
    assert ("b5", "wait", 6.0) in got and ("b5", "run", 0.0) in got


def test_bad_events_dir_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no events directory"):
        job_metrics(spark, tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        job_metrics(spark, tmp_path / "file")
    with pytest.raises(TypeError, match="SparkSession"):
        job_metrics("spark", tmp_path)  # type: ignore[arg-type]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert job_metrics(spark, empty).count() == 0


# -- numerical stability ------------------------------------------------------------------------


@pytest.mark.slow
def test_variance_is_stable_where_a_sum_of_squares_is_not(spark: Any, tmp_path: Path) -> None:
    # 100,000 waits of about 1e9 s (31 years) with millisecond noise: the squares are ~1e18,
    # whose rounding (~1e2 each) swamps a variance of ~0.08.
    n = 100_000
    put = 1.0e8
    reserved = [1.1e9 + (i % 997) * 0.001 for i in range(n)]
    waits = [r - put for r in reserved]
    want_mean = statistics.fmean(waits)
    want_var = statistics.variance(waits)  # exact (rational arithmetic), then rounded
    squares = math.fsum(w * w for w in waits)  # even an exactly rounded sum of squares ...
    naive = (squares - math.fsum(waits) ** 2 / n) / (n - 1)  # ... loses it all
    assert abs(naive - want_var) > want_var / 2  # not a single correct digit

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "events"
    folder.mkdir()
    table = pa.table({
        "v": pa.array([1] * n, pa.int64()), "event": ["reserved"] * n,
        "time": pa.array(reserved, pa.float64()), "system": ["workq"] * n,
        "queue": ["big"] * n, "job": [str(i) for i in range(n)], "worker": ["w"] * n,
        "put_time": pa.array([put] * n, pa.float64()),
    })  # no group or attempt column: read as null
    pq.write_table(table, str(folder / "events-1-1-0.parquet"))
    [row] = job_metrics(spark, folder).collect()
    assert row["wait"]["total"] == n
    assert row["wait"]["mean"] == pytest.approx(want_mean, rel=1e-14)
    assert row["wait"]["variance"] == pytest.approx(want_var, rel=1e-10)
    assert sum(row["wait"]["histogram"]) == 0  # 31 years: past d6, in no bucket


# -- the CLI ------------------------------------------------------------------------------------


def cli(*args: str) -> subprocess.Popen[str]:
    """``python -m jobwire.spark.metrics *args``, started (stdout and stderr piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "jobwire.spark.metrics", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, **spark_env()},
        cwd=Path(__file__).resolve().parents[2],
    )


CLI_TEST = "test_cli_writes_parquet_and_pngs"


@pytest.fixture(scope="module", autouse=True)
def cli_run(
    request: pytest.FixtureRequest, events_dir: Path
) -> Iterator[tuple[subprocess.Popen[str], Path] | None]:
    """The CLI over ``events_dir``, started as the module starts (when its test is selected)
    so that its JVM starts and works while the other tests run; its test reads the result."""
    if not any(item.name == CLI_TEST for item in request.session.items):
        yield None
        return
    out = events_dir.parent / "cli-out"
    proc = cli(str(events_dir), "--out", str(out), "--master", "local[1]")
    try:
        yield proc, out
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_cli_refuses_a_missing_directory(tmp_path: Path) -> None:
    proc = cli(str(tmp_path / "missing"), "--out", str(tmp_path / "out"))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "no events directory" in stderr
    assert not (tmp_path / "out").exists()


def test_events_schema_is_the_documented_one() -> None:
    from jobwire import events

    assert tuple(f.name for f in EVENTS_SCHEMA.fields) == events.FIELDS


# -- the same numbers as qless's own statistics -------------------------------------------------


class Retryable(Exception):
    """What the test handler raises to have its job retried."""


@pytest.mark.slow
def test_metrics_equal_qless_stats_of_a_real_worker(
    spark: Any, redis_server: Any, tmp_path: Path
) -> None:
    """A real AsyncWorker with an EventSink over a real redis-server: jobs that complete after
    waits and runs in every range of the histogram (on a clock the handler moves forward),
    fail, retry and run out of retries. The pipeline's numbers for the queue, every day, are
    what ``stats`` answers from ``ql:s:*``."""
    import anyio

    from jobwire.events import EventSink
    from qless_client import AsyncClient, AsyncJob, Client, RetryPolicy
    from qless_client.worker import AsyncWorker

    url = f"{redis_server.url}/11"
    queue = f"metrics-{uuid.uuid4().hex[:12]}"
    start = D0 + 20 * 3600.0  # 20:00 UTC: the long runs end on the next days
    skew = [0.0]  # seconds the handlers moved the clock forward
    began = time.monotonic()

    def clock() -> float:  # whole seconds: qless-core's history keeps no fraction
        return float(math.floor(start + skew[0] + (time.monotonic() - began)))

    # (wait before the first pop, run time, what the handler does)
    plan = {
        "ok-a": (0, 0, "ok"), "ok-b": (75, 75, "ok"), "ok-c": (3700, 4000, "ok"),
        "ok-d": (2 * DAY, 90000, "ok"), "ok-e": (40 * DAY, 1.5, "ok"),
        "fail": (30, 0, "fail"), "flaky": (5, 2, "retry once"), "doomed": (0, 0, "retry"),
    }
    back = [0.0]  # the producer puts each job this many seconds in the past
    with Client(url, clock=lambda: clock() - back[0]) as producer:
        producer.config_set(f"{queue}-heartbeat", 60 * DAY)  # the clock jumps: keep the locks
        for jid, (wait, _, _) in plan.items():
            back[0] = wait
            producer.queue(queue).put("K", jid, jid=jid, retries=1 if jid == "doomed" else 5)

    tries: Counter[str] = Counter()
    settled: set[str] = set()

    async def handle(job: AsyncJob) -> None:
        jid = job.jid
        tries[jid] += 1
        _, run, what = plan[jid]
        if what == "fail":
            settled.add(jid)
            raise ValueError("boom")
        if what == "retry" or (what == "retry once" and tries[jid] == 1):
            if what == "retry" and tries[jid] == 2:
                settled.add(jid)  # this retry is refused: the job fails
            raise Retryable("again")
        skew[0] += run
        settled.add(jid)

    events = tmp_path / "events"
    sink = EventSink(events)

    async def main() -> None:
        async with AsyncClient(url, clock=clock, worker_name="metrics-worker") as client:
            worker = AsyncWorker(client, queues=[queue], idle_wait=0.05, events=sink,
                                 retry=RetryPolicy(retry_on=(Retryable,), base_delay=0))

            async def stopper() -> None:
                while len(settled) < len(plan) or worker.stats.in_flight:
                    await anyio.sleep(0.02)
                worker.stop()

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stopper)
                    await worker.run(handle, handle_signals=False)

    anyio.run(main)
    sink.close()
    assert sink.dropped == 0

    metrics = job_metrics(spark, events).where(f"system = 'qless' AND queue = '{queue}'")
    rows = {r["day"]: r for r in metrics.collect()}
    first_day = dt.date(2024, 3, 18)
    days = sorted(set(rows) | {first_day + dt.timedelta(days=i) for i in range(4)})
    assert sum(r["wait"]["total"] for r in rows.values()) == 10  # 8 jobs, 2 retried
    assert sum(r["run"]["total"] for r in rows.values()) == 6
    theirs_failed: list[tuple[int, int, int]] = []
    with Client(url, clock=clock) as client:
        for day in days:
            want = client.queue(queue).stats(day)
            got = rows.get(day)
            theirs_failed.append((want["failures"], want["retries"], want["failed"]))
            if got is None:
                assert want["wait"]["count"] == want["run"]["count"] == 0, day
                continue
            for kind in ("wait", "run"):
                mine, theirs = got[kind], want[kind]
                assert mine["total"] == theirs["count"], (day, kind)
                assert list(mine["histogram"]) == theirs["histogram"], (day, kind)
                assert mine["mean"] == pytest.approx(theirs["mean"], rel=1e-12, abs=1e-9)
                assert mine["variance"] == pytest.approx(theirs["std"] ** 2, rel=1e-9,
                                                         abs=1e-9)
    # The events count every failure and retry; qless-core's stats count only ``fail`` calls
    # as failures (not a retry out of retries) and only expired locks as retries.
    assert sum(r["failures"] for r in rows.values()) == 2
    assert sum(r["retries"] for r in rows.values()) == 3
    assert sum(r["failed"] for r in rows.values()) == 2
    assert [sum(col) for col in zip(*theirs_failed, strict=True)] == [1, 0, 1]


@pytest.mark.slow
def test_cli_writes_parquet_and_pngs(
    spark: Any, cli_run: tuple[subprocess.Popen[str], Path] | None
) -> None:
    assert cli_run is not None
    proc, out = cli_run
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "3 row(s)" in stdout
    assert "beanstalk  emails  2024-03-18" in stdout
    pngs = sorted(out.glob("*.png"))
    assert [p.name for p in pngs] == ["beanstalk-emails.png", "qless-q.png"]
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        assert png.stat().st_size > 10_000  # a drawn figure, not an empty file
    back = spark.read.parquet(str(out / "metrics.parquet"))
    assert strip_nullability(back.schema) == strip_nullability(METRICS_SCHEMA)
    again = rows_by_key(back)
    check_summary(again[("beanstalk", "emails", DAY0)]["wait"], summary(BEANSTALK_WAITS))
    assert again[("qless", "q", DAY0)]["failures"] == 3
