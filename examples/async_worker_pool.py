"""An async beanstalk worker pool: up to 16 jobs at once on ONE connection (asyncio, or trio).

    python examples/async_worker_pool.py [URL]

URL defaults to $BEANSTALK_URL, else ``beanstalk://127.0.0.1:11300``. It "sends" the e-mails
``producer.py`` put on the ``emails`` tube: a handler that returns has its job deleted; one that
raises has it released with back-off, and buried after 5 tries (``RetryPolicy``).

It stops by itself once no job is ready or reserved (jobs delayed for later stay for the next
run), and at once on Ctrl-C or SIGTERM: either way it reserves nothing more, lets the handlers
that are running finish (up to ``shutdown_timeout`` seconds, then releases their jobs), and
waits for the server to answer every delete before it closes the connection: no job is lost or
done twice by a stop.
"""

from __future__ import annotations

import json
import os
import sys

import anyio

from beanstalk_client import AsyncClient, AsyncWorker, Job, NotFound

TUBE = "emails"


async def send_email(job: Job) -> None:
    """The handler: called for each reserved job, 16 at a time."""
    message = json.loads(job.body)
    await anyio.sleep(0.05)  # the SMTP conversation would go here
    print(f"job {job.id}: sent {message['subject']!r} to {message['to']}")


async def stop_when_idle(worker: AsyncWorker, client: AsyncClient) -> None:
    """Stop ``worker`` once the tube has no job ready or reserved (checked every 0.2 s)."""
    while True:
        try:
            stats = await client.stats_tube(TUBE)
        except NotFound:  # the tube does not exist: nothing was ever put on it
            break
        if stats["current-jobs-ready"] == 0 and stats["current-jobs-reserved"] == 0:
            break
        await anyio.sleep(0.2)
    worker.stop()


async def main(url: str) -> None:
    async with AsyncWorker(url, tubes=[TUBE], concurrency=16, shutdown_timeout=10) as worker, \
            AsyncClient(url) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_when_idle, worker, client)
            # Until worker.stop(), Ctrl-C or SIGTERM (signals are handled in the main thread).
            await worker.run(send_email)
            tg.cancel_scope.cancel()  # stopped by a signal: the watcher is not needed any more
        stats = worker.stats
        print(f"done: {stats.deleted} sent, {stats.released} released, {stats.buried} buried")
        try:
            tube = await client.stats_tube(TUBE)
        except NotFound:
            return
        print(f"tube {TUBE!r}: {tube['current-jobs-ready']} ready, "
              f"{tube['current-jobs-delayed']} delayed, {tube['current-jobs-buried']} buried")


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "BEANSTALK_URL", "beanstalk://127.0.0.1:11300")
    anyio.run(main, url)  # or anyio.run(main, url, backend="trio")
