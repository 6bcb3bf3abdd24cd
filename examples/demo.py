"""The quick-start demo: bundled server in-process, a pipelined producer, an async worker pool.

    scripts/demo [--jobs N] [--concurrency N]

1. starts the bundled beanstalk server (beanstalk_client.server) on a free loopback port;
2. a blocking ``Client`` puts N jobs with ``put_many`` (pipelined, 256 in flight);
3. an ``AsyncClient`` drains them with ``concurrency`` tasks sharing ONE connection
   (reserve + delete, replies matched in FIFO order);
4. prints counts and rates, checks the server's own stats agree, exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio

from beanstalk_client import AsyncClient, Client, TimedOut
from beanstalk_client.server import run_server

TUBE = "demo"


async def drain(url: str, expected: int, concurrency: int) -> int:
    done = 0
    async with AsyncClient.from_url(url) as client:
        await client.watch(TUBE)
        await client.ignore("default")

        async def worker() -> None:
            nonlocal done
            while True:
                try:
                    job = await client.reserve(timeout=0)
                except TimedOut:
                    return
                await client.delete(job)
                done += 1

        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()

    with run_server() as server:
        print(f"bundled beanstalk server listening on {server.url}")
        with Client.from_url(server.url) as producer:
            producer.use(TUBE)
            started = time.perf_counter()
            ids = producer.put_many(b"job %d" % i for i in range(args.jobs))
            put_s = time.perf_counter() - started
            print(f"producer: put {len(ids)} jobs pipelined in {put_s:.3f} s "
                  f"({len(ids) / put_s:,.0f} jobs/s)")

            started = time.perf_counter()
            done = anyio.run(drain, server.url, len(ids), args.concurrency)
            work_s = time.perf_counter() - started
            print(f"worker pool: {args.concurrency} tasks on one connection reserved and "
                  f"deleted {done} jobs in {work_s:.3f} s ({done / work_s:,.0f} jobs/s)")

            stats = producer.stats_tube(TUBE)
            print(f"server: {stats['total-jobs']} jobs created, {stats['cmd-delete']} deleted, "
                  f"{stats['current-jobs-ready']} ready, {stats['current-jobs-reserved']} reserved")
    ok = done == len(ids) == args.jobs and stats["current-jobs-ready"] == 0
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
