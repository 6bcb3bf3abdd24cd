"""How cost grows: jobwire against a raw socket as the body size, the concurrency, the number
of watched tubes / lease names and the number of idle connections grow.

    scripts/bench scaling                 # the full run (about 4 minutes on 2 cores)
    scripts/bench scaling --quick         # fewer points, one repeat (under a minute)
    .venv/bin/python benchmarks/scaling.py --scans body_size,concurrency --out /tmp/s.json

Scans (each point: client CPU µs per operation -- ``time.process_time()`` of this process, all
threads, syscalls included -- and ops/s or MB/s; the raw socket side by side in the same run):

* ``body_size`` (100 B -> 16 MiB): MB/s (10^6 bytes of body per second) of
  beanstalk put + reserve + delete on beanstalkd (started with ``-z`` = the largest body),
  Workq ``add`` on the bundled server (Workq caps payloads at 1 MiB), Gearman ``ECHO_REQ`` on
  gearmand (the body goes there and back) and qless ``put`` on redis-server (the body as a
  JSON string). The raw socket sends the very bytes jobwire sends (headers prebuilt, the body
  with ``sendmsg`` so it is never copied) and reads bodies with ``recv_into`` a buffer made
  before the clock starts: the ceiling. Flat or rising MB/s means no quadratic buffer copies.
* ``concurrency`` (1 -> 1024): one beanstalk ``AsyncWorker`` connection (asyncio) whose handler
  sleeps 10 ms (``anyio.sleep(0.01)``), on beanstalkd; jobs/s and CPU µs/job. Ideal:
  concurrency / 10 ms. The raw socket does it in lock-step batches: reserve c jobs (pipelined),
  sleep 10 ms, then one write with their c deletes and the next c reserves.
* ``watched_tubes`` (1 -> 1000): beanstalk reserve + delete, one job at a time, on a connection
  watching N tubes; the jobs are spread over the N tubes. beanstalkd and the bundled server.
* ``lease_names`` (1 -> 1000): Workq ``lease`` naming N queues + ``delete``, one job at a time,
  on the bundled server; the jobs are spread over the N names.
* ``idle_connections`` (up to 10,000): the RSS of each bundled server (beanstalk, Gearman,
  Workq), beanstalkd and gearmand while N idle connections are open, and the bytes per
  connection; then the time a new connection's first request takes with all of them open.
  This process raises its soft ``RLIMIT_NOFILE`` to the hard limit; the servers inherit it.
  (Kernel socket buffers are not in a process's RSS.)

How it measures: every timed run gets its own server process on a free 127.0.0.1 port, stopped
right after (and on any error), and a connection set up (and warmed with a few operations)
before the clock starts. At each point every client runs ``--runs`` (5; 3 with ``--quick``)
times round-robin; each figure (ops/s, MB/s, CPU µs/op) is the median of the runs, with the
lowest and highest, and every sample is kept (``--quick``: ``results/quick/scaling.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import beanstalk as bs_bench  # benchmarks/beanstalk.py: Raw, prefill, async_worker, PUT_LINE
import report  # this folder: the statistic
from _harness import (
    HOST,
    QUICK_RUNS,
    RESULTS,
    RUNS,
    Process,
    RawSocket,
    Sample,
    environment,
    find_binary,
    free_port,
    server_version,
    spawn,
    terminate,
    timed,
)

from beanstalk_client import Client as BeanstalkClient
from gearman_client import Client as GearmanClient
from qless_client import Client as QlessClient
from qless_client import _scripts as qless_scripts
from qless_client import new_jid
from qless_client._resp import encode_command
from workq_client import Client as WorkqClient

ROOT = Path(__file__).resolve().parent.parent

KIB, MIB = 1024, 1024 * 1024
SIZES = [100, 10 * KIB, 100 * KIB, MIB, 4 * MIB, 16 * MIB]
QUICK_SIZES = [100, 100 * KIB, 16 * MIB]
WORKQ_MAX = MIB  #: Workq's payload limit (``workq_client.MAX_PAYLOAD``)
CONCURRENCY = [1, 4, 16, 64, 256, 1024]
QUICK_CONCURRENCY = [1, 64, 1024]
HANDLER_S = 0.010
COUNTS = [1, 10, 100, 1000]  #: watched tubes, lease names
QUICK_COUNTS = [1, 1000]
IDLE = [10, 100, 1000, 10_000]
QUICK_IDLE = [10, 100, 1000]
TTR, TTL = 60, 3600
CRLF = b"\r\n"
QLESS_QUEUE, QLESS_KLASS, QLESS_WORKER = "bench", "bench.Noop", "bench-worker"


# -- servers ----------------------------------------------------------------------------------


def raise_nofile() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit and return it: every
    server started from here inherits it (``fork`` keeps resource limits)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def _command(kind: str, port: int, max_body: int) -> list[str]:
    py = [sys.executable, "-m"]
    if kind == "beanstalkd":
        return [find_binary("beanstalkd"), "-l", HOST, "-p", str(port), "-z", str(max_body)]
    if kind == "beanstalk-bundled":
        return [*py, "beanstalk_client.server", "-l", HOST, "-p", str(port), "-z", str(max_body)]
    if kind == "gearmand":
        return [find_binary("gearmand", "gearman-job-server"), f"--listen={HOST}",
                f"--port={port}", "--log-file=none", "--threads=0"]
    if kind == "gearman-bundled":
        return [*py, "gearman_client.server", "-L", HOST, "-p", str(port),
                "--max-body-size", str(max(max_body, 64 * MIB))]
    if kind == "workq-bundled":
        return [*py, "workq_client.server", "-listen", f"{HOST}:{port}"]
    raise ValueError(f"unknown server {kind!r}")


def start(kind: str, max_body: int = 16 * MIB) -> Process:
    """``kind`` (``beanstalkd``, ``beanstalk-bundled``, ``gearmand``, ``gearman-bundled``,
    ``workq-bundled`` or ``redis``) on a free loopback port, accepting connections; the
    beanstalk servers take jobs of up to ``max_body`` bytes (``-z``)."""
    port = free_port()
    if kind == "redis":
        folder = tempfile.mkdtemp(prefix="jobwire-bench-redis-")
        return spawn(kind, [find_binary("redis-server", "redis-server"), "--bind", HOST,
                            "--port", str(port), "--save", "", "--appendonly", "no",
                            "--dir", folder, "--logfile", ""], port,
                     cleanup=lambda: shutil.rmtree(folder, ignore_errors=True), poll=0.01)
    return spawn(kind, _command(kind, port, max_body), port, cwd=ROOT, poll=0.01)


@contextlib.contextmanager
def running(kind: str, max_body: int = 16 * MIB) -> Iterator[Process]:
    server = start(kind, max_body)
    try:
        yield server
    finally:
        server.stop()


def rss_kib(pid: int) -> int:
    """The resident set size of ``pid`` (KiB, ``/proc/<pid>/status``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def nofile_of(pid: int) -> int | None:
    """The soft open-files limit of ``pid`` (``/proc/<pid>/limits``)."""
    with contextlib.suppress(OSError, ValueError, IndexError), \
            open(f"/proc/{pid}/limits", encoding="ascii") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


# -- the raw socket ---------------------------------------------------------------------------


class Raw(RawSocket):
    """A blocking socket: writes scattered buffers with ``sendmsg`` (no joining copy), reads
    lines into a small buffer and bodies with ``recv_into`` a buffer made beforehand."""

    def send(self, *parts: bytes) -> None:
        views = [memoryview(p) for p in parts]
        while views:
            sent = self.sock.sendmsg(views)
            while views and sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            if views and sent:
                views[0] = views[0][sent:]


    def line(self) -> bytes:
        while (i := self.buf.find(CRLF)) < 0:
            self._fill()
        line = bytes(self.buf[:i])
        del self.buf[: i + 2]
        return line

    def exactly(self, size: int, into: bytearray) -> None:
        """Read ``size`` bytes into ``into`` (at least that large)."""
        view = memoryview(into)
        have = min(len(self.buf), size)
        view[:have] = self.buf[:have]
        del self.buf[:have]
        while have < size:
            got = self.sock.recv_into(view[have:size])
            if not got:
                raise ConnectionError("the server closed the connection")
            have += got

    def expect(self, prefix: bytes) -> bytes:
        line = self.line()
        if not line.startswith(prefix):
            raise RuntimeError(f"expected {prefix!r}, got {line[:80]!r}")
        return line

    def bulk(self, into: bytearray) -> int:
        """Read one RESP bulk-string reply into ``into``; return its length."""
        size = int(self.expect(b"$")[1:])
        self.exactly(size + 2, into)
        return size


# -- body size --------------------------------------------------------------------------------

BS_PUT = b"put 0 0 %d %%d\r\n" % TTR


def body_beanstalk_jobwire(srv: Process, size: int, n: int) -> Sample:
    body = b"x" * size
    with BeanstalkClient(HOST, srv.port) as c:
        c.use("bench")
        c.watch("bench")
        c.ignore("default")

        def run(count: int) -> None:
            for _ in range(count):
                c.put(body, priority=0, ttr=TTR)
                c.delete(c.reserve())

        run(_warm(n))
        return timed(srv, n, lambda: run(n))


def body_beanstalk_raw(srv: Process, size: int, n: int) -> Sample:
    body = b"x" * size
    put = BS_PUT % size
    into = bytearray(size + 2)
    raw = Raw(srv.port)
    try:
        raw.send(b"use bench\r\nwatch bench\r\nignore default\r\n")
        for prefix in (b"USING", b"WATCHING", b"WATCHING"):
            raw.expect(prefix)

        def run(count: int) -> None:
            for _ in range(count):
                raw.send(put, body, CRLF)
                raw.expect(b"INSERTED")
                raw.send(b"reserve\r\n")
                _, job_id, length = raw.expect(b"RESERVED").split()
                raw.exactly(int(length) + 2, into)
                raw.send(b"delete %s\r\n" % job_id)
                raw.expect(b"DELETED")

        run(_warm(n))
        return timed(srv, n, lambda: run(n))
    finally:
        raw.close()


def body_workq_jobwire(srv: Process, size: int, n: int) -> Sample:
    payload = b"x" * size
    with WorkqClient(HOST, srv.port) as c:

        def run(count: int) -> None:
            for _ in range(count):
                c.add("bench", payload, ttr=TTR, ttl=TTL)

        run(_warm(n))
        return timed(srv, n, lambda: run(n))


def _workq_add_header(size: int) -> bytes:
    return b"add %s bench %d %d %d\r\n" % (str(uuid.uuid4()).encode(), TTR * 1000, TTL * 1000,
                                           size)


def body_workq_raw(srv: Process, size: int, n: int) -> Sample:
    payload = b"x" * size
    warm = _warm(n)
    headers = [_workq_add_header(size) for _ in range(n + warm)]
    raw = Raw(srv.port)
    try:
        def run(part: Sequence[bytes]) -> None:
            for header in part:
                raw.send(header, payload, CRLF)
                raw.expect(b"+OK")

        run(headers[:warm])
        return timed(srv, n, lambda: run(headers[warm:]))
    finally:
        raw.close()


def body_gearman_jobwire(srv: Process, size: int, n: int) -> Sample:
    data = b"x" * size
    with GearmanClient(f"{HOST}:{srv.port}", max_body_size=max(64 * MIB, 2 * size)) as c:

        def run(count: int) -> None:
            for _ in range(count):
                if len(c.echo(data)) != size:
                    raise RuntimeError("ECHO_RES of another size")

        run(_warm(n))
        return timed(srv, n, lambda: run(n))


def body_gearman_raw(srv: Process, size: int, n: int) -> Sample:
    data = b"x" * size
    header = b"\0REQ" + struct.pack(">II", 16, size)  # ECHO_REQ
    into = bytearray(max(size, 12))
    raw = Raw(srv.port)
    try:
        def run(count: int) -> None:
            for _ in range(count):
                raw.send(header, data)
                raw.exactly(12, into)
                magic, kind, length = struct.unpack_from(">4sII", into)
                if magic != b"\0RES" or kind != 17:
                    raise RuntimeError(f"unexpected packet {bytes(into[:12])!r}")
                raw.exactly(length, into)

        run(_warm(n))
        return timed(srv, n, lambda: run(n))
    finally:
        raw.close()


def body_qless_jobwire(srv: Process, size: int, n: int) -> Sample:
    text = "x" * size
    with QlessClient((HOST, srv.port), worker_name=QLESS_WORKER) as client:
        client.config_get("heartbeat")  # connected, script loaded
        queue = client.queue(QLESS_QUEUE)

        def run(count: int) -> None:
            for _ in range(count):
                queue.put(QLESS_KLASS, text)

        run(_warm(n))
        return timed(srv, n, lambda: run(n))


def _evalsha(call: qless_scripts.ScriptCall[Any]) -> bytes:
    """The bytes jobwire's ``evalsha`` writes for ``call``."""
    return encode_command(call.command_line())


def body_qless_raw(srv: Process, size: int, n: int) -> Sample:
    data = json.dumps("x" * size)  # what jobwire's JSON serializer writes for the string
    warm = _warm(n)
    now = time.time()
    commands = [_evalsha(qless_scripts.put(now, QLESS_QUEUE, new_jid(), QLESS_KLASS, data))
                for _ in range(n + warm)]
    into = bytearray(64)
    raw = Raw(srv.port)
    try:
        raw.send(encode_command(["SCRIPT", "LOAD", qless_scripts.SOURCE]))
        raw.bulk(bytearray(64))

        def run(part: Sequence[bytes]) -> None:
            for command in part:
                raw.send(command)
                raw.bulk(into)

        run(commands[:warm])
        return timed(srv, n, lambda: run(commands[warm:]))
    finally:
        raw.close()


def _warm(n: int) -> int:
    """Untimed operations on the same connection before the clock starts."""
    return max(1, min(20, n // 10))


# -- concurrency ------------------------------------------------------------------------------


def concurrency_jobwire(srv: Process, c: int, n: int) -> Sample:
    tube = f"bench-{uuid.uuid4().hex[:8]}"
    bs_bench.prefill(srv.port, tube, n + 2 * c)
    return bs_bench.async_worker("asyncio", c, HANDLER_S, srv, tube, n)


def concurrency_raw(srv: Process, c: int, n: int) -> Sample:
    tube = f"bench-{uuid.uuid4().hex[:8]}"
    bs_bench.prefill(srv.port, tube, n + 2 * c)
    raw = bs_bench.Raw(srv.port)
    try:
        raw.watch_only(tube)
        pending: list[int] = []

        def run() -> None:
            nonlocal pending
            done = 0
            while done < n:
                batch = min(c, n - done)
                out = b"".join(b"delete %d\r\n" % i for i in pending)
                raw.sock.sendall(out + b"reserve-with-timeout 0\r\n" * batch)
                pending, timed_out = raw.replies(len(pending) + batch)
                if timed_out:
                    raise RuntimeError("the tube ran dry")
                time.sleep(HANDLER_S)  # the c handlers, side by side
                done += len(pending)

        sample = timed(srv, n, run)
        raw.sock.sendall(b"".join(b"delete %d\r\n" % i for i in pending))
        raw.replies(len(pending))
        return sample
    finally:
        raw.close()


# -- watched tubes / lease names --------------------------------------------------------------


def _tubes(count: int) -> list[str]:
    return [f"t{i:04d}" for i in range(count)]


def _fill_tubes(port: int, tubes: Sequence[str], n: int) -> None:
    raw = bs_bench.Raw(port)
    try:
        for first in range(0, n, 256):
            batch = range(first, min(first + 256, n))
            raw.sock.sendall(b"".join(
                b"use %s\r\n%s" % (tubes[i % len(tubes)].encode(), bs_bench.PUT_LINE)
                for i in batch))
            raw.replies(2 * len(batch))
    finally:
        raw.close()


def tubes_jobwire(srv: Process, count: int, n: int) -> Sample:
    tubes = _tubes(count)
    _fill_tubes(srv.port, tubes, n + _warm(n))
    with BeanstalkClient(HOST, srv.port) as c:
        for tube in tubes:
            c.watch(tube)
        c.ignore("default")

        def run(k: int) -> None:
            for _ in range(k):
                c.delete(c.reserve())

        run(_warm(n))
        return timed(srv, n, lambda: run(n))


def tubes_raw(srv: Process, count: int, n: int) -> Sample:
    tubes = _tubes(count)
    _fill_tubes(srv.port, tubes, n + _warm(n))
    raw = bs_bench.Raw(srv.port)
    try:
        raw.sock.sendall(b"".join(b"watch %s\r\n" % t.encode() for t in tubes)
                         + b"ignore default\r\n")
        raw.replies(count + 1)

        def run(k: int) -> None:
            for _ in range(k):
                raw.sock.sendall(b"reserve\r\n")
                (job_id,), _ = raw.replies(1)
                raw.sock.sendall(b"delete %d\r\n" % job_id)
                raw.replies(1)

        run(_warm(n))
        return timed(srv, n, lambda: run(n))
    finally:
        raw.close()


def _workq_add(name: str) -> bytes:
    return b"add %s %s %d %d %d\r\n%s\r\n" % (str(uuid.uuid4()).encode(), name.encode(),
                                              TTR * 1000, TTL * 1000, len(bs_bench.BODY),
                                              bs_bench.BODY)


def _fill_names(port: int, names: Sequence[str], n: int) -> None:
    raw = Raw(port)
    try:
        for first in range(0, n, 256):
            batch = range(first, min(first + 256, n))
            raw.send(b"".join(_workq_add(names[i % len(names)]) for i in batch))
            for _ in batch:
                raw.expect(b"+OK")
    finally:
        raw.close()


def names_jobwire(srv: Process, count: int, n: int) -> Sample:
    names = _tubes(count)
    _fill_names(srv.port, names, n + _warm(n))
    with WorkqClient(HOST, srv.port) as c:

        def run(k: int) -> None:
            for _ in range(k):
                c.delete(c.lease(names, wait=1).job_id)

        run(_warm(n))
        return timed(srv, n, lambda: run(n))


def names_raw(srv: Process, count: int, n: int) -> Sample:
    names = _tubes(count)
    _fill_names(srv.port, names, n + _warm(n))
    lease = b"lease %s 1000\r\n" % " ".join(names).encode()
    into = bytearray(len(bs_bench.BODY) + 2)
    raw = Raw(srv.port)
    try:
        def run(k: int) -> None:
            for _ in range(k):
                raw.send(lease)
                raw.expect(b"+OK 1")
                job_id, _name, _ttr, size = raw.line().split(b" ")
                raw.exactly(int(size) + 2, into)
                raw.send(b"delete %s\r\n" % job_id)
                raw.expect(b"+OK")

        run(_warm(n))
        return timed(srv, n, lambda: run(n))
    finally:
        raw.close()


# -- idle connections -------------------------------------------------------------------------


def _first_request(kind: str, port: int) -> None:
    """One request on a new jobwire connection: the server still answers."""
    if kind.startswith("beanstalk"):
        with BeanstalkClient(HOST, port, timeout=60) as b:
            b.stats()
    elif kind.startswith("gearman"):
        with GearmanClient(f"{HOST}:{port}", timeout=60) as g:
            g.echo(b"ping")
    else:
        with WorkqClient(HOST, port, timeout=60) as w:
            w.inspect_server()


def _wait_for_fds(srv: Process, want: int) -> None:
    """Until the server holds ``want`` open files (it has accepted every connection)."""
    deadline = time.monotonic() + 60
    while (have := open_fds(srv.proc.pid)) < want:
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{srv.name} exited with {srv.proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{srv.name} accepted only {have} of {want} files")
        time.sleep(0.002)


def idle_connections(kind: str, checkpoints: Sequence[int]) -> dict[str, Any]:
    """Open idle connections to a fresh ``kind`` up to each checkpoint (32 at a time, then
    until the server has accepted them: gearmand's listen backlog is 32); at each, the
    server's RSS, the bytes per connection, and how long a request on one more connection
    takes."""
    socks: list[socket.socket] = []
    points: list[dict[str, Any]] = []
    connect_wall = connect_cpu = 0.0
    with running(kind) as srv:
        pid = srv.proc.pid
        _first_request(kind, srv.port)  # the event loop runs; imports are done
        time.sleep(0.3)
        base_rss, base_fds = rss_kib(pid), open_fds(pid)
        try:
            for target in checkpoints:
                while len(socks) < target:
                    wall, cpu = time.perf_counter(), time.process_time()
                    for _ in range(min(32, target - len(socks))):
                        socks.append(socket.create_connection((HOST, srv.port), timeout=30))
                    connect_wall += time.perf_counter() - wall
                    connect_cpu += time.process_time() - cpu
                    _wait_for_fds(srv, base_fds + len(socks))
                time.sleep(0.3)
                rss = rss_kib(pid)
                began = time.perf_counter()
                _first_request(kind, srv.port)
                reply_s = time.perf_counter() - began
                per = (rss - base_rss) * 1024 / target
                points.append({"x": target, "server_rss_kib": rss,
                               "bytes_per_connection": round(per),
                               "first_request_ms": round(reply_s * 1e3, 2)})
                print(f"  {kind:<18} {target:>7,} idle: RSS {rss / 1024:7.1f} MiB, "
                      f"{per:7,.0f} B/connection; one more request answered in "
                      f"{reply_s * 1e3:6.1f} ms", flush=True)
            nofile = nofile_of(pid)
        finally:
            for sock in socks:
                sock.close()
    return {
        "server_rss_kib_before": base_rss, "server_nofile": nofile, "points": points,
        "connects_per_s": round(len(socks) / connect_wall, 1) if connect_wall else None,
        "client_cpu_us_per_connect": round(connect_cpu / max(len(socks), 1) * 1e6, 2),
    }


# -- the plan ---------------------------------------------------------------------------------

Measure = Callable[[Process, int, int], Sample]


@dataclass(frozen=True)
class Line:
    """One series: one client against one server, over the points ``xs``."""

    scan: str
    system: str
    client: str  #: "jobwire" or "raw"
    label: str
    server: str
    measure: Measure
    xs: list[int]
    count: Callable[[int], int]  #: operations per timed run at x

    @property
    def key(self) -> str:
        return f"{self.scan}/{self.system}/{self.server}/{self.client}"


SCANS: dict[str, dict[str, str]] = {
    "body_size": {"title": "body size: MB/s of body", "x": "body bytes", "unit": "MB/s"},
    "concurrency": {"title": "concurrency on one AsyncWorker connection, 10 ms handler",
                    "x": "concurrency", "unit": "jobs/s"},
    "watched_tubes": {"title": "beanstalk reserve + delete with N watched tubes",
                      "x": "watched tubes", "unit": "ops/s"},
    "lease_names": {"title": "Workq lease (N names) + delete", "x": "lease names",
                    "unit": "ops/s"},
    "idle_connections": {"title": "idle connections held by each server",
                         "x": "idle connections", "unit": "server RSS"},
}


def plan(quick: bool) -> list[Line]:
    sizes = QUICK_SIZES if quick else SIZES
    budget, most = (16 * MIB, 200) if quick else (128 * MIB, 1000)

    def by_bytes(size: int) -> int:
        return max(2 if quick else 4, min(most, budget // size))

    def by_rate(c: int) -> int:  # ~1.5 s at the ideal rate, at most 20,000 jobs
        full = min(max(int(1.5 * c / HANDLER_S), 150), 20_000)
        return max(full // 5, 20) if quick else full

    def fixed(count: int) -> Callable[[int], int]:
        return lambda _: max(count // 5, 100) if quick else count

    conc = QUICK_CONCURRENCY if quick else CONCURRENCY
    counts = QUICK_COUNTS if quick else COUNTS
    small = [s for s in sizes if s <= WORKQ_MAX] or [100]
    if quick:
        small = sorted({*small, WORKQ_MAX})
    lines = [
        Line("body_size", "beanstalk", "jobwire", "beanstalk put+reserve+delete, jobwire Client",
             "beanstalkd", body_beanstalk_jobwire, sizes, by_bytes),
        Line("body_size", "beanstalk", "raw", "beanstalk put+reserve+delete, raw socket",
             "beanstalkd", body_beanstalk_raw, sizes, by_bytes),
        Line("body_size", "workq", "jobwire", "Workq add, jobwire Client", "workq-bundled",
             body_workq_jobwire, small, by_bytes),
        Line("body_size", "workq", "raw", "Workq add, raw socket", "workq-bundled",
             body_workq_raw, small, by_bytes),
        Line("body_size", "gearman", "jobwire", "Gearman echo, jobwire Client", "gearmand",
             body_gearman_jobwire, sizes, by_bytes),
        Line("body_size", "gearman", "raw", "Gearman echo, raw socket", "gearmand",
             body_gearman_raw, sizes, by_bytes),
        Line("body_size", "qless", "jobwire", "qless put, jobwire Client", "redis",
             body_qless_jobwire, sizes, by_bytes),
        Line("body_size", "qless", "raw", "qless put, raw socket", "redis",
             body_qless_raw, sizes, by_bytes),
        Line("concurrency", "beanstalk", "jobwire", "jobwire AsyncWorker (asyncio)",
             "beanstalkd", concurrency_jobwire, conc, by_rate),
        Line("concurrency", "beanstalk", "raw", "raw socket, lock-step batches of c",
             "beanstalkd", concurrency_raw, conc, by_rate),
    ]
    for server in ("beanstalkd", "beanstalk-bundled"):
        lines += [
            Line("watched_tubes", "beanstalk", "jobwire", f"jobwire Client -> {server}", server,
                 tubes_jobwire, counts, fixed(2000)),
            Line("watched_tubes", "beanstalk", "raw", f"raw socket -> {server}", server,
                 tubes_raw, counts, fixed(2000)),
        ]
    lines += [
        Line("lease_names", "workq", "jobwire", "jobwire Client -> bundled server",
             "workq-bundled", names_jobwire, counts, fixed(2000)),
        Line("lease_names", "workq", "raw", "raw socket -> bundled server", "workq-bundled",
             names_raw, counts, fixed(2000)),
    ]
    return lines


IDLE_SERVERS = ["beanstalk-bundled", "beanstalkd", "gearman-bundled", "gearmand", "workq-bundled"]


# -- running ----------------------------------------------------------------------------------


def summarize(samples: Sequence[Sample], x: int, scan: str) -> dict[str, Any]:
    """One point: the median of the runs' ops/s (and MB/s), client and server CPU µs/op,
    each with the lowest and highest run, the unstable figures with why
    (``report.summarize``), and every sample."""
    point: dict[str, Any] = {"x": x, "n": samples[0].n,
                             **report.summarize([s.to_json() for s in samples])}
    if scan == "body_size":
        for k in ("median", "min", "max"):
            point[f"{k}_mb_per_s"] = round(point[f"{k}_ops_per_s"] * x / 1e6, 2)
        point["median_client_cpu_us_per_mb"] = round(
            point["median_client_cpu_us_per_op"] / (x / 1e6), 2)
    if scan == "concurrency":
        point["ideal_ops_per_s"] = round(x / HANDLER_S, 1)
    point["samples"] = [s.to_json() for s in samples]
    return point


def run_scan(scan: str, lines: Sequence[Line], runs: int) -> list[dict[str, Any]]:
    """Every point of ``lines``: at each x, run 1 of every line, then run 2, ..."""
    out: dict[str, dict[str, Any]] = {
        line.key: {"scan": scan, "system": line.system, "client": line.client,
                   "label": line.label, "server": line.server, "points": []}
        for line in lines
    }
    for x in sorted({x for line in lines for x in line.xs}):
        here = [line for line in lines if x in line.xs]
        samples: dict[str, list[Sample]] = {line.key: [] for line in here}
        for _ in range(runs):
            for line in here:
                with running(line.server, max(16 * MIB, x)) as srv:
                    samples[line.key].append(line.measure(srv, x, line.count(x)))
        for line in here:
            point = summarize(samples[line.key], x, scan)
            out[line.key]["points"].append(point)
            rate = (f"{point['median_mb_per_s']:9,.1f} MB/s" if scan == "body_size"
                    else f"{point['median_ops_per_s']:9,.0f} ops/s")
            print(f"  {x:>10,}  {line.label:<50} {rate}  client CPU "
                  f"{point['median_client_cpu_us_per_op']:10,.1f} µs/op (medians)"
                  + "".join(f"; unstable {k}: {why}" for k, why in point["unstable"].items()),
                  flush=True)
    return list(out.values())


def markdown(series: Sequence[dict[str, Any]]) -> str:
    """A table per scan."""
    out: list[str] = []
    for scan, meta in SCANS.items():
        lines = [s for s in series if s["scan"] == scan]
        if not lines:
            continue
        out += ["", f"{meta['title']}", ""]
        if scan == "idle_connections":
            out += ["| server | connections | server RSS MiB | bytes/connection "
                    "| one more request, ms |", "|---|--:|--:|--:|--:|"]
            for s in lines:
                for p in s["points"]:
                    out.append(f"| {s['server']} | {p['x']:,} "
                               f"| {p['server_rss_kib'] / 1024:,.1f} "
                               f"| {p['bytes_per_connection']:,} | {p['first_request_ms']} |")
            continue
        value = "MB/s" if scan == "body_size" else "ops/s"
        out += [f"| series | {meta['x']} | median {value} | client CPU µs/op, median "
                "| server CPU µs/op, median |", "|---|--:|--:|--:|--:|"]
        for s in lines:
            for p in s["points"]:
                rate = p["median_mb_per_s"] if scan == "body_size" else p["median_ops_per_s"]
                server_cpu = p["median_server_cpu_us_per_op"]
                out.append(f"| {s['label']} ({s['server']}) | {p['x']:,} | {rate:,.1f} "
                           f"| {p['median_client_cpu_us_per_op']:,.1f} "
                           f"| {'?' if server_cpu is None else f'{server_cpu:,.1f}'} |")
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"fewer points and smaller counts, {QUICK_RUNS} timed runs per "
                        "point; writes to benchmarks/results/quick/scaling.json unless --out")
    parser.add_argument("--runs", "--repeats", dest="runs", type=int, default=None,
                        help=f"interleaved timed runs per point; each figure is their median "
                        f"(default {RUNS}; {QUICK_RUNS} with --quick)")
    parser.add_argument("--scans", "--scenarios", dest="scans", default=",".join(SCANS),
                        help="comma-separated subset of: " + ", ".join(SCANS))
    parser.add_argument("--clients", default="",
                        help="keep only these clients: jobwire, raw (default: both; "
                        "idle_connections has no clients)")
    parser.add_argument("--out", "--json", dest="out", type=Path, default=None,
                        help="JSON results file (default benchmarks/results/scaling.json)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scans = [s.strip() for s in args.scans.split(",") if s.strip()]
    unknown = [s for s in scans if s not in SCANS]
    if unknown:
        print(f"unknown scan(s): {', '.join(unknown)}; choose from {', '.join(SCANS)}",
              file=sys.stderr)
        return 2
    runs = args.runs if args.runs is not None else (QUICK_RUNS if args.quick else RUNS)
    if runs < 1:
        print("--runs must be >= 1", file=sys.stderr)
        return 2
    out: Path = args.out or (RESULTS / "quick" if args.quick else RESULTS) / "scaling.json"
    signal.signal(signal.SIGTERM, terminate)
    nofile = raise_nofile()
    wall = time.perf_counter()
    env = environment({
        "beanstalkd": server_version([find_binary("beanstalkd"), "-v"]),
        "gearmand": server_version([find_binary("gearmand", "gearman-job-server"),
                                    "--version"]).split(" - ")[0],
        "redis_server": "redis-server " + server_version(
            [find_binary("redis-server"), "--version"]).partition("v=")[2].split(" ")[0],
        "rlimit_nofile": str(nofile),
    }, ["anyio"])
    print(f"# scaling benchmark{' (quick)' if args.quick else ''}: median of {runs} runs; "
          f"{env['cpu_count']} CPUs, Python {env['python']}; {env['beanstalkd']}; "
          f"{env['gearmand']}; {env['redis_server']}", flush=True)
    series: list[dict[str, Any]] = []
    clients = {c.strip() for c in args.clients.split(",") if c.strip()}
    if clients - {"jobwire", "raw"}:
        print("--clients: choose from jobwire, raw", file=sys.stderr)
        return 2
    lines = [line for line in plan(args.quick) if not clients or line.client in clients]
    for scan in scans:
        print(f"## {scan}: {SCANS[scan]['title']}", flush=True)
        if scan != "idle_connections":
            series += run_scan(scan, [line for line in lines if line.scan == scan], runs)
            continue
        checkpoints = [c for c in (QUICK_IDLE if args.quick else IDLE) if c + 200 <= nofile]
        if not checkpoints:
            print(f"  skipped: RLIMIT_NOFILE is {nofile}")
            continue
        for kind in IDLE_SERVERS:
            series.append({"scan": scan, "system": kind.split("-")[0].removesuffix("d"),
                           "client": "idle sockets", "label": kind, "server": kind,
                           **idle_connections(kind, checkpoints)})
    elapsed = time.perf_counter() - wall
    print(markdown(series))
    print(f"\nwall time {elapsed:.0f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "protocol": "scaling",
        "environment": env,
        "config": {
            "quick": args.quick, "runs": runs,
            "statistic": "per point: " + report.STATISTIC,
            "mb": "10^6 bytes of body",
            "handler_s": HANDLER_S,
            "scans": {s: SCANS[s] for s in scans},
            "wall_time_s": round(elapsed, 1),
        },
        "series": series,
    }, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
