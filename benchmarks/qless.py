"""Throughput and client CPU of jobwire's qless clients and workers against the raw RESP round
trip of the same ``EVALSHA`` on one connection (and qless-py 0.11.4 where it works), side by
side in one run against a real ``redis-server``.

    scripts/bench qless                   # the full run (about 90 s on 2 cores)
    scripts/bench qless --quick           # a smoke run with small counts (results/quick/)
    .venv/bin/python benchmarks/qless.py --scenarios put,worker --clients jobwire-sync,raw
    .venv/bin/python benchmarks/qless.py --out /tmp/q.json    # default results/qless.json

Scenarios (every job: class ``bench.Noop``, the same small JSON object as data, default
priority and retries, queue ``bench``):

* ``put``: one ``put`` at a time, each waiting for its jid.
* ``put_many``: pipelined ``put`` (``put_many``, at most 512 unanswered); the raw socket keeps
  the same window and refills it the same way (when half of it has been answered).
* ``pop_complete``: the queue holds N jobs (put untimed); ``pop`` (count 1) then ``complete``,
  one job at a time.
* ``worker``: the queue holds N jobs; a worker with a no-op handler on ONE connection, timed
  from ``run()`` until it returns after its handler saw the N-th job and stopped it (a graceful
  stop returns once every popped job's ``complete`` is answered: the time until all N are
  complete). The raw rows pipeline by hand what a worker of that concurrency does: each write
  carries the ``complete`` of the last batch and the next ``pop <B>``.

Clients: ``jobwire-sync`` (``Client``), ``jobwire-asyncio`` / ``jobwire-trio``
(``AsyncClient`` on either anyio backend), ``raw`` (a blocking socket writing the very bytes
jobwire writes for the call, built untimed from the ``qless_client._scripts`` call builders, and
parsing replies minimally: the floor of what any client can cost), and ``qless-py`` (0.11.4, as
``qless``, running the qless-core script it ships). That script writes into the standard
``table`` library (``function table.extend``), which Redis >= 6.2.7 makes read-only, so every
call fails as shipped; the row runs it with that one function made local, applied in memory
when the client is made (:func:`qless_core_fixed`), which is what a qless-py deployment on
Redis 7 has to run. The raw pop + complete fills each popped jid into a ``complete``
template (what a minimal client has to do) and sends one ``now`` (taken after the pre-fill)
for the whole run.

How it measures:

* Every timed run gets its own ``redis-server`` (``--save '' --appendonly no``) on a free
  127.0.0.1 port, stopped right after (and on any error). A short untimed warm-up run of the
  same client comes first on that server, then ``FLUSHALL``, then the pre-fill, then the timed
  run on a fresh connection that has already connected and loaded the script (the sync
  ``Worker`` opens its own connection inside the timed run).
* Each client runs ``--runs`` (5) times, round-robin within a scenario; each figure is the
  median of the runs, with the lowest and highest. ``client CPU µs/op`` is this process's CPU
  time (``time.process_time()``, all threads) over the timed window per operation: unlike
  wall time it barely moves when other processes share the machine.
  ``server CPU µs/op`` is redis-server's, from ``/proc``.
* Every jobwire row names its baseline, the raw row it is compared with (ops/s: higher is
  better; CPU: how many times the raw socket's CPU per operation jobwire spends).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from _harness import (
    HOST,
    Bench,
    Clock,
    RawSocket,
    Sample,
    arguments,
    choose,
    environment,
    find_binary,
    finish,
    first_line,
    free_port,
    server_version,
    spawn,
    terminate,
    timed,
    write_document,
)
from _harness import Process as RedisServer
from _harness import Spec as _Spec

from qless_client import AsyncClient, AsyncJob, AsyncWorker, Client, Job, Worker, new_jid
from qless_client import _scripts as sc
from qless_client._resp import encode_command

PROTOCOL = "qless"
QUEUE = "bench"
KLASS = "bench.Noop"
DATA: dict[str, Any] = {"id": 1, "body": "x" * 40}  #: every job's data (JSON, ~60 bytes)
DATA_TEXT = json.dumps(DATA, separators=(",", ":"))  #: as jobwire encodes it
WORKER = "bench-worker"  #: the worker name of every client (jobwire and raw)
WINDOW = 512  #: put_many's default window; the raw pipeline keeps the same
JID_RE = re.compile(rb'"jid":"([^"]+)"')


# -- redis-server ------------------------------------------------------------------------------


def _pong(port: int) -> bool:
    raw = Raw(port)
    try:
        return raw.call(b"*1\r\n$4\r\nPING\r\n") == b"PONG"
    finally:
        raw.close()


def start_redis() -> RedisServer:
    """A ``redis-server`` without persistence on a free loopback port, answering ``PING``."""
    port = free_port()
    folder = tempfile.mkdtemp(prefix="jobwire-bench-redis-")
    return spawn(
        "redis-server",
        [find_binary("redis-server"), "--bind", HOST, "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", folder, "--logfile", ""],
        port, ready=_pong, cleanup=lambda: shutil.rmtree(folder, ignore_errors=True),
        poll=0.01)


@contextlib.contextmanager
def running() -> Iterator[RedisServer]:
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()


def redis_version() -> str:
    found = re.search(r"v=(\S+)", server_version([find_binary("redis-server"), "--version"]))
    return found.group(1) if found else "?"


# -- the raw socket: the floor ---------------------------------------------------------------


class Raw(RawSocket):
    """A blocking socket speaking just enough RESP2 to measure: bytes are written as given,
    replies parsed minimally (simple strings, integers, bulk strings; an error raises)."""



    def reply(self) -> bytes | int | None:
        buf = self.buf
        while True:
            i = buf.find(b"\r\n")
            if i >= 0:
                kind = buf[0]
                if kind == 0x24:  # $: a bulk string
                    size = int(buf[1:i])
                    if size < 0:
                        del buf[: i + 2]
                        return None
                    end = i + 2 + size
                    if len(buf) >= end + 2:
                        value = bytes(buf[i + 2 : end])
                        del buf[: end + 2]
                        return value
                else:
                    line = bytes(buf[1:i])
                    del buf[: i + 2]
                    if kind == 0x2D:  # -: an error
                        raise RuntimeError(f"redis-server answered -{line.decode()}")
                    return int(line) if kind == 0x3A else line
            self._fill()

    def call(self, data: bytes) -> bytes | int | None:
        self.sock.sendall(data)
        return self.reply()

    def load_script(self) -> None:
        if self.call(encode_command(["SCRIPT", "LOAD", sc.SOURCE])) != sc.SHA.encode():
            raise RuntimeError("SCRIPT LOAD answered another SHA")

    def pipelined(self, commands: Sequence[bytes], window: int) -> None:
        """Send ``commands`` with at most ``window`` unanswered, refilling the window once
        half of it has been answered (as jobwire's pipeline does); read every reply."""
        n = len(commands)
        sent = answered = 0
        while answered < n:
            if sent < n and sent - answered <= window // 2:
                batch = min(window - (sent - answered), n - sent)
                self.sock.sendall(b"".join(commands[sent : sent + batch]))
                sent += batch
            self.reply()
            answered += 1


def evalsha(call: sc.ScriptCall[Any]) -> bytes:
    """The bytes of ``call``: what jobwire's ``evalsha`` writes for it."""
    return encode_command(call.command_line())


def put_commands(n: int) -> list[bytes]:
    now = time.time()
    return [evalsha(sc.put(now, QUEUE, new_jid(), KLASS, DATA_TEXT)) for _ in range(n)]


def pop_command(now: float, count: int) -> bytes:
    return evalsha(sc.pop(now, QUEUE, WORKER, count))


def complete_template(now: float) -> list[bytes]:
    """``complete`` of a job by WORKER, split where its (32-character) jid goes:
    ``jid.join(parts)`` is the command."""
    mark = "J" * 32
    return evalsha(sc.complete(now, mark, WORKER, QUEUE, DATA_TEXT)).split(mark.encode())


def flushall(port: int) -> None:
    raw = Raw(port)
    try:
        if raw.call(b"*1\r\n$8\r\nFLUSHALL\r\n") != b"OK":
            raise RuntimeError("FLUSHALL failed")
    finally:
        raw.close()


def prefill(port: int, n: int) -> None:
    """Put ``n`` jobs into QUEUE with jobwire's pipelined put (untimed)."""
    with Client((HOST, port), worker_name=WORKER) as client:
        client.queue(QUEUE).put_many([(KLASS, DATA)] * n)




# -- the measurements: (server, n) -> Sample; connections open before the clock starts --------

MeasureFn = Callable[[RedisServer, int], Sample]

# put, one at a time


def put_jobwire_sync(srv: RedisServer, n: int) -> Sample:
    with Client((HOST, srv.port), worker_name=WORKER) as client:
        client.config_get("heartbeat")  # connected, script loaded
        queue = client.queue(QUEUE)

        def run() -> None:
            for _ in range(n):
                queue.put(KLASS, DATA)

        return timed(srv, n, run)


async def _put_jobwire_async(srv: RedisServer, n: int) -> Sample:
    async with AsyncClient((HOST, srv.port), worker_name=WORKER) as client:
        await client.config_get("heartbeat")
        queue = client.queue(QUEUE)
        clock = Clock(srv)
        clock.start()
        for _ in range(n):
            await queue.put(KLASS, DATA)
        clock.stop()
        return clock.sample(n)


def put_raw(srv: RedisServer, n: int) -> Sample:
    commands = put_commands(n)
    raw = Raw(srv.port)
    try:
        raw.load_script()

        def run() -> None:
            for command in commands:
                raw.sock.sendall(command)
                raw.reply()

        return timed(srv, n, run)
    finally:
        raw.close()


# put_many (pipelined)


def put_many_jobwire_sync(srv: RedisServer, n: int) -> Sample:
    with Client((HOST, srv.port), worker_name=WORKER) as client:
        client.config_get("heartbeat")
        queue = client.queue(QUEUE)
        jobs = [(KLASS, DATA)] * n
        return timed(srv, n, lambda: queue.put_many(jobs, window=WINDOW))


async def _put_many_jobwire_async(srv: RedisServer, n: int) -> Sample:
    async with AsyncClient((HOST, srv.port), worker_name=WORKER) as client:
        await client.config_get("heartbeat")
        queue = client.queue(QUEUE)
        jobs = [(KLASS, DATA)] * n
        clock = Clock(srv)
        clock.start()
        await queue.put_many(jobs, window=WINDOW)
        clock.stop()
        return clock.sample(n)


def put_many_raw(srv: RedisServer, n: int) -> Sample:
    commands = put_commands(n)
    raw = Raw(srv.port)
    try:
        raw.load_script()
        return timed(srv, n, lambda: raw.pipelined(commands, WINDOW))
    finally:
        raw.close()


# pop + complete, one job at a time (the harness pre-fills the queue)


def pc_jobwire_sync(srv: RedisServer, n: int) -> Sample:
    with Client((HOST, srv.port), worker_name=WORKER) as client:
        client.config_get("heartbeat")
        queue = client.queue(QUEUE)

        def run() -> None:
            for _ in range(n):
                [job] = queue.pop(1)
                job.complete()

        return timed(srv, n, run)


async def _pc_jobwire_async(srv: RedisServer, n: int) -> Sample:
    async with AsyncClient((HOST, srv.port), worker_name=WORKER) as client:
        await client.config_get("heartbeat")
        queue = client.queue(QUEUE)
        clock = Clock(srv)
        clock.start()
        for _ in range(n):
            [job] = await queue.pop(1)
            await job.complete()
        clock.stop()
        return clock.sample(n)


def pc_raw(srv: RedisServer, n: int) -> Sample:
    """``pop 1``, the jid found in the reply filled into the ``complete`` template, sent."""
    now = time.time()
    pop, parts = pop_command(now, 1), complete_template(now)
    raw = Raw(srv.port)
    try:
        raw.load_script()

        def run() -> None:
            for _ in range(n):
                reply = raw.call(pop)
                assert isinstance(reply, bytes)
                found = JID_RE.search(reply)
                if found is None:
                    raise RuntimeError(f"pop found no job: {reply[:80]!r}")
                if raw.call(found.group(1).join(parts)) != b"complete":
                    raise RuntimeError("complete did not answer 'complete'")

        return timed(srv, n, run)
    finally:
        raw.close()


def pc_raw_pipelined(batch: int, srv: RedisServer, n: int) -> Sample:
    """What a worker of concurrency ``batch`` does, by hand: each write carries the
    ``complete`` of every job of the last ``pop`` and the next ``pop <batch>``."""
    now = time.time()
    parts = complete_template(now)
    pops = {count: pop_command(now, count) for count in range(1, batch + 1)}
    raw = Raw(srv.port)
    try:
        raw.load_script()

        def run() -> None:
            popped = 0
            held: list[bytes] = []
            while True:
                count = min(batch, n - popped)
                out = b"".join(jid.join(parts) for jid in held)
                if count:
                    out += pops[count]
                if not out:
                    return
                raw.sock.sendall(out)
                for _ in held:
                    if raw.reply() != b"complete":
                        raise RuntimeError("complete did not answer 'complete'")
                held = []
                if count:
                    reply = raw.reply()
                    assert isinstance(reply, bytes)
                    held = JID_RE.findall(reply)
                    if not held:
                        raise RuntimeError(f"pop found no job after {popped} of {n}")
                    popped += len(held)

        return timed(srv, n, run)
    finally:
        raw.close()


# workers, ONE connection each (the harness pre-fills the queue with exactly N jobs)


async def _async_worker(concurrency: int, srv: RedisServer, n: int) -> Sample:
    async with AsyncClient((HOST, srv.port), worker_name=WORKER) as client:
        await client.config_get("heartbeat")
        worker = AsyncWorker(client, queues=[QUEUE], concurrency=concurrency)
        seen = 0

        async def handler(job: AsyncJob) -> None:
            nonlocal seen
            seen += 1
            if seen == n:
                worker.stop()

        clock = Clock(srv)
        clock.start()
        await worker.run(handler, handle_signals=False)
        clock.stop()
    if worker.stats.completed != n:
        raise RuntimeError(f"the worker completed {worker.stats.completed} of {n} jobs")
    return clock.sample(n)


def sync_worker(concurrency: int, srv: RedisServer, n: int) -> Sample:
    worker = Worker((HOST, srv.port), queues=[QUEUE], concurrency=concurrency,
                    worker_name=WORKER)
    lock = threading.Lock()
    seen = 0

    def handler(job: Job) -> None:
        nonlocal seen
        with lock:
            seen += 1
            last = seen == n
        if last:
            worker.stop()

    sample = timed(srv, n, lambda: worker.run(handler, handle_signals=False))
    if worker.stats.completed != n:
        raise RuntimeError(f"the worker completed {worker.stats.completed} of {n} jobs")
    return sample


def on(backend: str, fn: Callable[[RedisServer, int], Any]) -> MeasureFn:
    """``fn`` (an async measurement) run with ``anyio.run`` on ``backend``."""

    def measure(srv: RedisServer, n: int) -> Sample:
        result: Sample = anyio.run(fn, srv, n, backend=backend)
        return result

    return measure


# qless-py 0.11.4 (its own key space: every run is on a fresh, flushed server)

_HERE = Path(__file__).resolve().parent


def qless_py() -> ModuleType:
    """Import qless-py's ``qless`` (this file is ``qless.py`` too: its folder, which Python put
    first on ``sys.path``, is left out while importing)."""
    module = sys.modules.get("qless")
    if module is not None and getattr(module, "Client", None) is not None:
        return module
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    try:
        sys.modules.pop("qless", None)
        return importlib.import_module("qless")
    finally:
        sys.path[:] = saved


def qless_core_fixed() -> str:
    """qless-core's script as qless-py 0.11.4 ships it, with its one Redis 7 fix: the global
    ``function table.extend`` (Redis 7's standard tables are read-only) made a local."""
    source = (Path(qless_py().__file__).parent / "qless-core" / "qless.lua").read_text()
    return source.replace(
        "function table.extend(self, other)", "local function table_extend(self, other)"
    ).replace("table.extend(", "table_extend(")


def qless_py_client(srv: RedisServer) -> Any:
    """A qless-py client on ``srv`` running :func:`qless_core_fixed`."""
    client = qless_py().Client(f"redis://{HOST}:{srv.port}", hostname=WORKER)
    client._lua = client.redis.register_script(qless_core_fixed())
    return client


def put_qless_py(srv: RedisServer, n: int) -> Sample:
    client = qless_py_client(srv)
    queue = client.queues[QUEUE]

    def run() -> None:
        for _ in range(n):
            queue.put(KLASS, DATA)

    return timed(srv, n, run)


def pc_qless_py(srv: RedisServer, n: int) -> Sample:
    client = qless_py_client(srv)
    queue = client.queues[QUEUE]
    for _ in range(n):  # its own jobs, put by its own script (untimed)
        queue.put(KLASS, DATA)

    def run() -> None:
        for _ in range(n):
            job = queue.pop()
            job.complete()

    return timed(srv, n, run)


# -- the plan --------------------------------------------------------------------------------

Spec = _Spec[MeasureFn]

SCENARIOS: dict[str, str] = {
    "put": "put, one at a time (each waits for its jid)",
    "put_many": f"pipelined put: put_many, at most {WINDOW} unanswered (raw: the same window)",
    "pop_complete": "pop (count 1) + complete, one job at a time (queue pre-filled)",
    "worker": "worker, no-op handler, ONE connection, N pre-put jobs until all complete",
}


def plan(quick: bool) -> dict[str, list[Spec]]:
    """Counts aim at about one second per timed run on a small 2-core VM; ``quick`` takes a
    fifth of that."""

    def k(full: int) -> int:
        return max(full // 5, 200) if quick else full

    put_raw_ = ("put", "raw")
    pm_raw = ("put_many", "raw")
    pc_raw_ = ("pop_complete", "raw")
    return {
        "put": [
            Spec("jobwire-sync", "jobwire Client", put_jobwire_sync, k(3_000), baseline=put_raw_),
            Spec("jobwire-asyncio", "jobwire AsyncClient (asyncio)",
                 on("asyncio", _put_jobwire_async), k(3_000), baseline=put_raw_),
            Spec("jobwire-trio", "jobwire AsyncClient (trio)",
                 on("trio", _put_jobwire_async), k(3_000), baseline=put_raw_),
            Spec("raw", "raw socket, same EVALSHA", put_raw, k(6_000)),
            Spec("qless-py", "qless-py 0.11.4 (Redis 7 fix)", put_qless_py, k(3_000),
                 may_fail=True),
        ],
        "put_many": [
            Spec("jobwire-sync", "jobwire Client.put_many", put_many_jobwire_sync, k(8_000),
                 baseline=pm_raw),
            Spec("jobwire-asyncio", "jobwire AsyncClient.put_many (asyncio)",
                 on("asyncio", _put_many_jobwire_async), k(8_000), baseline=pm_raw),
            Spec("jobwire-trio", "jobwire AsyncClient.put_many (trio)",
                 on("trio", _put_many_jobwire_async), k(8_000), baseline=pm_raw),
            Spec("raw", f"raw socket, pipelined (window {WINDOW})", put_many_raw, k(8_000)),
        ],
        "pop_complete": [
            Spec("jobwire-sync", "jobwire Client", pc_jobwire_sync, k(1_800), 0,
                 baseline=pc_raw_),
            Spec("jobwire-asyncio", "jobwire AsyncClient (asyncio)",
                 on("asyncio", _pc_jobwire_async), k(1_300), 0, baseline=pc_raw_),
            Spec("jobwire-trio", "jobwire AsyncClient (trio)",
                 on("trio", _pc_jobwire_async), k(1_300), 0, baseline=pc_raw_),
            Spec("raw", "raw socket, same EVALSHAs", pc_raw, k(2_400), 0),
            Spec("qless-py", "qless-py 0.11.4 (Redis 7 fix)", pc_qless_py, k(1_000),
                 may_fail=True),
        ],
        "worker": [
            Spec("asyncio-c1", "jobwire AsyncWorker c=1 (asyncio)",
                 on("asyncio", partial(_async_worker, 1)), k(1_000), 0, baseline=pc_raw_),
            Spec("asyncio-c16", "jobwire AsyncWorker c=16 (asyncio)",
                 on("asyncio", partial(_async_worker, 16)), k(3_000), 0,
                 baseline=("worker", "raw-pipe-16")),
            Spec("trio-c16", "jobwire AsyncWorker c=16 (trio)",
                 on("trio", partial(_async_worker, 16)), k(3_000), 0,
                 baseline=("worker", "raw-pipe-16")),
            Spec("sync-c4", "jobwire Worker c=4 (threads)", partial(sync_worker, 4), k(2_400),
                 0, baseline=("worker", "raw-pipe-4")),
            Spec("raw-pipe-4", "raw socket, pop 4 + complete 4 pipelined",
                 partial(pc_raw_pipelined, 4), k(3_600), 0),
            Spec("raw-pipe-16", "raw socket, pop 16 + complete 16 pipelined",
                 partial(pc_raw_pipelined, 16), k(4_000), 0),
        ],
    }


def once(spec: Spec) -> Sample:
    """One timed run on a fresh server, after a short untimed warm-up run and a ``FLUSHALL``
    on it."""
    with running() as srv:
        warm = max(spec.n // 20, 20)
        if spec.prefill is not None:
            prefill(srv.port, warm + spec.prefill)
        spec.measure(srv, warm)
        flushall(srv.port)
        if spec.prefill is not None:
            prefill(srv.port, spec.n + spec.prefill)
        return spec.measure(srv, spec.n)


# -- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments(
        PROTOCOL, "Benchmark jobwire's qless clients and workers against the raw RESP round "
        "trip of the same EVALSHA (and qless-py 0.11.4) on a real redis-server: ops/s and "
        "client CPU µs per operation.", SCENARIOS)
    args = parser.parse_args(argv)
    scenarios, clients, runs, out = choose(args, PROTOCOL, SCENARIOS)
    signal.signal(signal.SIGTERM, terminate)

    wall = time.perf_counter()
    env = environment({"redis_server": redis_version()},
                      ["trio", "qless-py", "redis", "hiredis"])
    # jobwire speaks RESP itself and never uses hiredis; recorded because qless-py's redis-py
    # would.
    env["hiredis_importable"] = importlib.util.find_spec("hiredis") is not None
    redis = ".".join(env["redis_server"].split(".")[:2])

    def explain(spec: Spec, error: Exception) -> str:
        if isinstance(error, ModuleNotFoundError):
            return f"not installed ({error}; pip install qless-py==0.11.4)"
        return f"fails on Redis {redis} ({first_line(error)})"

    print(f"# qless benchmark{' (quick)' if args.quick else ''}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), Python {env['python']}, "
          f"redis-server {env['redis_server']}, hiredis installed: "
          f"{env['hiredis_importable']} (not used by jobwire)")
    print(f"median of {runs} interleaved timed runs per row; ops/s = operations (jobs) per second; "
          "each run on a fresh redis-server on 127.0.0.1\n")
    bench = Bench(runs, once, explain)
    order = bench.run(plan(args.quick), SCENARIOS, scenarios, clients)
    elapsed = time.perf_counter() - wall
    failures = {r.client: r.error for r in order if not r.ok}
    document = write_document(out, PROTOCOL, env, {
        "quick": args.quick, "runs": runs,
        "queue": QUEUE, "klass": KLASS, "data": DATA, "window": WINDOW,
        "scenarios": {s: SCENARIOS[s] for s in scenarios},
        "clients": sorted(clients) or "all",
        "wall_time_s": round(elapsed, 1),
    }, order, failures=failures)
    finish(PROTOCOL, document, order)
    for client, text in failures.items():
        print(f"{client}: {text}")
    print(f"\nwall time {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
