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


def _runs(config: Mapping[str, Any]) -> str:
    """How many timed runs each figure is the median (older files: the best) of."""
    return str(config.get("runs", config.get("repeats", "?")))


# -- one function per results file ------------------------------------------------------------
# Each returns (title, groups, notes, caption).

Parsed = tuple[str, list[Group], list[str], str]


def _listed(doc: Mapping[str, Any], where: str, value_key: str, titles: Mapping[str, str],
            units: Mapping[str, str] | None = None) -> tuple[list[Group], list[str]]:
    """``results`` as a list of ``{scenario, client, label, <value_key>}`` (every benchmark
    but soak): one group per scenario, in ``titles`` order, then any others; ``units`` by
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
    groups, notes = _listed(doc, where, "median_ops_per_s", config.get("scenarios", {}))
    env = doc.get("environment", {})
    caption = (f"{config.get('statistic', 'best of the timed runs')}; runs "
               f"{_runs(config)}{', quick run' if config.get('quick') else ''}; "
               f"{_env_line(env, 'beanstalkd', 'python', 'cpu_count', 'cpu_model')}")
    return "beanstalk: jobwire, greenstalk, aiostalk and a raw socket", groups, notes, caption


def parse_gearman(doc: Mapping[str, Any]) -> Parsed:
    where = "gearman.json"
    config = _get(doc, "config", Mapping, where)
    groups, notes = _listed(doc, where, "median_ops_per_s", config.get("scenarios", {}))
    env = doc.get("environment", {})
    caption = (f"{config.get('statistic', 'best of the timed runs')}; runs "
               f"{_runs(config)}; "
               f"{_env_line(env, 'gearmand', 'python', 'cpu_count', 'cpu_model')}")
    return "Gearman: jobwire, pygearman and a raw socket", groups, notes, caption


def parse_workq(doc: Mapping[str, Any]) -> Parsed:
    where = "workq.json"
    config = _get(doc, "config", Mapping, where)
    groups, notes = _listed(doc, where, "median_ops_per_s", config.get("scenarios", {}))
    env = doc.get("environment", {})
    caption = (f"{config.get('statistic', 'best of the timed runs')}; runs "
               f"{_runs(config)}; the bundled Workq server; "
               f"{_env_line(env, 'python', 'cpu_count', 'cpu_model')}")
    return "Workq: jobwire sync, async and a raw socket", groups, notes, caption


def parse_qless(doc: Mapping[str, Any]) -> Parsed:
    where = "qless.json"
    config = _get(doc, "config", Mapping, where)
    groups, notes = _listed(doc, where, "median_ops_per_s", config.get("scenarios", {}))
    env = doc.get("environment", {})
    caption = (f"{config.get('statistic', 'best of the timed runs')}; runs "
               f"{_runs(config)}; "
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
    rows = doc.get("results")
    older = isinstance(rows, list) and any(isinstance(r, Mapping) and "best_per_s" in r
                                           for r in rows)  # (before the medians of 5 runs)
    groups, notes = _listed(doc, where, "best_per_s" if older else "median_ops_per_s",
                            SPARK_TITLES, SPARK_UNITS)
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
ORDER = ["beanstalk", "gearman", "workq", "qless", "spark", "soak", "scaling"]


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


#: The scans of ``scaling.json`` in page order: (title, x axis, throughput key and axis, CPU
#: axis). ``idle_connections`` has its own keys (RSS and bytes per connection).
SCALING_SCANS: dict[str, tuple[str, str, str, str, str]] = {
    "body_size": ("body size", "body bytes", "median_mb_per_s", "MB/s of body",
                  "client CPU µs per MB"),
    "concurrency": ("one AsyncWorker connection, 10 ms handler", "concurrency",
                    "median_ops_per_s", "jobs/s", "client CPU µs per job"),
    "watched_tubes": ("beanstalk reserve + delete, N watched tubes", "watched tubes",
                      "median_ops_per_s", "ops/s", "client CPU µs per op"),
    "lease_names": ("Workq lease with N names + delete", "lease names", "median_ops_per_s",
                    "ops/s", "client CPU µs per op"),
    "idle_connections": ("idle connections held by a server", "idle connections",
                         "server_rss_kib", "server RSS (MiB)", "bytes per connection"),
}
SCALING_COLOURS = ["#3f51b5", "#e91e63", "#009688", "#ff9800", "#795548", "#9c27b0"]


def _size(value: float) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} B"


def render_scaling(doc: Mapping[str, Any]) -> tuple[str, bytes, str, list[str]]:
    """``scaling.json``: per scan, throughput (left) and cost (right) against a log x; jobwire
    solid, the raw socket dashed, one colour per system and server."""
    where = "scaling.json"
    config = _get(doc, "config", Mapping, where)
    series = _get(doc, "series", list, where)
    by_scan: dict[str, list[tuple[str, str, list[tuple[float, float, float | None]]]]] = {}
    table = ["| scan | series | x | result | client CPU µs/op |", "|---|---|--:|--:|--:|"]
    for i, line in enumerate(series):
        at = f"{where}: series[{i}]"
        scan = _get(line, "scan", str, at)
        if scan not in SCALING_SCANS:
            raise BadResults(f"{at}: unknown scan {scan!r}")
        label = _get(line, "label", str, at)
        client = str(line.get("client", ""))
        _, _, key, unit, _ = SCALING_SCANS[scan]
        points = []
        for j, point in enumerate(_get(line, "points", list, at)):
            here = f"{at}.points[{j}]"
            x = _number(_get(point, "x", (int, float), here), here)
            value = _number(_get(point, key, (int, float), here), here)
            if scan == "idle_connections":
                value /= 1024
                cost: float | None = _number(
                    _get(point, "bytes_per_connection", (int, float), here), here)
                table.append(f"| {scan} | {label} | {x:,.0f} | {_fmt(value)} MiB RSS, "
                             f"{cost:,.0f} B/connection | |")
            else:
                cpu = _number(_get(point, "median_client_cpu_us_per_op", (int, float), here), here)
                cost = cpu / (x / 1e6) if scan == "body_size" else cpu
                shown = f"{_size(x)}" if scan == "body_size" else f"{x:,.0f}"
                table.append(f"| {scan} | {label} | {shown} | {_fmt(value)} {unit} "
                             f"| {_fmt(cpu)} |")
            points.append((x, value, cost))
        if points:
            by_scan.setdefault(scan, []).append((label, client, points))
    scans = [s for s in SCALING_SCANS if s in by_scan]
    if not scans:
        raise BadResults(f"{where}: no results to plot")
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, axes = plt.subplots(len(scans), 2, figsize=(11, 3.1 * len(scans) + 0.6),
                             squeeze=False)
    numbers = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    sizes = FuncFormatter(lambda v, _: _size(v))
    for row, scan in zip(axes, scans, strict=True):
        title, x_name, _, unit, cost_unit = SCALING_SCANS[scan]
        rate_ax, cost_ax = row
        colours: dict[str, str] = {}
        for label, client, points in by_scan[scan]:
            group = label.rsplit(", ", 1)[0] if scan == "body_size" else label.split(" -> ")[-1]
            colour = colours.setdefault(group, SCALING_COLOURS[len(colours)
                                                               % len(SCALING_COLOURS)])
            raw = client == "raw" or "raw" in label.lower()
            style = {"color": colour, "linestyle": "--" if raw else "-",
                     "marker": "x" if raw else "o", "markersize": 4, "linewidth": 1.3}
            xs = [p[0] for p in points]
            rate_ax.plot(xs, [p[1] for p in points], label=label, **style)
            costs = [(p[0], p[2]) for p in points if p[2] is not None and p[2] > 0]
            if costs:
                cost_ax.plot([c[0] for c in costs], [c[1] for c in costs], label=label, **style)
        if scan == "concurrency":
            xs = sorted({p[0] for _, _, points in by_scan[scan] for p in points})
            rate_ax.plot(xs, [x / float(config.get("handler_s", 0.01)) for x in xs],
                      color="#9e9e9e", linestyle=":", label="ideal: concurrency / handler time")
        ticks = sorted({p[0] for _, _, points in by_scan[scan] for p in points})
        for ax, name in ((rate_ax, unit), (cost_ax, cost_unit)):
            ax.set_xscale("log")
            ax.set_xticks(ticks)
            ax.xaxis.set_major_formatter(sizes if scan == "body_size" else numbers)
            ax.xaxis.set_minor_formatter(NullFormatter())
            low, high = ax.dataLim.y0, ax.dataLim.y1
            if low > 0 and high / low > 20:
                ax.set_yscale("log")
                ax.yaxis.set_minor_formatter(NullFormatter())
            else:
                ax.set_ylim(0, high * 1.15 if high > 0 else 1)
            ax.yaxis.set_major_formatter(numbers)
            ax.set_xlabel(x_name, fontsize=8)
            ax.set_ylabel(name, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        rate_ax.set_title(title, fontsize=9, loc="left")
        rate_ax.legend(fontsize=6, frameon=False)
    env = doc.get("environment", {})
    title = "How cost grows: jobwire against a raw socket"
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    caption = (f"{config.get('statistic', 'best of the timed runs')}; runs "
               f"{_runs(config)}{', quick run' if config.get('quick') else ''}; "
               f"solid: jobwire, dashed: raw socket; "
               f"{_env_line(env, 'python', 'cpu_count', 'cpu_model')}")
    fig.text(0.01, 0.0, caption, fontsize=7, color="#555555", ha="left", va="top", wrap=True)
    fig.tight_layout(rect=(0, 0.01, 1, 0.98))
    return title, _png(fig), "\n".join(table), []


def render(name: str, doc: Mapping[str, Any]) -> Chart:
    """Draw the results file ``<name>.json`` (already parsed).

    Raises:
        BadResults: the document lacks what ``benchmarks/<name>.py`` writes.
        KeyError: no plotter for ``name``.
    """
    if not isinstance(doc, Mapping):
        raise BadResults(f"{name}.json: not a JSON object")
    if name in ("soak", "scaling"):
        title, png, table, notes = (render_soak if name == "soak" else render_scaling)(doc)
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
