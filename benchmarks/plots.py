"""PNG plots (and markdown tables) of the benchmark results in ``benchmarks/results/*.json``.

The docs build draws them for the Performance page (``docs/hooks.py``); by hand:

    .venv/bin/python benchmarks/plots.py --out DIR              # DIR/<system>.png
    .venv/bin/python benchmarks/plots.py --results DIR --out DIR

Each benchmark script writes its own shape of JSON; this module knows each one by its file
name (``beanstalk.json`` from ``benchmarks/beanstalk.py`` and so on). A known file that does not
have its shape raises :class:`BadResults` naming the file and what is missing; a file it does
not know is reported and left out. Needs matplotlib (the ``docs`` extra); draws with the Agg
backend, so no display is needed.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BadResults", "Chart", "Report", "charts", "main", "render"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

#: Bar colours by kind of client: jobwire's own, the peer library, the raw-socket ceiling.
COLOURS = {"jobwire": "#3f51b5", "peer": "#ff9800", "raw": "#9e9e9e"}
KIND_NAMES = {"jobwire": "jobwire", "peer": "peer library / plain Python", "raw": "raw socket"}


class BadResults(ValueError):
    """A results file this module knows does not have the shape its benchmark writes."""


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    kind: str  # a key of COLOURS


@dataclass(frozen=True)
class Group:
    title: str
    bars: list[Bar]
    unit: str = "ops/s"


@dataclass(frozen=True)
class Chart:
    """One results file, drawn."""

    name: str  #: the results file's stem, e.g. ``beanstalk``; the PNG is ``<name>.png``
    source: str  #: the results file's name
    title: str
    png: bytes
    table: str  #: the same numbers as a markdown table
    notes: list[str] = field(default_factory=list)  #: what the plot leaves out, and why


@dataclass
class Report:
    charts: list[Chart] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  #: files with no plotter, as messages


# -- reading ----------------------------------------------------------------------------------


def _get(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(doc, Mapping) or key not in doc:
        raise BadResults(f"{where}: no {key!r}")
    value = doc[key]
    if not isinstance(value, kind):
        raise BadResults(f"{where}: {key!r} is a {type(value).__name__}")
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadResults(f"{where}: {value!r} is not a number")
    return float(value)


def _kind(client: str, label: str) -> str:
    text = f"{client} {label}".lower()
    if "raw" in text:
        return "raw"
    if text.startswith(("jobwire", "worker", "spark", "asyncio", "trio", "sync-")):
        return "jobwire"
    return "peer"


def _env_line(env: Mapping[str, Any], *keys: str) -> str:
    """``key value`` for each key present; just the value where it names itself
    (``beanstalkd 1.12``)."""
    parts = []
    for key in keys:
        value = str(env.get(key) or "")
        if value:
            name = key.replace("_", " ")
            parts.append(value if value.lower().startswith(key.split("_")[0]) else
                         f"{name} {value}")
    return ", ".join(parts)


# -- one function per results file ------------------------------------------------------------
# Each returns (title, groups, notes, caption).

Parsed = tuple[str, list[Group], list[str], str]


def _listed(doc: Mapping[str, Any], where: str, value_key: str, titles: Mapping[str, str],
            units: Mapping[str, str] | None = None) -> tuple[list[Group], list[str]]:
    """``results`` as a list of ``{scenario, client, label, <value_key>}`` (beanstalk, qless,
    spark): one group per scenario, in ``titles`` order, then any others; ``units`` by
    scenario (default ops/s)."""
    rows = _get(doc, "results", list, where)
    groups: dict[str, list[Bar]] = {}
    notes: list[str] = []
    for i, row in enumerate(rows):
        at = f"{where}: results[{i}]"
        scenario = _get(row, "scenario", str, at)
        label = _get(row, "label", str, at)
        client = str(row.get("client", row.get("key", "")))
        if "error" in row and value_key not in row:
            notes.append(f"{label} ({scenario}): {row['error']}")
            continue
        value = _number(_get(row, value_key, (int, float), at), at)
        groups.setdefault(scenario, []).append(Bar(label, value, _kind(client, label)))
    order = list(titles) + [s for s in groups if s not in titles]
    units = units or {}
    return [Group(titles.get(s, s), groups[s], units.get(s, "ops/s"))
            for s in order if s in groups], notes


def parse_beanstalk(doc: Mapping[str, Any]) -> Parsed:
    where = "beanstalk.json"
    config = _get(doc, "config", Mapping, where)
    groups, notes = _listed(doc, where, "best_ops_per_s", config.get("scenarios", {}))
    env = doc.get("environment", {})
    caption = (f"{config.get('statistic', 'best of the timed runs')}; repeats "
               f"{config.get('repeats', '?')}{', quick run' if config.get('quick') else ''}; "
               f"{_env_line(env, 'beanstalkd', 'python', 'cpu_count', 'cpu_model')}")
    return "beanstalk: jobwire, greenstalk, aiostalk and a raw socket", groups, notes, caption


GEARMAN_SCENARIOS = {
    "bg_single": "background submit, one at a time",
    "bg_bulk": "background submit, bulk",
    "fg_1": "foreground round trip, 1 in flight",
    "fg_100": "foreground, 100 in flight",
}


def parse_gearman(doc: Mapping[str, Any]) -> Parsed:
    where = "gearman.json"
    table = _get(doc, "jobs_per_second", Mapping, where)
    groups: list[Group] = []
    notes: list[str] = []
    for scenario in list(GEARMAN_SCENARIOS) + [s for s in table if s not in GEARMAN_SCENARIOS]:
        if scenario not in table:
            continue
        clients = _get(table, scenario, Mapping, where)
        bars = []
        for client, value in clients.items():
            if value is None:
                notes.append(f"{client} ({scenario}): no result")
                continue
            bars.append(Bar(client, _number(value, f"{where}: {scenario}.{client}"),
                            _kind(client, client)))
        groups.append(Group(GEARMAN_SCENARIOS.get(scenario, scenario), bars, "jobs/s"))
    caption = (f"best of {doc.get('repeats', '?')} runs; {doc.get('gearmand', 'gearmand')}; "
               f"python {doc.get('python', '?')}, {doc.get('cpus', '?')} CPUs")
    return "Gearman: jobwire, pygearman and a raw socket", groups, notes, caption


WORKQ_SCENARIOS = {
    "add": "add, one at a time",
    "add_pipelined": "add, pipelined",
    "lease_complete": "lease + complete",
}


def parse_workq(doc: Mapping[str, Any]) -> Parsed:
    where = "workq.json"
    table = _get(doc, "results", Mapping, where)
    groups: list[Group] = []
    for scenario in list(WORKQ_SCENARIOS) + [s for s in table if s not in WORKQ_SCENARIOS]:
        if scenario not in table:
            continue
        clients = _get(table, scenario, Mapping, where)
        bars = [
            Bar(client, _number(_get(row, "best_ops_s", (int, float), f"{where}: {scenario}"),
                                f"{where}: {scenario}.{client}"), _kind(client, client))
            for client, row in clients.items()
        ]
        groups.append(Group(WORKQ_SCENARIOS.get(scenario, scenario), bars))
    caption = (f"best of {doc.get('repeats', '?')} runs; {doc.get('server', 'bundled server')}; "
               f"python {doc.get('python', '?')}, {doc.get('cpus', '?')} CPUs")
    return "Workq: jobwire sync, async and a raw socket", groups, [], caption


def parse_qless(doc: Mapping[str, Any]) -> Parsed:
    where = "qless.json"
    config = _get(doc, "config", Mapping, where)
    groups, notes = _listed(doc, where, "best_ops_per_s", config.get("scenarios", {}))
    env = doc.get("environment", {})
    caption = (f"{config.get('statistic', 'best of the timed runs')}; repeats "
               f"{config.get('repeats', '?')}; "
               f"{_env_line(env, 'redis_server', 'python', 'cpu_count', 'cpu_model')}")
    return "qless: jobwire and a raw socket sending the same EVALSHA", groups, notes, caption


SPARK_UNITS = {"write": "rows/s", "stream": "jobs/s", "metrics": "events/s"}
SPARK_TITLES = {
    "write": "write into beanstalkd",
    "stream": "stream read from beanstalkd",
    "metrics": "job metrics over lifecycle events",
}


def parse_spark(doc: Mapping[str, Any]) -> Parsed:
    where = "spark.json"
    config = _get(doc, "config", Mapping, where)
    groups, notes = _listed(doc, where, "best_per_s", SPARK_TITLES, SPARK_UNITS)
    env = doc.get("environment", {})
    caption = (f"{config.get('statistic', 'best of the timed runs')}; master "
               f"{config.get('master', '?')}; "
               f"{_env_line(env, 'beanstalkd', 'python', 'cpu_count', 'cpu_model')}")
    return "Spark: jobwire.spark against one Python process", groups, notes, caption


PARSERS: dict[str, Callable[[Mapping[str, Any]], Parsed]] = {
    "beanstalk": parse_beanstalk,
    "gearman": parse_gearman,
    "workq": parse_workq,
    "qless": parse_qless,
    "spark": parse_spark,
}
#: The order of the charts on the page.
ORDER = ["beanstalk", "gearman", "workq", "qless", "spark", "soak"]


# -- drawing ----------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return out.getvalue()


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.3g}"


def draw_bars(title: str, groups: Sequence[Group], caption: str) -> bytes:
    """Horizontal bars, one block per scenario (each with its own axis and unit), values
    written at the bars' ends; a log axis where a block spans more than 20x."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    thousands = FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:g}")
    heights = [max(len(g.bars), 1) * 0.32 + 0.55 for g in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, sum(heights) + 0.9), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, group in zip(axes[:, 0], groups, strict=True):
        labels = [b.label for b in group.bars]
        values = [b.value for b in group.bars]
        ys = range(len(values))
        ax.barh(list(ys), values, color=[COLOURS[b.kind] for b in group.bars], height=0.7)
        ax.set_yticks(list(ys), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(group.title, fontsize=9, loc="left")
        ax.set_xlabel(group.unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", alpha=0.3)
        low, high = min(values, default=1), max(values, default=1)
        if low > 0 and high / low > 20:
            ax.set_xscale("log")
            ax.set_xlim(low / 2, high * 4)
        else:
            ax.set_xlim(0, high * 1.25 if high > 0 else 1)
        ax.xaxis.set_major_formatter(thousands)
        for y, value in zip(ys, values, strict=True):
            ax.text(value, y, f" {_fmt(value)}", va="center", fontsize=7)
    kinds = []
    for g in groups:
        kinds += [b.kind for b in g.bars if b.kind not in kinds]
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in COLOURS if k in kinds]
    fig.legend(handles, [KIND_NAMES[k] for k in COLOURS if k in kinds], loc="upper right",
               fontsize=8, ncols=len(handles), frameon=False)
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    fig.text(0.01, 0.0, caption, fontsize=7, color="#555555", ha="left", va="top", wrap=True)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    return _png(fig)


def _bars_table(groups: Sequence[Group]) -> str:
    lines = ["| scenario | client | result |", "|---|---|--:|"]
    for g in groups:
        for b in g.bars:
            lines.append(f"| {g.title} | {b.label} | {_fmt(b.value)} {g.unit} |")
    return "\n".join(lines)


def render_soak(doc: Mapping[str, Any]) -> tuple[str, bytes, str, list[str]]:
    where = "soak.json"
    systems = _get(doc, "systems", list, where)
    plt = _pyplot()
    fig, (rate, rss) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    lines = ["| system | put | handled | errors | last server RSS |", "|---|--:|--:|--:|--:|"]
    for i, system in enumerate(systems):
        at = f"{where}: systems[{i}]"
        name = _get(system, "name", str, at)
        samples = _get(system, "samples", list, at)
        t = [_number(_get(s, "t", (int, float), at), at) / 60 for s in samples]
        handled = [_number(_get(s, "handled_per_s", (int, float), at), at) for s in samples]
        memory = [_number(s.get("server_rss_kib", 0), at) / 1024 for s in samples]
        rate.plot(t, handled, marker="o", markersize=3, label=name)
        rss.plot(t, memory, marker="o", markersize=3, label=name)
        lines.append(f"| {name} | {system.get('put', '?'):,} | {system.get('handled', '?'):,} | "
                     f"{system.get('errors', '?')} | "
                     f"{_fmt(memory[-1]) if memory else '?'} MiB |")
    rate.set_ylabel("jobs handled per s", fontsize=8)
    rss.set_ylabel("server RSS (MiB)", fontsize=8)
    rss.set_xlabel("minutes", fontsize=8)
    for ax in (rate, rss):
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        ax.set_ylim(bottom=0)
    rate.legend(fontsize=8, ncols=4, frameon=False)
    minutes = doc.get("minutes", "?")
    title = f"Soak: every bundled server at once for {minutes} minutes"
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    caption = (f"{doc.get('producers', '?')} producers per system, workers with concurrency "
               f"{doc.get('concurrency', '?')}; python {doc.get('python', '?')}, "
               f"{doc.get('cpus', '?')} CPUs")
    fig.text(0.01, 0.0, caption, fontsize=7, color="#555555", ha="left", va="top")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    return title, _png(fig), "\n".join(lines), []


def render(name: str, doc: Mapping[str, Any]) -> Chart:
    """Draw the results file ``<name>.json`` (already parsed).

    Raises:
        BadResults: the document lacks what ``benchmarks/<name>.py`` writes.
        KeyError: no plotter for ``name``.
    """
    if not isinstance(doc, Mapping):
        raise BadResults(f"{name}.json: not a JSON object")
    if name == "soak":
        title, png, table, notes = render_soak(doc)
        return Chart(name, f"{name}.json", title, png, table, notes)
    title, groups, notes, caption = PARSERS[name](doc)
    if not any(g.bars for g in groups):
        raise BadResults(f"{name}.json: no results to plot")
    groups = [g for g in groups if g.bars]
    return Chart(name, f"{name}.json", title, draw_bars(title, groups, caption),
                 _bars_table(groups), notes)


def results_files(results: Path = RESULTS) -> tuple[list[Path], list[str]]:
    """The results files in ``results`` that this module draws, in :data:`ORDER`, and a
    message for each other ``*.json`` there."""
    files = sorted(results.glob("*.json")) if results.is_dir() else []
    known = {p.stem: p for p in files if p.stem in ORDER}
    skipped = [f"{p.name}: no plot for this file" for p in files if p.stem not in known]
    return [known[name] for name in ORDER if name in known], skipped


def chart_file(path: Path) -> Chart:
    """Draw one results file.

    Raises:
        BadResults: it is not valid JSON or lacks its benchmark's shape.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadResults(f"{path.name}: {exc}") from exc
    return render(path.stem, doc)


def charts(results: Path = RESULTS) -> Report:
    """Every results file in ``results`` that this module knows, drawn, in :data:`ORDER`.

    Raises:
        BadResults: a known file is not valid JSON or lacks its benchmark's shape.
    """
    files, skipped = results_files(results)
    return Report([chart_file(path) for path in files], skipped)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help=f"where the JSON files are (default {RESULTS.relative_to(ROOT)})")
    parser.add_argument("--out", type=Path, required=True, help="where the PNGs go")
    args = parser.parse_args(None if argv is None else list(argv))
    out: Path = args.out
    try:
        report = charts(args.results)
    except BadResults as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for message in report.skipped:
        print(f"skipped {message}", file=sys.stderr)
    if not report.charts:
        print(f"no benchmark results in {args.results}", file=sys.stderr)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    for chart in report.charts:
        (out / f"{chart.name}.png").write_bytes(chart.png)
        print(out / f"{chart.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
