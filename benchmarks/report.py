"""The Performance page's results section (docs/performance.md), made from the benchmark results.

    .venv/bin/python benchmarks/report.py            # rewrite the page between the markers
    .venv/bin/python benchmarks/report.py --check    # exit 1 if the page differs from the JSON
    .venv/bin/python benchmarks/report.py --stdout   # print the section, touch nothing
    .venv/bin/python benchmarks/report.py --results benchmarks/results/quick --stdout

Reads ``benchmarks/results/{beanstalk,gearman,workq,qless}.json`` (written by
``scripts/bench``; their shape is described in ``_harness.py``) and writes, between
``<!-- perf:begin -->`` and ``<!-- perf:end -->`` in docs/performance.md, everything that holds
a number:
the machine and the dates of the runs, one table with every row of issue 13's targets (what was
measured, the target, met or missed) and a table per protocol with ops/s and client and server
CPU µs per operation; then, from ``scaling.json``, each scaling series' first and last point
and a link to its plot, which the site's build draws on the same page (``docs/hooks.py``);
writing also draws it as ``scaling.png`` beside the JSON (with ``plots.py``, hence matplotlib;
``--check`` only wants it there). The text depends on the JSON files only, so ``--check`` can
tell whether the page still says what the recorded runs say. Otherwise only the standard
library: the benchmark scripts import this module to print their targets.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BEGIN", "END", "PROTOCOLS", "TARGETS", "Part", "ReportError", "Target", "load", "main",
    "render", "replace_section", "target_lines",
]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"
BEGIN = "<!-- perf:begin -->"
END = "<!-- perf:end -->"
PROTOCOLS = ("beanstalk", "gearman", "workq", "qless")
#: The scaling runs (``benchmarks/scaling.py``): summarised in the section, and drawn, by
#: ``benchmarks/plots.py`` (matplotlib, only when writing), into ``scaling.png`` beside them.
SCALING = "scaling"
#: Where the page shows the scaling plot: the anchor of the figure ``docs/hooks.py`` draws
#: from ``scaling.json`` on the Performance page (a file outside ``docs/`` cannot be linked
#: from the site).
SCALING_PLOT = "#bench-scaling"
#: Each scan's value key and unit in the summary (as plotted).
SCALING_VALUES = {
    "body_size": ("best_mb_per_s", "MB/s"),
    "concurrency": ("best_ops_per_s", "jobs/s"),
    "watched_tubes": ("best_ops_per_s", "ops/s"),
    "lease_names": ("best_ops_per_s", "ops/s"),
    "idle_connections": ("bytes_per_connection", "B/connection"),
}

#: What each protocol's section says about its server (the key in ``environment``) and what
#: the reader must know to read its numbers (no numbers here: those come from the JSON).
SERVERS = {"beanstalk": ("beanstalkd", ""), "gearman": ("gearmand", ""),
           "workq": ("workq_server", ""), "qless": ("redis_server", "redis-server ")}
NOTES = {
    "beanstalk": "`bundled_put` measures the servers, not the clients: the raw pipelined "
                 "socket (a few µs of client CPU per put) against the bundled server and "
                 "against beanstalkd.",
    "gearman": "The foreground worker is libgearman's C `gearman -w` (the same for every "
               "client); the foreground rows measure gearmand and that worker as much as the "
               "clients.",
    "workq": "The real Workq server is not on this machine: the bundled server "
             "(`workq_client.server`, Python) stands in, so the rows compare the clients "
             "with a raw socket on the same server, not against Workq's own speed.",
    "qless": "The raw socket sends the very bytes jobwire sends (the same `EVALSHA`, "
             "prebuilt); the Lua script is most of the cost, in redis-server. qless-py 0.11.4 "
             "runs its own qless-core script, made Redis 7-safe in memory (docs/qless.md).",
}


class ReportError(Exception):
    """A results file or the page is not what this module can work with."""


# -- the targets of issue 13 -------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One measured ratio: ``mine`` / ``other`` of ``metric`` within one protocol's results.

    ``metric`` "cpu": client CPU µs per operation, met when the ratio is <= ``threshold``;
    "ops": operations per second (wall), met when the ratio is >= ``threshold``."""

    protocol: str
    mine: tuple[str, str]  #: (scenario, client)
    other: tuple[str, str]
    metric: str
    threshold: float
    label: str = ""  #: names the part when a target has several


@dataclass(frozen=True)
class Target:
    """A row of issue 13's table: met when every part is."""

    scenario: str
    parts: tuple[Part, ...]
    target: str
    note: str = ""
    #: What holds the row back when it is missed (shown then), and ratios of the same run
    #: that show it.
    bound: str = ""
    context: tuple[Part, ...] = ()


def _one(protocol: str, mine: tuple[str, str], other: tuple[str, str], metric: str,
         threshold: float, label: str = "") -> Part:
    return Part(protocol, mine, other, metric, threshold, label)


TARGETS: tuple[Target, ...] = (
    Target("beanstalk sync `put`, one at a time, CPU/op",
           (_one("beanstalk", ("put", "jobwire-sync"), ("put", "greenstalk"), "cpu", 1.0),),
           "<= 1.0x greenstalk",
           bound="a few µs of Python per call that greenstalk does not spend: the command "
                 "is a typed, validated object and its reply goes through the FIFO that lets "
                 "one connection pipeline and be shared; both clients over the raw socket:",
           context=(_one("beanstalk", ("put", "jobwire-sync"), ("put", "raw-seq"), "cpu", 0,
                         "jobwire"),
                    _one("beanstalk", ("put", "greenstalk"), ("put", "raw-seq"), "cpu", 0,
                         "greenstalk"))),
    Target("beanstalk sync reserve+delete, CPU/op",
           (_one("beanstalk", ("reserve_delete", "jobwire-sync"),
                 ("reserve_delete", "greenstalk"), "cpu", 1.0),),
           "<= 1.0x greenstalk",
           bound="as for put: the typed command and the reply FIFO; over the raw socket:",
           context=(_one("beanstalk", ("reserve_delete", "jobwire-sync"),
                         ("reserve_delete", "raw-seq"), "cpu", 0, "jobwire"),
                    _one("beanstalk", ("reserve_delete", "greenstalk"),
                         ("reserve_delete", "raw-seq"), "cpu", 0, "greenstalk"))),
    Target("beanstalk async put / r+d, CPU/op (asyncio)",
           (_one("beanstalk", ("put", "jobwire-asyncio"), ("put", "jobwire-sync"), "cpu", 1.3,
                 "put"),
            _one("beanstalk", ("reserve_delete", "jobwire-asyncio"),
                 ("reserve_delete", "jobwire-sync"), "cpu", 1.3, "r+d")),
           "<= 1.3x sync",
           bound="the event loop: each reply is a wait, two passes of the loop and a task "
                 "switch that a blocking recv does not pay. A raw socket on asyncio (registered "
                 "once, no anyio, no parsing: the floor of any asyncio client) over the same "
                 "raw socket blocking:",
           context=(_one("beanstalk", ("put", "raw-asyncio"), ("put", "raw-seq"), "cpu", 0,
                         "put"),
                    _one("beanstalk", ("reserve_delete", "raw-asyncio"),
                         ("reserve_delete", "raw-seq"), "cpu", 0, "r+d"))),
    Target("AsyncWorker no-op, c=64, one connection, wall",
           (_one("beanstalk", ("worker_noop", "worker-asyncio"), ("worker_noop", "raw-pipe"),
                 "ops", 0.6, "idle"),
            _one("beanstalk", ("worker_noop_busy", "worker-asyncio"),
                 ("worker_noop_busy", "raw-pipe"), "ops", 0.6, "one core busy")),
           ">= 0.6x the raw windowed reserve+delete, in every load state",
           "two load states of this run: as it found the machine, and with a process spinning "
           "on the benchmark's core",
           bound="the worker's CPU per job (a reserve reply parsed, the handler run in a "
                 "slot task, a delete sent and its reply matched) on a core it shares with "
                 "the spinning process; its client CPU per job over the raw socket's, idle and "
                 "busy:",
           context=(_one("beanstalk", ("worker_noop", "worker-asyncio"),
                         ("worker_noop", "raw-pipe"), "cpu", 0, "idle"),
                    _one("beanstalk", ("worker_noop_busy", "worker-asyncio"),
                         ("worker_noop_busy", "raw-pipe"), "cpu", 0, "busy"))),
    Target("`put_many`, wall",
           (_one("beanstalk", ("put_pipelined", "jobwire-sync"), ("put_pipelined", "raw-pipe"),
                 "ops", 0.9),),
           ">= 0.9x raw window",
           bound="the client's CPU per put (a typed command, its Pending, a parsed reply) "
                 "against beanstalkd's: pipelined, the two work side by side and the slower "
                 "sets the pace; client CPU per put over the raw socket's:",
           context=(_one("beanstalk", ("put_pipelined", "jobwire-sync"),
                         ("put_pipelined", "raw-pipe"), "cpu", 0),)),
    Target("Workq sync `add`, one at a time, wall",
           (_one("workq", ("add", "jobwire-sync"), ("add", "raw"), "ops", 0.8),),
           ">= 0.8x raw socket", "bundled server, not the real one",
           bound="the client's CPU per add (a uuid4, a validated command, the reply FIFO) "
                 "over the raw socket's, which sends prebuilt bytes:",
           context=(_one("workq", ("add", "jobwire-sync"), ("add", "raw"), "cpu", 0),)),
    Target("Workq async `add`, wall",
           (_one("workq", ("add", "jobwire-async"), ("add", "raw"), "ops", 0.7),),
           ">= 0.7x raw", "bundled server",
           bound="the event loop, as for beanstalk's async row (the raw socket here is "
                 "blocking); the async client's CPU per add over the sync client's:",
           context=(_one("workq", ("add", "jobwire-async"), ("add", "jobwire-sync"), "cpu", 0),)),
    Target("Workq `add_many` sync / async, wall",
           (_one("workq", ("add_many", "jobwire-sync"), ("add_many", "raw"), "ops", 0.9,
                 "sync"),
            _one("workq", ("add_many", "jobwire-async"), ("add_many", "raw"), "ops", 0.8,
                 "async")),
           ">= 0.9x / 0.8x raw", "bundled server",
           bound="the byte budget: at most 4096 unanswered bytes (about 30 adds, not the raw "
                 "socket's 256), because Workq 0.2.0 misreads a payload whose CR and LF "
                 "straddle its 4096-byte read buffer (docs/workq.md); kept as the default. "
                 "With `max_bytes=None` (the raw socket's window alone):",
           context=(_one("workq", ("add_many", "jobwire-sync-unbudgeted"), ("add_many", "raw"),
                         "ops", 0, "sync"),
                    _one("workq", ("add_many", "jobwire-async-unbudgeted"), ("add_many", "raw"),
                         "ops", 0, "async"))),
    Target("Gearman foreground round trip, async",
           (_one("gearman", ("fg_1", "jobwire-async"), ("fg_1", "pygearman"), "ops", 1.3),),
           ">= 1.3x pygearman",
           bound="gearmand and the C worker: each round trip waits on both, whatever the "
                 "client; the sync client and the raw socket over pygearman:",
           context=(_one("gearman", ("fg_1", "jobwire-sync"), ("fg_1", "pygearman"), "ops", 0,
                         "jobwire sync"),
                    _one("gearman", ("fg_1", "raw"), ("fg_1", "pygearman"), "ops", 0,
                         "raw"))),
    Target("bundled beanstalk server, pipelined put",
           (_one("beanstalk", ("bundled_put", "raw-pipe-bundled"), ("bundled_put", "raw-pipe"),
                 "ops", 0.7),),
           ">= 0.7x beanstalkd", "raw pipelined socket as the client"),
)


@dataclass(frozen=True)
class Measured:
    part: Part
    ratio: float | None  #: None: not measured
    mine: float | None
    other: float | None
    why: str = ""  #: why it was not measured

    @property
    def met(self) -> bool | None:
        if self.ratio is None:
            return None
        if self.part.metric == "cpu":
            return self.ratio <= self.part.threshold
        return self.ratio >= self.part.threshold

    def text(self) -> str:
        prefix = f"{self.part.label} " if self.part.label else ""
        if self.ratio is None or self.mine is None or self.other is None:
            return f"{prefix}not measured ({self.why})"
        if self.part.metric == "cpu":
            return f"{prefix}{self.ratio:.2f}x ({self.mine:.1f} vs {self.other:.1f} µs)"
        return f"{prefix}{self.ratio:.2f}x ({self.mine:,.0f} vs {self.other:,.0f} ops/s)"


def _rows(documents: Mapping[str, Mapping[str, Any]], protocol: str
          ) -> dict[tuple[str, str], Mapping[str, Any]]:
    document = documents.get(protocol)
    if document is None:
        return {}
    return {(row["scenario"], row["client"]): row for row in document["results"]}


def measure(part: Part, documents: Mapping[str, Mapping[str, Any]]) -> Measured:
    """The value of ``part`` in ``documents`` (protocol -> results document)."""
    if part.protocol not in documents:
        return Measured(part, None, None, None, f"no {part.protocol}.json")
    rows = _rows(documents, part.protocol)
    key = "client_cpu_us_per_op" if part.metric == "cpu" else "best_ops_per_s"
    values: list[float] = []
    for scenario, client in (part.mine, part.other):
        row = rows.get((scenario, client))
        if row is None:
            return Measured(part, None, None, None, f"no {scenario}/{client} row")
        value = row.get(key)
        if not isinstance(value, (int, float)) or value <= 0:
            return Measured(part, None, None, None,
                            f"{scenario}/{client}: {row.get('error') or 'no ' + key}")
        values.append(float(value))
    return Measured(part, values[0] / values[1], values[0], values[1])


def evaluate(target: Target, documents: Mapping[str, Mapping[str, Any]]
             ) -> tuple[list[Measured], bool | None]:
    """Every part measured, and whether the target is met (None: a part was not measured)."""
    parts = [measure(part, documents) for part in target.parts]
    verdicts = [p.met for p in parts]
    if any(v is None for v in verdicts):
        return parts, None
    return parts, all(verdicts)


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def target_lines(documents: Mapping[str, Mapping[str, Any]], only: str | None = None
                 ) -> list[str]:
    """One line per target (of protocol ``only``'s, when given) for a terminal."""
    lines = []
    for target in TARGETS:
        if only is not None and any(p.protocol != only for p in target.parts):
            continue
        parts, met = evaluate(target, documents)
        verdict = {True: "MET   ", False: "MISSED", None: "n/a   "}[met]
        lines.append(f"{verdict} {target.scenario}: {'; '.join(p.text() for p in parts)} "
                     f"(target {target.target})")
    return lines


# -- reading -----------------------------------------------------------------------------------


def _check(document: object, name: str) -> Mapping[str, Any]:
    if not isinstance(document, Mapping):
        raise ReportError(f"{name}: not a JSON object")
    for key, kind in (("environment", Mapping), ("config", Mapping), ("results", list)):
        if not isinstance(document.get(key), kind):
            raise ReportError(f"{name}: no {key!r} (written by an older benchmark script? "
                              "run scripts/bench again)")
    for i, row in enumerate(document["results"]):
        if not isinstance(row, Mapping) or not all(
                isinstance(row.get(k), str) for k in ("scenario", "client", "label")):
            raise ReportError(f"{name}: results[{i}] lacks scenario, client or label")
        if "error" not in row and not all(
                isinstance(row.get(k), (int, float))
                for k in ("best_ops_per_s", "client_cpu_us_per_op")):
            raise ReportError(f"{name}: results[{i}] has no best_ops_per_s or "
                              "client_cpu_us_per_op")
    return document


def load(results: Path = RESULTS) -> dict[str, Mapping[str, Any]]:
    """The results documents present in ``results``, by protocol.

    Raises:
        ReportError: a file is not valid JSON or lacks the benchmark's shape.
    """
    documents: dict[str, Mapping[str, Any]] = {}
    for protocol in PROTOCOLS:
        path = results / f"{protocol}.json"
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReportError(f"{path.name}: {exc}") from exc
        documents[protocol] = _check(document, path.name)
    return documents


def load_scaling(results: Path = RESULTS) -> tuple[Mapping[str, Any], str] | None:
    """``scaling.json`` in ``results`` and the sha256 of its bytes, or None: not recorded.

    Raises:
        ReportError: it is not valid JSON or has no series.
    """
    path = results / f"{SCALING}.json"
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
        document = json.loads(data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path.name}: {exc}") from exc
    if not isinstance(document, Mapping) or not isinstance(document.get("series"), list):
        raise ReportError(f"{path.name}: no 'series' (run scripts/bench scaling again)")
    return document, hashlib.sha256(data).hexdigest()


# -- writing -----------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _num(value: object, digits: int = 0) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "?"
    return f"{value:,.{digits}f}"


def _date(document: Mapping[str, Any]) -> str:
    date = str(document["environment"].get("date") or "date not recorded")
    return date.replace("T", " ").replace("Z", " UTC")


def _machine(env: Mapping[str, Any]) -> str:
    usable = env.get("cpus_usable")
    cpus = f"{env.get('cpu_count', '?')} CPUs"
    if usable not in (None, env.get("cpu_count")):
        cpus += f" ({usable} usable)"
    placed = env.get("placement")
    where = ""
    if isinstance(placed, Mapping):
        where = (f"; the benchmark pinned to CPU {_cpus(placed.get('client'))}, the servers to "
                 f"CPU {_cpus(placed.get('servers'))}")
    return (f"{cpus}, {env.get('cpu_model', '?')}; {env.get('platform', '?')}; "
            f"{env.get('implementation', 'Python')} {env.get('python', '?')}{where}")


def _cpus(value: object) -> str:
    return ",".join(str(c) for c in value) if isinstance(value, list) else "?"


def _statistic(documents: Mapping[str, Mapping[str, Any]]) -> str:
    repeats = sorted({str(d["config"].get("repeats", "?")) for d in documents.values()})
    return (f"Each number is the best of {' / '.join(repeats)} timed run(s) of that client, "
            "each run against its own fresh server process on 127.0.0.1: the highest ops/s "
            "and, separately, the lowest client CPU µs per operation (`time.process_time()` "
            "of the benchmark process: all its threads, syscalls included; it moves much less "
            "with the machine's load than wall time does). Server CPU is the server process's, "
            "from `/proc`. Ratios are of these best values.")


def bound_text(target: Target, documents: Mapping[str, Mapping[str, Any]]) -> str:
    """What holds ``target`` back, with its context ratios from ``documents``."""
    context = "; ".join(measure(part, documents).text() for part in target.context)
    return f"{target.bound} {context}".strip()


def targets_table(documents: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = ["| scenario (issue 13) | measured | target | | what bounds it (when missed) |",
             "|---|---|---|---|---|"]
    for target in TARGETS:
        parts, met = evaluate(target, documents)
        measured = "; ".join(p.text() for p in parts)
        if target.note:
            measured += f" ({target.note})"
        bound = bound_text(target, documents) if met is False else ""
        lines.append(f"| {_cell(target.scenario)} | {_cell(measured)} | "
                     f"{_cell(target.target)} | {_verdict(met)} | {_cell(bound)} |")
    return lines


def protocol_table(protocol: str, document: Mapping[str, Any], source: str) -> list[str]:
    env, config = document["environment"], document["config"]
    titles: Mapping[str, str] = config.get("scenarios") or {}
    key, prefix = SERVERS[protocol]
    server = f"{prefix}{env.get(key) or '?'}"
    quick = ", **quick run**" if config.get("quick") else ""
    lines = [
        f"**{protocol}** ({server}; `{source}/{protocol}.json`, {_date(document)}, "
        f"best of {config.get('repeats', '?')}{quick}). {NOTES[protocol]}",
        "",
        "| scenario | client | N | ops/s | client CPU µs/op | server CPU µs/op "
        "| vs (ops/s, CPU) |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    rows = {(r["scenario"], r["client"]): r for r in document["results"]}
    shown = ""
    for row in document["results"]:
        scenario = row["scenario"]
        title = "" if scenario == shown else titles.get(scenario, scenario)
        shown = scenario
        label = row["label"]
        if row.get("note"):
            label += f" ({row['note']})"
        if "error" in row:
            lines.append(f"| {_cell(title)} | {_cell(label)} | {_num(row.get('n'))} | "
                         f"{_cell(str(row['error']))} | | | |")
            continue
        versus = ""
        base_scenario, _, base_client = str(row.get("baseline") or "").partition("/")
        base = rows.get((base_scenario, base_client))
        if base is not None and "error" not in base:
            versus = (f"{row['best_ops_per_s'] / base['best_ops_per_s']:.2f}x, "
                      f"{row['client_cpu_us_per_op'] / base['client_cpu_us_per_op']:.2f}x "
                      f"{base['label']}")
        lines.append(
            f"| {_cell(title)} | {_cell(label)} | {_num(row.get('n'))} | "
            f"{_num(row['best_ops_per_s'])} | {_num(row['client_cpu_us_per_op'], 1)} | "
            f"{_num(row.get('server_cpu_us_per_op'), 1)} | {_cell(versus)} |")
    return lines


def _x(scan: str, x: object) -> str:
    if not isinstance(x, (int, float)):
        return "?"
    if scan == "body_size":
        for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
            if x >= scale:
                return f"{x / scale:g} {unit}"
        return f"{x:g} B"
    return f"{x:,.0f}"


def scaling_lines(document: Mapping[str, Any], digest: str, source: str) -> list[str]:
    """The scaling runs: a link to the plot, and each series' first and last point."""
    lines = [
        f"**How cost grows** (`{source}/{SCALING}.json`, {_date(document)}, sha256 "
        f"{digest[:12]}): body size, concurrency on one AsyncWorker connection, watched tubes "
        f"and lease names, idle connections per bundled server, jobwire against a raw socket. "
        f"The plot is drawn from that file by `benchmarks/plots.py` (the docs site's "
        f"performance page draws it too, with every point in a table).",
        "",
        f"[How cost grows: jobwire against a raw socket]({SCALING_PLOT})",
        "",
        "| scan | series | first point | last point |",
        "|---|---|--:|--:|",
    ]
    for line in document["series"]:
        if not isinstance(line, Mapping):
            continue
        scan = str(line.get("scan", "?"))
        key, unit = SCALING_VALUES.get(scan, ("best_ops_per_s", "ops/s"))
        points = [p for p in line.get("points") or () if isinstance(p, Mapping)]
        if not points:
            continue
        ends = [f"{_x(scan, p.get('x'))}: {_num(p.get(key))} {unit}"
                for p in (points[0], points[-1])]
        lines.append(f"| {_cell(scan)} | {_cell(str(line.get('label', '?')))} | "
                     f"{_cell(ends[0])} | {_cell(ends[1])} |")
    return lines


def source_name(results: Path) -> str:
    """How the section names the folder of the JSON files: relative to the repository."""
    try:
        return results.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return results.name


def render(documents: Mapping[str, Mapping[str, Any]], source: str = "benchmarks/results",
           scaling: tuple[Mapping[str, Any], str] | None = None) -> str:
    """The text between the markers (without them), from ``documents`` (read from the
    folder named ``source``) and ``scaling`` (:func:`load_scaling`) alone."""
    lines = [
        f"<!-- generated by benchmarks/report.py from {source}/*.json: do not edit by hand -->",
        "",
    ]
    if not documents:
        lines.append("No benchmark results were recorded: run `scripts/bench all`, then "
                     "`.venv/bin/python benchmarks/report.py`.")
        if scaling is not None:
            lines += ["", *scaling_lines(*scaling, source)]
        return "\n".join([*lines, ""])
    machines = sorted({_machine(d["environment"]) for d in documents.values()})
    files = ", ".join(f"`{p}.json` {_date(d)}" for p, d in documents.items())
    missing = [p for p in PROTOCOLS if p not in documents]
    quick = [p for p, d in documents.items() if d["config"].get("quick")]
    lines += [
        f"Every number below comes from `{source}/` ({files}); "
        f"machine: {' | '.join(machines)}."
        + (f" Not recorded: {', '.join(missing)}." if missing else "")
        + (f" **Quick runs** (small counts, 1 repeat; smoke numbers): {', '.join(quick)}."
           if quick else ""),
        "",
        _statistic(documents),
        "",
        "Issue 13's targets (CPU/op: lower is better, met at or under the target; wall: ops/s, "
        "met at or over it):",
        "",
        *targets_table(documents),
    ]
    for protocol in PROTOCOLS:
        if protocol in documents:
            lines += ["", *protocol_table(protocol, documents[protocol], source)]
    if scaling is not None:
        lines += ["", *scaling_lines(*scaling, source)]
    lines.append("")
    return "\n".join(lines)


def draw_scaling(document: Mapping[str, Any], results: Path) -> Path:
    """Write ``scaling.png`` into ``results`` (needs matplotlib: the ``docs`` extra).

    Raises:
        ReportError: matplotlib is missing or the document cannot be drawn.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import plots  # matplotlib: only when writing

        chart = plots.render(SCALING, document)
    except ImportError as exc:
        raise ReportError(f"cannot draw {SCALING}.png: {exc}") from exc
    except plots.BadResults as exc:
        raise ReportError(f"cannot draw {SCALING}.png: {exc}") from exc
    path = results / f"{SCALING}.png"
    path.write_bytes(chart.png)
    return path


def replace_section(text: str, section: str) -> str:
    """``text`` (the page) with what is between the markers replaced by ``section``.

    Raises:
        ReportError: the markers are missing, repeated or out of order.
    """
    begin, end = text.count(BEGIN), text.count(END)
    if begin != 1 or end != 1:
        raise ReportError(f"the page must hold {BEGIN} and {END} once each "
                          f"(found {begin} and {end})")
    head, rest = text.split(BEGIN)
    if END not in rest:
        raise ReportError(f"{END} comes before {BEGIN}")
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{section}{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Rewrite docs/performance.md's results section from "
                    "benchmarks/results/*.json.")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help=f"where the JSON files are (default "
                        f"{RESULTS.relative_to(ROOT)})")
    parser.add_argument("--page", type=Path, default=PAGE,
                        help=f"the page to rewrite or check (default {PAGE.relative_to(ROOT)})")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 when the page differs from what the JSON gives")
    mode.add_argument("--stdout", action="store_true",
                      help="print the section; write nothing")
    args = parser.parse_args(argv)
    try:
        scaling = load_scaling(args.results)
        section = render(load(args.results), source_name(args.results), scaling)
        if args.stdout:
            print(section, end="")
            return 0
        try:
            text = args.page.read_text(encoding="utf-8")
        except OSError as exc:
            raise ReportError(f"cannot read {args.page}: {exc}") from exc
        wanted = replace_section(text, section)
        if scaling is not None and args.check and not (args.results / f"{SCALING}.png").is_file():
            print(f"{args.results / SCALING}.png is missing: run .venv/bin/python "
                  "benchmarks/report.py", file=sys.stderr)
            return 1
        if scaling is not None and not args.check:
            print(f"drew {draw_scaling(scaling[0], args.results)}")
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if wanted == text:
        print(f"{args.page.name}: the performance section matches {args.results}")
        return 0
    if args.check:
        diff = difflib.unified_diff(text.splitlines(), wanted.splitlines(),
                                    f"{args.page.name} (now)",
                                    f"{args.page.name} (from {args.results.name}/*.json)",
                                    lineterm="", n=0)
        print("\n".join(list(diff)[:40]), file=sys.stderr)
        print(f"{args.page.name}'s performance section differs from {args.results}: run "
              ".venv/bin/python benchmarks/report.py", file=sys.stderr)
        return 1
    args.page.write_text(wanted, encoding="utf-8")
    print(f"{args.page.name}: performance section rewritten from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
