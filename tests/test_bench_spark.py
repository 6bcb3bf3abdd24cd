"""benchmarks/spark.py's statistic and docs/spark.md's generated table, without Spark: the rows
of a scenario run round-robin (run 1 of every row, then run 2 ...) through ``_harness.Bench``
without pinning; the document they make is the other benchmarks' shape (medians, min-max,
unstable figures with why); ``benchmarks/report.py`` renders it (ratios of medians, where a
write's time goes) between the page's markers, reads the older one-run file, and ``--check``
fails on a stale page. The rows' measurements are stand-ins returning set numbers: no assertion
here is about speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from .conftest import load_file

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
REPORT = BENCHMARKS / "report.py"

sys.path.insert(0, str(BENCHMARKS))  # spark.py imports _harness and report from its folder
try:
    spark = load_file("jobwire_benchmark_spark", BENCHMARKS / "spark.py")
finally:
    sys.path.remove(str(BENCHMARKS))
report = spark.report
harness = sys.modules["_harness"]  # the module spark.py imported


def _sample(n: int, seconds: float, cpu: float, server: float | None = None,
            load: float = 0.4, **extra: float) -> Any:
    return harness.Sample(n, seconds, cpu, server, dict(extra),
                          {"load_1m": load, "others_cpu_share": 0.02, "pinning": None})


def _measure(log: list[str], key: str, samples: Sequence[Any]) -> Callable[[], Any]:
    """A stand-in for a row's timed run: notes that it ran, returns its next sample."""
    left = list(samples)

    def run() -> Any:
        log.append(key)
        return left.pop(0)

    return run


Row = tuple[str, str, int, list[Any], "tuple[str, str] | None"]


def _run(runs: int, plan: dict[str, list[Row]]) -> tuple[list[str], list[Any]]:
    log: list[str] = []
    bench = spark.Bench(runs, spark.once, pin=False)
    order: list[Any] = []
    for scenario, rows in plan.items():
        specs = [spark.Spec(key, label, _measure(log, key, samples), n, baseline=base)
                 for key, label, n, samples, base in rows]
        order += spark.run_rows(bench, scenario, specs)
    return log, order


def test_the_rows_of_a_scenario_run_round_robin_unpinned(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    rows: list[Row] = [(key, key, 100, [_sample(100, 1.0 + i / 10, 0.5) for i in range(3)],
                        None) for key in ("spark", "put_many", "spark-noop")]
    log, order = _run(3, {"write": rows, "stream": [
        ("python", "loop", 50, [_sample(50, 1.0, 0.2) for _ in range(3)], None)]})
    assert log == ["spark", "put_many", "spark-noop"] * 3 + ["python"] * 3
    assert [(r.scenario, r.client, len(r.samples)) for r in order] == [
        ("write", "spark", 3), ("write", "put_many", 3), ("write", "spark-noop", 3),
        ("stream", "python", 3)]
    # Each row's samples are its runs in round order (run i took 1.0 + i/10 s).
    assert [s.seconds for s in order[0].samples] == [1.0, 1.1, 1.2]
    if before is not None:  # local[2] wants both CPUs: Bench(pin=False) leaves them
        assert os.sched_getaffinity(0) == before
    assert "median (min-max) of 3 interleaved runs" in capsys.readouterr().out


def test_the_options_default_to_5_runs_and_3_quick_with_repeats_an_alias() -> None:
    args = spark.parse_args([])
    assert (args.rows, args.jobs, args.events) == (spark.ROWS, spark.JOBS, spark.EVENTS)
    _, _, runs, out = spark.choose(args, "spark", spark.SCENARIOS)
    assert runs == 5 and out == BENCHMARKS / "results" / "spark.json"
    quick = spark.parse_args(["--quick"])
    assert (quick.rows, quick.jobs, quick.events) == (spark.ROWS // 10, spark.JOBS // 10,
                                                      spark.EVENTS // 10)
    _, _, runs, out = spark.choose(quick, "spark", spark.SCENARIOS)
    assert runs == 3 and out == BENCHMARKS / "results" / "quick" / "spark.json"
    for flag in ("--runs", "--repeats"):
        args = spark.parse_args([flag, "7", "--json", "/tmp/x.json"])
        assert spark.choose(args, "spark", spark.SCENARIOS)[2:] == (7, Path("/tmp/x.json"))


def _document(folder: Path) -> dict[str, Any]:
    """spark.json as benchmarks/spark.py writes it, from stand-in rows (5 runs each)."""
    def runs(n: int, seconds: Sequence[float], cpu: Sequence[float],
             server: float | None = None, **extra: float) -> list[Any]:
        return [_sample(n, s, c, server, load=0.3 + i / 10, **extra)
                for i, (s, c) in enumerate(zip(seconds, cpu, strict=True))]

    n = 1000
    write: list[Row] = [
        ("spark-overhead", "Spark beanstalk write of 10 rows (fixed cost)", 10,
         runs(10, [0.15, 0.14, 0.16, 0.15, 0.15], [0.3] * 5, 0.0), None),
        ("spark-noop", 'Spark write to format("noop")', n, runs(n, [0.001] * 5, [0.002] * 5),
         None),
        ("spark-arrow", "Spark write to a Python sink counting Arrow rows", n,
         runs(n, [0.003] * 5, [0.004] * 5), None),
        ("spark-puts", "... that also makes and encodes each row's Put", n,
         runs(n, [0.006] * 5, [0.009] * 5), None),
        # ops/s 100, 125, 80, 100, 100: (125 - 80) / 100 = 45% > 20%: unstable
        ("spark", 'Spark df.write.format("beanstalk")', n,
         runs(n, [10.0, 8.0, 12.5, 10.0, 10.0], [14.0] * 5, 6.0), ("write", "put_many")),
        ("put_many", "one process: Client.put_many", n, runs(n, [5.0, 5.1, 4.9, 5.0, 5.0],
                                                             [7.0] * 5, 6.5), None),
    ]
    stream: list[Row] = [
        ("spark-1000", "Spark readStream, maxJobsPerBatch=1000", n,
         runs(n, [4.0] * 5, [10.0] * 5, 0.5, batches_with_rows=1, batches=3, first_batch_s=2.0),
         ("stream", "python")),
        ("python", "one process: reserve+delete, call_many x1024", n,
         runs(n, [0.4] * 5, [0.25] * 5, 0.2), None),
    ]
    metrics: list[Row] = [
        ("spark", "Spark job_metrics(...).collect()", n, runs(n, [2.0] * 5, [4.0] * 5), None),
        ("python", "one process: the same metrics in one pass", n,
         runs(n, [3.0] * 5, [3.0] * 5, peak_rss_mib=100.0), None),
    ]
    _, order = _run(5, {"write": write, "stream": stream, "metrics": metrics})
    env = {"date": "2026-01-02T03:04:05Z", "cpu_count": 2, "cpu_model": "Test CPU",
           "python": "3.11.7", "platform": "Linux", "beanstalkd": "beanstalkd 1.12",
           "java": "openjdk 17", "packages": {"pyspark": "4.3.0"}}
    check = {"agree": True, "rows": 9, "durations": 1234, "max_rel_diff_mean": 1e-15,
             "max_rel_diff_variance": 2e-15, "problems": []}
    document: dict[str, Any] = harness.write_document(folder / "spark.json", "spark", env, {
        "statistic": spark.STATISTIC, "quick": False, "runs": 5, "rows": n, "jobs": n,
        "events": n, "body_bytes": "64-100"}, order, metrics={"check": check})
    return document


def test_the_section_shows_medians_spreads_ratios_of_medians_and_unstable_figures(
    tmp_path: Path,
) -> None:
    written = _document(tmp_path)
    document = report.load_spark(tmp_path)
    assert document == json.loads(json.dumps(written))
    rows = {(r["scenario"], r["client"]): r for r in document["results"]}
    assert all(r["runs"] == 5 and len(r["samples"]) == 5 for r in rows.values())
    write = rows[("write", "spark")]
    assert write["median_ops_per_s"] == 100.0
    assert (write["min_ops_per_s"], write["max_ops_per_s"]) == (80.0, 125.0)
    assert list(write["unstable"]) == ["ops_per_s"]
    assert rows[("write", "put_many")]["unstable"] == {}

    text = "\n".join(report.spark_lines(document, "somewhere"))
    assert "each figure the median of 5 interleaved runs, (lowest-highest)" in text
    assert "**one run**" not in text and "2026-01-02 03:04:05 UTC" in text
    # Ratios of medians: 100 / 200 rows/s; 14 / 7 µs of CPU per row.
    assert ("| write into beanstalkd (rows/s) | 100 (80-125) *unstable* | `put_many` 200 "
            "(196-204) | 0.50x | 2.00x |") in text
    assert ("| stream read, `maxJobsPerBatch` 1000 (jobs/s) | 250 (250-250) | reserve+delete "
            "with `call_many` 2,500 (2,500-2,500) | 0.10x | 40.00x |") in text
    assert ("| job metrics (events/s) | 500 (500-500) | one pass (peak RSS 100 MiB) 333 "
            "(333-333) | 1.50x | 1.33x |") in text
    # The unstable figure, with why (report.why_unstable, from the recorded load).
    why = write["unstable"]["ops_per_s"]
    assert f"- write / Spark df.write.format(\"beanstalk\"), per s: {why}" in text
    assert "load average 0.3-0.7" in why
    # Where the time goes: each stage's median per row over the one before it.
    assert "| the JVM makes the rows (`noop`) | +1.00 | +2.00 |" in text
    assert "| + rows to Arrow, over to the Python workers | +2.00 | +2.00 |" in text
    assert "| + jobwire's row code, `Put` objects, encoding | +3.00 | +5.00 |" in text
    assert "| + pipelined socket I/O, replies, beanstalkd | +9994.00 | +13991.00 |" in text
    assert "0.15 s of wall time and 0.30 s of CPU (medians)" in text
    assert "| 1000 | 1 | 4,000 | 2.00 | 500.0 |" in text
    assert "agree on all 9 (system, queue, day) rows and 1,234 durations" in text


def test_an_older_one_run_file_is_read_as_one_run(tmp_path: Path) -> None:
    """spark.json as the benchmark wrote it before medians (the committed file until the
    next full run): rows by ``key``, samples in seconds, ``repeats``."""
    old = {
        "environment": {"cpu_count": 2, "cpu_model": "Old CPU", "python": "3.11.7",
                        "platform": "Linux", "packages": {"pyspark": "4.3.0"}},
        "config": {"quick": False, "repeats": 1, "rows": 1000, "jobs": 10, "events": 10},
        "results": [
            {"scenario": "write", "key": key, "label": key, "n": 1000, "best_seconds": s,
             "median_seconds": s, "best_per_s": 1000 / s,
             "samples": [{"n": 1000, "seconds": s, "per_s": 1000 / s, "cpu_s": c,
                          "server_cpu_s": srv, "jobs_counted": 1000}]}
            for key, s, c, srv in (("spark", 2.0, 3.0, 1.0), ("put_many", 1.0, 1.5, 1.0))],
        "ratios": {}, "write_breakdown": [], "metrics": None,
    }
    (tmp_path / "spark.json").write_text(json.dumps(old), encoding="utf-8")
    document = report.load_spark(tmp_path)
    assert document["config"]["runs"] == 1 and "repeats" not in document["config"]
    spark_row = document["results"][0]
    assert (spark_row["client"], spark_row["runs"], spark_row["median_ops_per_s"],
            spark_row["median_client_cpu_us_per_op"], spark_row["unstable"]) == (
        "spark", 1, 500.0, 3000.0, {})
    assert spark_row["samples"][0]["jobs_counted"] == 1000
    text = "\n".join(report.spark_lines(document, "old"))
    assert "each figure **one run** (no median, no spread)" in text
    assert "| write into beanstalkd (rows/s) | 500 | `put_many` 1,000 | 0.50x | 2.00x |" in text
    assert "time goes" not in text  # not every stage of the write ran


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPORT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_the_spark_page_is_rewritten_between_its_markers_and_checked(tmp_path: Path) -> None:
    begin, end = report.markers(report.SPARK)
    perf = tmp_path / "performance.md"
    perf.write_text(f"{report.BEGIN}\n{report.END}\n", encoding="utf-8")
    page = tmp_path / "spark.md"
    page.write_text(f"# Spark\n\n## Performance\n\n{begin}\none run: 1 row/s\n{end}\n\nafter\n",
                    encoding="utf-8")
    pages = ("--results", str(tmp_path), "--page", str(perf), "--spark-page", str(page))
    # No spark.json: the page is left alone (the Spark benchmark is not in scripts/bench all).
    assert _cli(*pages).returncode == 0 and "one run: 1 row/s" in page.read_text()
    _document(tmp_path)
    stale = _cli(*pages, "--check")
    assert stale.returncode == 1 and "Spark section differs" in stale.stderr
    assert "-one run: 1 row/s" in stale.stderr and "one run: 1 row/s" in page.read_text()
    done = _cli(*pages)
    assert done.returncode == 0, done.stderr
    section = "\n".join(report.spark_lines(report.load_spark(tmp_path),
                                           report.source_name(tmp_path))) + "\n"
    assert page.read_text() == f"# Spark\n\n## Performance\n\n{begin}\n{section}{end}\n\nafter\n"
    assert _cli(*pages, "--check").returncode == 0
    printed = _cli(*pages, "--stdout")  # the performance section only
    assert printed.returncode == 0 and "Spark section" not in printed.stdout


def test_the_docs_page_holds_the_spark_section_once() -> None:
    text = report.SPARK_PAGE.read_text(encoding="utf-8")
    begin, end = report.markers(report.SPARK)
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text.index("## Performance") < text.index(begin) < text.index(end)
    assert "one run, not a median" not in text


def test_the_plan_orders_match_the_comparisons() -> None:
    """The rows the page compares are the keys the scenarios' plans give."""
    write = [s.client for s in spark.write_plan(None, 10, 2)]
    assert write == ["spark-overhead", "spark-noop", "spark-arrow", "spark-puts", "spark",
                     "put_many"]
    assert [key for key, _ in report.SPARK_STAGES] == write[1:5]
    stream = [s.client for s in spark.stream_plan(None, 10, [1000, 5000], Path("."))]
    assert stream == ["spark-1000", "spark-5000", "python"]
    metrics = [s.client for s in spark.metrics_plan(None, Path("."), [], 10, {})]
    assert metrics == ["spark-read", "spark", "python-parse", "python"]
