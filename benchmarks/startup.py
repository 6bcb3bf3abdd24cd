"""How soon a freshly spawned bundled server answers: spawn to first reply, against a bare Python
process that binds, accepts and answers one line, and against beanstalkd and gearmand.

    scripts/bench startup                  # 7 interleaved runs per row (about a minute)
    scripts/bench startup --quick          # 3 runs (results/quick/startup.json)
    .venv/bin/python benchmarks/startup.py --repeats 11 --out /tmp/startup.json

Why: test suites spawn a server and connect once, soon after (greenstalk's sleeps 0.1 s), so a
server is only as good as its first reply is early (issue 18). Each run starts the process on a
free port with the clock running, connects as soon as the port accepts (retrying every 1 ms),
sends one command and reads the whole reply: ``list-tube-used`` (beanstalk), ``ECHO_REQ``
(Gearman), ``add`` (Workq); the bare process reads one line and answers ``USING default``. It
records when the connection was accepted and when the reply was in, then stops the process
(SIGTERM). Rows run round-robin, one run of each per round, so load drifts hit them alike; each
row reports the median, the fastest and the slowest run, and its median as a multiple of the
bare process's (target: at most 1.5x for the bundled servers).

Rows:

* ``bare``: ``python -c`` with ``socket`` alone: the interpreter's start, the floor.
* ``bare+anyio``: the same after ``import anyio._backends._asyncio``: what a server on anyio's
  asyncio backend pays before a line of it runs (the bundled servers did, until they answered
  on a ``selectors`` loop: ``jobwire._serving``).
* ``beanstalk``, ``gearman``, ``workq``: ``python -m <package>.server`` on the port.
* the same three with ``(.py)``: the project's own modules compiled at every start (no cached
  bytecode for them, as with ``PYTHONDONTWRITEBYTECODE=1`` and a source checkout; the standard
  library and anyio still cached).
* ``beanstalkd``, ``gearmand``: the real servers, for reference.
* with ``--compare DIR``: the bundled servers again, from another checkout (started in ``DIR``
  and with ``DIR`` first on ``PYTHONPATH``), named ``<server>@<DIR's name>``: a before/after
  in one interleaved run.

Bytecode: every Python row runs with ``PYTHONPYCACHEPREFIX`` pointing at a folder of this run,
filled by one untimed start of each row, so the rows compare as an installed package runs (its
``.pyc`` written at install), whatever this environment's own settings. Nothing is pinned to a
CPU: a start is one process, and the benchmark only waits meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import (
    HOST,
    RESULTS,
    ROOT,
    die_with_parent,
    environment,
    find_binary,
    free_port,
    server_version,
    stop_process,
    terminate,
)

TARGET = 1.5  #: spawn-to-first-reply of a bundled server, as a multiple of the bare process's
CONNECT_RETRY = 0.001  #: seconds between connection attempts while the port refuses
GIVE_UP = 30.0  #: seconds without a reply before a run counts as failed

BARE = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(({host!r}, {port}))
s.listen()
c, _ = s.accept()
line = b""
while not line.endswith(b"\\n"):
    line += c.recv(256)
c.sendall(b"USING default\\r\\n")
c.recv(1)
"""

BEANSTALK_REQUEST = b"list-tube-used\r\n"
BEANSTALK_REPLY = b"USING default\r\n"
GEARMAN_REQUEST = b"\0REQ" + struct.pack(">II", 16, 4) + b"ping"  # ECHO_REQ
GEARMAN_REPLY = b"\0RES" + struct.pack(">II", 17, 4) + b"ping"  # ECHO_RES
WORKQ_REQUEST = b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c8 q 60000 3600000 5\r\nhello\r\n"
WORKQ_REPLY = b"+OK\r\n"


@dataclass
class Row:
    """One process to start, the command it gets and the reply it must give."""

    key: str
    label: str
    command: Callable[[int], list[str]]
    request: bytes
    reply: bytes
    env: Mapping[str, str] | None = None  #: for Python rows: the bytecode settings
    #: Where the process starts: ``python -m`` imports from there first (the tree measured).
    cwd: Path | None = None
    bundled: bool = False  #: a bundled server: judged against the target
    connect_s: list[float] = field(default_factory=list)
    reply_s: list[float] = field(default_factory=list)
    error: str | None = None


def first_reply(row: Row) -> tuple[float, float]:
    """Start ``row``'s process; return (seconds to the accepted connection, seconds to the
    complete reply), both from just before the spawn.

    Raises:
        RuntimeError: the process exited, gave no reply within GIVE_UP s, or a wrong one.
    """
    port = free_port()
    command = row.command(port)
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=row.env, cwd=row.cwd, preexec_fn=die_with_parent)
    try:
        while True:  # a bare connect() per attempt: the polling must not slow the start
            sock = socket.socket()
            if sock.connect_ex((HOST, port)) == 0:
                break
            sock.close()
            if proc.poll() is not None or time.perf_counter() - start > GIVE_UP:
                raise RuntimeError(f"{row.key} did not listen (exit {proc.returncode})")
            time.sleep(CONNECT_RETRY)
        connected = time.perf_counter() - start
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(GIVE_UP)
            sock.sendall(row.request)
            got = b""
            while len(got) < len(row.reply):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                got += chunk
            replied = time.perf_counter() - start
        if got != row.reply:
            raise RuntimeError(f"{row.key} answered {got!r}, expected {row.reply!r}")
        return connected, replied
    finally:
        stop_process(proc)
        if proc.stderr is not None:
            proc.stderr.close()


def rows(python: str, pycache: Path, source_pycache: Path, compare: Path | None) -> list[Row]:
    """Every row, in the order each round runs them."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    cached = {**base, "PYTHONPYCACHEPREFIX": str(pycache)}
    source = {**base, "PYTHONPYCACHEPREFIX": str(source_pycache),
              "PYTHONDONTWRITEBYTECODE": "1"}
    # ``python -m`` puts its working directory first on sys.path, ahead of PYTHONPATH: each
    # tree's rows start in that tree.
    trees: list[tuple[str, str, dict[str, str], Path]] = [("", "", {}, ROOT)]
    if compare is not None:
        path = os.pathsep.join(p for p in (str(compare), base.get("PYTHONPATH")) if p)
        trees.append((f"@{compare.name}", f" from {compare}", {"PYTHONPATH": path}, compare))

    def bare(prefix: str) -> Callable[[int], list[str]]:
        return lambda port: [python, "-c", prefix + BARE.format(host=HOST, port=port)]

    servers = [
        ("beanstalk", "beanstalk_client.server", lambda p: ["-l", HOST, "-p", str(p)],
         BEANSTALK_REQUEST, BEANSTALK_REPLY),
        ("gearman", "gearman_client.server", lambda p: ["-L", HOST, "-p", str(p)],
         GEARMAN_REQUEST, GEARMAN_REPLY),
        ("workq", "workq_client.server", lambda p: ["-listen", f"{HOST}:{p}"],
         WORKQ_REQUEST, WORKQ_REPLY),
    ]
    out = [
        Row("bare", "bare python -c (socket only)", bare(""), BEANSTALK_REQUEST,
            BEANSTALK_REPLY, cached),
        Row("bare+anyio", "bare + anyio's asyncio backend imported",
            bare("import anyio._backends._asyncio\n"), BEANSTALK_REQUEST, BEANSTALK_REPLY,
            cached),
    ]
    for env, suffix, note in ((cached, "", ""), (source, " (.py)", ", project compiled")):
        for tree, where, extra, cwd in trees:
            for key, module, flags, request, reply in servers:
                out.append(Row(
                    key + tree + suffix, f"python -m {module}{where}{note}",
                    lambda p, m=module, f=flags: [python, "-m", m, *f(p)],
                    request, reply, {**env, **extra}, cwd=cwd, bundled=True,
                ))
    beanstalkd = find_binary("beanstalkd")
    gearmand = find_binary("gearmand", "gearman-job-server")
    out += [
        Row("beanstalkd", "beanstalkd (C)", lambda p: [beanstalkd, "-l", HOST, "-p", str(p)],
            BEANSTALK_REQUEST, BEANSTALK_REPLY),
        Row("gearmand", "gearmand (C)",
            lambda p: [gearmand, f"--listen={HOST}", f"--port={p}", "--log-file=none",
                       "--threads=0"], GEARMAN_REQUEST, GEARMAN_REPLY),
    ]
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def summary(row: Row, bare_median: float | None) -> dict[str, Any]:
    """The JSON entry of one row."""
    entry: dict[str, Any] = {"row": row.key, "label": row.label, "bundled": row.bundled}
    if row.error is not None or not row.reply_s:
        return {**entry, "error": row.error or "no run"}
    median = statistics.median(row.reply_s)
    entry.update(
        runs=len(row.reply_s),
        median_reply_s=round(median, 4),
        min_reply_s=round(min(row.reply_s), 4),
        max_reply_s=round(max(row.reply_s), 4),
        median_connect_s=round(statistics.median(row.connect_s), 4),
        ratio_to_bare=round(median / bare_median, 2) if bare_median else None,
        reply_s=[round(s, 4) for s in row.reply_s],
        connect_s=[round(s, 4) for s in row.connect_s],
    )
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true",
                        help="3 runs per row; writes to results/quick/startup.json unless --out")
    parser.add_argument("--repeats", "--runs", dest="repeats", type=int, default=None,
                        help="interleaved runs per row (default 7; 3 with --quick)")
    parser.add_argument("--compare", type=Path, default=None, metavar="DIR",
                        help="also run the bundled servers from the checkout in DIR (e.g. a "
                        "git worktree of an earlier commit), interleaved with this one's: rows "
                        "named <server>@<DIR's name>")
    parser.add_argument("--out", "--json", dest="out", type=Path, default=None, metavar="PATH",
                        help="JSON results file (default benchmarks/results/startup.json)")
    args = parser.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 7)
    if repeats < 1:
        parser.error("--repeats must be >= 1")
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS) / "startup.json"
    signal.signal(signal.SIGTERM, terminate)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jobwire-startup-") as tmp:
        pycache, source_pycache = Path(tmp) / "pyc", Path(tmp) / "pyc-source"
        compare = args.compare.resolve() if args.compare is not None else None
        table = rows(sys.executable, pycache, source_pycache, compare)
        # Untimed: fill the bytecode cache (first the cached rows, then copy it without the
        # project's own files for the "(.py)" rows).
        for row in table:
            if row.env is not None and row.env.get("PYTHONPYCACHEPREFIX") == str(pycache):
                with contextlib.suppress(RuntimeError):
                    first_reply(row)
        shutil.copytree(pycache, source_pycache)
        for tree in (ROOT, compare):
            if tree is not None:
                shutil.rmtree(source_pycache / tree.relative_to(tree.anchor), ignore_errors=True)
        for round_ in range(repeats):
            # Rotate the order each round, so no row always runs right after the same one.
            shift = round_ % len(table)
            for row in table[shift:] + table[:shift]:
                if row.error is not None:
                    continue
                try:
                    connected, replied = first_reply(row)
                except (RuntimeError, OSError) as exc:
                    row.error = str(exc)
                    print(f"  {row.key}: {exc}", file=sys.stderr)
                    continue
                row.connect_s.append(connected)
                row.reply_s.append(replied)
    bare = table[0]
    bare_median = statistics.median(bare.reply_s) if bare.reply_s else None
    results = [summary(row, bare_median) for row in table]

    print(f"\nspawn to first reply, {repeats} interleaved runs per row (ms)\n")
    print(f"| {'row':<22} | median | fastest | slowest | accepted | x bare |")
    print(f"|{'-' * 24}|-------:|--------:|--------:|---------:|-------:|")
    for entry in results:
        if "error" in entry:
            print(f"| {entry['row']:<22} | error: {entry['error']}")
            continue
        ratio = entry["ratio_to_bare"]
        print(f"| {entry['row']:<22} | {_ms(entry['median_reply_s']):>6} | "
              f"{_ms(entry['min_reply_s']):>7} | {_ms(entry['max_reply_s']):>7} | "
              f"{_ms(entry['median_connect_s']):>8} | "
              f"{'' if ratio is None else f'{ratio:.2f}':>6} |")
    print(f"\ntarget: a bundled server's median within {TARGET}x of the bare process's")
    for entry in results:
        if entry["bundled"] and "error" not in entry and entry["ratio_to_bare"] is not None:
            met = "met" if entry["ratio_to_bare"] <= TARGET else "missed"
            print(f"  {entry['row']:<22} {entry['ratio_to_bare']:.2f}x  {met}")

    document = {
        "protocol": "startup",
        "environment": environment({
            "beanstalkd": server_version([find_binary("beanstalkd"), "-v"]),
            "gearmand": server_version([find_binary("gearmand", "gearman-job-server"),
                                        "--version"]),
        }, []),
        "config": {"quick": args.quick, "repeats": repeats, "target_ratio": TARGET,
                   "statistic": "median of interleaved runs, each a fresh process; fastest "
                   "and slowest run as the spread; ratio = median / bare's median",
                   "wall_time_s": round(time.monotonic() - began, 1)},
        "results": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults written to {out}")
    return 1 if any("error" in entry for entry in results) else 0


if __name__ == "__main__":
    sys.exit(main())
