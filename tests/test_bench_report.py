"""benchmarks/report.py: the results section of the Performance page (docs/performance.md) made
from a real (quick) benchmark run's JSON, rewritten only between its markers, and ``--check``
telling when the page no longer says what the JSON says. No assertion here is about speed: the
numbers are whatever the run measured; the tests check that the section reports exactly those
numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from .conftest import load_file

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
REPORT = ROOT / "benchmarks" / "report.py"


report = load_file("jobwire_benchmark_report", REPORT)
hooks = load_file("jobwire_docs_hooks", ROOT / "docs" / "hooks.py")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding workq.json from a real quick run of benchmarks/workq.py (the bundled
    server), two of its scenarios, two timed runs per row (so that the best and the median
    differ)."""
    folder = tmp_path_factory.mktemp("results")
    run = subprocess.run(
        [PYTHON, str(ROOT / "benchmarks" / "workq.py"), "--quick", "--repeats", "2",
         "--scenarios", "add,add_many", "--out", str(folder / "workq.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return folder


def _rows(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["scenario"], r["client"]): r for r in document["results"]}


def _page(folder: Path, inside: str = "hand-written numbers\n") -> Path:
    page = folder / "performance.md"
    page.write_text(f"# project\n\nbefore\n\n{report.BEGIN}\n{inside}{report.END}\n\nafter\n",
                    encoding="utf-8")
    return page


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, str(REPORT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.slow
def test_a_quick_run_writes_the_shared_shape(results: Path) -> None:
    document = json.loads((results / "workq.json").read_text(encoding="utf-8"))
    assert document["protocol"] == "workq"
    assert document["config"]["quick"] is True and document["config"]["repeats"] == 2
    assert document["environment"]["date"].endswith("Z")
    assert set(document["config"]["scenarios"]) == {"add", "add_many"}
    assert {(r["scenario"], r["client"]) for r in document["results"]} == {
        (s, c) for s in ("add", "add_many") for c in ("jobwire-sync", "jobwire-async", "raw")
    } | {("add_many", "jobwire-sync-unbudgeted"), ("add_many", "jobwire-async-unbudgeted")}
    for row in document["results"]:
        assert row["best_ops_per_s"] > 0 and row["client_cpu_us_per_op"] > 0
        assert row["server_cpu_us_per_op"] is not None
        assert len(row["samples"]) == 2
        assert row["best_ops_per_s"] == max(s["ops_per_s"] for s in row["samples"])
        assert row["client_cpu_us_per_op"] == min(
            s["client_cpu_us_per_op"] for s in row["samples"])
        assert row["baseline"] == (None if row["client"] == "raw" else f"{row['scenario']}/raw")


@pytest.mark.slow
def test_the_section_reports_the_runs_numbers_against_issue_13s_targets(results: Path) -> None:
    documents = report.load(results)
    assert list(documents) == ["workq"]
    section = report.render(documents, "somewhere")
    rows = _rows(json.loads((results / "workq.json").read_text(encoding="utf-8")))

    def ops(scenario: str, client: str) -> float:
        return float(rows[(scenario, client)]["best_ops_per_s"])

    raw = ops("add", "raw")
    mine = ops("add", "jobwire-sync")
    verdict = "met" if mine / raw >= 0.8 else "**missed**"
    assert (f"| Workq sync `add`, one at a time, wall | {mine / raw:.2f}x ({mine:,.0f} vs "
            f"{raw:,.0f} ops/s) (bundled server, not the real one) | >= 0.8x raw socket | "
            f"{verdict} |") in section
    sync, asyncio = ops("add_many", "jobwire-sync"), ops("add_many", "jobwire-async")
    raw_many = ops("add_many", "raw")
    met = sync / raw_many >= 0.9 and asyncio / raw_many >= 0.8
    assert (f"| Workq `add_many` sync / async, wall | sync {sync / raw_many:.2f}x "
            f"({sync:,.0f} vs {raw_many:,.0f} ops/s); async {asyncio / raw_many:.2f}x "
            f"({asyncio:,.0f} vs {raw_many:,.0f} ops/s) (bundled server) | >= 0.9x / 0.8x raw | "
            f"{'met' if met else '**missed**'} |") in section
    # A missed row says what bounds it, with ratios of the same run: here the byte budget,
    # and the same calls without it.
    unbudgeted = ops("add_many", "jobwire-sync-unbudgeted")
    bound = (f"With `max_bytes=None` (the raw socket's window alone): sync "
             f"{unbudgeted / raw_many:.2f}x ({unbudgeted:,.0f} vs {raw_many:,.0f} ops/s)")
    assert (bound in section) == (not met)
    # Every other row of issue 13 is there, saying what is missing.
    for target in report.TARGETS:
        assert f"| {target.scenario} |" in section
    assert ("| beanstalk sync `put`, one at a time, CPU/op | not measured (no beanstalk.json) | "
            "<= 1.0x greenstalk | not measured |") in section
    # The per-protocol table: every row's ops/s and CPU per operation, as recorded.
    for row in rows.values():
        assert (f"| {row['label']} | {row['n']:,} | {row['best_ops_per_s']:,.0f} | "
                f"{row['client_cpu_us_per_op']:,.1f} | {row['server_cpu_us_per_op']:,.1f} |"
                ) in section
    assert "**quick run**" in section and "`somewhere/workq.json`" in section
    assert "Not recorded: beanstalk, gearman, qless." in section
    assert report.render(report.load(results), "somewhere") == section  # the JSON alone


@pytest.mark.slow
def test_the_page_is_rewritten_between_the_markers_and_checked(
    results: Path, tmp_path: Path
) -> None:
    page = _page(tmp_path)
    check = _cli("--results", str(results), "--page", str(page), "--check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "differs" in check.stderr and "-hand-written numbers" in check.stderr
    assert "hand-written numbers" in page.read_text(encoding="utf-8")  # --check writes nothing

    done = _cli("--results", str(results), "--page", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text(encoding="utf-8")
    section = report.render(report.load(results), report.source_name(results))
    assert text == f"# project\n\nbefore\n\n{report.BEGIN}\n{section}{report.END}\n\nafter\n"
    assert _cli("--results", str(results), "--page", str(page), "--check").returncode == 0
    assert _cli("--results", str(results), "--page", str(page)).returncode == 0
    assert page.read_text(encoding="utf-8") == text  # a second rewrite changes nothing

    # A number edited by hand is drift.
    row = report.load(results)["workq"]["results"][0]
    shown = f"{row['best_ops_per_s']:,.0f}"
    page.write_text(text.replace(f"| {shown} |", "| 1 |", 1), encoding="utf-8")
    assert _cli("--results", str(results), "--page", str(page), "--check").returncode == 1

    printed = _cli("--results", str(results), "--stdout")
    assert printed.returncode == 0 and printed.stdout == section


def test_the_section_is_on_the_performance_page_and_not_in_the_readme() -> None:
    """The recorded figures live on docs/performance.md, before the plots the site's build
    draws there; the README (the package index's front page) only links to them."""
    assert report.PAGE == ROOT / "docs" / "performance.md"
    page = report.PAGE.read_text(encoding="utf-8")
    assert page.count(report.BEGIN) == 1 and page.count(report.END) == 1
    assert page.index(report.END) < page.index(hooks.MARKER)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert report.BEGIN not in readme and report.END not in readme
    assert "docs/performance.md" in readme
    done = _cli("--check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("performance.md: the performance section matches")


def test_a_page_without_its_markers_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# project\n\nno markers\n", encoding="utf-8")
    done = _cli("--results", str(tmp_path), "--page", str(page))
    assert done.returncode == 2
    assert f"must hold {report.BEGIN} and {report.END} once each (found 0 and 0)" in done.stderr
    assert page.read_text(encoding="utf-8") == "# project\n\nno markers\n"
    page.write_text(f"{report.END}\n{report.BEGIN}\n", encoding="utf-8")
    done = _cli("--results", str(tmp_path), "--page", str(page), "--check")
    assert done.returncode == 2 and "comes before" in done.stderr


def test_a_results_file_of_another_shape_is_refused_by_name(tmp_path: Path) -> None:
    # The shape benchmarks/workq.py wrote before it shared _harness's.
    (tmp_path / "workq.json").write_text(json.dumps({
        "server": "bundled", "results": {"add": {"raw": {"n": 3000, "best_ops_s": 1.0}}}}))
    page = _page(tmp_path)
    done = _cli("--results", str(tmp_path), "--page", str(page))
    assert done.returncode == 2
    assert "workq.json: no 'environment'" in done.stderr
    (tmp_path / "workq.json").write_text("{not json")
    done = _cli("--results", str(tmp_path), "--page", str(page), "--check")
    assert done.returncode == 2 and "workq.json" in done.stderr
    assert "hand-written numbers" in page.read_text(encoding="utf-8")


def test_no_results_says_how_to_make_them(tmp_path: Path) -> None:
    page = _page(tmp_path)
    done = _cli("--results", str(tmp_path), "--page", str(page))
    assert done.returncode == 0, done.stderr
    assert "run `scripts/bench all`" in page.read_text(encoding="utf-8")


def test_the_scaling_runs_are_summed_up_and_drawn_beside_their_json(tmp_path: Path) -> None:
    """The recorded scaling.json (a real run): each series' first and last point in the
    section, the plot drawn into scaling.png when writing, and ``--check`` failing when the
    plot is missing or the JSON changed since the page was written."""
    results = tmp_path / "results"
    results.mkdir()
    recorded = json.loads((ROOT / "benchmarks" / "results" / "scaling.json").read_text())
    (results / "scaling.json").write_text(json.dumps(recorded), encoding="utf-8")
    page = _page(tmp_path)

    done = _cli("--results", str(results), "--page", str(page))
    assert done.returncode == 0, done.stderr
    assert (results / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text(encoding="utf-8")
    # The page links the figure the site's build draws from the same file (docs/hooks.py).
    assert "\n[How cost grows: jobwire against a raw socket](#bench-scaling)\n" in text
    figure = SimpleNamespace(name="scaling", title="t", source="scaling.json", table="", notes=[])
    assert f"{{#{report.SCALING_PLOT[1:]}}}" in hooks.results_markdown([figure], [], results)
    for series in recorded["series"]:
        key, unit = report.SCALING_VALUES[series["scan"]]
        last = series["points"][-1]
        assert f"| {series['scan']} | {series['label']} | " in text
        assert f"{last[key]:,.0f} {unit} |" in text
    assert _cli("--results", str(results), "--page", str(page), "--check").returncode == 0

    (results / "scaling.png").unlink()
    missing = _cli("--results", str(results), "--page", str(page), "--check")
    assert missing.returncode == 1 and "scaling.png is missing" in missing.stderr

    recorded["series"][0]["points"][-1]["x"] += 1  # a new run: the page must follow
    (results / "scaling.json").write_text(json.dumps(recorded), encoding="utf-8")
    assert _cli("--results", str(results), "--page", str(page)).returncode == 0
    stale = _page(tmp_path, text.split(report.BEGIN + "\n")[1].split(report.END)[0])
    changed = _cli("--results", str(results), "--page", str(stale), "--check")
    assert changed.returncode == 1 and "differs" in changed.stderr
