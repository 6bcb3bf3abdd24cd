"""Does a quick run reproduce the published figures? ``scripts/bench --check`` runs this.

    scripts/bench --check                                # the quick pass, then the verdicts
    scripts/bench --check --full                         # Spark too, at its published sizes
    .venv/bin/python benchmarks/check.py --only workq,micro   # some of them
    .venv/bin/python benchmarks/check.py --against DIR   # compare the JSON already in DIR

The quick pass runs each benchmark below with ``--quick`` (3 interleaved runs per row,
``--runs N``), writing ``DIR/<name>.json`` (default ``benchmarks/results/quick/``), and
compares each figure the docs show from ``benchmarks/results/<name>.json``:

* ``beanstalk``, ``gearman``, ``workq``, ``qless`` (fewer operations): each row's median ops/s
  and client CPU µs/op and each target's ratio (docs/performance.md; ``report.compare``);
* ``startup``: each row's first reply and "accepted" ms and its multiple of the bare process's
  (docs/performance.md "Start to first reply", docs/beanstalkd.md);
* ``micro``: the record-class build costs and ``EventSink.emit``'s, µs of CPU
  (docs/architecture.md, docs/events.md);
* ``resp_parse``: each reply's parse cost for each parser (docs/qless.md);
* ``pool`` (3,200 puts per run, not 24,000): each row's ops/s and client CPU µs/put
  (docs/performance.md "Pooled clients").

About 4 minutes on 2 cores, the protocols most of it (the other four take well under a
minute together). ``--full`` also runs ``spark`` at the sizes ``spark.json``'s config records,
3 interleaved runs per row, and compares each row's per-second and CPU-per-item figures and
each Spark-over-one-process ratio (docs/spark.md): about 8-12 minutes more at the default
sizes (500,000 rows, 100,000 jobs, 4,000,000 events; it prints an estimate from the published
run first). Spark's own ``--quick`` takes a tenth of the sizes, which multiplies each Spark
job's fixed cost per item by ten: its figures are not comparable, so the default pass leaves
Spark out.

A figure is reproduced when this run's median lies within the published [min, max] widened on
each side by ``report.TOLERANCE`` of the published median (``report.Verdict``). It prints one
table (figure, published median (min-max), this run's median (min-max), verdict), then the
figures not reproduced by name, each quick file that is missing (its figures "not run"), and
the published files this pass does not check, with why (Spark without ``--full``, scaling,
fairness, compiled, soak). Exit status: 0 every figure checked was reproduced; 1 a figure was
not reproduced or a quick file is missing; 2 a benchmark failed or a results file cannot be
read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import report  # this folder

HERE = Path(__file__).resolve().parent
#: What the default quick pass runs, in this order.
QUICK = (*report.PROTOCOLS, "startup", "micro", "resp_parse", "pool")
#: What ``--full`` adds: Spark at its published sizes, this many interleaved runs per row.
FULL = ("spark",)
FULL_RUNS = 3
#: The published files no pass here checks (or the default one does not), and why.
NOT_CHECKED = {
    "spark": "a quick Spark run takes a tenth of the sizes, so each Spark job's fixed cost "
             "weighs ten times as much per item: run `scripts/bench --check --full` (about "
             "8-12 minutes more) or `scripts/bench spark`",
    "scaling": "a series of points, each its own full run (about 4 minutes; a quick run "
               "measures fewer points): run `scripts/bench scaling`",
    "fairness": "a probe's slowest answer over 4-second phases of flooding (about 5 minutes; "
                "a quick run's shorter phases see fewer of the slow answers): run "
                "`scripts/bench fairness`",
    "compiled": "needs the mypyc build of the cores (minutes to build) and valgrind: run "
                "`.venv/bin/python benchmarks/compiled.py`",
    "soak": "minutes of mixed load, throughput and memory over time, not a median of runs: "
            "run `.venv/bin/python benchmarks/soak.py`",
}


class Missing(Exception):
    """A quick results file that is not there."""


@dataclass(frozen=True)
class Figure:
    """One figure of a document: its median, min and max (None: not measured), the unit
    ("ops/s", "µs", "ms", "x"), whether its runs were unstable. A ``name`` holding ``{unit}``
    says it: a figure in µs whose published median is under 1 µs is shown in ns."""

    name: str
    value: tuple[float, float, float] | None
    unit: str
    unstable: bool = False


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unstable(values: object) -> bool:
    numbers = [float(v) for v in values if _number(v)] if isinstance(values, list) else []
    share = report.spread(numbers)
    return share is not None and share > report.UNSTABLE


def _triple(row: Mapping[str, Any], median: str, low: str, high: str, scale: float = 1.0
            ) -> tuple[float, float, float] | None:
    values = [row.get(median), row.get(low), row.get(high)]
    numbers = [float(v) for v in values if _number(v) and v > 0]
    if len(numbers) != 3:
        return None
    return _scaled((numbers[0], numbers[1], numbers[2]), scale)


def startup_figures(document: Mapping[str, Any]) -> list[Figure]:
    """Each row's first reply (ms), when its port accepted (ms) and its median over the bare
    process's (x; its range: the row's fastest over the bare's slowest, and the other way)."""
    rows = {row["row"]: row for row in document["results"] if "error" not in row}
    bare = rows.get("bare")
    bare_reply = None if bare is None else _triple(bare, "median_reply_s", "min_reply_s",
                                                   "max_reply_s")
    bare_samples = None if bare is None else bare.get("reply_s")
    out = []
    for name, row in rows.items():
        reply = _triple(row, "median_reply_s", "min_reply_s", "max_reply_s", 1e3)
        out.append(Figure(f"startup {name} first reply ms", reply, "ms",
                          _unstable(row.get("reply_s"))))
        connects = row.get("connect_s")
        accepted = None
        if isinstance(connects, list) and connects and all(_number(c) for c in connects):
            accepted = _triple({"median": row.get("median_connect_s"), "min": min(connects),
                                "max": max(connects)}, "median", "min", "max", 1e3)
        out.append(Figure(f"startup {name} accepted ms", accepted, "ms",
                          _unstable(connects)))
        if name == "bare" or bare_reply is None or reply is None:
            continue
        ratio = (reply[0] / (1e3 * bare_reply[0]), reply[1] / (1e3 * bare_reply[2]),
                 reply[2] / (1e3 * bare_reply[1]))
        out.append(Figure(f"startup {name} x bare", ratio, "x",
                          _unstable(row.get("reply_s")) or _unstable(bare_samples)))
    return out


def _plain_figures(document: Mapping[str, Any], name: Any) -> list[Figure]:
    """Rows holding ``median``, ``min``, ``max`` and ``samples`` in µs (micro, resp_parse)."""
    return [Figure(name(row), None if "error" in row else _triple(row, "median", "min", "max"),
                   "µs", _unstable(row.get("samples")))
            for row in document["results"]]


def micro_figures(document: Mapping[str, Any]) -> list[Figure]:
    """Each row's µs of CPU per class built (per event for ``emit``)."""
    return _plain_figures(document, lambda row: f"micro {row['row']}, {{unit}} of CPU per "
                          f"{'event' if row['row'] == 'emit' else 'class'}")


def resp_parse_figures(document: Mapping[str, Any]) -> list[Figure]:
    """Each (reply, parser)'s µs of CPU per reply parsed."""
    return _plain_figures(document, lambda row: f"resp_parse {row['reply']} / {row['parser']}, "
                          "{unit} of CPU per reply")


def harness_figures(kind: str, document: Mapping[str, Any], ops: str, cpu: str
                    ) -> list[Figure]:
    """A harness document's rows (``pool``, ``spark``): each row's median ops/s and client CPU
    µs per operation (named ``ops`` and ``cpu``), as :func:`report.compare` takes them from a
    protocol's rows."""
    out = []
    for row in document["results"]:
        if row.get("note"):
            continue
        for metric, unit, what in (("ops", "ops/s", ops), ("cpu", "µs", cpu)):
            key = report.FIGURES[metric]
            out.append(Figure(
                f"{kind} {row['scenario']}/{row['client']} {what}",
                None if "error" in row else _triple(row, f"median_{key}", f"min_{key}",
                                                    f"max_{key}"),
                unit, key in (row.get("unstable") or {})))
    return out


def pool_figures(document: Mapping[str, Any]) -> list[Figure]:
    return harness_figures("pool", document, "ops/s", "client CPU {unit}/put")


def spark_figures(document: Mapping[str, Any]) -> list[Figure]:
    """Every row's per-second and CPU-per-item figures, and the ratios docs/spark.md's first
    table shows (Spark's row over one process's: speed, CPU per item), each with its range
    over the runs (:func:`report.measure`)."""
    out = harness_figures("spark", document, "per s", "CPU {unit} per item")
    order = [(row["scenario"], row["client"]) for row in document["results"]]
    clients = set(order)
    pairs = [("write", "spark", "put_many", "write: Spark / put_many")]
    pairs += [("stream", client, "python", f"stream maxJobsPerBatch {client[6:]}: Spark / "
               "reserve+delete loop") for scenario, client in order
              if scenario == "stream" and client.startswith("spark-")]
    pairs += [("metrics", "spark", "python", "metrics: Spark job_metrics / one-pass Python"),
              ("metrics", "spark-read", "python-parse",
               "metrics, reading only: Spark read_events / json.loads per line")]
    for scenario, mine, other, what in pairs:
        if (scenario, mine) not in clients or (scenario, other) not in clients:
            continue
        for metric, name in (("ops", "speed"), ("cpu", "CPU per item")):
            part = report.Part("spark", (scenario, mine), (scenario, other), metric, 0.0)
            measured = report.measure(part, {"spark": document})
            value = (None if measured.ratio is None else
                     (measured.ratio, measured.low or 0.0, measured.high or 0.0))
            out.append(Figure(f"spark {what}, {name}", value, "x", measured.unstable))
    return out


FIGURES = {"startup": startup_figures, "micro": micro_figures,
           "resp_parse": resp_parse_figures, "pool": pool_figures, "spark": spark_figures}


def _plain(folder: Path, kind: str, keys: Sequence[str]) -> Mapping[str, Any] | None:
    """``<kind>.json`` of ``micro.py`` or ``resp_parse.py`` (rows of ``keys`` with a median,
    min and max), or None: not there.

    Raises:
        report.ReportError: not valid JSON or not that shape.
    """
    path = folder / f"{kind}.json"
    if not path.is_file():
        return None
    try:
        document: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise report.ReportError(f"{path.name}: {exc}") from exc
    results = document.get("results") if isinstance(document, Mapping) else None
    if not isinstance(document, Mapping) or not isinstance(results, list) or not all(
            isinstance(row, Mapping) and all(isinstance(row.get(k), str) for k in keys)
            and ("error" in row or all(_number(row.get(k)) for k in ("median", "min", "max")))
            for row in results):
        raise report.ReportError(f"{path.name}: not {kind}.py's results (rows of "
                                 f"{', '.join(keys)} with a median, min and max)")
    return document


def load(folder: Path, kind: str) -> Mapping[str, Any] | None:
    """The results document of ``kind`` in ``folder``, or None: not there.

    Raises:
        report.ReportError: it cannot be read or lacks its benchmark's shape.
    """
    if kind in report.PROTOCOLS:
        path = folder / f"{kind}.json"
        if not path.is_file():
            return None
        return report.load(folder).get(kind)
    if kind == "startup":
        return report.load_startup(folder)
    if kind == "pool":
        return report.load_pool(folder)
    if kind == "spark":
        return report.load_spark(folder)
    if kind == "micro":
        return _plain(folder, kind, ("row",))
    return _plain(folder, kind, ("reply", "parser"))


def verdicts(kind: str, published: Mapping[str, Any], run: Mapping[str, Any] | None
             ) -> list[report.Verdict]:
    """Every figure of ``published`` against the same figure of ``run`` (None: the quick
    file is missing, every figure "not run")."""
    if kind in report.PROTOCOLS:
        empty = {**published, "results": []}
        return report.compare({kind: published}, {kind: empty if run is None else run})
    extract = FIGURES[kind]
    again = {} if run is None else {f.name: f for f in extract(run)}
    out = []
    for figure in extract(published):
        if figure.value is None:
            continue  # nothing published
        now = again.get(figure.name)
        scale, unit = ((1e3, "ns") if figure.unit == "µs" and figure.value[0] < 1
                       and "{unit}" in figure.name else (1.0, figure.unit))
        value = None if now is None else now.value
        out.append(report.Verdict(
            figure.name.replace("{unit}", unit), _scaled(figure.value, scale),
            None if value is None else _scaled(value, scale), unit,
            now is not None and now.unstable))
    return out


def _scaled(value: tuple[float, float, float], scale: float) -> tuple[float, float, float]:
    return scale * value[0], scale * value[1], scale * value[2]


def command(kind: str, path: Path, runs: int | None,
            published: Mapping[str, Any] | None = None) -> list[str]:
    """The command that writes ``kind``'s run into ``path``: ``--quick`` (and ``--runs``);
    Spark at the sizes of its ``published`` config, :data:`FULL_RUNS` runs."""
    if kind != "spark":
        return [sys.executable, str(HERE / f"{kind}.py"), "--quick", "--out", str(path),
                *(["--runs", str(runs)] if runs is not None else [])]
    config = (published or {}).get("config") or {}
    out = [sys.executable, str(HERE / "spark.py"), "--runs", str(FULL_RUNS), "--out", str(path)]
    for key in ("rows", "jobs", "events", "partitions", "shuffle_partitions", "driver_memory"):
        if _number(config.get(key)) or isinstance(config.get(key), str):
            out += [f"--{key.replace('_', '-')}", str(config[key])]
    sizes = config.get("max_jobs_per_batch")
    if isinstance(sizes, list) and sizes:
        out += ["--max-jobs-per-batch", ",".join(str(s) for s in sizes)]
    for key in ("scenarios", "clients"):  # a list, or scenarios' titles by name
        chosen = config.get(key)
        if isinstance(chosen, (list, Mapping)) and chosen:
            out += [f"--{key}", ",".join(str(s) for s in chosen)]
    return out


def _spark_estimate(published: Mapping[str, Any]) -> str:
    config = published.get("config") or {}
    wall, runs = config.get("wall_time_s"), config.get("runs")
    if not _number(wall) or not _number(runs) or runs < 1:
        return "the published run recorded no wall time"
    return (f"the published run took {wall / 60:.0f} min for {runs} run(s) per row: expect "
            f"about {wall * FULL_RUNS / runs / 60:.0f} min")


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    every = (*QUICK, *FULL)
    parser.add_argument("--only", "--protocols", dest="only", default=None,
                        help="comma-separated subset of: " + ", ".join(every) + " (default: "
                        "all but spark; spark wants --full)")
    parser.add_argument("--full", action="store_true",
                        help=f"also Spark at its published sizes, {FULL_RUNS} runs per row "
                        "(about 8-12 minutes more)")
    parser.add_argument("--published", type=Path, default=report.RESULTS,
                        help="the JSON the docs show (default benchmarks/results)")
    parser.add_argument("--out", type=Path, default=report.RESULTS / "quick",
                        help="where the quick run writes its JSON (default "
                        "benchmarks/results/quick)")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="compare the JSON already in DIR; run nothing")
    parser.add_argument("--runs", type=int, default=None,
                        help="timed runs per row of the quick pass (default 3)")
    args = parser.parse_args(argv)
    if args.only is None:
        kinds = [*QUICK, *(FULL if args.full else ())]
    else:
        kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in every]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    if "spark" in kinds and not args.full:
        parser.error("spark is checked at its published sizes only: add --full")
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be >= 1")

    published: dict[str, Mapping[str, Any]] = {}
    try:
        for kind in kinds:
            if (document := load(args.published, kind)) is not None:
                published[kind] = document
    except report.ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    folder = args.out if args.against is None else args.against
    failed: list[str] = []
    if args.against is None:
        wall = time.perf_counter()
        for kind in kinds:
            if kind not in published:
                continue
            path = folder / f"{kind}.json"
            path.unlink(missing_ok=True)  # a failed run must not leave an older one here
            line = command(kind, path, args.runs, published[kind])
            if kind == "spark":
                print(f"# Spark at its published sizes, {FULL_RUNS} runs per row: "
                      f"{_spark_estimate(published[kind])}", flush=True)
            print(f"# {' '.join(line[1:])}", flush=True)
            done = subprocess.run(line, cwd=HERE, stdout=subprocess.DEVNULL)
            if done.returncode != 0:
                print(f"error: benchmarks/{kind}.py exited with {done.returncode}",
                      file=sys.stderr)
                failed.append(kind)
        print(f"# quick pass: {time.perf_counter() - wall:.0f} s", flush=True)

    table: list[report.Verdict] = []
    missing: list[str] = []
    for kind, document in published.items():
        try:
            run = load(folder, kind)
        except report.ReportError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed.append(kind)
            run = None
        if run is None:
            missing.append(kind)
        table += verdicts(kind, document, run)
    with contextlib.suppress(OSError, AttributeError):
        print(f"# load average now (1, 5, 15 min): "
              f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; the quick JSON keeps each "
              "run's load and the other processes' CPU share")
    print()
    print("\n".join(report.check_table(table)))
    missed = [v for v in table if v.reproduced is False]
    reproduced = sum(1 for v in table if v.reproduced)
    not_run = len(table) - reproduced - len(missed)
    print(f"\n{reproduced} of {len(table)} figures reproduced (the quick median within the "
          f"published [min, max] widened by {report.TOLERANCE:.0%} of the published median on "
          f"each side); not reproduced: {len(missed)}"
          + (f"; not run: {not_run}" if not_run else ""))
    for verdict in missed:
        assert verdict.run is not None and verdict.window is not None
        low, high = verdict.window
        print(f"- not reproduced: {verdict.figure}: {_fmt(verdict.run[0])} outside "
              f"[{_fmt(low)}, {_fmt(high)}] {verdict.unit}")
    for kind in missing:
        print(f"- missing: {folder / kind}.json, so its published figures were not run")
    unpublished = [kind for kind in kinds if kind not in published]
    if unpublished:
        print(f"- nothing published for {', '.join(unpublished)} (no such JSON in "
              f"{args.published}): not run, not checked")
    left = [(name, why) for name, why in NOT_CHECKED.items()
            if name not in kinds and (args.published / f"{name}.json").is_file()]
    if left:
        print("\nnot checked by this pass, and why:")
        for name, why in left:
            print(f"- {name}.json: {why}")
    if failed:
        return 2
    return 1 if missed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
