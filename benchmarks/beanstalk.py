"""Throughput of jobwire's beanstalk clients and workers against greenstalk, aiostalk and a raw
socket, side by side in one run against a real ``beanstalkd`` (and, for one scenario, the
bundled server).

    scripts/bench                       # the full run (about 2-3 minutes on 2 cores)
    scripts/bench --quick               # a smoke run with small counts (well under 30 s)
    scripts/bench --scenarios put,worker_noop --clients jobwire-sync,greenstalk
    scripts/bench --out /tmp/b.json     # where the JSON goes (default results/beanstalk.json)

How it measures:

* Every timed run gets its own server process on a free 127.0.0.1 port, killed right after
  (and on any error), a fresh tube and a fresh connection, set up before the clock starts.
  A short untimed warm-up run of the same client on the same server comes first.
* Each client is timed ``--repeats`` (3) times, round-robin within a scenario (run 1 of every
  client, then run 2 ...), so drift on a shared machine hits every client alike; the table
  shows the best run (highest ops/s) and the median.
* Besides wall time, each run records this process's CPU time and the server's (from
  ``/proc``), per operation: on a small machine they show whether the client or the server
  is the bottleneck.
* Worker timings run from just before ``run()`` until the N-th job's handler has finished
  (recorded in the handler, which then calls ``worker.stop()``). The shutdown that follows is
  recorded as ``stop_tail_s`` and is not throughput. The tube holds N + 2 x concurrency jobs,
  so the pool never meets an empty tube (and a blocking reserve) before the N-th job.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import aiostalk  # type: ignore[import-untyped]
import anyio
import greenstalk
from _harness import (
    HOST,
    die_with_parent,
    find_binary,
    free_port,
    proc_cpu,
    stop_process,
    terminate,
)

from beanstalk_client import AsyncClient, Client, Job
from beanstalk_client.worker import AsyncWorker, Worker

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "beanstalk.json"

BODY = b"x" * 64  #: every job's body
PRI, DELAY, TTR = 65536, 0, 60  #: the same put arguments for every client
PUT_LINE = b"put %d %d %d %d\r\n%b\r\n" % (PRI, DELAY, TTR, len(BODY), BODY)
WINDOW = 256  #: commands in flight for the pipelined raw socket (jobwire's default window)
SLEEP_S = 0.010  #: the slow handler of the worker_sleep scenario
READ_SIZE = 65536  #: raw socket reads (a recv of >= 128 KiB costs an mmap per call)


# -- servers ----------------------------------------------------------------------------------


@dataclass
class Server:
    kind: str  #: "beanstalkd" or "bundled"
    proc: subprocess.Popen[bytes]
    port: int

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server has used so far, or None off Linux."""
        return proc_cpu(self.proc.pid)

    def stop(self) -> None:
        stop_process(self.proc)


def start_server(kind: str, poll: float = 0.02) -> Server:
    """Start ``beanstalkd`` or the bundled server on a free loopback port; wait until it
    accepts connections."""
    port = free_port()
    command = (
        [find_binary("beanstalkd")] if kind == "beanstalkd"
        else [sys.executable, "-m", "beanstalk_client.server"]
    )
    # preexec_fn is only safe while this process has a single thread.
    single = sys.platform == "linux" and threading.active_count() == 1
    proc = subprocess.Popen(
        [*command, "-l", HOST, "-p", str(port), "-z", "65535"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=die_with_parent if single else None,
    )
    server = Server(kind, proc, port)
    deadline = time.monotonic() + 15
    while True:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else b""
            raise RuntimeError(f"{kind} exited with {proc.returncode}: {err!r}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"{kind} did not start listening on {HOST}:{port}") from None
            time.sleep(poll)


def start_to_listen(kind: str, runs: int = 9) -> tuple[float, float]:
    """Median seconds from spawning ``kind`` to its first accepted connection (polled every
    millisecond): what a test suite that spawns the binary and sleeps 0.1 s depends on; and to
    the reply to ``list-tube-used`` sent on a connection made then (the bundled server listens
    before its event loop runs: the first reply comes later)."""
    listening, replying = [], []
    for _ in range(runs):
        began = time.perf_counter()
        server = start_server(kind, poll=0.001)
        listening.append(time.perf_counter() - began)
        try:
            with socket.create_connection((HOST, server.port), timeout=10) as sock:
                sock.sendall(b"list-tube-used\r\n")
                if not sock.recv(64).startswith(b"USING "):
                    raise RuntimeError(f"{kind}: unexpected reply to list-tube-used")
            replying.append(time.perf_counter() - began)
        finally:
            server.stop()
    return statistics.median(listening), statistics.median(replying)


@contextlib.contextmanager
def running(kind: str) -> Iterator[Server]:
    server = start_server(kind)
    try:
        yield server
    finally:
        server.stop()


# -- results ----------------------------------------------------------------------------------


@dataclass
class Sample:
    """One timed run: ``n`` operations (jobs) in ``seconds``."""

    n: int
    seconds: float
    client_cpu: float  #: this process's CPU seconds over the run (all threads)
    server_cpu: float | None  #: the server's CPU seconds over the run
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ops(self) -> float:
        return self.n / self.seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "seconds": round(self.seconds, 6),
            "ops_per_s": round(self.ops, 1),
            "client_cpu_us_per_op": round(self.client_cpu / self.n * 1e6, 2),
            "server_cpu_us_per_op": (
                None if self.server_cpu is None else round(self.server_cpu / self.n * 1e6, 2)
            ),
            **self.extra,
        }


class Clock:
    """Wall time, this process's CPU time and the server's over one timed window."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._wall = self._cpu = self._wall_end = self._cpu_end = 0.0
        self._srv: float | None = None
        self._srv_end: float | None = None

    def start(self) -> None:
        self._srv = self.server.cpu_seconds()
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    def stop(self) -> None:
        self._wall_end = time.perf_counter()
        self._cpu_end = time.process_time()
        self._srv_end = self.server.cpu_seconds()

    @property
    def stopped_at(self) -> float:
        """``time.perf_counter()`` when :meth:`stop` was called."""
        return self._wall_end

    def sample(self, n: int, **extra: float) -> Sample:
        server_cpu = (
            None if self._srv is None or self._srv_end is None else self._srv_end - self._srv
        )
        return Sample(n, self._wall_end - self._wall, self._cpu_end - self._cpu, server_cpu,
                      dict(extra))


def timed(server: Server, n: int, run: Callable[[], object]) -> Sample:
    clock = Clock(server)
    clock.start()
    run()
    clock.stop()
    return clock.sample(n)


@dataclass
class Result:
    """Every timed run of one client in one scenario."""

    scenario: str
    client: str
    label: str
    n: int
    samples: list[Sample]
    note: str = ""
    server: str = "beanstalkd"

    @property
    def best_sample(self) -> Sample:
        return max(self.samples, key=lambda s: s.ops)

    @property
    def best(self) -> float:
        return self.best_sample.ops

    @property
    def median(self) -> float:
        return statistics.median(s.ops for s in self.samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "client": self.client,
            "label": self.label,
            "server": self.server,
            "n": self.n,
            "best_ops_per_s": round(self.best, 1),
            "median_ops_per_s": round(self.median, 1),
            "samples": [s.to_json() for s in self.samples],
            "note": self.note,
        }


# -- the raw socket: the ceiling ----------------------------------------------------------------


class Raw:
    """A plain socket speaking just enough beanstalk to measure: commands are written in
    batches, replies parsed minimally (a line; a RESERVED body skipped by its length)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> None:
        data = self.sock.recv(READ_SIZE)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def line(self) -> bytes:
        while (i := self.buf.find(b"\r\n")) < 0:
            self._fill()
        line = bytes(self.buf[:i])
        del self.buf[: i + 2]
        return line

    def replies(self, count: int) -> tuple[list[int], int]:
        """Read ``count`` replies; return the ids of RESERVED ones and how many were TIMED_OUT.
        Any other reply but INSERTED/DELETED/USING/WATCHING is an error."""
        ids: list[int] = []
        timed_out = 0
        buf = self.buf
        pos = 0
        while count:
            i = buf.find(b"\r\n", pos)
            if i < 0:
                del buf[:pos]
                pos = 0
                self._fill()
                continue
            if buf.startswith(b"RESERVED", pos):
                _, raw_id, size = bytes(buf[pos:i]).split()
                end = i + 2 + int(size) + 2
                if end > len(buf):
                    del buf[:pos]
                    pos = 0
                    self._fill()
                    continue
                ids.append(int(raw_id))
                pos = end
            else:
                if buf.startswith(b"TIMED_OUT", pos):
                    timed_out += 1
                elif not buf.startswith((b"DELETED", b"INSERTED", b"USING", b"WATCHING"), pos):
                    raise RuntimeError(f"unexpected reply {bytes(buf[pos:i])!r}")
                pos = i + 2
            count -= 1
        del buf[:pos]
        return ids, timed_out

    def use(self, tube: str) -> None:
        self.sock.sendall(b"use %s\r\n" % tube.encode())
        self.replies(1)

    def watch_only(self, tube: str) -> None:
        self.sock.sendall(b"watch %s\r\nignore default\r\n" % tube.encode())
        self.replies(2)

    def put_pipelined(self, n: int) -> None:
        """``n`` puts written in batches of WINDOW, at most two batches in flight; replies
        are only counted (a put's reply is one line)."""
        sent = received = 0
        while received < n:
            while sent < n and sent - received < 2 * WINDOW:
                batch = min(WINDOW, n - sent)
                self.sock.sendall(PUT_LINE * batch)
                sent += batch
            data = self.sock.recv(READ_SIZE)
            if not data:
                raise ConnectionError("server closed the connection")
            if received == 0 and not data.startswith(b"INSERTED"):
                raise RuntimeError(f"put failed: {data[:60]!r}")
            received += data.count(b"\n")

    def reserve_delete_pipelined(self, n: int) -> None:
        """Reserve (``reserve-with-timeout 0``) and delete ``n`` jobs, pipelined: each write
        carries the deletes for the last batch and the next batch of reserves."""
        reserved = 0
        to_delete: list[int] = []
        while True:
            batch = min(WINDOW, n - reserved)
            out = b"".join(b"delete %d\r\n" % i for i in to_delete)
            out += b"reserve-with-timeout 0\r\n" * batch
            if not out:
                return
            self.sock.sendall(out)
            to_delete, timed_out = self.replies(len(to_delete) + batch)
            reserved += len(to_delete)
            if timed_out:
                raise RuntimeError(f"tube ran dry after {reserved} of {n} jobs")


def prefill(port: int, tube: str, n: int) -> None:
    """Put ``n`` jobs into ``tube`` with jobwire's pipelined put (untimed)."""
    with Client(HOST, port) as c:
        c.use(tube)
        c.put_many([BODY] * n, priority=PRI, delay=DELAY, ttr=TTR)


# -- the measurements: (server, tube, n) -> Sample; connections open before the clock starts ---

# sequential put


def put_jobwire_sync(srv: Server, tube: str, n: int) -> Sample:
    with Client(HOST, srv.port) as c:
        c.use(tube)

        def run() -> None:
            for _ in range(n):
                c.put(BODY, priority=PRI, delay=DELAY, ttr=TTR)

        return timed(srv, n, run)


async def _put_jobwire_async(srv: Server, tube: str, n: int) -> Sample:
    async with AsyncClient(HOST, srv.port) as c:
        await c.use(tube)
        clock = Clock(srv)
        clock.start()
        for _ in range(n):
            await c.put(BODY, priority=PRI, delay=DELAY, ttr=TTR)
        clock.stop()
        return clock.sample(n)


def put_jobwire_async(backend: str, srv: Server, tube: str, n: int) -> Sample:
    result: Sample = anyio.run(_put_jobwire_async, srv, tube, n, backend=backend)
    return result


def put_greenstalk(srv: Server, tube: str, n: int) -> Sample:
    with greenstalk.Client((HOST, srv.port), encoding=None, use=tube) as c:

        def run() -> None:
            for _ in range(n):
                c.put(BODY, priority=PRI, delay=DELAY, ttr=TTR)

        return timed(srv, n, run)


async def _put_aiostalk(srv: Server, tube: str, n: int) -> Sample:
    c = aiostalk.Client((HOST, srv.port), encoding=None, use=tube)
    await c.connect()
    try:
        clock = Clock(srv)
        clock.start()
        for _ in range(n):
            await c.put(BODY, priority=PRI, delay=DELAY, ttr=TTR)
        clock.stop()
        return clock.sample(n)
    finally:
        await c.close()


def put_aiostalk(srv: Server, tube: str, n: int) -> Sample:
    return asyncio.run(_put_aiostalk(srv, tube, n))


def put_raw_sequential(srv: Server, tube: str, n: int) -> Sample:
    raw = Raw(srv.port)
    try:
        raw.use(tube)

        def run() -> None:
            for _ in range(n):
                raw.sock.sendall(PUT_LINE)
                raw.line()

        return timed(srv, n, run)
    finally:
        raw.close()


# pipelined put


def put_many_jobwire_sync(srv: Server, tube: str, n: int) -> Sample:
    with Client(HOST, srv.port) as c:
        c.use(tube)
        bodies = [BODY] * n
        return timed(srv, n, lambda: c.put_many(bodies, priority=PRI, delay=DELAY, ttr=TTR))


async def _put_many_jobwire_async(srv: Server, tube: str, n: int) -> Sample:
    async with AsyncClient(HOST, srv.port) as c:
        await c.use(tube)
        bodies = [BODY] * n
        clock = Clock(srv)
        clock.start()
        await c.put_many(bodies, priority=PRI, delay=DELAY, ttr=TTR)
        clock.stop()
        return clock.sample(n)


def put_many_jobwire_async(backend: str, srv: Server, tube: str, n: int) -> Sample:
    result: Sample = anyio.run(_put_many_jobwire_async, srv, tube, n, backend=backend)
    return result


def put_raw_pipelined(srv: Server, tube: str, n: int) -> Sample:
    raw = Raw(srv.port)
    try:
        raw.use(tube)
        return timed(srv, n, lambda: raw.put_pipelined(n))
    finally:
        raw.close()


# reserve + delete, one job at a time (the harness pre-fills the tube)


def rd_jobwire_sync(srv: Server, tube: str, n: int) -> Sample:
    with Client(HOST, srv.port) as c:
        c.watch(tube)
        c.ignore("default")

        def run() -> None:
            for _ in range(n):
                c.delete(c.reserve())

        return timed(srv, n, run)


async def _rd_jobwire_async(srv: Server, tube: str, n: int) -> Sample:
    async with AsyncClient(HOST, srv.port) as c:
        await c.watch(tube)
        await c.ignore("default")
        clock = Clock(srv)
        clock.start()
        for _ in range(n):
            await c.delete(await c.reserve())
        clock.stop()
        return clock.sample(n)


def rd_jobwire_async(backend: str, srv: Server, tube: str, n: int) -> Sample:
    result: Sample = anyio.run(_rd_jobwire_async, srv, tube, n, backend=backend)
    return result


def rd_greenstalk(srv: Server, tube: str, n: int) -> Sample:
    with greenstalk.Client((HOST, srv.port), encoding=None, watch=tube) as c:

        def run() -> None:
            for _ in range(n):
                c.delete(c.reserve())

        return timed(srv, n, run)


async def _rd_aiostalk(srv: Server, tube: str, n: int) -> Sample:
    c = aiostalk.Client((HOST, srv.port), encoding=None, watch=tube)
    await c.connect()
    try:
        clock = Clock(srv)
        clock.start()
        for _ in range(n):
            await c.delete(await c.reserve())
        clock.stop()
        return clock.sample(n)
    finally:
        await c.close()


def rd_aiostalk(srv: Server, tube: str, n: int) -> Sample:
    return asyncio.run(_rd_aiostalk(srv, tube, n))


def rd_raw_sequential(srv: Server, tube: str, n: int) -> Sample:
    raw = Raw(srv.port)
    try:
        raw.watch_only(tube)

        def run() -> None:
            for _ in range(n):
                raw.sock.sendall(b"reserve\r\n")
                (job_id,), _ = raw.replies(1)
                raw.sock.sendall(b"delete %d\r\n" % job_id)
                raw.replies(1)

        return timed(srv, n, run)
    finally:
        raw.close()


def rd_raw_pipelined(srv: Server, tube: str, n: int) -> Sample:
    raw = Raw(srv.port)
    try:
        raw.watch_only(tube)
        return timed(srv, n, lambda: raw.reserve_delete_pipelined(n))
    finally:
        raw.close()


# worker pools, ONE connection each


async def _async_worker(
    srv: Server, tube: str, n: int, concurrency: int, sleep: float
) -> Sample:
    worker = AsyncWorker(
        f"beanstalk://{HOST}:{srv.port}", tubes=[tube], concurrency=concurrency,
        max_ack_delay=1.0, idle_wait=1.0,
    )
    clock = Clock(srv)
    done = 0

    async def handler(job: Job) -> None:
        nonlocal done
        if sleep:
            await anyio.sleep(sleep)
        done += 1
        if done == n:
            clock.stop()
            worker.stop()

    clock.start()
    async with worker:
        await worker.run(handler, handle_signals=False)
    returned = time.perf_counter()
    if done < n:
        raise RuntimeError(f"worker stopped after {done} of {n} jobs")
    return clock.sample(n, stop_tail_s=round(returned - clock.stopped_at, 4))


def async_worker(
    backend: str, concurrency: int, sleep: float, srv: Server, tube: str, n: int
) -> Sample:
    result: Sample = anyio.run(
        _async_worker, srv, tube, n, concurrency, sleep, backend=backend
    )
    return result


def sync_worker(concurrency: int, srv: Server, tube: str, n: int) -> Sample:
    worker = Worker(
        f"beanstalk://{HOST}:{srv.port}", tubes=[tube], concurrency=concurrency,
        max_ack_delay=1.0, idle_wait=1.0,
    )
    clock = Clock(srv)
    lock = threading.Lock()
    done = 0

    def handler(job: Job) -> None:
        nonlocal done
        with lock:
            done += 1
            last = done == n
        if last:
            clock.stop()
            worker.stop()

    clock.start()
    worker.run(handler, handle_signals=False)
    returned = time.perf_counter()
    if done < n:
        raise RuntimeError(f"worker stopped after {done} of {n} jobs")
    return clock.sample(n, stop_tail_s=round(returned - clock.stopped_at, 4))


# -- the plan ---------------------------------------------------------------------------------

MeasureFn = Callable[[Server, str, int], Sample]


@dataclass(frozen=True)
class Spec:
    """One client in one scenario."""

    client: str  #: short key (for --clients and the JSON)
    label: str
    measure: MeasureFn
    n: int
    prefill_extra: int | None = None  #: None: no prefill; else put n + this many first
    server: str = "beanstalkd"


@dataclass(frozen=True)
class Reuse:
    """A row that repeats another scenario's result (the same runs, compared here)."""

    client: str
    label: str
    source: tuple[str, str]
    fallback: Spec  #: measured here if the source row did not run


SCENARIOS: dict[str, str] = {
    "put": "sequential put: one put, wait for INSERTED, next put",
    "put_pipelined": "pipelined put: put_many (256 in flight); peers that cannot pipeline: "
                     "their put loop",
    "reserve_delete": "reserve + delete, one command at a time (tube pre-filled)",
    "worker_noop": "worker pool, no-op handler, ONE connection (tube pre-filled)",
    "worker_sleep": f"worker pool, {SLEEP_S * 1000:g} ms sleep handler, ONE connection",
    "bundled_put": "pipelined put against the bundled server vs beanstalkd",
}


def plan(quick: bool) -> dict[str, list[Spec | Reuse]]:
    """Counts aim at about one second per timed run on a small 2-core VM; ``quick`` takes a
    fifth of that."""

    def k(full: int, minimum: int = 200) -> int:
        return max(full // 5, minimum) if quick else full

    put_gs = Spec("greenstalk", "greenstalk (put loop)", put_greenstalk, k(20_000))
    put_aio = Spec("aiostalk", "aiostalk (put loop)", put_aiostalk, k(12_000))
    rd_gs = Spec("greenstalk", "greenstalk reserve+delete loop", rd_greenstalk, k(10_000), 0)
    rd_pipe = Spec("raw-pipe", "raw socket (pipelined)", rd_raw_pipelined, k(40_000), 0)
    pm_sync = Spec("jobwire-sync", "jobwire Client.put_many", put_many_jobwire_sync, k(60_000))
    return {
        "put": [
            Spec("jobwire-sync", "jobwire Client", put_jobwire_sync, k(15_000)),
            Spec("jobwire-asyncio", "jobwire AsyncClient (asyncio)",
                 partial(put_jobwire_async, "asyncio"), k(6_000)),
            Spec("jobwire-trio", "jobwire AsyncClient (trio)",
                 partial(put_jobwire_async, "trio"), k(6_000)),
            put_gs,
            put_aio,
            Spec("raw-seq", "raw socket (sequential)", put_raw_sequential, k(25_000)),
        ],
        "put_pipelined": [
            pm_sync,
            Spec("jobwire-asyncio", "jobwire AsyncClient.put_many (asyncio)",
                 partial(put_many_jobwire_async, "asyncio"), k(30_000)),
            Spec("jobwire-trio", "jobwire AsyncClient.put_many (trio)",
                 partial(put_many_jobwire_async, "trio"), k(30_000)),
            Reuse("greenstalk", "greenstalk (put loop, cannot pipeline)", ("put", "greenstalk"),
                  put_gs),
            Reuse("aiostalk", "aiostalk (put loop, cannot pipeline)", ("put", "aiostalk"),
                  put_aio),
            Spec("raw-pipe", "raw socket (pipelined)", put_raw_pipelined, k(60_000)),
        ],
        "reserve_delete": [
            Spec("jobwire-sync", "jobwire Client", rd_jobwire_sync, k(6_000), 0),
            Spec("jobwire-asyncio", "jobwire AsyncClient (asyncio)",
                 partial(rd_jobwire_async, "asyncio"), k(3_000), 0),
            Spec("jobwire-trio", "jobwire AsyncClient (trio)",
                 partial(rd_jobwire_async, "trio"), k(3_000), 0),
            rd_gs,
            Spec("aiostalk", "aiostalk", rd_aiostalk, k(6_000), 0),
            Spec("raw-seq", "raw socket (sequential)", rd_raw_sequential, k(12_000), 0),
            rd_pipe,
        ],
        "worker_noop": [
            Spec("worker-asyncio", "jobwire AsyncWorker c=64 (asyncio)",
                 partial(async_worker, "asyncio", 64, 0.0), k(15_000), 128),
            Spec("worker-trio", "jobwire AsyncWorker c=64 (trio)",
                 partial(async_worker, "trio", 64, 0.0), k(12_000), 128),
            Spec("worker-sync", "jobwire Worker c=64 (threads)",
                 partial(sync_worker, 64), k(4_000), 128),
            Reuse("greenstalk", "greenstalk reserve+delete loop",
                  ("reserve_delete", "greenstalk"), rd_gs),
            Reuse("raw-pipe", "raw socket reserve+delete (pipelined)",
                  ("reserve_delete", "raw-pipe"), rd_pipe),
        ],
        "worker_sleep": [
            Spec("worker-asyncio-c1", "jobwire AsyncWorker c=1 (asyncio)",
                 partial(async_worker, "asyncio", 1, SLEEP_S), k(100, 20), 2),
            Spec("worker-asyncio-c16", "jobwire AsyncWorker c=16 (asyncio)",
                 partial(async_worker, "asyncio", 16, SLEEP_S), k(1_200, 160), 32),
            Spec("worker-asyncio-c64", "jobwire AsyncWorker c=64 (asyncio)",
                 partial(async_worker, "asyncio", 64, SLEEP_S), k(5_000, 640), 128),
        ],
        "bundled_put": [
            Spec("jobwire-sync-bundled", "jobwire Client.put_many -> bundled server",
                 put_many_jobwire_sync, k(30_000), server="bundled"),
            Spec("raw-pipe-bundled", "raw socket (pipelined) -> bundled server",
                 put_raw_pipelined, k(30_000), server="bundled"),
            Reuse("jobwire-sync", "jobwire Client.put_many -> beanstalkd",
                  ("put_pipelined", "jobwire-sync"), pm_sync),
        ],
    }


@dataclass(frozen=True)
class Target:
    """A ratio of two results of this run that must reach ``threshold``."""

    name: str
    numerator: tuple[str, str]  #: (scenario, client)
    denominator: tuple[str, str]
    threshold: float


TARGETS = [
    Target("sync sequential put: jobwire Client >= 1.0x greenstalk",
           ("put", "jobwire-sync"), ("put", "greenstalk"), 1.0),
    Target("sync reserve+delete: jobwire Client >= 1.0x greenstalk",
           ("reserve_delete", "jobwire-sync"), ("reserve_delete", "greenstalk"), 1.0),
    Target("async sequential put (asyncio): jobwire AsyncClient >= 1.5x aiostalk",
           ("put", "jobwire-asyncio"), ("put", "aiostalk"), 1.5),
    Target("async reserve+delete (asyncio): jobwire AsyncClient >= 1.5x aiostalk",
           ("reserve_delete", "jobwire-asyncio"), ("reserve_delete", "aiostalk"), 1.5),
    Target("pipelined put: jobwire Client.put_many >= 4x greenstalk put loop",
           ("put_pipelined", "jobwire-sync"), ("put_pipelined", "greenstalk"), 4.0),
    Target("worker no-op: AsyncWorker (asyncio, c=64, one connection) >= 2.5x greenstalk "
           "reserve+delete loop",
           ("worker_noop", "worker-asyncio"), ("worker_noop", "greenstalk"), 2.5),
    Target("10 ms handler: AsyncWorker c=64 >= 40x c=1",
           ("worker_sleep", "worker-asyncio-c64"), ("worker_sleep", "worker-asyncio-c1"), 40.0),
    Target("bundled server: put_many >= 0.3x beanstalkd's",
           ("bundled_put", "jobwire-sync-bundled"), ("bundled_put", "jobwire-sync"), 0.3),
]


# -- the harness -------------------------------------------------------------------------------


class Bench:
    """Runs a scenario's rows round-robin: timed run 1 of every client, then run 2 of every
    client, and so on, so that drift on a shared machine spreads over all clients alike."""

    def __init__(self, repeats: int) -> None:
        self.repeats = repeats
        self.results: dict[tuple[str, str], Result] = {}

    @staticmethod
    def once(spec: Spec) -> Sample:
        """One timed run on a fresh server, after a short untimed warm-up run on it."""
        with running(spec.server) as srv:

            def run(n: int) -> Sample:
                tube = f"bench-{uuid.uuid4().hex[:12]}"
                if spec.prefill_extra is not None:
                    prefill(srv.port, tube, n + spec.prefill_extra)
                return spec.measure(srv, tube, n)

            run(max(spec.n // 20, 20))  # warm-up
            return run(spec.n)

    def run_specs(self, scenario: str, specs: Sequence[Spec]) -> None:
        samples: dict[str, list[Sample]] = {spec.client: [] for spec in specs}
        for _ in range(self.repeats):
            for spec in specs:
                samples[spec.client].append(self.once(spec))
        for spec in specs:
            self.results[(scenario, spec.client)] = Result(
                scenario, spec.client, spec.label, spec.n, samples[spec.client], "",
                spec.server)

    def run_scenario(self, scenario: str, rows: Sequence[Spec | Reuse]) -> list[Result]:
        self.run_specs(scenario, [row for row in rows if isinstance(row, Spec)])
        out: list[Result] = []
        for row in rows:
            if isinstance(row, Reuse):
                if row.source not in self.results:  # its own scenario did not run
                    self.run_specs(row.source[0], [row.fallback])
                source = self.results[row.source]
                self.results[(scenario, row.client)] = Result(
                    scenario, row.client, row.label, source.n, source.samples,
                    f"same runs as {row.source[0]}", source.server)
            out.append(self.results[(scenario, row.client)])
        return out


# -- reporting ---------------------------------------------------------------------------------


def fmt_ops(ops: float) -> str:
    return f"{ops:,.0f}"


def fmt_us(seconds: float | None, n: int) -> str:
    return "?" if seconds is None else f"{seconds / n * 1e6:.1f}"


def markdown_table(results: Sequence[Result]) -> str:
    lines = [
        "| scenario | client | N | best ops/s | median ops/s | client CPU µs/op "
        "| server CPU µs/op | vs first row |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    first: dict[str, float] = {}
    for r in results:
        base = first.setdefault(r.scenario, r.best)
        s = r.best_sample
        label = r.label + (" *" if r.note else "")
        lines.append(
            f"| {r.scenario} | {label} | {r.n:,} | {fmt_ops(r.best)} | {fmt_ops(r.median)} "
            f"| {fmt_us(s.client_cpu, s.n)} | {fmt_us(s.server_cpu, s.n)} "
            f"| {r.best / base:.2f}x |"
        )
    return "\n".join(lines)


def evaluate(results: dict[tuple[str, str], Result]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in TARGETS:
        num, den = results.get(t.numerator), results.get(t.denominator)
        if num is None or den is None:
            out.append({"target": t.name, "threshold": t.threshold, "ratio": None,
                        "median_ratio": None, "status": "SKIP"})
            continue
        ratio = num.best / den.best
        out.append({
            "target": t.name, "threshold": t.threshold, "ratio": round(ratio, 3),
            "median_ratio": round(num.median / den.median, 3),
            "status": "PASS" if ratio >= t.threshold else "MISS",
        })
    return out


def environment() -> dict[str, Any]:
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    cpu_model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    try:
        bs_version = subprocess.run(
            [find_binary("beanstalkd"), "-v"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError, SystemExit):
        bs_version = "?"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": cpu_model,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "beanstalkd": bs_version,
        "packages": {d: version(d) for d in ("jobwire", "greenstalk", "aiostalk", "anyio",
                                              "trio")},
    }


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark jobwire's beanstalk clients and workers against greenstalk, "
        "aiostalk and a raw socket on a real beanstalkd.")
    parser.add_argument("--quick", action="store_true",
                        help="a fifth of the counts and 1 timed run per row: a smoke run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"JSON results file (default {DEFAULT_OUT.relative_to(ROOT)})")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help="comma-separated subset of: " + ", ".join(SCENARIOS))
    parser.add_argument("--clients", default="",
                        help="comma-separated client keys to keep, e.g. jobwire-sync,greenstalk "
                        "(default: all)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed runs per row (default 3; 1 with --quick)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}",
              file=sys.stderr)
        return 2
    clients = {c.strip() for c in args.clients.split(",") if c.strip()}
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if repeats < 1:
        print("--repeats must be >= 1", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, terminate)

    wall = time.perf_counter()
    env = environment()
    print(f"# beanstalk benchmark{' (quick)' if args.quick else ''}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), Python {env['python']}, "
          f"{env['beanstalkd']}, {env['platform']}")
    print(f"best of {repeats} timed run(s) per row; ops/s = operations (jobs) per second; "
          "each run on a fresh server on 127.0.0.1\n")
    bench = Bench(repeats)
    table = plan(args.quick)
    order: list[Result] = []
    for scenario in scenarios:
        print(f"## {scenario}: {SCENARIOS[scenario]}", flush=True)
        rows = [row for row in table[scenario] if not clients or row.client in clients]
        for result in bench.run_scenario(scenario, rows):
            order.append(result)
            s = result.best_sample
            tails = [x.extra["stop_tail_s"] for x in result.samples if "stop_tail_s" in x.extra]
            tail = f"  stop tail <= {max(tails):.2f} s (untimed)" if tails else ""
            print(f"  {result.label:<44} {fmt_ops(result.best):>9} ops/s  "
                  f"(median {fmt_ops(result.median)}; CPU µs/op client "
                  f"{fmt_us(s.client_cpu, s.n)}, server {fmt_us(s.server_cpu, s.n)}){tail}",
                  flush=True)

    startup = {kind: start_to_listen(kind) for kind in ("beanstalkd", "bundled")}
    listen = {kind: seconds for kind, (seconds, _) in startup.items()}
    print(f"## start to listen (median of 9 spawns): beanstalkd "
          f"{listen['beanstalkd'] * 1e3:.1f} ms, bundled {listen['bundled'] * 1e3:.1f} ms "
          "(target: bundled < 100 ms); to the first reply: beanstalkd "
          f"{startup['beanstalkd'][1] * 1e3:.1f} ms, bundled {startup['bundled'][1] * 1e3:.1f} ms")
    targets = evaluate(bench.results)
    targets.append({
        "target": "bundled server start-to-listen < 0.1 s", "threshold": 0.1,
        "ratio": None, "median_ratio": None, "seconds": listen,
        "first_reply_seconds": {kind: reply for kind, (_, reply) in startup.items()},
        "status": "PASS" if listen["bundled"] < 0.1 else "MISS",
    })
    elapsed = time.perf_counter() - wall
    print()
    print(markdown_table(order))
    print("\n\\* the same runs as the earlier scenario's row, repeated for comparison\n")
    for t in targets:
        got = "n/a"
        if t["ratio"] is not None:
            got = f"{t['ratio']:.2f}x (median {t['median_ratio']:.2f}x)"
        print(f"{t['status']}  {t['target']}: got {got}, need {t['threshold']:g}x")
    print(f"\nwall time {elapsed:.0f} s")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "environment": env,
        "config": {
            "quick": args.quick, "repeats": repeats,
            "statistic": "best of the timed runs (highest ops/s); median also given",
            "body_bytes": len(BODY), "put_args": {"priority": PRI, "delay": DELAY, "ttr": TTR},
            "scenarios": {s: SCENARIOS[s] for s in scenarios},
            "clients": sorted(clients) or "all",
            "wall_time_s": round(elapsed, 1),
        },
        "results": [r.to_json() for r in order],
        "targets": targets,
    }, indent=2) + "\n")
    print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
