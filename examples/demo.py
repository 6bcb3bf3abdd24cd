"""The quick-start demo: bundled server in-process, a pipelined producer, an async worker pool.

    scripts/demo [--jobs N] [--concurrency N] [--url URL]

1. starts the bundled beanstalk server (beanstalk_client.server) on a free loopback port
   (with ``--url``, uses that server instead);
2. a blocking ``Client`` puts N jobs with ``put_many`` (pipelined, 256 in flight);
3. an ``AsyncWorker`` pool drains them: ``concurrency`` handlers at once on ONE connection,
   with pipelined reserves; each handler that returns gets its job deleted;
4. prints counts and rates, checks the server's own stats agree, exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

import anyio

from beanstalk_client import Client, Job
from beanstalk_client.server import run_server
from beanstalk_client.worker import AsyncWorker, WorkerStats

TUBE = "demo"


async def drain(url: str, expected: int, concurrency: int) -> WorkerStats:
    """Run a worker pool until ``expected`` jobs were handled, then stop it gracefully."""
    handled = 0
    async with AsyncWorker(url, tubes=[TUBE], concurrency=concurrency) as worker:

        async def handle(job: Job) -> None:
            nonlocal handled
            await anyio.sleep(0)  # real work would go here
            handled += 1
            if handled == expected:
                worker.stop()  # stop reserving; in-flight handlers finish, acks are flushed

        with anyio.fail_after(120):
            await worker.run(handle, handle_signals=False)
    return worker.stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--url", help="a beanstalk server (default: start the bundled one)")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        url = args.url
        if url is None:
            url = stack.enter_context(run_server()).url
            print(f"bundled beanstalk server listening on {url}")
        with Client.from_url(url) as producer:
            producer.use(TUBE)
            started = time.perf_counter()
            ids = producer.put_many(b"job %d" % i for i in range(args.jobs))
            put_s = time.perf_counter() - started
            print(f"producer: put {len(ids)} jobs pipelined in {put_s:.3f} s "
                  f"({len(ids) / put_s:,.0f} jobs/s)")

            started = time.perf_counter()
            stats_w = anyio.run(drain, url, len(ids), args.concurrency)
            work_s = time.perf_counter() - started
            done = stats_w.deleted
            print(f"worker pool: {args.concurrency} handlers on one connection reserved "
                  f"{stats_w.reserved} and deleted {done} jobs in {work_s:.3f} s "
                  f"({done / work_s:,.0f} jobs/s); released {stats_w.released}, "
                  f"buried {stats_w.buried}, failed {stats_w.failed}")

            stats = producer.stats_tube(TUBE)
            print(f"server: {stats['total-jobs']} jobs created, {stats['cmd-delete']} deleted, "
                  f"{stats['current-jobs-ready']} ready, {stats['current-jobs-reserved']} reserved")
    ok = done == len(ids) == args.jobs and stats["current-jobs-ready"] == 0
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
