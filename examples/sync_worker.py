"""A blocking beanstalk worker: plain functions, run in 4 threads over ONE connection.

    python examples/sync_worker.py [URL]

URL defaults to $BEANSTALK_URL, else ``beanstalk://127.0.0.1:11300``. It takes the same jobs
as ``async_worker_pool.py`` (the ``emails`` tube that ``producer.py`` fills), with a handler
that blocks, as code calling a blocking library does.

A handler that returns has its job deleted. One that raises has its job released to be tried
again, here at once (``base_delay=0``; the default backs off 1, 2, 4 ... s), and a job that has
failed 3 times is buried: kept aside, out of the workers' way, for a person to look at (``jobwire
beanstalk kick`` or ``Client.kick`` puts it back). A body that is not JSON is such a job.

It stops by itself once no job is ready or reserved (``worker.stop()``, from a watcher thread;
jobs delayed for later stay for the next run), and on Ctrl-C or SIGTERM: either way the running
handlers finish and their jobs are deleted before it returns.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time

from beanstalk_client import Client, Job, NotFound, RetryPolicy, Worker

TUBE = "emails"
log = logging.getLogger("sync_worker")  # logging writes whole lines, whatever the threads


def send_email(job: Job) -> None:
    """The handler, in a worker thread: raise to fail the job."""
    message = json.loads(job.body)  # a body that is not JSON raises: the job fails
    time.sleep(0.05)  # a blocking SMTP call would go here
    log.info("job %d: sent %r to %s", job.id, message["subject"], message["to"])


def stop_when_idle(worker: Worker, url: str) -> None:
    """Stop ``worker`` once its tube has no job ready or reserved (checked every 0.2 s). A
    failed job is released with no delay, so it counts as ready until it is buried."""
    with Client(url, timeout=10) as client:
        while True:
            try:
                stats = client.stats_tube(TUBE)
            except NotFound:  # the tube does not exist: nothing was ever put on it
                break
            if stats["current-jobs-ready"] == 0 and stats["current-jobs-reserved"] == 0:
                break
            time.sleep(0.2)
    worker.stop()  # from any thread


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "BEANSTALK_URL", "beanstalk://127.0.0.1:11300")
    # Our lines, and the worker's warnings: a failed job is logged with its traceback
    # (logger "beanstalk_client.worker").
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)

    worker = Worker(url, tubes=[TUBE], concurrency=4,
                    retry=RetryPolicy(base_delay=0, bury_after=3))
    watcher = threading.Thread(target=stop_when_idle, args=(worker, url), daemon=True)
    watcher.start()
    worker.run(send_email)  # blocks until worker.stop(), Ctrl-C or SIGTERM

    stats = worker.stats
    print(f"done: {stats.deleted} sent, {stats.failed} failures, {stats.buried} buried")
    return 0


if __name__ == "__main__":
    sys.exit(main())
