"""Soak: mixed producers and workers on every bundled server at once, for minutes, reporting
throughput, errors and memory over time.

    .venv/bin/python benchmarks/soak.py --minutes 5
    .venv/bin/python benchmarks/soak.py --minutes 0.5 --interval 5     # a smoke run

One process per server, each on a free loopback port: the bundled beanstalk, Gearman and Workq
servers, and a redis-server (no persistence) running our qless Lua. In this process, on one
asyncio loop, each system gets ``--producers`` producer tasks (one async client each, bodies of
random size 16 B - 8 KiB) and one async worker (``--concurrency`` jobs at once on one
connection) whose handler checks the body it gets and sometimes raises (1 in 50: the job fails
or is released, so the error paths run too). Producers stop adding while a system's backlog is
over ``--backlog`` jobs, so the servers' memory should stay flat once the retention windows
are full: a Workq job and its result live for their TTL (60 s here), qless keeps the last 1,000
completed jobs; past that, a growing RSS is a leak.

Every ``--interval`` seconds a line per system: jobs put and handled per second in the
interval, errors (client exceptions other than the handler's deliberate failures), backlog,
the server's RSS (``/proc/<pid>/status`` VmRSS). The end prints the RSS at the first sample, the
last sample and the peak, and writes everything to ``benchmarks/results/soak.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from _harness import free_port

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import beanstalk_client  # noqa: E402
import gearman_client  # noqa: E402
import qless_client  # noqa: E402
import workq_client  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "soak.json"
HOST = "127.0.0.1"
FAIL_ONE_IN = 50


class Deliberate(Exception):
    """The handler's planned failure (1 in FAIL_ONE_IN jobs): not counted as an error."""


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@dataclass
class System:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    #: A failed job comes back (beanstalk releases it); elsewhere a failure is final.
    redelivers: bool = False
    put: int = 0
    handled: int = 0
    failed_on_purpose: int = 0
    errors: int = 0
    last_error: str = ""
    samples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def backlog(self) -> int:
        """Jobs put and not yet settled (a redelivered failure is handled twice)."""
        return self.put - self.handled + (self.failed_on_purpose if self.redelivers else 0)

    def error(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"


def _wait_listening(proc: subprocess.Popen[bytes], port: int, what: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{what} did not start listening")


def start_servers(folder: str) -> list[System]:
    systems = []
    python = sys.executable
    commands: dict[str, Callable[[int], list[str]]] = {
        "beanstalk": lambda p: [python, "-m", "beanstalk_client.server", "-l", HOST, "-p", str(p)],
        "gearman": lambda p: [python, "-m", "gearman_client.server", "-L", HOST, "-p", str(p)],
        "workq": lambda p: [python, "-m", "workq_client.server", "-listen", f"{HOST}:{p}"],
        "qless": lambda p: [shutil.which("redis-server") or "redis-server", "--port", str(p),
                            "--bind", HOST, "--save", "", "--appendonly", "no", "--dir", folder],
    }
    schemes = {"beanstalk": "beanstalk", "gearman": "gearman", "workq": "workq", "qless": "redis"}
    for name, command in commands.items():
        port = free_port()
        proc = subprocess.Popen(command(port), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        _wait_listening(proc, port, name)
        systems.append(System(name, proc, f"{schemes[name]}://{HOST}:{port}",
                              redelivers=name == "beanstalk"))
    return systems


def body(rng: random.Random, serial: int) -> bytes:
    """A body the handler can check: its serial, its length, then filler."""
    size = int(16 * 2 ** rng.uniform(0, 9))  # 16 B .. 8 KiB, log-uniform
    head = b"%d:%d:" % (serial, size)
    return head + b"x" * max(0, size - len(head))


def check(data: bytes) -> bool:
    serial, size, _ = data.split(b":", 2)
    return len(data) == max(int(size), len(serial) + len(size) + 2) and int(serial) >= 0


# -- per system: a producer and a handler -------------------------------------------------------

Producer = Callable[[System, random.Random, int], Awaitable[None]]


async def _produce(system: System, args: argparse.Namespace, stop: anyio.Event,
                   open_put: Callable[[], Any], seed: int) -> None:
    """One producer task: connect with ``open_put()`` (an async context manager giving a
    ``put(body)`` coroutine function), then put while the backlog allows."""
    rng = random.Random(seed)
    serial = seed * 10_000_000
    while not stop.is_set():
        try:
            async with open_put() as put:
                while not stop.is_set():
                    if system.backlog > args.backlog:
                        await anyio.sleep(0.01)
                        continue
                    serial += 1
                    await put(body(rng, serial))
                    system.put += 1
        except Exception as exc:  # every failure is counted; the loop goes on
            system.error(exc)
            await anyio.sleep(0.2)


def _handled(system: System, data: bytes) -> None:
    if not check(data):
        system.error(ValueError(f"corrupt body {data[:40]!r}"))
    system.handled += 1
    if random.randrange(FAIL_ONE_IN) == 0:
        system.failed_on_purpose += 1
        raise Deliberate("planned failure")


class _Ctx:
    """An async context manager around a client whose ``put`` is ``put``."""

    def __init__(self, client: Any, put: Callable[[Any, bytes], Awaitable[Any]],
                 setup: Callable[[Any], Awaitable[Any]] | None = None) -> None:
        self.client, self._put, self._setup = client, put, setup

    async def __aenter__(self) -> Callable[[bytes], Awaitable[Any]]:
        await self.client.__aenter__()
        if self._setup is not None:
            await self._setup(self.client)
        return lambda data: self._put(self.client, data)

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(*exc)


async def run_beanstalk(system: System, args: argparse.Namespace, stop: anyio.Event) -> None:
    tube = "soak"

    def open_put() -> _Ctx:
        return _Ctx(beanstalk_client.AsyncClient(system.url),
                    lambda c, data: c.put(data, ttr=30), lambda c: c.use(tube))

    async def handle(job: beanstalk_client.Job) -> None:
        _handled(system, job.body)

    worker = beanstalk_client.AsyncWorker(
        system.url, tubes=[tube], concurrency=args.concurrency,
        retry=beanstalk_client.RetryPolicy(base_delay=0, bury_after=None),
    )
    await _run(system, args, stop, open_put, lambda: worker.run(handle, handle_signals=False),
               worker.stop)


async def run_gearman(system: System, args: argparse.Namespace, stop: anyio.Event) -> None:
    function = "soak"

    def open_put() -> _Ctx:
        return _Ctx(gearman_client.AsyncClient(system.url),
                    lambda c, data: c.submit_background(function, data))

    async def handle(job: gearman_client.AsyncJob) -> bytes:
        _handled(system, job.data)
        return b"ok"

    worker = gearman_client.AsyncWorker(system.url, concurrency=args.concurrency)
    worker.register(function, handle)
    await _run(system, args, stop, open_put, lambda: worker.run(handle_signals=False),
               worker.stop)


async def run_workq(system: System, args: argparse.Namespace, stop: anyio.Event) -> None:
    name = "soak"

    def open_put() -> _Ctx:
        return _Ctx(workq_client.AsyncClient(system.url),
                    lambda c, data: c.add(name, data, ttr=30, ttl=60))

    async def handle(job: workq_client.JobContext) -> bytes:
        _handled(system, job.payload)
        return b"ok"

    worker = workq_client.AsyncWorker(system.url, name, concurrency=args.concurrency,
                                      wait=1)
    await _run(system, args, stop, open_put, lambda: worker.run(handle, handle_signals=False),
               worker.stop)


async def run_qless(system: System, args: argparse.Namespace, stop: anyio.Event) -> None:
    queue = "soak"
    async with qless_client.AsyncClient(system.url) as setup:
        await setup.config_set("jobs-history-count", 1000)  # completed jobs are pruned

    def open_put() -> _Ctx:
        return _Ctx(qless_client.AsyncClient(system.url),
                    lambda c, data: c.queue(queue).put("Soak", data.decode()))

    async def handle(job: qless_client.AsyncJob) -> None:
        _handled(system, job.data.encode())

    worker = qless_client.AsyncWorker(system.url, queues=[queue], concurrency=args.concurrency,
                                      idle_wait=0.05)
    await _run(system, args, stop, open_put, lambda: worker.run(handle, handle_signals=False),
               worker.stop)


async def _run(system: System, args: argparse.Namespace, stop: anyio.Event,
               open_put: Callable[[], Any], work: Callable[[], Awaitable[None]],
               stop_worker: Callable[[], None]) -> None:
    async with anyio.create_task_group() as tg:
        for i in range(args.producers):
            tg.start_soon(_produce, system, args, stop, open_put, i + 1)

        async def worker() -> None:
            while not stop.is_set():
                try:
                    await work()
                except Exception as exc:  # counted; the worker is started again
                    system.error(exc)
                    await anyio.sleep(0.2)

        tg.start_soon(worker)
        await stop.wait()
        stop_worker()


RUNNERS = {"beanstalk": run_beanstalk, "gearman": run_gearman, "workq": run_workq,
           "qless": run_qless}


async def soak(systems: list[System], args: argparse.Namespace) -> None:
    stop = anyio.Event()
    began = time.monotonic()

    async def sampler() -> None:
        last = {s.name: (s.put, s.handled) for s in systems}
        while not stop.is_set():
            await anyio.sleep(args.interval)
            elapsed = time.monotonic() - began
            for s in systems:
                put, handled = last[s.name]
                sample = {
                    "t": round(elapsed, 1),
                    "put_per_s": round((s.put - put) / args.interval),
                    "handled_per_s": round((s.handled - handled) / args.interval),
                    "errors": s.errors, "backlog": s.backlog,
                    "server_rss_kib": rss_kib(s.proc.pid),
                    "client_rss_kib": rss_kib(os.getpid()),
                }
                s.samples.append(sample)
                last[s.name] = (s.put, s.handled)
                print(f"{elapsed:7.1f}s {s.name:9} put {sample['put_per_s']:6}/s handled "
                      f"{sample['handled_per_s']:6}/s backlog {s.backlog:5} errors {s.errors:4} "
                      f"server RSS {sample['server_rss_kib'] / 1024:7.1f} MiB", flush=True)
            if elapsed >= args.minutes * 60:
                stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(sampler)
        for s in systems:
            tg.start_soon(RUNNERS[s.name], s, args, stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--producers", type=int, default=2, help="producer tasks per system")
    parser.add_argument("--concurrency", type=int, default=16, help="jobs at once per worker")
    parser.add_argument("--backlog", type=int, default=2000,
                        help="producers pause while a system has more jobs waiting")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    # The handlers' planned failures would log a traceback each.
    logging.basicConfig(level=logging.WARNING)
    for package in ("beanstalk_client", "gearman_client", "workq_client", "qless_client"):
        logging.getLogger(package).setLevel(logging.CRITICAL)
    folder = tempfile.mkdtemp(prefix="jobwire-soak-")
    systems = start_servers(folder)
    try:
        anyio.run(soak, systems, args)
    finally:
        for s in systems:
            s.proc.send_signal(signal.SIGTERM)
        for s in systems:
            try:
                s.proc.wait(10)
            except subprocess.TimeoutExpired:
                s.proc.kill()
        shutil.rmtree(folder, ignore_errors=True)
    print("\n| system | put | handled | failed on purpose | errors | server RSS first / last / "
          "peak MiB |\n|---|--:|--:|--:|--:|---|")
    for s in systems:
        rss = [x["server_rss_kib"] / 1024 for x in s.samples] or [0.0]
        print(f"| {s.name} | {s.put} | {s.handled} | {s.failed_on_purpose} | {s.errors} | "
              f"{rss[0]:.1f} / {rss[-1]:.1f} / {max(rss):.1f} |")
        if s.last_error:
            print(f"  last error ({s.name}): {s.last_error}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "minutes": args.minutes, "producers": args.producers, "concurrency": args.concurrency,
        "run": str(uuid.uuid4()),
        "systems": [{"name": s.name, "put": s.put, "handled": s.handled,
                     "failed_on_purpose": s.failed_on_purpose, "errors": s.errors,
                     "last_error": s.last_error, "samples": s.samples} for s in systems],
    }, indent=1))
    print(f"\nwrote {args.out}")
    return 1 if any(s.errors for s in systems) else 0


if __name__ == "__main__":
    raise SystemExit(main())
