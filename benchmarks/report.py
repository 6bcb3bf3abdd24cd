"""The Performance page's results section (docs/performance.md), made from the benchmark results.

    .venv/bin/python benchmarks/report.py            # rewrite the page between the markers
    .venv/bin/python benchmarks/report.py --check    # exit 1 if the page differs from the JSON
    .venv/bin/python benchmarks/report.py --stdout   # print the section, touch nothing
    .venv/bin/python benchmarks/report.py --results benchmarks/results/quick --stdout

Reads ``benchmarks/results/{beanstalk,gearman,workq,qless}.json`` (written by
``scripts/bench``; their shape is described in ``_harness.py``) and writes, between
``<!-- perf:begin -->`` and ``<!-- perf:end -->`` in docs/performance.md, everything that holds
a number:
the machine and the dates of the runs, one table with every row of issue 22's targets (the
ratio of medians measured, the target, met or missed, and what bounds it, computed from the
same run) and a table per protocol with the median (min-max) of its runs' ops/s and client CPU
µs per operation, the server's CPU, ratios of medians, and each unstable figure with why
(the statistic: :data:`STATISTIC`; the benchmarks compute each row's figures with
:func:`summarize`, and ``benchmarks/check.py`` compares a quick run with the page's figures
with :func:`compare`); then, from ``scaling.json``, each scaling series' first and last point
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
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BEGIN", "END", "FIGURES", "PROTOCOLS", "SHARED_WAIT", "STATISTIC", "TARGETS", "TOLERANCE",
    "UNSTABLE", "Part", "ReportError", "Target", "Verdict", "check_table", "compare", "load",
    "growth_lines", "load_pool", "main", "markers", "per_round", "pool_lines", "render",
    "replace_section", "sections", "summarize", "target_lines", "upgrade", "why_unstable",
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
    "body_size": ("median_mb_per_s", "MB/s"),
    "concurrency": ("median_ops_per_s", "jobs/s"),
    "watched_tubes": ("median_ops_per_s", "ops/s"),
    "lease_names": ("median_ops_per_s", "ops/s"),
    "idle_connections": ("bytes_per_connection", "B/connection"),
}

#: What each protocol's section says about its server (the key in ``environment``) and what
#: the reader must know to read its numbers (no numbers here: those come from the JSON).
SERVERS = {"beanstalk": ("beanstalkd", ""), "gearman": ("gearmand", ""),
           "workq": ("workq_server", ""), "qless": ("redis_server", "redis-server ")}
NOTES = {
    "beanstalk": "`bundled_put` measures the servers, not the clients: the raw pipelined "
                 "socket (a few µs of client CPU per put) against the bundled server and "
                 "against beanstalkd, both in that scenario, round by round (its target is "
                 "the median of the per-round ratios; its \"what bounds it\" gives each "
                 "server's CPU per put and whether its CPU was shared).",
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


# -- the statistic -----------------------------------------------------------------------------

#: The figures every row has: its runs' ops/s, client CPU and server CPU µs per operation
#: (each sample's keys; the row holds ``median_<key>``, ``min_<key>`` and ``max_<key>``).
FIGURES = {"ops": "ops_per_s", "cpu": "client_cpu_us_per_op", "server": "server_cpu_us_per_op"}
#: A figure is unstable when its runs moved more than this: (max - min) / median.
UNSTABLE = 0.2
#: ``--check``: a quick run reproduces a figure when its median lies within the published
#: [min, max] widened on each side by this share of the published median (a quick run's
#: median of 3 short runs moves more than a full run's median of 5).
TOLERANCE = 0.15
STATISTIC = (
    "median of the interleaved timed runs (round-robin over the clients of a scenario, each "
    "run on a fresh server process), with the lowest and highest run: ops/s, client CPU "
    "µs/op (this process's time.process_time(), all threads, syscalls included) and server "
    "CPU µs/op (/proc); ratios are ratios of medians; a figure whose runs spread by more "
    f"than {UNSTABLE:.0%} of its median ((max - min) / median) is unstable"
)


def _numbers(samples: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [float(s[key]) for s in samples
            if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]


def spread(values: Sequence[float]) -> float | None:
    """(max - min) / median of ``values``, or None: fewer than 2, or a median of 0."""
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else None


def _fmt(key: str, value: float) -> str:
    return f"{value:,.0f} ops/s" if key == FIGURES["ops"] else f"{value:,.1f} µs"


def _range(key: str, values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    if key == FIGURES["ops"]:
        return f"{low:,.0f}-{high:,.0f} ops/s"
    return f"{low:,.1f}-{high:,.1f} µs"


def why_unstable(samples: Sequence[Mapping[str, Any]], key: str) -> str:
    """Why the runs of ``key`` moved, from the samples alone: how the values fall (one run
    apart, two groups, or spread), the machine's load average and the other processes' share
    of its CPU during the runs (the worst run's), whether the client's or the server's CPU per
    operation moved with it, and the pinning."""
    values = [float(s[key]) for s in samples]
    worse_high = key != FIGURES["ops"]
    worst = max(range(len(values)), key=lambda i: values[i] if worse_high else -values[i])
    ordered = sorted(values)
    gap, cut = max((ordered[i + 1] - ordered[i], i + 1) for i in range(len(ordered) - 1))
    low, high = ordered[:cut], ordered[cut:]
    reasons: list[str] = []
    if gap >= 0.5 * (ordered[-1] - ordered[0]) and (len(low) == 1 or len(high) == 1):
        lone, rest = (low, high) if len(low) == 1 else (high, low)
        reasons.append(f"one run of {len(values)} at {_fmt(key, lone[0])}, the others "
                       f"{_range(key, rest)}")
    elif gap >= 0.5 * (ordered[-1] - ordered[0]):
        reasons.append(f"two groups: {len(low)} runs {_range(key, low)}, {len(high)} "
                       f"{_range(key, high)}")
    else:
        reasons.append(f"spread over {_range(key, ordered)}")
    loads = [float(v) for v in (s.get("load_1m") for s in samples)
             if isinstance(v, (int, float))]
    if len(loads) == len(values) and min(loads) == max(loads):
        reasons.append(f"load average {loads[0]:.1f} in every run")
    elif len(loads) == len(values):
        at = "the highest" if loads[worst] == max(loads) else f"{loads[worst]:.1f}"
        reasons.append(f"load average {min(loads):.1f}-{max(loads):.1f} ({at} in the worst run)")
    else:
        reasons.append("no load average recorded")
    others = _numbers(samples, "others_cpu_share")
    if len(others) == len(values):
        reasons.append(f"other processes used {min(others):.0%}-{max(others):.0%} of the "
                       f"machine's CPU (the worst run: {others[worst]:.0%})")
    for other, name in ((FIGURES["cpu"], "client"), (FIGURES["server"], "server")):
        if other == key:
            continue
        moved = _numbers(samples, other)
        if len(moved) != len(values):
            continue
        share = spread(moved)
        if share is not None and share > UNSTABLE:
            reasons.append(f"the {name}'s CPU per op moved too ({_range(other, moved)})")
        elif key == FIGURES["ops"] and name == "client":
            reasons.append(f"the client's CPU per op held ({_range(other, moved)}): the wall "
                           "time moved, not the client's work")
    pinned = [s.get("pinning") for s in samples]
    if all(p is None for p in pinned):
        reasons.append("pinning not recorded")
    elif len({json.dumps(p, sort_keys=True) for p in pinned}) > 1:
        reasons.append("the pinning changed between runs")
    return "; ".join(reasons)


def summarize(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A row's figures from its samples (each: ``ops_per_s``, ``client_cpu_us_per_op``,
    ``server_cpu_us_per_op``, and what the harness recorded about the machine): ``runs``,
    the median, min and max of each figure, and ``unstable``: for each figure whose runs moved
    more than :data:`UNSTABLE` of its median, why (:func:`why_unstable`)."""
    out: dict[str, Any] = {"runs": len(samples)}
    unstable: dict[str, str] = {}
    for key in FIGURES.values():
        values = _numbers(samples, key)
        if not values:
            out.update({f"median_{key}": None, f"min_{key}": None, f"max_{key}": None})
            continue
        out.update({f"median_{key}": round(statistics.median(values), 2),
                    f"min_{key}": round(min(values), 2), f"max_{key}": round(max(values), 2)})
        share = spread(values)
        if key != FIGURES["server"] and share is not None and share > UNSTABLE:
            unstable[key] = why_unstable(samples, key)
    out["unstable"] = unstable
    return out


def upgrade(document: Mapping[str, Any]) -> dict[str, Any]:
    """A results document of the older shape (best of the runs) in this one: every row's
    figures recomputed from its samples (kept as they are), the config saying so."""
    config = {k: v for k, v in document["config"].items() if k != "repeats"}
    runs = document["config"].get("repeats", config.get("runs"))
    results = []
    for row in document["results"]:
        if "error" in row or not row.get("samples"):
            results.append(dict(row))
            continue
        kept = {k: v for k, v in row.items() if k not in _OLD_KEYS and k != "samples"}
        results.append({**kept, **summarize(row["samples"]), "samples": row["samples"]})
    return {**document, "config": {**config, "statistic": STATISTIC, "runs": runs},
            "results": results}


_OLD_KEYS = {"best_ops_per_s", "median_ops_per_s", "client_cpu_us_per_op",
             "median_client_cpu_us_per_op", "server_cpu_us_per_op"}


# -- the targets of issue 22 -------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One measured ratio: ``mine`` / ``other`` of ``metric`` within one protocol's results,
    a ratio of the two rows' medians.

    ``metric`` "cpu": client CPU µs per operation, met when the ratio is <= ``threshold``;
    "ops": operations per second (wall), met when the ratio is >= ``threshold``.

    ``paired``: the two rows ran in the same rounds of one scenario (sample i of each in
    round i), and the ratio is the median of the per-round ratios, with their lowest and
    highest; rows that did not (a row repeating another scenario's runs, or different run
    counts) fall back to the ratio of medians, and the text says so."""

    protocol: str
    mine: tuple[str, str]  #: (scenario, client)
    other: tuple[str, str]
    metric: str
    threshold: float
    label: str = ""  #: names the part when a target has several
    paired: bool = False


Documents = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Target:
    """A row of issue 22's table: met when every part is. ``bound`` says, from the numbers
    of the same run, what holds the figure where it is (met or missed)."""

    scenario: str
    parts: tuple[Part, ...]
    target: str
    note: str = ""
    bound: Callable[[Documents], str] | None = None


def _one(protocol: str, mine: tuple[str, str], other: tuple[str, str], metric: str,
         threshold: float, label: str = "", paired: bool = False) -> Part:
    return Part(protocol, mine, other, metric, threshold, label, paired)


def _row(documents: Documents, protocol: str, key: tuple[str, str]) -> Mapping[str, Any] | None:
    row = _rows(documents, protocol).get(key)
    return None if row is None or "error" in row else row


def _median(documents: Documents, protocol: str, key: tuple[str, str], figure: str
            ) -> float | None:
    row = _row(documents, protocol, key)
    value = None if row is None else row.get(f"median_{FIGURES[figure]}")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def busy_shares(documents: Documents, protocol: str, key: tuple[str, str]
                ) -> tuple[float, float | None, float | None] | None:
    """The median share of the wall time the client's and the server's CPU were busy over
    ``key``'s runs (1.0: one CPU all the time), and of all the machine's CPU the other
    processes used (None: not recorded), from its samples."""
    row = _row(documents, protocol, key)
    if row is None:
        return None
    client, server, others = [], [], []
    for s in row.get("samples") or ():
        if isinstance(s.get("others_cpu_share"), (int, float)):
            others.append(float(s["others_cpu_share"]))
        ops, cpu, srv = (s.get(k) for k in FIGURES.values())
        if not isinstance(ops, (int, float)) or not isinstance(cpu, (int, float)):
            continue
        client.append(cpu * ops / 1e6)
        if isinstance(srv, (int, float)):
            server.append(srv * ops / 1e6)
    if not client:
        return None
    return (statistics.median(client), statistics.median(server) if server else None,
            statistics.median(others) if others else None)


def _busy_text(documents: Documents, protocol: str, key: tuple[str, str], name: str) -> str:
    """What bounds a wall figure: the client's or the server's CPU when either was busy 80%
    of the wall time or more (the busier one); else the other processes when they used half
    the machine's CPU or more; else the round trips."""
    shares = busy_shares(documents, protocol, key)
    if shares is None:
        return f"{name}: not measured"
    client, server, others = shares
    text = f"{name}: client CPU busy {client:.0%} of the wall time, server " + (
        "?" if server is None else f"{server:.0%}") + (
        "" if others is None else f", other processes {others:.0%} of the machine")
    if server is not None and server >= 0.8 and server >= client:
        return f"{text}: the server's CPU"
    if client >= 0.8:
        return f"{text}: the client's CPU"
    if others is not None and others >= 0.5:
        return f"{text}: the other processes"
    return f"{text}: neither is busy, the round trips (wake-ups on loopback)"


def _cpu_over(documents: Documents, protocol: str, scenario: str,
              clients: Sequence[tuple[str, str]], floor: str, floor_name: str) -> str:
    """Each client's CPU per op above the ``floor`` row's (the raw socket's): what its own
    code costs per call."""
    base = _median(documents, protocol, (scenario, floor), "cpu")
    if base is None:
        return f"{floor_name} not measured"
    parts = []
    for client, name in clients:
        mine = _median(documents, protocol, (scenario, client), "cpu")
        parts.append(f"{name} not measured" if mine is None
                     else f"{name} {mine - base:+.1f} µs/op")
    return f"client CPU over the {floor_name}'s {base:.1f} µs/op: " + ", ".join(parts)


def _check_cost(documents: Documents, protocol: str, scenario: str, gap: float,
                peer_name: str) -> str:
    """The part of a gap to a peer that is the stale-reply check (issue 19: a ``poll`` before
    each send that follows an idle moment, which the peer does not make), from the raw socket
    with and without it; empty when the run has no ``raw-seq-check`` row."""
    raw = _median(documents, protocol, (scenario, "raw-seq"), "cpu")
    checked = _median(documents, protocol, (scenario, "raw-seq-check"), "cpu")
    if raw is None or checked is None:
        return ""
    check = checked - raw
    if check <= 0:
        return (f"; the stale-reply check alone (a raw socket with a poll before each send, "
                f"over one without: {check:+.1f} µs/op) is below this run's noise")
    return (f"; the stale-reply check alone (a raw socket with a poll before each send, over "
            f"one without) costs {check:+.1f} µs/op, which {peer_name} does not make: "
            f"without it the gap would be {gap - check:+.1f} µs/op")


def _peer_bound(protocol: str, scenarios: Sequence[tuple[str, str]], peer: str,
                peer_name: str, floor: str, floor_name: str) -> Callable[[Documents], str]:
    """For a CPU target against a peer library: each one's CPU above the raw socket's, and
    who spends more of their own per call."""

    def bound(documents: Documents) -> str:
        out = []
        for scenario, label in scenarios:
            text = _cpu_over(documents, protocol, scenario,
                             [("jobwire-sync", "jobwire"), (peer, peer_name)], floor, floor_name)
            mine = _median(documents, protocol, (scenario, "jobwire-sync"), "cpu")
            theirs = _median(documents, protocol, (scenario, peer), "cpu")
            if mine is not None and theirs is not None:
                more = "more" if mine > theirs else "less"
                text += (f": jobwire's own code per call costs {abs(mine - theirs):.1f} µs "
                         f"{more} than {peer_name}'s")
                text += _check_cost(documents, protocol, scenario, mine - theirs, peer_name)
                core = _median(documents, protocol, (scenario, "core-check"), "cpu")
                if core is not None:
                    text += (f"; jobwire's Sans-IO core alone on a raw socket, with the check "
                             f"(no session, transport or API layer), {core:.1f} µs/op, "
                             f"{core / theirs:.2f}x {peer_name}: the layers above it add "
                             f"{mine - core:+.1f} µs/op")
            out.append(f"{label}{text}")
        return "; ".join(out)

    return bound


def _async_bound(documents: Documents) -> str:
    out = []
    for scenario, label in (("put", "put"), ("reserve_delete", "r+d")):
        sync = _median(documents, "beanstalk", (scenario, "jobwire-sync"), "cpu")
        aio = _median(documents, "beanstalk", (scenario, "jobwire-asyncio"), "cpu")
        raw = _median(documents, "beanstalk", (scenario, "raw-seq"), "cpu")
        raw_aio = _median(documents, "beanstalk", (scenario, "raw-asyncio"), "cpu")
        if None in (sync, aio, raw, raw_aio):
            out.append(f"{label}: not measured")
            continue
        assert sync is not None and aio is not None and raw is not None and raw_aio is not None
        loop, own = raw_aio - raw, (aio - sync) - (raw_aio - raw)
        out.append(f"{label}: asyncio adds {aio - sync:+.1f} µs/op to jobwire; the event "
                   f"loop's floor (a raw socket on asyncio over a blocking one) {loop:+.1f}, "
                   f"jobwire's async path {own:+.1f} beyond it")
    return "; ".join(out)


def _worker_bound(documents: Documents) -> str:
    out = []
    for scenario, label in (("worker_noop", "idle"), ("worker_noop_busy", "core shared")):
        mine = _median(documents, "beanstalk", (scenario, "worker-asyncio"), "cpu")
        raw = _median(documents, "beanstalk", (scenario, "raw-pipe"), "cpu")
        cpu = ("CPU/job not measured" if mine is None or raw is None else
               f"client CPU/job {mine:.1f} vs {raw:.1f} µs ({mine - raw:+.1f})")
        out.append(f"{label}: {cpu}; " + _busy_text(documents, "beanstalk",
                                                    (scenario, "worker-asyncio"), "worker"))
    return "; ".join(out)


#: A run in which the server waited for a CPU this share of the wall time or more (run-queue
#: wait, ``server_wait_share``) had its CPU shared: its wall time and its CPU per operation
#: are not the idle server's (beanstalkd's CPU per put changes mode with it).
SHARED_WAIT = 0.05


def _server_text(documents: Documents, protocol: str, key: tuple[str, str], name: str) -> str:
    """A server's CPU µs per operation, median (min-max), and in how many runs its CPU was
    shared (run-queue wait of :data:`SHARED_WAIT` of the wall time or more)."""
    row = _row(documents, protocol, key)
    if row is None:
        return f"{name}: not measured"
    values = _numbers(row.get("samples") or (), FIGURES["server"])
    text = (f"{name} server CPU " + _show((statistics.median(values), min(values), max(values)),
                                           "µs") + " µs/put") if values else f"{name}: ?"
    waits = _numbers(row.get("samples") or (), "server_wait_share")
    if not waits:
        return text + ", run-queue wait not recorded"
    shared = [w for w in waits if w >= SHARED_WAIT]
    if shared:
        return (text + f", **its CPU shared** in {len(shared)} of {len(waits)} runs (waited for "
                f"a CPU up to {max(shared):.0%} of the wall time)")
    return text + f", its CPU to itself (run-queue wait under {SHARED_WAIT:.0%} in every run)"


def _servers_bound(protocol: str, rows: Sequence[tuple[tuple[str, str], str]]
                   ) -> Callable[[Documents], str]:
    """For a target between servers: each one's busy shares, its CPU per operation and
    whether its CPU was shared during the runs."""

    def bound(documents: Documents) -> str:
        return "; ".join(f"{_busy_text(documents, protocol, key, name)}; "
                         f"{_server_text(documents, protocol, key, name)}"
                         for key, name in rows)

    return bound


def _wall_bound(protocol: str, rows: Sequence[tuple[tuple[str, str], str]]
                ) -> Callable[[Documents], str]:
    def bound(documents: Documents) -> str:
        return "; ".join(_busy_text(documents, protocol, key, name) for key, name in rows)

    return bound


TARGETS: tuple[Target, ...] = (
    Target("beanstalk sync `put`, one at a time, CPU/op",
           (_one("beanstalk", ("put", "jobwire-sync"), ("put", "greenstalk"), "cpu", 1.0),),
           "<= 1.0x greenstalk",
           bound=_peer_bound("beanstalk", [("put", "")], "greenstalk", "greenstalk", "raw-seq",
                             "raw socket")),
    Target("beanstalk sync reserve+delete, CPU/op",
           (_one("beanstalk", ("reserve_delete", "jobwire-sync"),
                 ("reserve_delete", "greenstalk"), "cpu", 1.0),),
           "<= 1.0x greenstalk",
           bound=_peer_bound("beanstalk", [("reserve_delete", "")], "greenstalk", "greenstalk",
                             "raw-seq", "raw socket")),
    Target("beanstalk async put / r+d, CPU/op (asyncio)",
           (_one("beanstalk", ("put", "jobwire-asyncio"), ("put", "jobwire-sync"), "cpu", 1.3,
                 "put"),
            _one("beanstalk", ("reserve_delete", "jobwire-asyncio"),
                 ("reserve_delete", "jobwire-sync"), "cpu", 1.3, "r+d")),
           "<= 1.3x sync", bound=_async_bound),
    Target("AsyncWorker no-op, c=64, one connection: client CPU/job and wall",
           (_one("beanstalk", ("worker_noop", "worker-asyncio"), ("worker_noop", "raw-pipe"),
                 "cpu", 2.0, "idle CPU"),
            _one("beanstalk", ("worker_noop", "worker-asyncio"), ("worker_noop", "raw-pipe"),
                 "ops", 0.6, "idle wall"),
            _one("beanstalk", ("worker_noop_busy", "worker-asyncio"),
                 ("worker_noop_busy", "raw-pipe"), "cpu", 2.0, "core shared CPU"),
            _one("beanstalk", ("worker_noop_busy", "worker-asyncio"),
                 ("worker_noop_busy", "raw-pipe"), "ops", 0.6, "core shared wall")),
           "CPU <= 2x and wall >= 0.6x the raw windowed reserve+delete, idle and with its core "
           "shared",
           "core shared: a process spinning on the benchmark's core", bound=_worker_bound),
    Target("bundled beanstalk server, pipelined put, wall",
           (_one("beanstalk", ("bundled_put", "raw-pipe-bundled"), ("bundled_put", "raw-pipe"),
                 "ops", 0.7, paired=True),),
           ">= 0.7x beanstalkd", "raw pipelined socket as the client",
           bound=_servers_bound("beanstalk", [(("bundled_put", "raw-pipe-bundled"), "bundled"),
                                             (("bundled_put", "raw-pipe"), "beanstalkd")])),
    Target("Workq sync `add`, one at a time, wall",
           (_one("workq", ("add", "jobwire-sync"), ("add", "raw"), "ops", 0.8),),
           ">= 0.8x raw socket", "bundled server, not the real one",
           bound=_wall_bound("workq", [(("add", "jobwire-sync"), "jobwire"),
                                      (("add", "raw"), "raw")])),
    Target("qless put / pop+complete, CPU/op",
           (_one("qless", ("put", "jobwire-sync"), ("put", "qless-py"), "cpu", 0.8, "put"),
            _one("qless", ("pop_complete", "jobwire-sync"), ("pop_complete", "qless-py"),
                 "cpu", 0.8, "pop+complete")),
           "<= 0.8x qless-py (its Redis 7 fix)",
           bound=_peer_bound("qless", [("put", "put: "), ("pop_complete", "pop+complete: ")],
                             "qless-py", "qless-py", "raw", "raw socket")),
)


@dataclass(frozen=True)
class Measured:
    part: Part
    ratio: float | None  #: None: not measured
    mine: float | None
    other: float | None
    why: str = ""  #: why it was not measured
    unstable: bool = False  #: either figure's runs moved more than UNSTABLE
    low: float | None = None  #: the ratio's range over the runs: mine's min / other's max ...
    high: float | None = None  #: ... and mine's max / other's min
    #: A paired part: how many rounds gave a ratio (``ratio`` is their median, ``low`` and
    #: ``high`` their lowest and highest); 0: a ratio of medians. ``unpaired`` says why a
    #: paired part fell back to the ratio of medians.
    rounds: int = 0
    unpaired: str = ""

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
        flag = ", unstable" if self.unstable else ""
        if self.rounds:
            flag = (f"; median of {self.rounds} per-round ratios, {self.low:.2f}-"
                    f"{self.high:.2f}x{flag}")
        elif self.unpaired:
            flag += f"; ratio of medians, not per round: {self.unpaired}"
        if self.part.metric == "cpu":
            return f"{prefix}{self.ratio:.2f}x ({self.mine:.1f} vs {self.other:.1f} µs{flag})"
        return f"{prefix}{self.ratio:.2f}x ({self.mine:,.0f} vs {self.other:,.0f} ops/s{flag})"


def _rows(documents: Documents, protocol: str) -> dict[tuple[str, str], Mapping[str, Any]]:
    document = documents.get(protocol)
    if document is None:
        return {}
    return {(row["scenario"], row["client"]): row for row in document["results"]}


def measure(part: Part, documents: Documents) -> Measured:
    """The value of ``part`` in ``documents`` (protocol -> results document): the ratio of
    the two rows' medians, and its range over their runs."""
    if part.protocol not in documents:
        return Measured(part, None, None, None, f"no {part.protocol}.json")
    rows = _rows(documents, part.protocol)
    key = FIGURES[part.metric]
    values: list[tuple[float, float, float]] = []
    unstable = False
    for scenario, client in (part.mine, part.other):
        row = rows.get((scenario, client))
        if row is None:
            return Measured(part, None, None, None, f"no {scenario}/{client} row")
        triple = _triple(row, key)
        if triple is None:
            return Measured(part, None, None, None,
                            f"{scenario}/{client}: {row.get('error') or 'no ' + key}")
        values.append(triple)
        unstable = unstable or key in (row.get("unstable") or {})
    (mine, mine_low, mine_high), (other, other_low, other_high) = values
    if part.paired:
        rounds, why = per_round(rows[part.mine], rows[part.other], key)
        if rounds:
            share = spread(rounds)
            return Measured(part, statistics.median(rounds), mine, other,
                            unstable=share is not None and share > UNSTABLE,
                            low=min(rounds), high=max(rounds), rounds=len(rounds))
        return Measured(part, mine / other, mine, other, unstable=unstable,
                        low=mine_low / other_high, high=mine_high / other_low, unpaired=why)
    return Measured(part, mine / other, mine, other, unstable=unstable,
                    low=mine_low / other_high, high=mine_high / other_low)


def per_round(mine: Mapping[str, Any], other: Mapping[str, Any], key: str
              ) -> tuple[list[float], str]:
    """The ratio of ``key`` of ``mine``'s run i to ``other``'s run i, for each round i of
    two rows that ran in the same rounds; or no ratios and why they cannot be paired."""
    for row in (mine, other):
        if row.get("note"):
            return [], f"{row['client']} is {row['note']}"
    first, second = _numbers(mine.get("samples") or (), key), _numbers(
        other.get("samples") or (), key)
    if not first or len(first) != len(second):
        return [], f"{len(first)} runs against {len(second)}"
    if not all(second):
        return [], f"a run of {other['client']} measured 0"
    return [a / b for a, b in zip(first, second, strict=True)], ""


def evaluate(target: Target, documents: Documents) -> tuple[list[Measured], bool | None]:
    """Every part measured, and whether the target is met (None: a part was not measured)."""
    parts = [measure(part, documents) for part in target.parts]
    verdicts = [p.met for p in parts]
    if any(v is None for v in verdicts):
        return parts, None
    return parts, all(verdicts)


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def target_lines(documents: Documents, only: str | None = None) -> list[str]:
    """One line per target (of protocol ``only``'s, when given) for a terminal."""
    lines = []
    for target in TARGETS:
        if only is not None and any(p.protocol != only for p in target.parts):
            continue
        parts, met = evaluate(target, documents)
        verdict = {True: "MET   ", False: "MISSED", None: "n/a   "}[met]
        lines.append(f"{verdict} {target.scenario}: {'; '.join(p.text() for p in parts)} "
                     f"(target {target.target})")
        if met is not None:
            lines.append(f"       bound: {bound_text(target, documents)}")
    return lines


# -- checking a quick run against the published figures ---------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One published figure against a new run of it."""

    figure: str
    published: tuple[float, float, float] | None  #: median, min, max
    run: tuple[float, float, float] | None  #: None: the run did not measure it
    unit: str  #: "ops/s", "µs" or "x"
    run_unstable: bool = False

    @property
    def window(self) -> tuple[float, float] | None:
        """The range a run's median must fall in: the published [min, max] widened on each
        side by :data:`TOLERANCE` of the published median."""
        if self.published is None:
            return None
        median, low, high = self.published
        return low - TOLERANCE * median, high + TOLERANCE * median

    @property
    def reproduced(self) -> bool | None:
        if self.run is None or self.window is None:
            return None
        low, high = self.window
        return low <= self.run[0] <= high

    def text(self) -> str:
        if self.run is None:
            return "not run"
        if self.reproduced:
            verdict = "reproduced"
        else:
            assert self.window is not None
            side = "higher" if self.run[0] > self.window[1] else "lower"
            verdict = f"**NOT reproduced** ({side})"
        return verdict + (" (this run unstable)" if self.run_unstable else "")


def _triple(row: Mapping[str, Any], key: str) -> tuple[float, float, float] | None:
    values = [row.get(f"{k}_{key}") for k in ("median", "min", "max")]
    if not all(isinstance(v, (int, float)) and v > 0 for v in values):
        return None
    return float(values[0]), float(values[1]), float(values[2])  # type: ignore[arg-type]


def compare(published: Documents, run: Documents) -> list[Verdict]:
    """Every figure the page shows from ``published`` (each row's median ops/s and client
    CPU µs/op, except the rows that repeat another's runs, and each target's ratios) against
    the same figure in ``run``; a protocol ``run`` does not hold is skipped (not asked for)."""
    out: list[Verdict] = []
    for protocol in PROTOCOLS:
        if protocol not in published or protocol not in run:
            continue
        mine = _rows(run, protocol)
        for row in published[protocol]["results"]:
            if "error" in row or row.get("note"):
                continue
            again = mine.get((row["scenario"], row["client"]))
            if again is not None and "error" in again:
                again = None
            for metric, unit in (("ops", "ops/s"), ("cpu", "µs")):
                key = FIGURES[metric]
                out.append(Verdict(
                    f"{protocol} {row['scenario']}/{row['client']} "
                    f"{'ops/s' if metric == 'ops' else 'client CPU µs/op'}",
                    _triple(row, key), None if again is None else _triple(again, key), unit,
                    again is not None and key in (again.get("unstable") or {})))
    for target in TARGETS:
        if any(p.protocol not in published or p.protocol not in run for p in target.parts):
            continue
        for part in target.parts:
            then, now = measure(part, published), measure(part, run)
            name = f"target: {target.scenario}" + (f", {part.label}" if part.label else "")
            out.append(Verdict(
                name,
                None if then.ratio is None else (then.ratio, then.low or 0, then.high or 0),
                None if now.ratio is None else (now.ratio, now.low or 0, now.high or 0),
                "x", now.unstable))
    return out


def _show(value: tuple[float, float, float] | None, unit: str, spread_too: bool = True) -> str:
    if value is None:
        return "-"
    digits = 0 if unit == "ops/s" else 2 if unit == "x" else 1
    median, low, high = value
    text = f"{median:,.{digits}f}" + ("x" if unit == "x" else "")
    if spread_too:
        text += f" ({low:,.{digits}f}-{high:,.{digits}f})"
    return text


def check_table(verdicts: Sequence[Verdict]) -> list[str]:
    """The verdicts as a Markdown table."""
    lines = ["| figure | published median (min-max) | this run's median (min-max) | verdict |",
             "|---|--:|--:|---|"]
    for v in verdicts:
        lines.append(f"| {_cell(v.figure)} | {_show(v.published, v.unit)} | "
                     f"{_show(v.run, v.unit)} | {v.text()} |")
    return lines


# -- reading -----------------------------------------------------------------------------------


def _read_json(path: Path) -> object:
    """The JSON document in ``path``.

    Raises:
        ReportError: it cannot be read or is not valid JSON.
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path.name}: {exc}") from exc


def _recorded(results: Path, name: str) -> tuple[str, object] | None:
    """The file name and the JSON document of ``<name>.json`` in ``results``, or None: not
    recorded.

    Raises:
        ReportError: it cannot be read or is not valid JSON.
    """
    path = results / f"{name}.json"
    return (path.name, _read_json(path)) if path.is_file() else None


def _check(document: object, name: str) -> Mapping[str, Any]:
    if not isinstance(document, Mapping):
        raise ReportError(f"{name}: not a JSON object")
    for key, kind in (("environment", Mapping), ("config", Mapping), ("results", list)):
        if not isinstance(document.get(key), kind):
            raise ReportError(f"{name}: no {key!r} (written by an older benchmark script? "
                              "run scripts/bench again)")
    wanted = [f"{k}_{v}" for v in (FIGURES["ops"], FIGURES["cpu"]) for k in ("median", "min",
                                                                              "max")]
    for i, row in enumerate(document["results"]):
        if not isinstance(row, Mapping) or not all(
                isinstance(row.get(k), str) for k in ("scenario", "client", "label")):
            raise ReportError(f"{name}: results[{i}] lacks scenario, client or label")
        if "error" not in row and not (
                all(isinstance(row.get(k), (int, float)) for k in wanted)
                and isinstance(row.get("samples"), list)):
            raise ReportError(f"{name}: results[{i}] has no median, min and max of ops/s and "
                              "client CPU with its samples (written by an older benchmark "
                              "script? run scripts/bench again)")
    return document


def load(results: Path = RESULTS) -> dict[str, Mapping[str, Any]]:
    """The results documents present in ``results``, by protocol.

    Raises:
        ReportError: a file is not valid JSON or lacks the benchmark's shape.
    """
    documents: dict[str, Mapping[str, Any]] = {}
    for protocol in PROTOCOLS:
        if (found := _recorded(results, protocol)) is not None:
            documents[protocol] = _check(found[1], found[0])
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


def _runs(config: Mapping[str, Any]) -> str:
    return str(config.get("runs", config.get("repeats", "?")))


def _statistic(documents: Documents) -> str:
    runs = sorted({_runs(d["config"]) for d in documents.values()})
    return (f"Each figure is the **median of {' / '.join(runs)} timed runs** of that client, "
            "interleaved (round-robin over the clients of a scenario: run 1 of every client, "
            "then run 2 ...), each run against its own fresh server process on 127.0.0.1, "
            "with the lowest and highest run in parentheses. Client CPU is "
            "`time.process_time()` of the benchmark process (all its threads, syscalls "
            "included; it moves much less with the machine's load than wall time does); "
            "server CPU is the server process's, from `/proc`. Ratios (the \"vs\" columns "
            "and the targets) are ratios of medians. A figure whose runs spread by more than "
            f"{UNSTABLE:.0%} of its median ((max - min) / median > {UNSTABLE}) is marked "
            "*unstable*, and the list under its table says why, from what each run recorded: "
            "how the runs fall, the machine's 1-minute load average and the other processes' "
            "share of its CPU during each run, whether the client's or the server's CPU per "
            "operation moved with it, and the pinning.")


def bound_text(target: Target, documents: Documents) -> str:
    """What holds ``target``'s figure where it is, from the numbers in ``documents``."""
    return "" if target.bound is None else target.bound(documents)


def targets_table(documents: Documents) -> list[str]:
    lines = ["| scenario (issue 22) | measured (ratio of medians; of per-round ratios where "
             "said) | target | | what bounds it (this run) |",
             "|---|---|---|---|---|"]
    for target in TARGETS:
        parts, met = evaluate(target, documents)
        measured = "; ".join(p.text() for p in parts)
        if target.note:
            measured += f" ({target.note})"
        bound = bound_text(target, documents) if met is not None else ""
        lines.append(f"| {_cell(target.scenario)} | {_cell(measured)} | "
                     f"{_cell(target.target)} | {_verdict(met)} | {_cell(bound)} |")
    return lines


def _figure(row: Mapping[str, Any], key: str, digits: int) -> str:
    """A row's median of ``key`` with its (min-max), marked when unstable."""
    median, low, high = (row.get(f"{k}_{key}") for k in ("median", "min", "max"))
    text = _num(median, digits)
    if row.get("runs", 0) > 1 and isinstance(low, (int, float)):
        text += f" ({_num(low, digits)}-{_num(high, digits)})"
    if key in (row.get("unstable") or {}):
        text += " *unstable*"
    return text


def protocol_table(protocol: str, document: Mapping[str, Any], source: str) -> list[str]:
    env, config = document["environment"], document["config"]
    titles: Mapping[str, str] = config.get("scenarios") or {}
    key, prefix = SERVERS[protocol]
    server = f"{prefix}{env.get(key) or '?'}"
    quick = ", **quick run**" if config.get("quick") else ""
    lines = [
        f"**{protocol}** ({server}; `{source}/{protocol}.json`, {_date(document)}, "
        f"median of {_runs(config)} runs{quick}). {NOTES[protocol]}",
        "",
        "| scenario | client | N | ops/s, median (min-max) | client CPU µs/op, median "
        "(min-max) | server CPU µs/op, median | vs, ratio of medians (ops/s, CPU) |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    rows = {(r["scenario"], r["client"]): r for r in document["results"]}
    unstable: list[str] = []
    shown = ""
    ops, cpu = FIGURES["ops"], FIGURES["cpu"]
    server = f"median_{FIGURES['server']}"
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
            versus = (f"{row[f'median_{ops}'] / base[f'median_{ops}']:.2f}x, "
                      f"{row[f'median_{cpu}'] / base[f'median_{cpu}']:.2f}x "
                      f"{base['label']}")
        lines.append(
            f"| {_cell(title)} | {_cell(label)} | {_num(row.get('n'))} | "
            f"{_figure(row, ops, 0)} | {_figure(row, cpu, 1)} | "
            f"{_num(row.get(server), 1)} | {_cell(versus)} |")
        if row.get("note"):
            continue  # the same runs as another row: said there
        unstable += _why_unstable_lines(scenario, row, ((ops, "ops/s"), (cpu, "client CPU/op")))
    return lines + _unstable_block(_runs(config), unstable)


def _why_unstable_lines(scenario: str, row: Mapping[str, Any],
                        figures: Sequence[tuple[str, str]]) -> list[str]:
    """A bullet for each of ``figures`` (key, name) that the row marks unstable, with why."""
    reasons = row.get("unstable") or {}
    return [f"- {scenario} / {row['label']}, {name}: {reasons[key]}"
            for key, name in figures if reasons.get(key)]


def _unstable_block(runs: object, unstable: Sequence[str]) -> list[str]:
    """The list of unstable figures under a table (nothing when there is none)."""
    if not unstable:
        return []
    return ["", f"Unstable figures ({runs} runs spread by more than {UNSTABLE:.0%} of the "
            "median), and why:", "", *unstable]


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
        key, unit = SCALING_VALUES.get(scan, ("median_ops_per_s", "ops/s"))
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
        + (f" **Quick runs** (small counts, fewer runs; smoke numbers): {', '.join(quick)}."
           if quick else ""),
        "",
        _statistic(documents),
        "",
        "Issue 22's targets, as medians of one run (CPU/op: lower is better, met at or under "
        "the target; wall: ops/s, met at or over it). \"What bounds it\" is computed from the "
        "same run, for met and missed rows alike: for a CPU target, each client's CPU per "
        "operation above the raw socket's (what its own code costs per call); for a wall "
        "target, the share of the wall time the client's and the server's CPU were busy (the "
        "median over the runs; 80% or more: that CPU is the bound, else the round trips):",
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


# -- the hand-written sections' figures: "How cost grows" and "Pooled clients" ---------------

#: The other generated parts of the page: ``<!-- perf:NAME:begin -->`` ...
#: ``<!-- perf:NAME:end -->``, each made from one JSON file (:func:`sections`).
GROWTH = "growth"
POOL = "pool"
MIB = 1 << 20


def markers(name: str = "") -> tuple[str, str]:
    """The begin and end markers of the section ``name`` ("": the results section)."""
    if not name:
        return BEGIN, END
    return f"<!-- perf:{name}:begin -->", f"<!-- perf:{name}:end -->"


def _series(document: Mapping[str, Any], scan: str, system: str, client: str,
            server: str | None = None) -> list[Mapping[str, Any]]:
    """The points of one scaling series (empty: not recorded)."""
    for line in document.get("series") or ():
        if (isinstance(line, Mapping) and line.get("scan") == scan
                and line.get("system") == system and line.get("client") == client
                and (server is None or line.get("server") == server)):
            return [p for p in line.get("points") or () if isinstance(p, Mapping)]
    return []


def _at(points: Sequence[Mapping[str, Any]], x: float) -> Mapping[str, Any] | None:
    return next((p for p in points if p.get("x") == x), None)


def _mm(point: Mapping[str, Any] | None, key: str, digits: int = 0, scale: float = 1.0) -> str:
    """A point's median of ``key`` with its (min-max) over the runs, times ``scale``."""
    if point is None:
        return "?"
    values = [point.get(f"{k}_{key}") for k in ("median", "min", "max")]
    if not isinstance(values[0], (int, float)):
        return "?"
    text = _num(values[0] * scale, digits)
    if (isinstance(values[1], (int, float)) and isinstance(values[2], (int, float))
            and point.get("runs", 0) > 1):
        text += f" ({_num(values[1] * scale, digits)}-{_num(values[2] * scale, digits)})"
    return text


def _per_mb(point: Mapping[str, Any] | None) -> str:
    """Client CPU ms per MB (10^6 bytes of body) at a body-size point, median (min-max)."""
    if point is None or not isinstance(point.get("x"), (int, float)):
        return "?"
    return _mm(point, FIGURES["cpu"], 2, 1e6 / float(point["x"]) / 1e3)


def _median_of(point: Mapping[str, Any] | None, key: str) -> float | None:
    value = None if point is None else point.get(f"median_{key}")
    return float(value) if isinstance(value, (int, float)) else None


def growth_lines(document: Mapping[str, Any], source: str) -> list[str]:
    """The figures "How cost grows" quotes, each a median (min-max) of the scaling runs."""
    runs = _runs(document.get("config") or {})
    lines = [f"From `{source}/{SCALING}.json` ({_date(document)}; each figure the median of "
             f"{runs} interleaved runs, (lowest-highest); idle connections: one measurement "
             "per point):", ""]
    ops, cpu = FIGURES["ops"], FIGURES["cpu"]
    body = ["**Body size**: MB/s and client CPU ms per MB (10^6 bytes of body; a quadratic copy "
            "would cost 16 times more per MB at 16 MiB than at 1 MiB):", "",
            "| system | body | jobwire MB/s | raw socket MB/s | jobwire client CPU ms/MB "
            "| raw socket ms/MB |", "|---|--:|--:|--:|--:|--:|"]
    for system, name, xs in (("beanstalk", "beanstalk", (MIB, 16 * MIB)),
                             ("gearman", "Gearman", (MIB, 16 * MIB)),
                             ("qless", "qless", (MIB, 16 * MIB)), ("workq", "Workq", (MIB,))):
        mine, raw = (_series(document, "body_size", system, c) for c in ("jobwire", "raw"))
        for x in xs if mine else ():
            here, there = _at(mine, x), _at(raw, x)
            body.append(f"| {name} | {_x('body_size', x)} | {_mm(here, 'mb_per_s')} | "
                        f"{_mm(there, 'mb_per_s')} | {_per_mb(here)} | {_per_mb(there)} |")
    if len(body) > 4:
        lines += [*body, ""]
    mine, raw = (_series(document, "concurrency", "beanstalk", c) for c in ("jobwire", "raw"))
    if mine:
        lines += ["**Concurrency** on one AsyncWorker connection, 10 ms handler, against the raw "
                  "socket's lock-step batches of c:", "",
                  "| c | jobwire jobs/s | raw socket jobs/s | c / 10 ms | jobwire client CPU "
                  "µs/job | raw socket µs/job |", "|--:|--:|--:|--:|--:|--:|"]
        for point in mine:
            other = _at(raw, point.get("x", -1))
            lines.append(f"| {_x('concurrency', point.get('x'))} | {_mm(point, ops)} | "
                         f"{_mm(other, ops)} | {_num(point.get('ideal_ops_per_s'))} | "
                         f"{_mm(point, cpu, 1)} | {_mm(other, cpu, 1)} |")
        lines.append("")
    tubes = []
    for server, name in (("beanstalkd", "beanstalkd"), ("beanstalk-bundled", "bundled server")):
        mine, raw = (_series(document, "watched_tubes", "beanstalk", c, server)
                     for c in ("jobwire", "raw"))
        if not mine:
            continue
        first, last = mine[0], mine[-1]
        tubes.append(f"{name}: jobwire {_mm(first, ops)} ops/s with "
                     f"{_x('watched_tubes', first.get('x'))} tube, {_mm(last, ops)} with "
                     f"{_x('watched_tubes', last.get('x'))} (raw socket {_mm(raw[0], ops)} and "
                     f"{_mm(raw[-1], ops)}); jobwire's client CPU per reserve + delete "
                     f"{_mm(first, cpu, 1)} and {_mm(last, cpu, 1)} µs")
    if tubes:
        lines.append("- **Watched tubes** (reserve + delete): " + "; ".join(tubes) + ".")
    mine, raw = (_series(document, "lease_names", "workq", c) for c in ("jobwire", "raw"))
    if mine:
        first, last = mine[0], mine[-1]
        lines.append(
            f"- **Lease names** (Workq `lease` + `delete`, bundled server): with "
            f"{_x('lease_names', first.get('x'))} name jobwire {_mm(first, ops)} ops/s (raw "
            f"{_mm(raw[0] if raw else None, ops)}), with {_x('lease_names', last.get('x'))} "
            f"{_mm(last, ops)} (raw {_mm(raw[-1] if raw else None, ops)}); jobwire's client "
            f"CPU per lease + delete {_mm(first, cpu, 1)} and {_mm(last, cpu, 1)} µs (raw "
            f"{_mm(raw[0] if raw else None, cpu, 1)} and {_mm(raw[-1] if raw else None, cpu, 1)}).")
    idle = []
    for line in document.get("series") or ():
        if not isinstance(line, Mapping) or line.get("scan") != "idle_connections":
            continue
        points = [p for p in line.get("points") or () if isinstance(p, Mapping)]
        if points:
            top = points[-1]
            rss = top.get("server_rss_kib")
            idle.append(f"{line.get('label', '?')} {_num(top.get('bytes_per_connection'))} B "
                        f"per connection at {_x('idle_connections', top.get('x'))} "
                        f"({_num(rss / 1024 if isinstance(rss, (int, float)) else None)} MiB "
                        "of RSS)")
    if idle:
        lines.append("- **Idle connections**: " + "; ".join(idle) + ".")
    return lines


def load_pool(results: Path = RESULTS) -> Mapping[str, Any] | None:
    """``pool.json`` in ``results`` (``benchmarks/pool.py``), or None: not recorded.

    Raises:
        ReportError: it is not valid JSON or lacks the benchmark's shape.
    """
    found = _recorded(results, POOL)
    return None if found is None else _check(found[1], found[0])


def pool_lines(document: Mapping[str, Any], source: str) -> list[str]:
    """The pooled clients' table and the differences the section draws from it."""
    config = document["config"]
    machine = _machine(document["environment"])
    lines = [f"From `{source}/{POOL}.json` ({_date(document)}, median of {_runs(config)} "
             f"interleaved runs, (lowest-highest){', **quick run**' if config.get('quick') else ''}"
             f"; {machine}):", "",
             "| 16 threads putting | ops/s, median (min-max) | client CPU µs/put, median "
             "(min-max) | beanstalkd CPU µs/put, median |", "|---|--:|--:|--:|"]
    rows = {row["client"]: row for row in document["results"] if "error" not in row}
    ops, cpu = FIGURES["ops"], FIGURES["cpu"]
    for row in document["results"]:
        if "error" in row:
            lines.append(f"| {_cell(row['label'])} | {_cell(str(row['error']))} | | |")
            continue
        lines.append(f"| {_cell(row['label'])} | {_figure(row, ops, 0)} | {_figure(row, cpu, 1)} "
                     f"| {_num(row.get('median_' + FIGURES['server']), 1)} |")
    facts = []

    def median(client: str, key: str) -> float | None:
        value = rows.get(client, {}).get(f"median_{key}")
        return float(value) if isinstance(value, (int, float)) else None

    pool16, per, pool4, locked = (median(c, cpu) for c in ("pool-16", "per-thread", "pool-4",
                                                          "locked"))
    if pool16 is not None and per is not None:
        facts.append(f"a pool as large as the threads: {pool16 - per:+.1f} µs of client CPU per "
                     "put over a client per thread (medians)")
    if pool4 is not None and locked is not None:
        ops4, opsl = median("pool-4", ops), median("locked", ops)
        facts.append(f"a pool of 4: {pool4:.1f} µs against {locked:.1f} for one locked client"
                     + ("" if ops4 is None or opsl is None else
                        f", {ops4:,.0f} ops/s against {opsl:,.0f}"))
    moves = [float(r[f"max_{ops}"]) / float(r[f"min_{ops}"]) for r in rows.values()
             if isinstance(r.get(f"min_{ops}"), (int, float)) and r[f"min_{ops}"] > 0]
    if moves:
        facts.append(f"ops/s moved {min(moves):.1f}-{max(moves):.1f}x between the fastest and "
                     "slowest run of a row")
    if facts:
        lines += ["", "In these runs: " + "; ".join(facts) + "."]
    return lines


def sections(results: Path, source: str) -> dict[str, str]:
    """The text of each other generated part of the page (name -> text between its
    markers), from the JSON in ``results`` alone. ``main`` rewrites (and ``--check``
    compares) each part whose begin marker the page holds; docs/performance.md holds both
    (a test keeps them there)."""
    out = {}
    scaling = load_scaling(results)
    out[GROWTH] = "\n".join(
        growth_lines(scaling[0], source) if scaling is not None
        else [f"No `{SCALING}.json` was recorded: run `scripts/bench scaling`."]) + "\n"
    pool = load_pool(results)
    out[POOL] = "\n".join(
        pool_lines(pool, source) if pool is not None
        else [f"No `{POOL}.json` was recorded: run `.venv/bin/python benchmarks/pool.py`."]
    ) + "\n"
    startup = load_startup(results)
    out[STARTUP] = "\n".join(
        startup_lines(startup, source) if startup is not None
        else [f"No `{STARTUP}.json` was recorded: run `scripts/bench startup`."]) + "\n"
    return out


# -- "Start to first reply": benchmarks/startup.py's rows and issue 18's target --------------

STARTUP = "startup"
#: The bundled servers judged against the target (this tree's rows, bytecode cached), by name.
STARTUP_SERVERS = {"beanstalk": "beanstalk", "gearman": "Gearman", "workq": "Workq"}


def load_startup(results: Path = RESULTS) -> Mapping[str, Any] | None:
    """``startup.json`` in ``results`` (``benchmarks/startup.py``), or None: not recorded.

    Raises:
        ReportError: it is not valid JSON, or has no environment, config, or results each
            with a row name (and, unless failed, a median).
    """
    if (found := _recorded(results, STARTUP)) is None:
        return None
    name, document = found
    if not isinstance(document, Mapping) or not all(
            isinstance(document.get(k), kind) for k, kind in
            (("environment", Mapping), ("config", Mapping), ("results", list))):
        raise ReportError(f"{name}: no environment, config or results (run scripts/bench "
                          "startup again)")
    for i, row in enumerate(document["results"]):
        if not isinstance(row, Mapping) or not isinstance(row.get("row"), str) or (
                "error" not in row and not isinstance(row.get("median_reply_s"), (int, float))):
            raise ReportError(f"{name}: results[{i}] has no row name or median")
    return document


def _ms_of(row: Mapping[str, Any] | None, key: str) -> float | None:
    value = None if row is None else row.get(key)
    return float(value) * 1e3 if isinstance(value, (int, float)) else None


def startup_lines(document: Mapping[str, Any], source: str) -> list[str]:
    """The spawn-to-first-reply table, issue 18's target row per bundled server (its median
    over the bare process's: met or missed) and what bounds it, from one startup run."""
    config = document["config"]
    target = float(config.get("target_ratio") or 1.5)
    rows = {row["row"]: row for row in document["results"]}
    quick = ", **quick run**" if config.get("quick") else ""
    lines = [f"From `{source}/{STARTUP}.json` ({_date(document)}; each row the median of "
             f"{_runs(config)} interleaved spawns, (fastest-slowest){quick}; "
             f"{_machine(document['environment'])}), ms from just before the spawn; "
             "\"accepted\": when the port first accepted:", "",
             "| row | first reply, median (fastest-slowest) | accepted | x bare |",
             "|---|--:|--:|--:|"]
    for row in document["results"]:
        label = f"`{row['row']}`: {row.get('label', '')}"
        if "error" in row:
            lines.append(f"| {_cell(label)} | {_cell(str(row['error']))} | | |")
            continue
        spread = (f" ({_num(_ms_of(row, 'min_reply_s'))}-{_num(_ms_of(row, 'max_reply_s'))})"
                  if row.get("runs", 0) > 1 else "")
        lines.append(f"| {_cell(label)} | {_num(_ms_of(row, 'median_reply_s'))}{spread} | "
                     f"{_num(_ms_of(row, 'median_connect_s'))} | "
                     f"{_num(row.get('ratio_to_bare'), 2)} |")
    bare = _ms_of(rows.get("bare"), "median_reply_s")
    verdicts, over = [], []
    for key, name in STARTUP_SERVERS.items():
        row = rows.get(key)
        ratio = None if row is None else row.get("ratio_to_bare")
        if not isinstance(ratio, (int, float)):
            verdicts.append(f"{name}: not measured")
            continue
        verdicts.append(f"{name} {ratio:.2f}x, {'met' if ratio <= target else '**missed**'}")
        mine = _ms_of(row, "median_reply_s")
        if mine is not None and bare is not None:
            over.append(f"{name} {mine - bare:+.0f} ms")
    lines += ["", f"**Target** (issue 18): a bundled server's median first reply within "
              f"{target:g}x of the bare process's: " + "; ".join(verdicts) + "."]
    if bare is None:
        return lines
    bound = (f"**What bounds it**: the bare process ({bare:.0f} ms) is the interpreter's own "
             "start; over it each server spends its imports and set-up before the first "
             "reply (" + ", ".join(over) + "), most of it the modules a first reply needs: "
             "the Sans-IO core, the server state and the `selectors` loop")
    anyio = _ms_of(rows.get("bare+anyio"), "median_reply_s")
    if anyio is not None:
        bound += (f"; importing anyio's asyncio backend alone would take {anyio - bare:+.0f} "
                  "ms, more than any server's whole difference")
    compiled = [(_ms_of(rows.get(f"{key} (.py)"), "median_reply_s"),
                 _ms_of(rows.get(key), "median_reply_s")) for key in STARTUP_SERVERS]
    extra = [a - b for a, b in compiled if a is not None and b is not None]
    if extra:
        bound += (f". Without cached bytecode (a source checkout with "
                  f"`PYTHONDONTWRITEBYTECODE=1`) compiling the project adds "
                  f"{min(extra):.0f}-{max(extra):.0f} ms")
    lines += ["", bound + "."]
    return lines


# -- docs/spark.md's figures: benchmarks/spark.py's rows ---------------------------------------

SPARK = "spark"
#: The page holding the Spark section (between ``markers(SPARK)``), rewritten and checked by
#: :func:`spark_page` when the results folder holds ``spark.json``.
SPARK_PAGE = ROOT / "docs" / "spark.md"
#: What a row's items are, by scenario.
SPARK_ITEMS = {"write": "rows", "stream": "jobs", "metrics": "events"}
#: The write's stages (rows of the write scenario), each adding to the one before.
SPARK_STAGES = (("spark-noop", "the JVM makes the rows (`noop`)"),
                ("spark-arrow", "+ rows to Arrow, over to the Python workers"),
                ("spark-puts", "+ jobwire's row code, `Put` objects, encoding"),
                ("spark", "+ pipelined socket I/O, replies, beanstalkd"))


def upgrade_spark(document: Mapping[str, Any]) -> dict[str, Any]:
    """``spark.json`` as ``benchmarks/spark.py`` wrote it before it took medians of
    interleaved runs (rows named by ``key``, samples in seconds: ``per_s``, ``cpu_s``,
    ``server_cpu_s``; ``repeats``) in today's shape: each sample's figures per item, each row's
    figures from its samples (:func:`summarize`), the samples' other keys kept."""
    results = []
    for row in document["results"]:
        if not isinstance(row, Mapping) or "key" not in row or not row.get("samples"):
            results.append(row)
            continue
        samples = []
        for s in row["samples"]:
            n, server = s["n"], s.get("server_cpu_s")
            samples.append({
                **{k: v for k, v in s.items() if k not in ("per_s", "cpu_s", "server_cpu_s")},
                "ops_per_s": round(n / s["seconds"], 1),
                "client_cpu_us_per_op": round(s["cpu_s"] / n * 1e6, 2),
                "server_cpu_us_per_op": None if server is None else round(server / n * 1e6, 2),
            })
        results.append({"scenario": row["scenario"], "client": row["key"],
                        "label": row["label"], "n": row["n"], **summarize(samples),
                        "samples": samples})
    config = {k: v for k, v in document["config"].items() if k != "repeats"}
    runs = document["config"].get("repeats", config.get("runs"))
    return {**document, "protocol": SPARK, "config": {**config, "runs": runs},
            "results": results}


def load_spark(results: Path = RESULTS) -> Mapping[str, Any] | None:
    """``spark.json`` in ``results`` (an older one upgraded: :func:`upgrade_spark`), or None:
    not recorded.

    Raises:
        ReportError: it is not valid JSON or lacks the benchmark's shape.
    """
    if (found := _recorded(results, SPARK)) is None:
        return None
    name, document = found
    if (isinstance(document, Mapping) and isinstance(document.get("config"), Mapping)
            and isinstance(document.get("results"), list)
            and any(isinstance(r, Mapping) and "key" in r and "client" not in r
                    for r in document["results"])):
        try:
            document = upgrade_spark(document)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise ReportError(f"{name}: an older row that cannot be read: {exc!r}") from exc
    return _check(document, name)


def _sample_median(row: Mapping[str, Any] | None, key: str) -> float | None:
    """The median of ``key`` over a row's samples (extras such as ``peak_rss_mib``)."""
    values = [] if row is None else _numbers(row.get("samples") or [], key)
    return statistics.median(values) if values else None


def spark_lines(document: Mapping[str, Any], source: str) -> list[str]:
    """The Spark page's figures: Spark against one Python process (ratios of medians), every
    row's median (min-max), its unstable figures and why, where a write's time goes, the
    stream's batches and whether the two metrics agree."""
    env, config = document["environment"], document["config"]
    rows = {(r["scenario"], r["client"]): r for r in document["results"] if "error" not in r}
    ops, cpu, server = FIGURES["ops"], FIGURES["cpu"], FIGURES["server"]
    runs = _runs(config)
    each = ("each figure **one run** (no median, no spread)" if runs == "1" else
            f"each figure the median of {runs} interleaved runs, (lowest-highest)")
    quick = "; **quick run**" if config.get("quick") else ""
    packages = env.get("packages") or {}
    lines = [
        f"From `{source}/{SPARK}.json` ({_date(document)}; {each}{quick}; {_machine(env)}; "
        f"{env.get('beanstalkd', '?')}, PySpark {packages.get('pyspark', '?')}, "
        f"{env.get('java', '?')}): {_num(config.get('rows'))} rows of "
        f"{config.get('body_bytes', '?')} B written, {_num(config.get('jobs'))} jobs streamed, "
        f"{_num(config.get('events'))} events. Spark runs `local[2]`; its CPU is the whole "
        "process tree (the JVM and Spark's Python workers), a plain-Python row's that one "
        "process's. Ratios are ratios of medians (speed > 1: Spark is faster; CPU > 1: Spark "
        "spends more per item).", "",
        "| comparison | Spark (`local[2]`), per s | one Python process, per s | speed | CPU "
        "per item |", "|---|--:|--:|--:|--:|"]
    python_rss = _sample_median(rows.get(("metrics", "python")), "peak_rss_mib")
    pairs = [("write into beanstalkd", ("write", "spark"), ("write", "put_many"), "`put_many`")]
    pairs += [(f"stream read, `maxJobsPerBatch` {key[6:]}", ("stream", key),
               ("stream", "python"), "reserve+delete with `call_many`")
              for (scenario, key) in rows if scenario == "stream" and key.startswith("spark-")]
    pairs += [("job metrics", ("metrics", "spark"), ("metrics", "python"),
               "one pass" + ("" if python_rss is None else f" (peak RSS {python_rss:,.0f} MiB)")),
              ("reading the events only", ("metrics", "spark-read"), ("metrics", "python-parse"),
               "`json.loads` per line")]
    for what, mine, other, name in pairs:
        a, b = rows.get(mine), rows.get(other)
        if a is None or b is None:
            continue
        speed = _num(a[f"median_{ops}"] / b[f"median_{ops}"], 2)
        per_item = (_num(a[f"median_{cpu}"] / b[f"median_{cpu}"], 2) if b[f"median_{cpu}"]
                    else "?")
        lines.append(f"| {what} ({SPARK_ITEMS.get(mine[0], 'items')}/s) | {_figure(a, ops, 0)} "
                     f"| {name} {_figure(b, ops, 0)} | {speed}x | {per_item}x |")
    lines += ["", "Every row (CPU per item: per row, job or event; the fixed-cost row's items "
              "are its 10 rows):", "",
              "| scenario | row | N | per s, median (min-max) | CPU µs per item, median "
              "(min-max) | beanstalkd CPU µs per item, median |", "|---|---|--:|--:|--:|--:|"]
    unstable: list[str] = []
    shown = ""
    for row in document["results"]:
        scenario = row["scenario"]
        title = "" if scenario == shown else scenario
        shown = scenario
        if "error" in row:
            lines.append(f"| {title} | {_cell(row['label'])}: {_cell(str(row['error']))} "
                         f"| {_num(row.get('n'))} | | | |")
            continue
        srv = row.get(f"median_{server}")
        lines.append(f"| {title} | {_cell(row['label'])} | {_num(row.get('n'))} | "
                     f"{_figure(row, ops, 0)} | {_figure(row, cpu, 1)} | "
                     f"{'' if srv is None else _num(srv, 1)} |")
        unstable += _why_unstable_lines(scenario, row, ((ops, "per s"), (cpu, "CPU per item")))
    lines += _unstable_block(runs, unstable)
    lines += _spark_write_lines(rows)
    lines += _spark_stream_lines(rows)
    lines += _spark_metrics_lines(document.get("metrics"))
    return lines


def _spark_write_lines(rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
    """Where a Spark beanstalk write's time goes: each stage's median per row over the one
    before it (nothing unless every stage ran)."""
    ops, cpu = FIGURES["ops"], FIGURES["cpu"]
    table: list[str] = []
    wall_before = cpu_before = 0.0
    for key, stage in SPARK_STAGES:
        row = rows.get(("write", key))
        if row is None:
            return []
        wall, used = 1e6 / row[f"median_{ops}"], float(row[f"median_{cpu}"])
        table.append(f"| {stage} | {wall - wall_before:+.2f} | {used - cpu_before:+.2f} |")
        wall_before, cpu_before = wall, used
    lines = ["", "Where a Spark beanstalk write's time goes, per row: each stage's median over "
             "the stage before it (a write of the same DataFrame to `noop`, to a Python sink "
             "that counts the Arrow rows, to one that also makes and encodes every `Put`, "
             "then to beanstalkd):", "",
             "| stage | wall µs per row | CPU µs per row (process tree) |", "|---|--:|--:|",
             *table]
    notes = []
    fixed = rows.get(("write", "spark-overhead"))
    seconds = _sample_median(fixed, "seconds")
    if fixed is not None and seconds is not None:
        cpu_s = float(fixed[f"median_{cpu}"]) * float(fixed["n"]) / 1e6
        notes.append(f"A Spark job's fixed cost (a {fixed['n']}-row beanstalk write: planning, "
                     f"tasks, Python workers, connections): {seconds:.2f} s of wall time and "
                     f"{cpu_s:.2f} s of CPU (medians).")
    put_many = rows.get(("write", "put_many"))
    if put_many is not None:
        notes.append(f"One process's `put_many`: {1e6 / put_many[f'median_{ops}']:.2f} µs of "
                     f"wall time and {float(put_many[f'median_{cpu}']):.2f} µs of CPU per row.")
    return [*lines, "", " ".join(notes)] if notes else lines


def _spark_stream_lines(rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
    """The stream's micro-batches, and beanstalkd's CPU per job, for each maxJobsPerBatch."""
    table = []
    for (scenario, key), row in rows.items():
        if scenario != "stream" or not key.startswith("spark-"):
            continue
        per_batch = [1e3 * float(s["seconds"]) / float(s["batches_with_rows"])
                     for s in row.get("samples") or ()
                     if isinstance(s.get("batches_with_rows"), (int, float))
                     and s["batches_with_rows"] > 0 and isinstance(s.get("seconds"), (int, float))]
        batches = _sample_median(row, "batches_with_rows")
        first = _sample_median(row, "first_batch_s")
        table.append(f"| {key[6:]} | {_num(batches)} | "
                     f"{_num(statistics.median(per_batch) if per_batch else None)} | "
                     f"{_num(first, 2)} | {_num(row.get('median_' + FIGURES['server']), 1)} |")
    if not table:
        return []
    lines = ["", "The stream's micro-batches (medians): each has a fixed cost, so larger "
             "batches need fewer of them; beanstalkd's CPU per job grows with the jobs one "
             "connection holds reserved (a whole batch):", "",
             "| `maxJobsPerBatch` | batches with rows | wall ms per batch | first batch after, "
             "s | beanstalkd CPU µs per job |", "|--:|--:|--:|--:|--:|", *table]
    loop = rows.get(("stream", "python"))
    if loop is not None:
        lines.append(f"| reserve+delete loop | | | | "
                     f"{_num(loop.get('median_' + FIGURES['server']), 1)} |")
    return lines


def _spark_metrics_lines(notes: object) -> list[str]:
    """Whether Spark's and the pure-Python pass's metrics agreed (their last runs)."""
    if not isinstance(notes, Mapping) or not isinstance(notes.get("check"), Mapping):
        return []
    check = notes["check"]
    if not check.get("agree"):
        problems = "; ".join(str(p) for p in check.get("problems") or ())
        return ["", f"**Spark's and the pure-Python pass's metrics disagree**: {problems}"]
    worst = max(float(check.get("max_rel_diff_mean") or 0.0),
                float(check.get("max_rel_diff_variance") or 0.0))
    return ["", f"Spark's `job_metrics` and the pure-Python pass agree on all "
            f"{_num(check.get('rows'))} (system, queue, day) rows and "
            f"{_num(check.get('durations'))} durations: every count, every histogram bucket, "
            f"and means and variances to {worst:.0e} relative."]


def spark_page(args: argparse.Namespace) -> int:
    """docs/spark.md's section between ``markers(SPARK)`` (``--spark-page``), from
    ``spark.json`` in ``--results``: rewritten, or with ``--check`` compared (1: it differs;
    2: a file cannot be read or lacks its shape, or the markers are wrong). A results folder
    without ``spark.json`` leaves the page alone (the Spark benchmark is not part of
    ``scripts/bench all``), and so does ``--stdout``."""
    if args.stdout:
        return 0
    page: Path = args.spark_page
    try:
        document = load_spark(args.results)
        if document is None:
            return 0
        text = page.read_text(encoding="utf-8")
        section = "\n".join(spark_lines(document, source_name(args.results))) + "\n"
        wanted = replace_section(text, section, SPARK)
    except (OSError, ReportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _settle(page, text, wanted, "Spark section", f"{SPARK}.json", args)


def _settle(page: Path, text: str, wanted: str, section: str, source: str,
            args: argparse.Namespace) -> int:
    """Compare a page's generated ``section`` (``text`` now, ``wanted`` from ``source``) and
    say so; with ``--check``, print the difference and return 1, else rewrite the page."""
    if wanted == text:
        print(f"{page.name}: the {section} matches {args.results}")
        return 0
    if args.check:
        diff = difflib.unified_diff(text.splitlines(), wanted.splitlines(), f"{page.name} (now)",
                                    f"{page.name} (from {source})", lineterm="", n=0)
        print("\n".join(list(diff)[:40]), file=sys.stderr)
        print(f"{page.name}'s {section} differs from {args.results}: run "
              ".venv/bin/python benchmarks/report.py", file=sys.stderr)
        return 1
    page.write_text(wanted, encoding="utf-8")
    print(f"{page.name}: {section} rewritten from {args.results}")
    return 0


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


def replace_section(text: str, section: str, name: str = "") -> str:
    """``text`` (the page) with what is between the markers of ``name`` (:func:`markers`;
    "": the results section) replaced by ``section``.

    Raises:
        ReportError: the markers are missing, repeated or out of order.
    """
    first, last = markers(name)
    begin, end = text.count(first), text.count(last)
    if begin != 1 or end != 1:
        raise ReportError(f"the page must hold {first} and {last} once each "
                          f"(found {begin} and {end})")
    head, rest = text.split(first)
    if last not in rest:
        raise ReportError(f"{last} comes before {first}")
    _, tail = rest.split(last)
    return f"{head}{first}\n{section}{last}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Rewrite docs/performance.md's results section from "
                    "benchmarks/results/*.json.")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help=f"where the JSON files are (default "
                        f"{RESULTS.relative_to(ROOT)})")
    parser.add_argument("--page", type=Path, default=PAGE,
                        help=f"the page to rewrite or check (default {PAGE.relative_to(ROOT)})")
    parser.add_argument("--spark-page", type=Path, default=SPARK_PAGE,
                        help=f"the page holding the Spark section, rewritten or checked when "
                        f"the results hold {SPARK}.json (default {SPARK_PAGE.relative_to(ROOT)})")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 when the page differs from what the JSON gives")
    mode.add_argument("--stdout", action="store_true",
                      help="print the section; write nothing")
    args = parser.parse_args(argv)
    status = performance_page(args)
    return max(status, spark_page(args))


def performance_page(args: argparse.Namespace) -> int:
    """docs/performance.md's generated parts (``--page``), from ``--results``: rewritten, or
    compared with ``--check``, or printed with ``--stdout``; 0, 1 (differs) or 2 (error)."""
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
        for name, part in sections(args.results, source_name(args.results)).items():
            if markers(name)[0] in text:  # the other parts are where the page has them
                wanted = replace_section(wanted, part, name)
        if scaling is not None and args.check and not (args.results / f"{SCALING}.png").is_file():
            print(f"{args.results / SCALING}.png is missing: run .venv/bin/python "
                  "benchmarks/report.py", file=sys.stderr)
            return 1
        if scaling is not None and not args.check:
            print(f"drew {draw_scaling(scaling[0], args.results)}")
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _settle(args.page, text, wanted, "performance section",
                   f"{args.results.name}/*.json", args)


if __name__ == "__main__":
    sys.exit(main())
