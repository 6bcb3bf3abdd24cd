"""Throughput and client CPU of jobwire's Workq clients against a raw socket, on the bundled
server (the real Workq server is not on this machine: the bundled one stands in).

    scripts/bench workq                    # the full run (about a minute on 2 cores)
    scripts/bench workq --quick            # a smoke run with small counts (results/quick/)
    .venv/bin/python benchmarks/workq.py --scenarios add --out /tmp/w.json

Scenarios (every job: 64-byte payload, TTR 60 s, TTL 1 h, a fresh UUID):

* ``add``: one ``add`` at a time, each waiting for its ``+OK``.
* ``add_many``: ``add`` with at most 256 unanswered (``add_many(window=256)``; the raw socket
  keeps the same window and refills it once half of it is answered).
* ``lease_complete``: the queue holds N jobs (added untimed); ``lease`` then ``complete``, one
  job at a time (the raw socket does the same round trips by hand).

Clients: ``jobwire-sync`` (``Client``), ``jobwire-async`` (``AsyncClient`` on asyncio),
``raw`` (a blocking socket writing command bytes built before the clock starts and counting
reply lines: the floor of what any client can cost). How it measures (``_harness``): every
timed run gets a fresh server process on a free port and a fresh connection, after a short
untimed warm-up run on that server; each client runs ``--runs`` (5) times round-robin and each
figure is the median of the runs, with the lowest and highest. The server is the bundled
Python one, so these numbers compare clients with each other and with the raw socket on the
same server, not against Workq's own speed.
"""

from __future__ import annotations

import signal
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

import anyio
from _harness import (
    HOST,
    ROOT,
    Bench,
    Clock,
    Process,
    Sample,
    arguments,
    choose,
    environment,
    finish,
    free_port,
    spawn,
    terminate,
    timed,
    write_document,
)
from _harness import Spec as _Spec

from workq_client import AsyncClient, Client

PROTOCOL = "workq"
NAME = "bench"
PAYLOAD = b"x" * 64
TTR, TTL = 60, 3600
WINDOW = 256


def start_server() -> Process:
    """The bundled Workq server on a free loopback port."""
    port = free_port()
    return spawn("workq_client.server",
                 [sys.executable, "-m", "workq_client.server", "-listen", f"{HOST}:{port}"],
                 port, cwd=ROOT)


def add_bytes(name: str) -> bytes:
    return b"add %s %s %d %d %d\r\n%b\r\n" % (
        str(uuid.uuid4()).encode(), name.encode(), TTR * 1000, TTL * 1000, len(PAYLOAD), PAYLOAD)


class Raw:
    """A blocking socket that reads reply lines (enough for the +OK / -ERROR framing here)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def read_line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        if line.startswith(b"-"):
            raise RuntimeError(f"the server answered {line!r}")
        return line

    def ok_lines(self, count: int) -> None:
        """Read ``count`` one-line replies, each ``+OK`` (compared as a block of bytes)."""
        ok = b"+OK\r\n"
        while count:
            take = min(len(self.buf) // len(ok), count)
            if not take:
                self._fill()
                continue
            if self.buf[: take * len(ok)] != ok * take:
                raise RuntimeError(f"not +OK: {self.buf[:80]!r}")
            self.buf = self.buf[take * len(ok) :]
            count -= take

    def read_exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_lease(self) -> bytes:
        if (line := self.read_line()) != b"+OK 1":
            raise RuntimeError(f"lease answered {line!r}")
        job_id, _name, _ttr, size = self.read_line().split(b" ")
        self.read_exactly(int(size) + 2)
        return job_id

    def close(self) -> None:
        self.sock.close()


def fill(port: int, name: str, n: int) -> None:
    """Add ``n`` jobs to ``name`` through a raw socket (untimed)."""
    raw = Raw(port)
    try:
        for start in range(0, n, WINDOW):
            count = min(WINDOW, n - start)
            raw.sock.sendall(b"".join(add_bytes(name) for _ in range(count)))
            raw.ok_lines(count)
    finally:
        raw.close()


# -- the measurements: (server, n) -> Sample; connections open before the clock starts ---------


def sync_add(srv: Process, n: int) -> Sample:
    with Client(HOST, srv.port) as client:

        def run() -> None:
            for _ in range(n):
                client.add(NAME, PAYLOAD, ttr=TTR, ttl=TTL)

        return timed(srv, n, run)


def sync_add_many(srv: Process, n: int) -> Sample:
    with Client(HOST, srv.port) as client:
        return timed(srv, n, lambda: client.add_many(
            NAME, (PAYLOAD for _ in range(n)), ttr=TTR, ttl=TTL, window=WINDOW))


def sync_add_many_unbudgeted(srv: Process, n: int) -> Sample:
    with Client(HOST, srv.port) as client:
        return timed(srv, n, lambda: client.add_many(
            NAME, (PAYLOAD for _ in range(n)), ttr=TTR, ttl=TTL, window=WINDOW, max_bytes=None))


def sync_lease_complete(srv: Process, n: int) -> Sample:
    with Client(HOST, srv.port) as client:

        def run() -> None:
            for _ in range(n):
                job = client.lease(NAME, wait=1)
                client.complete(job.job_id, b"ok")

        return timed(srv, n, run)


def on_asyncio(fn: Callable[[AsyncClient, int], Awaitable[object]]
               ) -> Callable[[Process, int], Sample]:
    """A measurement of ``fn(client, n)`` on a connected AsyncClient (asyncio); the clock
    runs inside the event loop."""

    def measure(srv: Process, n: int) -> Sample:
        async def main() -> Sample:
            async with AsyncClient(HOST, srv.port) as client:
                clock = Clock(srv)
                clock.start()
                await fn(client, n)
                clock.stop()
                return clock.sample(n)

        result: Sample = anyio.run(main, backend="asyncio")
        return result

    return measure


async def _async_add(client: AsyncClient, n: int) -> None:
    for _ in range(n):
        await client.add(NAME, PAYLOAD, ttr=TTR, ttl=TTL)


async def _async_add_many(client: AsyncClient, n: int) -> None:
    await client.add_many(NAME, (PAYLOAD for _ in range(n)), ttr=TTR, ttl=TTL, window=WINDOW)


async def _async_add_many_unbudgeted(client: AsyncClient, n: int) -> None:
    await client.add_many(NAME, (PAYLOAD for _ in range(n)), ttr=TTR, ttl=TTL, window=WINDOW,
                          max_bytes=None)


async def _async_lease_complete(client: AsyncClient, n: int) -> None:
    for _ in range(n):
        job = await client.lease(NAME, wait=1)
        await client.complete(job.job_id, b"ok")


def raw_add(srv: Process, n: int) -> Sample:
    raw = Raw(srv.port)
    commands = [add_bytes(NAME) for _ in range(n)]

    def run() -> None:
        for command in commands:
            raw.sock.sendall(command)
            raw.ok_lines(1)

    try:
        return timed(srv, n, run)
    finally:
        raw.close()


def raw_add_many(srv: Process, n: int) -> Sample:
    raw = Raw(srv.port)
    commands = [add_bytes(NAME) for _ in range(n)]

    def run() -> None:
        sent = answered = 0
        while answered < n:
            if sent < n and sent - answered <= WINDOW // 2:
                batch = min(WINDOW - (sent - answered), n - sent)
                raw.sock.sendall(b"".join(commands[sent : sent + batch]))
                sent += batch
            count = min(sent - answered, WINDOW // 2) or (sent - answered)
            raw.ok_lines(count)
            answered += count

    try:
        return timed(srv, n, run)
    finally:
        raw.close()


def raw_lease_complete(srv: Process, n: int) -> Sample:
    raw = Raw(srv.port)

    def run() -> None:
        for _ in range(n):
            raw.sock.sendall(b"lease %s 1000\r\n" % NAME.encode())
            job_id = raw.read_lease()
            raw.sock.sendall(b"complete %s 2\r\nok\r\n" % job_id)
            raw.ok_lines(1)

    try:
        return timed(srv, n, run)
    finally:
        raw.close()


# -- the plan ----------------------------------------------------------------------------------

MeasureFn = Callable[[Process, int], Sample]
Spec = _Spec[MeasureFn]

SCENARIOS: dict[str, str] = {
    "add": "add, one at a time",
    "add_many": f"add_many, at most {WINDOW} unanswered (raw: the same window)",
    "lease_complete": "lease + complete, one job at a time (queue pre-filled)",
}


def plan(quick: bool) -> dict[str, list[Spec]]:
    """Counts aim at about one second per timed run on a small 2-core VM; ``quick`` takes a
    fifth of that."""

    def k(full: int) -> int:
        return max(full // 5, 200) if quick else full

    def row(scenario: str, sync: MeasureFn, asyncio_: MeasureFn, raw: MeasureFn, n: int,
            prefill: int | None = None) -> list[Spec]:
        base = (scenario, "raw")
        return [
            Spec("jobwire-sync", "jobwire Client", sync, k(n), prefill, baseline=base),
            Spec("jobwire-async", "jobwire AsyncClient (asyncio)", asyncio_, k(n), prefill,
                 baseline=base),
            Spec("raw", "raw socket", raw, k(n), prefill),
        ]

    return {
        "add": row("add", sync_add, on_asyncio(_async_add), raw_add, 3_000),
        "add_many": [
            *row("add_many", sync_add_many, on_asyncio(_async_add_many), raw_add_many, 20_000),
            # The byte budget (4096 unanswered bytes, kept for Workq 0.2.0's read buffer) lifted:
            # the same window as the raw socket, to show what the budget costs.
            Spec("jobwire-sync-unbudgeted", "jobwire Client, max_bytes=None",
                 sync_add_many_unbudgeted, k(20_000), baseline=("add_many", "raw")),
            Spec("jobwire-async-unbudgeted", "jobwire AsyncClient (asyncio), max_bytes=None",
                 on_asyncio(_async_add_many_unbudgeted), k(20_000), baseline=("add_many", "raw")),
        ],
        "lease_complete": row("lease_complete", sync_lease_complete,
                              on_asyncio(_async_lease_complete), raw_lease_complete, 2_000, 0),
    }


def once(spec: Spec) -> Sample:
    """One timed run on a fresh server, after a short untimed warm-up run on it."""
    srv = start_server()
    try:
        warm = max(spec.n // 20, 20)
        if spec.prefill is not None:
            fill(srv.port, NAME, warm + spec.prefill)
        spec.measure(srv, warm)
        if spec.prefill is not None:
            fill(srv.port, NAME, spec.n + spec.prefill)
        return spec.measure(srv, spec.n)
    finally:
        srv.stop()


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments(PROTOCOL, "Benchmark jobwire's Workq clients against a raw socket on "
                       "the bundled Workq server.", SCENARIOS)
    args = parser.parse_args(argv)
    scenarios, clients, runs, out = choose(args, PROTOCOL, SCENARIOS)
    signal.signal(signal.SIGTERM, terminate)

    wall = time.perf_counter()
    # The real Workq server is not on this machine: the bundled one stands in.
    env = environment({"workq_server": "bundled workq_client.server (Python)"}, [])
    print(f"# workq benchmark{' (quick)' if args.quick else ''}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), Python {env['python']}, "
          "the bundled Workq server")
    print(f"median of {runs} interleaved timed runs per row; ops/s = jobs per second; each "
          "run on a fresh server on 127.0.0.1\n")
    bench = Bench(runs, once)
    order = bench.run(plan(args.quick), SCENARIOS, scenarios, clients)
    elapsed = time.perf_counter() - wall
    document = write_document(out, PROTOCOL, env, {
        "quick": args.quick, "runs": runs, "payload_bytes": len(PAYLOAD),
        "ttr_s": TTR, "ttl_s": TTL, "window": WINDOW,
        "scenarios": {s: SCENARIOS[s] for s in scenarios},
        "clients": sorted(clients) or "all",
        "wall_time_s": round(elapsed, 1),
    }, order)
    finish(PROTOCOL, document, order)
    print(f"\nwall time {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
