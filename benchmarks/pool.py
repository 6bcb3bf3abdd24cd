"""Sixteen threads putting to beanstalkd: a ``ClientPool`` (size 4 and 16) against a client per
thread and against one client behind a lock.

    .venv/bin/python benchmarks/pool.py              # 7 interleaved runs per row (about 2 min)
    .venv/bin/python benchmarks/pool.py --quick      # 3 runs of 3,200 puts (results/quick/)
    .venv/bin/python benchmarks/pool.py --runs 9 --clients pool-4,locked

What a web app's producers do: many threads, each putting one job at a time (``put``, one
round trip each) into one tube. The rows:

* ``pool-4``, ``pool-16``: ``pool.put(body, tube=...)`` on one ``beanstalk_client.ClientPool``
  of that size (each put checks a client out, checks its connection, puts, gives it back);
* ``per-thread``: each thread its own ``Client`` (16 connections, no sharing: the floor of
  client CPU, and what a pool of 16 approaches);
* ``locked``: one ``Client`` behind a ``threading.Lock`` (one connection, one put at a time).

How it measures (``_harness``): every timed run gets its own beanstalkd on a free port; the
connections are opened and the tube ``use``d before the clock starts (a pool's by checking all
of its clients out at once); the clock runs from the moment all 16 threads are released
together until the last put is answered. Rows run round-robin (run 1 of every row, then run
2 ...), so drift on the shared machine hits them alike. Each row reports the median of its runs
with the slowest and fastest as the spread, for ops/s (wall) and this process's CPU µs per put
(``time.process_time()``: all threads, syscalls included); beanstalkd's CPU µs per put from
/proc. The benchmark process is pinned to one CPU and beanstalkd to the others (as every
protocol benchmark here): 16 threads of one process share one core and the GIL, as a
gunicorn worker's threads do.

Writes ``benchmarks/results/pool.json`` (the harness's document; ``summary`` holds the medians
and spreads the table shows); docs/performance.md ("Pooled clients") quotes its table.
"""

from __future__ import annotations

import contextlib
import signal
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from _harness import (
    HOST,
    Bench,
    Clock,
    Result,
    Sample,
    Spec,
    arguments,
    choose,
    environment,
    find_binary,
    free_port,
    server_version,
    spawn,
    terminate,
    write_document,
)
from _harness import Process as Server

from beanstalk_client import Client, ClientPool

PROTOCOL = "pool"
THREADS = 16
BODY = b"x" * 64
PUT_ARGS: dict[str, Any] = {"priority": 65536, "delay": 0, "ttr": 60}
SCENARIOS = {"put16": f"{THREADS} threads, each putting one job at a time into one tube"}

#: ``work(server, tube, n)`` sets up, then runs ``n`` puts from 16 threads under the clock.
Measure = Callable[[Server, str, int], Sample]


def start_server() -> Server:
    port = free_port()
    return spawn("beanstalkd", [find_binary("beanstalkd"), "-l", HOST, "-p", str(port),
                                "-z", "65535"], port)


def _threads(server: Server, n: int, put: Callable[[int], object],
             setup: Callable[[int], None] = lambda i: None) -> Sample:
    """``THREADS`` threads, each calling ``setup(i)`` untimed and then ``put(i)`` ``n //
    THREADS`` times; the clock starts when all are released together."""
    per = n // THREADS
    clock = Clock(server)
    ready = threading.Barrier(THREADS, action=clock.start)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            setup(i)
            ready.wait()
            for _ in range(per):
                put(i)
        except BaseException as exc:
            errors.append(exc)
            ready.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    clock.stop()
    if errors:
        raise errors[0]
    return clock.sample(per * THREADS)


def pooled(size: int) -> Measure:
    def measure(server: Server, tube: str, n: int) -> Sample:
        with ClientPool(HOST, server.port, size=size) as pool:
            with contextlib.ExitStack() as stack:  # open every connection, on the tube
                for _ in range(size):
                    stack.enter_context(pool.client()).use(tube)
            if pool.stats.idle != size:
                raise RuntimeError(f"{pool.stats.idle} of {size} clients idle")
            sample = _threads(server, n, lambda i: pool.put(BODY, tube=tube, **PUT_ARGS))
            if pool.stats.opened != size:
                raise RuntimeError(f"the pool opened {pool.stats.opened} clients")
            return sample
    return measure


def per_thread(server: Server, tube: str, n: int) -> Sample:
    clients = [Client(HOST, server.port) for _ in range(THREADS)]

    def use(i: int) -> None:
        clients[i].use(tube)

    try:
        return _threads(server, n, lambda i: clients[i].put(BODY, **PUT_ARGS), use)
    finally:
        for client in clients:
            client.close()


def locked(server: Server, tube: str, n: int) -> Sample:
    lock = threading.Lock()
    with Client(HOST, server.port) as client:
        client.use(tube)

        def put(i: int) -> None:
            with lock:
                client.put(BODY, **PUT_ARGS)

        return _threads(server, n, put)


def plan(quick: bool) -> list[Spec[Measure]]:
    n = 3_200 if quick else 24_000  # a multiple of THREADS
    return [
        Spec("pool-4", "ClientPool(size=4): pool.put", pooled(4), n),
        Spec("pool-16", "ClientPool(size=16): pool.put", pooled(16), n),
        Spec("per-thread", "a Client per thread (16 connections)", per_thread, n),
        Spec("locked", "one Client behind a Lock", locked, n),
    ]


def once(spec: Spec[Measure]) -> Sample:
    """One timed run on a fresh beanstalkd, after an untimed warm-up run on it."""
    server = start_server()
    try:
        spec.measure(server, f"warm-{uuid.uuid4().hex[:8]}", THREADS * 20)
        return spec.measure(server, f"bench-{uuid.uuid4().hex[:8]}", spec.n)
    finally:
        server.stop()


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def summary(results: Sequence[Result]) -> list[dict[str, Any]]:
    """Per row: the median, slowest and fastest run of ops/s, client and server CPU µs/put."""
    rows: list[dict[str, Any]] = []
    for r in results:
        if not r.ok:
            rows.append({"client": r.client, "label": r.label, "error": r.error})
            continue
        server = [s.server_us for s in r.samples if s.server_us is not None]
        rows.append({
            "client": r.client, "label": r.label, "runs": len(r.samples),
            "ops_per_s": _spread([s.ops for s in r.samples]),
            "client_cpu_us_per_op": _spread([s.client_us for s in r.samples]),
            "server_cpu_us_per_op": _spread(server) if server else None,
        })
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table docs/performance.md quotes."""
    lines = ["| 16 threads putting | ops/s, median (min-max) | client CPU µs/put, median "
             "(min-max) | beanstalkd CPU µs/put |", "|---|--:|--:|--:|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['label']} | {row['error']} | | |")
            continue
        ops, cpu, srv = row["ops_per_s"], row["client_cpu_us_per_op"], row["server_cpu_us_per_op"]
        lines.append(
            f"| {row['label']} | {ops['median']:,.0f} ({ops['min']:,.0f}-{ops['max']:,.0f}) "
            f"| {cpu['median']:.1f} ({cpu['min']:.1f}-{cpu['max']:.1f}) "
            f"| {'?' if srv is None else format(srv['median'], '.1f')} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments(PROTOCOL, "16 threads putting to beanstalkd: ClientPool vs a client "
                       "per thread vs a locked client.", SCENARIOS)
    args = parser.parse_args(argv)
    if args.runs is None and not args.quick:
        args.runs = 7
    scenarios, clients, runs, out = choose(args, PROTOCOL, SCENARIOS)
    signal.signal(signal.SIGTERM, terminate)
    wall = time.perf_counter()
    env = environment({"beanstalkd": server_version([find_binary("beanstalkd"), "-v"])}, [])
    print(f"# pool benchmark{' (quick)' if args.quick else ''}: {SCENARIOS['put16']}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), Python {env['python']}, "
          f"{env['beanstalkd']}; {runs} interleaved run(s) per row\n")
    bench = Bench(runs, once)
    results = bench.run({"put16": plan(args.quick)}, SCENARIOS, scenarios, clients)
    rows = summary(results)
    elapsed = time.perf_counter() - wall
    write_document(out, PROTOCOL, env, {
        "quick": args.quick, "runs": runs, "threads": THREADS,
        "body_bytes": len(BODY), "put_args": PUT_ARGS,
        "scenarios": {s: SCENARIOS[s] for s in scenarios},
        "clients": sorted(clients) or "all", "wall_time_s": round(elapsed, 1),
        "spread": "median of the interleaved runs, with the slowest and the fastest",
    }, results, summary=rows)
    print()
    print(table(rows))
    print(f"\nwall time {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
