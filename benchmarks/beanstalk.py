"""Throughput and client CPU of jobwire's beanstalk clients and workers against greenstalk,
aiostalk and a raw socket, side by side in one run against a real ``beanstalkd`` (and, for one
scenario, the bundled server).

    scripts/bench                       # the full run (about 3 minutes on 2 cores)
    scripts/bench beanstalk --quick     # a smoke run with small counts (results/quick/)
    scripts/bench beanstalk --scenarios put,worker_noop --clients jobwire-sync,greenstalk
    scripts/bench beanstalk --out /tmp/b.json   # default results/beanstalk.json

How it measures (``_harness``):

* Every timed run gets its own server process on a free 127.0.0.1 port, killed right after
  (and on any error), a fresh tube and a fresh connection, set up before the clock starts.
  A short untimed warm-up run of the same client on the same server comes first.
* Each client is timed ``--runs`` (5; 3 with ``--quick``) times, round-robin within a scenario
  (run 1 of every client, then run 2 ...), so drift on a shared machine hits every client
  alike; each figure is the median of the runs, with the lowest and highest (``report.py``'s
  statistic), and each run records the load average, the other processes' CPU share and the
  pinning, which say why an unstable figure moved.
* Besides wall time, each run records this process's CPU time (``time.process_time()``, all
  threads, syscalls included) and the server's (from ``/proc``), per operation: unlike wall
  time, client CPU per operation barely moves when other processes share the machine.
* Worker timings run from just before ``run()`` until the N-th job's handler has finished
  (recorded in the handler, which then calls ``worker.stop()``). The shutdown that follows is
  recorded as ``stop_tail_s`` and is not throughput. The tube holds N + 2 x concurrency jobs,
  so the pool never meets an empty tube (and a blocking reserve) before the N-th job.
* ``bundled_put`` compares the servers, not the clients: the raw pipelined socket (whose own
  cost is a few µs per put) against the bundled server and against beanstalkd, both measured
  in this scenario, round by round, so each round gives a ratio of two runs minutes apart at
  most; the target is the median of those ratios. Each run records the server's CPU per put
  and its run-queue wait (``server_wait_share``: a share of the wall time the server waited
  for a CPU; report.py flags the rows where it was shared).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from functools import partial

import anyio
from _harness import (
    HOST,
    READ_SIZE,
    Bench,
    Clock,
    RawSocket,
    Reuse,
    Sample,
    arguments,
    choose,
    environment,
    find_binary,
    finish,
    free_port,
    server_version,
    spawn,
    terminate,
    timed,
    write_document,
)
from _harness import Process as Server
from _harness import Spec as _Spec

from beanstalk_client import (
    NEED_DATA,
    AsyncClient,
    Client,
    Connection,
    Delete,
    Deleted,
    Inserted,
    Job,
    Put,
    Reply,
    Reserve,
    Reserved,
)
from beanstalk_client.worker import AsyncWorker, Worker

PROTOCOL = "beanstalk"
BODY = b"x" * 64  #: every job's body
PRI, DELAY, TTR = 65536, 0, 60  #: the same put arguments for every client
PUT_LINE = b"put %d %d %d %d\r\n%b\r\n" % (PRI, DELAY, TTR, len(BODY), BODY)
WINDOW = 256  #: commands in flight for the pipelined raw socket (jobwire's default window)
SLEEP_S = 0.010  #: the slow handler of the worker_sleep scenario


# -- servers ----------------------------------------------------------------------------------


def start_server(kind: str, poll: float = 0.02) -> Server:
    """Start ``beanstalkd`` or the bundled server on a free loopback port; wait until it
    accepts connections."""
    port = free_port()
    command = (
        [find_binary("beanstalkd")] if kind == "beanstalkd"
        else [sys.executable, "-m", "beanstalk_client.server"]
    )
    return spawn(kind, [*command, "-l", HOST, "-p", str(port), "-z", "65535"], port, poll=poll)


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


# -- the raw socket: the ceiling ----------------------------------------------------------------


class Raw(RawSocket):
    """A plain socket speaking just enough beanstalk to measure: commands are written in
    batches, replies parsed minimally (a line; a RESERVED body skipped by its length)."""



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
    import greenstalk  # the peers are imported when they run (a run of raw clients needs none)

    with greenstalk.Client((HOST, srv.port), encoding=None, use=tube) as c:

        def run() -> None:
            for _ in range(n):
                c.put(BODY, priority=PRI, delay=DELAY, ttr=TTR)

        return timed(srv, n, run)


async def _put_aiostalk(srv: Server, tube: str, n: int) -> Sample:
    import aiostalk  # type: ignore[import-untyped]

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


def _poller(sock: socket.socket) -> Callable[[int], list[tuple[int, int]]]:
    """``poll(0)`` on ``sock``, registered once: the stale-reply check jobwire's blocking
    transport makes before each send that follows an idle moment (issue 19)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return poller.poll


def put_raw_sequential(srv: Server, tube: str, n: int, check: bool = False) -> Sample:
    """One put at a time on a raw socket; with ``check``, the stale-reply check before each
    send (:func:`_poller`)."""
    raw = Raw(srv.port)
    try:
        raw.use(tube)
        poll = _poller(raw.sock)

        def run() -> None:
            for _ in range(n):
                if check and poll(0):
                    raise RuntimeError("bytes arrived while idle")
                raw.sock.sendall(PUT_LINE)
                raw.line()

        return timed(srv, n, run)
    finally:
        raw.close()


def _core_reply(conn: Connection, sock: socket.socket, limit: int = 65536) -> Reply:
    """Read until ``conn`` (the Sans-IO core, public API) gives the reply to its oldest
    command: the batch hook first, as jobwire's session asks it, then the line parser."""
    while True:
        data = sock.recv(limit)
        batch = conn.receive_batch(data)
        if batch is not None:
            return batch[0]
        conn.receive_data(data)
        event = conn.next_event()
        if event is not NEED_DATA:
            return event  # type: ignore[no-any-return]


def put_core_checked(srv: Server, tube: str, n: int) -> Sample:
    """What any client of jobwire's design must do per put, and nothing more: build and check
    the ``Put``, have the core encode it and record it, the stale-reply check, one send, one
    read, the core's parse. No session, no Pending, no transport, no API layer."""
    raw = Raw(srv.port)
    try:
        raw.use(tube)
        sock, poll, conn = raw.sock, _poller(raw.sock), Connection()

        def run() -> None:
            for _ in range(n):
                data = conn.send(Put(BODY, PRI, DELAY, TTR))
                if poll(0):
                    raise RuntimeError("bytes arrived while idle")
                sock.sendall(data)
                if type(_core_reply(conn, sock)) is not Inserted:
                    raise RuntimeError("put not inserted")

        return timed(srv, n, run)
    finally:
        raw.close()


class _Short(Exception):
    """A reply is not whole yet (raised in place of a blocking read)."""


class RawAsyncio(Raw):
    """The raw socket on an asyncio loop: registered with the loop once, its reader callback
    reads what arrives and wakes the waiting task. The floor of any asyncio client: what the
    loop itself costs per request/reply (one wait, two loop passes)."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.waiter: asyncio.Future[None] | None = None
        self.started = False

    def start(self) -> None:
        """From now on, the loop reads (set up blocking before)."""
        self.started = True
        self.sock.setblocking(False)
        asyncio.get_running_loop().add_reader(self.sock, self._readable)

    def _readable(self) -> None:
        try:
            data = self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fill(self) -> None:
        if not self.started:
            super()._fill()
            return
        raise _Short

    async def reply(self) -> list[int]:
        """Wait for one whole reply; the id of a RESERVED one."""
        while True:
            try:
                return self.replies(1)[0]
            except _Short:
                self.waiter = asyncio.get_running_loop().create_future()
                await self.waiter


async def _raw_asyncio(srv: Server, n: int, setup: Callable[[RawAsyncio], None],
                       step: Callable[[RawAsyncio], Awaitable[object]]) -> Sample:
    """``n`` times ``step`` on a RawAsyncio connection that ``setup`` prepared (blocking)."""
    raw = RawAsyncio(srv.port)
    try:
        setup(raw)
        raw.start()
        clock = Clock(srv)
        clock.start()
        for _ in range(n):
            await step(raw)
        clock.stop()
        return clock.sample(n)
    finally:
        asyncio.get_running_loop().remove_reader(raw.sock)
        raw.close()


async def _put_raw_asyncio_step(raw: RawAsyncio) -> None:
    raw.sock.send(PUT_LINE)
    await raw.reply()


def put_raw_asyncio(srv: Server, tube: str, n: int) -> Sample:
    return asyncio.run(_raw_asyncio(srv, n, lambda raw: raw.use(tube), _put_raw_asyncio_step))


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


def run_queue_wait(pid: int) -> float | None:
    """Seconds the threads of ``pid`` have spent runnable but waiting for a CPU (the second
    field of ``/proc/<pid>/task/*/schedstat``), or None (gone, or no schedstat)."""
    try:
        total = 0
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


def server_waits(measure: MeasureFn) -> MeasureFn:
    """``measure``, recording in its sample how long the server waited for a CPU while it
    had work (run-queue wait, from schedstat) as a share of the wall time: ``server_wait_share``.
    A server that shares its CPU with another process does not only run later: beanstalkd's
    CPU per put changes mode with it (replies per recv; measured 8.4-10 µs when it has its CPU
    to itself, about 5 when it waits), so such a run is flagged, not compared as it is."""

    def waiting(srv: Server, tube: str, n: int) -> Sample:
        before = run_queue_wait(srv.proc.pid)
        sample = measure(srv, tube, n)
        after = run_queue_wait(srv.proc.pid)
        if before is not None and after is not None and sample.seconds > 0:
            sample.extra["server_wait_share"] = round((after - before) / sample.seconds, 4)
        return sample

    return waiting


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
    import greenstalk

    with greenstalk.Client((HOST, srv.port), encoding=None, watch=tube) as c:

        def run() -> None:
            for _ in range(n):
                c.delete(c.reserve())

        return timed(srv, n, run)


async def _rd_aiostalk(srv: Server, tube: str, n: int) -> Sample:
    import aiostalk

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


def rd_raw_sequential(srv: Server, tube: str, n: int, check: bool = False) -> Sample:
    """:func:`put_raw_sequential` for reserve + delete."""
    raw = Raw(srv.port)
    try:
        raw.watch_only(tube)
        poll = _poller(raw.sock)

        def run() -> None:
            for _ in range(n):
                if check and poll(0):
                    raise RuntimeError("bytes arrived while idle")
                raw.sock.sendall(b"reserve\r\n")
                (job_id,), _ = raw.replies(1)
                if check and poll(0):
                    raise RuntimeError("bytes arrived while idle")
                raw.sock.sendall(b"delete %d\r\n" % job_id)
                raw.replies(1)

        return timed(srv, n, run)
    finally:
        raw.close()


def rd_core_checked(srv: Server, tube: str, n: int) -> Sample:
    """``put_core_checked`` for reserve + delete."""
    raw = Raw(srv.port)
    try:
        raw.watch_only(tube)
        sock, poll, conn = raw.sock, _poller(raw.sock), Connection()
        reserve = Reserve()

        def run() -> None:
            for _ in range(n):
                data = conn.send(reserve)
                if poll(0):
                    raise RuntimeError("bytes arrived while idle")
                sock.sendall(data)
                job = _core_reply(conn, sock)
                if type(job) is not Reserved:
                    raise RuntimeError(f"no job: {job!r}")
                data = conn.send(Delete(job.job_id))
                if poll(0):
                    raise RuntimeError("bytes arrived while idle")
                sock.sendall(data)
                if type(_core_reply(conn, sock)) is not Deleted:
                    raise RuntimeError("not deleted")

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


async def _rd_raw_asyncio_step(raw: RawAsyncio) -> None:
    raw.sock.send(b"reserve\r\n")
    (job_id,) = await raw.reply()
    raw.sock.send(b"delete %d\r\n" % job_id)
    await raw.reply()


def rd_raw_asyncio(srv: Server, tube: str, n: int) -> Sample:
    return asyncio.run(_raw_asyncio(srv, n, lambda raw: raw.watch_only(tube),
                                    _rd_raw_asyncio_step))


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


def on_a_busy_machine(measure: MeasureFn) -> MeasureFn:
    """``measure`` while another process spins on this one's core (it inherits the pinning):
    the load state in which the event loop's wake-ups come late, measured beside the idle
    one in the same run."""

    def busy(srv: Server, tube: str, n: int) -> Sample:
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            return measure(srv, tube, n)
        finally:
            hog.kill()
            hog.wait()

    return busy


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
Spec = _Spec[MeasureFn]

SCENARIOS: dict[str, str] = {
    "put": "sequential put: one put, wait for INSERTED, next put",
    "put_pipelined": f"pipelined put: put_many ({WINDOW} in flight); peers that cannot "
                     "pipeline: their put loop",
    "reserve_delete": "reserve + delete, one command at a time (tube pre-filled)",
    "worker_noop": "worker pool, no-op handler, ONE connection (tube pre-filled)",
    "worker_noop_busy": "worker_noop, and its raw baseline, while another process spins on "
                        "the benchmark's core (a busy machine)",
    "worker_sleep": f"worker pool, {SLEEP_S * 1000:g} ms sleep handler, ONE connection",
    "bundled_put": "pipelined put against the bundled server vs beanstalkd",
}


def plan(quick: bool) -> dict[str, list[Spec | Reuse[MeasureFn]]]:
    """Counts aim at about one second per timed run on a small 2-core VM; ``quick`` takes a
    fifth of that."""

    def k(full: int, minimum: int = 200) -> int:
        return max(full // 5, minimum) if quick else full

    put_gs = Spec("greenstalk", "greenstalk (put loop)", put_greenstalk, k(20_000),
                  baseline=("put", "raw-seq"))
    put_aio = Spec("aiostalk", "aiostalk (put loop)", put_aiostalk, k(12_000),
                   baseline=("put", "raw-seq"))
    rd_gs = Spec("greenstalk", "greenstalk reserve+delete loop", rd_greenstalk, k(10_000), 0,
                 baseline=("reserve_delete", "raw-seq"))
    rd_pipe = Spec("raw-pipe", "raw socket (pipelined)", rd_raw_pipelined, k(40_000), 0)
    pm_raw = Spec("raw-pipe", "raw socket (pipelined)", put_raw_pipelined, k(60_000))
    pm_sync = Spec("jobwire-sync", "jobwire Client.put_many", put_many_jobwire_sync, k(60_000),
                   baseline=("put_pipelined", "raw-pipe"))
    put_sync = ("put", "jobwire-sync")
    rd_sync = ("reserve_delete", "jobwire-sync")
    worker_raw = ("worker_noop", "raw-pipe")
    return {
        "put": [
            Spec("jobwire-sync", "jobwire Client", put_jobwire_sync, k(15_000),
                 baseline=("put", "greenstalk")),
            Spec("jobwire-asyncio", "jobwire AsyncClient (asyncio)",
                 partial(put_jobwire_async, "asyncio"), k(6_000), baseline=put_sync),
            Spec("jobwire-trio", "jobwire AsyncClient (trio)",
                 partial(put_jobwire_async, "trio"), k(6_000), baseline=put_sync),
            put_gs,
            put_aio,
            Spec("raw-seq", "raw socket (sequential)", put_raw_sequential, k(25_000)),
            Spec("raw-seq-check", "raw socket + a poll before each send (the stale-reply "
                 "check)", partial(put_raw_sequential, check=True), k(25_000),
                 baseline=("put", "raw-seq")),
            Spec("core-check", "jobwire's Sans-IO core alone on that socket (Put, encode, "
                 "check, send, read, parse)", put_core_checked, k(20_000),
                 baseline=("put", "greenstalk")),
            Spec("raw-asyncio", "raw socket on asyncio (the loop's floor)", put_raw_asyncio,
                 k(15_000), baseline=("put", "raw-seq")),
        ],
        "put_pipelined": [
            pm_sync,
            Spec("jobwire-asyncio", "jobwire AsyncClient.put_many (asyncio)",
                 partial(put_many_jobwire_async, "asyncio"), k(30_000),
                 baseline=("put_pipelined", "raw-pipe")),
            Spec("jobwire-trio", "jobwire AsyncClient.put_many (trio)",
                 partial(put_many_jobwire_async, "trio"), k(30_000),
                 baseline=("put_pipelined", "raw-pipe")),
            Reuse("greenstalk", "greenstalk (put loop, cannot pipeline)", ("put", "greenstalk"),
                  put_gs),
            Reuse("aiostalk", "aiostalk (put loop, cannot pipeline)", ("put", "aiostalk"),
                  put_aio),
            pm_raw,
        ],
        "reserve_delete": [
            Spec("jobwire-sync", "jobwire Client", rd_jobwire_sync, k(6_000), 0,
                 baseline=("reserve_delete", "greenstalk")),
            Spec("jobwire-asyncio", "jobwire AsyncClient (asyncio)",
                 partial(rd_jobwire_async, "asyncio"), k(3_000), 0, baseline=rd_sync),
            Spec("jobwire-trio", "jobwire AsyncClient (trio)",
                 partial(rd_jobwire_async, "trio"), k(3_000), 0, baseline=rd_sync),
            rd_gs,
            Spec("aiostalk", "aiostalk", rd_aiostalk, k(6_000), 0,
                 baseline=("reserve_delete", "raw-seq")),
            Spec("raw-seq", "raw socket (sequential)", rd_raw_sequential, k(12_000), 0),
            Spec("raw-seq-check", "raw socket + a poll before each send (the stale-reply "
                 "check)", partial(rd_raw_sequential, check=True), k(12_000), 0,
                 baseline=("reserve_delete", "raw-seq")),
            Spec("core-check", "jobwire's Sans-IO core alone on that socket (commands, encode, "
                 "check, send, read, parse)", rd_core_checked, k(10_000), 0,
                 baseline=("reserve_delete", "greenstalk")),
            Spec("raw-asyncio", "raw socket on asyncio (the loop's floor)", rd_raw_asyncio,
                 k(8_000), 0, baseline=("reserve_delete", "raw-seq")),
            rd_pipe,
        ],
        "worker_noop": [
            Spec("worker-asyncio", "jobwire AsyncWorker c=64 (asyncio)",
                 partial(async_worker, "asyncio", 64, 0.0), k(15_000), 128,
                 baseline=worker_raw),
            Spec("worker-trio", "jobwire AsyncWorker c=64 (trio)",
                 partial(async_worker, "trio", 64, 0.0), k(12_000), 128, baseline=worker_raw),
            Spec("worker-sync", "jobwire Worker c=64 (threads)",
                 partial(sync_worker, 64), k(4_000), 128, baseline=worker_raw),
            Reuse("greenstalk", "greenstalk reserve+delete loop",
                  ("reserve_delete", "greenstalk"), rd_gs),
            Reuse("raw-pipe", "raw socket reserve+delete (pipelined)",
                  ("reserve_delete", "raw-pipe"), rd_pipe),
        ],
        "worker_noop_busy": [
            Spec("worker-asyncio", "jobwire AsyncWorker c=64 (asyncio), one core busy",
                 on_a_busy_machine(partial(async_worker, "asyncio", 64, 0.0)), k(15_000), 128,
                 baseline=("worker_noop_busy", "raw-pipe")),
            Spec("raw-pipe", "raw socket reserve+delete (pipelined), one core busy",
                 on_a_busy_machine(rd_raw_pipelined), k(40_000), 0),
        ],
        "worker_sleep": [
            Spec("worker-asyncio-c1", "jobwire AsyncWorker c=1 (asyncio)",
                 partial(async_worker, "asyncio", 1, SLEEP_S), k(100, 20), 2),
            Spec("worker-asyncio-c16", "jobwire AsyncWorker c=16 (asyncio)",
                 partial(async_worker, "asyncio", 16, SLEEP_S), k(1_200, 160), 32,
                 baseline=("worker_sleep", "worker-asyncio-c1")),
            Spec("worker-asyncio-c64", "jobwire AsyncWorker c=64 (asyncio)",
                 partial(async_worker, "asyncio", 64, SLEEP_S), k(5_000, 640), 128,
                 baseline=("worker_sleep", "worker-asyncio-c1")),
        ],
        # Both servers measured here, round by round (bundled, beanstalkd, bundled, ...):
        # the target is the median of the per-round ratios (report.py, Part.paired).
        "bundled_put": [
            Spec("raw-pipe-bundled", "raw socket (pipelined) -> bundled server",
                 server_waits(put_raw_pipelined), k(60_000), server="bundled",
                 baseline=("bundled_put", "raw-pipe")),
            Spec("raw-pipe", "raw socket (pipelined) -> beanstalkd",
                 server_waits(put_raw_pipelined), k(60_000), server="beanstalkd"),
            Spec("jobwire-sync-bundled", "jobwire Client.put_many -> bundled server",
                 server_waits(put_many_jobwire_sync), k(60_000), server="bundled",
                 baseline=("bundled_put", "jobwire-sync")),
            Spec("jobwire-sync", "jobwire Client.put_many -> beanstalkd",
                 server_waits(put_many_jobwire_sync), k(60_000), server="beanstalkd"),
        ],
    }


def once(spec: Spec) -> Sample:
    """One timed run on a fresh server, after a short untimed warm-up run on it."""
    with running(spec.server or "beanstalkd") as srv:

        def run(n: int) -> Sample:
            tube = f"bench-{uuid.uuid4().hex[:12]}"
            if spec.prefill is not None:
                prefill(srv.port, tube, n + spec.prefill)
            return spec.measure(srv, tube, n)

        run(max(spec.n // 20, 20))  # warm-up
        return run(spec.n)


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments(PROTOCOL, "Benchmark jobwire's beanstalk clients and workers against "
                       "greenstalk, aiostalk and a raw socket on a real beanstalkd.", SCENARIOS)
    args = parser.parse_args(argv)
    scenarios, clients, runs, out = choose(args, PROTOCOL, SCENARIOS)
    signal.signal(signal.SIGTERM, terminate)

    wall = time.perf_counter()
    env = environment({"beanstalkd": server_version([find_binary("beanstalkd"), "-v"])},
                      ["greenstalk", "aiostalk", "trio"])
    print(f"# beanstalk benchmark{' (quick)' if args.quick else ''}")
    print(f"{env['cpu_count']} CPUs ({env['cpu_model']}), Python {env['python']}, "
          f"{env['beanstalkd']}, {env['platform']}")
    print(f"median of {runs} interleaved timed runs per row; ops/s = operations (jobs) per second; "
          "each run on a fresh server on 127.0.0.1\n")
    bench = Bench(runs, once)
    order = bench.run(plan(args.quick), SCENARIOS, scenarios, clients)

    startup = {kind: start_to_listen(kind, 3 if args.quick else 9)
               for kind in ("beanstalkd", "bundled")}
    print(f"## start to listen (median of spawns): beanstalkd "
          f"{startup['beanstalkd'][0] * 1e3:.1f} ms, bundled {startup['bundled'][0] * 1e3:.1f} "
          f"ms; to the first reply: beanstalkd {startup['beanstalkd'][1] * 1e3:.1f} ms, "
          f"bundled {startup['bundled'][1] * 1e3:.1f} ms")
    elapsed = time.perf_counter() - wall
    document = write_document(out, PROTOCOL, env, {
        "quick": args.quick, "runs": runs,
        "body_bytes": len(BODY), "put_args": {"priority": PRI, "delay": DELAY, "ttr": TTR},
        "window": WINDOW,
        "scenarios": {s: SCENARIOS[s] for s in scenarios},
        "clients": sorted(clients) or "all",
        "wall_time_s": round(elapsed, 1),
    }, order, startup={
        kind: {"listening_s": round(listen, 4), "first_reply_s": round(reply, 4)}
        for kind, (listen, reply) in startup.items()
    })
    finish(PROTOCOL, document, order)
    print(f"\nwall time {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
