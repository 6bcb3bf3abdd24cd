"""Throughput and client CPU of jobwire's Gearman clients against pygearman and a raw socket,
side by side in one run against a real ``gearmand``.

    scripts/bench gearman                  # the full run (about 2 minutes on 2 cores)
    scripts/bench gearman --quick          # a smoke run with small counts (results/quick/)
    .venv/bin/python benchmarks/gearman.py --scenarios fg_1 --out /tmp/g.json

Scenarios (N jobs each):

* ``bg_single``: background submits one at a time (send, wait for JOB_CREATED, repeat).
* ``bg_bulk``: background submits in bulk: jobwire's ``submit_background_many`` (window 512),
  pygearman's ``submit_multiple_jobs(background=True)``, raw: every packet in one write.

The raw socket writes the packets jobwire writes, built before the clock starts, and counts
the reply packets it waits for by their headers: the floor of what any client costs.
* ``fg_1``: foreground round trips, one in flight, with one worker.
* ``fg_100``: foreground jobs with 100 in flight, one worker (jobwire sync: ``submit_many``
  with a window of 100; jobwire async: 100 tasks calling ``submit``; pygearman: batches of 100
  via ``submit_multiple_jobs``; raw: batches of 100 pipelined).

How it measures (``_harness``): every timed run gets its own ``gearmand`` on a free 127.0.0.1
port, a fresh function name and fresh connections, set up before the clock starts, after a
short untimed warm-up run of the same client on that server. The foreground scenarios use the
same worker for every client, registered before the clock starts: libgearman's own
``gearman -w -f FUNC`` (C; it answers each job with an empty result), or, without
gearman-tools, a raw-socket worker process on jobwire's Sans-IO core. Each client runs
``--runs`` (5) times round-robin; each figure is the median of the runs, with the lowest and
highest. Client CPU is this process's; server CPU is gearmand's (the worker's is not
counted). On a 2-core machine client, worker and gearmand share the CPUs, so the foreground
numbers measure gearmand and the worker as much as the clients.
"""

from __future__ import annotations

import importlib
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from _harness import (
    HOST,
    ROOT,
    Bench,
    Clock,
    Process,
    RawSocket,
    Sample,
    arguments,
    choose,
    environment,
    find_binary,
    finish,
    free_port,
    place_server,
    server_version,
    spawn,
    stop_process,
    terminate,
    timed,
    write_document,
)
from _harness import Spec as _Spec

# This file is called gearman.py: keep its folder off the path so ``import gearman`` finds
# pygearman, not this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from gearman_client import AsyncClient, Client  # noqa: E402
from gearman_client import _packets as pk  # noqa: E402
from gearman_client._protocol import Connection  # noqa: E402

pygearman: Any
try:
    pygearman = importlib.import_module("gearman")  # pygearman (untyped)
except ImportError:  # pragma: no cover
    pygearman = None

PROTOCOL = "gearman"
FG_WINDOW = 100  #: jobs in flight in fg_100
JOB_CREATED, WORK_COMPLETE, ERROR = 8, 13, 19  #: reply packet types the raw socket reads

WORKER_SCRIPT = r"""
import socket, sys
sys.path.insert(0, sys.argv[3])
from gearman_client import _packets as pk
from gearman_client._events import NEED_DATA, Answer
from gearman_client._protocol import Connection
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
conn = Connection()
sock.sendall(conn.send(pk.CanDo(sys.argv[2].encode())) + conn.send(pk.GrabJobUniq()))
while True:
    data = sock.recv(1 << 18)
    if not data:
        break
    conn.receive_data(data)
    out = b""
    while (event := conn.next_event()) is not NEED_DATA:
        if isinstance(event, Answer):
            reply = event.reply
            if isinstance(reply, pk.NoJob):
                out += conn.send(pk.PreSleep())
            else:
                out += conn.send(pk.WorkComplete(reply.handle, reply.data))
                out += conn.send(pk.GrabJobUniq())
        elif isinstance(event, pk.Noop):
            out += conn.send(pk.GrabJobUniq())
    if out:
        sock.sendall(out)
"""


# -- gearmand and its worker -------------------------------------------------------------------


class Gearmand:
    """A ``gearmand`` on a free loopback port, and at most one worker process."""

    def __init__(self) -> None:
        port = free_port()
        self.process: Process = spawn(
            "gearmand",
            [find_binary("gearmand", "gearman-job-server"), f"--listen={HOST}", f"--port={port}",
             "--log-file=none", "--threads=0"], port)
        self.port = port
        self.url = f"gearman://{HOST}:{port}"
        self.worker: subprocess.Popen[bytes] | None = None

    def start_worker(self, function: str) -> None:
        """Start the worker for ``function``; return once gearmand counts it as available."""
        try:
            tool = find_binary("gearman", "gearman-tools")
            command = [tool, "-h", HOST, "-p", str(self.port), "-w", "-f", function]
        except SystemExit:
            command = [sys.executable, "-c", WORKER_SCRIPT, str(self.port), function, str(ROOT)]
        self.worker = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        place_server(self.worker.pid)
        deadline = time.monotonic() + 10
        while self.available_workers(function) < 1:
            if self.worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker for {function} did not register")
            time.sleep(0.005)

    def available_workers(self, function: str) -> int:
        """The workers gearmand lists for ``function`` (admin ``status``)."""
        with socket.create_connection((HOST, self.port), timeout=5) as sock:
            sock.sendall(b"status\n")
            data = b""
            while not (data == b".\n" or data.endswith(b"\n.\n")):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        for line in data.decode().splitlines():
            fields = line.split("\t")
            if len(fields) == 4 and fields[0] == function:
                return int(fields[3])
        return 0

    def cpu_seconds(self) -> float | None:
        return self.process.cpu_seconds()

    def stop(self) -> None:
        if self.worker is not None:
            stop_process(self.worker)
        self.process.stop()


# -- the clients: (gearmand, function, n) -> Sample --------------------------------------------


class Raw(RawSocket):
    """A blocking socket writing prebuilt packets and counting the reply packets of one type
    by their 12-byte headers (an ERROR packet raises): the floor of what any client costs."""

    def count(self, kind: int, n: int) -> None:
        """Read until ``n`` packets of type ``kind`` have arrived."""
        buf = self.buf
        got = pos = 0
        while got < n:
            if len(buf) - pos >= 12:
                ptype, size = struct.unpack_from(">II", buf, pos + 4)
                if len(buf) - pos >= 12 + size:
                    if ptype == kind:
                        got += 1
                    elif ptype == ERROR:
                        raise RuntimeError(f"gearmand: {bytes(buf[pos + 12 : pos + 12 + size])!r}")
                    pos += 12 + size
                    continue
            del buf[:pos]
            pos = 0
            data = self.sock.recv(1 << 18)
            if not data:
                raise ConnectionError("gearmand closed the connection")
            buf += data
        del buf[:pos]


def measure_raw(scenario: str, g: Gearmand, fn: str, n: int) -> Sample:
    raw = Raw(g.port)
    f = fn.encode()
    bg = Connection().send(pk.SubmitJobBg(f, b"", b"x"))  # the bytes jobwire writes
    fg = Connection().send(pk.SubmitJob(f, b"", b"x"))

    def go() -> None:
        if scenario == "bg_single":
            for _ in range(n):
                raw.sock.sendall(bg)
                raw.count(JOB_CREATED, 1)
        elif scenario == "bg_bulk":
            raw.sock.sendall(bg * n)
            raw.count(JOB_CREATED, n)
        elif scenario == "fg_1":
            for _ in range(n):
                raw.sock.sendall(fg)
                raw.count(WORK_COMPLETE, 1)
        else:
            for _ in range(n // FG_WINDOW):
                raw.sock.sendall(fg * FG_WINDOW)
                raw.count(WORK_COMPLETE, FG_WINDOW)

    try:
        return timed(g, n, go)
    finally:
        raw.close()


def measure_sync(scenario: str, g: Gearmand, fn: str, n: int) -> Sample:
    with Client(g.url, timeout=60) as client:
        client.echo(b"connect")

        def go() -> None:
            if scenario == "bg_single":
                for _ in range(n):
                    client.submit_background(fn, b"x")
            elif scenario == "bg_bulk":
                client.submit_background_many([(fn, b"x")] * n)
            elif scenario == "fg_1":
                for _ in range(n):
                    client.submit(fn, b"x")
            else:
                client.submit_many([(fn, b"x")] * n, window=FG_WINDOW)

        return timed(g, n, go)


async def _measure_async(scenario: str, g: Gearmand, fn: str, n: int) -> Sample:
    async with AsyncClient(g.url, timeout=60) as client:
        await client.echo(b"connect")
        clock = Clock(g)
        clock.start()
        if scenario == "bg_single":
            for _ in range(n):
                await client.submit_background(fn, b"x")
        elif scenario == "bg_bulk":
            await client.submit_background_many([(fn, b"x")] * n)
        elif scenario == "fg_1":
            for _ in range(n):
                await client.submit(fn, b"x")
        else:
            async def lane(count: int) -> None:
                for _ in range(count):
                    await client.submit(fn, b"x")

            async with anyio.create_task_group() as tg:
                for _ in range(FG_WINDOW):
                    tg.start_soon(lane, n // FG_WINDOW)
        clock.stop()
        return clock.sample(n)


def measure_async(scenario: str, g: Gearmand, fn: str, n: int) -> Sample:
    result: Sample = anyio.run(_measure_async, scenario, g, fn, n, backend="asyncio")
    return result


def measure_pygearman(scenario: str, g: Gearmand, fn: str, n: int) -> Sample:
    if pygearman is None:
        raise ModuleNotFoundError("No module named 'gearman'")
    client = pygearman.GearmanClient([f"{HOST}:{g.port}"])
    for connection in client.connection_list:  # connect before the clock starts
        client.establish_connection(connection)

    def go() -> None:
        if scenario == "bg_single":
            for _ in range(n):
                request = client.submit_job(fn, "x", background=True, wait_until_complete=False,
                                            poll_timeout=60)
                if not request.job.handle:
                    raise RuntimeError("pygearman: no job handle")
        elif scenario == "bg_bulk":
            done = client.submit_multiple_jobs([{"task": fn, "data": "x"}] * n, background=True,
                                               wait_until_complete=False, poll_timeout=60)
            if not all(r.job.handle for r in done):
                raise RuntimeError("pygearman: a job without a handle")
        elif scenario == "fg_1":
            for _ in range(n):  # without poll_timeout pygearman 0.2.6 does not wait at all
                if client.submit_job(fn, "x", poll_timeout=60).state != "COMPLETE":
                    raise RuntimeError("pygearman: a job did not complete")
        else:
            for _ in range(n // FG_WINDOW):
                done = client.submit_multiple_jobs(
                    [{"task": fn, "data": "x"} for _ in range(FG_WINDOW)], poll_timeout=60)
                if not all(r.state == "COMPLETE" for r in done):
                    raise RuntimeError("pygearman: a job did not complete")

    try:
        return timed(g, n, go)
    finally:
        client.shutdown()


# -- the plan ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One client in one scenario: ``run(gearmand, function, n)``."""

    scenario: str
    client: Callable[[str, Gearmand, str, int], Sample]

    def __call__(self, g: Gearmand, fn: str, n: int) -> Sample:
        return self.client(self.scenario, g, fn, n)


Spec = _Spec[Run]

SCENARIOS: dict[str, str] = {
    "bg_single": "background submit, one at a time",
    "bg_bulk": "background submit, bulk",
    "fg_1": "foreground round trip, 1 in flight",
    "fg_100": f"foreground, {FG_WINDOW} in flight",
}


def plan(quick: bool) -> dict[str, list[Spec]]:
    """Counts aim at about one second per timed run on a small 2-core VM; ``quick`` takes a
    fifth (at least 200; fg_100 a multiple of 100)."""

    def k(full: int) -> int:
        return max(full // 5 // FG_WINDOW * FG_WINDOW, 200) if quick else full

    counts = {"bg_single": k(5_000), "bg_bulk": k(50_000), "fg_1": k(3_000),
              "fg_100": k(20_000)}
    out: dict[str, list[Spec]] = {}
    for scenario, n in counts.items():
        out[scenario] = [
            Spec("jobwire-sync", "jobwire Client", Run(scenario, measure_sync), n,
                 baseline=(scenario, "pygearman")),
            Spec("jobwire-async", "jobwire AsyncClient (asyncio)",
                 Run(scenario, measure_async), n, baseline=(scenario, "pygearman")),
            Spec("pygearman", "pygearman 0.2.6", Run(scenario, measure_pygearman), n,
                 baseline=(scenario, "raw"), may_fail=True),
            Spec("raw", "raw socket (prebuilt packets)", Run(scenario, measure_raw), n),
        ]
    return out


def once(spec: Spec) -> Sample:
    """One timed run on a fresh gearmand (with its worker for the foreground scenarios),
    after a short untimed warm-up run on it."""
    g = Gearmand()
    try:
        fn = f"b-{uuid.uuid4().hex[:8]}"
        scenario = spec.measure.scenario
        if scenario.startswith("fg"):
            g.start_worker(fn)
        spec.measure(g, fn, FG_WINDOW if scenario == "fg_100" else max(spec.n // 20, 20))
        return spec.measure(g, fn, spec.n)
    finally:
        g.stop()


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments(PROTOCOL, "Benchmark jobwire's Gearman clients against pygearman and a "
                       "raw socket on a real gearmand.", SCENARIOS)
    args = parser.parse_args(argv)
    scenarios, clients, runs, out = choose(args, PROTOCOL, SCENARIOS)
    signal.signal(signal.SIGTERM, terminate)

    wall = time.perf_counter()
    version = server_version([find_binary("gearmand", "gearman-job-server"), "--version"])
    env = environment({"gearmand": version.split(" - ")[0]}, ["pygearman"])
    print(f"# gearman benchmark{' (quick)' if args.quick else ''}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), Python {env['python']}, "
          f"{env['gearmand']}")
    print(f"median of {runs} interleaved timed runs per row; ops/s = jobs per second; each "
          "run on a fresh gearmand on 127.0.0.1\n")
    bench = Bench(runs, once)
    order = bench.run(plan(args.quick), SCENARIOS, scenarios, clients)
    elapsed = time.perf_counter() - wall
    document = write_document(out, PROTOCOL, env, {
        "quick": args.quick, "runs": runs, "payload_bytes": 1,
        "fg_window": FG_WINDOW, "worker": "gearman -w (libgearman, C)",
        "scenarios": {s: SCENARIOS[s] for s in scenarios},
        "clients": sorted(clients) or "all",
        "wall_time_s": round(elapsed, 1),
    }, order)
    finish(PROTOCOL, document, order)
    print(f"\nwall time {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
