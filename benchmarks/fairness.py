"""How long one flooding connection makes everyone else wait on the bundled servers (issue 19).

    scripts/bench fairness                   # 5 interleaved rounds (about 5 minutes)
    scripts/bench fairness --quick           # 2 rounds, shorter phases (results/quick/)
    .venv/bin/python benchmarks/fairness.py --compare /tmp/before   # before/after, one run

A probe client sends one cheap command every 0.2 s on its own connection (``list-tube-used``,
``ECHO_REQ``, ``delete`` of an unknown id) and times each answer (3 s timeout, counted as 3 s).
Each scenario runs it twice on a fresh server: for ``--seconds`` with nothing else going on
(``idle``), then for as long while one other connection floods the server with pipelined
commands, read as fast as the server answers them so that back-pressure never pauses the
flood (``flood``). The figure is the probe's slowest answer in each phase, and their ratio;
target: under the flood at most 3x the slowest answer without it.

Floods (what issue 19's audit sent):

* ``beanstalk put``: ``put`` of 100-byte jobs; ``beanstalk peek``: ``peek`` of one job of
  100 bytes, nothing stored meanwhile;
* ``gearman submit``: ``SUBMIT_JOB_BG`` of 100-byte jobs for a function nobody serves;
* ``workq add``: ``add`` of 100-byte jobs.

Rounds run round-robin over the scenarios (and over the trees with ``--compare DIR``: the
bundled servers again, run from another checkout ``DIR``, whose packages ``python -m``
imports first), so load drifts hit them alike; each row reports the median of the rounds'
slowest answers, with the smallest and the largest. Writes
``benchmarks/results/fairness.json`` (``--quick``: ``results/quick/fairness.json``).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import HOST, RESULTS, ROOT, environment, free_port, spawn

#: How often the probe asks, and how long it waits for an answer.
PERIOD = 0.2
TIMEOUT = 3.0
#: What each flooding job carries.
BODY = b"b" * 100


def _gearman(kind: int, body: bytes) -> bytes:
    return b"\0REQ" + struct.pack(">II", kind, len(body)) + body


@dataclass(frozen=True)
class Scenario:
    name: str
    module: str
    flags: Callable[[int], list[str]]
    #: Sent once before the phases (on its own connection), with the bytes of its replies.
    setup: bytes
    setup_reply: bytes
    #: One flooding command (repeated), and the probe's command and complete reply.
    flood: Callable[[], bytes]
    probe: bytes
    probe_reply: bytes


def _beanstalk_put() -> bytes:
    return b"put 0 0 60 %d\r\n%s\r\n" % (len(BODY), BODY)


def _workq_add() -> bytes:
    return b"add %s q 60000 60000 %d\r\n%s\r\n" % (
        str(uuid.uuid4()).encode(), len(BODY), BODY)


_BEANSTALK = ("beanstalk_client.server", lambda p: ["-l", HOST, "-p", str(p)])
SCENARIOS = [
    Scenario("beanstalk put", *_BEANSTALK, b"", b"", _beanstalk_put,
             b"list-tube-used\r\n", b"USING default\r\n"),
    Scenario("beanstalk peek", *_BEANSTALK, _beanstalk_put(), b"INSERTED 1\r\n",
             lambda: b"peek 1\r\n", b"list-tube-used\r\n", b"USING default\r\n"),
    Scenario("gearman submit", "gearman_client.server", lambda p: ["-L", HOST, "-p", str(p)],
             b"", b"", lambda: _gearman(18, b"nobody\0\0" + BODY),
             _gearman(16, b"ping"), b"\0RES" + struct.pack(">II", 17, 4) + b"ping"),
    Scenario("workq add", "workq_client.server", lambda p: ["-listen", f"{HOST}:{p}"],
             b"", b"", _workq_add,
             b"delete 00000000-0000-4000-8000-000000000000\r\n", b"-NOT-FOUND\r\n"),
]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def probe(sock: socket.socket, scenario: Scenario) -> float:
    """One probe: the seconds to its whole answer (``TIMEOUT`` if none came in time)."""
    start = time.monotonic()
    sock.settimeout(TIMEOUT)
    try:
        sock.sendall(scenario.probe)
        reply = _read_exactly(sock, len(scenario.probe_reply))
    except TimeoutError:
        return TIMEOUT
    assert reply == scenario.probe_reply, reply
    return time.monotonic() - start


#: The flooding client, run as its own process: in this one its threads would share the
#: probe's GIL, and the probe would wait for them (up to the 5 ms switch interval per wait)
#: however fast the server answered. It connects, prints ``served`` once the first reply is
#: in, floods until a line arrives on its stdin, then prints the bytes it sent.
FLOOD_CLIENT = """
import contextlib, socket, sys, threading
host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
block = open(path, "rb").read()
sock = socket.create_connection((host, port), timeout=10)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sock.settimeout(None)
stop = threading.Event()
sent = 0
def send():
    global sent
    with contextlib.suppress(OSError):
        while not stop.is_set():
            sock.sendall(block)
            sent += len(block)
def read():
    first = True
    with contextlib.suppress(OSError):
        while chunk := sock.recv(1 << 16):
            if first:
                print("served", flush=True)
                first = False
threads = [threading.Thread(target=send, daemon=True), threading.Thread(target=read, daemon=True)]
for thread in threads:
    thread.start()
sys.stdin.readline()
stop.set()
with contextlib.suppress(OSError):
    sock.shutdown(socket.SHUT_RDWR)
sock.close()
print(sent, flush=True)
"""


class Flood:
    """One connection, in its own process, sending pipelined commands as fast as the server
    takes them, its replies read (and dropped) by a second thread as fast as they come."""

    def __init__(self, port: int, scenario: Scenario) -> None:
        self._block = tempfile.NamedTemporaryFile(suffix=".flood")  # noqa: SIM115 - closed on exit
        self._block.write(b"".join(scenario.flood() for _ in range(2000)))
        self._block.flush()
        self._port = port
        self.sent = 0

    def __enter__(self) -> Flood:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", FLOOD_CLIENT, HOST, str(self._port), self._block.name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()  # the flood is being served
        if line.strip() != "served":
            self.__exit__()
            raise RuntimeError(f"the flooding client failed: {line!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self._proc.communicate("stop\n", timeout=30)
        self.sent = int(out.split()[-1]) if out.split() else 0
        self._block.close()


def run_once(scenario: Scenario, tree: Path | None, seconds: float) -> dict[str, Any]:
    """Both phases on a fresh server: the probe's answer times, idle and under the flood."""
    port = free_port()
    # ``python -m`` imports from its working directory first: the tree's own packages.
    server = spawn(scenario.name, [sys.executable, "-m", scenario.module,
                                   *scenario.flags(port)], port, cwd=tree or ROOT)
    try:
        if scenario.setup:
            with socket.create_connection((HOST, port), timeout=5) as sock:
                sock.sendall(scenario.setup)
                _read_exactly(sock, len(scenario.setup_reply))
        idle = _probe_for(port, scenario, seconds)
        with Flood(port, scenario) as flood:
            flooded = _probe_for(port, scenario, seconds)
        flood_mb = flood.sent / 1e6
    finally:
        server.stop()
    return {"idle": idle, "flood": flooded, "flood_mb": flood_mb}


def _probe_for(port: int, scenario: Scenario, seconds: float) -> list[float]:
    """Probe every ``PERIOD`` for ``seconds`` on one connection (a new one after a timeout,
    whose answer would come late), after one untimed probe."""
    times: list[float] = []
    sock = _connect(port)
    try:
        probe(sock, scenario)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            times.append(probe(sock, scenario))
            if times[-1] >= TIMEOUT:
                sock.close()
                sock = _connect(port)
            time.sleep(max(0.0, PERIOD - (time.monotonic() - started)))
    finally:
        sock.close()
    return times


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3 s phases")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="length of each phase")
    parser.add_argument("--compare", type=Path, action="append", default=[],
                        help="another checkout whose bundled servers run too (before/after); "
                             "may be given more than once")
    parser.add_argument("--only", default=None, help="run the scenarios whose name has this")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)
    seconds = args.seconds or (3.0 if args.quick else 5.0)
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS) / "fairness.json"
    trees: list[tuple[str, Path | None]] = [("", None)]
    trees += [(f"@{tree.name}", tree.resolve()) for tree in args.compare]
    scenarios = [s for s in SCENARIOS if args.only is None or args.only in s.name]
    runs: dict[str, list[dict[str, Any]]] = {}
    for number in range(rounds):
        for scenario in scenarios:
            for suffix, tree in trees:
                row = scenario.name + suffix
                result = run_once(scenario, tree, seconds)
                runs.setdefault(row, []).append(result)
                print(f"round {number + 1}/{rounds} {row:<28} slowest idle "
                      f"{max(result['idle']) * 1000:7.1f} ms, under flood "
                      f"{max(result['flood']) * 1000:7.1f} ms ({result['flood_mb']:.1f} MB sent)",
                      flush=True)
    rows = []
    print(f"\n| scenario | slowest idle, ms | slowest under flood, ms | ratio | "
          f"timeouts (>{TIMEOUT:g} s) | MB flooded |")
    print("|---|---|---|---|---|---|")
    for row, results in runs.items():
        idle = [max(r["idle"]) for r in results]
        flood = [max(r["flood"]) for r in results]
        ratios = [f / i for f, i in zip(flood, idle, strict=True)]
        timeouts = sum(t >= TIMEOUT for r in results for t in r["flood"])
        probes = sum(len(r["flood"]) for r in results)
        mb = statistics.median(r["flood_mb"] for r in results)
        rows.append({"scenario": row, "slowest_idle_s": summary(idle),
                     "slowest_flood_s": summary(flood), "ratio": summary(ratios),
                     "flood_timeouts": timeouts, "flood_probes": probes, "flood_mb": mb,
                     "runs": results})
        print(f"| {row} | {_ms(idle)} | {_ms(flood)} | {statistics.median(ratios):.1f}x "
              f"({min(ratios):.1f}-{max(ratios):.1f}) | {timeouts} of {probes} | {mb:.0f} |")
    document = {
        "protocol": "fairness",
        "environment": environment({}, ()),
        "config": {"rounds": rounds, "seconds": seconds, "period_s": PERIOD,
                   "timeout_s": TIMEOUT, "body_bytes": len(BODY), "quick": args.quick,
                   "target": "slowest answer under a flood <= 3x the slowest without one"},
        "results": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"results written to {out}")


def _ms(values: list[float]) -> str:
    return (f"{statistics.median(values) * 1000:.0f} "
            f"({min(values) * 1000:.0f}-{max(values) * 1000:.0f})")


if __name__ == "__main__":
    main()
