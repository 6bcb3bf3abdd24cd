"""What every protocol benchmark here shares: free loopback ports, server processes that die
with the benchmark and report their CPU time, the clock (wall time, this process's CPU time and
the server's, and what the machine was doing: its load average, the other processes' share of
its CPU, the pinning), the round-robin runner (``--runs`` interleaved timed runs per row, every
one on its own fresh server; each figure is their median, with the lowest and highest run), the
command line, and the JSON document every script writes. Imported as ``_harness`` (the scripts
run from this folder).

The JSON document (``benchmarks/results/<protocol>.json``; ``results/quick/`` for ``--quick``)::

    {"protocol": "beanstalk",
     "environment": {"date": "2026-11-23T18:40:00Z", "cpu_count": 2, "cpu_model": ...,
                     "python": ..., "platform": ..., <server versions>, "packages": {...}},
     "config": {"quick": false, "runs": 5, "statistic": ..., "scenarios": {key: title},
                "clients": "all", "wall_time_s": ..., <protocol settings>},
     "results": [{"scenario", "client", "label", "server", "n", "runs",
                  "median_ops_per_s", "min_ops_per_s", "max_ops_per_s",
                  "median_client_cpu_us_per_op", "min_...", "max_...",
                  "median_server_cpu_us_per_op", "min_...", "max_...",
                  "unstable": {"ops_per_s" | "client_cpu_us_per_op": why, ...},
                  "baseline": "scenario/client" | null, "note",
                  "samples": [{"n", "seconds", "ops_per_s", "client_cpu_us_per_op",
                               "server_cpu_us_per_op", "load_1m", "others_cpu_share",
                               "pinning": {"client": [cpu, ...], "server": [...]} | null,
                               ...}]}
                 | {"scenario", "client", "label", "n", "error"}, ...],
     ...}

The figures, ``unstable`` and its why come from ``report.summarize`` (the statistic is
``report.STATISTIC``), so the page and the scripts' own tables agree.

``benchmarks/report.py`` turns these files into the results section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, Generic, Protocol, TypeVar

import report  # this folder; only the standard library

__all__ = [
    "HOST", "QUICK_RUNS", "RESULTS", "RUNS", "STATISTIC", "Bench", "Clock", "HasCpu", "Process",
    "Result", "Reuse",
    "Sample", "Spec", "arguments", "choose", "die_with_parent", "environment", "find_binary",
    "finish", "first_line", "fmt_ops", "fmt_us", "free_port", "markdown_table", "print_result",
    "proc_cpu", "proc_stat", "server_version", "spawn", "stop_process", "terminate", "timed",
    "version_of", "write_document",
]

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"  #: where full runs write; quick runs: RESULTS / "quick"

STATISTIC = report.STATISTIC
RUNS = 5  #: timed runs per row of a full run (``--runs``)
QUICK_RUNS = 3  #: with ``--quick``: the fewest that still give a median


# -- the machine -------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:  # pragma: no cover - runs in the child
    """``preexec_fn`` for a server: on Linux it gets SIGTERM if the benchmark dies without
    cleaning up (SIGKILL)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def find_binary(name: str, package: str | None = None) -> str:
    """The path of the server binary ``name`` (PATH, then /usr/bin and /usr/sbin); exits
    saying which Debian ``package`` (default: ``name``) to install when there is none."""
    for candidate in (shutil.which(name), f"/usr/bin/{name}", f"/usr/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(f"{name} is not installed (apt-get install -y {package or name})")


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) ``pid`` has used so far, all its threads, or None (gone,
    or not Linux). Nanoseconds from ``/proc/<pid>/task/*/schedstat`` where the kernel keeps
    them (a short quick run needs them: ``/proc/<pid>/stat`` counts in 10 ms ticks), else the
    ticks."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        total = 0
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    fields = proc_stat(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM handler: exit through the ``finally`` blocks that stop the servers."""
    raise SystemExit(128 + signum)


# -- the raw sockets the benchmarks compare with ----------------------------------------------

#: Bytes asked of each raw recv (a recv of >= 128 KiB costs an mmap per call).
READ_SIZE = 65536


class RawSocket:
    """A blocking TCP connection with Nagle off and a receive buffer: what each benchmark's raw
    client (prebuilt requests, minimal reply parsing) starts from."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> None:
        data = self.sock.recv(READ_SIZE)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buf += data


# -- server processes --------------------------------------------------------------------------


@dataclass
class Process:
    """A server process listening on ``port`` on loopback."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    cleanup: Callable[[], None] | None = None  #: run after the process is gone
    stderr: IO[bytes] | None = None  #: a temporary file holding what the server wrote there

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server has used so far, or None off Linux."""
        return proc_cpu(self.proc.pid)

    def stderr_tail(self) -> bytes:
        """The last 400 bytes the server wrote to its stderr."""
        if self.stderr is None:
            return b""
        self.stderr.seek(0)
        return self.stderr.read()[-400:]

    def stop(self) -> None:
        try:
            stop_process(self.proc)
        finally:
            if self.stderr is not None:
                self.stderr.close()
            if self.cleanup is not None:
                self.cleanup()


#: Where the timed processes run, once :func:`pin_client` has placed them: the benchmark
#: process on one CPU, the servers (and the processes they need) on the others. Unpinned, a
#: request/reply between two processes costs about a third as much CPU when the scheduler
#: happens to put both on one core (no cross-core wake-up) as when it does not, and it
#: changes its mind between runs: one client's best run could be "together" and another's
#: "apart" (measured: beanstalk put, 11 vs 31 µs of client CPU, runs of one client).
PLACEMENT: dict[str, list[int]] = {}


def pin_client() -> None:
    """Pin this process to its first usable CPU and note the others for the servers (no-op
    with fewer than 2 usable CPUs, or without ``sched_setaffinity``)."""
    if PLACEMENT or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return
    os.sched_setaffinity(0, {cpus[0]})
    PLACEMENT.update(client=[cpus[0]], servers=cpus[1:])


def place_server(pid: int) -> None:
    """Put process ``pid`` on the servers' CPUs (when :func:`pin_client` placed this one)."""
    if PLACEMENT:
        with contextlib.suppress(OSError):  # it may have exited already
            os.sched_setaffinity(pid, PLACEMENT["servers"])


def spawn(
    name: str,
    command: Sequence[str],
    port: int,
    *,
    ready: Callable[[int], bool] | None = None,
    cwd: Path | None = None,
    cleanup: Callable[[], None] | None = None,
    poll: float = 0.02,
    timeout: float = 15.0,
) -> Process:
    """Start ``command`` (a server that will listen on ``HOST:port``) and return once a TCP
    connection to it succeeds and, when given, ``ready(port)`` is true. The server gets SIGTERM
    if this process dies without stopping it (Linux); its stderr goes to a temporary file (never
    a pipe nobody reads). Raises RuntimeError (the server exited, or did not listen within
    ``timeout`` s, with the end of its stderr), after stopping it."""
    # preexec_fn is only safe while this process has a single thread.
    single = sys.platform == "linux" and threading.active_count() == 1
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - Process.stop closes it
    try:
        proc = subprocess.Popen(
            list(command), cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors,
            preexec_fn=die_with_parent if single else None,
        )
    except BaseException:
        errors.close()
        raise
    place_server(proc.pid)
    server = Process(name, proc, port, cleanup, errors)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = server.stderr_tail()
            server.stop()
            raise RuntimeError(f"{name} exited with {proc.returncode}: {tail!r}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            if ready is None or ready(port):
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            tail = server.stderr_tail()
            server.stop()
            raise RuntimeError(f"{name} did not start listening on {HOST}:{port}: {tail!r}")
        time.sleep(poll)


# -- measuring ---------------------------------------------------------------------------------


class HasCpu(Protocol):
    def cpu_seconds(self) -> float | None: ...


@dataclass
class Sample:
    """One timed run: ``n`` operations (jobs) in ``seconds``."""

    n: int
    seconds: float
    client_cpu: float  #: this process's CPU seconds over the run (all threads)
    server_cpu: float | None  #: the server's CPU seconds over the run, None if unknown
    extra: dict[str, float] = field(default_factory=dict)
    #: What the machine was doing (:class:`Clock`): ``load_1m``, ``others_cpu_share`` and
    #: ``pinning``; empty when not recorded.
    machine: dict[str, Any] = field(default_factory=dict)

    @property
    def ops(self) -> float:
        return self.n / self.seconds

    @property
    def client_us(self) -> float:
        return self.client_cpu / self.n * 1e6

    @property
    def server_us(self) -> float | None:
        return None if self.server_cpu is None else self.server_cpu / self.n * 1e6

    def to_json(self) -> dict[str, Any]:
        server_us = self.server_us
        return {
            "n": self.n,
            "seconds": round(self.seconds, 6),
            "ops_per_s": round(self.ops, 1),
            "client_cpu_us_per_op": round(self.client_us, 2),
            "server_cpu_us_per_op": None if server_us is None else round(server_us, 2),
            **self.machine,
            **self.extra,
        }


def machine_busy() -> float | None:
    """CPU seconds every process on the machine has used since boot (all CPUs; user, nice,
    system, irq, softirq and steal from ``/proc/stat``), or None off Linux."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def pinning(server: object) -> dict[str, list[int]] | None:
    """The CPUs this process and the server's process (when it has one) may run on now."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    out = {"client": sorted(os.sched_getaffinity(0))}
    proc = getattr(server, "proc", None)
    pid = getattr(proc, "pid", None)
    if isinstance(pid, int):
        with contextlib.suppress(OSError):
            out["server"] = sorted(os.sched_getaffinity(pid))
    return out


def machine_during(busy_before: float | None, ours: float, seconds: float,
                   server: object) -> dict[str, Any]:
    """What the machine was doing over a timed window that just ended, ``seconds`` long, that
    began when :func:`machine_busy` was ``busy_before`` and in which the measured processes
    used ``ours`` CPU seconds: its 1-minute load average now, the share of all its CPUs the
    other processes used (when ``/proc/stat`` is there), and the pinning."""
    busy = machine_busy()
    machine: dict[str, Any] = {}
    with contextlib.suppress(OSError, AttributeError):
        machine["load_1m"] = round(os.getloadavg()[0], 2)
    if busy is not None and busy_before is not None:
        wall = seconds * (os.cpu_count() or 1)
        if wall > 0:
            machine["others_cpu_share"] = round(max(0.0, busy - busy_before - ours) / wall, 3)
    machine["pinning"] = pinning(server)
    return machine


class Clock:
    """Wall time, this process's CPU time and the server's over one timed window, and what the
    machine was doing meanwhile: its 1-minute load average when the window closed, the share
    of all its CPUs that other processes (neither this one nor the server) used during it,
    and where this process and the server were pinned."""

    def __init__(self, server: HasCpu | None) -> None:
        self.server = server
        self._wall = self._cpu = self._wall_end = self._cpu_end = 0.0
        self._srv: float | None = None
        self._srv_end: float | None = None
        self._busy: float | None = None
        self._machine: dict[str, Any] = {}

    def _server_cpu(self) -> float | None:
        return None if self.server is None else self.server.cpu_seconds()

    def start(self) -> None:
        self._busy = machine_busy()
        self._srv = self._server_cpu()
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    def stop(self) -> None:
        self._wall_end = time.perf_counter()
        self._cpu_end = time.process_time()
        self._srv_end = self._server_cpu()
        ours = (self._cpu_end - self._cpu) + (
            0.0 if self._srv is None or self._srv_end is None else self._srv_end - self._srv)
        self._machine = machine_during(self._busy, ours, self._wall_end - self._wall,
                                       self.server)

    @property
    def stopped_at(self) -> float:
        """``time.perf_counter()`` when :meth:`stop` was called."""
        return self._wall_end

    def sample(self, n: int, **extra: float) -> Sample:
        server_cpu = (
            None if self._srv is None or self._srv_end is None else self._srv_end - self._srv
        )
        return Sample(n, self._wall_end - self._wall, self._cpu_end - self._cpu, server_cpu,
                      dict(extra), dict(self._machine))


def timed(server: HasCpu | None, n: int, run: Callable[[], object]) -> Sample:
    """Run ``run()`` (``n`` operations) under a :class:`Clock`."""
    clock = Clock(server)
    clock.start()
    run()
    clock.stop()
    return clock.sample(n)


# -- results -----------------------------------------------------------------------------------


@dataclass
class Result:
    """Every timed run of one client in one scenario, or why it could not run."""

    scenario: str
    client: str
    label: str
    n: int
    samples: list[Sample]
    error: str = ""
    note: str = ""
    server: str = ""  #: which server it ran against, when a script has several
    baseline: tuple[str, str] | None = None  #: the (scenario, client) it is compared with

    @property
    def ok(self) -> bool:
        return bool(self.samples)

    def summary(self) -> dict[str, Any]:
        """The figures of the runs (``report.summarize``): ``runs``, the median, min and max of
        ops/s, client and server CPU µs/op, and ``unstable`` (figure -> why)."""
        return report.summarize([s.to_json() for s in self.samples])

    @property
    def median(self) -> float:
        """The median ops/s of the runs."""
        return statistics.median(s.ops for s in self.samples)

    @property
    def client_us(self) -> float:
        """The median client CPU µs per operation of the runs."""
        return statistics.median(s.client_us for s in self.samples)

    @property
    def server_us(self) -> float | None:
        values = [s.server_us for s in self.samples if s.server_us is not None]
        return statistics.median(values) if values else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scenario": self.scenario, "client": self.client,
                               "label": self.label, "n": self.n}
        if self.server:
            out["server"] = self.server
        if not self.ok:
            return {**out, "error": self.error}
        return {
            **out,
            **self.summary(),
            "baseline": None if self.baseline is None else "/".join(self.baseline),
            "note": self.note,
            "samples": [s.to_json() for s in self.samples],
        }


M = TypeVar("M")


@dataclass(frozen=True)
class Spec(Generic[M]):
    """One client in one scenario; ``measure`` is the script's own timed run."""

    client: str  #: short key (for --clients and the JSON)
    label: str
    measure: M
    n: int
    prefill: int | None = None  #: None: no prefill; else put n + this many jobs first
    server: str = ""  #: which server, when a script has several ("" for the only one)
    baseline: tuple[str, str] | None = None  #: (scenario, client) to compare with
    may_fail: bool = False  #: a failure is recorded (the row says why), not raised


@dataclass(frozen=True)
class Reuse(Generic[M]):
    """A row that repeats another scenario's result (the same runs, compared here)."""

    client: str
    label: str
    source: tuple[str, str]
    fallback: Spec[M]  #: measured here if the source row did not run


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


class Bench(Generic[M]):
    """Runs a scenario's rows round-robin: timed run 1 of every client, then run 2 of every
    client, and so on (``runs`` rounds), so that drift on a shared machine spreads over all
    clients alike and each row's median is of runs spread over the same span of time.
    ``once(spec)`` is one timed run on a fresh server (the script starts and stops it);
    ``explain(spec, error)`` says why a ``may_fail`` row failed. ``pin=False`` leaves this
    process where it is (:func:`pin_client` otherwise: the Spark benchmark's ``local[2]``
    wants both CPUs)."""

    def __init__(
        self,
        runs: int,
        once: Callable[[Spec[M]], Sample],
        explain: Callable[[Spec[M], Exception], str] | None = None,
        *,
        pin: bool = True,
    ) -> None:
        if pin:
            pin_client()
        self.runs = runs
        self.once = once
        self.explain = explain or (lambda spec, error: first_line(error))
        self.results: dict[tuple[str, str], Result] = {}

    def run_specs(self, scenario: str, specs: Sequence[Spec[M]]) -> None:
        samples: dict[str, list[Sample]] = {spec.client: [] for spec in specs}
        errors: dict[str, str] = {}
        for _ in range(self.runs):
            for spec in specs:
                if spec.client in errors:
                    continue
                try:
                    samples[spec.client].append(self.once(spec))
                except Exception as exc:
                    if not spec.may_fail:
                        raise
                    errors[spec.client] = self.explain(spec, exc)
        for spec in specs:
            self.results[(scenario, spec.client)] = Result(
                scenario, spec.client, spec.label, spec.n, samples[spec.client],
                errors.get(spec.client, ""), "", spec.server, spec.baseline)

    def run_scenario(self, scenario: str, rows: Sequence[Spec[M] | Reuse[M]]) -> list[Result]:
        self.run_specs(scenario, [row for row in rows if isinstance(row, Spec)])
        out: list[Result] = []
        for row in rows:
            if isinstance(row, Reuse):
                if row.source not in self.results:  # its own scenario did not run
                    self.run_specs(row.source[0], [row.fallback])
                source = self.results[row.source]
                self.results[(scenario, row.client)] = Result(
                    scenario, row.client, row.label, source.n, source.samples, source.error,
                    f"same runs as {'/'.join(row.source)}", source.server)
            out.append(self.results[(scenario, row.client)])
        return out

    def run(self, plan: Mapping[str, Sequence[Spec[M] | Reuse[M]]], titles: Mapping[str, str],
            scenarios: Iterable[str], clients: set[str]) -> list[Result]:
        """Every chosen scenario of ``plan`` (rows of the chosen ``clients``; all when empty),
        printing each result as it comes."""
        order: list[Result] = []
        for scenario in scenarios:
            print(f"## {scenario}: {titles[scenario]}", flush=True)
            rows = [row for row in plan[scenario] if not clients or row.client in clients]
            for result in self.run_scenario(scenario, rows):
                order.append(result)
                print_result(result)
        return order


# -- printing ----------------------------------------------------------------------------------


def fmt_ops(ops: float) -> str:
    return f"{ops:,.0f}"


def fmt_us(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _spread(result: Result, key: str, fmt: Callable[[float], str]) -> str:
    """``median (min-max)`` of ``key`` over the runs, marked when unstable."""
    summary = result.summary()
    text = fmt(summary[f"median_{key}"])
    if summary["runs"] > 1:
        text += f" ({fmt(summary[f'min_{key}'])}-{fmt(summary[f'max_{key}'])})"
    return text + (" UNSTABLE" if key in summary["unstable"] else "")


def print_result(result: Result) -> None:
    if not result.ok:
        print(f"  {result.label:<46} {result.error}", flush=True)
        return
    tails = [s.extra["stop_tail_s"] for s in result.samples if "stop_tail_s" in s.extra]
    tail = f"  stop tail <= {max(tails):.2f} s (untimed)" if tails else ""
    print(f"  {result.label:<46} {_spread(result, 'ops_per_s', fmt_ops)} ops/s; CPU µs/op "
          f"client {_spread(result, 'client_cpu_us_per_op', fmt_us)}, server "
          f"{fmt_us(result.server_us)}{tail}", flush=True)
    for key, why in result.summary()["unstable"].items():
        print(f"    unstable {key}: {why}", flush=True)


def markdown_table(results: Sequence[Result]) -> str:
    """Every result: the median (min-max) of ops/s and of CPU per operation, and the ratio of
    its medians to its baseline row's."""
    by_key = {(r.scenario, r.client): r for r in results}
    lines = [
        "| scenario | client | N | ops/s, median (min-max) | client CPU µs/op, median (min-max) "
        "| server CPU µs/op | vs baseline, ratio of medians (ops/s, CPU) |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for r in results:
        label = r.label + (" *" if r.note else "")
        if not r.ok:
            lines.append(f"| {r.scenario} | {label}: {r.error} | {r.n:,} | - | - | - | |")
            continue
        versus = ""
        base = by_key.get(r.baseline) if r.baseline else None
        if base is not None and base.ok:
            versus = (f"{r.median / base.median:.2f}x, {r.client_us / base.client_us:.2f}x "
                      f"{base.client}")
        lines.append(
            f"| {r.scenario} | {label} | {r.n:,} | {_spread(r, 'ops_per_s', fmt_ops)} "
            f"| {_spread(r, 'client_cpu_us_per_op', fmt_us)} | {fmt_us(r.server_us)} "
            f"| {versus} |")
    return "\n".join(lines)


# -- command line, environment, the document ---------------------------------------------------


def run_arguments(protocol: str, description: str,
                  quick: str = "small counts") -> argparse.ArgumentParser:
    """``--quick``, ``--out`` and ``--runs``: the options every benchmark takes (``quick``
    says what ``--quick`` changes besides the runs); :func:`runs_and_out` reads them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help=f"{quick} and {QUICK_RUNS} timed runs per row: a smoke run; "
                        "writes to "
                        f"{(RESULTS / 'quick').relative_to(ROOT)}/{protocol}.json unless --out")
    parser.add_argument("--out", "--json", dest="out", type=Path, default=None, metavar="PATH",
                        help=f"JSON results file (default "
                        f"{RESULTS.relative_to(ROOT)}/{protocol}.json)")
    parser.add_argument("--runs", "--repeats", dest="runs", type=int, default=None,
                        help=f"interleaved timed runs per row; each figure is their median "
                        f"(default {RUNS}; {QUICK_RUNS} with --quick)")
    return parser


def runs_and_out(args: argparse.Namespace, protocol: str) -> tuple[int, Path]:
    """The runs per row and the output path :func:`run_arguments`' options ask for; exits
    with status 2 and a message on a run count below 1."""
    runs: int = args.runs if args.runs is not None else (QUICK_RUNS if args.quick else RUNS)
    if runs < 1:
        print("--runs must be >= 1", file=sys.stderr)
        raise SystemExit(2)
    out: Path = args.out or (RESULTS / "quick" if args.quick else RESULTS) / f"{protocol}.json"
    return runs, out


def arguments(protocol: str, description: str, scenarios: Mapping[str, str]
              ) -> argparse.ArgumentParser:
    """The options every protocol benchmark takes: :func:`run_arguments`' and the scenarios
    and clients to keep."""
    parser = run_arguments(protocol, description)
    parser.add_argument("--scenarios", default=",".join(scenarios),
                        help="comma-separated subset of: " + ", ".join(scenarios))
    parser.add_argument("--clients", default="",
                        help="comma-separated client keys to keep (default: all)")
    return parser


def choose(args: argparse.Namespace, protocol: str, scenarios: Mapping[str, str]
           ) -> tuple[list[str], set[str], int, Path]:
    """The scenarios, client keys, runs per row and output path the options ask for; exits
    with status 2 and a message on an unknown scenario or a run count below 1."""
    chosen = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in scenarios]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(scenarios)}",
              file=sys.stderr)
        raise SystemExit(2)
    clients = {c.strip() for c in args.clients.split(",") if c.strip()}
    runs, out = runs_and_out(args, protocol)
    return chosen, clients, runs, out


def version_of(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def server_version(command: Sequence[str]) -> str:
    """The first line ``command`` (e.g. ``beanstalkd -v``) prints, or "?"."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "?"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else "?"


def environment(servers: Mapping[str, str], packages: Sequence[str]) -> dict[str, Any]:
    """The machine, the date (UTC), the server versions and the package versions."""
    cpu_model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return {
        "date": now.isoformat().replace("+00:00", "Z"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": cpu_model,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        **servers,
        "packages": {d: version_of(d) for d in ("jobwire", "anyio", *packages)},
    }


def write_document(
    out: Path,
    protocol: str,
    env: Mapping[str, Any],
    config: Mapping[str, Any],
    results: Sequence[Result],
    **extra: Any,
) -> dict[str, Any]:
    """Write the results document (the shape in this module's docstring) and return it."""
    document = {
        "protocol": protocol,
        "environment": {**env, **({"placement": dict(PLACEMENT)} if PLACEMENT else {})},
        "config": {"statistic": STATISTIC, **config},
        "results": [r.to_json() for r in results],
        **extra,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"results written to {out}")
    return document


def finish(protocol: str, document: Mapping[str, Any], results: Sequence[Result]) -> None:
    """Print the table of every result and this protocol's rows of issue 22's targets."""
    print()
    print(markdown_table(results))
    if any(r.note for r in results):
        print("\n\\* the same runs as the named scenario's row, repeated for comparison")
    lines = report.target_lines({protocol: document}, only=protocol)
    if lines:
        print("\nissue 22 targets (ratios of medians):")
        for line in lines:
            print(f"  {line}")
