"""The measured figures the hand-written pages quote from ``benchmarks/results/*.json`` (outside
docs/performance.md's generated sections, which ``benchmarks/report.py --check`` covers): each
is the median of at least 5 interleaved runs, shown with its lowest and highest run, and each
page says what its JSON says. No assertion here is about speed: the numbers are whatever the
recorded runs measured."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from ..conftest import load_file

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"

resp_parse = load_file("jobwire_benchmark_resp_parse", ROOT / "benchmarks" / "resp_parse.py")
micro = load_file("jobwire_benchmark_micro", ROOT / "benchmarks" / "micro.py")


def _json(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    return document


def _page(name: str) -> str:
    """The page's text with every run of whitespace one space: a figure may wrap."""
    return " ".join((DOCS / name).read_text(encoding="utf-8").split())


@pytest.mark.parametrize("name", ["resp_parse", "micro"])
def test_each_row_is_the_median_of_at_least_5_runs_with_its_spread(name: str) -> None:
    document = _json(name)
    assert document["config"]["runs"] >= 5
    for row in document["results"]:
        samples = row["samples"]
        assert len(samples) == document["config"]["runs"]
        assert (row["median"], row["min"], row["max"]) == (
            statistics.median(samples), min(samples), max(samples))


def test_the_qless_page_shows_the_reply_parsing_table_of_resp_parse_json() -> None:
    table = resp_parse.table(_json("resp_parse"))
    assert " ".join(table.split()) in _page("qless.md")
    assert "benchmarks/results/resp_parse.json" in _page("qless.md")


@pytest.mark.parametrize(("page", "rows"), [
    ("events.md", ["emit"]),
    ("architecture.md", ["record class", "dataclass class"]),
    ("performance.md", ["record class", "dataclass class"]),
])
def test_the_pages_quote_micro_json(page: str, rows: list[str]) -> None:
    text = _page(page)
    assert "benchmarks/results/micro.json" in text
    for row in rows:
        assert f"{micro.figure(_json('micro'), row)}" in text, row


def test_the_beanstalkd_page_quotes_the_first_replies_of_startup_json() -> None:
    document = _json("startup")
    assert document["config"]["repeats"] >= 5
    rows = {row["row"]: row for row in document["results"]}
    text = _page("beanstalkd.md")
    for name in ("beanstalk", "beanstalk (.py)", "beanstalkd"):
        row = rows[name]
        assert len(row["reply_s"]) >= 5
        shown = [f"{row[key] * 1e3:,.0f}" for key in
                 ("median_reply_s", "min_reply_s", "max_reply_s")]
        assert "{} ({}-{}) ms".format(*shown) in text, name


def _fairness_ms(summary: dict[str, float]) -> str:
    def number(value: float) -> str:
        return f"{value:.1f}" if value < 10 else f"{value:.0f}"

    return (f"{number(summary['median'] * 1e3)} ms ({number(summary['min'] * 1e3)}-"
            f"{number(summary['max'] * 1e3)})")


def _fairness_ratio(summary: dict[str, float]) -> str:
    def number(value: float) -> str:
        return f"{value:.1f}" if value < 10 else f"{value:.0f}"

    return f"{number(summary['median'])}x ({number(summary['min'])}-{number(summary['max'])})"


@pytest.mark.parametrize(("scenario", "label"), [
    ("beanstalk put", "beanstalk `put`"),
    ("beanstalk peek", "beanstalk `peek`"),
    ("gearman submit", "Gearman `SUBMIT_JOB_BG`"),
    ("workq add", "Workq `add`"),
])
def test_the_reliability_page_shows_the_rows_of_fairness_json(scenario: str, label: str) -> None:
    document = _json("fairness")
    rows = {row["scenario"]: row for row in document["results"]}
    after, before = rows[scenario], rows[f"{scenario}@before"]
    for row in (after, before):
        assert len(row["runs"]) == document["config"]["rounds"] >= 5
    rounds = [max(r["flood"]) / max(r["idle"]) for r in after["runs"]]
    probes = [t for r in after["runs"] for t in r["flood"]]
    cells = [
        label,
        *(_fairness_ms(before[key]) for key in ("slowest_idle_s", "slowest_flood_s")),
        _fairness_ratio(before["ratio"]),
        *(_fairness_ms(after[key]) for key in ("slowest_idle_s", "slowest_flood_s")),
        f"{_fairness_ratio(after['ratio'])}, {sum(r <= 3 for r in rounds)} of {len(rounds)}",
        f"{statistics.median(probes) * 1e3:.1f} / "
        f"{statistics.quantiles(probes, n=10)[-1] * 1e3:.1f} ms",
    ]
    assert f"| {' | '.join(cells)} |" in _page("reliability.md")
