"""Gearman fan-out with progress: a client runs N foreground jobs at once and shows the
WORK_STATUS each one's worker sends as it goes; a worker (in this program too) does them.

    python examples/gearman_fanout.py [SERVERS] [--jobs N]

SERVERS defaults to $GEARMAN_SERVERS, else ``127.0.0.1:4730``: gearmand, or the bundled server
(``python -m gearman_client.server``). Several servers: ``"h1:4730,h2:4730"``.

The worker registers the function ``resize`` and takes up to N jobs at once; each job works in
4 steps and sends ``send_status(step, 4)`` after each. The server passes every WORK_STATUS on to
the client waiting for that job, and keeps the last one for GET_STATUS. The client submits the N
jobs concurrently (``AsyncClient.start``, one task each, all on one connection), prints each
job's progress as it arrives, then its result. When every result is in, the worker is stopped
(``worker.stop()``: it grabs nothing more and ``run()`` returns) and the program exits.
"""

from __future__ import annotations

import argparse
import os

import anyio

from gearman_client import AsyncClient, AsyncJob, AsyncWorker, WorkStatus

FUNCTION = "resize"
STEPS = 4


async def resize(job: AsyncJob) -> bytes:
    """The worker's handler: its return value is the job's result (WORK_COMPLETE)."""
    for step in range(1, STEPS + 1):
        await anyio.sleep(0.05)  # one step of the real work
        await job.send_status(step, STEPS)  # WORK_STATUS: "step of STEPS done"
    return job.data + b" (resized)"


async def submit(client: AsyncClient, image: str) -> None:
    """Run one job, printing its progress, then its result."""
    job = await client.start(FUNCTION, image.encode())  # once the server created the job
    print(f"{image}: job {job.handle.decode()} created", flush=True)
    async for update in job:  # WORK_STATUS, WORK_DATA and WORK_WARNING, until the job ends
        if isinstance(update, WorkStatus):
            print(f"{image}: {update.numerator}/{update.denominator}", flush=True)
    result = await job.result()  # raises JobFailed if the handler raised
    print(f"{image}: done: {result.decode()}", flush=True)


async def main(servers: str, count: int) -> None:
    worker = AsyncWorker(servers, concurrency=count)  # up to `count` jobs at once
    worker.register(FUNCTION, resize)
    client = AsyncClient(servers, timeout=30)  # many jobs, one connection
    async with client, anyio.create_task_group() as tg:
        tg.start_soon(worker.run)  # the worker, as a task of this program
        async with anyio.create_task_group() as jobs:  # the fan-out: one task per job
            for n in range(count):
                jobs.start_soon(submit, client, f"photo-{n}.jpg")
        worker.stop()  # every result is in: run() returns, and so does the task group
    print(f"{count} jobs done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("servers", nargs="?",
                        default=os.environ.get("GEARMAN_SERVERS", "127.0.0.1:4730"))
    parser.add_argument("--jobs", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.servers, args.jobs)
