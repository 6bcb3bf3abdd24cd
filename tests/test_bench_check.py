"""``scripts/bench --check`` (benchmarks/check.py) beyond the four protocols: the startup, micro,
resp_parse and pool figures of the quick pass, Spark's with ``--full``, and the published files
no pass checks, named with why. Every test compares crafted JSON documents (``--against``), so
nothing here runs a benchmark and no assertion is about speed."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import load_file

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
CHECK = BENCHMARKS / "check.py"
PYTHON = sys.executable

sys.path.insert(0, str(BENCHMARKS))  # check.py imports report from its folder
try:
    check = load_file("jobwire_benchmark_check", CHECK)
finally:
    sys.path.remove(str(BENCHMARKS))
report = check.report

#: Five runs around a median: spread (max - min) / median = 0.1.
RUNS = (0.95, 0.98, 1.0, 1.02, 1.05)


def _runs(median: float) -> list[float]:
    return [median * f for f in RUNS]


def _startup(scale: float) -> dict[str, Any]:
    """Two rows; ``scale`` multiplies the beanstalk server's times."""
    rows = []
    for name, ms in (("bare", 27.0), ("beanstalk", 35.0 * scale)):
        reply = [s / 1e3 for s in _runs(ms)]
        connect = [s * 0.9 for s in reply]
        rows.append({"row": name, "label": name, "bundled": name != "bare", "runs": 5,
                     "median_reply_s": statistics.median(reply), "min_reply_s": min(reply),
                     "max_reply_s": max(reply), "median_connect_s": statistics.median(connect),
                     "ratio_to_bare": round(ms / 27.0, 2), "reply_s": reply,
                     "connect_s": connect})
    return {"protocol": "startup", "environment": {}, "config": {"repeats": 5},
            "results": rows}


def _plain(name: str, keys: list[dict[str, str]], medians: list[float]) -> dict[str, Any]:
    return {"protocol": name, "environment": {}, "config": {"runs": 5}, "results": [
        {**key, "median": median, "min": min(_runs(median)), "max": max(_runs(median)),
         "samples": _runs(median)} for key, median in zip(keys, medians, strict=True)]}


def _micro(scale: float) -> dict[str, Any]:
    """``scale`` multiplies ``emit``'s cost (under 1 µs: shown in ns)."""
    return _plain("micro", [{"row": "record class", "label": "record"},
                            {"row": "emit", "label": "emit"}], [17.6, 0.2156 * scale])


def _resp_parse(scale: float) -> dict[str, Any]:
    """``scale`` multiplies jobwire's cost of parsing an integer reply."""
    return _plain("resp_parse", [{"reply": "integer", "parser": "jobwire"},
                                 {"reply": "integer", "parser": "hiredis"}], [1.29 * scale, 0.134])


def _harness(protocol: str, scenario: str, figures: list[tuple[str, float, float]],
             **config: Any) -> dict[str, Any]:
    """A harness document: per (client, ops/s, client CPU µs/op), five runs."""
    results = []
    for client, ops, cpu in figures:
        samples = [{"n": 1000, "seconds": 1000 / o, "ops_per_s": o, "client_cpu_us_per_op": c,
                    "server_cpu_us_per_op": 10.0} for o, c in zip(_runs(ops), _runs(cpu),
                                                                  strict=True)]
        results.append({"scenario": scenario, "client": client, "label": client, "n": 1000,
                        **report.summarize(samples), "baseline": None, "note": "",
                        "samples": samples})
    return {"protocol": protocol, "environment": {}, "config": {"runs": 5, **config},
            "results": results}


def _pool(scale: float) -> dict[str, Any]:
    """``scale`` multiplies the per-thread row's client CPU per put."""
    return _harness("pool", "put16", [("pool-4", 6430.0, 65.0),
                                      ("per-thread", 8694.0, 32.3 * scale)])


def _spark(scale: float) -> dict[str, Any]:
    """``scale`` multiplies Spark's write speed (and so its ratio over put_many)."""
    return _harness("spark", "write", [("spark", 63771.0 * scale, 14.2),
                                       ("put_many", 92334.0, 9.7)],
                    rows=1000, jobs=200, events=4000, partitions=2, shuffle_partitions=8,
                    driver_memory="1g", max_jobs_per_batch=[1000, 5000],
                    scenarios={"write": "title"}, clients="all", wall_time_s=600.0)


BUILD: dict[str, Callable[[float], dict[str, Any]]] = {
    "startup": _startup, "micro": _micro, "resp_parse": _resp_parse, "pool": _pool,
    "spark": _spark}
#: Per kind: the figure ``scale`` moves, and which way a doubled (halved for Spark) one goes.
MOVED = {
    "startup": ("startup beanstalk first reply ms", 2.0, "higher"),
    "micro": ("micro emit, ns of CPU per event", 2.0, "higher"),
    "resp_parse": ("resp_parse integer / jobwire, µs of CPU per reply", 2.0, "higher"),
    "pool": ("pool put16/per-thread client CPU µs/put", 2.0, "higher"),
    "spark": ("spark write/spark per s", 0.5, "lower"),
}


def _write(folder: Path, documents: dict[str, dict[str, Any]]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, document in documents.items():
        (folder / f"{name}.json").write_text(json.dumps(document), encoding="utf-8")
    return folder


def _check(published: Path, run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, str(CHECK), "--published", str(published), "--against",
                           str(run), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def _only(kind: str) -> list[str]:
    return ["--only", kind, *(["--full"] if kind == "spark" else [])]


@pytest.mark.parametrize("kind", list(BUILD))
def test_a_figure_within_the_widened_spread_is_reproduced_one_outside_is_named(
        tmp_path: Path, kind: str) -> None:
    published = _write(tmp_path / "published", {kind: BUILD[kind](1.0)})
    # Within the published [min, max] widened by 15% of the median: reproduced.
    same = _check(published, _write(tmp_path / "same", {kind: BUILD[kind](1.1)}), *_only(kind))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "**NOT reproduced**" not in same.stdout and "not reproduced: 0" in same.stdout
    figure, scale, side = MOVED[kind]
    assert f"| {figure} | " in same.stdout

    moved = _check(published, _write(tmp_path / "moved", {kind: BUILD[kind](scale)}),
                   *_only(kind))
    assert moved.returncode == 1, moved.stdout + moved.stderr
    row = next(line for line in moved.stdout.splitlines() if line.startswith(f"| {figure} | "))
    assert row.endswith(f"| **NOT reproduced** ({side}) |")
    assert f"- not reproduced: {figure}: " in moved.stdout


def test_the_figures_under_1_us_are_shown_in_ns_and_startup_s_in_ms(tmp_path: Path) -> None:
    published = _write(tmp_path / "published", {"micro": _micro(1.0), "startup": _startup(1.0)})
    done = _check(published, published, "--only", "micro,startup")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("| micro emit, ns of CPU per event | 215.6 (204.8-226.4) | 215.6 (204.8-226.4) | "
            "reproduced |") in done.stdout
    assert "| micro record class, µs of CPU per class | 17.6 (16.7-18.5) |" in done.stdout
    assert "| startup beanstalk first reply ms | 35.0 (33.2-36.8) |" in done.stdout
    assert "| startup beanstalk accepted ms | 31.5 (29.9-33.1) |" in done.stdout
    # The multiple of the bare process's: ratio of medians, ranging over the runs' extremes.
    assert f"| startup beanstalk x bare | {35 / 27:.2f}x ({35 * .95 / (27 * 1.05):.2f}-" \
        f"{35 * 1.05 / (27 * .95):.2f}) |" in done.stdout


def test_spark_s_ratios_are_checked_with_full(tmp_path: Path) -> None:
    published = _write(tmp_path / "published", {"spark": _spark(1.0)})
    moved = _check(published, _write(tmp_path / "moved", {"spark": _spark(0.5)}),
                   "--only", "spark", "--full")
    assert moved.returncode == 1
    # Published 63,771 / 92,334 = 0.691x, over the runs 0.95 / 1.05 to 1.05 / 0.95 of it,
    # widened by 0.15 x 0.691: [0.521, 0.867]. This run: half of 0.691.
    assert ("- not reproduced: spark write: Spark / put_many, speed: 0.345 outside "
            "[0.521, 0.867] x") in moved.stdout
    assert "| spark write: Spark / put_many, CPU per item | 1.46x" in moved.stdout


@pytest.mark.parametrize("kind", list(BUILD))
def test_a_missing_quick_file_is_named_and_its_figures_not_run(
        tmp_path: Path, kind: str) -> None:
    published = _write(tmp_path / "published", {kind: BUILD[kind](1.0)})
    empty = _write(tmp_path / "empty", {})
    done = _check(published, empty, *_only(kind))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"- missing: {empty / kind}.json, so its published figures were not run" \
        in done.stdout
    assert f"| {MOVED[kind][0]} | " in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith(f"| {kind}")]
    assert rows and all(line.endswith("| - | not run |") for line in rows)
    assert "0 of" in done.stdout and "not run: " in done.stdout


def test_every_kind_at_once_and_the_files_no_pass_checks_named_with_why(tmp_path: Path) -> None:
    quick = {kind: build(1.0) for kind, build in BUILD.items() if kind != "spark"}
    published = _write(tmp_path / "published", {**quick, "spark": _spark(1.0)})
    for name in ("scaling", "fairness"):
        (published / f"{name}.json").write_text("{}", encoding="utf-8")  # never read
    done = _check(published, _write(tmp_path / "run", quick))
    assert done.returncode == 0, done.stdout + done.stderr
    for kind in quick:
        assert f"| {MOVED[kind][0]} | " in done.stdout
    # The protocols are not published here: said once, not run, not a failure.
    assert "- nothing published for beanstalk, gearman, workq, qless" in done.stdout
    tail = done.stdout.split("not checked by this pass, and why:\n")[1]
    assert [line.split(":")[0] for line in tail.splitlines()] == [
        "- spark.json", "- scaling.json", "- fairness.json"]
    assert "`scripts/bench --check --full`" in tail and "`scripts/bench scaling`" in tail
    assert "| spark " not in done.stdout

    # --full checks Spark too (here its quick file is missing) and no longer lists it.
    full = _check(published, tmp_path / "run", "--full")
    assert full.returncode == 1
    assert f"- missing: {tmp_path / 'run' / 'spark'}.json" in full.stdout
    assert "- spark.json:" not in full.stdout and "- scaling.json:" in full.stdout


def test_spark_is_checked_only_with_full_and_unreadable_files_are_errors(
        tmp_path: Path) -> None:
    published = _write(tmp_path / "published", {"micro": _micro(1.0)})
    refused = _check(published, published, "--only", "spark")
    assert refused.returncode == 2 and "add --full" in refused.stderr
    broken = _write(tmp_path / "broken", {})
    (broken / "micro.json").write_text("{", encoding="utf-8")
    done = _check(published, broken, "--only", "micro")
    assert done.returncode == 2 and "error: micro.json" in done.stderr
    (broken / "micro.json").write_text(json.dumps({"results": [{"row": 1}]}), encoding="utf-8")
    done = _check(published, broken, "--only", "micro")
    assert done.returncode == 2 and "not micro.py's results" in done.stderr


def test_the_quick_pass_runs_quick_and_spark_at_its_published_sizes(tmp_path: Path) -> None:
    """The commands only (nothing is run): each quick benchmark with --quick (and --runs);
    Spark without it, at the sizes of the published config, 3 runs per row."""
    quick = check.command("micro", tmp_path / "micro.json", None)
    assert quick[1:] == [str(BENCHMARKS / "micro.py"), "--quick", "--out",
                         str(tmp_path / "micro.json")]
    assert check.command("startup", tmp_path / "s.json", 5)[-2:] == ["--runs", "5"]
    spark = check.command("spark", tmp_path / "spark.json", 5, _spark(1.0))
    assert "--quick" not in spark
    assert spark[1:] == [str(BENCHMARKS / "spark.py"), "--runs", "3", "--out",
                         str(tmp_path / "spark.json"), "--rows", "1000", "--jobs", "200",
                         "--events", "4000", "--partitions", "2", "--shuffle-partitions", "8",
                         "--driver-memory", "1g", "--max-jobs-per-batch", "1000,5000",
                         "--scenarios", "write"]
    assert check._spark_estimate(_spark(1.0)) == (
        "the published run took 10 min for 5 run(s) per row: expect about 6 min")
    for kind in ("startup", "micro", "resp_parse", "pool", "spark"):
        assert (BENCHMARKS / f"{kind}.py").is_file()
