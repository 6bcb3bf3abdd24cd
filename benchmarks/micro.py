"""Two costs the docs quote, measured in one process, CPU only (no server, a few seconds):

* ``record``: building a Sans-IO core's record class (``jobwire._record.record``) against a
  ``dataclass(frozen=True, slots=True)`` and a bare class statement, µs of CPU per class
  (docs/architecture.md, docs/performance.md "Start to first reply");
* ``emit``: what ``EventSink.emit`` costs the worker's thread over a bare call of a function
  with the same arguments, µs of that thread's CPU per event (docs/events.md, "The sink").

    .venv/bin/python benchmarks/micro.py                  # 5 runs
    .venv/bin/python benchmarks/micro.py --quick          # 3 runs (results/quick/micro.json)
    .venv/bin/python benchmarks/micro.py --runs 7 --out /tmp/micro.json

The runs are interleaved (run 1 of every row, then run 2 ...); each figure is the median of the
runs with the lowest and the highest, and ``benchmarks/results/micro.json`` keeps every run.
``figure()`` gives the text the docs show (``tests/docs/test_figures.py`` checks the pages).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobwire._record import record
from jobwire.events import EventSink

CLASSES = 300  # classes built per run and row
EVENTS = 40_000  # under half the sink's buffer: its writer thread stays asleep while timed


def _bare() -> type:
    class Closed:
        pending: int = 0
        partial: bool = False
        reason: str = "closed by peer"

    return Closed


def _record() -> type:
    @record
    class Closed:
        pending: int = 0
        partial: bool = False
        reason: str = "closed by peer"

    return Closed


def _dataclass() -> type:
    @dataclass(frozen=True, slots=True)
    class Closed:
        pending: int = 0
        partial: bool = False
        reason: str = "closed by peer"

    return Closed


def per_class(build: Callable[[], type]) -> float:
    """µs of CPU per class that ``build`` defines."""
    began = time.process_time()
    for _ in range(CLASSES):
        build()
    return (time.process_time() - began) / CLASSES * 1e6


def _call(event: str, time: float, system: str, queue: str, job: str, worker: str,
          put_time: float | None = None, group: str | None = None,
          attempt: int | None = None) -> None:
    """What ``emit`` is compared with: a call of the same shape that does nothing."""


def emit_over_call() -> float:
    """µs of the calling thread's CPU per ``emit``, less a bare call with the same arguments.
    The sink is fresh, its writer asleep (``EVENTS`` is under half its buffer, the flush
    interval longer than the run); it writes the events after the clock stops."""
    with tempfile.TemporaryDirectory() as folder:
        sink = EventSink(folder, flush_interval=3600)
        try:
            emit = sink.emit
            began = time.thread_time()
            for _ in range(EVENTS):
                _call("reserved", 1.7e9, "beanstalk", "emails", "42", "worker-1")
            bare = time.thread_time() - began
            began = time.thread_time()
            for _ in range(EVENTS):
                emit("reserved", 1.7e9, "beanstalk", "emails", "42", "worker-1")
            emitted = time.thread_time() - began
        finally:
            sink.close()
    return (emitted - bare) / EVENTS * 1e6


ROWS: dict[str, tuple[str, Callable[[], float]]] = {
    "record class": ("jobwire._record.record class, 3 fields", lambda: per_class(_record)),
    "dataclass class": ("dataclass(frozen=True, slots=True) class, 3 fields",
                        lambda: per_class(_dataclass)),
    "bare class": ("bare class statement, 3 annotated fields", lambda: per_class(_bare)),
    "emit": ("EventSink.emit over a bare call, the emitting thread's CPU", emit_over_call),
}


def measure(runs: int) -> list[dict[str, Any]]:
    samples: dict[str, list[float]] = {name: [] for name in ROWS}
    for _ in range(runs):
        for name, (_label, timer) in ROWS.items():
            samples[name].append(timer())
    return [{"row": name, "label": ROWS[name][0], "median": statistics.median(values),
             "min": min(values), "max": max(values), "samples": values}
            for name, values in samples.items()]


def fmt(value: float) -> str:
    """µs: two decimals under 1, one under 100, none above."""
    if value < 1:
        return f"{value:.2f}"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def figure(document: Mapping[str, Any], row: str) -> str:
    """``median (min-max)`` of ``row``, in µs, as the docs print it; a row whose runs spread
    more than 20% of the median (the benchmarks' rule) says it is unstable."""
    for result in document["results"]:
        if result["row"] == row:
            low, mid, high = result["min"], result["median"], result["max"]
            unstable = ", unstable" if mid and (high - low) / mid > 0.2 else ""
            return f"{fmt(mid)} ({fmt(low)}-{fmt(high)}{unstable})"
    raise KeyError(row)


def main(argv: Sequence[str] | None = None) -> None:
    from _harness import environment, run_arguments, runs_and_out  # this folder (a script)

    parser = run_arguments("micro", __doc__.split("\n")[0], quick="the same sizes")
    args = parser.parse_args(argv)
    runs, out = runs_and_out(args, "micro")

    document: dict[str, Any] = {
        "protocol": "micro",
        "environment": environment({}, []),
        "config": {
            "runs": runs, "quick": args.quick, "classes": CLASSES, "events": EVENTS,
            "statistic": "median of interleaved runs; the lowest and highest run as the "
                         "spread",
            "unit": "µs of CPU per class (time.process_time) or per event (time.thread_time)",
        },
        "results": measure(runs),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for result in document["results"]:
        print(f"{result['label']}: {figure(document, result['row'])} µs")
    print(f"results written to {out}")


if __name__ == "__main__":
    main()
