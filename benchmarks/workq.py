"""Throughput of jobwire's Workq clients against a raw socket, on the bundled server.

    .venv/bin/python benchmarks/workq.py            # full run (about a minute on 2 cores)
    .venv/bin/python benchmarks/workq.py --quick    # small counts, a smoke run
    .venv/bin/python benchmarks/workq.py --out /tmp/w.json

Scenarios (every job: 64-byte payload, TTR 60 s, TTL 1 h):

* ``add``: one ``add`` at a time, each waiting for its ``+OK``.
* ``add_pipelined``: ``add`` with a window of 256 in flight (``add_many``; the raw socket keeps
  the same window).
* ``lease_complete``: the queue holds N jobs (added untimed); ``lease`` then ``complete``, one
  job at a time (the raw socket does the same round trips by hand).

Clients: ``jobwire-sync`` (``Client``), ``jobwire-async`` (``AsyncClient`` on asyncio),
``raw`` (a blocking socket writing precomputed bytes and counting reply lines -- the floor of
what any client can cost). Every timed run gets a fresh server process on a free port and a
fresh connection; each client runs ``--repeats`` times round-robin and the best run counts.
The server is the bundled Python one (the real Go server is not packaged here), so these
numbers compare clients against each other, not against Workq's own speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
from _harness import free_port

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workq_client import AsyncClient, Client  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "workq.json"
HOST = "127.0.0.1"
PAYLOAD = b"x" * 64
TTR, TTL = 60, 3600
WINDOW = 256


class ServerProcess:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workq_client.server", "-listen", f"{HOST}:{self.port}"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("server did not start") from None
                time.sleep(0.02)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def add_bytes(name: str) -> bytes:
    return b"add %s %s %d %d %d\r\n%b\r\n" % (
        str(uuid.uuid4()).encode(), name.encode(), TTR * 1000, TTL * 1000, len(PAYLOAD), PAYLOAD)


class Raw:
    """A blocking socket that counts reply lines (enough for +OK / -TIMEOUT framing here)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def read_line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def read_exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.buf += self.sock.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_lease(self) -> bytes:
        assert self.read_line() == b"+OK 1"
        job_id, _name, _ttr, size = self.read_line().split(b" ")
        self.read_exactly(int(size) + 2)
        return job_id

    def close(self) -> None:
        self.sock.close()


def fill(port: int, name: str, n: int) -> None:
    raw = Raw(port)
    for start in range(0, n, WINDOW):
        count = min(WINDOW, n - start)
        raw.sock.sendall(b"".join(add_bytes(name) for _ in range(count)))
        for _ in range(count):
            assert raw.read_line() == b"+OK"
    raw.close()


# -- one function per (scenario, client): set up untimed, return the timed seconds ------------


def sync_add(port: int, n: int) -> float:
    with Client(HOST, port) as client:
        start = time.perf_counter()
        for _ in range(n):
            client.add("bench", PAYLOAD, ttr=TTR, ttl=TTL)
        return time.perf_counter() - start


def sync_add_pipelined(port: int, n: int) -> float:
    with Client(HOST, port) as client:
        start = time.perf_counter()
        client.add_many("bench", (PAYLOAD for _ in range(n)), ttr=TTR, ttl=TTL, window=WINDOW)
        return time.perf_counter() - start


def sync_lease_complete(port: int, n: int) -> float:
    fill(port, "bench", n)
    with Client(HOST, port) as client:
        start = time.perf_counter()
        for _ in range(n):
            job = client.lease("bench", wait=1)
            client.complete(job.job_id, b"ok")
        return time.perf_counter() - start


def _async(fn: Callable[[AsyncClient, int], object]) -> Callable[[int, int], float]:
    def run(port: int, n: int) -> float:
        async def main() -> float:
            async with AsyncClient(HOST, port) as client:
                start = time.perf_counter()
                await fn(client, n)  # type: ignore[misc]
                return time.perf_counter() - start

        return anyio.run(main, backend="asyncio")

    return run


async def _async_add(client: AsyncClient, n: int) -> None:
    for _ in range(n):
        await client.add("bench", PAYLOAD, ttr=TTR, ttl=TTL)


async def _async_add_pipelined(client: AsyncClient, n: int) -> None:
    await client.add_many("bench", (PAYLOAD for _ in range(n)), ttr=TTR, ttl=TTL, window=WINDOW)


async def _async_lease_complete(client: AsyncClient, n: int) -> None:
    for _ in range(n):
        job = await client.lease("bench", wait=1)
        await client.complete(job.job_id, b"ok")


def async_lease_complete(port: int, n: int) -> float:
    fill(port, "bench", n)
    return _async(_async_lease_complete)(port, n)


def raw_add(port: int, n: int) -> float:
    raw = Raw(port)
    commands = [add_bytes("bench") for _ in range(n)]
    start = time.perf_counter()
    for command in commands:
        raw.sock.sendall(command)
        raw.read_line()
    elapsed = time.perf_counter() - start
    raw.close()
    return elapsed


def raw_add_pipelined(port: int, n: int) -> float:
    raw = Raw(port)
    commands = [add_bytes("bench") for _ in range(n)]
    start = time.perf_counter()
    for first in range(0, n, WINDOW):
        chunk = commands[first : first + WINDOW]
        raw.sock.sendall(b"".join(chunk))
        for _ in chunk:
            raw.read_line()
    elapsed = time.perf_counter() - start
    raw.close()
    return elapsed


def raw_lease_complete(port: int, n: int) -> float:
    fill(port, "bench", n)
    raw = Raw(port)
    start = time.perf_counter()
    for _ in range(n):
        raw.sock.sendall(b"lease bench 1000\r\n")
        job_id = raw.read_lease()
        raw.sock.sendall(b"complete %s 2\r\nok\r\n" % job_id)
        assert raw.read_line() == b"+OK"
    elapsed = time.perf_counter() - start
    raw.close()
    return elapsed


SCENARIOS: dict[str, dict[str, Callable[[int, int], float]]] = {
    "add": {"jobwire-sync": sync_add, "jobwire-async": _async(_async_add), "raw": raw_add},
    "add_pipelined": {"jobwire-sync": sync_add_pipelined,
                      "jobwire-async": _async(_async_add_pipelined), "raw": raw_add_pipelined},
    "lease_complete": {"jobwire-sync": sync_lease_complete,
                       "jobwire-async": async_lease_complete, "raw": raw_lease_complete},
}
COUNTS = {"add": 3000, "add_pipelined": 20000, "lease_complete": 2000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    results: dict[str, dict[str, dict[str, float]]] = {}
    for scenario, clients in SCENARIOS.items():
        n = COUNTS[scenario] // (10 if args.quick else 1)
        times: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(repeats):
            for name, fn in clients.items():
                server = ServerProcess()
                try:
                    times[name].append(fn(server.port, n))
                finally:
                    server.stop()
        results[scenario] = {}
        raw_best = n / min(times["raw"])
        print(f"\n{scenario} (n={n}, best of {repeats})")
        for name, runs in times.items():
            best, median = n / min(runs), n / statistics.median(runs)
            results[scenario][name] = {"n": n, "best_ops_s": round(best, 1),
                                       "median_ops_s": round(median, 1),
                                       "ratio_to_raw": round(best / raw_best, 3)}
            print(f"  {name:14} {best:10.0f} ops/s  (median {median:8.0f})  "
                  f"{best / raw_best:5.2f}x raw")
    sync_async = {s: round(r["jobwire-sync"]["best_ops_s"] / r["jobwire-async"]["best_ops_s"], 3)
                  for s, r in results.items()}
    print("\nsync/async ratios:", sync_async)
    document = {
        "server": "workq_client.server (bundled, Python)",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "repeats": repeats,
        "payload_bytes": len(PAYLOAD),
        "window": WINDOW,
        "results": results,
        "sync_over_async": sync_async,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
