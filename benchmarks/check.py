"""Does a quick run reproduce the published figures? ``scripts/bench --check`` runs this.

    scripts/bench --check                                  # a quick pass over the four protocols
    .venv/bin/python benchmarks/check.py --protocols workq # one protocol
    .venv/bin/python benchmarks/check.py --against DIR     # compare quick JSON already in DIR

It runs each protocol's benchmark with ``--quick`` (fewer operations, 3 interleaved runs per
row; about 4 minutes for the four on 2 cores), writing ``DIR/<protocol>.json`` (default
``benchmarks/results/quick/``), then compares every figure docs/performance.md shows from
``benchmarks/results/*.json`` (each row's median ops/s and client CPU µs/op, and each target's
ratio of medians) with the same figure of the quick run (``report.compare``). A figure is
reproduced when the quick run's median lies within the published [min, max] widened on each
side by ``report.TOLERANCE`` of the published median. It prints a table (figure, published
median (min-max), this run's median (min-max), verdict) and exits 1 when any figure is not
reproduced, 0 otherwise (2: a results file could not be read). ``scaling.json`` is not
checked (a quick scaling run measures other points).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import report  # this folder

HERE = Path(__file__).resolve().parent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--protocols", default=",".join(report.PROTOCOLS),
                        help="comma-separated subset of: " + ", ".join(report.PROTOCOLS))
    parser.add_argument("--published", type=Path, default=report.RESULTS,
                        help="the JSON the page shows (default benchmarks/results)")
    parser.add_argument("--out", type=Path, default=report.RESULTS / "quick",
                        help="where the quick run writes its JSON (default "
                        "benchmarks/results/quick)")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="compare the JSON already in DIR; run nothing")
    parser.add_argument("--runs", type=int, default=None,
                        help="timed runs per row of the quick pass (default 3)")
    args = parser.parse_args(argv)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    unknown = [p for p in protocols if p not in report.PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol(s): {', '.join(unknown)}")
    try:
        published = {p: d for p, d in report.load(args.published).items() if p in protocols}
    except report.ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    folder = args.against
    if folder is None:
        folder = args.out
        wall = time.perf_counter()
        for protocol in protocols:
            command = [sys.executable, str(HERE / f"{protocol}.py"), "--quick",
                       "--out", str(folder / f"{protocol}.json")]
            if args.runs is not None:
                command += ["--runs", str(args.runs)]
            print(f"# {' '.join(command[1:])}", flush=True)
            done = subprocess.run(command, cwd=HERE, stdout=subprocess.DEVNULL)
            if done.returncode != 0:
                print(f"error: benchmarks/{protocol}.py exited with {done.returncode}",
                      file=sys.stderr)
                return 2
        print(f"# quick pass: {time.perf_counter() - wall:.0f} s", flush=True)
    try:
        run = {p: d for p, d in report.load(folder).items() if p in protocols}
    except report.ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verdicts = report.compare(published, run)
    with contextlib.suppress(OSError, AttributeError):
        print(f"# load average now (1, 5, 15 min): "
              f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; the quick JSON keeps each "
              "run's load and the other processes' CPU share")
    print()
    print("\n".join(report.check_table(verdicts)))
    missed = [v for v in verdicts if v.reproduced is False]
    print(f"\n{len(verdicts) - len(missed)} of {len(verdicts)} figures reproduced (the quick "
          f"median within the published [min, max] widened by {report.TOLERANCE:.0%} of the "
          f"published median on each side); not reproduced: {len(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
