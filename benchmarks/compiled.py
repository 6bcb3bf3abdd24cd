"""The pure-Python package, the compiled (mypyc) build and greenstalk side by side: client CPU
per operation of the sync beanstalk ``put`` and ``reserve`` + ``delete``, one command at a time,
and of the AsyncWorker's no-op pool (asyncio, concurrency 64), against a real ``beanstalkd``.

    .venv/bin/python benchmarks/compiled.py                  # builds into a temporary dir
    .venv/bin/python benchmarks/compiled.py --build DIR      # reuse (or make) a build in DIR
    .venv/bin/python benchmarks/compiled.py --quick --out /tmp/c.json

How it measures: every timed run is a fresh process (``python -P`` with ``PYTHONPATH`` the
source tree or the build, so each imports the build it names; it reports which it got), on a
fresh ``beanstalkd`` with a fresh tube, pinned as ``benchmarks/_harness`` pins (client on the
first CPU, server on the others). The process runs the same client functions as
``benchmarks/beanstalk.py`` (imported, not copied): an untimed warm-up run, then the timed one.
Runs are interleaved (run 1 of every client, then run 2 ...); each figure is the median of the
runs with the lowest and highest. Then, with valgrind, each sync scenario's user-space
instructions per operation (callgrind; two runs of different sizes, the difference over the
difference in operations), which do not move with the machine's load. Writes
``benchmarks/results/compiled.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))  # appended: PYTHONPATH (the build) stays first

CLIENTS = ("pure", "compiled", "greenstalk")
SCENARIOS = {
    "put": "put, one at a time (sync Client)",
    "reserve_delete": "reserve + delete, one job at a time (sync Client; tube pre-filled)",
    "worker_noop": "AsyncWorker (asyncio), concurrency 64, no-op handler",
}
CONCURRENCY = 64
WARM = 500  #: operations of the untimed warm-up run


class _Server:
    """The parent's beanstalkd as the child sees it: its port, and its CPU time from /proc."""

    def __init__(self, port: int, pid: int) -> None:
        self.port = port
        self.pid = pid

    def cpu_seconds(self) -> float | None:
        from _harness import proc_cpu

        return proc_cpu(self.pid)


def child(scenario: str, client: str, port: int, pid: int, tube: str, n: int) -> None:
    """One timed run in this process; prints the sample (and where jobwire came from) as JSON."""
    import beanstalk as bench

    import jobwire._core

    srv: Any = _Server(port, pid)
    if scenario == "put":
        measure = bench.put_greenstalk if client == "greenstalk" else bench.put_jobwire_sync
        measure(srv, tube, WARM)
    elif scenario == "reserve_delete":
        measure = bench.rd_greenstalk if client == "greenstalk" else bench.rd_jobwire_sync
        measure(srv, tube, WARM)
    else:
        def measure(srv: Any, tube: str, n: int) -> Any:
            return bench.async_worker("asyncio", CONCURRENCY, 0.0, srv, tube, n)
    sample = measure(srv, tube, n)
    print(json.dumps({"sample": sample.to_json(), "core": jobwire._core.__file__}))


def _run_one(scenario: str, client: str, build: Path, n: int,
             wrapper: tuple[str, ...] = ()) -> dict[str, Any]:
    """One run of ``client`` in a fresh process (under ``wrapper``, e.g. valgrind); its JSON
    line, plus ``stderr``."""
    import beanstalk as bench

    server = bench.start_server("beanstalkd")
    try:
        tube = f"c-{uuid.uuid4().hex[:12]}"
        if scenario == "reserve_delete":
            bench.prefill(server.port, tube, n + WARM)
        elif scenario == "worker_noop":
            bench.prefill(server.port, tube, n + 2 * CONCURRENCY)
        path = str(build) if client == "compiled" else str(ROOT)
        env = dict(os.environ, PYTHONPATH=path)
        out = subprocess.run(
            [*wrapper, sys.executable, "-P", __file__, "--child", scenario, client,
             str(server.port), str(server.proc.pid), tube, str(n)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
        )
    finally:
        server.stop()
    if out.returncode != 0:
        raise RuntimeError(f"{client} {scenario} run failed ({out.returncode}): "
                           f"{out.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"] = out.stderr
    compiled = result["core"].endswith(".so")
    if compiled != (client == "compiled"):
        raise RuntimeError(f"{client} run imported {result['core']}")
    return result


#: Instructions of the client process, counted by callgrind (user space only: a syscall
#: counts as the few instructions that enter it).
CALLGRIND = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")
_COLLECTED = re.compile(r"Collected\s*:\s*([0-9,]+)")


def instructions_per_op(scenario: str, client: str, build: Path, small: int,
                        large: int) -> float:
    """User-space instructions per operation: the difference of two runs (``small`` and
    ``large`` operations) under callgrind, over the difference in operations (what the process
    does besides the timed loop cancels out). Deterministic to about 0.1%."""
    counts = []
    for n in (small, large):
        found = _COLLECTED.search(_run_one(scenario, client, build, n, CALLGRIND)["stderr"])
        if found is None:
            raise RuntimeError("callgrind reported no instruction count")
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (large - small)


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, help="the compiled build's directory "
                        "(built there when it holds none; default: a temporary directory)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 runs, small counts")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--out", type=Path, default=HERE / "results" / "compiled.json")
    parser.add_argument("--no-instructions", action="store_true",
                        help="skip the callgrind instruction counts (about 2 minutes)")
    parser.add_argument("--child", nargs=6, metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        scenario, client, port, pid, tube, n = args.child
        child(scenario, client, int(port), int(pid), tube, int(n))
        return

    from _harness import environment, find_binary, pin_client, server_version

    sys.path.insert(0, str(ROOT / "scripts"))
    import build_compiled

    pin_client()
    with tempfile.TemporaryDirectory(prefix="jobwire-compiled-") as tmp:
        build = args.build or Path(tmp)
        try:
            build_compiled.check_extensions(build)
        except (subprocess.CalledProcessError, RuntimeError):
            print(f"building the compiled build in {build} ...", file=sys.stderr)
            build_compiled.build(build)
        runs = 3 if args.quick else args.runs
        counts = {"put": 4_000, "reserve_delete": 4_000, "worker_noop": 4_000} if args.quick \
            else {"put": 20_000, "reserve_delete": 20_000, "worker_noop": 20_000}
        scenarios = [s for s in args.scenarios.split(",") if s]
        samples: dict[str, dict[str, list[dict[str, Any]]]] = {
            s: {c: [] for c in CLIENTS if not (s == "worker_noop" and c == "greenstalk")}
            for s in scenarios}
        for run in range(runs):
            for scenario in scenarios:
                for client in samples[scenario]:
                    result = _run_one(scenario, client, build, counts[scenario])
                    samples[scenario][client].append(result["sample"])
                    print(f"run {run + 1}/{runs} {scenario:15} {client:10} "
                          f"{result['sample']['client_cpu_us_per_op']:7.2f} µs/op client CPU",
                          file=sys.stderr)
        instructions: dict[str, dict[str, float]] = {}
        if not args.no_instructions and shutil.which("valgrind"):
            for scenario in scenarios:
                if scenario == "worker_noop":  # its path depends on timing: not deterministic
                    continue
                instructions[scenario] = {}
                for client in samples[scenario]:
                    count = instructions_per_op(scenario, client, build, 1_000, 3_000)
                    instructions[scenario][client] = round(count)
                    print(f"instructions {scenario:15} {client:10} {count:9.0f} /op",
                          file=sys.stderr)

    document: dict[str, Any] = {
        "benchmark": "compiled",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": {"runs": runs, "counts": counts, "warm_up": WARM, "concurrency": CONCURRENCY,
                   "statistic": "median of the runs, with min and max",
                   "compiled": list(build_compiled.COMPILED)},
        "environment": environment(
            {"beanstalkd": server_version([find_binary("beanstalkd"), "-v"])},
            ["greenstalk", "mypy"]),
        "scenarios": {},
    }
    for scenario, by_client in samples.items():
        rows: dict[str, Any] = {}
        for client, runs_of in by_client.items():
            client_us = [s["client_cpu_us_per_op"] for s in runs_of]
            ops = [s["ops_per_s"] for s in runs_of]
            rows[client] = {"client_cpu_us_per_op": _summary(client_us),
                            "ops_per_s": _summary(ops), "runs": runs_of}
            if client in instructions.get(scenario, {}):
                rows[client]["instructions_per_op"] = instructions[scenario][client]
        base = rows.get("greenstalk") or rows["pure"]
        base_name = "greenstalk" if "greenstalk" in rows else "pure"
        for row in rows.values():
            row[f"client_cpu_vs_{base_name}"] = round(
                row["client_cpu_us_per_op"]["median"]
                / base["client_cpu_us_per_op"]["median"], 2)
            if "instructions_per_op" in row:
                row[f"instructions_vs_{base_name}"] = round(
                    row["instructions_per_op"] / base["instructions_per_op"], 2)
        document["scenarios"][scenario] = {"title": SCENARIOS[scenario], "clients": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(table(document))
    print(f"wrote {args.out}", file=sys.stderr)


def table(document: dict[str, Any]) -> str:
    """The results as a markdown table: client CPU µs/op, median (min-max), and the ratio."""
    lines = ["| scenario | build | client CPU µs/op, median (min-max) | ops/s, median | "
             "CPU ratio | instructions/op (ratio) |", "|---|---|---|---|---|---|"]
    for scenario, entry in document["scenarios"].items():
        for client, row in entry["clients"].items():
            cpu = row["client_cpu_us_per_op"]
            ratio = next(f"{v:.2f}x {k.removeprefix('client_cpu_vs_')}"
                         for k, v in row.items() if k.startswith("client_cpu_vs_"))
            count = row.get("instructions_per_op")
            counted = "" if count is None else next(
                f"{count:,} ({v:.2f}x)" for k, v in row.items() if k.startswith("instructions_vs_"))
            lines.append(f"| {scenario} | {client} | {cpu['median']:.2f} "
                         f"({cpu['min']:.2f}-{cpu['max']:.2f}) | "
                         f"{row['ops_per_s']['median']:,.0f} | {ratio} | {counted} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
