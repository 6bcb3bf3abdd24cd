"""A worker process for the signal tests (``tests/workers/test_signals.py``), and the helpers
that start it and stop it with a signal.

    python -m tests.signal_worker SYSTEM URL QUEUE [--async] [--sleep S] [--shutdown-timeout T]

SYSTEM is beanstalk, gearman, workq or qless; QUEUE the tube, function, job name or queue. The
worker runs one job at a time with the package's ``Worker`` (``AsyncWorker`` with ``--async``)
and its default signal handling. Each handler prints ``start <job>`` when it begins and, after
sleeping S seconds, ``end <job>``; it returns ``b"done"``. When ``run()`` returns, the script
prints ``stats <json>`` (the worker's ``stats``) and ends normally.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]


def _job_id(system: str, job: Any) -> str:
    if system == "beanstalk":
        return str(job.id)
    if system == "gearman":
        return str(job.handle.decode())
    if system == "workq":
        return str(job.job_id)
    return str(job.jid)


def _sync_handler(system: str, sleep: float) -> Any:
    def handle(job: Any) -> bytes | None:
        print("start", _job_id(system, job), flush=True)
        time.sleep(sleep)
        print("end", _job_id(system, job), flush=True)
        return None if system in ("beanstalk", "qless") else b"done"

    return handle


def _async_handler(system: str, sleep: float) -> Any:
    async def handle(job: Any) -> bytes | None:
        print("start", _job_id(system, job), flush=True)
        await anyio.sleep(sleep)
        print("end", _job_id(system, job), flush=True)
        return None if system in ("beanstalk", "qless") else b"done"

    return handle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=["beanstalk", "gearman", "workq", "qless"])
    parser.add_argument("url")
    parser.add_argument("queue")
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--shutdown-timeout", type=float, default=30.0)
    args = parser.parse_args()
    system, url, queue, limit = args.system, args.url, args.queue, args.shutdown_timeout
    worker: Any
    if system == "beanstalk":
        import beanstalk_client as package
    elif system == "gearman":
        import gearman_client as package  # type: ignore[no-redef]
    elif system == "workq":
        import workq_client as package  # type: ignore[no-redef]
    else:
        import qless_client as package  # type: ignore[no-redef]
    cls = package.AsyncWorker if args.use_async else package.Worker
    if system == "beanstalk":
        worker = cls(url, tubes=[queue], shutdown_timeout=limit)
    elif system == "gearman":
        worker = cls(url, shutdown_timeout=limit)
    elif system == "workq":
        worker = cls(url, queue, wait=1, shutdown_timeout=limit)
    else:
        worker = cls(url, queues=[queue], shutdown_timeout=limit)
    if args.use_async:
        handler = _async_handler(system, args.sleep)
        if system == "gearman":
            worker.register(queue, handler)
            anyio.run(worker.run)
        else:
            anyio.run(worker.run, handler)
    else:
        handler = _sync_handler(system, args.sleep)
        if system == "gearman":
            worker.register(queue, handler)
            worker.run()
        else:
            worker.run(handler)
    stats = {k: v for k, v in dataclasses.asdict(worker.stats).items() if k != "late_results"}
    print("stats", json.dumps(stats), flush=True)


# -- for the tests ---------------------------------------------------------------------------


def spawn(system: str, url: str, queue: str, *, use_async: bool = False, sleep: float = 0.5,
          shutdown_timeout: float = 30.0) -> subprocess.Popen[str]:
    """Start the worker process (stdout and stderr piped, as text)."""
    command = [sys.executable, "-m", "tests.signal_worker", system, url, queue,
               "--sleep", str(sleep), "--shutdown-timeout", str(shutdown_timeout)]
    if use_async:
        command.append("--async")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env)


def started(proc: subprocess.Popen[str], limit: float = 20) -> str:
    """The id of the job the worker process started (its ``start <job>`` line)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], limit)
    assert ready, "the worker process started no job"
    line = proc.stdout.readline()
    assert line.startswith("start "), (line, proc.stderr.read() if proc.poll() else "")
    return line.split()[1]


@dataclasses.dataclass
class Ended:
    """How the worker process ended after the signal."""

    returncode: int
    stdout: str
    stderr: str
    stats: dict[str, int]


def stop_with(proc: subprocess.Popen[str], signum: signal.Signals, limit: float = 30) -> Ended:
    """Send ``signum``; wait (at most ``limit`` s) for the process to end; what it said."""
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the worker did not stop within {limit} s: {out!r} {err!r}") from None
    stats: dict[str, int] = {}
    for line in out.splitlines():
        if line.startswith("stats "):
            stats = json.loads(line[len("stats "):])
    return Ended(proc.returncode, out, err, stats)


if __name__ == "__main__":
    main()
